"""The hierarchical entity tree that the ``entity_tree`` retrieval path searches.

Leaves are the scope's entities; above them, clusters of entities (level 1), clusters of clusters
(level 2), and so on up to a top level of at most ``branching`` nodes under a virtual root. The
tree is scoped like entities (``scope.without_session()``) and stored as
:class:`~membrain.records.TreeNode` records: an entity has its own id, level 0 and its level-1
node as parent; a cluster has a deterministic id, level 1 and up, its children, every entity under
it (``members``), a summary and a centroid. The store also keeps the participants' names the tree
was built with.

This module is the tree's structure and reads (the beam search). Building it is
:mod:`.tree_build`'s (clustering in :mod:`.tree_cluster`); updating it as entities arrive is
:mod:`.tree_update`'s. :class:`EntityTree` is a :class:`~membrain.api.listeners.RecordListener`:
subscribed to the record store, it places every entity written into a tree already built (a
scope's first tree is built lazily, by the first search of the ``entity_tree`` path).

* **Incremental updates** attach each entity to its nearest level-1 node, update the centroids on
  the way up and rewrite only that node's summary (ancestors keep theirs until the next
  :meth:`EntityTree.rebuild`). A node with more than ``2 * branching`` children is split by
  clustering its children, which may split its parent in turn, like a B-tree; when the root holds
  more than ``2 * branching`` nodes a new top level is added.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from membrain.api.listeners import RecordListener
from membrain.api.models import Entity, Scope
from membrain.extraction.llm import LLMClient
from membrain.records import RecordStore, TreeNode
from membrain.retrieval.tree_build import TreeBuilder
from membrain.retrieval.tree_update import TreeEdit

__all__ = ["EntityTree"]

_write_locks: weakref.WeakKeyDictionary[object, threading.Lock] = weakref.WeakKeyDictionary()
_write_locks_guard = threading.Lock()


def _write_lock(backend: object) -> threading.Lock:
    """The lock serialising tree writes on ``backend`` (shared by every tree over it)."""
    with _write_locks_guard:
        lock = _write_locks.get(backend)
        if lock is None:
            lock = _write_locks[backend] = threading.Lock()
        return lock


class EntityTree(RecordListener):
    """A hierarchy of entity clusters over one record store, searched by beam search.

    Args:
        store: Where entities and tree nodes live; its dense encoder embeds entities.
        branching: Target children per node (a node splits past ``2 * branching``).
        llm: Writes node summaries when given; summaries are extractive otherwise.

    Writes are serialised per backend: two trees over one store (two ``Memory`` objects on one
    folder, in one process) never interleave their updates.

    Example:
        >>> tree = EntityTree(store)  # doctest: +SKIP
        >>> store.subscribe(tree)  # doctest: +SKIP
        >>> tree.search(scope, question_vector, beam_width=3)[:1]  # doctest: +SKIP
        [('6d0c...', 0.71)]
    """

    def __init__(
        self, store: RecordStore, *, branching: int = 8, llm: LLMClient | None = None
    ) -> None:
        self.builder = TreeBuilder(store, branching=branching, llm=llm)
        self.store = store
        self._lock = _write_lock(store.backend)
        self._repaired: set[str] = set()

    @property
    def branching(self) -> int:
        """Target children per node."""
        return self.builder.branching

    # -- reads -------------------------------------------------------------------------------
    def is_empty(self, scope: Scope) -> bool:
        """Whether the scope's tree was never built."""
        return self.store.count_tree(scope.without_session()) == 0

    def nodes(self, scope: Scope) -> list[TreeNode]:
        """Every cluster of the scope's tree (not its entities), lowest level first."""
        found = [n for n in self.store.tree_nodes(scope.without_session()) if n.level > 0]
        return sorted(found, key=lambda n: (n.level, n.id))

    def participants(self, scope: Scope) -> list[str]:
        """Names and aliases of the scope's participants, as the tree last saw them."""
        return self.store.tree_participants(scope.without_session())

    def search(
        self,
        scope: Scope,
        question_vector: Sequence[float],
        *,
        beam_width: int = 3,
        depth: int | None = None,
        limit: int | None = None,
    ) -> list[tuple[str, float]]:
        """Entity ids with their cosine similarity to the question, best first.

        From the top level down, only the ``beam_width`` best children of the whole beam are kept.
        ``depth`` caps how many levels narrow the beam (``0``: rank every entity); below it every
        entity under the beam is ranked. ``limit`` caps how many entities are returned.
        """
        s = scope.without_session()
        vector = [float(v) for v in question_vector]

        def best(parents: Sequence[str] | None, n: int) -> list[tuple[TreeNode, float]]:
            level = None if parents is not None else 0
            return self.store.query_tree(s, vector, limit=n, level=level, parents=parents)

        beam: list[TreeNode] = []
        if depth != 0:
            ranked, steps = best([""], beam_width), 1
            beam = [n for n, _ in ranked]
            while beam and beam[0].level > 1 and (depth is None or steps < depth):
                beam = [n for n, _ in best([p.id for p in beam], beam_width)]
                steps += 1
            if not beam:
                return []
            while beam[0].level > 1:  # depth reached: take all below the beam
                beam = self.store.tree_nodes(s, [c for p in beam for c in p.children])
            size = sum(len(p.children) for p in beam)
        else:
            size = self.store.count_tree(s, level=0)
        parents = [p.id for p in beam] if beam else None
        return [(n.id, score) for n, score in best(parents, max(1, min(size, limit or size)))]

    # -- writes ------------------------------------------------------------------------------
    def rebuild(self, scope: Scope) -> None:
        """Build the scope's tree afresh from all its entities (replacing any previous tree)."""
        s = scope.without_session()
        with self._lock:
            self.builder.build(s, list(self.store.iter_entities(s)))

    def ensure(self, scope: Scope) -> None:
        """Build the scope's tree if it has none; once per process, place entities it misses.

        An entity stored by a write that stopped before the tree heard of it (a killed
        process) is found here and placed, so the ``entity_tree`` path never misses it for good.
        """
        s = scope.without_session()
        if self.is_empty(s):
            self.rebuild(s)
        elif s.key not in self._repaired:
            placed = self.store.tree_ids(s)
            missing = [e for e in self.store.iter_entities(s) if not e.participant]
            missing = [e for e in missing if e.id not in placed]
            if missing:
                self.update(s, missing)
        self._repaired.add(s.key)

    def update(self, scope: Scope, entities: Sequence[Entity]) -> None:
        """Place new or changed entities in the tree without rebuilding it.

        Each entity joins its nearest level-1 node (a changed one moves there); participants are
        taken out. An empty tree is built from the stored entities and these. Pass participants
        too: the tree keeps their names out of summaries and embedded text.
        """
        s = scope.without_session()
        batch = list({e.id: e for e in entities}.values())
        if not batch:
            return
        with self._lock:
            if self.is_empty(s):
                stored = {e.id: e for e in self.store.iter_entities(s)}
                self.builder.build(s, list({**stored, **{e.id: e for e in batch}}.values()))
            else:
                TreeEdit(self.builder, s, batch).run()

    def records_purged(
        self,
        scope: Scope,
        *,
        facts: Sequence[str],
        messages: Sequence[str],
        entities: Sequence[str],
    ) -> None:
        """Drop the scope's tree: its summaries may hold purged words (built again lazily)."""
        if facts or entities:
            with self._lock:
                self.store.delete_tree(scope.without_session())

    def entities_written(self, scope: Scope, entities: Sequence[Entity]) -> None:
        """Keep a built tree current; a scope without a tree is built on its first search."""
        if entities and not self.is_empty(scope):
            self.update(scope, entities)
