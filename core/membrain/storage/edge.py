"""The embedded default backend: Qdrant Edge, Qdrant's engine in-process, on disk.

Each collection is one Edge shard in a folder under the store's path. Edge builds HNSW and
optimised segments only when :meth:`EdgeBackend.optimize` runs; the backend calls it once the
number of vectors written since the last optimisation passes ``optimize_threshold``, and callers
may call it after a bulk load.

An Edge shard allows one owner per folder, so backends are shared per resolved path: every
``open_edge_backend(path)`` in a process returns the same thread-safe object.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from membrain.embeddings import SparseVector
from membrain.errors import BackendError, ConfigurationError, MembrainError
from membrain.models import Scope
from membrain.storage.base import (
    DATETIME_FIELDS,
    DENSE,
    INDEXED_FIELDS,
    SPARSE,
    Collection,
    Point,
    ScoredPoint,
    TimeRange,
    VectorQuery,
    Where,
    check_condition_value,
    check_payload_values,
    check_scope,
    point_uuid,
    scope_conditions,
    scope_payload,
)

__all__ = ["EdgeBackend", "open_edge_backend"]

_META = "membrain.json"
_FORMAT = 1


@contextmanager
def _engine_errors(action: str) -> Iterator[None]:
    try:
        yield
    except MembrainError:  # already ours: a refused configuration, scope or input
        raise
    except Exception as exc:  # the engine raises plain RuntimeError/ValueError/OSError
        raise BackendError(f"Qdrant Edge failed to {action}: {exc}") from exc


def _filter(scope: Scope, *wheres: Where | None) -> qe.Filter:
    """The scope's conditions AND every condition of every ``where`` (same keys included)."""
    conditions: list[Any] = [
        qe.FieldCondition(key, match=qe.MatchValue(value))
        for key, value in scope_conditions(scope).items()
    ]
    for where in wheres:
        for key, value in (where or {}).items():
            check_condition_value(key, value)
            if isinstance(value, TimeRange):
                conditions.append(qe.FieldCondition(key, range=qe.RangeDateTime(**value.iso())))
            elif isinstance(value, str | int | bool):
                conditions.append(qe.FieldCondition(key, match=qe.MatchValue(value)))
            else:
                conditions.append(qe.FieldCondition(key, match=qe.MatchAny(list(value))))
    return qe.Filter(must=conditions)


def _ids_filter(scope: Scope, ids: Sequence[str]) -> qe.Filter:
    return qe.Filter(must=[_filter(scope), qe.HasIdCondition({point_uuid(i) for i in ids})])


def _named_vector(query: VectorQuery) -> Any:
    if isinstance(query.vector, SparseVector):
        return qe.SparseVector(list(query.vector.indices), list(query.vector.values))
    return [float(x) for x in query.vector]


def _scored(point: Any) -> ScoredPoint:
    return ScoredPoint(
        id=str(point.id), payload=dict(point.payload or {}), score=float(getattr(point, "score", 0))
    )


