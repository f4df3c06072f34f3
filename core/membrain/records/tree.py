"""The entity tree's records over a backend (``entity_tree`` path): :class:`TreeNode`, its reads.

Part of :class:`membrain.records.RecordStore`; tree points are derived from entities, so they are
not audited.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from membrain.api.models import Scope
from membrain.backends.base import (
    DENSE,
    Backend,
    Collection,
    Point,
    ScoredPoint,
    VectorQuery,
    Where,
)
from membrain.embeddings import DenseEncoder

__all__ = ["TreeNode", "TreeRecords"]


@dataclass(eq=False)
class TreeNode:
    """A point of the entity tree (the ``entity_tree`` path): an entity (level 0) or a cluster.

    Attributes:
        id: The entity's id (level 0) or the node's deterministic id.
        level: 0 for an entity, 1 for a cluster of entities, 2 for a cluster of clusters, ...
        parent: The node above (``""`` under the root).
        children: Ids one level below (empty for an entity).
        members: Ids of every entity under the node (the entity itself at level 0).
        summary: What the members share (a cluster) or the embedded text (an entity).
        centroid: Mean unit vector of the members (clusters only).
        by_llm: The summary was written by the model.
        names: The most central member names (clusters only).
        terms: The most shared description words (clusters only).
    """

    id: str
    level: int
    parent: str
    children: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    summary: str = ""
    centroid: NDArray[np.float64] | None = None
    by_llm: bool = False
    names: list[str] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TreeNode):
            return NotImplemented
        mine, theirs = self.centroid, other.centroid
        same_centroid = (mine is None and theirs is None) or (
            mine is not None and theirs is not None and np.array_equal(mine, theirs)
        )
        fields = ("id", "level", "parent", "children", "members", "summary", "by_llm")
        return same_centroid and all(getattr(self, f) == getattr(other, f) for f in fields)

    __hash__ = None  # type: ignore[assignment]


def _tree_payload(node: TreeNode) -> dict[str, Any]:
    if node.level == 0:
        return {
            "level": "0",
            "parent": node.parent,
            "children": [],
            "members": [node.id],
            "summary": node.summary,
            "kind": "entity",
        }
    assert node.centroid is not None  # every cluster has one
    return {
        "level": str(node.level),
        "parent": node.parent,
        "children": list(node.children),
        "members": list(node.members),
        "summary": node.summary,
        "summary_by": "llm" if node.by_llm else "extract",
        "names": list(node.names),
        "terms": list(node.terms),
        "centroid": [round(float(v), 7) for v in node.centroid],
        "kind": "node",
    }


def _tree_node(point: ScoredPoint) -> TreeNode:
    p = point.payload
    centroid = np.array(p["centroid"], dtype=np.float64) if "centroid" in p else None
    return TreeNode(
        id=point.id,
        level=int(p["level"]),
        parent=p["parent"],
        children=list(p["children"]),
        members=list(p["members"]),
        summary=p["summary"],
        centroid=centroid,
        by_llm=p.get("summary_by") == "llm",
        names=list(p.get("names", ())),
        terms=list(p.get("terms", ())),
    )


class TreeRecords:
    """The tree's part of the record store (see :class:`membrain.records.RecordStore`)."""

    backend: Backend
    dense: DenseEncoder

    def _scroll(
        self, collection: Collection, scope: Scope, where: Where | None
    ) -> Iterator[ScoredPoint]:
        offset: str | None = None
        while True:
            page, offset = self.backend.scroll(collection, scope, where=where, offset=offset)
            yield from page
            if offset is None:
                return

    def count_tree(self, scope: Scope, *, level: int | None = None) -> int:
        """How many tree points the scope has (of one ``level`` when given).

        Without a level the participants' record counts too, so a built tree is never empty.
        """
        where = None if level is None else {"level": str(level)}
        return self.backend.count(Collection.TREE, scope, where=where)

    def tree_ids(self, scope: Scope) -> set[str]:
        """The ids of every entity and cluster of the scope's tree."""
        points = self._scroll(Collection.TREE, scope, None)
        return {p.id for p in points if p.payload.get("kind") != "meta"}

    def tree_nodes(
        self, scope: Scope, ids: Sequence[str] | None = None, *, top: bool = False
    ) -> list[TreeNode]:
        """Tree points by id (missing ids skipped).

        Without ids: with ``top`` those under the root, else every entity and cluster.
        """
        if ids is not None:
            points = self.backend.retrieve(Collection.TREE, scope, ids)
        else:
            points = list(self._scroll(Collection.TREE, scope, {"parent": ""} if top else None))
        return [_tree_node(p) for p in points if p.payload.get("kind") != "meta"]

    def query_tree(
        self,
        scope: Scope,
        vector: Sequence[float],
        *,
        limit: int,
        level: int | None = None,
        parents: Sequence[str] | None = None,
    ) -> list[tuple[TreeNode, float]]:
        """Tree points ranked by dense similarity.

        Among one ``level``, or among the children of ``parents`` (``[""]``: the top level).
        """
        where: dict[str, Any] = {}
        if level is not None:
            where["level"] = str(level)
        if parents is not None:
            where["parent"] = parents[0] if len(parents) == 1 else list(parents)
        query = VectorQuery(DENSE, vector, limit=limit)
        points = self.backend.query(Collection.TREE, scope, [query], limit=limit, where=where)
        return [(_tree_node(p), p.score) for p in points]

    def put_tree_nodes(
        self, scope: Scope, nodes: Sequence[TreeNode], vectors: Sequence[Sequence[float]]
    ) -> None:
        """Store tree points (entities or clusters) with their dense vectors."""
        points = [
            Point(n.id, _tree_payload(n), dense=list(v))
            for n, v in zip(nodes, vectors, strict=True)
        ]
        if points:
            self.backend.upsert(Collection.TREE, scope, points)

    def move_tree_nodes(self, scope: Scope, ids: Sequence[str], parent: str) -> None:
        """Put stored tree points under another parent."""
        self.backend.set_payload(Collection.TREE, scope, ids, {"parent": parent})

    def delete_tree_nodes(self, scope: Scope, ids: Sequence[str]) -> None:
        """Delete tree points."""
        self.backend.delete(Collection.TREE, scope, ids)

    def tree_participants(self, scope: Scope) -> list[str]:
        """The participants' names the scope's tree was last built or updated with."""
        found = self.backend.retrieve(Collection.TREE, scope, [self._meta_id(scope)])
        return list(found[0].payload["participants"]) if found else []

    def put_tree_participants(self, scope: Scope, names: Sequence[str]) -> None:
        """Remember the participants' names of the scope's tree."""
        payload = {"kind": "meta", "level": "meta", "parent": "meta", "children": []}
        payload["participants"] = sorted(set(names))
        dense = [1.0] + [0.0] * (self.dense.dim - 1)
        self.backend.upsert(Collection.TREE, scope, [Point(self._meta_id(scope), payload, dense)])

    @staticmethod
    def _meta_id(scope: Scope) -> str:
        return scope.record_id("tree", "meta")

    def delete_tree(self, scope: Scope) -> None:
        """Delete the scope's whole tree (the next ``entity_tree`` search builds it again)."""
        ids = [p.id for p in self._scroll(Collection.TREE, scope, None)]
        self.backend.delete(Collection.TREE, scope, ids)
