"""The embedded default backend: Qdrant Edge, Qdrant's engine in-process, on disk.

Each collection is one Edge shard in a folder under the store's path. Edge builds HNSW and
optimised segments only when :meth:`EdgeBackend.optimize` runs; the backend calls it once the
number of vectors written since the last optimisation passes ``optimize_threshold``, and callers
may call it after a bulk load. Segments are kept many and bounded (:data:`SEGMENTS`,
:data:`SEGMENT_KB`), so an optimisation indexes what was written since the last one instead of
merging it into one large segment and indexing that again.

An Edge shard allows one owner per folder, so backends are shared per resolved path: every
``open_edge_backend(path)`` in a process returns the same thread-safe object.

A delete only hides points: their payloads and vectors stay in the shard's write-ahead log
(``wal/``) and segments (``payload_storage``, vector storage), even after an optimisation.
:meth:`EdgeBackend.compact` rewrites a shard with its live points only (see :func:`_recover`
for how a compaction that stopped midway is finished or undone).
"""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from membrain.api.errors import BackendError, ConfigurationError
from membrain.backends.base import DENSE, SPARSE, BaseBackend
from membrain.backends.owner import FolderLock
from membrain.backends.points import (
    DATETIME_FIELDS,
    INDEXED_FIELDS,
    Collection,
    Filter,
    Point,
    ScoredPoint,
    VectorQuery,
    scored,
)
from membrain.embeddings import SparseVector

__all__ = ["EdgeBackend", "holds_store", "open_edge_backend"]

SEGMENTS = 32
"""Segments a shard may hold before the engine merges the smallest ones.

Qdrant's default on a 2-core machine is 2, so every optimisation merged the new points into one
large segment and rebuilt its HNSW index: an optimisation cost more the larger the shard, and a
load the square of its size (``benchmarks/scale.py``, 20,000 to 100,000 facts: 68% of the time
in optimisations, 247 facts/s; with 32 segments of at most :data:`SEGMENT_KB`, 691 facts/s).
"""
SEGMENT_KB = 100_000
"""The size (KB) a merge stops at: the engine never merges large segments together again."""
_META = "membrain.json"
_FORMAT = 1
_COPY_PAGE = 1_000
# Siblings of a shard folder during a compaction: the rewrite being written (never complete),
# the complete rewrite waiting to replace the shard, and the replaced shard.
_COMPACTING, _COMPACTED, _OLD = ".compacting", ".compacted", ".old"


def _native(where: Filter) -> qe.Filter:
    conditions: list[Any] = []
    for c in where.conditions:
        if c.kind == "ids":
            conditions.append(qe.HasIdCondition(set(c.value)))
        elif c.kind == "range":
            conditions.append(qe.FieldCondition(c.key, range=qe.RangeDateTime(**c.value.iso())))
        elif c.kind == "any":
            conditions.append(qe.FieldCondition(c.key, match=qe.MatchAny(c.value)))
        elif c.kind == "empty":
            conditions.append(qe.IsEmptyCondition(c.key))
        else:
            conditions.append(qe.FieldCondition(c.key, match=qe.MatchValue(c.value)))
    return qe.Filter(must=conditions)


def _vector(value: Sequence[float] | SparseVector) -> Any:
    if isinstance(value, SparseVector):
        return qe.SparseVector(list(value.indices), list(value.values))
    if isinstance(value, list):  # the encoders' own: already floats, no copy
        return value
    return [float(x) for x in value]


def _sibling(folder: Path, suffix: str) -> Path:
    return folder.with_name(folder.name + suffix)


def holds_store(path: str | Path) -> bool:
    """Whether ``path`` is the folder of an embedded store (an empty folder is not)."""
    return (Path(path) / _META).is_file()


