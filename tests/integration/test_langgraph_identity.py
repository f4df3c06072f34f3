"""Identity in LangGraph: any user id, a separate user name, runtime context, langmem namespaces."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel

from langchain_membrain.langgraph import (
    ScopeTemplate,
    make_recall_node,
    make_writer_node,
    run_values,
)
from membrain import ConfigurationError, Memory, Scope, ScopeError
from membrain.background import BackgroundWriter
from membrain.binding import DEFAULT_USER_NAME, ScopeBinding, scope_part
from membrain.testing import HashingEncoder

_counter = itertools.count()
CAT = "I adopted a grey cat named Miso."


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with Memory(path=tmp_path_factory.mktemp("identity") / "store", dense=HashingEncoder(64)) as m:
        yield m


@pytest.fixture
def writer(memory: Memory) -> Iterator[BackgroundWriter]:
    with BackgroundWriter(memory, idle_seconds=60) as w:
        yield w


@pytest.fixture
def agent() -> str:
    """A task of its own for each test, so the module's store is shared safely."""
    return f"agent-{next(_counter)}"


def _valid(part: str) -> bool:
    try:
        Scope(dataset=part, task="t")
    except ScopeError:
        return False
    return True


# -- scope_part --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value", ["Sara", "sara@example.com", "sara+news@example.com", "org:42", "a b", "Jürgen"]
)
def test_valid_ids_are_kept_as_they_are(value: str) -> None:
    assert scope_part(value) == value


@pytest.mark.parametrize(
    "value",
    ["auth0|64b7f1", "google-oauth2|1234", "a/b", "", " leading", "x" * 129, "é" * 500, "ğ\n\t"],
)
def test_other_ids_are_encoded_readably_and_deterministically(value: str) -> None:
    part = scope_part(value)
    assert _valid(part) and len(part) <= 128
    assert part != value
    assert part == scope_part(value)  # stable: the same id always finds the same memory


def test_encoding_keeps_the_allowed_characters() -> None:
    part = scope_part("auth0|64b7f1")
    assert part.startswith("auth0_64b7f1-h") and len(part) == len("auth0_64b7f1-h") + 16


def test_different_ids_never_share_a_part() -> None:
    confusable = [
        "auth0|64b7f1",
        "auth0/64b7f1",
        "auth0_64b7f1",  # valid: kept, so it must differ from the encodings above
        "x" * 200,
        "x" * 201,
        "x" * 110 + "|a",
        "x" * 110 + "|b",
    ]
    # a valid id that looks like an encoding is encoded too, so it cannot collide with one
    confusable.append(scope_part("auth0|64b7f1"))
    rng = random.Random(7)
    alphabet = "ab|/ _.@é\x00"
    confusable += ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(3000)]
    values = set(confusable)
    parts = {scope_part(v) for v in values}
    assert len(parts) == len(values)
    assert all(_valid(p) for p in parts)


def test_bindings_encode_every_value() -> None:
    scope = ScopeBinding().resolve({"user_id": "auth0|64b7f1", "thread_id": "slack/C1/171.2"})
    assert scope == Scope(
        dataset=scope_part("auth0|64b7f1"), task="assistant", session=scope_part("slack/C1/171.2")
    )
    # a whole part that grows too long from valid values is encoded as well
    long = ScopeBinding(dataset="{org}:{user_id}").resolve({"org": "o" * 100, "user_id": "u" * 100})
    assert long.dataset == scope_part("o" * 100 + ":" + "u" * 100)


# -- user name, never the user id --------------------------------------------------------------
def _write(node: Any, config: RunnableConfig, message_id: str = "h1") -> None:
    node({"messages": [HumanMessage(CAT, id=message_id), AIMessage("Lovely!", id="a1")]}, config)


def test_an_auth0_id_is_a_user_and_the_speaker_defaults_to_user(
    memory: Memory, writer: BackgroundWriter, agent: str
) -> None:
    config = RunnableConfig(
        configurable={"user_id": "auth0|64b7f1", "thread_id": "t1", "assistant_id": agent}
    )
    _write(make_writer_node(memory=memory, writer=writer), config)
    scope = Scope(dataset=scope_part("auth0|64b7f1"), task=agent)
    stored = memory.messages(scope=scope)
    assert [m.message.speaker for m in stored] == [DEFAULT_USER_NAME, "Assistant"]
    assert {m.scope.session for m in stored} == {"t1"}


def test_an_email_id_never_becomes_the_name_in_facts(
    memory: Memory, writer: BackgroundWriter, agent: str
) -> None:
    values = {"user_id": "sara@example.com", "assistant_id": agent}
    _write(make_writer_node(memory=memory, writer=writer), RunnableConfig(configurable=values))
    assert writer.flush(timeout=20)
    scope = Scope(dataset="sara@example.com", task=agent)
    facts = [f.text for f in memory.facts(scope=scope)]
    assert facts and not any("example.com" in text for text in facts)
    assert all(m.message.speaker != "sara@example.com" for m in memory.messages(scope=scope))


