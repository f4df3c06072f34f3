"""Memory.add takes what chat apps hand over: a string, role/content dicts, framework messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from llama_index.core.llms import ChatMessage, MessageRole

from membrain import InputError, Memory, Message, Role, Scope
from membrain.api.inputs import as_messages
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant")


def test_a_string_is_one_user_message_said_now() -> None:
    (message,) = as_messages("I adopted a cat named Miso.", user_name="Sara")
    assert (message.speaker, message.role, message.text) == ("Sara", Role.USER, message.text)
    assert message.text == "I adopted a cat named Miso."


def test_openai_style_dicts_take_speakers_from_the_names_given() -> None:
    found = as_messages(
        [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "I moved to Porto."},
            {"role": "assistant", "content": [{"type": "text", "text": "Nice!"}, {"type": "x"}]},
            {"role": "user", "name": "Nate", "content": "Me too.", "id": "m4"},
        ],
        user_name="Sara",
        assistant_name="Ada",
    )
    assert [(m.speaker, m.role, m.text) for m in found] == [
        ("System", Role.SYSTEM, "You are helpful."),
        ("Sara", Role.USER, "I moved to Porto."),
        ("Ada", Role.ASSISTANT, "Nice!"),
        ("Nate", Role.USER, "Me too."),
    ]
    assert found[3].source_id == "m4"
    stamps = [m.timestamp for m in found]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4  # the order they were given


def test_langchain_and_llamaindex_messages() -> None:
    found = as_messages(
        [
            SystemMessage("Be brief."),
            HumanMessage("I live in Lisbon.", id="h1"),
            AIMessage("Noted."),
            ChatMessage(role=MessageRole.USER, content="My cat is Miso."),
            ChatMessage(role=MessageRole.ASSISTANT, content="Lovely name."),
        ],
        user_name="Sara",
        assistant_name="Ada",
    )
    assert [(m.speaker, m.role, m.text) for m in found] == [
        ("System", Role.SYSTEM, "Be brief."),
        ("Sara", Role.USER, "I live in Lisbon."),
        ("Ada", Role.ASSISTANT, "Noted."),
        ("Sara", Role.USER, "My cat is Miso."),
        ("Ada", Role.ASSISTANT, "Lovely name."),
    ]
    assert found[1].source_id == "h1"


def test_one_message_alone_is_one_message() -> None:
    alone = Message(speaker="Sara", text="Hi.", timestamp="2024-03-15T14:01:00Z")
    assert as_messages(alone) == [alone]
    (mapping,) = as_messages({"role": "user", "content": "Hi."}, user_name="Sara")
    assert mapping.speaker == "Sara"


def test_bad_input_is_refused_with_a_typed_error() -> None:
    with pytest.raises(InputError, match="a message must be"):
        as_messages([42])
    with pytest.raises(InputError, match="content must be"):
        as_messages([{"role": "user", "content": 3}])
    with pytest.raises(InputError, match="invalid message"):
        as_messages([{"speaker": "Sara", "text": "no time"}])  # explicit evidence needs a time


def test_memory_add_accepts_them_and_facts_use_the_user_name(tmp_path: Path) -> None:
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        mem.add("I adopted a cat named Miso.", scope=SCOPE, user_name="Sara")
        mem.add(
            [{"role": "user", "content": "I moved to Porto last year."}],
            scope=SCOPE,
            user_name="Sara",
        )
        texts = [f.text for f in mem.facts(scope=SCOPE)]
        assert any(t.startswith("[Sara]") and "Miso" in t for t in texts)
        assert any("[Sara]" in t and "Porto" in t for t in texts)
        assert not any("[User]" in t for t in texts)
        assert mem.search("What is the cat called?", scope=SCOPE, mode="fast")
