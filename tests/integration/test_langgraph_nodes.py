"""LangGraph nodes: scope templates, the background writer node, recall, the example graph."""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatResult
from langchain_core.runnables import RunnableConfig

from langchain_membrain.langgraph import (
    ScopeTemplate,
    make_recall_node,
    make_writer_node,
)
from langchain_membrain.langgraph.example import build_example_graph
from membrain import ConfigurationError, Memory, MessageStatus, Role, Scope, ScopeError
from membrain.api.requests import CONTEXT_MIN_RELEVANCE
from membrain.background import BackgroundWriter
from membrain.binding import DEFAULT_USER_NAME, ScopeBinding, scope_part
from membrain.testing import HashingEncoder, ScriptedChatModel

CONFIG: RunnableConfig = {"configurable": {"user_id": "Sara", "thread_id": "t1"}}
SCOPE = Scope(dataset="Sara", task="assistant", session="t1")
ENTITIES = json.dumps(
    {"entities": ["Sara", "Miso"], "descriptions": {"Sara": "A person.", "Miso": "Sara's cat."}}
)
FACTS = json.dumps(
    {
        "facts": [
            {"text": "[Sara] adopted a grey cat named [Miso].", "fact_ts": "2100-01-01T00:00:00Z"}
        ]
    }
)


HANG_GUARD = 30.0
"""Seconds a test waits for something that must happen before it calls the code broken."""

_counter = itertools.count()


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("nodes") / "store"
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        yield mem


@pytest.fixture
def memory(shared_memory: Memory) -> Memory:
    """One store for the module (opening one costs a second); each test has its own agent."""
    return shared_memory


@pytest.fixture
def config() -> RunnableConfig:
    return {
        "configurable": {
            "user_id": "Sara",
            "user_name": "Sara",
            "thread_id": "t1",
            "assistant_id": f"agent-{next(_counter)}",
        }
    }


@pytest.fixture
def scope(config: RunnableConfig) -> Scope:
    return ScopeTemplate().resolve(config)


@pytest.fixture
def writer(memory: Memory) -> Iterator[BackgroundWriter]:
    with BackgroundWriter(memory, idle_seconds=60) as w:
        yield w


# -- scope template ----------------------------------------------------------------------------
def test_scope_template_defaults() -> None:
    template = ScopeTemplate()
    assert template.resolve(CONFIG) == SCOPE
    # no thread: a scope over every session of the user
    assert template.resolve({"configurable": {"user_id": "Sara"}}) == Scope(
        dataset="Sara", task="assistant"
    )
    assert template.resolve(
        {"configurable": {"user_id": "Sara", "assistant_id": "tutor", "thread_id": 7}}
    ) == Scope(dataset="Sara", task="tutor", session="7")


def test_scope_template_missing_user_is_a_clear_error() -> None:
    with pytest.raises(ScopeError, match=r"has no 'user_id'.*configurable"):
        ScopeTemplate().resolve({"configurable": {"thread_id": "t1"}})
    with pytest.raises(ScopeError, match="user_id"):
        ScopeTemplate().resolve(None)


def test_scope_template_custom_parts_and_defaults() -> None:
    template = ScopeTemplate(
        dataset="{org}:{user_id}", task="tutor", session=None, defaults={"org": "acme"}
    )
    assert template.resolve(CONFIG) == Scope(dataset="acme:Sara", task="tutor")
    # any user id: encoded for storage when it is not a valid scope part
    assert ScopeTemplate().resolve({"configurable": {"user_id": "a/b"}}).dataset == scope_part(
        "a/b"
    )


def test_scope_template_is_the_core_binding() -> None:
    template = ScopeTemplate(task="tutor")
    assert isinstance(template, ScopeBinding)
    # a whole config, or its configurable values: the same scope
    assert template.resolve(CONFIG) == template.resolve(CONFIG["configurable"])
    assert template.resolve(CONFIG) == Scope(dataset="Sara", task="tutor", session="t1")


