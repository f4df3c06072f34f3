"""Caller-given JSON is bounded before anything is stored: depth, integer size, on every surface.

Metadata nested past about 120 levels was stored and then could not be read back by the storage
engine: the tenant's reads failed, every other tenant's purge and delete failed, and the store
no longer opened. The bound (:data:`membrain.api.checks.MAX_JSON_DEPTH`) refuses it first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.store.base import PutOp, SearchOp
from store_templates import empty_store

from integration.served import Served, serving
from langchain_membrain.langgraph import MembrainStore, RemoteMembrainStore
from membrain import InputError, Memory, Message, Scope
from membrain.aio import AsyncMemory
from membrain.api.audit import AuditEvent
from membrain.api.checks import MAX_JSON_DEPTH, json_depth
from membrain.remote import AsyncRemoteMemory, RemoteMemory
from membrain.server import Access
from membrain.testing import HashingEncoder

ALICE = Scope(dataset="alice", task="assistant")
BOB = Scope(dataset="bob", task="assistant")


def nested(depth: int) -> dict[str, Any]:
    """A JSON object ``depth`` levels deep: ``{"k": {"k": ... {"x": 1}}}``."""
    value: dict[str, Any] = {"x": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def said(text: str, metadata: object = None, minute: int = 1) -> dict[str, Any]:
    message: dict[str, Any] = {
        "speaker": "Alice",
        "text": text,
        "timestamp": f"2024-03-15T14:{minute:02d}:00Z",
    }
    if metadata is not None:
        message["metadata"] = metadata
    return message


def test_depth_is_counted_without_recursion() -> None:
    assert json_depth(nested(3)) == 3
    assert json_depth([1, [2, [3]]]) == 3
    assert json_depth("text") == 0
    assert json_depth(nested(100_000)) == MAX_JSON_DEPTH + 1  # stops past the bound


@pytest.mark.parametrize("depth", [33, 64, 126, 5_000])
def test_deep_metadata_is_refused_as_a_record_field(depth: int) -> None:
    with pytest.raises(InputError, match="nested deeper than 32"):
        Message(speaker="Alice", text="I adopted a cat.", metadata=nested(depth))


def test_the_deepest_accepted_metadata_is_read_back(tmp_path: Path) -> None:
    with Memory(empty_store(tmp_path), dense=HashingEncoder(64)) as mem:
        mem.add([said("I adopted a cat named Miso.", nested(MAX_JSON_DEPTH))], scope=ALICE)
        (fact,) = mem.facts(scope=ALICE)
        assert json_depth(fact.metadata) == MAX_JSON_DEPTH
        assert mem.messages(scope=ALICE)[0].message.metadata == nested(MAX_JSON_DEPTH)


def test_deep_metadata_leaves_the_store_working_for_every_tenant(tmp_path: Path) -> None:
    with Memory(empty_store(tmp_path), dense=HashingEncoder(64)) as mem:
        mem.add([said("I adopted a cat named Miso.")], scope=ALICE)
        mem.add([said("I adopted a dog named Rex.")], scope=BOB)
        with pytest.raises(InputError, match="metadata"):
            mem.add([said("I moved to Porto.", nested(126), minute=2)], scope=ALICE)
        assert [m.message.text for m in mem.messages(scope=ALICE)] == [
            "I adopted a cat named Miso."
        ]
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:  # the store opens again
        assert len(mem.facts(scope=ALICE)) == 1
        (bobs,) = mem.facts(scope=BOB)
        mem.purge([bobs.id], scope=BOB, messages=True)
        assert mem.delete_dataset("bob") == [BOB]
        assert mem.facts(scope=BOB) == []
        assert len(mem.facts(scope=ALICE)) == 1


def test_big_integers_are_refused_in_metadata_and_filters(tmp_path: Path) -> None:
    with Memory(empty_store(tmp_path), dense=HashingEncoder(64)) as mem:
        mem.add([said("I adopted a cat named Miso.", {"n": 2**63 - 1})], scope=ALICE)
        with pytest.raises(InputError, match="64-bit"):
            mem.add([said("I moved to Porto.", {"n": [2**63]}, minute=2)], scope=ALICE)
        for call in (mem.facts, lambda **kw: mem.search("cat", **kw)):
            with pytest.raises(InputError, match="64-bit"):
                call(scope=ALICE, filters={"n": 10**30})
        assert len(mem.facts(scope=ALICE, filters={"n": 2**63 - 1})) == 1


def test_a_list_value_matches_a_filter_on_one_of_its_items_in_every_read(tmp_path: Path) -> None:
    with Memory(empty_store(tmp_path), dense=HashingEncoder(64)) as mem:
        mem.add([said("I adopted a cat named Miso.", {"tags": ["pets", "home"]})], scope=ALICE)
        mem.add([said("I work at a bakery in Porto.", {"tags": ["work"]}, 2)], scope=ALICE)
        for filters, wanted in (({"tags": "pets"}, "Miso"), ({"tags": {"in": ["work"]}}, "Porto")):
            listed = [f.text for f in mem.facts(scope=ALICE, filters=filters)]
            found = [h.fact.text for h in mem.search("Alice", scope=ALICE, filters=filters)]
            assert len(listed) == 1 and wanted in listed[0]
            assert found == listed
        assert mem.facts(scope=ALICE, filters={"tags": "nothing"}) == []


@pytest.mark.parametrize("depth", [33, 5_000])
def test_deep_filters_are_refused_by_every_read(tmp_path: Path, depth: int) -> None:
    deep = {"project": nested(depth)}
    with Memory(empty_store(tmp_path), dense=HashingEncoder(64)) as mem:
        for read in (
            lambda: mem.facts(scope=ALICE, filters=deep),
            lambda: mem.search("cat", scope=ALICE, filters=deep),
            lambda: mem.context("cat", scope=ALICE, filters=deep),
        ):
            with pytest.raises(InputError, match="nested deeper than 32"):
                read()


async def test_the_async_memory_refuses_the_same(tmp_path: Path) -> None:
    async with AsyncMemory(empty_store(tmp_path), dense=HashingEncoder(64)) as mem:
        with pytest.raises(InputError, match="nested deeper than 32"):
            await mem.add([said("I adopted a cat.", nested(64))], scope=ALICE)
        assert await mem.messages(scope=ALICE) == []


def test_imported_event_details_are_bounded() -> None:
    with pytest.raises(InputError, match="nested deeper than 32"):
        AuditEvent.model_validate(
            {
                "id": "e1",
                "scope": {"dataset": "alice"},
                "action": "created",
                "targets": [],
                "actor": "api",
                "at": "2024-03-15T14:01:00Z",
                "details": nested(64),
            }
        )


def test_langgraph_store_refuses_deep_values_and_filters(tmp_path: Path) -> None:
    with (
        Memory(empty_store(tmp_path / "m"), dense=HashingEncoder(64)) as mem,
        MembrainStore(memory=mem, path=tmp_path / "kv.sqlite", extract=False) as store,
    ):
        with pytest.raises(InputError, match="nested deeper than 32"):
            store.batch([PutOp(("alice", "notes"), "k", nested(64))])
        with pytest.raises(InputError, match="nested deeper than 32"):
            store.batch([SearchOp(("alice",), filter={"a": nested(5_000)})])
        store.put(("alice", "notes"), "k", {"deep": nested(MAX_JSON_DEPTH - 1)})
        assert store.get(("alice", "notes"), "k") is not None


# -- served: the same refusal over HTTP and from both remote clients -----------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {"alice-writer": (["alice"], Access.WRITE), "bob-admin": (["bob"], Access.ADMIN)}
    with serving(tmp_path_factory.mktemp("bounds"), keys) as state:
        with state.remote("bob-admin") as bob:
            bob.add([said("I adopted a dog named Rex.")], scope=BOB)
        yield state


def post(served: Served, route: str, body: str, key: str = "alice-writer") -> httpx.Response:
    return httpx.post(
        f"{served.url}/api/memory/{route}",
        content=body,
        headers={"content-type": "application/json", "authorization": f"Bearer {served.keys[key]}"},
    )


def test_one_small_request_cannot_poison_the_served_store(served: Served) -> None:
    message = said("I adopted a cat named Miso.", nested(126))
    body = json.dumps({"dataset": "alice", "task": "assistant", "messages": [message]})
    assert len(body) < 1_200
    answer = post(served, "add", body)
    assert answer.status_code == 422 and answer.json()["type"] == "InputError"
    assert served.memory.messages(scope=ALICE) == []
    with served.remote("bob-admin") as bob:  # another tenant's erasure still works
        assert bob.delete_dataset("bob") == [BOB]


@pytest.mark.parametrize("depth", [64, 5_000])
def test_deep_filters_answer_422_on_every_route(served: Served, depth: int) -> None:
    deep = '{"project":' * depth + "1" + "}" * depth
    for route in ("search", "context"):
        body = f'{{"dataset":"alice","task":"assistant","query":"cat","filters":{deep}}}'
        answer = post(served, route, body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["type"] == "InputError"
    short = min(depth, 1_500)  # a query string is shorter; 1,500 still defeats a recursive parse
    listed = httpx.get(
        f"{served.url}/api/memory/facts",
        params={
            "dataset": "alice",
            "task": "assistant",
            "filters": '{"project":' * short + "1" + "}" * short,
        },
        headers={"authorization": f"Bearer {served.keys['alice-writer']}"},
    )
    assert listed.status_code == 422 and listed.json()["type"] == "InputError"


def test_the_remote_clients_refuse_before_sending(served: Served) -> None:
    with RemoteMemory(served.url, served.keys["alice-writer"]) as remote:
        with pytest.raises(InputError, match="nested deeper than 32"):
            remote.add([said("I adopted a cat.", nested(64))], scope=ALICE)
        with pytest.raises(InputError, match="nested deeper than 32"):
            remote.search("cat", scope=ALICE, filters={"p": nested(64)})
        with pytest.raises(InputError, match="64-bit"):
            remote.facts(scope=ALICE, filters={"n": 10**30})


async def test_the_async_remote_client_refuses_the_same(served: Served) -> None:
    async with AsyncRemoteMemory(served.url, served.keys["alice-writer"]) as remote:
        with pytest.raises(InputError, match="nested deeper than 32"):
            await remote.add([said("I adopted a cat.", nested(64))], scope=ALICE)


def test_the_served_langgraph_store_refuses_deep_filters(served: Served) -> None:
    with (
        RemoteMembrainStore(served.url, served.keys["alice-writer"]) as store,
        pytest.raises(InputError, match="nested deeper than 32"),
    ):
        store.search(("alice",), filter={"a": nested(5_000)})
