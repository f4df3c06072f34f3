"""The expiry sweep: facts past their expiry are marked ``expired``, then erased after a grace.

Reads need no sweep (a current read leaves out a fact at its ``expires_at``, see
:class:`membrain.records.FactFilter`); the sweep records it: the active facts expired by the
sweep's time become ``expired``, in one audited ``expired`` event (system actor ``expiry``,
ids only) written through the store's journal, so a crash midway is finished when the store
opens. Retention then erases (:meth:`membrain.records.RecordStore.purge`, from every index and
disk) the facts and messages expired longer ago than the grace period.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from membrain.api.audit import AuditAction, Cause
from membrain.api.errors import InputError
from membrain.api.models import Actor, ActorKind, FactStatus, MessageStatus, Scope, utc
from membrain.knowledge.ledger import Ledger
from membrain.records import FactFilter, RecordStore, is_current

__all__ = ["EXPIRY_ACTOR", "ExpirySweep"]

EXPIRY_ACTOR = Actor(kind=ActorKind.SYSTEM, name="expiry")
"""Who the sweep's changes are audited as."""

_BATCH = 256
"""Facts marked in one audited change."""


class ExpirySweep:
    """Marks and erases what expired, in the scopes of one store.

    Args:
        store: The record store (every change goes through it).
        ledger: Erases facts with what they taught their entities.
        grace: How long expired facts and messages stay before retention erases them.
    """

    def __init__(self, store: RecordStore, ledger: Ledger, grace: timedelta) -> None:
        if grace < timedelta(0):
            raise InputError("the expiry grace must not be negative")
        self._store = store
        self._ledger = ledger
        self.grace = grace

    def mark(self, scope: Scope, at: datetime) -> list[str]:
        """Mark the active facts of ``scope`` expired by ``at``; their ids."""
        where = FactFilter(status=FactStatus.ACTIVE, expired_by=utc(at))
        due = list(self._store.iter_facts(scope, where))
        cause = Cause(EXPIRY_ACTOR, "expired")
        for start in range(0, len(due), _BATCH):
            batch = due[start : start + _BATCH]
            expired = [f.model_copy(update={"status": FactStatus.EXPIRED}) for f in batch]
            self._store.update_facts(scope, expired, action=AuditAction.EXPIRED, cause=cause)
        return [f.id for f in due]

    def erase(self, scope: Scope, at: datetime) -> tuple[list[str], list[str], list[str]]:
        """Erase what expired more than the grace before ``at``: fact, message, entity ids."""
        try:
            cutoff = utc(at) - self.grace
        except OverflowError:
            raise InputError(f"{at.isoformat()} minus the expiry grace is before year 1") from None
        cause = Cause(EXPIRY_ACTOR, "expired longer than the grace period")
        where = FactFilter(status=None, expired_by=cutoff)
        fact_ids = [f.id for f in self._store.iter_facts(scope, where)]
        facts: list[str] = []
        entities: list[str] = []
        if fact_ids:
            facts, _, entities, _ = self._ledger.purge(scope, fact_ids, (), cause)
        messages = [
            m.id
            for m in self._store.messages_expired_by(scope, cutoff)
            if m.status is not MessageStatus.PENDING
        ]
        if messages:
            self._store.purge(scope, messages=messages, cause=cause)
        return facts, messages, entities

    def extend(
        self,
        scope: Scope,
        fact_ids: Sequence[str],
        expires_at: datetime,
        *,
        message_ids: Sequence[str] = (),
    ) -> list[str]:
        """Move the expiry of these current facts and messages to ``expires_at``; their ids.

        The facts cited from ``message_ids`` move too. Audited as ``expiry_set``. What never
        expires, and facts no longer current (expired, superseded, ...), are left as they are:
        a refresh never revives a fact.
        """
        when = utc(expires_at)
        cause = Cause(EXPIRY_ACTOR, "expiry extended")
        messages = [
            m.id
            for m in self._store.get_messages(scope, list(message_ids))
            if m.expires_at is not None and m.expires_at != when
        ]
        self._store.set_message_expiry(scope, messages, when, cause=cause)
        found = {f.id: f for f in self._store.get_facts(scope, list(fact_ids))}
        if message_ids:
            where = FactFilter(sources=tuple(message_ids))
            found.update((f.id, f) for f in self._store.iter_facts(scope, where))
        changed = [
            f.model_copy(update={"expires_at": when})
            for f in found.values()
            if is_current(f) and f.expires_at is not None and f.expires_at != when
        ]
        self._store.update_facts(scope, changed, action=AuditAction.EXPIRY_SET, cause=cause)
        return [*messages, *(f.id for f in changed)]