def test_nodes_take_memory_by_keyword_and_parse_the_mode(memory: Memory) -> None:
    with pytest.raises(TypeError):
        make_writer_node(memory)  # type: ignore[misc]
    with pytest.raises(TypeError):
        make_recall_node(memory)  # type: ignore[misc]
    with pytest.raises(TypeError):
        build_example_graph(memory, GenericFakeChatModel(messages=iter([])))  # type: ignore[misc]
    with pytest.raises(ConfigurationError, match="unknown retrieval mode"):
        make_recall_node(memory=memory, mode="psychic")


def test_nodes_accept_any_scope_binding(memory: Memory, writer: BackgroundWriter) -> None:
    fixed = Scope(dataset=f"team-{next(_counter)}", task="assistant", session="standup")
    node = make_writer_node(memory=memory, writer=writer, scope_template=ScopeBinding.fixed(fixed))
    node({"messages": [HumanMessage("The demo moved to Friday.", id="h1")]}, RunnableConfig())
    [stored] = memory.messages(scope=fixed)
    assert stored.message.speaker == DEFAULT_USER_NAME == "User"  # no user_id in the config

    binding = ScopeBinding(dataset="{team}", task="assistant", session=None)
    other = make_writer_node(memory=memory, writer=writer, scope_template=binding)
    with pytest.raises(ScopeError, match=r"config\['configurable'\] has no 'team'.*graph\.invoke"):
        other({"messages": [HumanMessage("hi", id="h2")]}, RunnableConfig(configurable={}))
    other(
        {"messages": [HumanMessage("The demo moved to Friday.", id="h3")]},
        RunnableConfig(configurable={"team": fixed.dataset, "user_id": "u-7", "user_name": "Nate"}),
    )
    assert [m.message.speaker for m in memory.messages(scope=fixed.without_session())] == [
        "User",
        "Nate",
    ]


# -- writer node -------------------------------------------------------------------------------
def test_writer_node_writes_new_messages_once(
    memory: Memory, writer: BackgroundWriter, config: RunnableConfig, scope: Scope
) -> None:
    node = make_writer_node(memory=memory, writer=writer)
    history: list[BaseMessage] = [
        SystemMessage("You are helpful.", id="s0"),
        HumanMessage("I adopted a grey cat named Miso.", id="h1"),
        AIMessage("Lovely! How old is Miso?", id="a1"),
    ]
    assert node({"messages": history}, config) == {}
    stored = memory.messages(scope=scope)
    assert [(m.message.speaker, m.message.role, m.message.source_id) for m in stored] == [
        ("Sara", Role.USER, "h1"),
        ("Assistant", Role.ASSISTANT, "a1"),
    ]
    assert all(m.status is MessageStatus.PENDING for m in stored)
    assert stored[0].message.timestamp < stored[1].message.timestamp
    assert list(writer.pending()) == [scope] and writer.pending()[scope] > 10

    history += [
        HumanMessage("She is two.", id="h2"),
        AIMessage("", id="a2", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        ToolMessage("ok", tool_call_id="c1", id="t1"),
        AIMessage([{"type": "text", "text": "Noted, "}, {"type": "text", "text": "thanks."}]),
    ]
    node({"messages": history}, config)
    texts = [m.message.text for m in memory.messages(scope=scope)]
    assert texts == [
        "I adopted a grey cat named Miso.",
        "Lovely! How old is Miso?",
        "She is two.",
        "Noted, thanks.",
    ]
    stamps = [m.message.timestamp for m in memory.messages(scope=scope)]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)

    # a new process (a fresh node) sees the whole thread again: nothing is stored twice
    make_writer_node(memory=memory, writer=writer)({"messages": history}, config)
    assert len(memory.messages(scope=scope)) == 4
    assert writer.flush(timeout=20)
    assert Counter(m.status for m in memory.messages(scope=scope)) == Counter(
        {MessageStatus.PROCESSED: 4}
    )


