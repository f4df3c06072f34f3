"""One user id, one tenant, on every surface; two ids, two tenants.

The adapters (LangChain tools and retrievers, LangGraph nodes, store and namespaces, LlamaIndex),
the remote clients and the HTTP server all store a raw id as ``Scope(dataset=id)`` does, and
join several values so that no two tuples meet. A LangGraph store file written under the
previous label encoding is moved to today's scopes when it is opened.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integration.served import Served, serving
from langchain_membrain import MembrainRetriever
from langchain_membrain.langgraph import (
    MembrainStore,
    ScopeTemplate,
    namespace_scopes,
    scope_for_namespace,
)
from langchain_membrain.langgraph.sidecar import FORMAT, connect, layout, ns_text, set_layout
from llama_index_membrain import MembrainRetriever as LlamaRetriever
from membrain import Memory, Message, RemoteMemory, Scope, ScopeError
from membrain.api.requests import EntitiesRequest
from membrain.api.scope import PARTS_HEADER
from membrain.binding import ScopeBinding
from membrain.server import Access
from membrain.server.keys import Grant
from membrain.testing import HashingEncoder

RAW = "auth0|64b7f1"
OLD_PART = "auth0_64b7f1-h0965fcf43ca6e13d"
TEXT = st.text(min_size=1, max_size=140) | st.text(alphabet="ab:|_-h0 .é\u212a", min_size=1)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with Memory(tmp_path_factory.mktemp("surfaces"), dense=HashingEncoder(64)) as mem:
        yield mem


# -- the collisions ---------------------------------------------------------------------------
def test_the_store_encodes_a_label_as_scope_encodes_the_id() -> None:
    assert scope_for_namespace((RAW,)).dataset == Scope(dataset=RAW).dataset == OLD_PART
    assert scope_for_namespace((OLD_PART,)).dataset != OLD_PART  # the literal: another user
    grant = Grant(name="app", role=Access.WRITE, datasets=frozenset({RAW}))
    assert grant.covers(scope_for_namespace((RAW, "prefs"), task="store").dataset)


def test_namespaces_whose_labels_join_alike_are_two_sessions() -> None:
    assert scope_for_namespace(("u", "a", "b:c")) != scope_for_namespace(("u", "a", "b", "c"))
    first, second = ("u", "b:c"), ("u", "b", "c")  # MembrainStore's own task
    assert scope_for_namespace(first, task="store") != scope_for_namespace(second, task="store")
    assert scope_for_namespace(("u", "a", "b", "c")).session == "b:c"  # plain labels: as before


def test_namespace_templates_keep_fields_holding_the_separator_apart() -> None:
    binding = ScopeBinding.from_namespace(("memories", "{org}", "{user_id}"))
    assert binding.resolve({"org": "a:b", "user_id": "c"}) != binding.resolve(
        {"org": "a", "user_id": "b:c"}
    )
    to_scope = namespace_scopes(("memories", "{org}", "{user_id}"))
    assert to_scope(("memories", "a:b", "c")) != to_scope(("memories", "a", "b:c"))


# -- the property: the same id, the same part, everywhere --------------------------------------
@settings(max_examples=150)
@given(value=TEXT)
def test_every_surface_stores_an_id_as_scope_does(memory: Memory, value: str) -> None:
    try:
        expected = Scope(dataset=value, task="t").dataset
    except ScopeError:
        return  # refused by Scope (blank and unprintable): no part to compare
    assert ScopeTemplate().resolve({"configurable": {"user_id": value}}).dataset == expected
    assert ScopeBinding.from_namespace(("m", "{user_id}")).resolve({"user_id": value}).dataset == (
        expected
    )  # create_memory_tools(namespace=...)
    assert namespace_scopes(("m", "{user_id}"))(("m", value)).dataset == expected
    assert scope_for_namespace((value, "x")).dataset == expected
    assert scope_for_namespace((value, "x"), task="store").dataset == expected
    assert MembrainRetriever(memory=memory, dataset=value, task="t").scope == Scope(
        dataset=value, task="t"
    )
    assert LlamaRetriever(memory=memory, dataset=value, task="t").scope.dataset == expected
    # a remote client sends the parts it holds; the server reads them back as that scope
    sent = EntitiesRequest.of(scope=Scope(dataset=value, task="t")).wire()
    assert Scope.stored(**sent).dataset == expected
    assert Grant(name="k", role=Access.READ, datasets=frozenset({value})).covers(expected)


# -- the HTTP server and the remote client -----------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys: dict[str, tuple[Sequence[str], Access]] = {
        "admin": (["*"], Access.ADMIN),
        "auth0": ([RAW], Access.WRITE),
    }
    with serving(tmp_path_factory.mktemp("served-surfaces"), keys) as state:
        yield state


def _texts(served: Served, dataset: str, parts: bool = False) -> list[str]:
    headers = {"Authorization": f"Bearer {served.keys['admin']}"}
    if parts:
        headers[PARTS_HEADER] = "1"
    answer = httpx.get(
        f"{served.url}/api/memory/messages",
        params={"dataset": dataset, "task": "t"},
        headers=headers,
    )
    answer.raise_for_status()
    return [m["message"]["text"] for m in answer.json()]


def test_the_server_and_the_remote_client_name_one_tenant_per_id(served: Served) -> None:
    message = Message(speaker="Sara", text="I adopted a cat.", timestamp="2024-03-15T14:00:00Z")
    with RemoteMemory(served.url, served.keys["auth0"]) as remote:
        remote.add([message], scope=Scope(dataset=RAW, task="t"), extract=False)
        (listed,) = remote.scopes()
        assert listed == Scope(dataset=RAW, task="t")  # read back as the same tenant
        assert [m.message.text for m in remote.messages(scope=listed)] == ["I adopted a cat."]
    assert served.memory.messages(scope=Scope(dataset=RAW, task="t"))
    assert _texts(served, RAW) == ["I adopted a cat."]  # a raw id over HTTP: the same tenant
    assert _texts(served, OLD_PART, parts=True) == ["I adopted a cat."]  # its stored part
    assert _texts(served, OLD_PART) == []  # the literal string is another user


# -- a store file of the previous encoding -----------------------------------------------------
def _old_label(label: str) -> str:
    return "h-" + hashlib.blake2b(label.encode(), digest_size=16).hexdigest()


def test_a_store_file_of_the_old_encoding_is_moved_to_the_new_scopes(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    items = {  # namespace -> the scope the previous release kept its text in
        (RAW, "prefs"): Scope.stored(_old_label(RAW), "store", "prefs"),
        ("sara", "a:b"): Scope.stored("sara", "store", "a:b"),
        ("sara", "pets"): Scope.stored("sara", "store", "pets"),  # plain: unchanged
    }
    with Memory(tmp_path / "mem", dense=HashingEncoder(64)) as mem:
        conn = connect(str(path))
        for number, (namespace, old) in enumerate(items.items()):
            source_id = f"lgstore-{number}"
            text = f"Sara keeps item {number} in the blue box."
            message = Message(speaker="Sara", text=text, timestamp="2024-03-15T14:00:00Z")
            message = message.model_copy(update={"source_id": source_id})
            mem.add([message], scope=old, extract=False)
            ns, value = ns_text(namespace), json.dumps({"text": text})
            with conn:
                conn.execute("INSERT INTO namespaces (ns, seq) VALUES (?, ?)", (ns, number))
                conn.execute(
                    "INSERT INTO items (ns, key, value, created_at, updated_at, source_id) "
                    "VALUES (?, 'k', ?, ?, ?, ?)",
                    (
                        ns,
                        value,
                        message.timestamp.isoformat(),
                        message.timestamp.isoformat(),
                        source_id,
                    ),
                )
        set_layout(conn, 1)
        conn.close()
        with MembrainStore(memory=mem, path=path, extract=False) as store:
            assert layout(sqlite3.connect(path)) == FORMAT
            for number, namespace in enumerate(items):
                scope = store.scope_for(namespace)
                assert [m.message.source_id for m in mem.messages(scope=scope)] == [
                    f"lgstore-{number}"
                ]
                found = store.search(namespace, query=f"Where is item {number}?", limit=1)
                assert [(item.namespace, item.key) for item in found] == [(namespace, "k")]
        assert [m.message.source_id for m in mem.messages(scope=items[("sara", "pets")])] == [
            "lgstore-2"
        ]  # moved nothing that stayed in place
