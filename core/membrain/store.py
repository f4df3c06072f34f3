"""Records over a backend: messages, facts and entities to points and back.

This is the one place that knows how a record is laid out as a Qdrant payload and which text of it
is embedded. Everything above speaks in :mod:`membrain.models` records.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from membrain.embeddings import DenseEncoder, SparseEncoder
from membrain.extraction.base import normalize_name
from membrain.indexing import entity_text, fact_dense_text, fact_sparse_text, message_text
from membrain.models import Entity, Fact, MessageStatus, Scope, StoredMessage
from membrain.storage.base import Backend, Collection, Point, ScoredPoint, VectorQuery, Where

__all__ = ["LexicalSink", "RecordStore"]


class LexicalSink(Protocol):
    """A derived index that receives every fact written (see :mod:`membrain.storage.lexical`)."""

    def add(self, scope: Scope, facts: Sequence[Fact]) -> None:
        """Index (or re-index) facts of ``scope``."""
        ...


def _payload(record: Any, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = record.model_dump(mode="json", exclude={"scope"})
    data.update(extra)
    return data


def _scope_from(scope: Scope, payload: dict[str, Any]) -> Scope:
    session = payload.get("session") or None
    return Scope(dataset=scope.dataset, task=scope.task, session=session)


class RecordStore:
    """Typed access to the MemBrain collections of one backend.

    Args:
        backend: Where records live.
        dense: Encoder for the ``dense`` named vector.
        sparse: Encoder for the ``sparse`` named vector.
    """

    def __init__(self, backend: Backend, dense: DenseEncoder, sparse: SparseEncoder) -> None:
        self.backend = backend
        self.dense = dense
        self.sparse = sparse
        self.lexical: LexicalSink | None = None
        """The derived lexical index (path D), fed with every fact written."""
        backend.ensure_collections(
            dense_dim=dense.dim, dense_model=dense.name, sparse_model=sparse.name
        )

    def _points(
        self,
        ids: Sequence[str],
        payloads: Sequence[dict[str, Any]],
        texts: Sequence[str],
        dense_texts: Sequence[str] | None = None,
    ) -> list[Point]:
        dense = self.dense.embed_documents(texts if dense_texts is None else dense_texts)
        sparse = self.sparse.embed_documents(texts)
        return [
            Point(id=i, payload=p, dense=d, sparse=s)
            for i, p, d, s in zip(ids, payloads, dense, sparse, strict=True)
        ]

    # -- messages ----------------------------------------------------------------------------
    def put_messages(self, scope: Scope, messages: Sequence[StoredMessage]) -> None:
        """Store messages (as evidence) with their vectors."""
        points = self._points(
            [m.id for m in messages],
            [_payload(m) for m in messages],
            [message_text(m.message) for m in messages],
        )
        self.backend.upsert(Collection.MESSAGES, scope, points)

    def get_messages(self, scope: Scope, ids: Sequence[str]) -> list[StoredMessage]:
        """Stored messages by id (missing ids skipped)."""
        return [
            self._message(scope, p) for p in self.backend.retrieve(Collection.MESSAGES, scope, ids)
        ]

    def iter_messages(self, scope: Scope, *, where: Where | None = None) -> Iterator[StoredMessage]:
        """Every stored message of the scope matching ``where``."""
        for point in self._scroll(Collection.MESSAGES, scope, where):
            yield self._message(scope, point)

    def set_message_status(
        self,
        scope: Scope,
        ids: Sequence[str],
        status: MessageStatus,
        *,
        error: str | None = None,
        raw_output: str | None = None,
        discarded: dict[str, list[str]] | None = None,
    ) -> None:
        """Record where messages stand in the write path (and what extraction discarded)."""
        self.backend.set_payload(
            Collection.MESSAGES,
            scope,
            ids,
            {"status": status.value, "error": error, "raw_output": raw_output},
        )
        for message_id, reasons in (discarded or {}).items():
            self.backend.set_payload(
                Collection.MESSAGES, scope, [message_id], {"discarded": reasons}
            )

    def search_messages(
        self, scope: Scope, queries: Sequence[VectorQuery], *, limit: int, rrf_k: int
    ) -> list[tuple[StoredMessage, float]]:
        """Ranked messages (the raw evidence) for vector queries."""
        points = self.backend.query(Collection.MESSAGES, scope, queries, limit=limit, rrf_k=rrf_k)
        return [(self._message(scope, p), p.score) for p in points]

    @staticmethod
    def _message(scope: Scope, point: ScoredPoint) -> StoredMessage:
        payload = dict(point.payload)
        return StoredMessage.model_validate(
            {
                "id": point.id,
                "scope": _scope_from(scope, payload),
                "message": payload["message"],
                "status": payload.get("status", MessageStatus.PENDING),
                "recorded_at": payload["recorded_at"],
                "error": payload.get("error"),
                "raw_output": payload.get("raw_output"),
                "discarded": tuple(payload.get("discarded") or ()),
            }
        )

    # -- facts -------------------------------------------------------------------------------
    def put_facts(self, scope: Scope, facts: Sequence[Fact], participants: Sequence[str]) -> None:
        """Store facts with their BM25 and dense vectors (see :mod:`membrain.indexing`)."""
        points = self._points(
            [f.id for f in facts],
            [_payload(f) for f in facts],
            [fact_sparse_text(f.text) for f in facts],
            [fact_dense_text(f.text, participants) for f in facts],
        )
        self.backend.upsert(Collection.FACTS, scope, points)
        if self.lexical is not None:
            self.lexical.add(scope, facts)

    def get_facts(self, scope: Scope, ids: Sequence[str]) -> list[Fact]:
        """Facts by id (missing ids skipped)."""
        return [self.fact(scope, p) for p in self.backend.retrieve(Collection.FACTS, scope, ids)]

    def iter_facts(self, scope: Scope, *, where: Where | None = None) -> Iterator[Fact]:
        """Every fact of the scope matching ``where``."""
        for point in self._scroll(Collection.FACTS, scope, where):
            yield self.fact(scope, point)

    @staticmethod
    def fact(scope: Scope, point: ScoredPoint) -> Fact:
        """A fact from its stored point."""
        derived = ("tenant", "session")
        payload = {k: v for k, v in point.payload.items() if k not in derived}
        return Fact.model_validate({**payload, "scope": _scope_from(scope, point.payload)})

    # -- entities ----------------------------------------------------------------------------
    def put_entities(self, scope: Scope, entities: Sequence[Entity]) -> None:
        """Store entities; the dense vector is of the name and latest description."""
        points = self._points(
            [e.id for e in entities],
            [
                _payload(
                    e,
                    name_key=normalize_name(e.name),
                    alias_keys=[normalize_name(a) for a in e.aliases],
                )
                for e in entities
            ],
            [entity_text(e.name, e.description) for e in entities],
        )
        self.backend.upsert(Collection.ENTITIES, scope, points)

    def get_entities(self, scope: Scope, ids: Sequence[str]) -> list[Entity]:
        """Entities by id (missing ids skipped)."""
        return [
            self._entity(scope, p) for p in self.backend.retrieve(Collection.ENTITIES, scope, ids)
        ]

    def iter_entities(self, scope: Scope, *, where: Where | None = None) -> Iterator[Entity]:
        """Every entity of the scope matching ``where``."""
        for point in self._scroll(Collection.ENTITIES, scope, where):
            yield self._entity(scope, point)

    @staticmethod
    def _entity(scope: Scope, point: ScoredPoint) -> Entity:
        payload = {
            k: v
            for k, v in point.payload.items()
            if k not in ("tenant", "session", "name_key", "alias_keys")
        }
        return Entity.model_validate({**payload, "scope": _scope_from(scope, point.payload)})

    # -- shared ------------------------------------------------------------------------------
    def _scroll(
        self, collection: Collection, scope: Scope, where: Where | None
    ) -> Iterator[ScoredPoint]:
        offset: str | None = None
        while True:
            page, offset = self.backend.scroll(collection, scope, where=where, offset=offset)
            yield from page
            if offset is None:
                return
