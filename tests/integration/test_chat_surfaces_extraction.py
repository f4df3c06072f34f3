"""Offline extraction of a user-assistant chat as the chat surfaces add it.

A chat added one message at a time (LangChain's chat history, the LangGraph writer node, HTTP
adds) must give the facts the same chat added whole gives: what the user states, never the
assistant's questions and reactions; a later statement supersedes an earlier one of the same
add; fact texts without filler, with their subjects.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from typer.testing import CliRunner

import membrain.cli as cli
from langchain_membrain import MembrainChatMessageHistory
from langchain_membrain.langgraph import make_writer_node
from membrain import Actor, ActorKind, Memory, Message, Role, Scope
from membrain.api.models import Fact, FactStatus
from membrain.background import BackgroundWriter
from membrain.binding import ScopeBinding
from membrain.server import create_app
from membrain.temporal import plain_text
from membrain.testing import HashingEncoder

CHAT: tuple[tuple[str, str], ...] = (
    ("user", "Hi! I'm Priya. I live in Manchester and I work at the BBC as a producer."),
    ("assistant", "Nice to meet you, Priya! Manchester is great!"),
    ("user", "I have a dog named Mochi, a shiba inu."),
    ("assistant", "Lovely! How old is Mochi? Do you have any other pets?"),
    ("user", "About three years. No other pets, but my partner Joao wants a cat."),
    ("assistant", "That sounds fun. Have you two been together long?"),
    ("user", "We met in Lisbon five years ago."),
    ("assistant", "How lovely. Do you travel much?"),
    ("user", "Not yet, maybe next summer."),
    ("assistant", "Let me know if you want tips!"),
    ("user", "Quick update: I moved to London last week."),
    ("assistant", "Wow, congrats on the move! How is it going?"),
    ("user", "Hey, Priya is back. Big changes: I work at Spotify now as a podcast producer."),
    ("assistant", "That's exciting! Do you like the new job?"),
    ("user", "Honestly I love it. btw Mochi loves the parks here."),
    ("assistant", "Mochi must be thrilled."),
)
DOG = "[Priya] has a dog named [Mochi], a shiba inu."
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
FILLER = ("Quick update", "Big changes", "btw", "Honestly", "About three years", "Hey", "back")
_counter = itertools.count()


def _scope() -> Scope:
    return Scope(dataset=f"priya{next(_counter)}", task="assistant", session="thread-1")


def _lc(role: str, text: str) -> BaseMessage:
    return HumanMessage(content=text) if role == "user" else AIMessage(content=text)


def _messages() -> list[Message]:
    return [
        Message(
            speaker="Priya" if role == "user" else "Assistant",
            role=Role.USER if role == "user" else Role.ASSISTANT,
            text=text,
            timestamp=START + timedelta(minutes=i),
        )
        for i, (role, text) in enumerate(CHAT)
    ]


def _by_history(memory: Memory, scope: Scope) -> None:
    history = MembrainChatMessageHistory(memory=memory, scope=scope, user_name="Priya")
    for role, text in CHAT:
        if role == "user":
            history.add_user_message(text)
        else:
            history.add_ai_message(text)


def _by_writer_node(memory: Memory, scope: Scope) -> None:
    writer = BackgroundWriter(memory, idle_seconds=3600.0)  # extracts when flushed
    node = make_writer_node(
        memory=memory, scope_template=ScopeBinding.fixed(scope), writer=writer, user_name="Priya"
    )
    state: list[BaseMessage] = []
    try:
        # A graph that writes before the model and after it: each run writes one message, and
        # the writer extracts it before the next (the model's time, the user's pause).
        for role, text in CHAT:
            state.append(_lc(role, text))
            node({"messages": list(state)}, {"configurable": {}})
            assert writer.flush(scope, timeout=60.0)
    finally:
        writer.shutdown()


def _by_http(memory: Memory, scope: Scope) -> None:
    app = create_app(memory, keys=None)
    with TestClient(app, base_url="http://localhost") as client:
        for i, (role, text) in enumerate(CHAT):
            message = {
                "speaker": "Priya" if role == "user" else "Assistant",
                "role": role,
                "text": text,
                "timestamp": (START + timedelta(minutes=i)).isoformat(),
            }
            body = {
                "dataset": scope.dataset,
                "task": scope.task,
                "session": scope.session,
                "messages": [message],
            }
            response = client.post("/api/memory/add", json=body)
            assert response.status_code == 200, response.text


def _by_whole(memory: Memory, scope: Scope) -> None:
    memory.add(_messages(), scope=scope)


SURFACES = {
    "chat_history": _by_history,
    "writer_node": _by_writer_node,
    "http": _by_http,
    "whole": _by_whole,
}


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """A memory with the packaged encoder: what a user's search ranks with."""
    with Memory(path=tmp_path_factory.mktemp("chat") / "store") as mem:
        yield mem


@pytest.fixture(scope="module")
def hashing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with Memory(path=tmp_path_factory.mktemp("chat") / "store", dense=HashingEncoder(64)) as mem:
        yield mem


def _facts(memory: Memory, scope: Scope) -> list[Fact]:
    return memory.facts(scope=scope, include_inactive=True)


def _assistant_ids(memory: Memory, scope: Scope) -> set[str]:
    return {m.id for m in memory.messages(scope=scope) if m.message.role is Role.ASSISTANT}


