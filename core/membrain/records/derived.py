"""Keeping the lexical index of the ``boolean`` path in step with the record store.

The lexical index (:class:`~membrain.backends.lexical.LexicalIndex`) is derived: the record store
tells it of every write as it happens, but a write can reach Qdrant and not the index (the
process killed between the two, a tantivy failure), and another process writing to the same
Qdrant server tells only its own index. So before the index is searched, :class:`LexicalSync`
reconciles it by content version, not by counting:

1. every fact payload carries ``revised_at``, the record time of its latest write;
2. the index keeps, per tenant, a *mark*: the record time up to which it holds every change;
3. the facts revised after the mark are read (one indexed range query) and indexed again, and
   the mark moves to a little before the reconciliation began (:data:`OVERLAP`, for writes
   still landing);
4. deleted facts leave no revision behind: if the index then counts another number of facts
   than the store, the tenant is rebuilt.

Step 3 reads nothing when the process owns the store (no other writer) and the index, since it
last set the tenant's mark, took every write of the tenant as a listener without a failure
(:meth:`LexicalIndex.in_step`): then only the mark moves, at most once a minute. After a bulk
load the first ``deep`` search no longer reads back every fact just written
(``benchmarks/scale.py``, "first deep").

An index without a mark (new, of an older schema, erased or rebuilt after damage) is rebuilt.

Example:
    >>> sync = LexicalSync(store, index)  # doctest: +SKIP
    >>> sync(scope)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from membrain.api.models import Fact, Scope
from membrain.backends.lexical import LexicalIndex
from membrain.records.filters import FactFilter
from membrain.records.store import RecordStore

__all__ = ["MARK_EVERY", "OVERLAP", "LexicalSync"]

OVERLAP = timedelta(seconds=5)
"""How far before a reconciliation its mark is set: changes stamped that close to it are read
again next time, in case their write was still landing (or a writer's clock runs behind)."""


MARK_EVERY = timedelta(minutes=1)
"""How stale a mark may grow while the index hears every change: moving it is a commit, and a
mark only spares a later process (or this one after a failure) reading changes again."""


class LexicalSync:
    """Reconciles a lexical index with a record store, tenant by tenant (module docstring).

    Args:
        store: The source of truth.
        index: The derived index to keep in step.
    """

    def __init__(self, store: RecordStore, index: LexicalIndex) -> None:
        self.store = store
        self.index = index

    def __call__(self, scope: Scope) -> int:
        """Bring the tenant of ``scope`` up to date; how many facts were indexed again."""
        tenant = scope.without_session()
        mark = self.index.mark(tenant)
        new_mark = self.store.now() - OVERLAP
        if mark is None or self.index.unsure(tenant):
            return self._rebuild(tenant, new_mark)
        changed: list[Fact] = []
        if self.store.exclusive and self.index.in_step(tenant):
            # It heard every change since: only the mark moves, now and then (a commit).
            if new_mark - mark > MARK_EVERY:
                self.index.catch_up(tenant, (), mark=new_mark)
        else:
            where = FactFilter(status=None, revised_after=mark)
            changed = list(self.store.iter_facts(tenant, where))
            if changed:
                self.index.catch_up(tenant, changed, mark=new_mark)
        if self.index.count(tenant) != self.store.count_facts(tenant):
            return self._rebuild(tenant, new_mark)
        return len(changed)

    def _rebuild(self, tenant: Scope, mark: datetime) -> int:
        """Index the tenant's facts again, streamed from the store (never all in memory)."""
        counted = 0

        def facts() -> Iterator[Fact]:
            nonlocal counted
            for fact in self.store.iter_facts(tenant):
                counted += 1
                yield fact

        self.index.rebuild(tenant, facts(), mark=mark)
        return counted
