"""The ``asked`` path: a question kept only as evidence brings the reply that answered it.

In a chat with an assistant a question produces no fact (it asks, it does not state;
:mod:`membrain.extraction.dialogue_acts`), so the answer follow-up of :mod:`.followup`, which
starts from a question *fact*, has nothing to start from when the assistant asked "Where are
you moving?" and the user answered "Austin!". This path searches the stored messages (BM25 and
dense, fused) for the question, keeps those discarded as questions, and returns, at each one's
rank, the facts of the next message stated after it (the reply), as the follow-up does.

It runs in ``expand`` and ``deep``. Where questions stay facts (a chat between named people,
LoCoMo) no message is discarded as a question and the path returns nothing.
"""

from __future__ import annotations

from membrain.retrieval.base import Ranked, SearchContext
from membrain.retrieval.followup import replies
from membrain.storage.base import DENSE, SPARSE

__all__ = ["AskedPath"]

MESSAGES = 10
"""Messages ranked for the question; the replies of those that asked are returned."""
_ASKED = "question:"


class AskedPath:
    """Facts of the replies to the stored questions that match the question."""

    name = "asked"

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """The replies' facts, ranked by their question's rank."""
        found = ctx.store.search_messages(
            ctx.scope,
            ctx.question,
            using=(SPARSE, DENSE),
            limit=MESSAGES,
            candidates=ctx.limit,
            dense=ctx.dense_vector(ctx.question),
        )
        out: dict[str, Ranked] = {}
        for rank, (stored, _) in enumerate(found):
            if not any(note.startswith(_ASKED) for note in stored.discarded):
                continue
            said = stored.message.timestamp
            for reply in replies(
                ctx.store, ctx.scope, said, {stored.id}, view=ctx.view, admits=ctx.admits
            ):
                out.setdefault(reply.id, Ranked(reply.id, 1.0 / (rank + 1)))
        return list(out.values())
