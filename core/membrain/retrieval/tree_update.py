"""Incremental updates of the entity tree, behind :meth:`EntityTree.update`.

Entities leave their level-1 node when changed (or when they turn out to be participants) and join
their nearest one; centroids are updated on the way up, overfull nodes split like a B-tree, a new
top level is added when the root overflows, and only the touched nodes are written back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from membrain.api.models import Entity, Scope
from membrain.records import TreeNode
from membrain.retrieval.tree_build import TreeBuilder, embedded_text, participant_names
from membrain.retrieval.tree_cluster import (
    Vectors,
    centroid,
    mean_centroid,
    move_centroid,
    partition,
    stop_words,
    unit,
)

__all__ = ["TreeEdit"]


class TreeEdit:
    """One incremental update of a scope's tree: detach, attach, split, grow, then write."""

    def __init__(self, tree: TreeBuilder, scope: Scope, batch: Sequence[Entity]) -> None:
        self.tree, self.scope, self.batch = tree, scope, batch
        self.store = tree.store
        self.limit = 2 * tree.branching
        self.cache: dict[str, TreeNode] = {}
        self.touched: set[str] = set()  # nodes to write
        self.pending: set[str] = set()  # nodes whose summary must be rewritten
        self.deleted: set[str] = set()
        self.leaf_of: dict[str, str] = {}  # entity id -> its new level-1 node
        self.vectors: dict[str, Vectors] = {}
        self.known = {e.id: e for e in batch}
        old = self.store.tree_participants(scope)
        self.participants = sorted(
            {*old, *(n for e in batch if e.participant for n in participant_names(e))}
        )
        if self.participants != old:
            self.store.put_tree_participants(scope, self.participants)
        self.stop = stop_words(self.participants)

    def node(self, node_id: str) -> TreeNode:
        """The node with this id, read once per edit."""
        if node_id not in self.cache:
            (self.cache[node_id],) = self.store.tree_nodes(self.scope, [node_id])
        return self.cache[node_id]

    def chain(self, node: TreeNode) -> list[TreeNode]:
        """The node and its ancestors."""
        found = [node]
        while found[-1].parent:
            found.append(self.node(found[-1].parent))
        return found

    def run(self) -> None:
        """Apply the edit: move changed entities, place new ones, split, grow, write."""
        ids = [e.id for e in self.batch]
        present = {n.id: n for n in self.store.tree_nodes(self.scope, ids)}
        entities = [e for e in self.batch if not e.participant]
        texts = {e.id: embedded_text(e, self.participants) for e in entities}
        # Unchanged entities stay; participants and changed entities leave their node first.
        fresh = [e for e in entities if e.id not in present or present[e.id].summary != texts[e.id]]
        gone = [e.id for e in self.batch if e.participant and e.id in present]
        leaving = gone + [e.id for e in fresh if e.id in present]
        if leaving:
            old = [present[i].summary for i in leaving]
            x = unit(np.array(self.store.dense.embed_documents(old), dtype=np.float64))
            for entity_id, v in zip(leaving, x, strict=True):
                self.detach(entity_id, present[entity_id].parent, v)
        for e, v in zip(fresh, self.tree.embed(fresh, self.participants), strict=True):
            self.vectors[e.id] = v
            self.attach(e.id, self.nearest_leaf(e.id, v), v)
        for leaf_id in sorted(self.pending - self.deleted):
            if len(self.node(leaf_id).children) > self.limit:
                self.split(self.node(leaf_id))
        self.grow_root()
        self.flush()
        self.write(fresh, gone)

    def nearest_leaf(self, entity_id: str, vector: Vectors) -> TreeNode:
        """The level-1 node nearest ``vector`` (a new one under the root if there is none)."""
        found = self.store.query_tree(
            self.scope, vector.tolist(), limit=len(self.deleted) + 1, level=1
        )
        live = [n.id for n, _ in found if n.id not in self.deleted]
        live += [n.id for n in self.cache.values() if n.level == 1 and n.id not in self.deleted]
        if live:
            return self.node(live[0])
        leaf = TreeNode(self.new_id(1, entity_id), 1, "", centroid=np.zeros_like(vector))
        self.cache[leaf.id] = leaf
        return leaf

    def attach(self, entity_id: str, leaf: TreeNode, vector: Vectors) -> None:
        """Put an entity under a level-1 node, updating the centroids above it."""
        leaf.children.append(entity_id)
        self.leaf_of[entity_id] = leaf.id
        self.pending.add(leaf.id)
        for n in self.chain(leaf):
            n.members.append(entity_id)
            move_centroid(n, vector)
            self.touched.add(n.id)

    def detach(self, entity_id: str, leaf_id: str, vector: Vectors) -> None:
        """Take an entity out of its level-1 node; emptied nodes go."""
        leaf = self.node(leaf_id)
        leaf.children = [c for c in leaf.children if c != entity_id]
        self.pending.add(leaf.id)
        for n in self.chain(leaf):
            n.members = [m for m in n.members if m != entity_id]
            move_centroid(n, vector, -1.0)
            self.touched.add(n.id)
            if not n.members:  # an emptied node goes, and its parent forgets it
                self.deleted.add(n.id)
                if n.parent:
                    parent = self.node(n.parent)
                    parent.children = [c for c in parent.children if c != n.id]

    def child_vectors(self, node: TreeNode) -> Vectors:
        """Unit vectors of a node's children (entities read and embedded on demand)."""
        if node.level > 1:
            return np.stack([centroid(self.node(c)) for c in node.children])
        missing = [c for c in node.children if c not in self.vectors]
        found = self.store.get_entities(self.scope, missing)
        self.known.update({e.id: e for e in found})
        x = self.tree.embed(found, self.participants)
        self.vectors.update(zip([e.id for e in found], x, strict=True))
        node.children = [c for c in node.children if c in self.vectors]
        return np.stack([self.vectors[c] for c in node.children])

    def split(self, node: TreeNode) -> None:
        """Halve an overfull node by 2-means of its children; the first half keeps the id."""
        x = self.child_vectors(node)
        children, added = list(node.children), []
        for i, g in enumerate(partition(unit(x), 2, self.limit)):
            kids = [children[j] for j in g]
            below = [self.node(k) for k in kids] if node.level > 1 else []
            members = [m for k in below for m in k.members] or kids
            part = node
            if i > 0:
                part_id = self.new_id(node.level, min(members))
                part = TreeNode(part_id, node.level, node.parent, centroid=node.centroid)
                self.cache[part.id] = part
                added.append(part.id)
            part.children, part.members = kids, members
            part.centroid = mean_centroid(below) if below else x[g].mean(axis=0)
            for k in kids:
                if below:
                    self.node(k).parent = part.id
                    self.touched.add(k)
                else:
                    self.leaf_of[k] = part.id
            self.pending.add(part.id)
            self.touched.add(part.id)
        if node.parent:
            parent = self.node(node.parent)
            parent.children += added
            self.pending.add(parent.id)
            if len(parent.children) > self.limit:
                self.split(parent)

    def new_id(self, level: int, first: str) -> str:
        """A cluster id of ``level`` that no stored or cached node has."""
        candidate, n = self.scope.record_id("tree", "node", str(level), first), 0
        while candidate in self.cache or self.store.tree_nodes(self.scope, [candidate]):
            n += 1
            candidate = self.scope.record_id("tree", "node", str(level), first, str(n))
        return candidate

    def grow_root(self) -> None:
        """Add a top level when the root holds more than ``2 * branching`` nodes."""
        stored = self.store.tree_nodes(self.scope, top=True)
        ids = sorted({n.id for n in stored} | {n.id for n in self.cache.values()} - self.deleted)
        top = [self.node(i) for i in ids if not self.node(i).parent]
        if len(top) <= self.limit:
            return
        for g in self.tree.group(np.stack([centroid(n) for n in top])):
            kids = [top[i] for i in g]
            members = [m for k in kids for m in k.members]
            level = kids[0].level + 1
            up_id = self.new_id(level, min(members))
            up = TreeNode(
                up_id, level, "", [k.id for k in kids], members, centroid=mean_centroid(kids)
            )
            self.cache[up.id] = up
            self.pending.add(up.id)
            self.touched.add(up.id)
            for k in kids:
                k.parent = up.id
                self.touched.add(k.id)

    def flush(self) -> None:
        """Rewrite pending summaries, lower levels first (upper ones read their children's)."""
        todo = sorted((self.node(i) for i in self.pending - self.deleted), key=lambda n: n.level)
        wanted = {m for n in todo if n.level == 1 for m in n.members} - set(self.known)
        self.known.update({e.id: e for e in self.store.get_entities(self.scope, sorted(wanted))})
        for n in todo:
            members = [self.known[m] for m in n.members if m in self.known] if n.level == 1 else []
            kids = [self.node(c) for c in n.children] if n.level > 1 else []
            self.tree.summarize(n, members, kids, self.stop)
            self.touched.add(n.id)

    def write(self, entities: Sequence[Entity], gone: Sequence[str]) -> None:
        """Store every touched node and entity, delete what was emptied."""
        s = self.scope
        x = np.stack([self.vectors[e.id] for e in entities]) if entities else np.zeros((0, 1))
        self.tree.write_entities(s, entities, x, self.leaf_of, self.participants)
        batch, moved = {e.id for e in entities}, dict[str, list[str]]()
        for entity_id, leaf_id in self.leaf_of.items():
            if entity_id not in batch:
                moved.setdefault(leaf_id, []).append(entity_id)
        for leaf_id, ids in sorted(moved.items()):
            self.store.move_tree_nodes(s, ids, leaf_id)
        touched = [self.node(i) for i in sorted(self.touched - self.deleted)]
        self.tree.write_nodes(s, touched, self.participants)
        self.store.delete_tree_nodes(s, sorted(self.deleted) + list(gone))
