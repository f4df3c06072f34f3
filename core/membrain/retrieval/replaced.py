"""The ``replaced`` path: a question that matches a superseded fact finds what replaced it.

"Where does Sara live?" matches "Sara lives in Lisbon" best, word for word; once "Sara moved to
Berlin" superseded it, the Lisbon fact is out of current beliefs and the Berlin fact may share
no word with the question. This path ranks the scope's current and superseded facts together
against the question (BM25 and dense, best rank of the two) and returns, at the rank of each
superseded one, the current facts that replaced it, following chains (A replaced by B, B by C
gives C). Ranked among current facts, a superseded fact brings its replacement only as high as
it would itself rank: "What dog does Maya have?" does not lift Maya's new diet because her old
one is the only superseded fact in the scope. Only a superseded fact among the first
:data:`MATCH_TOP` of either ranking counts: it must be what the question asks about, not
merely the closest of the few superseded facts.

It runs only for searches of current beliefs, when the scope has superseded facts (see
:meth:`membrain.retrieval.search.Searcher.plan`; :class:`SupersededScopes` keeps the answer).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from membrain.api.indexing import question_dense_text
from membrain.api.listeners import RecordListener
from membrain.api.models import Fact, FactStatus, Scope
from membrain.backends.base import DENSE, SPARSE
from membrain.records import FactFilter, RecordStore, is_current
from membrain.retrieval.base import Ranked, SearchContext

__all__ = ["ReplacedPath", "SupersededScopes"]

MATCH_TOP = 3
"""How high a superseded fact must rank among all facts to bring its replacement."""
_CHAIN = 8
"""Supersession links followed at most from a matched fact to a current one."""


class ReplacedPath:
    """Current facts that replaced the superseded facts matching the question."""

    name = "replaced"

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """The replacements, ranked by their replaced fact's best rank."""
        where = FactFilter(status=(FactStatus.ACTIVE, FactStatus.SUPERSEDED))
        vector = ctx.dense_vector(question_dense_text(ctx.question, ctx.participants))
        sparse = ctx.store.sparse.embed_query(ctx.question)
        lists = [
            ctx.store.query_facts(ctx.scope, DENSE, vector, limit=ctx.limit, where=where),
            ctx.store.query_facts(ctx.scope, SPARSE, sparse, limit=ctx.limit, where=where),
        ]
        best: dict[str, tuple[int, Fact]] = {}
        for found in lists:
            for rank, hit in enumerate(found[:MATCH_TOP]):
                if hit.fact.status is not FactStatus.SUPERSEDED:
                    continue
                if hit.id not in best or best[hit.id][0] > rank:
                    best[hit.id] = (rank, hit.fact)
        matched = sorted(best.values(), key=lambda pair: (pair[0], pair[1].id))
        out: dict[str, Ranked] = {}
        for rank, old in matched:
            for current in _current(ctx, old):
                if current not in out:
                    out[current] = Ranked(current, 1.0 / (rank + 1))
            if len(out) >= ctx.limit:
                break
        return list(out.values())


def _current(ctx: SearchContext, old: Fact) -> list[str]:
    """The active facts at the end of ``old``'s supersession chains."""
    frontier, seen, current = list(old.superseded_by), {old.id}, []
    for _ in range(_CHAIN):
        todo = [i for i in dict.fromkeys(frontier) if i not in seen]
        if not todo:
            break
        seen.update(todo)
        frontier = []
        for fact in ctx.store.get_facts(ctx.scope, todo):
            if fact.status is FactStatus.SUPERSEDED:
                frontier.extend(fact.superseded_by)
            elif is_current(fact):
                current.append(fact.id)
    return current


class SupersededScopes(RecordListener):
    """Whether each scope holds superseded facts: counted once, kept until its facts change.

    Kept only for a store this process alone writes (an embedded one); a store that other
    processes write is counted on every search. Subscribe it to the store it answers for.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[Scope, bool] = {}
        self._changes = 0

    def any(self, store: RecordStore, scope: Scope) -> bool:
        """Whether ``scope`` holds a superseded fact."""
        with self._lock:
            known, changes = self._known.get(scope), self._changes
        if known is not None:
            return known
        found = store.count_facts(scope, FactFilter(status=FactStatus.SUPERSEDED)) > 0
        with self._lock:
            if store.exclusive and changes == self._changes:  # no write since the count
                self._known[scope] = found
        return found

    def facts_written(self, scope: Scope, facts: Sequence[Fact]) -> None:
        """Facts of the scope changed: count again."""
        self._forget(scope)

    def scope_deleted(self, scope: Scope) -> None:
        """The scope's records are gone: count again."""
        self._forget(scope)

    def records_purged(
        self,
        scope: Scope,
        *,
        facts: Sequence[str],
        messages: Sequence[str],
        entities: Sequence[str],
    ) -> None:
        """Facts may be gone: count again."""
        self._forget(scope)

    def _forget(self, scope: Scope) -> None:
        with self._lock:
            self._changes += 1
            tenant = (scope.dataset, scope.task)
            for kept in [s for s in self._known if (s.dataset, s.task) == tenant]:
                del self._known[kept]
