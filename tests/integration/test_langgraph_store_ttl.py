"""The LangGraph store's TTLs, index config, similarity scores and sidecar upgrade.

TTLs run on the store's clock (``store._now``), moved by hand here: no test waits.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from langgraph.store.base import PutOp, SearchOp

import langchain_membrain.langgraph.store as store_module
from integration.served import Served, serving
from langchain_membrain.langgraph import (
    MembrainStore,
    RemoteMembrainStore,
    scope_for_namespace,
    user_scope,
)
from membrain import ConfigurationError, InputError, Memory, Scope
from membrain.background import BackgroundWriter
from membrain.remote import RemoteAccessError
from membrain.server import Access
from membrain.testing import HashingEncoder


class Clock:
    """The store's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = time.time()  # the memory's expiries are times: the store's clock starts now

    def __call__(self) -> float:
        return self.now

    def minutes(self, minutes: float) -> None:
        self.now += minutes * 60


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(store_module, "_now", made)
    return made


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(path=tmp_path / "membrain", dense=HashingEncoder(dim=64)) as mem:
        yield mem


def test_an_expired_item_is_invisible_at_once_and_its_facts_expire_when_swept(
    memory: Memory, clock: Clock
) -> None:
    ns = ("memories", "sara")
    ttl = {"default_ttl": 10, "refresh_on_read": True, "sweep_interval_minutes": 1}
    with (
        BackgroundWriter(memory, idle_seconds=60) as writer,
        MembrainStore(memory=memory, writer=writer, user_name="Sara", ttl=ttl) as store,  # type: ignore[arg-type]
    ):
        assert store.supports_ttl and store.ttl_config == ttl
        store.put(ns, "pet", {"text": "I adopted a grey cat named Miso."})  # default: 10 min
        store.put(ns, "home", {"text": "I live in Porto."}, ttl=None)  # never expires
        assert writer.flush(timeout=20)
        scope = store.scope_for(ns)
        miso = [f for f in memory.facts(scope=scope) if "Miso" in f.text]
        assert miso
        clock.minutes(8)
        assert store.get(ns, "pet") is not None  # a read restarts the TTL (refresh_on_read)
        clock.minutes(8)
        assert store.get(ns, "pet", refresh_ttl=False) is not None
        clock.minutes(3)  # 11 minutes after the refresh
        assert store.get(ns, "pet") is None
        assert [i.key for i in store.search(ns)] == ["home"]
        assert "pet" not in {i.key for i in store.search(ns, query="cat named Miso")}
        assert store.list_namespaces() == [ns]
        assert memory.facts(scope=scope)  # not swept yet: the facts are still there
        assert store.sweep_ttl() == 1
        assert store.sweep_ttl() == 0
        current = {f.id for f in memory.facts(scope=scope)}
        assert not current & {f.id for f in miso}
        # the memory's own expiry: the facts are marked expired (audited), not forgotten
        expired = memory.audit(scope=scope, actions=["expired"])
        assert {f.id for f in miso} <= {t for e in expired for t in e.targets}
        assert not memory.audit(scope=scope, actions=["forgotten"])
        kept = memory.facts(scope=scope, ids=[f.id for f in miso], include_inactive=True)
        assert {f.status.value for f in kept} == {"expired"}
        assert store.get(ns, "home") is not None
        # put again after expiry: a new item
        store.put(ns, "pet", {"text": "I adopted a dog."}, ttl=1)
        clock.minutes(2)
        store.put(ns, "pet", {"text": "I adopted a dog named Rex."})
        assert store.get(ns, "pet") is not None
        assert store.sweep_ttl() == 0


def test_ttl_checks_and_the_sweeper_thread(memory: Memory) -> None:
    with pytest.raises(ConfigurationError, match="unknown keys"):
        MembrainStore(memory=memory, ttl={"default": 5})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="positive"):
        MembrainStore(memory=memory, ttl={"default_ttl": -1})
    with MembrainStore(memory=memory, path=":memory:", extract=False) as store:
        with pytest.raises(InputError, match="ttl"):
            store.batch([PutOp(("a",), "k", {"v": 1}, None, ttl=0)])
        done = store.start_ttl_sweeper(sweep_interval_minutes=60)
        assert store.start_ttl_sweeper() is not done and not done.done()
        assert store.stop_ttl_sweeper(timeout=10)
        assert done.result(timeout=10) is None


async def test_an_async_caller_awaits_the_sweeper_start_as_langgraph_async_stores_allow(
    memory: Memory,
) -> None:
    with MembrainStore(memory=memory, path=":memory:", extract=False) as store:
        started = await store.start_ttl_sweeper(sweep_interval_minutes=60)
        assert not started.done()  # awaiting started it; it runs on
        assert store.stop_ttl_sweeper(timeout=10) and started.result(timeout=10) is None


