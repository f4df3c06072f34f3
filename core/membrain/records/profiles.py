"""The user profile's records over a backend: append-only entry versions, each change audited.

Part of :class:`membrain.records.RecordStore`. A profile belongs to a (dataset, task): its points
carry no session. A version is written once and never changed; a purge of facts deletes the
versions citing them (their text summarises the purged content).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from membrain.api.audit import AuditAction, AuditEvent, Cause
from membrain.api.profile import ProfileEntry
from membrain.api.scope import Scope
from membrain.backends.base import Backend, Collection, Point, ScoredPoint, Where
from membrain.records.journal import Change, created

__all__ = ["ProfileRecords"]

_STORED_APART = ("tenant", "session", "stale", "scope")


class ProfileRecords:
    """The profile's part of the record store (see :class:`membrain.records.RecordStore`)."""

    backend: Backend
    # From the other parts of the record store (declared, not defined: they come first).
    _change: Callable[
        [Scope, Cause | None, Sequence[Change]], AbstractContextManager[list[AuditEvent]]
    ]
    _scroll: Callable[[Collection, Scope, Where | None], Iterator[ScoredPoint]]

    def put_profile(self, entry: ProfileEntry, *, cause: Cause) -> None:
        """Write one version of an entry, audited (``profile_set`` or ``profile_removed``)."""
        scope = entry.scope.without_session()
        action = AuditAction.PROFILE_REMOVED if entry.removed else AuditAction.PROFILE_SET
        details = {
            "topic": entry.topic,
            "subtopic": entry.subtopic,
            "version": entry.version,
            "fact_ids": list(entry.fact_ids),
        }
        change = Change(action, (entry.id,), details, created(Collection.PROFILE))
        payload = entry.model_dump(mode="json", exclude={"scope", "stale"})
        with self._change(scope, cause, [change]):
            self.backend.upsert(Collection.PROFILE, scope, [Point(entry.id, payload)])

    def profile_versions(
        self, scope: Scope, *, topic: str | None = None, subtopic: str | None = None
    ) -> list[ProfileEntry]:
        """Every version of the scope's entries (of one topic or subtopic), oldest first."""
        base = scope.without_session()
        where: dict[str, Any] = {}
        if topic is not None:
            where["topic"] = topic
        if subtopic is not None:
            where["subtopic"] = subtopic
        entries = [_entry(base, p) for p in self._scroll(Collection.PROFILE, base, where or None)]
        return sorted(entries, key=lambda e: (e.topic, e.subtopic, e.version))

    def _profile_citing(self, scope: Scope, fact_ids: Sequence[str]) -> list[str]:
        """The ids of the versions that cite one of ``fact_ids``."""
        if not fact_ids:
            return []
        base = scope.without_session()
        where = {"fact_ids": list(fact_ids)}
        return [p.id for p in self._scroll(Collection.PROFILE, base, where)]


def _entry(scope: Scope, point: ScoredPoint) -> ProfileEntry:
    fields = {k: v for k, v in point.payload.items() if k not in _STORED_APART}
    return ProfileEntry.model_validate({**fields, "id": point.id, "scope": scope})
