"""Each scope's messages in time order: the turns around a message and its conversation session.

The reranker (:mod:`.signals`) reads a candidate fact's message together with the turn before
it (a short reply is about what it answers), the turn after it (the reply to a question) and
the session it belongs to. A **session** is a run of messages of one stored session with no
pause longer than :data:`SESSION_GAP` between consecutive messages.

The timeline of a scope is read once (one scroll of its messages) and kept. New messages the
record store announces that come after the kept ones in time (a conversation going on) extend
it; any other change to the scope's messages (one stored earlier than the last kept, a purge)
drops it, to be read again when next needed. A message id the kept timeline does not know
(written by another process) reads it again; one still missing then (erased by retention) does
not, until the next change.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from membrain.api.listeners import RecordListener
from membrain.api.models import Scope, StoredMessage
from membrain.records import RecordStore

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
        self._last: dict[Scope, StoredMessage | None] = {}
        """The latest message of each kept timeline (where new ones join it)."""

    def turns(self, scope: Scope, ids: Sequence[str]) -> dict[str, Turn]:
        """The turn of each of these messages (ids not stored in ``scope`` are left out)."""
        with self._lock:
            known = self._turns.get(scope)
            absent = self._absent.setdefault(scope, set())
            unknown = known is None or any(i not in known and i not in absent for i in ids)
        if known is None or unknown:
            known, last = self._read(scope)
            with self._lock:
                self._turns[scope] = known
                self._last[scope] = last
                # Cited messages erased by retention are not read again until the next change.
                self._absent[scope] = {i for i in ids if i not in known}
        return {i: known[i] for i in ids if i in known}

    def _read(self, scope: Scope) -> tuple[dict[str, Turn], StoredMessage | None]:
        turns: dict[str, Turn] = {}
        last = self._join(turns, None, sorted(self._store.iter_messages(scope), key=_order))
        return turns, last

    def _join(
        self,
        turns: dict[str, Turn],
        last: StoredMessage | None,
        ordered: Sequence[StoredMessage],
    ) -> StoredMessage | None:
        """Add ``ordered`` (in time order, all after ``last``) to ``turns``; the new last."""
        session = turns[last.id].session if last is not None else -1
        before = last
        for message in ordered:
            if before is None or self._breaks(before, message):
                session += 1
                before = None
            turns[message.id] = Turn(before.id if before else None, None, session)
            if before is not None:
                turns[before.id] = Turn(turns[before.id].previous, message.id, session)
            before = message
            last = message
        return last

    def _breaks(self, before: StoredMessage, message: StoredMessage) -> bool:
        pause = message.message.timestamp - before.message.timestamp
        return message.scope.session != before.scope.session or pause > self._gap

    def _forget(self, scope: Scope) -> None:
        tenant = scope.without_session()
        with self._lock:
            for kept in [s for s in self._turns if s.without_session() == tenant]:
                self._drop(kept)

    def _drop(self, kept: Scope) -> None:
        del self._turns[kept]
        self._absent.pop(kept, None)
        self._last.pop(kept, None)

    def messages_written(self, scope: Scope, messages: Sequence[StoredMessage]) -> None:
        """New messages: they extend the timelines they follow; others are read again."""
        tenant = scope.without_session()
        ordered = sorted(messages, key=_order)
        with self._lock:
            for kept in [s for s in self._turns if s.without_session() == tenant]:
                if kept.session is not None and kept.session != scope.session:
                    continue  # messages of another session: not in this timeline
                turns, last = self._turns[kept], self._last.get(kept)
                follows = not ordered or last is None or _order(ordered[0]) > _order(last)
                if follows and not any(m.id in turns for m in ordered):
                    self._last[kept] = self._join(turns, last, ordered)
                    self._absent[kept] = set()
                else:
                    self._drop(kept)

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


def _order(message: StoredMessage) -> tuple[object, ...]:
    """Where a message sits in time (ties: its source id, then its id)."""
    return (message.message.timestamp, message.message.source_id or "", message.id)
