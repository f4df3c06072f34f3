"""The LangGraph store served by `membrain serve`, shared by every process that reaches it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)

from integration.served import Served, serving
from langchain_membrain.langgraph import RemoteMembrainStore, user_scope
from membrain import MessageStatus
from membrain.background import BackgroundWriter
from membrain.remote import RemoteAccessError
from membrain.server import Access


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {
        "sara-writer": (["sara"], Access.WRITE),
        "sara-reader": (["sara"], Access.READ),
        "tom-writer": (["tom"], Access.WRITE),
        "admin": (["*"], Access.ADMIN),
    }
    with serving(tmp_path_factory.mktemp("served-store"), keys, writer=True) as state:
        yield state


Opener = Callable[[str], RemoteMembrainStore]


@pytest.fixture
def store(served: Served) -> Iterator[Opener]:
    """Opens clients of the served store with a key, by name; closes them after the test."""
    opened: list[RemoteMembrainStore] = []

    def open_store(key: str) -> RemoteMembrainStore:
        opened.append(RemoteMembrainStore(served.url, served.keys.get(key, key)))
        return opened[-1]

    yield open_store
    for client in opened:
        client.close()


def test_two_workers_share_the_items_and_their_search(served: Served, store: Opener) -> None:
    first, second = store("sara-writer"), store("sara-writer")
    first.put(("prefs", "sara"), "pet", {"text": "I adopted a cat named Miso."})
    first.put(("prefs", "sara"), "home", {"text": "I live in Lisbon near the river."})
    item = second.get(("prefs", "sara"), "pet")
    assert item is not None and item.value == {"text": "I adopted a cat named Miso."}
    assert item.namespace == ("prefs", "sara") and item.created_at <= item.updated_at
    [hit, *_] = second.search(("prefs", "sara"), query="cat named Miso")
    assert hit.key == "pet" and hit.score is not None
    assert [
        i.key for i in second.search(("prefs", "sara"), filter={"text": hit.value["text"]})
    ] == ["pet"]
    second.delete(("prefs", "sara"), "home")
    assert first.get(("prefs", "sara"), "home") is None
    assert ("prefs", "sara") in first.list_namespaces(prefix=("prefs", "sara"))
    # the served memory's writer extracts the items' text into facts
    BackgroundWriter.for_memory(served.memory).flush(timeout=30.0)
    scope = user_scope(("prefs", "sara"))
    assert scope.dataset == "sara" and scope.task == "prefs"  # the user is the dataset
    assert {m.status for m in served.memory.messages(scope=scope)} == {MessageStatus.PROCESSED}
    # the audit names the key that wrote, and the key that deleted
    stored = served.memory.audit(scope=scope, actions=["stored"])
    assert stored and {e.actor.name for e in stored} == {"sara-writer"}
    forgotten = served.memory.audit(scope=scope, actions=["forgotten"])  # the deleted item's
    assert forgotten and {e.actor.name for e in forgotten} == {"sara-writer"}


def test_batches_answer_in_order(served: Served, store: Opener) -> None:
    remote = store("sara-writer")
    results = remote.batch(
        [
            PutOp(("batch", "sara"), "a", {"text": "I play the cello."}),
            GetOp(("batch", "sara"), "a"),  # reads see the store as it was before the batch
            SearchOp(("batch", "sara"), None, 10, 0, None),
            ListNamespacesOp(None, None, 100, 0),
        ]
    )
    assert results[0] is None and results[1] is None and results[2] == []
    assert isinstance(results[3], list)
    got = remote.get(("batch", "sara"), "a")
    assert got is not None and got.value == {"text": "I play the cello."}


def test_a_key_reaches_only_its_datasets(served: Served, store: Opener) -> None:
    tom = store("tom-writer")
    tom.put(("notes", "tom"), "n1", {"text": "Tom likes chess."})
    sara = store("sara-writer")
    for call in (
        lambda: sara.get(("notes", "tom"), "n1"),
        lambda: sara.put(("notes", "tom"), "n2", {"text": "forged"}),
        lambda: sara.search(("notes", "tom"), query="chess"),
        lambda: sara.search(("notes",), query="chess"),  # every user's notes
        lambda: sara.search((), query="chess"),  # no dataset named: needs a key for all
    ):
        with pytest.raises(RemoteAccessError) as refused:
            call()
        assert refused.value.status == 403
    # the key's own namespaces are paged, though others sort before them
    assert tom.list_namespaces(limit=1) == [("notes", "tom")]
    assert tom.list_namespaces(max_depth=1) == [("notes",)]
    listed = sara.list_namespaces()
    assert listed and all(ns[1] == "sara" for ns in listed)
    everything = store("admin").list_namespaces()
    assert ("notes", "tom") in everything and set(listed) <= set(everything)
    reader = store("sara-reader")
    assert reader.get(("prefs", "sara"), "never-put") is None  # a read key reads
    with pytest.raises(RemoteAccessError):
        reader.put(("prefs", "sara"), "x", {"text": "a read key may not write"})
    with pytest.raises(RemoteAccessError) as unknown:
        store("mb_unknown").get(("prefs", "sara"), "pet")
    assert unknown.value.status == 401


def test_a_bad_namespace_is_refused_by_client_and_server(served: Served, store: Opener) -> None:
    remote = store("sara-writer")
    with pytest.raises(InvalidNamespaceError):  # LangGraph's own check, before sending
        remote.put(("sara", "a.b"), "k", {"text": "dots are label separators"})
    with pytest.raises(InvalidNamespaceError):  # a raw batch: as the embedded store refuses it
        remote.batch([PutOp(("sara", "a.b"), "k", {"text": "dots are label separators"})])
    put = {"op": "put", "namespace": ["sara", "a.b"], "key": "k", "value": {"text": "x"}}
    sent = httpx.post(  # the server checks too
        f"{served.url}/api/store/batch",
        json={"ops": [put]},
        headers={"authorization": f"Bearer {served.keys['sara-writer']}"},
    )
    assert sent.status_code == 422 and "namespace" in sent.json()["error"]
    assert remote.list_namespaces(prefix=("sara",), max_depth=2).count(("sara", "a.b")) == 0


def test_a_graph_compiled_with_the_served_store(served: Served, store: Opener) -> None:
    def remember(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        store.put(("graph", "sara"), "last", {"text": str(state["messages"][-1].content)})
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    graph = builder.compile(store=store("sara-writer"))
    graph.invoke({"messages": [("user", "I started learning the violin.")]})
    seen = store("sara-reader").get(("graph", "sara"), "last")
    assert seen is not None and seen.value == {"text": "I started learning the violin."}


def test_an_answer_of_the_wrong_shape_is_a_backend_error() -> None:
    import httpx

    from membrain import BackendError

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[])  # no result for the one operation sent

    remote = RemoteMembrainStore("http://membrain.test", transport=httpx.MockTransport(handler))
    with remote, pytest.raises(BackendError, match="unexpected answer"):
        remote.get(("prefs", "sara"), "pet")
