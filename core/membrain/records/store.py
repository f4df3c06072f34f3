"""Records over a backend: messages, facts, entities and their audit log, to points and back.

This is the one place that knows how a record is laid out as a Qdrant payload and which text of
it is embedded, and the one place every mutation passes through. Each mutation takes a
:class:`~membrain.api.audit.Cause` (who, why) and is written with its append-only
:class:`~membrain.api.audit.AuditEvent` records; then the subscribed
:class:`~membrain.api.listeners.RecordListener` objects (the derived indexes) hear what changed.
Everything above speaks in :mod:`membrain.api.models` records, :class:`FactFilter` and
:class:`TreeNode`; reads return the records a caller needs in one round trip.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any

from membrain.api.audit import AuditAction, AuditEvent, Cause
from membrain.api.errors import InputError
from membrain.api.indexing import entity_text, fact_dense_text, fact_sparse_text, message_text
from membrain.api.inputs import MonotonicClock
from membrain.api.listeners import RecordListener
from membrain.api.models import Entity, Fact, MessageStatus, Scope, StoredMessage
from membrain.backends.base import (
    DENSE,
    SPARSE,
    Backend,
    Collection,
    Point,
    ScoredPoint,
    TimeRange,
    VectorQuery,
    point_uuid,
    scope_payload,
)
from membrain.embeddings import DenseEncoder, SparseEncoder
from membrain.records.backfill import Backfill
from membrain.records.entity_names import ENTITY_NAME_FIELDS, EntityNameReads, name_fields
from membrain.records.filters import (
    DERIVED_FACT_FIELDS,
    FactFilter,
    fact_claims,
    fact_payload,
    iso,
    metadata_indexes,
)
from membrain.records.journal import AuditJournal, Change, created, record_scope, without_erased
from membrain.records.profiles import ProfileRecords
from membrain.records.ranked import RankedReads, Vector
from membrain.records.recalls import RecallRecords
from membrain.records.tree import TreeNode, TreeRecords

__all__ = ["FactFilter", "RecordStore", "ScoredFact", "TreeNode", "id_prefix"]

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


_ENTITY_KEYS = ENTITY_NAME_FIELDS
_SCOPE_KEYS = ("tenant", "session")


def _payload(record: Any, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = record.model_dump(mode="json", exclude={"scope"})
    data.update(extra)
    return data


_record_scope = record_scope

MIN_ID_PREFIX = 8
"""The fewest hex digits of an id that name a record (as context lines and tools show ids)."""
_HEX_DIGITS = frozenset("0123456789abcdef")


def id_prefix(given: str) -> str | None:
    """The hex digits of ``given`` when it is an id prefix, else ``None``.

    A prefix is 8 to 31 hex digits, dashes and case ignored; a whole id is none.
    """
    digits = given.replace("-", "").lower()
    if MIN_ID_PREFIX <= len(digits) < 32 and set(digits) <= _HEX_DIGITS:
        return digits
    return None


_UPDATED_FACT_FIELDS = (
    "status",
    "trust",
    "supersedes",
    "superseded_by",
    "superseded_at",
    "forgotten_at",
    "retracted_at",
    "valid_to",
    "revised_at",
    "believed_until",
    "valid_end",
    "expires_at",
    "expires",
)
"""The fields an update of a fact may change (its audit event carries their new values)."""


def _claims_of(point: ScoredPoint) -> dict[str, Any]:
    return {"claims": fact_claims(str(point.payload.get("text", "")))}


def _fields(payload: dict[str, Any], *dropped: str) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in (*_SCOPE_KEYS, *dropped)}


class RecordStore(
    RankedReads, EntityNameReads, TreeRecords, AuditJournal, ProfileRecords, RecallRecords
):
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
        self._finishers = {}
        self._ticks = MonotonicClock()
        self._backfill = Backfill(backend)
        self.exclusive = backend.exclusive
        backend.ensure_collections(
            dense_dim=dense.dim, dense_model=dense.name, sparse_model=sparse.name
        )

    def subscribe(self, listener: RecordListener) -> None:
        """Tell ``listener`` about every later mutation (once, however often subscribed)."""
        if all(known is not listener for known in self._listeners):
            self._listeners.append(listener)

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

    def full_ids(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> list[str]:
        """``ids`` with each unique prefix of at least 8 hex digits replaced by the whole id.

        Whole ids, and strings that are no such prefix, are kept as given (a read skips what
        names nothing, a change reports it unknown). A prefix is found with one read: points are
        ordered by id, so the first two from the prefix on tell whether it is unique.

        Raises:
            InputError: a prefix names several records of ``scope`` (the message names two).
        """
        found = []
        for given in ids:
            digits = id_prefix(given)
            if digits is None:
                found.append(given)
                continue
            start = str(uuid.UUID(digits.ljust(32, "0")))
            page, _ = self.backend.scroll(collection, scope, limit=2, offset=start)
            named = [p.id for p in page if p.id.replace("-", "").startswith(digits)]
            if len(named) > 1:
                raise InputError(
                    f"id {given!r} names several records ({', '.join(named)}, ...); give more of it"
                )
            found.append(named[0] if named else given)
        return found

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
        stored = Change(
            AuditAction.STORED, tuple(m.id for m in messages), {}, created(Collection.MESSAGES)
        )
        with self._change(scope, cause, [stored]):
            self.backend.upsert(Collection.MESSAGES, scope, points)
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

    def messages_said(self, scope: Scope, since: datetime, before: datetime) -> list[StoredMessage]:
        """The messages of ``scope``'s session said in ``[since, before)``, in time order.

        A scope without a session reads the messages stored without one. One filtered read of
        the session's messages, however many the tenant holds.
        """
        where = {
            "session": scope_payload(scope)["session"],
            "message.timestamp": TimeRange(gte=since, lt=before),
        }
        found = [self._message(scope, p) for p in self._scroll(Collection.MESSAGES, scope, where)]
        return sorted(found, key=lambda m: (m.message.timestamp, m.message.source_id or "", m.id))

    def messages_expired_by(self, scope: Scope, moment: datetime) -> list[StoredMessage]:
        """The scope's messages whose expiry is at or before ``moment`` (one filtered read)."""
        where = {"expires_at": TimeRange(lte=moment)}
        return [self._message(scope, p) for p in self._scroll(Collection.MESSAGES, scope, where)]

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
        action = AuditAction.EXTRACTION_FAILED if error else AuditAction.PROCESSED
        if status is MessageStatus.DISMISSED:
            action = AuditAction.DISMISSED
        changes = [Change(action, tuple(ids), {}, {"kind": "status", "status": status.value})]
        notes: dict[str, list[str]] = {}
        for message_id, items in (discarded or {}).items():
            notes[message_id] = [f"{reason}: {text}" for reason, text in items]
            kinds = sorted({reason for reason, _ in items})
            changes.append(
                Change(
                    AuditAction.DISCARDED, (message_id,), {"reasons": kinds}, {"kind": "discarded"}
                )
            )
        with self._change(scope, cause, changes):
            self.backend.set_payload(Collection.MESSAGES, scope, ids, fields)
            for message_id, reasons in notes.items():
                self.backend.set_payload(
                    Collection.MESSAGES, scope, [message_id], {"discarded": reasons}
                )
        for listener in self._listeners:
            listener.messages_marked(scope, ids, status)

    def set_message_expiry(
        self, scope: Scope, ids: Sequence[str], expires_at: datetime, *, cause: Cause | None = None
    ) -> None:
        """Move the expiry of messages (audited as ``expiry_set``, finished after a crash)."""
        if not ids:
            return
        when = iso(expires_at)
        redo = {
            "kind": "set",
            "collection": Collection.MESSAGES.value,
            "fields": {str(point_uuid(i)): {"expires_at": when} for i in ids},
        }
        change = Change(AuditAction.EXPIRY_SET, tuple(ids), {"record": "message"}, redo)
        with self._change(scope, cause, [change]):
            self.backend.set_payload(Collection.MESSAGES, scope, ids, {"expires_at": when})

    def search_messages(
        self,
        scope: Scope,
        text: str,
        *,
        using: Sequence[str],
        limit: int,
        candidates: int,
        dense: Sequence[float] | None = None,
    ) -> list[tuple[StoredMessage, float]]:
        """Ranked messages (the raw evidence) for ``text``, by BM25, dense or both fused.

        ``dense``: the dense query vector of ``text``, when the caller has it already.
        """
        queries = []
        if SPARSE in using:
            queries.append(VectorQuery(SPARSE, self.sparse.embed_query(text), limit=candidates))
        if DENSE in using:
            vector = list(dense) if dense is not None else self.dense.embed_query(text)
            queries.append(VectorQuery(DENSE, vector, limit=candidates))
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
                "expires_at": payload.get("expires_at"),
            },
            context={"stored": True},
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
        """Store new facts with their BM25 and dense vectors (see :mod:`membrain.api.indexing`).

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
        changes = [
            Change(
                AuditAction.CREATED,
                (f.id,),
                {
                    "record": "fact",
                    "sources": list(f.sources),
                    "extractor": f.extractor,
                    "trust": f.trust.value,
                    **({"supersedes": list(f.supersedes)} if f.supersedes else {}),
                },
                created(Collection.FACTS),
            )
            for f in facts
        ]
        for field, kind in metadata_indexes(facts).items():
            self.backend.index_field(Collection.FACTS, field, kind)
        with self._announcing(scope), self._change(scope, cause, changes):
            self.backend.upsert(Collection.FACTS, scope, points)
        self._facts_written(scope, facts)

    def update_facts(
        self,
        scope: Scope,
        facts: Sequence[Fact],
        *,
        action: AuditAction,
        targets: Sequence[str] | None = None,
        cause: Cause | None = None,
        announced: ScoredPoint | None = None,
        noted: Sequence[Change] = (),
    ) -> list[AuditEvent]:
        """Store the new state of facts already stored (status, trust, links), keeping vectors.

        Text, times and sources are what the vectors were computed from: a changed text is a
        new fact, never an update. Audited as one ``action`` event about ``targets`` (default:
        every fact given); or, when the change was ``announced`` (:meth:`announce`), by that
        event, committed once the facts are written. ``noted`` events (a review requested about
        the facts) come first and are part of the change: read once the facts are written, and
        settled with them after a crash. Returns the events written (none when announced).
        """
        if not facts:
            return []
        revised = self.now()
        payloads = {str(point_uuid(f.id)): fact_payload(f, revised) for f in facts}
        if announced is not None:
            with self._announcing(scope):
                for fact_id, payload in payloads.items():
                    self.backend.set_payload(Collection.FACTS, scope, [fact_id], payload)
            self.commit_announced(scope, announced)
            self._facts_written(scope, facts)
            return []
        redo = {
            "kind": "set",
            "collection": Collection.FACTS.value,
            "fields": {i: {k: p[k] for k in _UPDATED_FACT_FIELDS} for i, p in payloads.items()},
        }
        about = tuple(targets) if targets is not None else tuple(f.id for f in facts)
        changes = [*noted, Change(action, about, {}, redo)]
        with self._announcing(scope), self._change(scope, cause, changes) as events:
            for fact_id, payload in payloads.items():
                self.backend.set_payload(Collection.FACTS, scope, [fact_id], payload)
        self._facts_written(scope, facts)
        return events

    def _facts_written(self, scope: Scope, facts: Sequence[Fact]) -> None:
        with self._announcing(scope):
            for listener in self._listeners:
                listener.facts_written(scope, facts)

    @contextmanager
    def _announcing(self, scope: Scope) -> Iterator[None]:
        """Tell every listener the scope's facts are unsure if the block fails midway."""
        try:
            yield
        except BaseException:
            for listener in self._listeners:
                with suppress(Exception):
                    listener.facts_unsure(scope)
            raise

    def get_facts(self, scope: Scope, ids: Sequence[str]) -> list[Fact]:
        """Facts by id, in the order asked (missing ids skipped)."""
        return [self._fact(scope, p) for p in self.backend.retrieve(Collection.FACTS, scope, ids)]

    def iter_facts(self, scope: Scope, where: FactFilter | None = None) -> Iterator[Fact]:
        """Every fact of the scope that ``where`` admits (every fact when it is ``None``)."""
        condition = self.fact_condition(scope, where) if where is not None else None
        for point in self._scroll(Collection.FACTS, scope, condition):
            yield self._fact(scope, point)

    def facts_claiming(self, scope: Scope, keys: Sequence[str]) -> list[Fact]:
        """The scope's active facts stating a value of one of ``keys`` (subject|attribute).

        One indexed lookup. Facts stored before the ``claims`` field existed get it first, once
        per scope and process (a derived index field, like ``revised_at``: not audited).
        """
        if not keys:
            return []
        self._backfill.ensure(Collection.FACTS, scope, "claims", _claims_of)
        return list(self.iter_facts(scope, FactFilter(claims=tuple(keys))))

    def first_facts(self, scope: Scope, where: FactFilter, *, limit: int) -> list[Fact]:
        """At most ``limit`` facts ``where`` admits, in storage order (one round trip)."""
        condition = self.fact_condition(scope, where)
        points, _ = self.backend.scroll(Collection.FACTS, scope, where=condition, limit=limit)
        return [self._fact(scope, p) for p in points]

    def count_facts(self, scope: Scope, where: FactFilter | None = None) -> int:
        """How many facts of the scope ``where`` admits (all of them when it is ``None``)."""
        condition = self.fact_condition(scope, where) if where is not None else None
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
        points = self._ranked(scope, using, vector, limit, where, payload=True)
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
        changes = []
        for entity in entities:
            old = before.get(entity.id)
            versions = [v.version for v in entity.versions]
            if old is None:
                changes.append(
                    Change(
                        AuditAction.CREATED,
                        (entity.id,),
                        {"record": "entity"},
                        created(Collection.ENTITIES),
                    )
                )
                continue
            added = [v for v in entity.versions if v.version > len(old.versions)]
            aliases = len(entity.aliases) - len(old.aliases)
            if added or aliases > 0:
                details: dict[str, Any] = {"record": "entity", "version": max(versions or [0])}
                details["fact_ids"] = [i for v in added for i in v.fact_ids]
                details["aliases_added"] = max(aliases, 0)
                redo = {
                    "kind": "versioned",
                    "versions": len(entity.versions),
                    "aliases": len(entity.aliases),
                }
                changes.append(
                    Change(AuditAction.DESCRIPTION_VERSIONED, (entity.id,), details, redo)
                )
        with self._change(scope, cause, changes):
            self._write_entities(scope, entities)

    def _write_entities(self, scope: Scope, entities: Sequence[Entity]) -> None:
        points = self._points(
            [e.id for e in entities],
            [_payload(e, **name_fields(e.name, e.aliases)) for e in entities],
            [entity_text(e.name, e.description) for e in entities],
        )
        self.backend.upsert(Collection.ENTITIES, scope, points)
        for listener in self._listeners:
            listener.entities_written(scope, entities)

    def _revise_entities(self, scope: Scope, entity_ids: Sequence[str], erased: set[str]) -> None:
        """Rewrite entities without the description versions ``erased`` facts taught."""
        revised = []
        for entity in self.get_entities(scope, list(dict.fromkeys(entity_ids))):
            versions = without_erased(entity.versions, erased)
            if versions != entity.versions:
                revised.append(entity.model_copy(update={"versions": versions}))
        if revised:
            self._write_entities(scope, revised)

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
