"""Records over a backend: messages, facts, entities and entity-tree nodes to points and back.

This is the one place that knows how a record is laid out as a Qdrant payload and which text of
it is embedded, and the one place every mutation passes through: after each write it tells the
subscribed :class:`~membrain.listeners.RecordListener` objects (the derived indexes) what
changed. Everything above speaks in :mod:`membrain.models` records, :class:`FactFilter` and
:class:`TreeNode`; reads return the records a caller needs in one round trip.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from membrain.embeddings import DenseEncoder, SparseEncoder, SparseVector
from membrain.errors import InputError
from membrain.indexing import entity_text, fact_dense_text, fact_sparse_text, message_text
from membrain.listeners import RecordListener
from membrain.models import (
    Entity,
    Fact,
    FactStatus,
    MessageStatus,
    Precision,
    Scope,
    StoredMessage,
    TimeSpan,
)
from membrain.names import normalize_name
from membrain.storage.base import (
    DENSE,
    SPARSE,
    Backend,
    Collection,
    Point,
    ScoredPoint,
    TimeRange,
    VectorQuery,
    Where,
)

__all__ = ["FactFilter", "RecordStore", "ScoredFact", "TreeNode"]

Vector = Sequence[float] | SparseVector


@dataclass(frozen=True, slots=True)
class FactFilter:
    """Which facts a read returns; every condition given must hold.

    Attributes:
        status: Only facts of this status (``None``: any status).
        entity_ids: Only facts naming one of these entities.
        valid_during: Only facts whose valid time overlaps this span.
        stated_during: Only facts stated within this span.
        stated_after: Only facts stated after this moment (exclusive).
        stated_before: Only facts stated before this moment (exclusive).
        timed: Only facts with a resolved time.
    """

    status: FactStatus | None = FactStatus.ACTIVE
    entity_ids: tuple[str, ...] = ()
    valid_during: TimeSpan | None = None
    stated_during: TimeSpan | None = None
    stated_after: datetime | None = None
    stated_before: datetime | None = None
    timed: bool = False

    def where(self) -> Where:
        """The backend condition of this filter."""
        where: dict[str, Any] = {}
        if self.status is not None:
            where["status"] = self.status.value
        if self.entity_ids:
            where["entity_ids"] = list(self.entity_ids)
        if self.valid_during is not None:
            span = self.valid_during
            if span.end is not None:
                where["valid_from"] = TimeRange(lt=span.end)
            if span.start is not None:
                where["valid_to"] = TimeRange(gt=span.start)
        if self.stated_during is not None and (self.stated_after or self.stated_before):
            raise InputError("give stated_during or stated_after/stated_before, not both")
        if self.stated_during is not None:
            span = self.stated_during
            where["stated_at"] = TimeRange(gte=span.start, lt=span.end)
        elif self.stated_after is not None or self.stated_before is not None:
            where["stated_at"] = TimeRange(gt=self.stated_after, lt=self.stated_before)
        if self.timed:
            where["precision"] = [p.value for p in Precision]
        return where


@dataclass(eq=False)
class TreeNode:
    """A point of the entity tree (retrieval path C): an entity (level 0) or a cluster.

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


class ScoredFact:
    """A fact a ranked read found, with its score; the record is built when first asked for.

    A search ranks many more candidates than it returns: building each one's record (pydantic
    validation of its times and fields) cost as much as the query itself, so only the facts a
    caller reads are built.
    """

    __slots__ = ("_fact", "_point", "_scope", "id", "score")

    def __init__(self, scope: Scope, point: ScoredPoint) -> None:
        self.id = point.id
        self.score = point.score
        self._scope = scope
        self._point = point
        self._fact: Fact | None = None

    @property
    def fact(self) -> Fact:
        """The fact record."""
        if self._fact is None:
            self._fact = RecordStore._fact(self._scope, self._point)
        return self._fact

    def __repr__(self) -> str:
        return f"ScoredFact(id={self.id!r}, score={self.score})"


_ENTITY_KEYS = ("name_key", "alias_keys")
_SCOPE_KEYS = ("tenant", "session")


def _payload(record: Any, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = record.model_dump(mode="json", exclude={"scope"})
    data.update(extra)
    return data


def _record_scope(scope: Scope, payload: dict[str, Any]) -> Scope:
    session = payload.get("session") or None
    return Scope(dataset=scope.dataset, task=scope.task, session=session)


def _fields(payload: dict[str, Any], *dropped: str) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in (*_SCOPE_KEYS, *dropped)}


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