def test_writer_node_needs_a_user(
    memory: Memory, writer: BackgroundWriter, config: RunnableConfig, scope: Scope
) -> None:
    node = make_writer_node(memory=memory, writer=writer)
    with pytest.raises(ScopeError, match="user_id"):
        node(
            {"messages": [HumanMessage("hi", id="h1")]},
            RunnableConfig(configurable={"thread_id": "t"}),
        )


def test_writer_node_returns_while_an_extraction_is_under_way(tmp_path: Path) -> None:
    reached, release = threading.Event(), threading.Event()
    gave_up: list[bool] = []

    def held(system: str, prompt: str) -> str:
        """The model's entity reply, held until the test releases it."""
        reached.set()
        if gave_up or not release.wait(HANG_GUARD):
            gave_up.append(True)
            raise TimeoutError("the model was held and never released")
        return ENTITIES

    llm = ScriptedChatModel(entities=[held], facts=[FACTS])
    with (
        Memory(path=tmp_path / "slow", dense=HashingEncoder(dim=64), llm=llm) as memory,
        BackgroundWriter(memory, idle_seconds=0.01) as writer,
    ):
        node = make_writer_node(memory=memory, writer=writer)
        first = {"messages": [HumanMessage("I adopted a grey cat named Miso.", id="h1")]}
        second = {"messages": [*first["messages"], AIMessage("Lovely!", id="a1")]}
        try:
            assert node(first, CONFIG) == {}
            assert reached.wait(HANG_GUARD)  # the worker is inside the model call, held there
            node(second, CONFIG)  # the next turn is written while the model is held
            assert not gave_up  # neither node call waited for the model
            texts = [m.message.text for m in memory.messages(scope=SCOPE)]
            assert texts == ["I adopted a grey cat named Miso.", "Lovely!"]
            assert memory.facts(scope=SCOPE) == []  # not extracted yet
        finally:
            release.set()
        assert writer.flush(timeout=HANG_GUARD)
        facts = memory.facts(scope=SCOPE)
        assert [f.text for f in facts][:1] == ["[Sara] adopted a grey cat named [Miso]."]
        assert all(m.status is MessageStatus.PROCESSED for m in memory.messages(scope=SCOPE))


# -- recall node -------------------------------------------------------------------------------
def test_recall_node_puts_context_for_the_latest_human_message(
    memory: Memory, writer: BackgroundWriter, config: RunnableConfig, scope: Scope
) -> None:
    write = make_writer_node(memory=memory, writer=writer)
    write({"messages": [HumanMessage("I adopted a grey cat named Miso.", id="h1")]}, config)
    writer.flush(timeout=20)
    recall = make_recall_node(memory=memory, key="recalled", max_tokens=200)
    other_thread: RunnableConfig = {
        "configurable": {"user_id": "Sara", "thread_id": "t2", "assistant_id": scope.task}
    }
    state: dict[str, Any] = {
        "messages": [HumanMessage("Hello", id="x"), AIMessage("Hi", id="y")]
        + [HumanMessage("What is my cat called?", id="z")]
    }
    result = recall(state, other_thread)  # recall crosses threads by default
    assert set(result) == {"recalled"}
    assert "Miso" in result["recalled"]
    assert recall({"messages": [AIMessage("Hi")]}, config) == {"recalled": ""}
    only_thread = make_recall_node(memory=memory, across_sessions=False)
    assert only_thread(state, other_thread) == {"memory_context": ""}
    assert "Miso" in only_thread(state, config)["memory_context"]


