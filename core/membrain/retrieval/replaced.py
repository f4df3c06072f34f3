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
:meth:`membrain.retrieval.search.Searcher.plan`).
"""

from __future__ import annotations

from membrain.indexing import question_dense_text
from membrain.models import Fact, FactStatus
from membrain.retrieval.base import Ranked, SearchContext
from membrain.storage.base import DENSE, SPARSE
from membrain.store import FactFilter

__all__ = ["ReplacedPath"]

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
            elif fact.status is FactStatus.ACTIVE:
                current.append(fact.id)
    return current
