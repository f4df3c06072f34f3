"""The LangGraph example graph, nodes and store, and the LangChain chat history, on a served
memory (a RemoteMemory of a real server whose own writer extracts in the background)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from integration.served import Served, serving
from integration.test_langgraph_nodes import RecordingChatModel
from langchain_membrain import MembrainChatMessageHistory
from langchain_membrain.langgraph import MembrainStore, make_writer_node
from langchain_membrain.langgraph.example import build_example_graph
from membrain import ConfigurationError, FactStatus, MessageStatus, Scope
from membrain.background import BackgroundWriter
from membrain.remote import RemoteAccessError, RemoteMemory
from membrain.server import Access

_counter = itertools.count()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {"sara-writer": (["sara"], Access.WRITE), "tom-writer": (["tom"], Access.WRITE)}
    with serving(tmp_path_factory.mktemp("remote-langgraph"), keys, writer=True) as state:
        yield state


@pytest.fixture
def remote(served: Served) -> Iterator[RemoteMemory]:
    with served.remote() as mem:
        yield mem


def settled(served: Served, scope: Scope, timeout: float = 30.0) -> list[MessageStatus]:
    """Wait until the server's own writer has extracted everything of ``scope``."""
    deadline = time.monotonic() + timeout
    with served.remote() as client:
        while True:
            statuses = [m.status for m in client.messages(scope=scope)]
            if MessageStatus.PENDING not in statuses or time.monotonic() > deadline:
                return statuses
            BackgroundWriter.for_memory(served.memory).flush(timeout=5.0)


# -- LangGraph example graph and nodes --------------------------------------------------------
def test_the_example_graph_runs_on_a_served_memory(served: Served, remote: RemoteMemory) -> None:
    model = RecordingChatModel(
        messages=iter([AIMessage("What a lovely name!"), AIMessage("Your cat is Miso.")]),
        seen=[],
    )
    graph = build_example_graph(memory=remote, model=model)
    task = f"graph{next(_counter)}"
    config: Any = {"configurable": {"user_id": "sara", "assistant_id": task, "thread_id": "t1"}}
    first = graph.invoke({"messages": [HumanMessage("I adopted a grey cat named Miso.")]}, config)
    assert first["memory_context"] == ""
    thread = Scope(dataset="sara", task=task, session="t1")
    # the writer node stored the turn and returned; the server's writer extracts it
    assert settled(served, thread) == [MessageStatus.PROCESSED, MessageStatus.PROCESSED]

    other_thread: Any = {"configurable": {**config["configurable"], "thread_id": "t2"}}
    second = graph.invoke({"messages": [HumanMessage("What is my cat called?")]}, other_thread)
    assert "Miso" in second["memory_context"]
    system = model.seen[1][0]
    assert isinstance(system, SystemMessage) and "Miso" in str(system.content)
    assert [m.content for m in second["messages"]] == [
        "What is my cat called?",
        "Your cat is Miso.",
    ]
    stored = remote.messages(scope=thread)
    assert [m.message.text for m in stored] == [
        "I adopted a grey cat named Miso.",
        "What a lovely name!",
    ]
    assert [m.message.speaker for m in stored] == ["User", "Assistant"]


def test_a_served_memory_takes_no_local_writer(served: Served, remote: RemoteMemory) -> None:
    with pytest.raises(ConfigurationError, match="writer"):
        make_writer_node(memory=remote, writer=BackgroundWriter.for_memory(served.memory))


def test_a_run_for_another_users_memory_is_refused(remote: RemoteMemory) -> None:
    node = make_writer_node(memory=remote)
    state = {"messages": [HumanMessage("I live in Lisbon.")]}
    with pytest.raises(RemoteAccessError) as refused:
        node(state, {"configurable": {"user_id": "tom", "thread_id": "t1"}})
    assert refused.value.status == 403