@pytest.mark.parametrize("surface", list(SURFACES))
def test_an_assistants_message_added_alone_is_no_fact(hashing: Memory, surface: str) -> None:
    scope = _scope()
    SURFACES[surface](hashing, scope)
    facts = _facts(hashing, scope)
    assistant = _assistant_ids(hashing, scope)
    assert not [f.text for f in facts if set(f.sources) & assistant]
    assert not [f.text for f in facts if "?" in f.text]
    assert DOG in [f.text for f in facts]
    stored = hashing.messages(scope=scope)
    assert all(m.discarded for m in stored if m.id in assistant)  # evidence, with the reasons


QUESTIONS = (
    "Does Priya have other pets?",
    "How old is Mochi?",
    "Does Priya travel?",
    "What does Priya think of Manchester?",
    "Does Priya like the new job?",
)


@pytest.mark.parametrize("surface", ["chat_history", "writer_node"])
def test_the_users_statement_is_the_top_hit(packaged: Memory, surface: str) -> None:
    scope = _scope()
    SURFACES[surface](packaged, scope)
    hits = packaged.search("What is the name of Priya's dog?", scope=scope, k=3).hits
    assert hits[0].fact.text == DOG, [h.fact.text for h in hits]
    top = packaged.search("Where does Priya live?", scope=scope, k=3).hits[0].fact
    assert "London" in top.text and top.status is FactStatus.ACTIVE
    assistant = _assistant_ids(packaged, scope)
    for question in QUESTIONS:  # no chatter in the top 3
        hits = packaged.search(question, scope=scope, k=3).hits
        assert not [h.fact.text for h in hits if set(h.fact.sources) & assistant], question


def test_a_users_message_added_alone_after_an_assistants_is_read_as_a_reply(
    hashing: Memory,
) -> None:
    scope = _scope()
    said = START
    for speaker, role, text in (
        ("Amadeus", Role.ASSISTANT, "Hello Priya, how can I help today?"),
        ("Priya", Role.USER, "Could you remind me to call the vet?"),
        ("Priya", Role.USER, "Lol only if they behave."),
    ):
        said += timedelta(minutes=1)
        hashing.add([Message(speaker=speaker, role=role, text=text, timestamp=said)], scope=scope)
    assert _facts(hashing, scope) == []


def test_an_agents_note_in_the_chats_session_stays_a_fact(hashing: Memory) -> None:
    scope = _scope()
    _by_whole(hashing, scope)
    note = Message(
        speaker="Assistant",
        role=Role.ASSISTANT,
        text="Priya's favourite colour is teal.",
        timestamp=START + timedelta(hours=1),
    )
    result = hashing.add([note], scope=scope, by=Actor(kind=ActorKind.AGENT, name="Assistant"))
    assert [f.text for f in hashing.facts(scope=scope, ids=list(result.fact_ids))] == [
        "[Priya]'s favourite colour is teal."
    ]


def _status(facts: list[Fact], *words: str) -> set[FactStatus]:
    return {f.status for f in facts if all(w in f.text for w in words)}


@pytest.mark.parametrize("surface", ["whole", "chat_history"])
def test_a_later_message_supersedes_an_earlier_one_of_the_same_add(
    hashing: Memory, surface: str
) -> None:
    scope = _scope()
    SURFACES[surface](hashing, scope)
    facts = _facts(hashing, scope)
    assert _status(facts, "Manchester") == {FactStatus.SUPERSEDED}
    assert _status(facts, "BBC") == {FactStatus.SUPERSEDED}
    assert _status(facts, "London") == {FactStatus.ACTIVE}
    assert _status(facts, "Spotify") == {FactStatus.ACTIVE}
    events = hashing.audit(scope=scope, actions=["superseded"])
    assert len(events) == 2


def test_membrain_ingest_supersedes_within_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    data = tmp_path / "chat.json"
    rows = [
        m.model_dump(mode="json", include={"speaker", "role", "text", "timestamp"})
        for m in _messages()
    ]
    data.write_text(json.dumps(rows), encoding="utf-8")
    store = tmp_path / "store"
    result = CliRunner().invoke(
        cli.app, ["ingest", str(data), "-d", "priya", "-t", "chat", "--path", str(store)]
    )
    assert result.exit_code == 0, result.output
    with Memory(path=store, dense=HashingEncoder(dim=64)) as mem:
        facts = _facts(mem, Scope(dataset="priya", task="chat"))
    assert _status(facts, "Manchester") == _status(facts, "BBC") == {FactStatus.SUPERSEDED}
    assert _status(facts, "London") == _status(facts, "Spotify") == {FactStatus.ACTIVE}


@pytest.mark.parametrize("surface", ["whole", "chat_history"])
def test_fact_texts_keep_their_subject_and_drop_filler(hashing: Memory, surface: str) -> None:
    scope = _scope()
    SURFACES[surface](hashing, scope)
    texts = [f.text for f in _facts(hashing, scope)]
    plain = [plain_text(t) for t in texts]
    assert not [t for t in plain if any(w in t for w in FILLER)], plain
    assert not [t for t in plain if t.startswith(("Not yet", "Maybe", "About"))], plain
    assert "[Priya] moved to [London]" in " ".join(texts)
    assert "[Priya] works at [Spotify] now as a podcast producer." in texts
    assert any(t.startswith("[Priya] and [Joao] met in [Lisbon]") for t in texts), texts
    assert "[Priya] loves it. [Mochi] loves the parks here." in texts
    reasons = {r.split(":")[0] for m in hashing.messages(scope=scope) for r in m.discarded}
    assert {"filler words", "answer fragment without a subject"} <= reasons