def test_recall_node_leaves_out_what_is_not_relevant_enough(
    memory: Memory, writer: BackgroundWriter, config: RunnableConfig
) -> None:
    write = make_writer_node(memory=memory, writer=writer)
    write({"messages": [HumanMessage("I adopted a grey cat named Miso.", id="h1")]}, config)
    writer.flush(timeout=20)
    state = {"messages": [HumanMessage("What is my grey cat called?", id="q")]}
    assert "Miso" in make_recall_node(memory=memory)(state, config)["memory_context"]
    strict = make_recall_node(memory=memory, min_relevance=1.0)
    assert strict(state, config) == {"memory_context": ""}  # no note that nothing was found
    loose = make_recall_node(memory=memory, min_relevance=0)
    floored = make_recall_node(memory=memory, min_relevance=CONTEXT_MIN_RELEVANCE)
    unrelated = {"messages": [HumanMessage("Which trains run on Sunday?", id="u")]}
    assert floored(unrelated, config) == {"memory_context": ""}
    assert "Miso" in loose(unrelated, config)["memory_context"]
    # the hashing encoder has no relevance calibration: by default, no floor
    assert "Miso" in make_recall_node(memory=memory)(unrelated, config)["memory_context"]


def test_recall_node_opens_with_the_user_profile_in_its_share(
    memory: Memory, config: RunnableConfig, scope: Scope
) -> None:
    memory.profile_put("preferences", "communication", "Sara likes short answers.", scope=scope)
    recall = make_recall_node(memory=memory, max_tokens=300, profile_ratio=0.3)
    state = {"messages": [HumanMessage("How should you answer me?", id="q")]}
    first = recall(state, config)["memory_context"]
    again = recall({"messages": [HumanMessage("Anything else?", id="r")]}, config)
    assert first.startswith("## Profile\n- preferences/communication: Sara likes short answers.")
    assert again["memory_context"].split("\n\n")[0] == first.split("\n\n")[0]
    plain = make_recall_node(memory=memory, max_tokens=300)(state, config)["memory_context"]
    assert "## Profile" not in plain


def test_recall_flushes_the_turns_of_its_scope_before_reading(
    memory: Memory, writer: BackgroundWriter, config: RunnableConfig, scope: Scope
) -> None:
    write = make_writer_node(memory=memory, writer=writer)  # idle 60 s: no extraction on its own
    write({"messages": [HumanMessage("I adopted a grey cat named Miso.", id="h1")]}, config)
    nate: RunnableConfig = {"configurable": {**config["configurable"], "user_id": "Nate"}}
    write({"messages": [HumanMessage("I adopted a dog named Rex.", id="n1")]}, nate)
    follow_up = {"messages": [HumanMessage("What is my cat called?", id="h2")]}  # one turn later

    unflushed = make_recall_node(memory=memory)  # flush=False by default: never waits
    assert unflushed(follow_up, config) == {"memory_context": ""}  # the turn is still buffered
    assert set(writer.pending()) == {scope, scope.model_copy(update={"dataset": "Nate"})}

    recalled = make_recall_node(memory=memory, flush=True)(follow_up, config)
    assert "Miso" in recalled["memory_context"]
    assert list(writer.pending()) == [scope.model_copy(update={"dataset": "Nate"})]  # not Nate's
    assert writer.flush(timeout=HANG_GUARD)


def test_the_writer_node_sets_the_shared_writers_idle_delay(
    memory: Memory, writer: BackgroundWriter, config: RunnableConfig, scope: Scope
) -> None:
    node = make_writer_node(memory=memory, idle_seconds=45.0)
    node({"messages": [HumanMessage("I bake bread on Sundays.", id="h1")]}, config)
    shared = BackgroundWriter.for_memory(memory)
    try:
        assert shared.idle_seconds == 45.0
        assert list(shared.pending()) == [scope]
    finally:
        assert shared.shutdown(timeout=HANG_GUARD)
    with pytest.raises(ConfigurationError, match="writer="):
        make_writer_node(memory=memory, writer=writer, idle_seconds=1.0)
    with pytest.raises(ConfigurationError, match="idle_seconds"):
        make_writer_node(memory=memory, idle_seconds=0)
    with pytest.raises(ConfigurationError, match="flush_timeout"):
        make_recall_node(memory=memory, flush_timeout=-1)