def _holds_shard(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _recover(folder: Path) -> None:
    """Leave one complete shard in ``folder`` after a compaction, finished or stopped midway.

    A compaction writes ``<name>.compacting``, renames it ``<name>.compacted`` once complete,
    renames ``<name>`` to ``<name>.old``, ``<name>.compacted`` to ``<name>``, then deletes
    ``<name>.old``. This runs those steps from wherever they stopped: a complete rewrite
    replaces the shard, an incomplete one is deleted, and ``<name>.old`` comes back only when
    nothing else holds the collection.
    """
    compacting, compacted, old = (_sibling(folder, s) for s in (_COMPACTING, _COMPACTED, _OLD))
    if compacting.exists():
        shutil.rmtree(compacting)
    if compacted.exists():
        if _holds_shard(folder):
            if old.exists():
                shutil.rmtree(old)
            folder.rename(old)
        elif folder.exists():
            folder.rmdir()
        compacted.rename(folder)
    if old.exists():
        if _holds_shard(folder):
            shutil.rmtree(old)
        else:
            if folder.exists():
                folder.rmdir()
            old.rename(folder)


def _copy_points(source: Any, target: Any) -> int:
    """Copy every point of ``source`` (vectors and payload) into ``target``; how many."""
    copied = 0
    offset: Any = None
    while True:
        request = qe.ScrollRequest(
            offset=offset, limit=_COPY_PAGE, with_payload=True, with_vector=True
        )
        records, offset = source.scroll(request)
        if records:
            points = [qe.Point(r.id, r.vector or {}, r.payload or {}) for r in records]
            target.update(qe.UpdateOperation.upsert_points(points))
            copied += len(points)
        if offset is None:
            return copied


class EdgeBackend(BaseBackend):
    """Qdrant Edge shards under one folder. Use :func:`open_edge_backend` to get one.

    Args:
        path: Folder holding the shards (created if missing).
        optimize_threshold: Vectors written since the last optimisation that trigger one.
    """

    engine = "Qdrant Edge"
    exclusive = True  # the folder lock keeps other processes out

    def __init__(self, path: Path, *, optimize_threshold: int = 20_000) -> None:
        super().__init__()
        self.path = path
        self._shards: dict[Collection, Any] = {}
        self._dense_dim = 0
        self._written_since_optimize = 0
        self._optimize_threshold = optimize_threshold
        self._users = 0
        self._closed = False
        self._owner = FolderLock(path)

    # -- lifecycle ---------------------------------------------------------------------------
    def _ensure(self, dense_dim: int, dense_model: str, sparse_model: str) -> None:
        """Create or open the shards; refuse a store built with other models."""
        wanted = {
            "format": _FORMAT,
            "dense_dim": dense_dim,
            "dense_model": dense_model,
            "sparse_model": sparse_model,
        }
        if self._closed:
            raise BackendError(f"the store at {self.path} is closed; open it again")
        meta_path = self.path / _META
        if meta_path.exists():
            stored = json.loads(meta_path.read_text())
            if stored != wanted:
                raise ConfigurationError(
                    f"the store at {self.path} was built with {stored}, not {wanted}; "
                    "open it with the same models or use another path"
                )
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            meta_path.write_text(json.dumps(wanted, indent=2))
        self._dense_dim = dense_dim
        for collection in Collection:
            if collection not in self._shards:
                self._shards[collection] = self._open_shard(collection, dense_dim)

    def _open_shard(
        self, collection: Collection, dense_dim: int, folder: Path | None = None
    ) -> Any:
        """Open or create a collection's shard, in its own folder unless ``folder`` is given."""
        if folder is None:
            folder = self.path / collection.value
            _recover(folder)
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dense_dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            optimizers=qe.EdgeOptimizersConfig(
                default_segment_number=SEGMENTS, max_segment_size=SEGMENT_KB
            ),
        )
        if folder.exists() and any(folder.iterdir()):
            shard = qe.EdgeShard.load(str(folder), config)
        else:
            shard = qe.EdgeShard.create(str(folder), config)
        existing = set(shard.info().payload_schema)
        wanted: list[tuple[str, Any]] = [("tenant", qe.KeywordIndexParams(is_tenant=True))]
        wanted += [(n, qe.KeywordIndexParams()) for n in ("session", *INDEXED_FIELDS[collection])]
        wanted += [(n, qe.DatetimeIndexParams()) for n in DATETIME_FIELDS.get(collection, ())]
        for name, params in wanted:  # a store made by an older version gains new indexes here
            if name not in existing:
                shard.update(qe.UpdateOperation.create_field_index(name, params))
        return shard

    def _index_field(self, collection: Collection, field: str, kind: str) -> None:
        shard = self._shard(collection)
        if field not in shard.info().payload_schema:
            params = qe.KeywordIndexParams() if kind == "keyword" else qe.IntegerIndexParams()
            shard.update(qe.UpdateOperation.create_field_index(field, params))

    def _shard(self, collection: Collection) -> Any:
        if self._closed:
            raise BackendError(f"the store at {self.path} is closed")
        try:
            return self._shards[collection]
        except KeyError:
            raise BackendError("ensure_collections() must run before any other call") from None

    def optimize(self) -> None:
        """Build HNSW and merge segments for everything written so far.

        Each shard is flushed after its optimisation: Qdrant Edge deletes the segments a merge
        replaced only on a flush, so without it every optimisation left a full copy of the
        shard behind (the facts shard of a 92,000-fact store held 14 merged segments, 570,000
        vectors, until the store was closed).
        """
        with self._lock, self._errors("optimize"):
            if self._closed:
                raise BackendError(f"the store at {self.path} is closed")
            for shard in self._shards.values():
                shard.optimize()
                shard.flush()
            self._written_since_optimize = 0

    def close(self) -> None:
        """Flush and close the shards (the last user of a shared backend closes them).

        Closing an already closed backend does nothing; in particular it never touches a newer
        backend opened on the same path since.
        """
        # Held throughout, so a concurrent open of the same path waits until the folder is free.
        with _registry_lock:
            if self._closed:
                return
            self._users -= 1
            if self._users > 0:
                return
            if _registry.get(self.path) is self:
                del _registry[self.path]
            with self._lock:
                self._closed = True
                with self._errors("close"):
                    for shard in self._shards.values():
                        shard.flush()
                        shard.close()
                self._shards.clear()
                self._owner.release()

    @property
    def location(self) -> str:
        """The store's folder."""
        return f"the store at {self.path}"

    # -- primitives ------------------------------------------------------------------------
    def _compact(self, collection: Collection) -> None:
        """Rewrite the shard with its live points only, then put the rewrite in its place.

        The rewrite has the same configuration and payload indexes; its points count as written
        for the next optimisation (it has no HNSW until then). The old folder, with the deleted
        points' log and segments, is deleted. Reads wait while it runs
        (:class:`~membrain.backends.base.ReadGate`).
        """
        shard = self._shard(collection)
        folder = self.path / collection.value
        compacting = _sibling(folder, _COMPACTING)
        if compacting.exists():
            shutil.rmtree(compacting)
        fresh = self._open_shard(collection, self._dense_dim, compacting)
        try:
            copied = _copy_points(shard, fresh)
            fresh.flush()
        except BaseException:
            fresh.close()
            shutil.rmtree(compacting, ignore_errors=True)
            raise
        fresh.close()
        compacting.rename(_sibling(folder, _COMPACTED))  # complete: from here on it wins
        shard.flush()
        shard.close()  # left in place until the swap, so a racing read fails as on a closed shard
        try:
            _recover(folder)  # swaps the rewrite in and deletes the old folder
        finally:
            self._shards[collection] = self._open_shard(collection, self._dense_dim)
        self._written_since_optimize += copied
        if self._written_since_optimize >= self._optimize_threshold:
            self.optimize()

    def _upsert(self, collection: Collection, points: Sequence[Point]) -> None:
        edge_points = []
        for point in points:
            vectors: dict[str, Any] = {}
            if point.dense is not None:
                vectors[DENSE] = _vector(point.dense)
            if point.sparse is not None:
                vectors[SPARSE] = _vector(point.sparse)
            edge_points.append(qe.Point(uuid.UUID(point.id), vectors, dict(point.payload)))
        self._shard(collection).update(qe.UpdateOperation.upsert_points(edge_points))
        self._written_since_optimize += len(edge_points)
        if self._written_since_optimize >= self._optimize_threshold:
            self.optimize()

    def _set_payload(self, collection: Collection, where: Filter, values: dict[str, Any]) -> None:
        operation = qe.UpdateOperation.set_payload_by_filter(_native(where), values)
        self._shard(collection).update(operation)

    def _delete(self, collection: Collection, where: Filter) -> None:
        operation = qe.UpdateOperation.delete_points_by_filter(_native(where))
        self._shard(collection).update(operation)

    def _scroll(
        self, collection: Collection, where: Filter, limit: int, offset: uuid.UUID | None
    ) -> tuple[list[ScoredPoint], str | None]:
        request = qe.ScrollRequest(
            offset=offset, limit=limit, filter=_native(where), with_payload=True
        )
        records, next_offset = self._shard(collection).scroll(request)
        return [scored(r) for r in records], str(next_offset) if next_offset else None

    def _fetch(self, collection: Collection, ids: Sequence[uuid.UUID]) -> list[ScoredPoint]:
        return [scored(r) for r in self._shard(collection).retrieve(list(ids), True, False)]

    def _tenants(self, collection: Collection, where: Filter) -> list[str]:
        request = qe.FacetRequest(key="tenant", limit=1_000_000, exact=True, filter=_native(where))
        return [str(hit.value) for hit in self._shard(collection).facet(request).hits]

    def _count(self, collection: Collection, where: Filter) -> int:
        request = qe.CountRequest(filter=_native(where), exact=True)
        return int(self._shard(collection).count(request))

    def _query(
        self,
        collection: Collection,
        where: Filter,
        queries: Sequence[tuple[VectorQuery, Filter]],
        limit: int,
        rrf_k: int,
        payload: bool | Sequence[str] = True,
    ) -> list[ScoredPoint]:
        selected: Any = payload if isinstance(payload, bool) else list(payload)
        if len(queries) == 1:
            q, own = queries[0]
            request = qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(_vector(q.vector), using=q.using),
                filter=_native(own),
                with_payload=selected,
            )
        else:
            # The stubs type Fusion.Rrf as its own class, but the engine takes it as a query.
            fusion: Any = qe.Fusion.Rrf(k=rrf_k, weights=[q.weight for q, _ in queries])
            request = qe.QueryRequest(
                limit=limit,
                prefetches=[
                    qe.Prefetch(
                        limit=q.limit,
                        query=qe.Query.Nearest(_vector(q.vector), using=q.using),
                        filter=_native(own),
                    )
                    for q, own in queries
                ],
                query=fusion,
                filter=_native(where),
                with_payload=selected,
            )
        return [scored(p) for p in self._shard(collection).query(request)]

    def _query_batch(
        self,
        collection: Collection,
        lookups: Sequence[tuple[VectorQuery, Filter]],
        payload: bool | Sequence[str],
    ) -> list[list[ScoredPoint]]:
        selected: Any = payload if isinstance(payload, bool) else list(payload)
        requests = [
            qe.QueryRequest(
                limit=q.limit,
                query=qe.Query.Nearest(_vector(q.vector), using=q.using),
                filter=_native(own),
                with_payload=selected,
            )
            for q, own in lookups
        ]
        found = self._shard(collection).query_batch(qe.QueryBatchRequest(requests))
        return [[scored(p) for p in points] for points in found]


_registry_lock = threading.Lock()
_registry: dict[Path, EdgeBackend] = {}


def open_edge_backend(path: str | Path, *, optimize_threshold: int = 20_000) -> EdgeBackend:
    """The process-wide backend for ``path`` (one owner per folder); call ``close()`` when done."""
    resolved = Path(path).expanduser().resolve()
    with _registry_lock:
        backend = _registry.get(resolved)
        if backend is None:
            backend = EdgeBackend(resolved, optimize_threshold=optimize_threshold)
            backend._owner.acquire()
            _registry[resolved] = backend
        backend._users += 1
        return backend
