"""The server backend: a Qdrant server or cluster through ``qdrant-client``.

The same code runs against qdrant-client's local mode (``location=":memory:"`` or ``path=``), a
slow pure-Python engine used here to test this code path without a server. Each MemBrain
collection is one Qdrant collection named ``{prefix}_{collection}``; the tenant key is a keyword
payload index with ``is_tenant=True`` so Qdrant co-locates each tenant's points.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from qdrant_client import QdrantClient
from qdrant_client import models as qm

from membrain.api.errors import ConfigurationError
from membrain.backends.base import DENSE, SPARSE, BaseBackend
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

__all__ = ["QdrantClientBackend"]


def _native(where: Filter) -> qm.Filter:
    conditions: list[qm.Condition] = []
    for c in where.conditions:
        if c.kind == "ids":
            conditions.append(qm.HasIdCondition(has_id=[str(i) for i in c.value]))
        elif c.kind == "range":
            bounds = {k: datetime.fromisoformat(v) for k, v in c.value.iso().items()}
            conditions.append(qm.FieldCondition(key=c.key, range=qm.DatetimeRange(**bounds)))
        elif c.kind == "any":
            conditions.append(qm.FieldCondition(key=c.key, match=qm.MatchAny(any=c.value)))
        elif c.kind == "empty":
            conditions.append(qm.IsEmptyCondition(is_empty=qm.PayloadField(key=c.key)))
        else:
            conditions.append(qm.FieldCondition(key=c.key, match=qm.MatchValue(value=c.value)))
    return qm.Filter(must=conditions)


def _vector(value: Sequence[float] | SparseVector) -> Any:
    if isinstance(value, SparseVector):
        return qm.SparseVector(indices=list(value.indices), values=list(value.values))
    return [float(x) for x in value]


class QdrantClientBackend(BaseBackend):
    """MemBrain collections in a Qdrant server, cluster or qdrant-client local mode.

    Args:
        client: A configured ``QdrantClient`` (its lifetime is the caller's unless ``owns_client``).
        prefix: Collection name prefix, so several stores can share one server.
        owns_client: Close the client in :meth:`close`.

    Example:
        >>> QdrantClientBackend(QdrantClient(url="http://localhost:6333"))  # doctest: +SKIP
    """

    engine = "Qdrant"

    def __init__(
        self, client: QdrantClient, *, prefix: str = "membrain", owns_client: bool = True
    ) -> None:
        super().__init__()
        self._client = client
        self._prefix = prefix
        self._owns_client = owns_client

    def _name(self, collection: Collection) -> str:
        return f"{self._prefix}_{collection.value}"

    def _ensure(self, dense_dim: int, dense_model: str, sparse_model: str) -> None:
        """Create the collections if missing; refuse collections built with other models."""
        marker = {"dense_model": dense_model, "sparse_model": sparse_model}
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

    def _index_field(self, collection: Collection, field: str, kind: str) -> None:
        name = self._name(collection)
        if field in (self._client.get_collection(name).payload_schema or {}):
            return
        schema = qm.PayloadSchemaType.KEYWORD if kind == "keyword" else qm.PayloadSchemaType.INTEGER
        with warnings.catch_warnings():  # local mode: indexes do nothing there (see above)
            warnings.filterwarnings(
                "ignore", message="Payload indexes have no effect", category=UserWarning
            )
            self._client.create_payload_index(name, field, field_schema=schema)

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

    # -- primitives ------------------------------------------------------------------------
    def _upsert(self, collection: Collection, points: Sequence[Point]) -> None:
        structs = []
        for point in points:
            vector: dict[str, Any] = {}
            if point.dense is not None:
                vector[DENSE] = _vector(point.dense)
            if point.sparse is not None:
                vector[SPARSE] = _vector(point.sparse)
            structs.append(qm.PointStruct(id=point.id, vector=vector, payload=dict(point.payload)))
        self._client.upsert(self._name(collection), points=structs, wait=True)

    def _set_payload(self, collection: Collection, where: Filter, values: dict[str, Any]) -> None:
        selector = qm.FilterSelector(filter=_native(where))
        self._client.set_payload(self._name(collection), payload=values, points=selector, wait=True)

    def _delete(self, collection: Collection, where: Filter) -> None:
        selector = qm.FilterSelector(filter=_native(where))
        self._client.delete(self._name(collection), points_selector=selector, wait=True)

    def _scroll(
        self, collection: Collection, where: Filter, limit: int, offset: uuid.UUID | None
    ) -> tuple[list[ScoredPoint], str | None]:
        records, next_offset = self._client.scroll(
            self._name(collection),
            scroll_filter=_native(where),
            limit=limit,
            offset=str(offset) if offset else None,
            with_payload=True,
        )
        return [scored(r) for r in records], str(next_offset) if next_offset else None

    def _tenants(self, collection: Collection, where: Filter) -> list[str]:
        name = self._name(collection)
        found = self._client.facet(
            name, key="tenant", limit=1_000_000, exact=True, facet_filter=_native(where)
        )
        return [str(hit.value) for hit in found.hits]

    def _count(self, collection: Collection, where: Filter) -> int:
        name = self._name(collection)
        return int(self._client.count(name, count_filter=_native(where), exact=True).count)

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
        name = self._name(collection)
        if len(queries) == 1:
            q, own = queries[0]
            response = self._client.query_points(
                name,
                query=_vector(q.vector),
                using=q.using,
                query_filter=_native(own),
                limit=limit,
                with_payload=selected,
            )
        else:
            response = self._client.query_points(
                name,
                prefetch=[
                    qm.Prefetch(
                        query=_vector(q.vector), using=q.using, limit=q.limit, filter=_native(own)
                    )
                    for q, own in queries
                ],
                query=qm.RrfQuery(rrf=qm.Rrf(k=rrf_k, weights=[q.weight for q, _ in queries])),
                query_filter=_native(where),
                limit=limit,
                with_payload=selected,
            )
        return [scored(p) for p in response.points]

    def _query_batch(
        self,
        collection: Collection,
        lookups: Sequence[tuple[VectorQuery, Filter]],
        payload: bool | Sequence[str],
    ) -> list[list[ScoredPoint]]:
        selected: Any = payload if isinstance(payload, bool) else list(payload)
        requests = [
            qm.QueryRequest(
                query=_vector(q.vector),
                using=q.using,
                filter=_native(own),
                limit=q.limit,
                with_payload=selected,
            )
            for q, own in lookups
        ]
        responses = self._client.query_batch_points(self._name(collection), requests=requests)
        return [[scored(p) for p in r.points] for r in responses]

    def _fetch(self, collection: Collection, ids: Sequence[uuid.UUID]) -> list[ScoredPoint]:
        found = self._client.retrieve(
            self._name(collection), ids=[str(i) for i in ids], with_payload=True
        )
        return [scored(r) for r in found]

    def _compact(self, collection: Collection) -> None:
        """No-op: the client cannot make Qdrant rewrite its storage; what remains, and where.

        A Qdrant server only marks deleted points: their payloads and vectors stay in the
        segment files until the vacuum optimizer rebuilds the segment (once deleted points pass
        ``deleted_threshold``, 0.2 by default, of a segment holding at least
        ``vacuum_min_vector_number``, 1000 by default), and the write that stored them stays in
        the shard's write-ahead log until Qdrant truncates it. Snapshots and replicas keep their
        own copies. Erasing those is the server operator's job.

        In local mode, ``location=":memory:"`` keeps deleted points in the process's memory
        (nothing on disk); ``path=`` deletes their rows from each collection's
        ``storage.sqlite``, and SQLite overwrites freed pages only with ``secure_delete`` on
        (off in SQLite's default build, on in Debian's), else the bytes stay in the file until
        a ``VACUUM``.
        """
        return None

    def optimize(self) -> None:
        """No-op: a Qdrant server indexes in the background."""

    def close(self) -> None:
        """Close the client if this backend owns it."""
        if self._owns_client:
            with self._errors("close"):
                self._client.close()
