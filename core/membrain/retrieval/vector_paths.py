"""The retrieval paths that are single Qdrant queries over facts.

* **A** BM25 (the sparse vector) with the question, or its keyword rewrite;
* **B** dense similarity with the question;
* **B2** dense similarity with a hypothetical fact that would answer it (HyDE);
* **B3** dense similarity with the event the question is about, among the facts of the one
  participant the question names (dense texts read participants as "they", so B3 is the dense
  path that knows who: "What activities does Melanie partake in?" looks for activities among
  Melanie's facts); among all facts when the question names no participant, or several;
* **time**: dense similarity among facts whose valid time overlaps a time the question names,
  and **stated**: among facts stated during that time — boosts, so "what did Caroline do in May
  2023" favours May 2023 facts without hiding the others;
* **when**: dense similarity among facts that carry a resolved time, for questions asking when.

Dense queries embed the question without the participants' names, like the facts' dense vectors
(see :mod:`membrain.indexing`). Each path is one :class:`VectorPath` (a query builder), so a
mode's Qdrant paths can also be sent as one fused request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from membrain.facts import entity_id
from membrain.indexing import named_participants, question_dense_text
from membrain.models import FactStatus, Precision, TimeSpan
from membrain.retrieval.base import Ranked, SearchContext
from membrain.retrieval.rewrite import Rewrites
from membrain.storage.base import DENSE, SPARSE, Collection, TimeRange, VectorQuery, Where

__all__ = ["ACTIVE", "VectorPath", "vector_paths"]

ACTIVE: Where = {"status": FactStatus.ACTIVE.value}


@dataclass(frozen=True)
class VectorPath:
    """A retrieval path that is one vector query over the scope's active facts."""

    name: str
    build: Callable[[SearchContext, Rewrites], VectorQuery | None]

    def query(self, ctx: SearchContext, rewrites: Rewrites) -> VectorQuery | None:
        """The path's Qdrant query for this question (``None`` when it does not apply)."""
        return self.build(ctx, rewrites)

    def run(self, ctx: SearchContext, rewrites: Rewrites | None = None) -> list[Ranked]:
        """Fact ids, best first."""
        from membrain.retrieval.rewrite import deterministic_rewrites

        query = self.query(ctx, rewrites or deterministic_rewrites(ctx.question, ctx.participants))
        if query is None:
            return []
        points = ctx.backend.query(
            Collection.FACTS, ctx.scope, [query], limit=ctx.limit, where=ACTIVE
        )
        return [Ranked(p.id, p.score) for p in points]


def _dense(ctx: SearchContext, text: str, where: Where | None = None) -> VectorQuery:
    vector = ctx.dense_vector(question_dense_text(text, ctx.participants))
    return VectorQuery(DENSE, vector, limit=ctx.limit, where=dict(where or {}))


def _sparse_question(ctx: SearchContext, rewrites: Rewrites) -> VectorQuery:
    return VectorQuery(SPARSE, ctx.sparse.embed_query(ctx.question), limit=ctx.limit)


def _sparse_keywords(ctx: SearchContext, rewrites: Rewrites) -> VectorQuery:
    text = rewrites.keywords if rewrites.by_llm else ctx.question
    return VectorQuery(SPARSE, ctx.sparse.embed_query(text), limit=ctx.limit)


def _overlapping(span: TimeSpan) -> Where:
    where: dict[str, TimeRange] = {}
    if span.end is not None:
        where["valid_from"] = TimeRange(lt=span.end)
    if span.start is not None:
        where["valid_to"] = TimeRange(gt=span.start)
    return where


def _stated_within(span: TimeSpan) -> Where:
    return {"stated_at": TimeRange(gte=span.start, lt=span.end)}


def _time(ctx: SearchContext, rewrites: Rewrites) -> VectorQuery | None:
    return _dense(ctx, ctx.question, _overlapping(ctx.times[0])) if ctx.times else None


def _stated(ctx: SearchContext, rewrites: Rewrites) -> VectorQuery | None:
    return _dense(ctx, ctx.question, _stated_within(ctx.times[0])) if ctx.times else None


def _event(ctx: SearchContext, rewrites: Rewrites) -> VectorQuery:
    named = named_participants(ctx.question, ctx.participants)
    if len(named) != 1:
        return _dense(ctx, rewrites.event)
    return _dense(ctx, rewrites.event, {"entity_ids": [entity_id(ctx.scope, named[0])]})


def _when(ctx: SearchContext, rewrites: Rewrites) -> VectorQuery | None:
    has_time: Where = {"precision": [p.value for p in Precision]}
    return _dense(ctx, rewrites.event, has_time) if ctx.asks_when else None


def vector_paths(*, rewritten_keywords: bool) -> dict[str, VectorPath]:
    """The Qdrant paths by name; path A uses the keyword rewrite when ``rewritten_keywords``."""
    return {
        "A": VectorPath("A", _sparse_keywords if rewritten_keywords else _sparse_question),
        "B": VectorPath("B", lambda ctx, rw: _dense(ctx, ctx.question)),
        "B2": VectorPath("B2", lambda ctx, rw: _dense(ctx, rw.hypothetical)),
        "B3": VectorPath("B3", _event),
        "time": VectorPath("time", _time),
        "stated": VectorPath("stated", _stated),
        "when": VectorPath("when", _when),
    }
