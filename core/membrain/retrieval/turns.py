"""Each scope's messages in time order: the turns around a message and its conversation session.

The reranker (:mod:`.signals`) reads a candidate fact's message together with the turn before
it (a short reply is about what it answers), the turn after it (the reply to a question) and
the session it belongs to. A **session** is a run of messages of one stored session with no
pause longer than :data:`SESSION_GAP` between consecutive messages.

The timeline of a scope is read once (one scroll of its messages) and kept until the record
store announces a change to that scope's messages. A message id the kept timeline does not know
(written by another process) reads it again; one still missing then (erased by retention) does
not, until the next change.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from membrain.listeners import RecordListener
from membrain.models import Scope, StoredMessage
from membrain.store import RecordStore

__all__ = ["SESSION_GAP", "Timeline", "Turn"]

SESSION_GAP = timedelta(minutes=30)
"""The longest pause inside one conversation session."""


@dataclass(frozen=True, slots=True)
class Turn:
    """Where one message sits in its scope's timeline."""

    previous: str | None
    """The id of the message just before it in the same session (``None``: it opens one)."""
    next: str | None
    """The id of the message just after it in the same session (``None``: it closes one)."""
    session: int
    """The 0-based number of its conversation session in the scope."""


class Timeline(RecordListener):
    """The turns of each scope's messages, read on demand and kept until they change."""

    def __init__(self, store: RecordStore, *, gap: timedelta = SESSION_GAP) -> None:
        self._store = store
        self._gap = gap
        self._lock = threading.Lock()
        self._turns: dict[Scope, dict[str, Turn]] = {}
        self._absent: dict[Scope, set[str]] = {}

    def turns(self, scope: Scope, ids: Sequence[str]) -> dict[str, Turn]:
        """The turn of each of these messages (ids not stored in ``scope`` are left out)."""
        with self._lock:
            known = self._turns.get(scope)
            absent = self._absent.setdefault(scope, set())
            unknown = known is None or any(i not in known and i not in absent for i in ids)
        if known is None or unknown:
            known = self._read(scope)
            with self._lock:
                self._turns[scope] = known
                # Cited messages erased by retention are not read again until the next change.
                self._absent[scope] = {i for i in ids if i not in known}
        return {i: known[i] for i in ids if i in known}

    def _read(self, scope: Scope) -> dict[str, Turn]:
        ordered = sorted(
            self._store.iter_messages(scope),
            key=lambda m: (m.message.timestamp, m.message.source_id or "", m.id),
        )
        turns: dict[str, Turn] = {}
        session = -1
        before: StoredMessage | None = None
        for message in ordered:
            if before is None or self._breaks(before, message):
                session += 1
                before = None
            turns[message.id] = Turn(before.id if before else None, None, session)
            if before is not None:
                turns[before.id] = Turn(turns[before.id].previous, message.id, session)
            before = message
        return turns

    def _breaks(self, before: StoredMessage, message: StoredMessage) -> bool:
        pause = message.message.timestamp - before.message.timestamp
        return message.scope.session != before.scope.session or pause > self._gap

    def _forget(self, scope: Scope) -> None:
        tenant = scope.without_session()
        with self._lock:
            for kept in [s for s in self._turns if s.without_session() == tenant]:
                del self._turns[kept]
                self._absent.pop(kept, None)

    def messages_written(self, scope: Scope, messages: Sequence[StoredMessage]) -> None:
        """New messages: the scope's timeline is read again when next needed."""
        self._forget(scope)

    def scope_deleted(self, scope: Scope) -> None:
        """The scope is gone: so is its timeline."""
        self._forget(scope)

    def records_purged(
        self,
        scope: Scope,
        *,
        facts: Sequence[str],
        messages: Sequence[str],
        entities: Sequence[str],
    ) -> None:
        """Purged messages leave the timeline."""
        if messages:
            self._forget(scope)
