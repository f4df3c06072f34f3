"""The hierarchical entity tree that retrieval path C searches.

Leaves are the scope's entities; above them, clusters of entities (level 1), clusters of clusters
(level 2), and so on up to a top level of at most ``branching`` nodes under a virtual root. Every
point lives in :attr:`Collection.TREE`, scoped like entities (``scope.without_session()``):

* an entity point has the entity's own id, ``level "0"``, ``kind "entity"``, its level-1 node as
  ``parent``, and the dense vector of the entity's name and description;
* a node point has a deterministic id (``scope.record_id("tree", "node", level, first member)``),
  ``level "1"`` and up, ``parent`` (``""`` under the root), ``children``, ``members`` (every entity
  under it), ``summary``, ``centroid`` and ``kind "node"``;
* one ``kind "meta"`` point keeps the names of the scope's participants.

Design decisions:

* **Clustering**: spherical k-means (cosine, k-means++ seeding with a fixed seed, so a rebuild of
  the same entities gives the same tree) into ``ceil(n / branching)`` groups per level; a group
  larger than ``2 * branching`` is bisected again. Upper levels cluster their children's centroids.
* **A node's vector is the centroid** (mean) of its members' vectors, normalised. Cosine to a
  centroid is the mean similarity to the members, so a question about one member's detail still
  reaches its cluster, where the embedding of a short summary loses it. The centroid is kept in the
  payload (the backend returns no vectors), so updates are exact running means with no
  re-embedding. An LLM-written summary names what the members share ("musical instruments"), which
  a question may ask for: its embedding is then added to the centroid with equal weight.
* **Summaries**: written by the LLM when one is given (from the members' descriptions for a level-1
  node, from the children's summaries above), extractive otherwise (and when a call fails): the
  names of the most central members (whose description words are most shared in the cluster) and
  the cluster's most frequent description words, e.g. ``"violin, cello: instrument, string"``.
* **Participants are left out.** Speakers are mentioned by nearly every fact: the facts of a
  participant are all facts, which path B already ranks, and a participant node would attract
  every question. Participant names are also replaced by "they" in embedded entity text (as
  :func:`membrain.indexing.question_dense_text` does for the question) and kept out of summaries.
* **Incremental updates** attach each entity to its nearest level-1 node, update the centroids on
  the way up and rewrite only that node's summary (ancestors keep theirs until the next
  :meth:`EntityTree.rebuild`). A node with more than ``2 * branching`` children is split by
  clustering its children, which may split its parent in turn, like a B-tree; when the root holds
  more than ``2 * branching`` nodes a new top level is added. This machinery lives in
  :mod:`membrain.retrieval.tree_update`.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from membrain.errors import ConfigurationError
from membrain.extraction.llm import LLMCallError, LLMClient
from membrain.indexing import entity_text, question_dense_text
from membrain.models import Entity, Scope
from membrain.storage.base import DENSE, Collection, Point, ScoredPoint, VectorQuery
from membrain.store import RecordStore

__all__ = ["EntityTree"]

Vectors = NDArray[np.float64]

_WORD = re.compile(r"[a-z][a-z0-9'-]{2,}")
_STOP = frozenset(
    "the and for with that this from are was were has have had its their they them his her she "
    "him who whom which what when where why how not but also into onto over under about after "
    "before than then there here one two all any some each very just like more most other such "
    "our out own same can could would should will may might been being does did doing you your "
    "yours mine ours hers theirs itself called named".split()
)
_NAMES = 6
_TERMS = 12
_SYSTEM = "You name what a group of things has in common. Answer with one short line, no preamble."


@dataclass
class _Node:
    id: str
    level: int
    parent: str
    children: list[str]
    members: list[str]
    centroid: Vectors
    summary: str = ""
    by_llm: bool = False
    names: list[str] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        return {
            "level": str(self.level),
            "parent": self.parent,
            "children": list(self.children),
            "members": list(self.members),
            "summary": self.summary,
            "summary_by": "llm" if self.by_llm else "extract",
            "names": list(self.names),
            "terms": list(self.terms),
            "centroid": [round(float(v), 7) for v in self.centroid],
            "kind": "node",
        }

    @classmethod
    def of(cls, point: ScoredPoint) -> _Node:
        p = point.payload
        return cls(
            point.id, int(p["level"]), p["parent"], list(p["children"]), list(p["members"]),
            np.array(p["centroid"], dtype=np.float64), p["summary"], p["summary_by"] == "llm",
            list(p["names"]), list(p["terms"]),
        )  # fmt: skip

    def add(self, vector: Vectors, sign: float = 1.0) -> None:
        """Move the centroid for one member joining (``sign`` 1) or leaving (-1)."""
        n = len(self.members)  # after the change
        if n:
            self.centroid = (self.centroid * (n - sign) + sign * vector) / n


def _mean(nodes: Sequence[_Node]) -> Vectors:
    weights = np.array([len(n.members) for n in nodes], dtype=np.float64)
    centroids = np.stack([n.centroid for n in nodes])
    mean: Vectors = (centroids * weights[:, None]).sum(axis=0) / weights.sum()
    return mean


def _unit(x: Vectors) -> Vectors:
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0.0, 1.0, norms)


def _kmeans(x: Vectors, k: int, *, seed: int = 0, iterations: int = 30) -> list[list[int]]:
    """Spherical k-means of unit rows ``x`` into at most ``k`` non-empty groups (row indices)."""
    n = len(x)
    if k <= 1 or n <= 1:
        return [list(range(n))]
    rng = np.random.default_rng(seed)
    centers = [x[int(rng.integers(n))]]
    dist = np.sum((x - centers[0]) ** 2, axis=1)
    for _ in range(1, min(k, n)):  # k-means++: far points are likelier seeds
        if dist.sum() <= 1e-12:
            break
        centers.append(x[int(rng.choice(n, p=dist / dist.sum()))])
        dist = np.minimum(dist, np.sum((x - centers[-1]) ** 2, axis=1))
    c = np.stack(centers)
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(iterations):
        labels = np.argmax(x @ c.T, axis=1)
        moved = c.copy()
        for j in range(len(c)):
            if np.any(labels == j):
                moved[j] = _unit(x[labels == j].mean(axis=0))
        if np.allclose(moved, c):
            break
        c = moved
    return [g for j in range(len(c)) if (g := [int(i) for i in np.flatnonzero(labels == j)])]


def _partition(x: Vectors, k: int, max_size: int, *, fan: int = 16) -> list[list[int]]:
    """Groups of row indices: k-means into ``k``, then groups over ``max_size`` bisected.

    A large ``k`` is reached hierarchically (``fan`` groups, each partitioned in proportion), so
    building the leaf level costs ``O(n * fan)`` similarities per pass, not ``O(n * n / b)``.
    """
    if k > fan and len(coarse := _kmeans(x, fan)) > 1:
        found: list[list[int]] = []
        for g in coarse:
            parts = max(1, round(k * len(g) / len(x)))
            found += [[g[i] for i in sub] for sub in _partition(x[g], parts, max_size, fan=fan)]
        return sorted(found, key=min)
    done: list[list[int]] = []
    todo = [list(range(len(x)))]
    parts = k
    while todo:
        group = todo.pop()
        if parts <= 1 and len(group) <= max_size:
            done.append(group)
            continue
        split = [[group[i] for i in g] for g in _kmeans(x[group], max(parts, 2))]
        if len(split) == 1:  # indistinguishable vectors: halve in order
            half = (len(group) + 1) // 2
            split = [group[:half], group[half:]]
        parts = 1  # later passes only bisect what is still too large
        todo += [g for g in split if len(g) > max_size]
        done += [g for g in split if len(g) <= max_size]
    return sorted(done, key=min)


def _words(text: str, stop: frozenset[str]) -> list[str]:
    return [w for w in dict.fromkeys(_WORD.findall(text.lower())) if w not in stop]


def _extract(entities: Sequence[Entity], stop: frozenset[str]) -> tuple[list[str], list[str]]:
    """Most central member names and most frequent description words of a cluster."""
    bags = [_words(f"{e.name} {e.description}", stop) for e in entities]
    counts: Counter[str] = Counter(w for bag in bags for w in bag)
    central = sorted(
        range(len(entities)),
        key=lambda i: (-sum(counts[w] for w in bags[i]) / (len(bags[i]) or 1), entities[i].name),
    )
    terms = sorted(counts, key=lambda w: (-counts[w], w))[:_TERMS]
    return [entities[i].name for i in central[:_NAMES]], terms


def _merge(children: Sequence[_Node]) -> tuple[list[str], list[str]]:
    """Names and words of an upper node from its children's, larger children first."""
    ordered = sorted(children, key=lambda c: (-len(c.members), c.id))
    names: list[str] = []
    for rank in range(_NAMES):
        names += [c.names[rank] for c in ordered if rank < len(c.names)]
    weights: dict[str, float] = {}
    for c in ordered:
        for rank, term in enumerate(c.terms):
            weights[term] = weights.get(term, 0.0) + len(c.members) / (rank + 1)
    terms = sorted(weights, key=lambda w: (-weights[w], w))[:_TERMS]
    return list(dict.fromkeys(names))[:_NAMES], terms