# -- LangChain chat history --------------------------------------------------------------------
def test_the_chat_history_stores_extracts_and_clears_on_a_served_memory(
    served: Served, remote: RemoteMemory
) -> None:
    scope = Scope(dataset="sara", task=f"chat{next(_counter)}", session="thread-1")
    history = MembrainChatMessageHistory(memory=remote, scope=scope, user_name="Sara")
    history.add_messages(
        [HumanMessage("I adopted a cat named Miso yesterday.", id="h1"), AIMessage("Lovely!")]
    )
    assert [m.content for m in history.messages] == [
        "I adopted a cat named Miso yesterday.",
        "Lovely!",
    ]
    facts = remote.facts(scope=scope)  # extracted before add_messages returned
    assert any("Miso" in f.text for f in facts)
    assert remote.search("What is the cat called?", scope=scope, mode="fast", k=1)

    history.clear()
    assert history.messages == []
    assert remote.facts(scope=scope) == []
    forgotten = remote.facts(scope=scope, include_inactive=True)
    assert {f.status for f in forgotten} == {FactStatus.FORGOTTEN}
    events = remote.audit(scope=scope, actions=["forgotten"])
    assert events and {e.actor.name for e in events} == {"sara-writer"}  # the key is the actor
    # the clear marker is bookkeeping: stored, never handed to the server's writer
    BackgroundWriter.for_memory(served.memory).flush(timeout=10.0)
    markers = served.memory.messages(scope=scope.bookkeeping())
    assert [m.status for m in markers] == [MessageStatus.PENDING]
    assert served.memory.facts(scope=scope.bookkeeping()) == []


# -- LangGraph store ---------------------------------------------------------------------------
def test_the_langgraph_store_runs_on_a_served_memory(
    served: Served, remote: RemoteMemory, tmp_path: Path
) -> None:
    task = f"store{next(_counter)}"
    with pytest.raises(ConfigurationError, match="path="):
        MembrainStore(memory=remote, task=task)
    with pytest.raises(ConfigurationError, match="extract=False"):
        MembrainStore(memory=remote, path=tmp_path / "x.sqlite", extract=False)
    with pytest.raises(ConfigurationError, match="dims"):
        MembrainStore(memory=remote, path=tmp_path / "x.sqlite", index={"dims": 64})

    store = MembrainStore(
        memory=remote, path=tmp_path / "items.sqlite", task=task, user_name="Sara"
    )
    namespace = ("sara", "prefs")
    store.put(namespace, "pet", {"text": "I adopted a cat named Miso."})
    store.put(namespace, "home", {"text": "I live in Lisbon near the river."})
    assert store.get(namespace, "pet").value == {"text": "I adopted a cat named Miso."}
    # found at once through the evidence search, before any extraction
    [first, *_] = store.search(("sara",), query="cat named Miso")
    assert first.key == "pet" and first.score is not None

    items_scope = store.scope_for(namespace)
    assert MessageStatus.PENDING not in settled(served, items_scope)
    cat_facts = remote.facts(scope=items_scope, derived_from=[_source(store, "pet")])
    assert any("Miso" in f.text for f in cat_facts)

    # overwriting the item forgets what its old value taught the memory
    store.put(namespace, "pet", {"text": "I adopted a dog named Rex."})
    assert not any("Miso" in f.text for f in remote.facts(scope=items_scope))
    assert store.search(("sara",), query="dog named Rex")[0].key == "pet"
    store.close()

    reopened = MembrainStore(
        memory=remote, path=tmp_path / "items.sqlite", task=task, user_name="Sara"
    )
    assert reopened.get(namespace, "pet").value == {"text": "I adopted a dog named Rex."}
    reopened.close()


def _source(store: MembrainStore, key: str) -> str:
    """The MemBrain source id of the store's item ``key`` (read from its sidecar)."""
    row = store._conn.execute("SELECT source_id FROM items WHERE key = ?", (key,)).fetchone()
    return str(row[0])