def test_leaving_the_memory_extracts_what_the_writer_node_wrote(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store"
    llm = ScriptedChatModel(entities=[ENTITIES], facts=[FACTS])
    with caplog.at_level(logging.DEBUG, logger="membrain"):
        with Memory(path=path, dense=HashingEncoder(dim=64), llm=llm) as mem:
            write = make_writer_node(memory=mem)  # the shared writer: extracts after 5 s idle
            write({"messages": [HumanMessage("I adopted a grey cat named Miso.", id="h1")]}, CONFIG)
            writer = BackgroundWriter.for_memory(mem)
        assert not writer.alive  # closing the memory drained and stopped it
        assert writer.shutdown(timeout=HANG_GUARD)  # its thread has ended
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        assert [m.status for m in mem.messages(scope=SCOPE)] == [MessageStatus.PROCESSED]
        assert [f.text for f in mem.facts(scope=SCOPE)] == [
            "[Sara] adopted a grey cat named [Miso]."
        ]


# -- example graph -----------------------------------------------------------------------------
class RecordingChatModel(GenericFakeChatModel):
    """GenericFakeChatModel that records the messages of every call."""

    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def test_example_graph_recalls_the_first_turn_in_the_second(
    memory: Memory, writer: BackgroundWriter, config: RunnableConfig, scope: Scope
) -> None:
    model = RecordingChatModel(
        messages=iter([AIMessage("What a lovely name!"), AIMessage("Your cat is Miso.")]),
        seen=[],
    )
    graph = build_example_graph(memory=memory, model=model, writer=writer)
    first = graph.invoke({"messages": [HumanMessage("I adopted a grey cat named Miso.")]}, config)
    assert first["memory_context"] == ""
    assert not any(isinstance(m, SystemMessage) for m in model.seen[0])
    assert writer.flush(timeout=20)

    second = graph.invoke({"messages": [HumanMessage("What is my cat called?")]}, config)
    assert "Miso" in second["memory_context"]
    system = model.seen[1][0]
    assert isinstance(system, SystemMessage) and "Miso" in str(system.content)
    assert [m.content for m in second["messages"]] == [
        "I adopted a grey cat named Miso.",
        "What a lovely name!",
        "What is my cat called?",
        "Your cat is Miso.",
    ]
    # the checkpointed thread is written once: four messages, not six
    assert writer.flush(timeout=20)
    stored = memory.messages(scope=scope)
    assert [m.message.text for m in stored] == [m.content for m in second["messages"]]
    assert all(m.status is MessageStatus.PROCESSED for m in stored)


def test_the_recalled_context_holds_what_the_user_stated_not_chatter(
    memory: Memory, writer: BackgroundWriter, config: RunnableConfig
) -> None:
    replies = iter([AIMessage(f"fake reply {i}. That sounds lovely!") for i in range(4)])
    model = RecordingChatModel(messages=replies, seen=[])
    # The hashing encoder's relevance is lexical: "Where do I live" shares no word with the move.
    graph = build_example_graph(memory=memory, model=model, writer=writer, min_relevance=0)
    for said in (
        "Hi there! Long time no see.",
        "I live in Toronto and I work as a nurse.",
        "Big news: we just moved to Vancouver!",
    ):
        graph.invoke({"messages": [HumanMessage(said)]}, config)
        assert writer.flush(timeout=20)
    recalled = graph.invoke({"messages": [HumanMessage("Where do I live now?")]}, config)
    context = recalled["memory_context"]
    assert "Vancouver" in context
    for chatter in ("fake reply", "lovely", "Long time", "?"):
        assert chatter not in context
    assert "Toronto" not in context  # superseded by the move, offline
