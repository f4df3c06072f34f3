"""Records over a backend: messages, facts, entities and their audit log, to points and back.

This is the one place that knows how a record is laid out as a Qdrant payload and which text of
it is embedded, and the one place every mutation passes through. Each mutation takes a
:class:`~membrain.audit.Cause` (who, why) and is written with its append-only
:class:`~membrain.audit.AuditEvent` records; then the subscribed
:class:`~membrain.listeners.RecordListener` objects (the derived indexes) hear what changed.
Everything above speaks in :mod:`membrain.models` records, :class:`FactFilter` and
:class:`TreeNode`; reads return the records a caller needs in one round trip.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from membrain.audit import AuditAction, AuditEvent, Cause
from membrain.embeddings import DenseEncoder, SparseEncoder, SparseVector
from membrain.errors import InputError
from membrain.indexing import entity_text, fact_dense_text, fact_sparse_text, message_text
from membrain.inputs import MonotonicClock
from membrain.listeners import RecordListener
from membrain.models import Entity, Fact, MessageStatus, Scope, StoredMessage
from membrain.names import normalize_name
from membrain.storage.base import (
    DENSE,
    SPARSE,
    Backend,
    Collection,
    Point,
    ScoredPoint,
    TimeRange,
    VectorQuery,
)
from membrain.store.filters import DERIVED_FACT_FIELDS, FactFilter, fact_payload
from membrain.store.tree import TreeNode, TreeRecords

__all__ = ["FactFilter", "RecordStore", "ScoredFact", "TreeNode"]

Vector = Sequence[float] | SparseVector
Discards = Mapping[str, Sequence[tuple[str, str]]]
"""Message id -> what extraction discarded from it, as ``(reason, text)`` pairs."""


class ScoredFact:
    """A fact a ranked read found, with its score; the record is built when first asked for.

    A search ranks many more candidates than it returns: building each one's record (pydantic
    validation of its times and fields) cost as much as the query itself, so only the facts a
    caller reads are built.
    """

    __slots__ = ("_fact", "_point", "_scope", "id", "score")

    def __init__(self, scope: Scope, point: ScoredPoint) -> None:
        self.id = point.id
        self.score = point.score
        self._scope = scope
        self._point = point
        self._fact: Fact | None = None

    @property
    def fact(self) -> Fact:
        """The fact record."""
        if self._fact is None:
            self._fact = RecordStore._fact(self._scope, self._point)
        return self._fact

    def __repr__(self) -> str:
        return f"ScoredFact(id={self.id!r}, score={self.score})"


_ENTITY_KEYS = ("name_key", "alias_keys")
_SCOPE_KEYS = ("tenant", "session")


def _payload(record: Any, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = record.model_dump(mode="json", exclude={"scope"})
    data.update(extra)
    return data


def _record_scope(scope: Scope, payload: dict[str, Any]) -> Scope:
    session = payload.get("session") or None
    return Scope(dataset=scope.dataset, task=scope.task, session=session)


def _fields(payload: dict[str, Any], *dropped: str) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in (*_SCOPE_KEYS, *dropped)}


class RecordStore(TreeRecords):
    """Typed access to the MemBrain collections of one backend (see the module docstring).

    Args:
        backend: Where records live.
        dense: Encoder for the ``dense`` named vector.
        sparse: Encoder for the ``sparse`` named vector.

    Example:
        >>> store = RecordStore(backend, dense, sparse)  # doctest: +SKIP
        >>> store.subscribe(lexical_index)  # doctest: +SKIP
        >>> store.put_facts(scope, facts, participants=["Sara"], cause=Cause())  # doctest: +SKIP
    """

    def __init__(self, backend: Backend, dense: DenseEncoder, sparse: SparseEncoder) -> None:
        self.backend = backend
        self.dense = dense
        self.sparse = sparse
        self._listeners: list[RecordListener] = []
        self._ticks = MonotonicClock()
        backend.ensure_collections(
            dense_dim=dense.dim, dense_model=dense.name, sparse_model=sparse.name
        )

    def subscribe(self, listener: RecordListener) -> None:
        """Tell ``listener`` about every later mutation (once, however often subscribed)."""
        if all(known is not listener for known in self._listeners):
            self._listeners.append(listener)

    def now(self) -> datetime:
        """A record time later than every one this store gave before (the audit's clock)."""
        return self._ticks.next()

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
    def put_messages(
        self, scope: Scope, messages: Sequence[StoredMessage], *, cause: Cause | None = None
    ) -> None:
        """Store messages (as evidence) with their vectors."""
        if not messages:
            return
        points = self._points(
            [m.id for m in messages],
            [_payload(m) for m in messages],
            [message_text(m.message) for m in messages],
        )
        self.backend.upsert(Collection.MESSAGES, scope, points)
        self._audit(scope, cause, [(AuditAction.STORED, tuple(m.id for m in messages), {})])
        for listener in self._listeners:
            listener.messages_written(scope, messages)

    def get_messages(self, scope: Scope, ids: Sequence[str]) -> list[StoredMessage]:
        """Stored messages by id (missing ids skipped)."""
        return [
            self._message(scope, p) for p in self.backend.retrieve(Collection.MESSAGES, scope, ids)
        ]

    def iter_messages(
        self, scope: Scope, *, status: MessageStatus | None = None
    ) -> Iterator[StoredMessage]:
        """Every stored message of the scope (of ``status`` when given)."""
        where = None if status is None else {"status": status.value}
        for point in self._scroll(Collection.MESSAGES, scope, where):
            yield self._message(scope, point)

    def message_tenants(self) -> list[Scope]:
        """The (dataset, task) scopes holding messages (for maintenance such as retention)."""
        return self.backend.tenants(Collection.MESSAGES)

    def set_message_status(
        self,
        scope: Scope,
        ids: Sequence[str],
        status: MessageStatus,
        *,
        error: str | None = None,
        raw_output: str | None = None,
        discarded: Discards | None = None,
        cause: Cause | None = None,
    ) -> None:
        """Record where messages stand in the write path (and what extraction discarded).

        Audited as ``processed``, ``extraction_failed`` when an ``error`` is given, or
        ``dismissed`` (which keeps the messages' last error), and a ``discarded`` event per
        message that lost something (the reasons, never the text).
        """
        fields: dict[str, Any] = {"status": status.value}
        if status is not MessageStatus.DISMISSED:
            fields.update(error=error, raw_output=raw_output)
        self.backend.set_payload(Collection.MESSAGES, scope, ids, fields)
        events: list[tuple[AuditAction, tuple[str, ...], dict[str, Any]]] = []
        for message_id, items in (discarded or {}).items():
            reasons = [f"{reason}: {text}" for reason, text in items]
            self.backend.set_payload(
                Collection.MESSAGES, scope, [message_id], {"discarded": reasons}
            )
            kinds = sorted({reason for reason, _ in items})
            events.append((AuditAction.DISCARDED, (message_id,), {"reasons": kinds}))
        action = AuditAction.EXTRACTION_FAILED if error else AuditAction.PROCESSED
        if status is MessageStatus.DISMISSED:
            action = AuditAction.DISMISSED
        self._audit(scope, cause, [(action, tuple(ids), {}), *events])
        for listener in self._listeners:
            listener.messages_marked(scope, ids, status)

    def search_messages(
        self, scope: Scope, text: str, *, using: Sequence[str], limit: int, candidates: int
    ) -> list[tuple[StoredMessage, float]]:
        """Ranked messages (the raw evidence) for ``text``, by BM25, dense or both fused."""
        queries = []
        if SPARSE in using:
            queries.append(VectorQuery(SPARSE, self.sparse.embed_query(text), limit=candidates))
        if DENSE in using:
            queries.append(VectorQuery(DENSE, self.dense.embed_query(text), limit=candidates))
        points = self.backend.query(Collection.MESSAGES, scope, queries, limit=limit)
        return [(self._message(scope, p), p.score) for p in points]

    @staticmethod
    def _message(scope: Scope, point: ScoredPoint) -> StoredMessage:
        payload = dict(point.payload)
        return StoredMessage.model_validate(
            {
                "id": point.id,
                "scope": _record_scope(scope, payload),
                "message": payload["message"],
                "status": payload.get("status", MessageStatus.PENDING),
                "recorded_at": payload["recorded_at"],
                "error": payload.get("error"),
                "raw_output": payload.get("raw_output"),
                "discarded": tuple(payload.get("discarded") or ()),
                "added_by": payload.get("added_by"),
            }
        )

    # -- facts -------------------------------------------------------------------------------
    def put_facts(
        self,
        scope: Scope,
        facts: Sequence[Fact],
        participants: Sequence[str],
        *,
        cause: Cause | None = None,
    ) -> None:
        """Store new facts with their BM25 and dense vectors (see :mod:`membrain.indexing`).

        Audited as ``created``, one event per fact with its sources and extractor.
        """
        if not facts:
            return
        revised = self.now()
        points = self._points(
            [f.id for f in facts],
            [fact_payload(f, revised) for f in facts],
            [fact_sparse_text(f.text) for f in facts],
            [fact_dense_text(f.text, participants) for f in facts],
        )
        self.backend.upsert(Collection.FACTS, scope, points)
        created = [
            (
                AuditAction.CREATED,
                (f.id,),
                {
                    "record": "fact",
                    "sources": list(f.sources),
                    "extractor": f.extractor,
                    "trust": f.trust.value,
                    **({"supersedes": list(f.supersedes)} if f.supersedes else {}),
                },
            )
            for f in facts
        ]
        self._audit(scope, cause, created)
        self._facts_written(scope, facts)

    def update_facts(
        self,
        scope: Scope,
        facts: Sequence[Fact],
        *,
        action: AuditAction,
        targets: Sequence[str] | None = None,
        cause: Cause | None = None,
    ) -> None:
        """Store the new state of facts already stored (status, trust, links), keeping vectors.

        Text, times and sources are what the vectors were computed from: a changed text is a
        new fact, never an update. Audited as one ``action`` event about ``targets`` (default:
        every fact given).
        """
        if not facts:
            return
        revised = self.now()
        for fact in facts:
            payload = fact_payload(fact, revised)
            self.backend.set_payload(Collection.FACTS, scope, [fact.id], payload)
        about = tuple(targets) if targets is not None else tuple(f.id for f in facts)
        self._audit(scope, cause, [(action, about, {})])
        self._facts_written(scope, facts)

    def _facts_written(self, scope: Scope, facts: Sequence[Fact]) -> None:
        for listener in self._listeners:
            listener.facts_written(scope, facts)

    def get_facts(self, scope: Scope, ids: Sequence[str]) -> list[Fact]:
        """Facts by id, in the order asked (missing ids skipped)."""
        return [self._fact(scope, p) for p in self.backend.retrieve(Collection.FACTS, scope, ids)]

    def iter_facts(self, scope: Scope, where: FactFilter | None = None) -> Iterator[Fact]:
        """Every fact of the scope that ``where`` admits (every fact when it is ``None``)."""
        condition = where.where() if where is not None else None
        for point in self._scroll(Collection.FACTS, scope, condition):
            yield self._fact(scope, point)

    def first_facts(self, scope: Scope, where: FactFilter, *, limit: int) -> list[Fact]:
        """At most ``limit`` facts ``where`` admits, in storage order (one round trip)."""
        points, _ = self.backend.scroll(Collection.FACTS, scope, where=where.where(), limit=limit)
        return [self._fact(scope, p) for p in points]

    def count_facts(self, scope: Scope, where: FactFilter | None = None) -> int:
        """How many facts of the scope ``where`` admits (all of them when it is ``None``)."""
        condition = where.where() if where is not None else None
        return self.backend.count(Collection.FACTS, scope, where=condition)

    def query_facts(
        self,
        scope: Scope,
        using: str,
        vector: Vector,
        *,
        limit: int,
        where: FactFilter | None = None,
    ) -> list[ScoredFact]:
        """Facts ranked by similarity of their ``using`` vector (``"dense"``/``"sparse"``).

        Active facts unless ``where`` says otherwise; records are built when read.
        """
        query = VectorQuery(using, vector, limit=limit)
        condition = (where or FactFilter()).where()
        points = self.backend.query(Collection.FACTS, scope, [query], limit=limit, where=condition)
        return [ScoredFact(scope, p) for p in points]

    @staticmethod
    def _fact(scope: Scope, point: ScoredPoint) -> Fact:
        payload = _fields(point.payload, *DERIVED_FACT_FIELDS)
        return Fact.model_validate({**payload, "scope": _record_scope(scope, point.payload)})

    # -- entities ----------------------------------------------------------------------------
    def put_entities(
        self, scope: Scope, entities: Sequence[Entity], *, cause: Cause | None = None
    ) -> None:
        """Store entities; the dense vector is of the name and latest description.

        Audited as ``created`` for a new entity, ``description_versioned`` for a new version or
        new aliases of a stored one.
        """
        if not entities:
            return
        before = {e.id: e for e in self.get_entities(scope, [e.id for e in entities])}
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
        events = []
        for entity in entities:
            old = before.get(entity.id)
            versions = [v.version for v in entity.versions]
            if old is None:
                events.append((AuditAction.CREATED, (entity.id,), {"record": "entity"}))
                continue
            added = [v for v in entity.versions if v.version > len(old.versions)]
            aliases = len(entity.aliases) - len(old.aliases)
            if added or aliases > 0:
                details: dict[str, Any] = {"record": "entity", "version": max(versions or [0])}
                details["fact_ids"] = [i for v in added for i in v.fact_ids]
                details["aliases_added"] = max(aliases, 0)
                events.append((AuditAction.DESCRIPTION_VERSIONED, (entity.id,), details))
        self._audit(scope, cause, events)
        for listener in self._listeners:
            listener.entities_written(scope, entities)

    def get_entities(self, scope: Scope, ids: Sequence[str]) -> list[Entity]:
        """Entities by id (missing ids skipped)."""
        return [
            self._entity(scope, p) for p in self.backend.retrieve(Collection.ENTITIES, scope, ids)
        ]

    def iter_entities(self, scope: Scope) -> Iterator[Entity]:
        """Every entity of the scope."""
        for point in self._scroll(Collection.ENTITIES, scope, None):
            yield self._entity(scope, point)

    def query_entities(
        self, scope: Scope, vector: Sequence[float], *, limit: int
    ) -> list[tuple[Entity, float]]:
        """Entities ranked by dense similarity of their name and description to ``vector``."""
        query = VectorQuery(DENSE, vector, limit=limit)
        points = self.backend.query(Collection.ENTITIES, scope, [query], limit=limit)
        return [(self._entity(scope, p), p.score) for p in points]

    @staticmethod
    def _entity(scope: Scope, point: ScoredPoint) -> Entity:
        payload = _fields(point.payload, *_ENTITY_KEYS)
        return Entity.model_validate({**payload, "scope": _record_scope(scope, point.payload)})

    # -- audit -------------------------------------------------------------------------------
    def _audit(
        self,
        scope: Scope,
        cause: Cause | None,
        changes: Sequence[tuple[AuditAction, tuple[str, ...], dict[str, Any]]],
    ) -> list[AuditEvent]:
        cause = cause or Cause()
        events = [
            AuditEvent(
                id=str(uuid.uuid4()),
                scope=scope,
                action=action,
                targets=targets,
                actor=cause.actor,
                reason=cause.reason,
                at=self.now(),
                details={**cause.details, **details},
            )
            for action, targets, details in changes
            if targets
        ]
        self._append_audit(scope, events)
        return events

    def note(
        self,
        scope: Scope,
        action: AuditAction,
        targets: Sequence[str],
        *,
        cause: Cause,
        details: dict[str, Any] | None = None,
    ) -> AuditEvent:
        """Audit an event that changes no record: a review requested or resolved.

        Raises:
            InputError: ``action`` changes records (those are audited by the change itself).
        """
        if action not in (AuditAction.REVIEW_REQUESTED, AuditAction.REVIEW_RESOLVED):
            raise InputError(f"{action.value!r} events are written by the change they record")
        if not targets:
            raise InputError("an audit event is about at least one id")
        (event,) = self._audit(scope, cause, [(action, tuple(targets), details or {})])
        return event

    def audit_missing(
        self, scope: Scope, action: AuditAction, targets: Sequence[str], *, cause: Cause
    ) -> list[str]:
        """Audit a change already stored whose event was never written; the ids audited now.

        A write reaches the record before its audit event; a process killed in between leaves
        a change without an event. When the same call runs again and finds the change done, it
        calls this: each target without an ``action`` event gets one, marked ``recovered``.
        """
        if not targets:
            return []
        audited = self.iter_audit(scope, targets=targets, actions=[action])
        seen = {t for event in audited for t in event.targets}
        missing = tuple(t for t in dict.fromkeys(targets) if t not in seen)
        self._audit(scope, cause, [(action, missing, {"recovered": True})])
        return list(missing)

    def _append_audit(self, scope: Scope, events: Sequence[AuditEvent]) -> None:
        """Append events to the scope's audit log (it has no update and no delete but a scope's)."""
        if not events:
            return
        # The audit is read by filters, never ranked: its points carry no vector.
        points = [Point(e.id, _payload(e)) for e in events]
        self.backend.upsert(Collection.AUDIT, scope, points)
        for listener in self._listeners:
            listener.audited(scope, events)

    def iter_audit(
        self,
        scope: Scope,
        *,
        targets: Sequence[str] = (),
        actions: Sequence[AuditAction] = (),
        since: datetime | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[AuditEvent]:
        """The scope's audit events, oldest first: about any of ``targets``, of ``actions``."""
        if ids is not None:
            points: Sequence[ScoredPoint] = self.backend.retrieve(Collection.AUDIT, scope, ids)
        else:
            where: dict[str, Any] = {}
            if targets:
                where["targets"] = list(targets)
            if actions:
                where["action"] = [a.value for a in actions]
            if since is not None:
                where["at"] = TimeRange(gte=since)
            points = list(self._scroll(Collection.AUDIT, scope, where))
        events = [
            AuditEvent.model_validate(
                {**_fields(p.payload), "id": p.id, "scope": _record_scope(scope, p.payload)}
            )
            for p in points
        ]
        return sorted(events, key=lambda e: (e.at, e.id))

    # -- erasure -----------------------------------------------------------------------------
    def purge(
        self,
        scope: Scope,
        *,
        facts: Sequence[str] = (),
        messages: Sequence[str] = (),
        entities: Sequence[str] = (),
        cause: Cause | None = None,
    ) -> None:
        """Delete records and everything derived from their content, then erase them from disk.

        The audit keeps one ``purged`` event per kind of record, with the ids only. The derived
        indexes drop theirs when they hear of it; then the backend rewrites its collections and
        the listeners theirs (:meth:`RecordListener.erased`), so nothing of the content is left
        in the store's files.
        """
        self.backend.delete(Collection.FACTS, scope, facts)
        self.backend.delete(Collection.MESSAGES, scope, messages)
        self.backend.delete(Collection.ENTITIES, scope.without_session(), entities)
        kinds = (("fact", facts), ("message", messages), ("entity", entities))
        changes = [(AuditAction.PURGED, tuple(ids), {"record": k}) for k, ids in kinds if ids]
        self._audit(scope, cause, changes)
        for listener in self._listeners:
            listener.records_purged(scope, facts=facts, messages=messages, entities=entities)
        touched = [Collection.MESSAGES] if messages else []
        if facts or entities:  # entity versions and the tree are rewritten with the facts
            touched += [Collection.FACTS, Collection.ENTITIES, Collection.TREE]
        self._erase(touched)

    def _erase(self, collections: Sequence[Collection]) -> None:
        self.backend.compact(collections)
        for listener in self._listeners:
            listener.erased()

    # -- whole scopes ------------------------------------------------------------------------
    def delete_scope(self, scope: Scope, *more: Scope) -> None:
        """Delete every record of ``scope`` (all sessions when it has none), its audit included.

        ``more`` scopes are deleted with it. The derived indexes drop theirs when they hear of
        it; then everything is erased from disk as by :meth:`purge`, once for all of them.
        """
        for target in (scope, *more):
            self.backend.delete_scope(target)
            for listener in self._listeners:
                listener.scope_deleted(target)
        self._erase(list(Collection))
