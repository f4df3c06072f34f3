"""The ``asked`` path: a question kept only as evidence brings the reply that answered it.

In a chat with an assistant a question produces no fact (it asks, it does not state;
:mod:`membrain.extraction.dialogue_acts`), so the answer follow-up of :mod:`.followup`, which
starts from a question *fact*, has nothing to start from when the assistant asked "Where are
you moving?" and the user answered "Austin!". This path takes the stored messages that best
match the question (BM25 and dense, fused: the lookups of :func:`~.turn_paths.best_messages`,
shared with the turn paths), keeps those discarded as questions, and returns, at each one's
rank, the facts of the next message stated after it (the reply), as the follow-up does.

It runs in ``expand`` and ``deep``. Where questions stay facts (a chat between named people,
LoCoMo) no message is discarded as a question and the path returns nothing.
"""

from __future__ import annotations

from membrain.retrieval.base import Ranked, SearchContext
from membrain.retrieval.followup import replies
from membrain.retrieval.turn_paths import best_messages, fused_messages

__all__ = ["AskedPath"]

MESSAGES = 10
"""Messages ranked for the question; the replies of those that asked are returned."""
_ASKED = "question:"


class AskedPath:
    """Facts of the replies to the stored questions that match the question."""

    name = "asked"

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """The replies' facts, ranked by their question's rank."""
        ranked = fused_messages(best_messages(ctx))[:MESSAGES]
        found = ctx.store.get_messages(ctx.scope, ranked)
        out: dict[str, Ranked] = {}
        for rank, stored in enumerate(found):
            if not any(note.startswith(_ASKED) for note in stored.discarded):
                continue
            said = stored.message.timestamp
            for reply in replies(
                ctx.store, ctx.scope, said, {stored.id}, view=ctx.view, admits=ctx.admits
            ):
                out.setdefault(reply.id, Ranked(reply.id, 1.0 / (rank + 1)))
        return list(out.values())