def test_index_config_and_similarity_scores(memory: Memory) -> None:
    with MembrainStore(memory=memory, path=":memory:", extract=False) as plain:
        assert plain.index_config is None and plain.embeddings is None
    dense = memory.store.dense
    index = {"fields": ["title", "tags[*]"]}
    with MembrainStore(memory=memory, path=":memory:", extract=False, index=index) as store:  # type: ignore[arg-type]
        assert store.index_config == {"fields": ["title", "tags[*]"], "dims": 64, "embed": dense}
        store.put(("docs",), "a", {"title": "apple pie", "tags": ["baking", "dessert"]})
        store.put(("docs",), "b", {"title": "zzz qqq", "tags": ["other"]})
        store.put(("docs",), "c", {"title": "apple pie"}, index=False)
        hits = store.search(("docs",), query="dessert")
        # every item is ranked; the score is the best cosine over its fields (one per tag)
        assert [h.key for h in hits] == ["a", "b", "c"] and hits[2].score is None
        query = dense.embed_query("dessert")
        texts = ["apple pie", "baking", "dessert"]
        best = max(_cosine(query, v) for v in dense.embed_documents(texts))
        assert hits[0].score == pytest.approx(best) and best == pytest.approx(1.0)
        assert hits[1].score is not None and hits[1].score < best


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_a_sidecar_of_layout_2_moves_its_text_to_the_user_scopes(
    memory: Memory, tmp_path: Path
) -> None:
    path = tmp_path / "kv.sqlite"
    ns = ("memories", "sara")
    old = scope_for_namespace(ns, task="store")  # layout 2's default mapping
    with MembrainStore(memory=memory, path=path, extract=False, task="store") as store:
        store.put(ns, "pet", {"text": "Sara adopted a grey cat named Miso."})
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 2")
    assert old == Scope(dataset="memories", task="store", session="sara")
    with MembrainStore(memory=memory, path=path, extract=False) as store:
        assert store.scope_for(ns) == user_scope(ns) == Scope(dataset="sara", task="memories")
        [moved] = memory.messages(scope=user_scope(ns))
        assert moved.message.text == "Sara adopted a grey cat named Miso."
        assert store.search(ns, query="grey cat Miso")[0].key == "pet"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (3,)


# -- served ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys: dict[str, tuple[Sequence[str], Access]] = {
        "sara-writer": (["sara"], Access.WRITE),
        "admin": (["*"], Access.ADMIN),
    }
    with serving(tmp_path_factory.mktemp("served-ttl"), keys, writer=True) as state:
        yield state


def test_ttl_over_the_wire_and_the_served_sweep_is_audited(served: Served, clock: Clock) -> None:
    ns = ("notes", "sara")
    ttl = {"default_ttl": 5, "refresh_on_read": False}
    with (
        RemoteMembrainStore(served.url, served.keys["sara-writer"], ttl=ttl) as sara,  # type: ignore[arg-type]
        RemoteMembrainStore(served.url, served.keys["admin"]) as admin,
    ):
        assert sara.supports_ttl
        sara.put(ns, "pet", {"text": "I adopted a grey cat named Miso."})
        sara.put(ns, "home", {"text": "I live in Porto."}, ttl=60)
        BackgroundWriter.for_memory(served.memory).flush(timeout=30.0)
        scope = user_scope(ns)
        assert any("Miso" in f.text for f in served.memory.facts(scope=scope))
        clock.minutes(6)
        assert sara.get(ns, "pet") is None and sara.get(ns, "home") is not None
        with pytest.raises(RemoteAccessError) as refused:
            sara.sweep_ttl()  # sweeping every dataset needs an admin key for all of them
        assert refused.value.status == 403
        assert admin.sweep_ttl() == 1
        assert not any("Miso" in f.text for f in served.memory.facts(scope=scope))
        expired = served.memory.audit(scope=scope, actions=["expired"])
        assert expired and {e.actor.name for e in expired} == {"expiry"}


def test_filters_with_infinities_cross_the_wire(served: Served) -> None:
    ns = ("prices", "sara")
    with RemoteMembrainStore(served.url, served.keys["sara-writer"]) as sara:
        for key, price in {"a": 1.5, "b": 10, "c": -3}.items():
            sara.put(ns, key, {"price": price}, index=False)
        assert [i.key for i in sara.search(ns, filter={"price": {"$lt": float("inf")}})] == [
            "a",
            "b",
            "c",
        ]
        assert sara.search(ns, filter={"price": {"$lt": float("-inf")}}) == []
        [op] = [SearchOp(ns, {"price": {"$gt": float("-inf"), "$lte": 1.5}}, 10, 0)]
        assert [i.key for i in sara.batch([op])[0]] == ["a", "c"]  # type: ignore[union-attr]


def test_a_client_with_an_index_has_the_server_rank_every_item_by_similarity(
    served: Served,
) -> None:
    ns = ("docs", "sara")
    index = {"dims": 64, "embed": served.memory.store.dense, "fields": ["title"]}
    with RemoteMembrainStore(served.url, served.keys["sara-writer"], index=index) as sara:  # type: ignore[arg-type]
        sara.put(ns, "pie", {"title": "apple pie", "note": "zzz"})
        sara.put(ns, "misc", {"title": "qqq www", "note": "apple pie"})
        sara.put(ns, "plain", {"title": "apple pie"}, index=False)
        hits = sara.search(ns, query="apple pie")
        # every item, as a store with an index returns them: the unindexed one last, unscored
        assert [h.key for h in hits] == ["pie", "misc", "plain"]
        assert hits[0].score is not None and hits[1].score is not None
        assert hits[0].score > hits[1].score and hits[2].score is None
    with RemoteMembrainStore(served.url, served.keys["sara-writer"]) as plain:
        assert "plain" not in [h.key for h in plain.search(ns, query="apple pie")]
