"""The ``entity_tree`` path: beam search down the entity tree, then the best entities' facts.

The ``bm25`` and ``dense`` paths match the question against fact text. This one matches it
against what the store knows about the *things* facts are about: the entities' names and
descriptions, organised in an :class:`~membrain.retrieval.tree.EntityTree`. A question that names
a category ("Which instruments does Sara play?") reaches the entities whose descriptions say they
are instruments even when no fact about them uses the word; their facts are then ranked by dense
similarity to the question.

Participants (the speakers) are not in the tree: nearly every fact mentions them, so "the facts of
a participant" would be all facts, which the ``dense`` path already ranks. The question is
embedded with the participants' names as "they"
(:func:`~membrain.api.indexing.question_dense_text`), like entity text in the tree and fact text
in the store.
"""

from __future__ import annotations

from membrain.api.indexing import question_dense_text
from membrain.api.path_names import ENTITY_TREE
from membrain.backends.base import DENSE
from membrain.retrieval.base import Ranked, SearchContext
from membrain.retrieval.tree import EntityTree

__all__ = ["EntityTreePath"]


class EntityTreePath:
    """The ``entity_tree`` path: the facts of the entities a beam search of the tree finds best.

    Args:
        tree: The entity tree (built lazily on the first search of a scope without one).
        beam_width: Nodes kept per level of the beam search.
        depth: Levels the beam narrows (``None``: down to the entities).
        entities_per_search: How many of the best entities' facts are ranked.

    Example:
        >>> path = EntityTreePath(EntityTree(store))  # doctest: +SKIP
        >>> path.run(ctx)[:1]  # doctest: +SKIP
        [Ranked(id='...', score=0.61)]
    """

    name = ENTITY_TREE

    def __init__(
        self,
        tree: EntityTree,
        *,
        beam_width: int = 3,
        depth: int | None = None,
        entities_per_search: int = 10,
    ) -> None:
        self.tree = tree
        self.beam_width = beam_width
        self.depth = depth
        self.entities_per_search = entities_per_search

    def entities(
        self, ctx: SearchContext, vector: list[float] | None = None
    ) -> list[tuple[str, float]]:
        """The best entities for the question (ids and cosine similarity), best first."""
        self.tree.ensure(ctx.scope)
        if vector is None:
            vector = _question_vector(ctx)
        return self.tree.search(
            ctx.scope,
            vector,
            beam_width=self.beam_width,
            depth=self.depth,
            limit=self.entities_per_search,
        )

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """Active facts of ``ctx.scope`` naming the best entities, by dense similarity."""
        vector = _question_vector(ctx)
        found = self.entities(ctx, vector)
        if not found:
            return []
        where = ctx.where(entity_ids=tuple(i for i, _ in found))
        ranked = ctx.store.query_facts(ctx.scope, DENSE, vector, limit=ctx.limit, where=where)
        return [Ranked(hit.id, hit.score, hit) for hit in ranked]


def _question_vector(ctx: SearchContext) -> list[float]:
    return ctx.dense_vector(question_dense_text(ctx.question, ctx.participants))