class EdgeBackend:
    """Qdrant Edge shards under one folder. Use :func:`open_edge_backend` to get one.

    Args:
        path: Folder holding the shards (created if missing).
        optimize_threshold: Vectors written since the last optimisation that trigger one.
    """

    def __init__(self, path: Path, *, optimize_threshold: int = 20_000) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._shards: dict[Collection, Any] = {}
        self._written_since_optimize = 0
        self._optimize_threshold = optimize_threshold
        self._users = 0
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------
    def ensure_collections(self, *, dense_dim: int, dense_model: str, sparse_model: str) -> None:
        """Create or open the shards; refuse a store built with other models."""
        wanted = {
            "format": _FORMAT,
            "dense_dim": dense_dim,
            "dense_model": dense_model,
            "sparse_model": sparse_model,
        }
        with self._lock, _engine_errors(f"open the store at {self.path}"):
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
            for collection in Collection:
                if collection not in self._shards:
                    self._shards[collection] = self._open_shard(collection, dense_dim)

    def _open_shard(self, collection: Collection, dense_dim: int) -> Any:
        folder = self.path / collection.value
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dense_dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
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

    def _shard(self, collection: Collection) -> Any:
        if self._closed:
            raise BackendError(f"the store at {self.path} is closed")
        try:
            return self._shards[collection]
        except KeyError:
            raise BackendError("ensure_collections() must run before any other call") from None

    def optimize(self) -> None:
        """Build HNSW and merge segments for everything written so far."""
        with self._lock, _engine_errors("optimize"):
            if self._closed:
                raise BackendError(f"the store at {self.path} is closed")
            for shard in self._shards.values():
                shard.optimize()
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
                with _engine_errors("close"):
                    for shard in self._shards.values():
                        shard.flush()
                        shard.close()
                self._shards.clear()

    # -- writes ------------------------------------------------------------------------------
    def upsert(self, collection: Collection, scope: Scope, points: Sequence[Point]) -> None:
        """Insert or replace points, binding each to ``scope``."""
        check_scope(scope)
        if not points:
            return
        edge_points = []
        for point in points:
            vectors: dict[str, Any] = {}
            if point.dense is not None:
                vectors[DENSE] = [float(x) for x in point.dense]
            if point.sparse is not None:
                vectors[SPARSE] = qe.SparseVector(
                    list(point.sparse.indices), list(point.sparse.values)
                )
            payload = {**point.payload, **scope_payload(scope)}
            edge_points.append(qe.Point(point_uuid(point.id), vectors, payload))
        with self._lock, _engine_errors(f"write to {collection.value}"):
            self._shard(collection).update(qe.UpdateOperation.upsert_points(edge_points))
            self._written_since_optimize += len(edge_points)
            if self._written_since_optimize >= self._optimize_threshold:
                self.optimize()

    def set_payload(
        self, collection: Collection, scope: Scope, ids: Sequence[str], values: Mapping[str, Any]
    ) -> None:
        """Set payload fields on the scope's points with these ids."""
        check_scope(scope)
        values = check_payload_values(values)
        if not ids:
            return
        operation = qe.UpdateOperation.set_payload_by_filter(_ids_filter(scope, ids), values)
        with self._lock, _engine_errors(f"update {collection.value}"):
            self._shard(collection).update(operation)

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> None:
        """Delete the scope's points with these ids."""
        check_scope(scope)
        if not ids:
            return
        operation = qe.UpdateOperation.delete_points_by_filter(_ids_filter(scope, ids))
        with self._lock, _engine_errors(f"delete from {collection.value}"):
            self._shard(collection).update(operation)

    def delete_scope(self, scope: Scope) -> None:
        """Delete everything stored under ``scope``."""
        check_scope(scope)
        with self._lock, _engine_errors("delete a scope"):
            for collection in Collection:
                self._shard(collection).update(
                    qe.UpdateOperation.delete_points_by_filter(_filter(scope))
                )

    # -- reads -------------------------------------------------------------------------------
    def retrieve(
        self, collection: Collection, scope: Scope, ids: Sequence[str]
    ) -> list[ScoredPoint]:
        """Points of ``scope`` by id, in the order asked."""
        check_scope(scope)
        if not ids:
            return []
        request = qe.ScrollRequest(
            limit=len(ids), filter=_ids_filter(scope, ids), with_payload=True
        )
        with _engine_errors(f"read {collection.value}"):
            records, _ = self._shard(collection).scroll(request)
        found = {p.id: p for p in map(_scored, records)}
        wanted = [str(point_uuid(i)) for i in ids]
        return [found[i] for i in wanted if i in found]

    def scroll(
        self,
        collection: Collection,
        scope: Scope,
        *,
        where: Where | None = None,
        limit: int = 256,
        offset: str | None = None,
    ) -> tuple[list[ScoredPoint], str | None]:
        """One page of the scope's points, ordered by id."""
        check_scope(scope)
        request = qe.ScrollRequest(
            offset=point_uuid(offset) if offset else None,
            limit=limit,
            filter=_filter(scope, where),
            with_payload=True,
        )
        with _engine_errors(f"scroll {collection.value}"):
            records, next_offset = self._shard(collection).scroll(request)
        return [_scored(r) for r in records], str(next_offset) if next_offset else None

    def count(self, collection: Collection, scope: Scope, *, where: Where | None = None) -> int:
        """Exact count of the scope's matching points."""
        check_scope(scope)
        with _engine_errors(f"count {collection.value}"):
            return int(
                self._shard(collection).count(
                    qe.CountRequest(filter=_filter(scope, where), exact=True)
                )
            )

    def query(
        self,
        collection: Collection,
        scope: Scope,
        queries: Sequence[VectorQuery],
        *,
        limit: int,
        where: Where | None = None,
        rrf_k: int = 60,
    ) -> list[ScoredPoint]:
        """Similarity search, or engine-side weighted RRF over several lookups."""
        check_scope(scope)
        if not queries:
            return []
        if len(queries) == 1:
            q = queries[0]
            request = qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(_named_vector(q), using=q.using),
                filter=_filter(scope, where, q.where),
                with_payload=True,
            )
        else:
            # The stubs type Fusion.Rrf as its own class, but the engine takes it as a query.
            fusion: Any = qe.Fusion.Rrf(k=rrf_k, weights=[q.weight for q in queries])
            request = qe.QueryRequest(
                limit=limit,
                prefetches=[
                    qe.Prefetch(
                        limit=q.limit,
                        query=qe.Query.Nearest(_named_vector(q), using=q.using),
                        filter=_filter(scope, where, q.where),
                    )
                    for q in queries
                ],
                query=fusion,
                filter=_filter(scope, where),
                with_payload=True,
            )
        with _engine_errors(f"query {collection.value}"):
            return [_scored(p) for p in self._shard(collection).query(request)]


_registry_lock = threading.Lock()
_registry: dict[Path, EdgeBackend] = {}


def open_edge_backend(path: str | Path, *, optimize_threshold: int = 20_000) -> EdgeBackend:
    """The process-wide backend for ``path`` (one owner per folder); call ``close()`` when done."""
    resolved = Path(path).expanduser().resolve()
    with _registry_lock:
        backend = _registry.get(resolved)
        if backend is None:
            backend = EdgeBackend(resolved, optimize_threshold=optimize_threshold)
            _registry[resolved] = backend
        backend._users += 1
        return backend
