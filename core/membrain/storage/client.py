"""The server backend: a Qdrant server or cluster through ``qdrant-client``.

The same code runs against qdrant-client's local mode (``location=":memory:"`` or ``path=``), a
slow pure-Python engine used here to test this code path without a server. Each MemBrain
collection is one Qdrant collection named ``{prefix}_{collection}``; the tenant key is a keyword
payload index with ``is_tenant=True`` so Qdrant co-locates each tenant's points.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from qdrant_client import QdrantClient
from qdrant_client import models as qm

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

__all__ = ["QdrantClientBackend"]


@contextmanager
def _engine_errors(action: str) -> Iterator[None]:
    try:
        yield
    except MembrainError:  # already ours: a refused configuration, scope or input
        raise
    except Exception as exc:  # qdrant-client raises transport and API exceptions
        raise BackendError(f"Qdrant failed to {action}: {exc}") from exc


def _filter(scope: Scope, *wheres: Where | None) -> qm.Filter:
    """The scope's conditions AND every condition of every ``where`` (same keys included)."""
    conditions: list[qm.Condition] = [
        qm.FieldCondition(key=key, match=qm.MatchValue(value=value))
        for key, value in scope_conditions(scope).items()
    ]
    for where in wheres:
        for key, value in (where or {}).items():
            check_condition_value(key, value)
            if isinstance(value, TimeRange):
                bounds = {k: datetime.fromisoformat(v) for k, v in value.iso().items()}
                conditions.append(qm.FieldCondition(key=key, range=qm.DatetimeRange(**bounds)))
                continue
            match: qm.MatchValue | qm.MatchAny
            if isinstance(value, str | int | bool):
                match = qm.MatchValue(value=value)
            else:
                match = qm.MatchAny(any=list(value))
            conditions.append(qm.FieldCondition(key=key, match=match))
    return qm.Filter(must=conditions)


def _ids_filter(scope: Scope, ids: Sequence[str]) -> qm.Filter:
    flt = _filter(scope)
    has_id = qm.HasIdCondition(has_id=[str(point_uuid(i)) for i in ids])
    return qm.Filter(must=[*(flt.must or []), has_id])


def _query_vector(query: VectorQuery) -> Any:
    if isinstance(query.vector, SparseVector):
        return qm.SparseVector(indices=list(query.vector.indices), values=list(query.vector.values))
    return [float(x) for x in query.vector]


def _scored(point: Any) -> ScoredPoint:
    return ScoredPoint(
        id=str(point.id), payload=dict(point.payload or {}), score=float(getattr(point, "score", 0))
    )


