"""The served LangGraph store: a key reaches the items of its datasets only, whatever the labels.

Datasets hold dots (e-mail addresses) and look-alikes of one another; raw user ids hold ``/``.
A namespace's dataset is the one the store keeps its items in (by default the user, the second
label of ``(collection, user, ...)``), and every operation is checked there. Bad input is
refused with 422 before any operation of the batch runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import httpx
import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)

from integration.served import Served, serving
from langchain_membrain.langgraph import RemoteMembrainStore, user_scope
from membrain import InputError
from membrain.remote import RemoteAccessError
from membrain.server import Access

TEXT = "Bob keeps the spare key under the blue flowerpot."

# one item per namespace, each of another user: ("notes", "bob", "x") and ("notes", "bob.x")
# would be the same text joined by "."; the rest look like "bob.x" or "bob" to a reader
ITEMS: dict[str, tuple[str, ...]] = {
    "bob": ("notes", "bob", "x"),
    "leader": ("notes", "bob\u2024x"),  # ONE DOT LEADER
    "wide": ("notes", "ｂｏｂ"),  # fullwidth letters: a valid dataset name of its own
    "wide-dot": ("notes", "ｂｏｂ．ｘ"),  # fullwidth letters and full stop
    "slash": ("notes", "bob/x"),  # a raw user id
}


def dataset(name: str) -> str:
    """The dataset the served store keeps ``ITEMS[name]`` in."""
    return user_scope(ITEMS[name]).dataset


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys: dict[str, tuple[Sequence[str], Access]] = {
        "dotted-reader": (["bob.x"], Access.READ),
        "dotted-writer": (["bob.x"], Access.WRITE),
        "admin": (["*"], Access.ADMIN),
    }
    for name in ITEMS:
        keys[f"{name}-reader"] = ([dataset(name)], Access.READ)
        keys[f"{name}-writer"] = ([dataset(name)], Access.WRITE)
    with serving(tmp_path_factory.mktemp("store-auth"), keys, writer=True) as state:
        with RemoteMembrainStore(state.url, state.keys["admin"]) as admin:
            for name, namespace in ITEMS.items():
                admin.put(namespace, "secret", {"text": f"{TEXT} ({name})"}, index=["text"])
        yield state


Opener = Callable[[str], RemoteMembrainStore]


@pytest.fixture
def store(served: Served) -> Iterator[Opener]:
    opened: list[RemoteMembrainStore] = []

    def open_store(key: str) -> RemoteMembrainStore:
        opened.append(RemoteMembrainStore(served.url, served.keys[key]))
        return opened[-1]

    yield open_store
    for client in opened:
        client.close()


def post(served: Served, key: str, ops: list[dict[str, Any]]) -> httpx.Response:
    """A raw batch (JSON escapes, so a lone surrogate travels as the server would get it)."""
    return httpx.post(
        f"{served.url}/api/store/batch",
        content=json.dumps({"ops": ops}).encode(),
        headers={"Authorization": f"Bearer {served.keys[key]}", "Content-Type": "application/json"},
        timeout=30.0,
    )


def refused(call: Callable[[], object], status: int = 403) -> None:
    """``call`` is answered ``status``: 403 (the key may not), or 422 (bad input)."""
    if status == 422:
        with pytest.raises(InputError):
            call()
        return
    with pytest.raises(RemoteAccessError) as caught:
        call()
    assert caught.value.status == status


def test_a_dotted_dataset_never_reads_the_namespace_its_labels_join(
    served: Served, store: Opener
) -> None:
    reader = store("dotted-reader")
    reads: list[Op] = [
        GetOp(("notes", "bob.x"), "secret"),
        SearchOp(("notes", "bob.x")),
        SearchOp(("notes", "bob.x"), None, 10, 0, "flowerpot"),
        ListNamespacesOp((MatchCondition("prefix", ("notes", "bob.x")),)),
        ListNamespacesOp((MatchCondition("prefix", ("notes", "bob.x", "*")),)),
    ]
    for op in reads:  # a label holds no ".": refused before sending, as the embedded store does
        with pytest.raises(InvalidNamespaceError):
            reader.batch([op])
    search = {"op": "search", "namespace_prefix": ["notes", "bob.x"], "query": "flowerpot"}
    sent = httpx.post(  # the server refuses them too
        f"{served.url}/api/store/batch",
        json={"ops": [search]},
        headers={"authorization": f"Bearer {served.keys['dotted-reader']}"},
    )
    assert sent.status_code == 422, sent.text
    assert reader.list_namespaces() == []  # no namespace is of dataset "bob.x"
    refused(partial(reader.get, ("notes", "bob", "x"), "secret"))
    writer = store("dotted-writer")
    forged = ("notes", "bob.x")
    for op in (PutOp(forged, "secret", {"text": "forged"}), PutOp(forged, "secret", None)):
        with pytest.raises(InvalidNamespaceError):
            writer.batch([op])
    kept = store("admin").get(("notes", "bob", "x"), "secret")
    assert kept is not None and kept.value == {"text": f"{TEXT} (bob)"}


@pytest.mark.parametrize("own", list(ITEMS))
def test_a_read_key_reaches_its_own_look_alike_only(own: str, store: Opener) -> None:
    reader = store(f"{own}-reader")
    mine = ITEMS[own]
    got = reader.get(mine, "secret")
    assert got is not None and got.value == {"text": f"{TEXT} ({own})"}
    hits = reader.search(mine[:2], query="spare key flowerpot", limit=20)
    assert [(h.namespace, h.key) for h in hits] == [(mine, "secret")]
    assert [i.namespace for i in reader.search(mine[:2], limit=20)] == [mine]
    assert reader.list_namespaces() == [mine]
    assert reader.list_namespaces(suffix=(mine[-1],)) == [mine]
    assert reader.list_namespaces(max_depth=2) == [mine[:2]]
    assert reader.list_namespaces(prefix=mine[:2]) == [mine]
    refused(partial(reader.search, (), query="flowerpot"))  # no dataset named: needs "*"
    refused(partial(reader.search, ()))
    refused(partial(reader.search, ("notes",)))  # every user's notes: needs "*" too
    for other, namespace in ITEMS.items():
        if other == own:
            continue
        refused(partial(reader.get, namespace, "secret"))
        refused(partial(reader.search, namespace[:2]))
        refused(partial(reader.search, namespace[:2], query="flowerpot"))
        refused(partial(reader.list_namespaces, prefix=namespace[:2]))


@pytest.mark.parametrize("own", ["bob", "leader", "slash"])
def test_a_write_key_writes_and_deletes_in_its_own_dataset_only(own: str, store: Opener) -> None:
    writer = store(f"{own}-writer")
    mine = (*ITEMS[own][:2], "scratch")
    writer.put(mine, "k", {"text": "mine"}, index=False)
    writer.delete(mine, "k")
    assert writer.get(mine, "k") is None
    for other, namespace in ITEMS.items():
        if other == own:
            continue
        refused(partial(writer.put, namespace, "secret", {"text": "forged"}))
        refused(partial(writer.delete, namespace, "secret"))
        # one forbidden op refuses the batch: its allowed put is not written either
        mixed = [PutOp(mine, "k", {"text": "mine"}, False), PutOp(namespace, "secret", None)]
        refused(partial(writer.batch, mixed))
    assert writer.get(mine, "k") is None
    admin = store("admin")
    assert all(admin.get(ns, "secret") is not None for ns in ITEMS.values())


BAD_OPS: list[dict[str, Any]] = [
    {"op": "get", "namespace": ["bob", "x\ud800"], "key": "secret"},
    {"op": "get", "namespace": ["x\ud800"], "key": "secret"},
    {"op": "get", "namespace": ["bob", "x"], "key": "k\ud800"},
    {"op": "search", "namespace_prefix": ["x\ud800"]},
    {"op": "search", "namespace_prefix": ["bob"], "query": "flower\ud800"},
    {"op": "search", "namespace_prefix": ["bob"], "filter": {"text": {"$bogus": 1}}},
    {"op": "search", "namespace_prefix": ["bob"], "query": "key", "filter": {"t": {"$in": [1]}}},
    {"op": "list", "match_conditions": [{"match_type": "suffix", "path": ["x\ud800"]}]},
    {"op": "put", "namespace": ["bob", "x\ud800"], "key": "k", "value": {"text": "v"}},
    {"op": "put", "namespace": ["bob", "x"], "key": "k", "value": {"text": "v\ud800"}},
    {"op": "put", "namespace": ["bob", "x"], "key": "k\ud800", "value": None},
]


@pytest.mark.parametrize("key", ["admin", "bob-writer"])
def test_bad_input_is_refused_with_422_before_anything_runs(
    served: Served, store: Opener, key: str
) -> None:
    good = {"op": "put", "namespace": ["notes", "bob"], "key": "written", "value": {"text": "no"}}
    for bad in BAD_OPS:
        response = post(served, key, [good, bad])
        assert response.status_code == 422, (bad, response.text)
        # a bad label is LangGraph's error, which the client raises again
        labels = [*bad.get("namespace", ()), *bad.get("namespace_prefix", ())]
        labels += [label for c in bad.get("match_conditions", ()) for label in c["path"]]
        kind = (
            "InvalidNamespaceError" if any("\ud800" in label for label in labels) else "InputError"
        )
        assert response.json()["type"] == kind, response.text
    assert store("admin").get(("notes", "bob"), "written") is None
    assert post(served, key, [good]).status_code == 200
    store("admin").delete(("notes", "bob"), "written")
