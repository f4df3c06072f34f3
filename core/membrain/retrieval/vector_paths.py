"""The retrieval paths that are single Qdrant queries over facts.

* **bm25**: BM25 (the sparse vector) with the question, or its keyword rewrite;
* **dense**: dense similarity with the question;
* **hyde**: dense similarity with a hypothetical fact that would answer it (HyDE);
* **event**: dense similarity with the event the question is about, among the facts of the one
  participant the question names (dense texts read participants as "they", so ``event`` is the
  dense path that knows who: "What activities does Melanie partake in?" looks for activities among
  Melanie's facts); among all facts when the question names no participant, or several;
* **time**: dense similarity among facts whose valid time overlaps a time the question names,
  and **stated**: among facts stated during that time — boosts, so "what did Caroline do in May
  2023" favours May 2023 facts without hiding the others;
* **when**: dense similarity among facts that carry a resolved time, for questions asking when.

Dense queries embed the question without the participants' names, like the facts' dense vectors
(see :mod:`membrain.api.indexing`). Each path is one :class:`VectorPath` (a query builder), so a
mode's Qdrant paths can also be sent as one fused request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from membrain.api import path_names as names
from membrain.api.indexing import named_participants, question_dense_text
from membrain.backends.base import DENSE, SPARSE
from membrain.embeddings import SparseVector
from membrain.knowledge.facts import entity_id
from membrain.records import FactFilter
from membrain.retrieval.base import Ranked, SearchContext
from membrain.retrieval.rewrite import Rewrites, deterministic_rewrites

__all__ = ["PathQuery", "VectorPath", "run_queries", "run_query", "vector_paths"]


@dataclass(frozen=True, slots=True)
class PathQuery:
    """One vector lookup over the scope's active facts: which vector, its value, which facts.

    A dense lookup names the text to embed (``text``) rather than its vector, so a search
    embeds the texts of all its dense paths in one model run before running them.
    """

    using: str
    vector: SparseVector | None = None
    """The sparse query vector (``None`` for a dense lookup)."""
    text: str | None = None
    """The text whose dense vector is looked up (a dense lookup)."""
    where: FactFilter | None = None
    """Which facts (``None``: the beliefs the search reads, ``SearchContext.view``)."""


@dataclass(frozen=True)
class VectorPath:
    """A retrieval path that is one vector query over the scope's active facts."""

    name: str
    build: Callable[[SearchContext, Rewrites], PathQuery | None]

    def query(self, ctx: SearchContext, rewrites: Rewrites) -> PathQuery | None:
        """The path's lookup for this question (``None`` when it does not apply)."""
        return self.build(ctx, rewrites)

    def run(self, ctx: SearchContext, rewrites: Rewrites | None = None) -> list[Ranked]:
        """Facts, best first."""
        query = self.query(ctx, rewrites or deterministic_rewrites(ctx.question, ctx.participants))
        return [] if query is None else run_query(ctx, query)


def run_query(ctx: SearchContext, query: PathQuery) -> list[Ranked]:
    """The facts ``query`` finds, best first (a dense text is embedded unless it already is)."""
    vector = _vector(ctx, query)
    found = ctx.store.rank_facts(
        ctx.scope, query.using, vector, limit=ctx.limit, where=query.where or ctx.view
    )
    return [Ranked(fact_id, score) for fact_id, score in found]


def run_queries(ctx: SearchContext, queries: Mapping[str, PathQuery]) -> dict[str, list[Ranked]]:
    """What each of ``queries`` finds, best first, by name: one call to the engine for all."""
    lookups = [(q.using, _vector(ctx, q), q.where or ctx.view) for q in queries.values()]
    found = ctx.store.rank_facts_batch(ctx.scope, lookups, limit=ctx.limit) if lookups else []
    return {
        name: [Ranked(fact_id, score) for fact_id, score in ranked]
        for name, ranked in zip(queries, found, strict=True)
    }


def _vector(ctx: SearchContext, query: PathQuery) -> SparseVector | list[float]:
    vector = query.vector if query.text is None else ctx.dense_vector(query.text)
    if vector is None:
        raise ValueError("a path query names a sparse vector or a dense text")
    return vector


def _dense(ctx: SearchContext, text: str, where: FactFilter | None = None) -> PathQuery:
    return PathQuery(DENSE, text=question_dense_text(text, ctx.participants), where=where)


def _sparse_question(ctx: SearchContext, rewrites: Rewrites) -> PathQuery:
    return PathQuery(SPARSE, ctx.store.sparse.embed_query(ctx.question))


def _sparse_keywords(ctx: SearchContext, rewrites: Rewrites) -> PathQuery:
    text = rewrites.keywords if rewrites.by_llm else ctx.question
    return PathQuery(SPARSE, ctx.store.sparse.embed_query(text))


def _time(ctx: SearchContext, rewrites: Rewrites) -> PathQuery | None:
    if not ctx.times:
        return None
    return _dense(ctx, ctx.question, ctx.where(valid_during=ctx.times[0]))


def _stated(ctx: SearchContext, rewrites: Rewrites) -> PathQuery | None:
    if not ctx.times:
        return None
    return _dense(ctx, ctx.question, ctx.where(stated_during=ctx.times[0]))


def _event(ctx: SearchContext, rewrites: Rewrites) -> PathQuery:
    named = named_participants(ctx.question, ctx.participants)
    if len(named) != 1:
        return _dense(ctx, rewrites.event)
    return _dense(ctx, rewrites.event, ctx.where(entity_ids=(entity_id(ctx.scope, named[0]),)))


def _when(ctx: SearchContext, rewrites: Rewrites) -> PathQuery | None:
    return _dense(ctx, rewrites.event, ctx.where(timed=True)) if ctx.asks_when else None


def vector_paths(*, rewritten_keywords: bool) -> dict[str, VectorPath]:
    """The Qdrant paths by name; ``bm25`` uses the keyword rewrite when ``rewritten_keywords``."""
    return {
        names.BM25: VectorPath(
            names.BM25, _sparse_keywords if rewritten_keywords else _sparse_question
        ),
        names.DENSE: VectorPath(names.DENSE, lambda ctx, rw: _dense(ctx, ctx.question)),
        names.HYDE: VectorPath(names.HYDE, lambda ctx, rw: _dense(ctx, rw.hypothetical)),
        names.EVENT: VectorPath(names.EVENT, _event),
        "time": VectorPath("time", _time),
        "stated": VectorPath("stated", _stated),
        "when": VectorPath("when", _when),
    }
