"""What the reranker reads beyond the paths' ranks: the question against each candidate's turn.

How well the question matches the fact, its whole turn, the turns around it and its
conversation session.

A fact is one clause of a turn, so the turn (with its image caption) often shares words with the
question that the fact lost; a short reply ("I really admire his work ethic") is about the turn
before it, a question is answered by the turn after it; and the evidence of a question often
clusters in one session. For the candidates of one search this is five vector lookups in three
calls to the engine, each over the scope's records and none of them a model call:

* the question's dense similarity to each candidate fact (ids given);
* its dense and BM25 similarity to the candidates' messages and the turns just before and after
  them (ids given, from :class:`~.turns.Timeline`);
* its dense and BM25 similarity to the best-matching messages of the scope
  (:func:`~.turn_paths.best_messages`, shared with the turn paths), whose best score per
  session is the session's score (a session with none of them reads 0).

Every signal of a candidate citing several messages is the best over them; a candidate citing
none (a fact written through the API) reads 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from membrain.api.indexing import question_dense_text
from membrain.api.models import Fact
from membrain.backends.base import DENSE, SPARSE
from membrain.retrieval.base import SearchContext
from membrain.retrieval.turn_paths import best_messages
from membrain.retrieval.turns import Timeline, Turn

__all__ = ["SIGNALS", "turn_signals"]

_K = TypeVar("_K", bound=Hashable)

SIGNALS = (
    "cos_fact",
    "cos_turn",
    "bm25_turn",
    "cos_prev",
    "bm25_prev",
    "cos_next",
    "bm25_session",
    "cos_session",
)
"""Signal names, in the order :func:`turn_signals` gives them."""


def turn_signals(
    ctx: SearchContext, facts: Sequence[Fact], timeline: Timeline
) -> list[tuple[float, ...]]:
    """One row of :data:`SIGNALS` per fact."""
    if not facts:
        return []
    store, scope = ctx.store, ctx.scope
    asked = ctx.dense_vector(ctx.question)
    neutral = ctx.dense_vector(question_dense_text(ctx.question, ctx.participants))
    sparse = store.sparse.embed_query(ctx.question)
    sources = list(dict.fromkeys(s for f in facts for s in f.sources))
    top_sparse, top_dense = best_messages(ctx)
    turns = timeline.turns(scope, [*sources, *top_sparse, *top_dense])
    around = [*sources, *_neighbours(turns, sources)]
    dense, lexical = store.similar_messages(scope, [(DENSE, asked), (SPARSE, sparse)], ids=around)
    of_fact = store.fact_similarity(scope, DENSE, neutral, ids=[f.id for f in facts])
    session_dense = _by_session(top_dense, turns)
    session_lexical = _by_session(top_sparse, turns)
    rows: list[tuple[float, ...]] = []
    for fact in facts:
        cited = [s for s in fact.sources if s in turns]
        before = [p for s in cited if (p := turns[s].previous) is not None]
        after = [n for s in cited if (n := turns[s].next) is not None]
        sessions = {turns[s].session for s in cited}
        rows.append(
            (
                of_fact.get(fact.id, 0.0),
                _best(dense, cited),
                _best(lexical, cited),
                _best(dense, before),
                _best(lexical, before),
                _best(dense, after),
                _best(session_lexical, sessions),
                _best(session_dense, sessions),
            )
        )
    return rows


def _neighbours(turns: Mapping[str, Turn], ids: Iterable[str]) -> list[str]:
    found = []
    for i in ids:
        turn = turns.get(i)
        if turn is not None:
            found += [n for n in (turn.previous, turn.next) if n is not None]
    return found


def _by_session(scores: Mapping[str, float], turns: Mapping[str, Turn]) -> dict[int, float]:
    best: dict[int, float] = {}
    for message, score in scores.items():
        if message in turns:
            session = turns[message].session
            best[session] = max(best.get(session, score), score)
    return best


def _best(scores: Mapping[_K, float], keys: Iterable[_K]) -> float:
    return max((scores[k] for k in keys if k in scores), default=0.0)
