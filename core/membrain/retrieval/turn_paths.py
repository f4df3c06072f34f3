"""Paths over whole turns: the facts of the messages that match the question, and of their replies.

A fact is one clause of its turn, so the turn, its image caption included, can share words
with a question that the fact lost; a short reply ("I really admire his work ethic") shares
nothing with the question about it, but the turn it answers does. Both paths start from the
scope's messages that best match the question (:func:`best_messages`: BM25 and dense, the
:data:`MESSAGES` best of each, fused by reciprocal rank):

* **turn**: the facts citing those messages, at their message's rank;
* **reply**: the facts citing the message after each of them in its session (the turn that
  answers it, :class:`~.turns.Timeline`), at the rank of the message it answers.

Facts of one message are ordered by their own dense similarity to the question. The same two
lookups give the reranker its session scores (:mod:`.signals`), so they run once per search.
On the LoCoMo dev split (``expand``, the candidates ``benchmarks/train_reranker.py`` collects):
fused recall@10 78.2 -> 79.8, and 82.3 -> 82.6 cross-validated after a reranker of the same
settings (trained on each fold's expand candidates, 7 leaves).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from membrain.api.indexing import question_dense_text
from membrain.backends.base import DENSE, RRF_K, SPARSE
from membrain.retrieval.base import Ranked, SearchContext
from membrain.retrieval.turns import Timeline

__all__ = ["MESSAGES", "TurnPath", "best_messages", "fused_messages"]

MESSAGES = 50
"""Best-matching messages read per lookup (BM25 and dense)."""
_KEY = "best_messages"
_FACTS_KEY = "turn_facts"


def best_messages(ctx: SearchContext) -> tuple[dict[str, float], dict[str, float]]:
    """The best-matching messages by BM25 and by dense similarity (id -> score, best first).

    :data:`MESSAGES` of each, read once per search.
    """
    found = ctx.extra.get(_KEY)
    if found is None:
        sparse = ctx.store.sparse.embed_query(ctx.question)
        asked = ctx.dense_vector(ctx.question)
        lexical, dense = ctx.store.similar_messages(
            ctx.scope, [(SPARSE, sparse), (DENSE, asked)], limit=MESSAGES
        )
        found = (lexical, dense)
        ctx.extra[_KEY] = found
    return found  # type: ignore[return-value]


class TurnPath:
    """The facts of the best-matching messages (``turn``) or of the replies to them (``reply``).

    Args:
        name: ``"turn"`` or ``"reply"``.
        timeline: The message timeline of the searched store (``reply`` reads the next turn).
    """

    def __init__(self, name: str, timeline: Callable[[SearchContext], Timeline]) -> None:
        if name not in ("turn", "reply"):
            raise ValueError(f"unknown turn path {name!r}")
        self.name = name
        self._timeline = timeline

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """Facts, at the rank of the message they cite (or answer)."""
        return _turn_facts(ctx, self._timeline(ctx))[self.name]


def _turn_facts(ctx: SearchContext, timeline: Timeline) -> dict[str, list[Ranked]]:
    """Both paths' facts, read in one lookup per search (the facts citing either's messages)."""
    found = ctx.extra.get(_FACTS_KEY)
    if found is not None:
        return found  # type: ignore[return-value]
    matched = fused_messages(best_messages(ctx))
    turns = timeline.turns(ctx.scope, matched)
    replies = [n for m in matched if m in turns and (n := turns[m].next) is not None]
    ranks = {name: _ranks(ids) for name, ids in (("turn", matched), ("reply", replies))}
    cited: list[tuple[str, float, tuple[str, ...]]] = []
    messages = {*ranks["turn"], *ranks["reply"]}
    if messages:
        cited = ctx.store.cited_messages(
            ctx.scope,
            DENSE,
            ctx.dense_vector(question_dense_text(ctx.question, ctx.participants)),
            limit=max(ctx.limit, 2 * len(messages)),
            where=ctx.where(sources=tuple(messages)),
        )
    result = {name: _placed(cited, rank) for name, rank in ranks.items()}
    ctx.extra[_FACTS_KEY] = result
    return result


def _ranks(messages: Sequence[str]) -> dict[str, int]:
    """Each message's first position."""
    return {m: i for i, m in reversed(list(enumerate(messages)))}


def _placed(
    cited: Sequence[tuple[str, float, tuple[str, ...]]], rank: dict[str, int]
) -> list[Ranked]:
    """The facts citing a ranked message, at its rank (then in the order given)."""
    placed = []
    for order, (fact_id, _, sources) in enumerate(cited):
        positions = [rank[s] for s in sources if s in rank]
        if positions:
            placed.append((min(positions), order, fact_id))
    placed.sort()
    return [Ranked(fact_id, 1.0 / (i + 1)) for i, (_, _, fact_id) in enumerate(placed)]


def fused_messages(rankings: Sequence[dict[str, float]]) -> list[str]:
    """Message ids by reciprocal rank fusion of ``rankings`` (each best first), as Qdrant fuses."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for position, message in enumerate(ranking):
            scores[message] = scores.get(message, 0.0) + 1.0 / (position + RRF_K)
    return sorted(scores, key=lambda m: (-scores[m], m))
