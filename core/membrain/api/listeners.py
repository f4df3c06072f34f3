"""What a derived index hears from the record store.

Every mutation of a record passes through :class:`membrain.records.RecordStore`, which tells each
subscribed :class:`RecordListener` what changed, after the change is stored. A new derived index
(the lexical index of the ``boolean`` path, the entity tree, an audit log) subclasses
``RecordListener``, overrides the events it needs and subscribes with
:meth:`~membrain.records.RecordStore.subscribe`: nothing else has to know about it.

Example:
    >>> class Counter(RecordListener):
    ...     def __init__(self) -> None:
    ...         self.facts = 0
    ...     def facts_written(self, scope, facts):
    ...         self.facts += len(facts)
    >>> store.subscribe(Counter())  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from membrain.api.models import Entity, Fact, MessageStatus, Scope, StoredMessage

if TYPE_CHECKING:
    from membrain.api.audit import AuditEvent

__all__ = ["RecordListener"]


class RecordListener:
    """Receives the record store's mutations; every event is a no-op unless overridden."""

    def messages_written(self, scope: Scope, messages: Sequence[StoredMessage]) -> None:
        """Messages were stored as evidence."""

    def messages_marked(self, scope: Scope, ids: Sequence[str], status: MessageStatus) -> None:
        """Messages moved to ``status`` in the write path."""

    def facts_written(self, scope: Scope, facts: Sequence[Fact]) -> None:
        """Facts were stored, or their stored state changed (status, links).

        The records given are the facts' complete current state.
        """

    def facts_unsure(self, scope: Scope) -> None:
        """A write of the scope's facts failed midway: some may be stored and never announced.

        An index that trusts having heard every change must check the store again.
        """

    def entities_written(self, scope: Scope, entities: Sequence[Entity]) -> None:
        """Entities were stored or changed (new aliases, description versions)."""

    def scope_deleted(self, scope: Scope) -> None:
        """Every record of ``scope`` was deleted (all sessions when it has none)."""

    def records_purged(
        self,
        scope: Scope,
        *,
        facts: Sequence[str],
        messages: Sequence[str],
        entities: Sequence[str],
    ) -> None:
        """Records were purged: drop everything derived from them.

        :meth:`erased` follows, once the store has erased its own copies from disk.
        """

    def erased(self) -> None:
        """The store erased deleted records from disk: do the same with what was dropped."""

    def audited(self, scope: Scope, events: Sequence[AuditEvent]) -> None:
        """Audit events were appended (after the change they record)."""