class QdrantClientBackend:
    """MemBrain collections in a Qdrant server, cluster or qdrant-client local mode.

    Args:
        client: A configured ``QdrantClient`` (its lifetime is the caller's unless ``owns_client``).
        prefix: Collection name prefix, so several stores can share one server.
        owns_client: Close the client in :meth:`close`.

    Example:
        >>> QdrantClientBackend(QdrantClient(url="http://localhost:6333"))  # doctest: +SKIP
    """

    def __init__(
        self, client: QdrantClient, *, prefix: str = "membrain", owns_client: bool = True
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._owns_client = owns_client
        self._lock = threading.RLock()

    def _name(self, collection: Collection) -> str:
        return f"{self._prefix}_{collection.value}"

    def ensure_collections(self, *, dense_dim: int, dense_model: str, sparse_model: str) -> None:
        """Create the collections if missing; refuse collections built with other models."""
        marker = {"dense_model": dense_model, "sparse_model": sparse_model}
        with self._lock, _engine_errors("create collections"):
            for collection in Collection:
                name = self._name(collection)
                if self._client.collection_exists(name):
                    self._check_existing(name, dense_dim, marker)
                    continue
                self._client.create_collection(
                    name,
                    vectors_config={
                        DENSE: qm.VectorParams(size=dense_dim, distance=qm.Distance.COSINE)
                    },
                    sparse_vectors_config={SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
                    metadata=marker,
                )
                with warnings.catch_warnings():
                    # Local mode warns that payload indexes do nothing there; they matter on a
                    # server, and the warning must not fail callers who treat warnings as errors.
                    warnings.filterwarnings(
                        "ignore", message="Payload indexes have no effect", category=UserWarning
                    )
                    self._client.create_payload_index(
                        name,
                        "tenant",
                        field_schema=qm.KeywordIndexParams(
                            type=qm.KeywordIndexType.KEYWORD, is_tenant=True
                        ),
                    )
                    for field in ("session", *INDEXED_FIELDS[collection]):
                        self._client.create_payload_index(
                            name, field, field_schema=qm.PayloadSchemaType.KEYWORD
                        )
                    for field in DATETIME_FIELDS.get(collection, ()):
                        self._client.create_payload_index(
                            name, field, field_schema=qm.PayloadSchemaType.DATETIME
                        )

    def _check_existing(self, name: str, dense_dim: int, marker: dict[str, str]) -> None:
        info = self._client.get_collection(name)
        vectors = info.config.params.vectors
        size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
        stored = info.config.metadata or {}
        if size != dense_dim or any(stored.get(k) not in (None, v) for k, v in marker.items()):
            raise ConfigurationError(
                f"collection {name!r} was built for dim={size} {stored}, not dim={dense_dim} "
                f"{marker}; use the same models or another prefix"
            )

    def upsert(self, collection: Collection, scope: Scope, points: Sequence[Point]) -> None:
        """Insert or replace points, binding each to ``scope``."""
        check_scope(scope)
        if not points:
            return
        structs = []
        for point in points:
            vector: dict[str, Any] = {}
            if point.dense is not None:
                vector[DENSE] = [float(x) for x in point.dense]
            if point.sparse is not None:
                vector[SPARSE] = qm.SparseVector(
                    indices=list(point.sparse.indices), values=list(point.sparse.values)
                )
            payload = {**point.payload, **scope_payload(scope)}
            point_id = str(point_uuid(point.id))
            structs.append(qm.PointStruct(id=point_id, vector=vector, payload=payload))
        with self._lock, _engine_errors(f"write to {collection.value}"):
            self._client.upsert(self._name(collection), points=structs, wait=True)

    def set_payload(
        self, collection: Collection, scope: Scope, ids: Sequence[str], values: Mapping[str, Any]
    ) -> None:
        """Set payload fields on the scope's points with these ids."""
        check_scope(scope)
        values = check_payload_values(values)
        if not ids:
            return
        with self._lock, _engine_errors(f"update {collection.value}"):
            self._client.set_payload(
                self._name(collection),
                payload=values,
                points=qm.FilterSelector(filter=_ids_filter(scope, ids)),
                wait=True,
            )

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> None:
        """Delete the scope's points with these ids."""
        check_scope(scope)
        if not ids:
            return
        with self._lock, _engine_errors(f"delete from {collection.value}"):
            self._client.delete(
                self._name(collection),
                points_selector=qm.FilterSelector(filter=_ids_filter(scope, ids)),
                wait=True,
            )

    def delete_scope(self, scope: Scope) -> None:
        """Delete everything stored under ``scope``."""
        check_scope(scope)
        with self._lock, _engine_errors("delete a scope"):
            for collection in Collection:
                self._client.delete(
                    self._name(collection),
                    points_selector=qm.FilterSelector(filter=_filter(scope)),
                    wait=True,
                )

    def retrieve(
        self, collection: Collection, scope: Scope, ids: Sequence[str]
    ) -> list[ScoredPoint]:
        """Points of ``scope`` by id, in the order asked."""
        check_scope(scope)
        if not ids:
            return []
        with _engine_errors(f"read {collection.value}"):
            records, _ = self._client.scroll(
                self._name(collection),
                scroll_filter=_ids_filter(scope, ids),
                limit=len(ids),
                with_payload=True,
            )
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
        with _engine_errors(f"scroll {collection.value}"):
            records, next_offset = self._client.scroll(
                self._name(collection),
                scroll_filter=_filter(scope, where),
                limit=limit,
                offset=str(point_uuid(offset)) if offset else None,
                with_payload=True,
            )
        return [_scored(r) for r in records], str(next_offset) if next_offset else None

    def count(self, collection: Collection, scope: Scope, *, where: Where | None = None) -> int:
        """Exact count of the scope's matching points."""
        check_scope(scope)
        with _engine_errors(f"count {collection.value}"):
            result = self._client.count(
                self._name(collection), count_filter=_filter(scope, where), exact=True
            )
        return int(result.count)

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
        """Similarity search, or server-side weighted RRF over several lookups."""
        check_scope(scope)
        if not queries:
            return []
        name = self._name(collection)
        with _engine_errors(f"query {collection.value}"):
            if len(queries) == 1:
                q = queries[0]
                response = self._client.query_points(
                    name,
                    query=_query_vector(q),
                    using=q.using,
                    query_filter=_filter(scope, where, q.where),
                    limit=limit,
                    with_payload=True,
                )
            else:
                response = self._client.query_points(
                    name,
                    prefetch=[
                        qm.Prefetch(
                            query=_query_vector(q),
                            using=q.using,
                            limit=q.limit,
                            filter=_filter(scope, where, q.where),
                        )
                        for q in queries
                    ],
                    query=qm.RrfQuery(rrf=qm.Rrf(k=rrf_k, weights=[q.weight for q in queries])),
                    query_filter=_filter(scope, where),
                    limit=limit,
                    with_payload=True,
                )
        return [_scored(p) for p in response.points]

    def optimize(self) -> None:
        """No-op: a Qdrant server indexes in the background."""

    def close(self) -> None:
        """Close the client if this backend owns it."""
        if self._owns_client:
            with _engine_errors("close"):
                self._client.close()
