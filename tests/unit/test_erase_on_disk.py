"""A purge leaves no trace on disk: Edge compaction and the lexical index's erase.

Each test first shows that its probe finds the deleted content in the files after a plain delete
(the positive control), then that it finds nothing once the content is erased.
"""

from __future__ import annotations

import re
import shutil
import struct
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from membrain import Scope
from membrain.api.errors import BackendError
from membrain.api.models import Fact
from membrain.backends.base import DENSE, SPARSE, BaseBackend, Collection, Point, VectorQuery
from membrain.backends.client import QdrantClientBackend
from membrain.backends.edge import EdgeBackend, open_edge_backend
from membrain.backends.lexical import LexicalIndex
from membrain.embeddings import SparseVector
from membrain.extraction.base import FactDraft
from membrain.knowledge.facts import build_facts
from membrain.testing import files_holding, tantivy_term

SCOPE = Scope(dataset="d", task="t")
OTHER = Scope(dataset="o", task="t")
SECRET = "zebraquokkasecret"
SECRET_DENSE = [0.5] * 4  # of unit length: stored as written, not normalised
SECRET_WEIGHT = 0.123456
# What a purged point leaves, as Edge writes it: payload text, and little-endian float32 vectors.
TRACES = {
    "payload": SECRET.encode(),
    "dense vector": struct.pack("<4f", *SECRET_DENSE),
    "sparse weight": struct.pack("<f", SECRET_WEIGHT),
}
WHEN = datetime(2023, 6, 1, tzinfo=UTC)