@pytest.mark.parametrize(
    ("node_name", "run_name", "expected"),
    [
        ("Sara", None, "Sara"),  # the node's name
        (None, "Sara", "Sara"),  # the run's name
        ("Sara", "Nate", "Sara"),  # the node's name wins
        (lambda values: values["display"], None, "Sara K."),  # a function of the run's values
        (lambda values: None, "Nate", "Nate"),  # nothing from the function: the run's name
        (None, None, "User"),
    ],
)
def test_the_speaker_comes_from_user_name(
    memory: Memory,
    writer: BackgroundWriter,
    agent: str,
    node_name: Any,
    run_name: Any,
    expected: str,
) -> None:
    values = {"user_id": "sara@example.com", "assistant_id": agent, "display": "Sara K."}
    if run_name:
        values["user_name"] = run_name
    node = make_writer_node(memory=memory, writer=writer, user_name=node_name)
    _write(node, RunnableConfig(configurable=values))
    [human, _] = memory.messages(scope=Scope(dataset="sara@example.com", task=agent))
    assert human.message.speaker == expected


# -- LangGraph 1.x runtime context -------------------------------------------------------------
@dataclass
class Ctx:
    user_id: str
    user_name: str = ""
    assistant_id: str = "assistant"


class State(MessagesState):
    memory_context: str


def _graph(memory: Memory, writer: BackgroundWriter, context_schema: Any = Ctx) -> Any:
    def call_model(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage("Noted.")]}

    builder = StateGraph(State, context_schema=context_schema)
    builder.add_node("recall", make_recall_node(memory=memory, max_tokens=300))
    builder.add_node("model", call_model)
    builder.add_node("write", make_writer_node(memory=memory, writer=writer))
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "model")
    builder.add_edge("model", "write")
    builder.add_edge("write", END)
    return builder.compile()


def test_nodes_read_the_runtime_context(
    memory: Memory, writer: BackgroundWriter, agent: str
) -> None:
    graph = _graph(memory, writer)
    context = Ctx(user_id="auth0|64b7f1", user_name="Sara", assistant_id=agent)
    first = graph.invoke(
        {"messages": [HumanMessage(CAT)]},
        {"configurable": {"thread_id": "t1"}},  # the thread from the config, the user from context
        context=context,
    )
    assert first["memory_context"] == ""
    scope = Scope(dataset=scope_part("auth0|64b7f1"), task=agent, session="t1")
    stored = memory.messages(scope=scope)
    assert [(m.message.speaker, m.message.text) for m in stored] == [
        ("Sara", CAT),
        ("Assistant", "Noted."),
    ]
    assert writer.flush(timeout=20)
    assert any("[Sara]" in f.text for f in memory.facts(scope=scope.without_session()))

    # a later thread recalls it through the context alone
    second = graph.invoke({"messages": [HumanMessage("What is my cat called?")]}, context=context)
    assert "Miso" in second["memory_context"]


class TypedCtx(TypedDict, total=False):
    user_id: str
    user_name: str
    thread_id: str
    assistant_id: str


class ModelCtx(BaseModel):
    user_id: str
    user_name: str
    thread_id: str
    assistant_id: str


@pytest.mark.parametrize("kind", ["typed_dict", "pydantic"])
def test_any_context_schema_carries_user_thread_and_name(
    memory: Memory, writer: BackgroundWriter, agent: str, kind: str
) -> None:
    values = {"user_id": "u|1", "user_name": "Nate", "thread_id": "slack/1", "assistant_id": agent}
    context: Any = TypedCtx(**values) if kind == "typed_dict" else ModelCtx(**values)  # type: ignore[typeddict-item]
    graph = _graph(memory, writer, TypedCtx if kind == "typed_dict" else ModelCtx)
    graph.invoke({"messages": [HumanMessage(CAT)]}, context=context)
    scope = Scope(dataset=scope_part("u|1"), task=agent, session=scope_part("slack/1"))
    assert [m.message.speaker for m in memory.messages(scope=scope)] == ["Nate", "Assistant"]


def test_config_still_works_in_a_graph_with_a_context_schema(
    memory: Memory, writer: BackgroundWriter, agent: str
) -> None:
    graph = _graph(memory, writer)
    config = {"configurable": {"user_id": "sara", "user_name": "Sara", "assistant_id": agent}}
    graph.invoke({"messages": [HumanMessage(CAT)]}, config)
    stored = memory.messages(scope=Scope(dataset="sara", task=agent))
    assert [m.message.speaker for m in stored] == ["Sara", "Assistant"]


