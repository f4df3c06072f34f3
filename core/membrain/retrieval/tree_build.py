"""Building the entity tree: embedding entities, clustering them level by level, summarising.

:class:`TreeBuilder` holds what building and updating share (the store, the branching factor,
the model for summaries) and builds a scope's tree from scratch; incremental updates are
:mod:`.tree_update`'s. Design decisions (see :mod:`.tree` for the structure):

* **A node's vector is the centroid** (mean) of its members' vectors, normalised. Cosine to a
  centroid is the mean similarity to the members, so a question about one member's detail still
  reaches its cluster, where the embedding of a short summary loses it. The centroid is kept in the
  record (the backend returns no vectors), so updates are exact running means with no
  re-embedding. An LLM-written summary names what the members share ("musical instruments"), which
  a question may ask for: its embedding is then added to the centroid with equal weight.
* **Summaries**: written by the LLM when one is given (from the members' descriptions for a level-1
  node, from the children's summaries above), extractive otherwise (and when a call fails).
* **Participants are left out.** Speakers are mentioned by nearly every fact: the facts of a
  participant are all facts, which the ``dense`` path already ranks, and a participant node would
  attract every question. Participant names are also replaced by "they" in embedded entity text
  (as :func:`membrain.api.indexing.question_dense_text` does for the question) and kept out of
  summaries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from membrain.api.errors import ConfigurationError
from membrain.api.indexing import entity_text, question_dense_text
from membrain.api.models import Entity, Scope
from membrain.extraction.llm import LLMCallError, LLMClient
from membrain.records import RecordStore, TreeNode
from membrain.retrieval.tree_cluster import (
    Vectors,
    centroid,
    extract_summary,
    mean_centroid,
    merge_summaries,
    partition,
    stop_words,
    unit,
)

__all__ = ["TreeBuilder", "embedded_text", "participant_names"]

_SYSTEM = "You name what a group of things has in common. Answer with one short line, no preamble."


def participant_names(entity: Entity) -> tuple[str, ...]:
    """The names a participant entity goes by."""
    return (entity.name, *entity.aliases)


def embedded_text(entity: Entity, participants: Sequence[str]) -> str:
    """An entity's text as the tree embeds it: name and description, participants as "they"."""
    return question_dense_text(entity_text(entity.name, entity.description), participants)


class TreeBuilder:
    """Builds and writes entity trees over one record store.

    Args:
        store: Where entities and tree nodes live; its dense encoder embeds entities.
        branching: Target children per node (a node splits past ``2 * branching``).
        llm: Writes node summaries when given; summaries are extractive otherwise.
    """

    def __init__(self, store: RecordStore, *, branching: int, llm: LLMClient | None) -> None:
        if branching < 2:
            raise ConfigurationError(f"branching must be at least 2, got {branching}")
        self.store = store
        self.branching = branching
        self.llm = llm

    def build(self, s: Scope, everything: Sequence[Entity]) -> None:
        """Build the tree of ``s`` from ``everything``, replacing what was there."""
        participants = sorted(
            {n for e in everything if e.participant for n in participant_names(e)}
        )
        entities = sorted((e for e in everything if not e.participant), key=lambda e: e.id)
        stale = self.store.tree_ids(s)
        self.store.put_tree_participants(s, participants)
        stop = stop_words(participants)
        x = self.embed(entities, participants)
        row = {e.id: i for i, e in enumerate(entities)}
        # Level 1 clusters entity vectors; each level above clusters its children's centroids.
        nodes: list[TreeNode] = []
        below: list[TreeNode] = []
        while entities and (not below or len(below) > self.branching):
            items = [centroid(n) for n in below] if below else list(x)
            level = []
            for g in self.group(np.stack(items)):
                kids = [below[i] for i in g] if below else []
                members = [m for k in kids for m in k.members] or [entities[i].id for i in g]
                depth = kids[0].level + 1 if kids else 1
                node_id = s.record_id("tree", "node", str(depth), min(members))
                children = [k.id for k in kids] or members
                center = mean_centroid(kids) if kids else x[g].mean(axis=0)
                node = TreeNode(node_id, depth, "", children, members, centroid=center)
                for k in kids:
                    k.parent = node_id
                self.summarize(
                    node, [] if kids else [entities[row[m]] for m in members], kids, stop
                )
                level.append(node)
            nodes += level
            below = level
        leaf_of = {m: n.id for n in nodes if n.level == 1 for m in n.children}
        self.write_entities(s, entities, x, leaf_of, participants)
        self.write_nodes(s, nodes, participants)
        fresh = {e.id for e in entities} | {n.id for n in nodes}
        self.store.delete_tree_nodes(s, sorted(stale - fresh))

    def embed(self, entities: Sequence[Entity], participants: Sequence[str]) -> Vectors:
        """Unit vectors of entities' name and description, participants as "they"."""
        texts = [embedded_text(e, participants) for e in entities]
        if not texts:
            return np.zeros((0, self.store.dense.dim))
        return unit(np.array(self.store.dense.embed_documents(texts), dtype=np.float64))

    def group(self, x: Vectors) -> list[list[int]]:
        """Row groups of about ``branching`` rows, none larger than ``2 * branching``."""
        return partition(unit(x), math.ceil(len(x) / self.branching), 2 * self.branching)

    def summarize(
        self,
        node: TreeNode,
        members: Sequence[Entity],
        kids: Sequence[TreeNode],
        stop: frozenset[str],
    ) -> None:
        """Set a node's summary (level 1 from its entities, above from its children)."""
        if node.level == 1:
            node.names, node.terms = extract_summary(members, stop)
        else:
            node.names, node.terms = merge_summaries(kids)
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

    def write_nodes(
        self, scope: Scope, nodes: Sequence[TreeNode], participants: Sequence[str]
    ) -> None:
        """Store clusters with their vectors: the centroid, plus the LLM summary's embedding."""
        if not nodes:
            return
        vectors = unit(np.stack([centroid(n) for n in nodes]))
        by_llm = [i for i, n in enumerate(nodes) if n.by_llm]
        if by_llm:  # embedded like the question: participants as "they"
            texts = [question_dense_text(nodes[i].summary, participants) for i in by_llm]
            summaries = unit(np.array(self.store.dense.embed_documents(texts), dtype=np.float64))
            vectors[by_llm] = unit(vectors[by_llm] + summaries)
        self.store.put_tree_nodes(scope, nodes, vectors.tolist())

    def write_entities(
        self,
        scope: Scope,
        entities: Sequence[Entity],
        x: Vectors,
        leaf_of: dict[str, str],
        participants: Sequence[str],
    ) -> None:
        """Store entities as level-0 points under their level-1 nodes."""
        leaves = [
            TreeNode(e.id, 0, leaf_of[e.id], summary=embedded_text(e, participants))
            for e in entities
        ]
        self.store.put_tree_nodes(scope, leaves, x.tolist())
