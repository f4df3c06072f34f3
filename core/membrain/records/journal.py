"""The audit half of the record store: a change is announced, applied, then committed.

Every mutation of :class:`~membrain.records.RecordStore` first appends its audit events marked
*pending*, with what it takes to finish the change (ids, statuses, record times; never
content); then writes the records; then marks the events *done*. Reads of the audit see done
events only. A change interrupted on the way (an error, a killed process) is settled from its
pending events, on the error's way out or when the store opens (:meth:`AuditJournal.recover`):

* a creation (messages, facts, entities) keeps the records that were written, with their
  events committed; one whose records never reached the store is undone (its events dropped);
* an update of facts (status, trust, supersession links, record times) is finished: the new
  values are in its event;
* a message status is kept when it was written, undone otherwise;
* an erasure (:meth:`~AuditJournal.purge`, :meth:`~AuditJournal.delete_scope`) is always
  finished: records deleted, entity descriptions revised, the store's files and the derived
  indexes' rewritten, so nothing of the content stays on disk;
* a change made of several others (:meth:`~AuditJournal.announce`: ``Memory.update`` stores a
  message, writes a fact and supersedes another) is settled by the layer that makes it
  (:meth:`~AuditJournal.on_recover`), once every change inside it is settled.

So no change is left applied without its event, and no event names a change that did not
happen.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from membrain.api.audit import AuditAction, AuditEvent, Cause
from membrain.api.erasure import ErasureKind, ErasureReceipt
from membrain.api.errors import InputError
from membrain.api.inputs import MonotonicClock
from membrain.api.listeners import RecordListener
from membrain.api.models import EntityVersion, Scope
from membrain.api.scope import BOOKKEEPING_TASK_PREFIX, STORED
from membrain.backends.base import Backend, Collection, Point, ScoredPoint, TimeRange
from membrain.records.erasure import (
    FINGERPRINT,
    LEXICAL,
    RECEIPT,
    TREE,
    fingerprint,
    in_scopes,
    receipt_event,
    receipt_of,
    scopes_of,
)

__all__ = ["ANNOUNCED", "AuditJournal", "Change", "ERASURES_TASK", "Finisher", "without_erased"]

STATE = "state"
"""Payload field of an audit event: ``pending`` until its change is applied, then ``done``."""
REDO = "redo"
"""Payload field of a pending event: how to settle its change (cleared on commit)."""
PENDING, DONE = "pending", "done"
ANNOUNCED = "announced"
"""The redo kind of an event :meth:`AuditJournal.announce` wrote: its ``change`` names who
settles it (:meth:`AuditJournal.on_recover`)."""

Finisher = Callable[[Scope, ScoredPoint], None]
"""Settles an announced change from its pending event (the scope is the event's)."""

ERASURES_TASK = f"{BOOKKEEPING_TASK_PREFIX}erasures"
"""The bookkeeping task of a dataset whose audit records its deleted scopes."""

RECOVERY_GRACE = timedelta(minutes=10)
"""How old a pending change must be before a store shared with other processes settles it."""

_SCOPE_KEYS = ("tenant", "session")


class Change(NamedTuple):
    """One audit event of a mutation: what, about which ids, and how to settle it."""

    action: AuditAction
    targets: tuple[str, ...]
    details: dict[str, Any]
    redo: dict[str, Any] | None = None


def created(collection: Collection) -> dict[str, Any]:
    """Settle by keeping the records of ``collection`` that exist (dropping the others)."""
    return {"kind": "created", "collection": collection.value}


def record_scope(scope: Scope, payload: Mapping[str, Any]) -> Scope:
    """The scope of a stored record: ``scope`` with the record's own session."""
    session = payload.get("session") or None
    return Scope.stored(scope.dataset, scope.task, session)


def _storable(payload: dict[str, Any]) -> None:
    """Refuse a payload the store could not write (a lone surrogate, a value JSON lacks)."""
    try:
        json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError) as exc:
        raise InputError(f"an audit event cannot record this value: {exc}"[:300]) from None