_write_locks: weakref.WeakKeyDictionary[object, threading.Lock] = weakref.WeakKeyDictionary()
_write_locks_guard = threading.Lock()


def _write_lock(backend: object) -> threading.Lock:
    """The lock serialising tree writes on ``backend`` (shared by every tree over it)."""
    with _write_locks_guard:
        lock = _write_locks.get(backend)
        if lock is None:
            lock = _write_locks[backend] = threading.Lock()
        return lock


class EntityTree:
    """A hierarchy of entity clusters over one backend, searched by beam search (path C).

    Args:
        store: Where entities and tree nodes live; its dense encoder embeds entities.
        branching: Target children per node (a node splits past ``2 * branching``).
        llm: Writes node summaries when given; summaries are extractive otherwise.

    Writes are serialised per backend: two trees over one store (two ``Memory`` objects on one
    folder, in one process) never interleave their updates.
    """

    def __init__(
        self, store: RecordStore, *, branching: int = 8, llm: LLMClient | None = None
    ) -> None:
        if branching < 2:
            raise ConfigurationError(f"branching must be at least 2, got {branching}")
        self.store = store
        self.branching = branching
        self.llm = llm
        self._lock = _write_lock(store.backend)

    # -- reads -------------------------------------------------------------------------------
    def is_empty(self, scope: Scope) -> bool:
        """Whether the scope's tree was never built."""
        return self.store.backend.count(Collection.TREE, scope.without_session()) == 0

    def nodes(self, scope: Scope) -> list[dict[str, Any]]:
        """Every node of the scope's tree (its payload and ``id``), lowest level first."""
        found = [{"id": p.id, **p.payload} for p in self._scroll(scope.without_session())]
        found = [n for n in found if n["kind"] == "node"]
        return sorted(found, key=lambda n: (int(n["level"]), n["id"]))

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
        s, backend = scope.without_session(), self.store.backend
        vector = [float(v) for v in question_vector]

        def best(where: dict[str, Any], n: int) -> list[ScoredPoint]:
            query = VectorQuery(DENSE, vector, limit=n)
            return backend.query(Collection.TREE, s, [query], limit=n, where=where)

        beam: list[ScoredPoint] = []
        if depth != 0:
            beam, steps = best({"parent": ""}, beam_width), 1
            while beam and int(beam[0].payload["level"]) > 1 and (depth is None or steps < depth):
                beam, steps = best({"parent": [p.id for p in beam]}, beam_width), steps + 1
            if not beam:
                return []
            while int(beam[0].payload["level"]) > 1:  # depth reached: take all below the beam
                beam = backend.retrieve(
                    Collection.TREE, s, [c for p in beam for c in p.payload["children"]]
                )
            size = sum(len(p.payload["children"]) for p in beam)
        else:
            size = backend.count(Collection.TREE, s, where={"level": "0"})
        where: dict[str, Any] = {"parent": [p.id for p in beam]} if beam else {"level": "0"}
        return [(p.id, p.score) for p in best(where, max(1, min(size, limit or size)))]

    # -- writes ------------------------------------------------------------------------------
    def rebuild(self, scope: Scope) -> None:
        """Build the scope's tree afresh from all its entities (replacing any previous tree)."""
        s = scope.without_session()
        with self._lock:
            self._build(s, list(self.store.iter_entities(s)))

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
                self._build(s, list({**stored, **{e.id: e for e in batch}}.values()))
            else:
                from membrain.retrieval.tree_update import _Edit  # lazy: it imports this module

                _Edit(self, s, batch).run()

    # -- shared with tree_update._Edit ---------------------------------------------------------
    def participants(self, scope: Scope) -> list[str]:
        """Names and aliases of the scope's participants, as the tree last saw them."""
        found = self.store.backend.retrieve(Collection.TREE, scope, [self._meta_id(scope)])
        return list(found[0].payload["participants"]) if found else []

    def write_meta(self, scope: Scope, participants: Iterable[str]) -> None:
        """Remember the participants' names."""
        payload = {"kind": "meta", "level": "meta", "parent": "meta", "children": []}
        payload["participants"] = sorted(set(participants))
        dense = [1.0] + [0.0] * (self.store.dense.dim - 1)
        point = Point(self._meta_id(scope), payload, dense=dense)
        self.store.backend.upsert(Collection.TREE, scope, [point])

    def embed(self, entities: Sequence[Entity], participants: Sequence[str]) -> Vectors:
        """Unit vectors of entities' name and description, participants as "they"."""
        texts = [_entity_text(e, participants) for e in entities]
        if not texts:
            return np.zeros((0, self.store.dense.dim))
        return _unit(np.array(self.store.dense.embed_documents(texts), dtype=np.float64))

    def group(self, x: Vectors) -> list[list[int]]:
        """Row groups of about ``branching`` rows, none larger than ``2 * branching``."""
        return _partition(_unit(x), math.ceil(len(x) / self.branching), 2 * self.branching)

    def summarize(
        self, node: _Node, members: Sequence[Entity], kids: Sequence[_Node], stop: frozenset[str]
    ) -> None:
        """Set a node's summary (level 1 from its entities, above from its children)."""
        node.names, node.terms = _extract(members, stop) if node.level == 1 else _merge(kids)
        node.summary, node.by_llm = f"{', '.join(node.names)}: {', '.join(node.terms)}", False
        if self.llm is None:
            return
        if node.level == 1:
            lines = [f"- {entity_text(e.name, e.description)[:240]}" for e in members[:40]]
        else:
            lines = [f"- {c.summary[:240]}" for c in kids[:40]]
        prompt = (
            "In one line of at most 30 words, say what kind of things these are and what they "
            "have in common, naming the most important ones:\n" + "\n".join(lines)
        )
        try:
            text = " ".join(self.llm.call(_SYSTEM, prompt).text.split())
        except LLMCallError:
            return  # the extractive summary stands
        if text:
            node.summary, node.by_llm = text[:400], True

    def write_nodes(self, scope: Scope, nodes: Sequence[_Node]) -> None:
        """Upsert nodes with their vectors: the centroid, plus the LLM summary's embedding."""
        if not nodes:
            return
        vectors = _unit(np.stack([n.centroid for n in nodes]))
        by_llm = [i for i, n in enumerate(nodes) if n.by_llm]
        if by_llm:  # embedded like the question: participants as "they"
            names = self.participants(scope)
            texts = [question_dense_text(nodes[i].summary, names) for i in by_llm]
            summaries = _unit(np.array(self.store.dense.embed_documents(texts), dtype=np.float64))
            vectors[by_llm] = _unit(vectors[by_llm] + summaries)
        points = [
            Point(n.id, n.payload(), dense=v.tolist()) for n, v in zip(nodes, vectors, strict=True)
        ]
        self.store.backend.upsert(Collection.TREE, scope, points)

    def write_entities(
        self, scope: Scope, entities: Sequence[Entity], x: Vectors, leaf_of: dict[str, str]
    ) -> None:
        """Upsert entity points under their level-1 nodes."""
        participants = self.participants(scope)
        points = [
            Point(e.id, _entity_payload(e, leaf_of[e.id], participants), dense=v.tolist())
            for e, v in zip(entities, x, strict=True)
        ]
        self.store.backend.upsert(Collection.TREE, scope, points)

    # -- internals ---------------------------------------------------------------------------
    @staticmethod
    def _meta_id(scope: Scope) -> str:
        return scope.record_id("tree", "meta")

    def _scroll(self, scope: Scope) -> Iterator[ScoredPoint]:
        offset: str | None = None
        while True:
            page, offset = self.store.backend.scroll(Collection.TREE, scope, offset=offset)
            yield from page
            if offset is None:
                return

    def _build(self, s: Scope, everything: Sequence[Entity]) -> None:
        participants = sorted({n for e in everything if e.participant for n in _names(e)})
        entities = sorted((e for e in everything if not e.participant), key=lambda e: e.id)
        stale = {p.id for p in self._scroll(s)}
        self.write_meta(s, participants)
        stop = _stop_words(participants)
        x = self.embed(entities, participants)
        row = {e.id: i for i, e in enumerate(entities)}
        # Level 1 clusters entity vectors; each level above clusters its children's centroids.
        nodes: list[_Node] = []
        below: list[_Node] = []
        while entities and (not below or len(below) > self.branching):
            items = [n.centroid for n in below] if below else list(x)
            level = []
            for g in self.group(np.stack(items)):
                kids = [below[i] for i in g] if below else []
                members = [m for k in kids for m in k.members] or [entities[i].id for i in g]
                depth = kids[0].level + 1 if kids else 1
                node_id = s.record_id("tree", "node", str(depth), min(members))
                children = [k.id for k in kids] or members
                centroid = _mean(kids) if kids else x[g].mean(axis=0)
                node = _Node(node_id, depth, "", children, members, centroid)
                for k in kids:
                    k.parent = node_id
                self.summarize(
                    node, [] if kids else [entities[row[m]] for m in members], kids, stop
                )
                level.append(node)
            nodes += level
            below = level
        leaf_of = {m: n.id for n in nodes if n.level == 1 for m in n.children}
        self.write_entities(s, entities, x, leaf_of)
        self.write_nodes(s, nodes)
        fresh = {e.id for e in entities} | {n.id for n in nodes} | {self._meta_id(s)}
        self.store.backend.delete(Collection.TREE, s, sorted(stale - fresh))


def _names(entity: Entity) -> tuple[str, ...]:
    return (entity.name, *entity.aliases)


def _stop_words(participants: Iterable[str]) -> frozenset[str]:
    return _STOP | {w for p in participants for w in _WORD.findall(p.lower())}


def _entity_text(entity: Entity, participants: Sequence[str]) -> str:
    return question_dense_text(entity_text(entity.name, entity.description), participants)


def _entity_payload(entity: Entity, parent: str, participants: Sequence[str]) -> dict[str, Any]:
    return {
        "level": "0",
        "parent": parent,
        "children": [],
        "members": [entity.id],
        "summary": _entity_text(entity, participants),
        "kind": "entity",
    }
