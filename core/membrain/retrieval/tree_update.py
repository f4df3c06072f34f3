"""Incremental updates of the entity tree, behind :meth:`EntityTree.update`.

Entities leave their level-1 node when changed (or when they turn out to be participants) and join
their nearest one; centroids are updated on the way up, overfull nodes split like a B-tree, a new
top level is added when the root overflows, and only the touched nodes are written back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from membrain.models import Entity, Scope
from membrain.retrieval.tree import (
    EntityTree,
    Vectors,
    _entity_text,
    _mean,
    _names,
    _Node,
    _partition,
    _stop_words,
    _unit,
)
from membrain.storage.base import DENSE, Collection, VectorQuery

__all__: list[str] = []


class _Edit:
    """One incremental update of a scope's tree: detach, attach, split, grow, then write."""

    def __init__(self, tree: EntityTree, scope: Scope, batch: Sequence[Entity]) -> None:
        self.tree, self.scope, self.batch = tree, scope, batch
        self.backend = tree.store.backend
        self.limit = 2 * tree.branching
        self.cache: dict[str, _Node] = {}
        self.touched: set[str] = set()  # nodes to write
        self.pending: set[str] = set()  # nodes whose summary must be rewritten
        self.deleted: set[str] = set()
        self.leaf_of: dict[str, str] = {}  # entity id -> its new level-1 node
        self.vectors: dict[str, Vectors] = {}
        self.known = {e.id: e for e in batch}
        old = tree.participants(scope)
        self.participants = sorted({*old, *(n for e in batch if e.participant for n in _names(e))})
        if self.participants != old:
            tree.write_meta(scope, self.participants)
        self.stop = _stop_words(self.participants)

    def node(self, node_id: str) -> _Node:
        if node_id not in self.cache:
            (point,) = self.backend.retrieve(Collection.TREE, self.scope, [node_id])
            self.cache[node_id] = _Node.of(point)
        return self.cache[node_id]

    def chain(self, node: _Node) -> list[_Node]:
        """The node and its ancestors."""
        found = [node]
        while found[-1].parent:
            found.append(self.node(found[-1].parent))
        return found

    def run(self) -> None:
        ids = [e.id for e in self.batch]
        present = {p.id: p.payload for p in self.backend.retrieve(Collection.TREE, self.scope, ids)}
        entities = [e for e in self.batch if not e.participant]
        texts = {e.id: _entity_text(e, self.participants) for e in entities}
        # Unchanged entities stay; participants and changed entities leave their node first.
        fresh = [e for e in entities if present.get(e.id, {}).get("summary") != texts[e.id]]
        gone = [e.id for e in self.batch if e.participant and e.id in present]
        leaving = gone + [e.id for e in fresh if e.id in present]
        if leaving:
            old = [str(present[i]["summary"]) for i in leaving]
            x = _unit(np.array(self.tree.store.dense.embed_documents(old), dtype=np.float64))
            for entity_id, v in zip(leaving, x, strict=True):
                self.detach(entity_id, str(present[entity_id]["parent"]), v)
        for e, v in zip(fresh, self.tree.embed(fresh, self.participants), strict=True):
            self.vectors[e.id] = v
            self.attach(e.id, self.nearest_leaf(e.id, v), v)
        for leaf_id in sorted(self.pending - self.deleted):
            if len(self.node(leaf_id).children) > self.limit:
                self.split(self.node(leaf_id))
        self.grow_root()
        self.flush()
        self.write(fresh, gone)

    def nearest_leaf(self, entity_id: str, vector: Vectors) -> _Node:
        """The level-1 node nearest ``vector`` (a new one under the root if there is none)."""
        query = VectorQuery(DENSE, vector.tolist(), limit=len(self.deleted) + 1)
        found = self.backend.query(
            Collection.TREE, self.scope, [query], limit=query.limit, where={"level": "1"}
        )
        live = [p.id for p in found if p.id not in self.deleted]
        live += [n.id for n in self.cache.values() if n.level == 1 and n.id not in self.deleted]
        if live:
            return self.node(live[0])
        leaf = _Node(self.new_id(1, entity_id), 1, "", [], [], np.zeros_like(vector))
        self.cache[leaf.id] = leaf
        return leaf

    def attach(self, entity_id: str, leaf: _Node, vector: Vectors) -> None:
        leaf.children.append(entity_id)
        self.leaf_of[entity_id] = leaf.id
        self.pending.add(leaf.id)
        for n in self.chain(leaf):
            n.members.append(entity_id)
            n.add(vector)
            self.touched.add(n.id)

    def detach(self, entity_id: str, leaf_id: str, vector: Vectors) -> None:
        leaf = self.node(leaf_id)
        leaf.children = [c for c in leaf.children if c != entity_id]
        self.pending.add(leaf.id)
        for n in self.chain(leaf):
            n.members = [m for m in n.members if m != entity_id]
            n.add(vector, -1.0)
            self.touched.add(n.id)
            if not n.members:  # an emptied node goes, and its parent forgets it
                self.deleted.add(n.id)
                if n.parent:
                    parent = self.node(n.parent)
                    parent.children = [c for c in parent.children if c != n.id]

    def child_vectors(self, node: _Node) -> Vectors:
        if node.level > 1:
            return np.stack([self.node(c).centroid for c in node.children])
        missing = [c for c in node.children if c not in self.vectors]
        found = self.tree.store.get_entities(self.scope, missing)
        self.known.update({e.id: e for e in found})
        x = self.tree.embed(found, self.participants)
        self.vectors.update(zip([e.id for e in found], x, strict=True))
        node.children = [c for c in node.children if c in self.vectors]
        return np.stack([self.vectors[c] for c in node.children])

    def split(self, node: _Node) -> None:
        """Halve an overfull node by 2-means of its children; the first half keeps the id."""
        x = self.child_vectors(node)
        children, added = list(node.children), []
        for i, g in enumerate(_partition(_unit(x), 2, self.limit)):
            kids = [children[j] for j in g]
            below = [self.node(k) for k in kids] if node.level > 1 else []
            members = [m for k in below for m in k.members] or kids
            part = node
            if i > 0:
                part_id = self.new_id(node.level, min(members))
                part = _Node(part_id, node.level, node.parent, [], [], node.centroid)
                self.cache[part.id] = part
                added.append(part.id)
            part.children, part.members = kids, members
            part.centroid = _mean(below) if below else x[g].mean(axis=0)
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
        candidate, n = self.scope.record_id("tree", "node", str(level), first), 0
        while candidate in self.cache or self.backend.retrieve(
            Collection.TREE, self.scope, [candidate]
        ):
            n += 1
            candidate = self.scope.record_id("tree", "node", str(level), first, str(n))
        return candidate

    def grow_root(self) -> None:
        """Add a top level when the root holds more than ``2 * branching`` nodes."""
        stored = self.backend.scroll(
            Collection.TREE, self.scope, where={"parent": ""}, limit=10_000
        )[0]
        ids = sorted({p.id for p in stored} | {n.id for n in self.cache.values()} - self.deleted)
        top = [self.node(i) for i in ids if not self.node(i).parent]
        if len(top) <= self.limit:
            return
        for g in self.tree.group(np.stack([n.centroid for n in top])):
            kids = [top[i] for i in g]
            members = [m for k in kids for m in k.members]
            level = kids[0].level + 1
            up_id = self.new_id(level, min(members))
            up = _Node(up_id, level, "", [k.id for k in kids], members, _mean(kids))
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
        self.known.update(
            {e.id: e for e in self.tree.store.get_entities(self.scope, sorted(wanted))}
        )
        for n in todo:
            members = [self.known[m] for m in n.members if m in self.known] if n.level == 1 else []
            kids = [self.node(c) for c in n.children] if n.level > 1 else []
            self.tree.summarize(n, members, kids, self.stop)
            self.touched.add(n.id)

    def write(self, entities: Sequence[Entity], gone: Sequence[str]) -> None:
        s, backend = self.scope, self.backend
        x = np.stack([self.vectors[e.id] for e in entities]) if entities else np.zeros((0, 1))
        self.tree.write_entities(s, entities, x, self.leaf_of)
        batch, moved = {e.id for e in entities}, dict[str, list[str]]()
        for entity_id, leaf_id in self.leaf_of.items():
            if entity_id not in batch:
                moved.setdefault(leaf_id, []).append(entity_id)
        for leaf_id, ids in sorted(moved.items()):
            backend.set_payload(Collection.TREE, s, ids, {"parent": leaf_id})
        self.tree.write_nodes(s, [self.node(i) for i in sorted(self.touched - self.deleted)])
        backend.delete(Collection.TREE, s, sorted(self.deleted) + list(gone))