class AuditJournal:
    """The audit log, written ahead of every change it records (see the module docstring).

    Part of :class:`membrain.records.RecordStore`, which provides the record writes it settles.
    """

    backend: Backend
    _listeners: list[RecordListener]
    _profile_citing: Callable[[Scope, Sequence[str]], list[str]]
    _unrecall: Callable[[Scope, Sequence[str]], bool]
    _ticks: MonotonicClock
    _finishers: dict[str, Finisher]
    exclusive: bool = False

    def now(self) -> datetime:
        """A record time later than every one this store gave before (the audit's clock)."""
        return self._ticks.next()

    # -- writing -----------------------------------------------------------------------------
    def _events(self, scope: Scope, cause: Cause | None, changes: Sequence[Change]) -> list[Point]:
        """The audit points of ``changes`` (pending when they carry a ``redo``), checked."""
        cause = cause or Cause()
        points = []
        for change in changes:
            if not change.targets:
                continue
            event = AuditEvent(
                id=str(uuid.uuid4()),
                scope=scope,
                action=change.action,
                targets=change.targets,
                actor=cause.actor,
                reason=cause.reason,
                at=self.now(),
                details={**cause.details, **change.details},
            )
            payload: dict[str, Any] = event.model_dump(mode="json", exclude={"scope"})
            if change.redo is not None:
                payload |= {STATE: PENDING, REDO: change.redo}
            _storable(payload)
            points.append(Point(event.id, payload))
        return points

    @contextmanager
    def _change(
        self, scope: Scope, cause: Cause | None, changes: Sequence[Change]
    ) -> Iterator[list[AuditEvent]]:
        """Announce ``changes`` (pending events), let the block apply them, then commit.

        The events are built and checked before anything is written. When the block raises,
        the change is settled (kept, finished or undone with its events) before the error
        goes on; if even that fails, the store settles it when it opens next. Yields the
        events (committed with the change; a change without a ``redo``, such as a review
        requested with it, is committed as the change is settled).
        """
        points = self._events(scope, cause, [c._replace(redo=c.redo or {}) for c in changes])
        if not points:
            yield []
            return
        # The audit is read by filters, never ranked: its points carry no vector.
        self.backend.upsert(Collection.AUDIT, scope, points)
        try:
            yield _as_events(scope, points)
        except BaseException:
            with suppress(Exception):
                self._settle(scope, self.backend.retrieve(Collection.AUDIT, scope, _ids(points)))
            raise
        self._commit(scope, points)

    def _commit(self, scope: Scope, points: Sequence[Point | ScoredPoint]) -> None:
        self.backend.set_payload(Collection.AUDIT, scope, _ids(points), {STATE: DONE, REDO: None})
        events = _as_events(scope, points)
        for listener in self._listeners:
            listener.audited(scope, events)

    def _append_done(
        self, scope: Scope, cause: Cause | None, changes: Sequence[Change]
    ) -> list[AuditEvent]:
        """Append events of changes that need no settling (a review, a recovered event)."""
        points = self._events(scope, cause, [c._replace(redo=None) for c in changes])
        events = _as_events(scope, points)
        if points:
            self.backend.upsert(Collection.AUDIT, scope, points)
            for listener in self._listeners:
                listener.audited(scope, events)
        return events

    def announce(self, scope: Scope, cause: Cause, change: Change) -> ScoredPoint:
        """Append the pending event of a change the caller makes of several others.

        ``change.redo`` holds ``"change"``, the name of the :meth:`on_recover` finisher that
        settles it if it is left pending, and the ids that finisher needs (never content).
        Reads do not see the event until :meth:`commit_announced`; :meth:`drop_announced`
        undoes it.
        """
        redo = {**(change.redo or {}), "kind": ANNOUNCED}
        points = self._events(scope, cause, [change._replace(redo=redo)])
        if not points:
            raise InputError("an announced change is about at least one id")
        self.backend.upsert(Collection.AUDIT, scope, points)
        return _scored(points[0])

    def commit_announced(self, scope: Scope, event: ScoredPoint) -> None:
        """Commit an announced event, timed now: after the changes it is made of."""
        (stamped,) = _as_events(scope, [event])
        stamped = stamped.model_copy(update={"at": self.now()})
        at = stamped.model_dump(mode="json")["at"]
        self.backend.set_payload(
            Collection.AUDIT, scope, [event.id], {STATE: DONE, REDO: None, "at": at}
        )
        for listener in self._listeners:
            listener.audited(scope, [stamped])

    def drop_announced(self, scope: Scope, event: ScoredPoint) -> None:
        """Undo an announced event: its change was not made."""
        self.backend.delete(Collection.AUDIT, scope, [event.id])

    def on_recover(self, change: str, finish: Finisher) -> None:
        """Have ``finish`` settle the announced changes named ``change`` left pending.

        :meth:`recover` calls it after every other pending change is settled. Without one the
        event stays pending (unread) until a finisher is registered.
        """
        self._finishers[change] = finish

    def import_events(self, scope: Scope, events: Sequence[AuditEvent]) -> None:
        """Append events another store wrote (an export): ids, actors, times and reasons kept.

        Each is marked ``details["imported"] = True``; none changes a record here.
        """
        points = []
        for event in events:
            payload: dict[str, Any] = event.model_dump(mode="json", exclude={"scope"})
            payload["details"] = {**payload["details"], "imported": True}
            _storable(payload)
            points.append(Point(event.id, payload))
        if points:
            self.backend.upsert(Collection.AUDIT, scope, points)

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
        changes = [Change(action, tuple(targets), details or {})]
        (event,) = self._append_done(scope, cause, changes)
        return event

    def audit_missing(
        self, scope: Scope, action: AuditAction, targets: Sequence[str], *, cause: Cause
    ) -> list[str]:
        """Audit a change already stored whose event was never written; the ids audited now.

        Stores written before changes were announced in the audit can hold a change without
        its event; when the same call runs again and finds the change done, it calls this:
        each target without an ``action`` event gets one, marked ``recovered``.
        """
        if not targets:
            return []
        audited = self.iter_audit(scope, targets=targets, actions=[action])
        seen = {t for event in audited for t in event.targets}
        missing = tuple(t for t in dict.fromkeys(targets) if t not in seen)
        self._append_done(scope, cause, [Change(action, missing, {"recovered": True})])
        return list(missing)

    # -- reading -----------------------------------------------------------------------------
    def iter_audit(
        self,
        scope: Scope,
        *,
        targets: Sequence[str] = (),
        actions: Sequence[AuditAction] = (),
        since: datetime | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[AuditEvent]:
        """The scope's committed audit events, oldest first: about ``targets``, of ``actions``."""
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
            points = list(self._audit_points(scope, where))
        done = [p for p in points if p.payload.get(STATE) != PENDING]
        return sorted(_as_events(scope, done), key=lambda e: (e.at, e.id))

    def _audit_points(self, scope: Scope, where: dict[str, Any]) -> Iterator[ScoredPoint]:
        offset: str | None = None
        while True:
            page, offset = self.backend.scroll(Collection.AUDIT, scope, where=where, offset=offset)
            yield from page
            if offset is None:
                return

    # -- erasure -----------------------------------------------------------------------------
    def purge(
        self,
        scope: Scope,
        *,
        facts: Sequence[str] = (),
        messages: Sequence[str] = (),
        entities: Sequence[str] = (),
        revise: Sequence[str] = (),
        cause: Cause | None = None,
    ) -> ErasureReceipt | None:
        """Delete records and everything derived from their content, then erase them from disk.

        ``revise`` names entities whose description versions taught by the purged facts are
        taken out (:func:`without_erased`); ``entities`` are deleted. The audit keeps one
        ``purged`` event per kind of record, with the ids only. The erasure is announced first:
        once it is, it finishes, now or when the store opens next, whatever interrupts it.
        Returns its receipt (:mod:`membrain.records.erasure`), None when nothing was named.
        """
        erasure = str(uuid.uuid4())
        kinds = (("fact", facts), ("message", messages), ("entity", entities))
        changes = [
            Change(
                AuditAction.PURGED,
                tuple(ids),
                {"record": kind, RECEIPT: erasure},
                {"kind": "purge", "erasure": erasure, "revise": list(revise)},
            )
            for kind, ids in kinds
            if ids
        ]
        if not changes:
            return None
        draft = self._purge_fingerprint(scope, facts, messages, entities, revise)
        changes[0] = changes[0]._replace(details={**changes[0].details, FINGERPRINT: draft})
        points = self._events(scope, cause, changes)
        if not points:
            return None
        self.backend.upsert(Collection.AUDIT, scope, points)
        return self._finish_erasure(scope, [_scored(p) for p in points])

    def _purge_fingerprint(
        self,
        scope: Scope,
        facts: Sequence[str],
        messages: Sequence[str],
        entities: Sequence[str],
        revise: Sequence[str],
    ) -> dict[str, Any]:
        """What a purge's receipt holds besides its ids, read before anything is erased."""
        whole = scope.without_session()
        profiles = self._profile_citing(scope, facts)
        erased = {
            Collection.FACTS: self.backend.retrieve(Collection.FACTS, scope, facts),
            Collection.MESSAGES: self.backend.retrieve(Collection.MESSAGES, scope, messages),
            Collection.ENTITIES: self.backend.retrieve(Collection.ENTITIES, whole, entities),
            Collection.PROFILE: self.backend.retrieve(Collection.PROFILE, whole, profiles),
        }
        revised = self.backend.retrieve(Collection.ENTITIES, whole, revise)
        kept: list[str] = []
        for point in revised:  # what each keeps: its names, its versions without the facts'
            versions = [
                EntityVersion.model_validate(v) for v in point.payload.get("versions") or ()
            ]
            kept += [point.payload.get("name", ""), *(point.payload.get("aliases") or ())]
            kept += [v.description for v in without_erased(versions, set(facts))]
        gone = {(c, p.id) for c, found in erased.items() for p in found}
        gone |= {(Collection.ENTITIES, p.id) for p in revised}
        tree = bool(facts or entities or revise)  # the tree is dropped, built again later

        def leaving(collection: Collection, point: ScoredPoint) -> bool:
            if collection is Collection.TREE:
                return tree and point.payload.get("tenant") == scope.key
            return (collection, point.id) in gone

        old = [
            str(v.get("description", "")) for p in revised for v in p.payload.get("versions") or ()
        ]
        touched = [Collection.MESSAGES] if messages else []
        if tree:
            touched += [Collection.FACTS, Collection.ENTITIES]
        if profiles:
            touched.append(Collection.PROFILE)
        names = [c.value for c in touched] + ([TREE] if tree else []) + ([LEXICAL] if facts else [])
        return {
            "kind": ErasureKind.PURGE.value,
            "dataset": scope.dataset,
            "scopes": scopes_of([scope]),
            "profile": profiles,
            "revised": [p.id for p in revised],
            "erased_from": names,
            **fingerprint(self.backend, erased, leaving, also=old, staying=kept),
        }

    def scopes(self, dataset: str | None = None, *, every: bool = False) -> list[Scope]:
        """The (dataset, task) scopes that hold messages or facts, of one dataset or all.

        Bookkeeping scopes (:meth:`Scope.bookkeeping`) are left out; with ``every``, the
        scopes holding any record are listed, bookkeeping ones included (not the erasure log).
        """
        collections = list(Collection) if every else [Collection.MESSAGES, Collection.FACTS]
        found = {
            s
            for collection in collections
            for s in self.backend.tenants(collection)
            if dataset in (None, s.dataset)
            and (every or not s.is_bookkeeping)
            and s.task != ERASURES_TASK
        }
        return sorted(found, key=lambda s: (s.dataset, s.task))

    def delete_scope(self, scope: Scope, *more: Scope) -> ErasureReceipt | None:
        """Delete every record of ``scope`` (all sessions when it has none), its audit included.

        ``more`` scopes are deleted with it. The derived indexes drop theirs when they hear of
        it; then everything is erased from disk as by :meth:`purge`, once for all of them. The
        deletion is announced first in the dataset's erasure log (task :data:`ERASURES_TASK`,
        a ``scope_deleted`` event naming the scopes), so it finishes whatever interrupts it.
        """
        targets = (scope, *more)
        log = Scope(dataset=scope.dataset, task=ERASURES_TASK)
        named = [{"dataset": s.dataset, "task": s.task, "session": s.session} for s in targets]
        receipt = str(uuid.uuid4())
        change = Change(
            AuditAction.SCOPE_DELETED,
            tuple(s.record_id("scope") for s in targets),
            {"scopes": named, RECEIPT: receipt, FINGERPRINT: self._scopes_fingerprint(targets)},
            {"kind": "delete_scope"},
        )
        points = self._events(log, Cause(), [change])
        self.backend.upsert(Collection.AUDIT, log, points)
        return self._finish_scope_deletion(log, _scored(points[0]))

    def _scopes_fingerprint(self, targets: Sequence[Scope]) -> dict[str, Any]:
        """What a deletion's receipt holds besides its id, read before anything is deleted."""
        kinds = {
            Collection.FACTS: "facts",
            Collection.MESSAGES: "messages",
            Collection.ENTITIES: "entities",
            Collection.PROFILE: "profile",
            Collection.TREE: None,
        }
        erased = {c: [p for s in targets for p in self._scope_points(c, s)] for c in kinds}
        ids = {name: [p.id for p in erased[c]] for c, name in kinds.items() if name}
        return {
            "kind": ErasureKind.SCOPES.value,
            "dataset": targets[0].dataset,
            "scopes": scopes_of(targets),
            **ids,
            "erased_from": [c.value for c in Collection] + [LEXICAL],
            **fingerprint(self.backend, erased, in_scopes(targets)),
        }

    def _scope_points(self, collection: Collection, scope: Scope) -> Iterator[ScoredPoint]:
        offset: str | None = None
        while True:
            page, offset = self.backend.scroll(collection, scope, offset=offset)
            yield from page
            if offset is None:
                return

    def finish_erasures(self, scope: Scope) -> set[str]:
        """Finish the scope's erasures left pending; the ids of the records they erased."""
        pending = list(self._audit_points(scope, {STATE: PENDING}))
        erasures = [p for p in pending if (p.payload.get(REDO) or {}).get("kind") == "purge"]
        self._settle(scope, erasures)
        return {t for p in erasures for t in p.payload.get("targets", ())}

    def _finish_erasure(self, scope: Scope, events: Sequence[ScoredPoint]) -> ErasureReceipt | None:
        ids: dict[str, list[str]] = {"fact": [], "message": [], "entity": []}
        revise: list[str] = []
        for event in events:
            ids[event.payload["details"]["record"]].extend(event.payload["targets"])
            revise.extend((event.payload.get(REDO) or {}).get("revise") or ())
        facts, messages, entities = ids["fact"], ids["message"], ids["entity"]
        self._revise_entities(scope.without_session(), revise, set(facts))
        profiles = self._profile_citing(scope, facts)  # their text summarises the facts
        self.backend.delete(Collection.PROFILE, scope.without_session(), profiles)
        self.backend.delete(Collection.FACTS, scope, facts)
        self.backend.delete(Collection.MESSAGES, scope, messages)
        self.backend.delete(Collection.ENTITIES, scope.without_session(), entities)
        recalled = self._unrecall(scope, facts)
        for listener in self._listeners:
            listener.records_purged(scope, facts=facts, messages=messages, entities=entities)
        touched = [Collection.MESSAGES] if messages else []
        if facts or entities or revise:  # entity versions and the tree go with the facts
            touched += [Collection.FACTS, Collection.ENTITIES, Collection.TREE]
        if profiles:
            touched.append(Collection.PROFILE)
        if recalled:
            touched.append(Collection.RECALLS)
        self._erase(touched)
        receipt = self._issue_receipt(events)
        self._commit(scope, events)
        return receipt

    def _finish_scope_deletion(self, log: Scope, event: ScoredPoint) -> ErasureReceipt | None:
        for named in event.payload["details"]["scopes"]:
            target = Scope.model_validate(named, context=STORED)
            self.backend.delete_scope(target)
            for listener in self._listeners:
                listener.scope_deleted(target)
        self._erase(list(Collection))
        receipt = self._issue_receipt([event])
        self._commit(log, [event])
        return receipt

    def _issue_receipt(self, events: Sequence[ScoredPoint]) -> ErasureReceipt | None:
        """Write a finished erasure's receipt into its dataset's erasure log (once per id)."""
        receipt_id = (events[0].payload.get("details") or {}).get(RECEIPT)
        found = receipt_of(str(receipt_id), [e.payload for e in events], self.now())
        if receipt_id is None or found is None:
            return None  # announced before receipts existed
        log = Scope.stored(found.dataset, ERASURES_TASK)
        payload = {**receipt_event(log, found), STATE: DONE}
        self.backend.upsert(Collection.AUDIT, log, [Point(found.id, payload)])
        return found

    def _erase(self, collections: Sequence[Collection]) -> None:
        self.backend.compact(collections)
        for listener in self._listeners:
            listener.erased()

    def _revise_entities(self, scope: Scope, entity_ids: Sequence[str], erased: set[str]) -> None:
        """Rewrite entities without the description versions ``erased`` facts taught."""
        raise NotImplementedError

    def _existing(
        self, collection: Collection, scope: Scope, ids: Sequence[str]
    ) -> list[ScoredPoint]:
        where = scope.without_session() if collection is Collection.ENTITIES else scope
        return self.backend.retrieve(collection, where, ids)

    # -- settling ----------------------------------------------------------------------------
    def recover(self) -> int:
        """Settle every change left pending by an interrupted call; how many events it settled.

        A store this process owns alone settles them all; one shared with other processes (a
        Qdrant server) only those older than :data:`RECOVERY_GRACE`, which no live call can
        still be applying.
        """
        before = None if self.exclusive else self.now() - RECOVERY_GRACE
        settled = 0
        announced: list[tuple[Scope, ScoredPoint, Finisher]] = []
        for scope in self.backend.tenants(Collection.AUDIT, where={STATE: PENDING}):
            where: dict[str, Any] = {STATE: PENDING}
            if before is not None:
                where["at"] = TimeRange(lt=before)
            pending = list(self._audit_points(scope, where))
            self._settle(scope, pending)
            for event in pending:
                redo = event.payload.get(REDO) or {}
                finish = self._finishers.get(str(redo.get("change")))
                if redo.get("kind") == ANNOUNCED and finish is not None:
                    announced.append((record_scope(scope, event.payload), event, finish))
            settled += len(pending)
        # Last: the changes an announced one is made of are settled by now.
        for scope, event, finish in announced:
            finish(scope, event)
        return settled

    def _settle(self, scope: Scope, pending: Sequence[ScoredPoint]) -> None:
        """Keep, finish or undo the changes of these pending events (see the module docs)."""
        pending = [p for p in pending if p.payload.get(STATE) == PENDING]
        erasures: dict[str, list[ScoredPoint]] = {}
        for event in pending:
            redo = event.payload.get(REDO) or {}
            own = record_scope(scope, event.payload)
            kind = redo.get("kind")
            if kind == "purge":
                erasures.setdefault(redo["erasure"], []).append(event)
            elif kind == "delete_scope":
                self._finish_scope_deletion(scope, event)
            elif kind == "created":
                self._keep_written(own, event, Collection(redo["collection"]))
            elif kind == "set":
                self._finish_update(own, event, redo)
            elif kind == "status":
                self._keep_status(own, event, redo)
            elif kind == "versioned":
                self._keep_if(own, event, self._versioned(own, event, redo))
            elif kind == "discarded":
                found = self._existing(Collection.MESSAGES, own, event.payload["targets"])
                self._keep_if(own, event, bool(found and found[0].payload.get("discarded")))
            elif kind == ANNOUNCED:
                continue  # its finisher settles it (:meth:`recover`)
            else:
                self._commit(own, [event])
        for events in erasures.values():
            self._finish_erasure(record_scope(scope, events[0].payload), events)

    def _keep_written(self, scope: Scope, event: ScoredPoint, collection: Collection) -> None:
        targets = list(event.payload["targets"])
        written = {p.id for p in self._existing(collection, scope, targets)}
        kept = [t for t in targets if str(uuid.UUID(t)) in written]
        if kept and len(kept) < len(targets):
            self.backend.set_payload(Collection.AUDIT, scope, [event.id], {"targets": kept})
        self._keep_if(scope, event, bool(kept))

    def _finish_update(self, scope: Scope, event: ScoredPoint, redo: dict[str, Any]) -> None:
        """Write the event's new field values again (they are ids, statuses and times)."""
        collection = Collection(redo["collection"])
        for record_id, values in (redo.get("fields") or {}).items():
            self.backend.set_payload(collection, scope, [record_id], values)
        self._commit(scope, [event])

    def _keep_status(self, scope: Scope, event: ScoredPoint, redo: dict[str, Any]) -> None:
        """Keep a status written to any of the messages (all of them get it), else undo it."""
        targets = list(event.payload["targets"])
        found = self._existing(Collection.MESSAGES, scope, targets)
        if any(p.payload.get("status") == redo["status"] for p in found):
            self.backend.set_payload(
                Collection.MESSAGES, scope, targets, {"status": redo["status"]}
            )
            self._commit(scope, [event])
        else:
            self.backend.delete(Collection.AUDIT, scope, [event.id])

    def _versioned(self, scope: Scope, event: ScoredPoint, redo: dict[str, Any]) -> bool:
        found = self._existing(Collection.ENTITIES, scope, event.payload["targets"])
        if not found:
            return False
        payload = found[0].payload
        versions = len(payload.get("versions") or ())
        aliases = len(payload.get("aliases") or ())
        return versions >= int(redo.get("versions", 0)) and aliases >= int(redo.get("aliases", 0))

    def _keep_if(self, scope: Scope, event: ScoredPoint, keep: bool) -> None:
        if keep:
            self._commit(scope, [event])
        else:
            self.backend.delete(Collection.AUDIT, scope, [event.id])


def _as_events(scope: Scope, points: Sequence[Point | ScoredPoint]) -> list[AuditEvent]:
    """The audit events stored as ``points`` (of ``scope``; each with its own session)."""
    return [
        AuditEvent.model_validate(
            {
                **{k: v for k, v in p.payload.items() if k not in (*_SCOPE_KEYS, STATE, REDO)},
                "id": p.id,
                "scope": record_scope(scope, p.payload) if "session" in p.payload else scope,
            }
        )
        for p in points
    ]


def _ids(points: Sequence[Point | ScoredPoint]) -> list[str]:
    return [p.id for p in points]


def _scored(point: Point) -> ScoredPoint:
    return ScoredPoint(id=point.id, payload=dict(point.payload))


def without_erased(
    versions: Sequence[EntityVersion], erased: set[str]
) -> tuple[EntityVersion, ...]:
    """Description versions with what erased facts taught taken out of every later version.

    Each version extends the one before it (``"<previous> <addition>"``): the additions of the
    versions citing erased facts are dropped, the rest chained again and renumbered.
    """
    if not any(set(v.fact_ids) & erased for v in versions):
        return tuple(versions)
    kept: list[EntityVersion] = []
    description, previous = "", ""
    for version in versions:
        text = version.description
        addition = text[len(previous) :].strip() if text.startswith(previous) else text
        previous = text
        if set(version.fact_ids) & erased:
            continue
        description = f"{description} {addition}".strip()
        kept.append(
            EntityVersion(
                version=len(kept) + 1,
                description=description,
                recorded_at=version.recorded_at,
                fact_ids=version.fact_ids,
            )
        )
    return tuple(kept)