def test_the_context_wins_over_the_config_and_errors_name_both() -> None:
    config = RunnableConfig(configurable={"user_id": "a", "thread_id": "t1", "user_name": "A"})
    assert run_values(config, Ctx(user_id="b", user_name="B")) == {
        "user_id": "b",
        "thread_id": "t1",
        "user_name": "B",
        "assistant_id": "assistant",
    }
    assert run_values(None, None) == {}

    recall = make_recall_node(memory=None)  # type: ignore[arg-type]  # fails before using it
    with pytest.raises(ScopeError, match=r"runtime context or config\['configurable'\].*context="):
        recall({"messages": [HumanMessage("hi")]}, RunnableConfig(), Runtime(context={"a": "x"}))


# -- langmem namespaces ------------------------------------------------------------------------
def test_a_langmem_namespace_maps_the_user_to_the_dataset() -> None:
    binding = ScopeTemplate.from_namespace(("memories", "{user_id}"))
    assert isinstance(binding, ScopeTemplate)
    values = {"user_id": "auth0|64b7f1", "thread_id": "t1"}
    assert binding.resolve(values) == Scope(dataset=scope_part("auth0|64b7f1"), task="memories")
    assert ScopeBinding.from_namespace(("memories", "{user_id}"), task="notes").resolve(
        {"user_id": "sara"}
    ) == Scope(dataset="sara", task="notes")
    assert ScopeBinding.from_namespace(
        ("{org}", "memories", "{user_id}", "prefs"), session="{thread_id}"
    ).resolve({"org": "acme", "user_id": "sara", "thread_id": "t1"}) == Scope(
        dataset="acme:sara", task="memories:prefs", session="t1"
    )
    assert ScopeBinding.from_namespace(("{user_id}",), task="{assistant_id}").resolve(
        {"user_id": "sara"}
    ) == Scope(dataset="sara", task="assistant")


def test_a_namespace_must_name_the_user_and_the_task() -> None:
    with pytest.raises(ConfigurationError, match="whose memory"):
        ScopeBinding.from_namespace(("memories",))
    with pytest.raises(ConfigurationError, match="task="):
        ScopeBinding.from_namespace(("{user_id}",))
    with pytest.raises(ConfigurationError, match="does not parse"):
        ScopeBinding.from_namespace(("memories", "{user_id"))


def test_nodes_write_where_langmem_namespaces_point(
    memory: Memory, writer: BackgroundWriter
) -> None:
    user = f"auth0|{next(_counter)}"
    binding = ScopeTemplate.from_namespace(("memories", "{user_id}"))
    node = make_writer_node(memory=memory, writer=writer, scope_template=binding)
    _write(node, RunnableConfig(configurable={"user_id": user, "thread_id": "t1"}))
    stored = memory.messages(scope=Scope(dataset=scope_part(user), task="memories"))
    assert len(stored) == 2 and {m.scope.session for m in stored} == {None}


def test_the_store_maps_langmems_namespaces_to_the_user(tmp_path: Path) -> None:
    from langchain_membrain.langgraph import MembrainStore, namespace_scopes

    with Memory(tmp_path / "m", dense=HashingEncoder(dim=64)) as mem:
        store = MembrainStore(
            memory=mem,
            path=tmp_path / "items.sqlite",
            extract=False,
            namespace_to_scope=namespace_scopes(("memories", "{user_id}")),
        )
        with store:
            store.put(("memories", "auth0|64b7f1"), "k1", {"text": "Likes green tea."})
            scope = store.scope_for(("memories", "auth0|64b7f1"))
            assert (scope.task, scope.dataset.startswith("auth0_64b7f1")) == ("memories", True)
            assert [m.message.text for m in mem.messages(scope=scope)] == ["Likes green tea."]
            with pytest.raises(ScopeError, match="does not match"):
                store.put(("notes", "sara"), "k2", {"text": "x"})


def test_memory_model_calls_inside_a_node_are_child_runs_of_the_graph(tmp_path: Path) -> None:
    from uuid import UUID

    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    from langchain_membrain.langgraph import make_recall_node

    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.chat_parents: list[UUID | None] = []
            self.chains: dict[UUID, str] = {}

        def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
            self.chains[kw["run_id"]] = str(kw.get("name") or "")

        def on_chat_model_start(self, serialized: Any, messages: Any, **kw: Any) -> None:
            self.chat_parents.append(kw.get("parent_run_id"))

    rewrite = AIMessage('{"keywords": "cat", "hypothetical": "Sara has a cat.", "event": "cat"}')
    model = GenericFakeChatModel(messages=iter([rewrite] * 5))
    with Memory(tmp_path, dense=HashingEncoder(dim=64), llm=model) as mem:
        graph = StateGraph(MessagesState)
        graph.add_node("recall", make_recall_node(memory=mem, mode="expand"))
        graph.add_edge(START, "recall")
        graph.add_edge("recall", END)
        runs = Runs()
        graph.compile().invoke(
            {"messages": [HumanMessage("What pet do I have?")]},
            {"configurable": {"user_id": "sara", "thread_id": "t1"}, "callbacks": [runs]},
        )
    assert runs.chat_parents, "the query rewrite called the model"
    assert all(runs.chains.get(parent) == "recall" for parent in runs.chat_parents if parent)
    assert None not in runs.chat_parents