def holding(root: Path, needle: bytes) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``needle``."""
    return files_holding(root, needle)


def traces(root: Path) -> set[str]:
    """Which :data:`TRACES` of the purged points some file under ``root`` holds."""
    return {name for name, needle in TRACES.items() if holding(root, needle)}


# -- Qdrant Edge ---------------------------------------------------------------------------------
def dense(i: int) -> list[float]:
    return [1.0 if j == i % 4 else 0.1 for j in range(4)]


def point(scope: Scope, key: str, i: int, **payload: object) -> Point:
    return Point(
        scope.record_id(key),
        {"key": key, **payload},
        dense(i),
        SparseVector(indices=(i, 100 + i), values=(1.0, 0.5)),
    )


def secret(key: str, **payload: object) -> Point:
    sparse = SparseVector(indices=(7, 9), values=(SECRET_WEIGHT, SECRET_WEIGHT))
    return Point(SCOPE.record_id(key), {"key": key, **payload}, SECRET_DENSE, sparse)


KEPT = {
    Collection.FACTS: [
        (SCOPE, point(SCOPE, "f-keep", 1, status="active", text="kept fact")),
        (SCOPE, point(SCOPE, "f-old", 2, status="superseded", text="old fact")),
        (OTHER, point(OTHER, "f-other", 3, status="active", text="other tenant's fact")),
    ],
    Collection.MESSAGES: [
        (SCOPE, point(SCOPE, "m-keep", 1, status="active", text="kept message")),
        (OTHER, point(OTHER, "m-other", 2, status="active", text="other tenant's message")),
    ],
    Collection.ENTITIES: [
        (SCOPE, point(SCOPE, "e-keep", 1, name_key="sara")),
        (OTHER, point(OTHER, "e-other", 2, name_key="tom")),
    ],
    Collection.TREE: [(SCOPE, point(SCOPE, "t-keep", 1, level="1", parent="root"))],
}
# Secrets in indexed fields too (sources, name_key, parent): payload indexes keep values.
PURGED = {
    Collection.FACTS: secret("f-secret", status="active", text=f"the {SECRET}", sources=[SECRET]),
    Collection.MESSAGES: secret("m-secret", status="active", text=f"said {SECRET}"),
    Collection.ENTITIES: secret("e-secret", name_key=SECRET),
    Collection.TREE: secret("t-secret", level="1", parent=SECRET),
}


def open_store(path: Path, **options: int) -> EdgeBackend:
    backend = open_edge_backend(path, **options)
    backend.ensure_collections(dense_dim=4, dense_model="m", sparse_model="s")
    return backend


@pytest.fixture
def purged_store(tmp_path: Path) -> Path:
    """A closed store where the secret points were written, then deleted (not compacted)."""
    store = tmp_path / "store"
    backend = open_store(store)
    for collection, kept in KEPT.items():
        backend.upsert(collection, SCOPE, [PURGED[collection]])
        for scope, p in kept:
            backend.upsert(collection, scope, [p])
    for collection, p in PURGED.items():
        backend.delete(collection, SCOPE, [p.id])
    backend.optimize()  # an optimisation does not erase them either
    backend.close()
    for collection in PURGED:  # positive control: a delete leaves payload and vectors
        assert traces(store / collection.value) == set(TRACES)
    return store


def check_survivors(backend: EdgeBackend) -> None:
    """The kept points, by count, payload, index filter and both vectors."""
    for collection, kept in KEPT.items():
        for scope in (SCOPE, OTHER):
            mine = [p for s, p in kept if s == scope]
            assert backend.count(collection, scope) == len(mine)
            got = backend.retrieve(collection, scope, [p.id for p in mine])
            assert [g.payload["key"] for g in got] == [p.payload["key"] for p in mine]
            for g, p in zip(got, mine, strict=True):
                assert {k: g.payload[k] for k in p.payload} == dict(p.payload)
            for p in mine:
                assert p.dense is not None and p.sparse is not None
                for using, vector in ((DENSE, p.dense), (SPARSE, p.sparse)):
                    hits = backend.query(
                        collection, scope, [VectorQuery(using=using, vector=vector)], limit=1
                    )
                    assert [h.id for h in hits] == [p.id]
        assert backend.retrieve(collection, SCOPE, [PURGED[collection].id]) == []
    assert backend.count(Collection.FACTS, SCOPE, where={"status": "superseded"}) == 1
    assert backend.count(Collection.FACTS, SCOPE, where={"status": "active"}) == 1


def leftovers(store: Path) -> list[str]:
    return sorted(p.name for p in store.iterdir() if re.search(r"\.(compact\w+|old)$", p.name))


def test_compact_erases_deleted_points_from_every_file(purged_store: Path) -> None:
    backend = open_store(purged_store)
    schemas = {c: set(backend._shards[c].info().payload_schema) for c in Collection}
    backend.compact([*PURGED, Collection.FACTS])
    check_survivors(backend)  # usable right away, before any reopen
    backend.close()
    assert traces(purged_store) == set()
    assert leftovers(purged_store) == []

    reopened = open_store(purged_store)
    try:
        check_survivors(reopened)
        # The rewrite has the same payload indexes (the "status" filter above may run unindexed).
        assert {c: set(reopened._shards[c].info().payload_schema) for c in Collection} == schemas
        # Still writable, and a second compaction of a clean shard changes nothing.
        extra = point(SCOPE, "f-new", 2, status="active", text="written after")
        reopened.upsert(Collection.FACTS, SCOPE, [extra])
        reopened.compact([Collection.FACTS])
        assert reopened.count(Collection.FACTS, SCOPE) == 3
    finally:
        reopened.close()
    assert traces(purged_store) == set()


def test_compacted_points_count_towards_the_next_optimisation(tmp_path: Path) -> None:
    backend = open_store(tmp_path / "store", optimize_threshold=4)
    try:
        backend.upsert(Collection.FACTS, SCOPE, [point(SCOPE, f"k{i}", i) for i in range(3)])
        assert backend._written_since_optimize == 3
        backend.compact([Collection.MESSAGES])  # empty: nothing copied
        assert backend._written_since_optimize == 3
        backend.compact([Collection.FACTS])  # 3 more vectors pass the threshold: optimised
        assert backend._written_since_optimize == 0
        assert backend.count(Collection.FACTS, SCOPE) == 3
    finally:
        backend.close()
    with pytest.raises(BackendError, match="is closed"):
        backend.compact([Collection.FACTS])


# Folders a compaction can leave when the process dies, as suffix -> what it holds: the shard
# before compaction ("old"), its complete rewrite ("new"), or a rewrite cut short ("part").
STOPPED = {
    "rewrite half written": {"": "old", ".compacting": "part"},
    "rewrite complete": {"": "old", ".compacted": "new"},
    "shard moved aside": {".old": "old", ".compacted": "new"},
    "swapped, old not deleted": {"": "new", ".old": "old"},
    "main folder missing": {".old": "old", ".compacting": "part"},
}
ERASED = {"rewrite complete", "shard moved aside", "swapped, old not deleted"}
"""The states where the rewrite is known complete, so reopening finishes the compaction."""


def leave(folder: Path, state: str) -> None:
    """Turn ``folder`` and its complete rewrite ``<folder>.compacted`` into ``state``."""
    versions = {
        "old": folder.rename(folder.with_name(folder.name + "-old")),
        "new": folder.with_name(folder.name + ".compacted").rename(
            folder.with_name(folder.name + "-new")
        ),
    }
    for suffix, version in STOPPED[state].items():
        target = folder.with_name(folder.name + suffix)
        versions["new" if version == "part" else version].rename(target)
        if version == "part":
            shutil.rmtree(target / "segments")
    for left in versions.values():
        if left.exists():
            shutil.rmtree(left)


@pytest.mark.parametrize("shift", [0, 1], ids=["first layout", "second layout"])
def test_a_compaction_stopped_midway_leaves_a_complete_shard(
    purged_store: Path, shift: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each collection is left in another state; two layouts cover every state.
    names = list(STOPPED)
    states = {c: names[(i + shift * 4) % len(names)] for i, c in enumerate(PURGED)}
    backend = open_store(purged_store)
    with monkeypatch.context() as patch:
        # The process "dies" once each rewrite is complete: the swap never happens.
        patch.setattr("membrain.backends.edge._recover", lambda folder: None)
        backend.compact(list(PURGED))
    backend.close()
    for collection, state in states.items():
        folder = purged_store / collection.value
        assert traces(folder) == set(TRACES)
        assert traces(folder.with_name(folder.name + ".compacted")) == set()
        leave(folder, state)

    reopened = open_store(purged_store)
    try:
        check_survivors(reopened)
    finally:
        reopened.close()
    assert leftovers(purged_store) == []
    for collection, state in states.items():
        left = traces(purged_store / collection.value)
        assert left == (set() if state in ERASED else set(TRACES)), (collection, state)


# -- qdrant-client -------------------------------------------------------------------------------
def test_client_backend_compact_is_a_harmless_no_op() -> None:
    assert "_compact" not in BaseBackend.__abstractmethods__  # third-party engines need not
    backend = QdrantClientBackend(QdrantClient(location=":memory:"))
    try:
        backend.ensure_collections(dense_dim=4, dense_model="m", sparse_model="s")
        for collection, kept in KEPT.items():
            for scope, p in kept:
                backend.upsert(collection, scope, [p])
        backend.compact(list(Collection))
        assert backend.count(Collection.FACTS, SCOPE) == 2
        assert backend.count(Collection.MESSAGES, OTHER) == 1
    finally:
        backend.close()


# -- the lexical index ---------------------------------------------------------------------------
SARA = Scope(dataset="sara", task="assistant")
TOM = Scope(dataset="tom", task="assistant")
MARK = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def fact(scope: Scope, text: str) -> Fact:
    draft = FactDraft(text=text, sources=("m0",), stated_at=WHEN)
    built, _ = build_facts(scope, [draft], extractor="test", recorded_at=WHEN)
    return built[0]


def segments(path: Path) -> set[str]:
    return {f.name.split(".")[0] for f in path.iterdir() if re.match(r"[0-9a-f]{32}\.", f.name)}


def test_erase_deletes_the_files_that_held_deleted_documents(tmp_path: Path) -> None:
    lexical_path = tmp_path / "lexical"
    secret = fact(SARA.model_copy(update={"session": "s1"}), f"[Sara] hid the {SECRET} here.")
    kept = fact(SARA.model_copy(update={"session": "s2"}), "[Sara] bakes bread.")
    tom = fact(TOM, "[Tom] plays chess.")
    probe = tantivy_term(SECRET)
    with LexicalIndex(lexical_path) as index:
        index.add(SARA, [secret, kept])  # one segment: deleting one of them keeps the segment
        index.add(TOM, [tom])
        index.catch_up(SARA, [], mark=MARK)
        index.catch_up(TOM, [], mark=MARK)
        index.delete_scope(secret.scope)
        assert index.mark(SARA) == index.mark(TOM) == MARK  # a session's documents went, no more
        assert index.search(SARA, SECRET, limit=5) == []
        assert index.count(SARA) == 1
        # Positive control: the deleted document's term and stored id are still in the files.
        assert holding(lexical_path, probe) and holding(lexical_path, secret.id.encode())
        before = segments(lexical_path)
        assert before

        index.erase()
        assert index.mark(SARA) is None and index.mark(TOM) is None  # rebuilt before trusted
        assert index.count(SARA) == index.count(TOM) == 0
        assert index.search(SARA, "bread", limit=5) == []
    assert segments(lexical_path) & before == set()
    for needle in (probe, secret.id.encode(), kept.id.encode(), tom.id.encode()):
        assert holding(lexical_path, needle) == []

    with LexicalIndex(lexical_path) as reopened:
        assert not reopened.created  # the erased index is opened, empty, not recreated
        assert reopened.mark(SARA) is None
        assert reopened.count(SARA) == reopened.count(TOM) == 0
        reopened.rebuild(SARA, [kept])  # what an owner does for a scope it uses again
        assert [i for i, _ in reopened.search(SARA, "bread", limit=5)] == [kept.id]


def test_erase_in_memory_and_scope_deleted() -> None:
    with LexicalIndex(None) as index:
        index.add(SARA, [fact(SARA, "[Sara] bakes bread.")])
        index.catch_up(SARA, [], mark=MARK)
        index.catch_up(TOM, [], mark=MARK)
        index.scope_deleted(TOM)
        assert index.mark(SARA) == MARK and index.mark(TOM) is None
        index.erase()
        assert index.mark(SARA) is None and index.count(SARA) == 0
        index.add(SARA, [fact(SARA, "[Sara] sings.")])  # the writer is live again
        assert index.count(SARA) == 1
    with pytest.raises(BackendError, match="closed"):
        index.erase()


def test_reads_wait_for_a_compaction_and_never_see_a_closed_shard(tmp_path: Path) -> None:
    backend = open_edge_backend(tmp_path / "store")
    backend.ensure_collections(dense_dim=4, dense_model="m", sparse_model="s")
    scope = Scope(dataset="d", task="t")
    ids = [str(uuid.uuid4()) for _ in range(200)]
    backend.upsert(
        Collection.FACTS,
        scope,
        [
            Point(i, {"status": "active"}, dense=[1.0, 0.0, 0.0, float(n)])
            for n, i in enumerate(ids)
        ],
    )
    errors: list[BaseException] = []
    counts: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                counts.append(backend.count(Collection.FACTS, scope))
            except BaseException as exc:  # noqa: BLE001 - any failure is the finding
                errors.append(exc)
                return

    readers = [threading.Thread(target=read) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        for _ in range(5):
            backend.compact([Collection.FACTS])
    finally:
        stop.set()
        for thread in readers:
            thread.join()
        backend.close()
    assert not errors
    assert counts and set(counts) == {200}