class RecordStore:
    """Typed access to the MemBrain collections of one backend (see the module docstring).

    Args:
        backend: Where records live.
        dense: Encoder for the ``dense`` named vector.
        sparse: Encoder for the ``sparse`` named vector.

    Example:
        >>> store = RecordStore(backend, dense, sparse)  # doctest: +SKIP
        >>> store.subscribe(lexical_index)  # doctest: +SKIP
        >>> store.put_facts(scope, facts, participants=["Sara"])  # doctest: +SKIP
    """

    def __init__(self, backend: Backend, dense: DenseEncoder, sparse: SparseEncoder) -> None:
        self.backend = backend
        self.dense = dense
        self.sparse = sparse
        self._listeners: list[RecordListener] = []
        backend.ensure_collections(
            dense_dim=dense.dim, dense_model=dense.name, sparse_model=sparse.name
        )

    def subscribe(self, listener: RecordListener) -> None:
        """Tell ``listener`` about every later mutation (once, however often subscribed)."""
        if all(known is not listener for known in self._listeners):
            self._listeners.append(listener)

    def _points(
        self,
        ids: Sequence[str],
        payloads: Sequence[dict[str, Any]],
        texts: Sequence[str],
        dense_texts: Sequence[str] | None = None,
    ) -> list[Point]:
        dense = self.dense.embed_documents(texts if dense_texts is None else dense_texts)
        sparse = self.sparse.embed_documents(texts)
        return [
            Point(id=i, payload=p, dense=d, sparse=s)
            for i, p, d, s in zip(ids, payloads, dense, sparse, strict=True)
        ]

    # -- messages ----------------------------------------------------------------------------
    def put_messages(self, scope: Scope, messages: Sequence[StoredMessage]) -> None:
        """Store messages (as evidence) with their vectors."""
        if not messages:
            return
        points = self._points(
            [m.id for m in messages],
            [_payload(m) for m in messages],
            [message_text(m.message) for m in messages],
        )
        self.backend.upsert(Collection.MESSAGES, scope, points)
        for listener in self._listeners:
            listener.messages_written(scope, messages)

    def get_messages(self, scope: Scope, ids: Sequence[str]) -> list[StoredMessage]:
        """Stored messages by id (missing ids skipped)."""
        return [
            self._message(scope, p) for p in self.backend.retrieve(Collection.MESSAGES, scope, ids)
        ]

    def iter_messages(
        self, scope: Scope, *, status: MessageStatus | None = None
    ) -> Iterator[StoredMessage]:
        """Every stored message of the scope (of ``status`` when given)."""
        where = None if status is None else {"status": status.value}
        for point in self._scroll(Collection.MESSAGES, scope, where):
            yield self._message(scope, point)

    def set_message_status(
        self,
        scope: Scope,
        ids: Sequence[str],
        status: MessageStatus,
        *,
        error: str | None = None,
        raw_output: str | None = None,
        discarded: dict[str, list[str]] | None = None,
    ) -> None:
        """Record where messages stand in the write path (and what extraction discarded)."""
        self.backend.set_payload(
            Collection.MESSAGES,
            scope,
            ids,
            {"status": status.value, "error": error, "raw_output": raw_output},
        )
        for message_id, reasons in (discarded or {}).items():
            self.backend.set_payload(
                Collection.MESSAGES, scope, [message_id], {"discarded": reasons}
            )
        for listener in self._listeners:
            listener.messages_marked(scope, ids, status)

    def search_messages(
        self, scope: Scope, text: str, *, using: Sequence[str], limit: int, candidates: int
    ) -> list[tuple[StoredMessage, float]]:
        """Ranked messages (the raw evidence) for ``text``, by BM25, dense or both fused."""
        queries = []
        if SPARSE in using:
            queries.append(VectorQuery(SPARSE, self.sparse.embed_query(text), limit=candidates))
        if DENSE in using:
            queries.append(VectorQuery(DENSE, self.dense.embed_query(text), limit=candidates))
        points = self.backend.query(Collection.MESSAGES, scope, queries, limit=limit)
        return [(self._message(scope, p), p.score) for p in points]

    @staticmethod
    def _message(scope: Scope, point: ScoredPoint) -> StoredMessage:
        payload = dict(point.payload)
        return StoredMessage.model_validate(
            {
                "id": point.id,
                "scope": _record_scope(scope, payload),
                "message": payload["message"],
                "status": payload.get("status", MessageStatus.PENDING),
                "recorded_at": payload["recorded_at"],
                "error": payload.get("error"),
                "raw_output": payload.get("raw_output"),
                "discarded": tuple(payload.get("discarded") or ()),
            }
        )

    # -- facts -------------------------------------------------------------------------------
    def put_facts(self, scope: Scope, facts: Sequence[Fact], participants: Sequence[str]) -> None:
        """Store facts with their BM25 and dense vectors (see :mod:`membrain.indexing`)."""
        if not facts:
            return
        points = self._points(
            [f.id for f in facts],
            [_payload(f) for f in facts],
            [fact_sparse_text(f.text) for f in facts],
            [fact_dense_text(f.text, participants) for f in facts],
        )
        self.backend.upsert(Collection.FACTS, scope, points)
        self._facts_written(scope, facts)

    def update_facts(self, scope: Scope, facts: Sequence[Fact]) -> None:
        """Store the new state of facts already stored (status, links), keeping their vectors.

        Text, times and sources are what the vectors were computed from: a changed text is a
        new fact, never an update.
        """
        for fact in facts:
            values = _payload(fact)
            self.backend.set_payload(Collection.FACTS, scope, [fact.id], values)
        self._facts_written(scope, facts)

    def _facts_written(self, scope: Scope, facts: Sequence[Fact]) -> None:
        for listener in self._listeners:
            listener.facts_written(scope, facts)

    def get_facts(self, scope: Scope, ids: Sequence[str]) -> list[Fact]:
        """Facts by id, in the order asked (missing ids skipped)."""
        return [self._fact(scope, p) for p in self.backend.retrieve(Collection.FACTS, scope, ids)]

    def iter_facts(self, scope: Scope, where: FactFilter | None = None) -> Iterator[Fact]:
        """Every fact of the scope that ``where`` admits (every fact when it is ``None``)."""
        condition = where.where() if where is not None else None
        for point in self._scroll(Collection.FACTS, scope, condition):
            yield self._fact(scope, point)

    def first_facts(self, scope: Scope, where: FactFilter, *, limit: int) -> list[Fact]:
        """At most ``limit`` facts ``where`` admits, in storage order (one round trip)."""
        points, _ = self.backend.scroll(Collection.FACTS, scope, where=where.where(), limit=limit)
        return [self._fact(scope, p) for p in points]

    def count_facts(self, scope: Scope, where: FactFilter | None = None) -> int:
        """How many facts of the scope ``where`` admits (all of them when it is ``None``)."""
        condition = where.where() if where is not None else None
        return self.backend.count(Collection.FACTS, scope, where=condition)

    def query_facts(
        self,
        scope: Scope,
        using: str,
        vector: Vector,
        *,
        limit: int,
        where: FactFilter | None = None,
    ) -> list[ScoredFact]:
        """Facts ranked by similarity of their ``using`` vector (``"dense"``/``"sparse"``).

        Active facts unless ``where`` says otherwise; records are built when read.
        """
        query = VectorQuery(using, vector, limit=limit)
        condition = (where or FactFilter()).where()
        points = self.backend.query(Collection.FACTS, scope, [query], limit=limit, where=condition)
        return [ScoredFact(scope, p) for p in points]

    @staticmethod
    def _fact(scope: Scope, point: ScoredPoint) -> Fact:
        payload = _fields(point.payload)
        return Fact.model_validate({**payload, "scope": _record_scope(scope, point.payload)})

    # -- entities ----------------------------------------------------------------------------
    def put_entities(self, scope: Scope, entities: Sequence[Entity]) -> None:
        """Store entities; the dense vector is of the name and latest description."""
        if not entities:
            return
        points = self._points(
            [e.id for e in entities],
            [
                _payload(
                    e,
                    name_key=normalize_name(e.name),
                    alias_keys=[normalize_name(a) for a in e.aliases],
                )
                for e in entities
            ],
            [entity_text(e.name, e.description) for e in entities],
        )
        self.backend.upsert(Collection.ENTITIES, scope, points)
        for listener in self._listeners:
            listener.entities_written(scope, entities)

    def get_entities(self, scope: Scope, ids: Sequence[str]) -> list[Entity]:
        """Entities by id (missing ids skipped)."""
        return [
            self._entity(scope, p) for p in self.backend.retrieve(Collection.ENTITIES, scope, ids)
        ]

    def iter_entities(self, scope: Scope) -> Iterator[Entity]:
        """Every entity of the scope."""
        for point in self._scroll(Collection.ENTITIES, scope, None):
            yield self._entity(scope, point)

    def query_entities(
        self, scope: Scope, vector: Sequence[float], *, limit: int
    ) -> list[tuple[Entity, float]]:
        """Entities ranked by dense similarity of their name and description to ``vector``."""
        query = VectorQuery(DENSE, vector, limit=limit)
        points = self.backend.query(Collection.ENTITIES, scope, [query], limit=limit)
        return [(self._entity(scope, p), p.score) for p in points]

    @staticmethod
    def _entity(scope: Scope, point: ScoredPoint) -> Entity:
        payload = _fields(point.payload, *_ENTITY_KEYS)
        return Entity.model_validate({**payload, "scope": _record_scope(scope, point.payload)})

    # -- entity tree -------------------------------------------------------------------------
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

    # -- whole scopes ------------------------------------------------------------------------
    def delete_scope(self, scope: Scope) -> None:
        """Delete every record of ``scope`` (all sessions when it has none).

        The derived indexes drop theirs when they hear of it.
        """
        self.backend.delete_scope(scope)
        for listener in self._listeners:
            listener.scope_deleted(scope)

    def _scroll(
        self, collection: Collection, scope: Scope, where: Where | None
    ) -> Iterator[ScoredPoint]:
        offset: str | None = None
        while True:
            page, offset = self.backend.scroll(collection, scope, where=where, offset=offset)
            yield from page
            if offset is None:
                return
