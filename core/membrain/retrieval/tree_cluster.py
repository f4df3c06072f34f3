"""The arithmetic of the entity tree: clustering unit vectors, centroids, extractive summaries.

Pure functions over numpy arrays and :class:`~membrain.records.TreeNode` records (no I/O), used to
build the tree (:mod:`.tree_build`) and to update it (:mod:`.tree_update`).

* **Clustering**: spherical k-means (cosine, k-means++ seeding with a fixed seed, so a rebuild of
  the same entities gives the same tree) into ``ceil(n / branching)`` groups per level; a group
  larger than ``2 * branching`` is bisected again. Upper levels cluster their children's centroids.
* **Extractive summaries**: the names of the most central members (whose description words are
  most shared in the cluster) and the cluster's most frequent description words, e.g.
  ``"violin, cello: instrument, string"``; an upper node merges its children's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from membrain.api.models import Entity
from membrain.records import TreeNode

__all__ = [
    "Vectors",
    "centroid",
    "extract_summary",
    "kmeans",
    "mean_centroid",
    "merge_summaries",
    "move_centroid",
    "partition",
    "stop_words",
    "unit",
]

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


def move_centroid(node: TreeNode, vector: Vectors, sign: float = 1.0) -> None:
    """Move a node's centroid for one member joining (``sign`` 1) or leaving (-1).

    Call it after ``node.members`` changed: the mean is over the members it now has.
    """
    n = len(node.members)
    if n and node.centroid is not None:
        node.centroid = (node.centroid * (n - sign) + sign * vector) / n


def centroid(node: TreeNode) -> Vectors:
    """A cluster's centroid.

    Raises:
        ValueError: ``node`` is an entity (entities have no centroid).
    """
    if node.centroid is None:
        raise ValueError(f"tree node {node.id} is an entity, not a cluster")
    return node.centroid


def mean_centroid(nodes: Sequence[TreeNode]) -> Vectors:
    """The centroid of the union of ``nodes``' members (each weighted by its member count)."""
    weights = np.array([len(n.members) for n in nodes], dtype=np.float64)
    centroids = np.stack([centroid(n) for n in nodes])
    mean: Vectors = (centroids * weights[:, None]).sum(axis=0) / weights.sum()
    return mean


def unit(x: Vectors) -> Vectors:
    """Rows of ``x`` scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0.0, 1.0, norms)


def kmeans(x: Vectors, k: int, *, seed: int = 0, iterations: int = 30) -> list[list[int]]:
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
                moved[j] = unit(x[labels == j].mean(axis=0))
        if np.allclose(moved, c):
            break
        c = moved
    return [g for j in range(len(c)) if (g := [int(i) for i in np.flatnonzero(labels == j)])]


def partition(x: Vectors, k: int, max_size: int, *, fan: int = 16) -> list[list[int]]:
    """Groups of row indices: k-means into ``k``, then groups over ``max_size`` bisected.

    A large ``k`` is reached hierarchically (``fan`` groups, each partitioned in proportion), so
    building the leaf level costs ``O(n * fan)`` similarities per pass, not ``O(n * n / b)``.
    """
    if k > fan and len(coarse := kmeans(x, fan)) > 1:
        found: list[list[int]] = []
        for g in coarse:
            parts = max(1, round(k * len(g) / len(x)))
            found += [[g[i] for i in sub] for sub in partition(x[g], parts, max_size, fan=fan)]
        return sorted(found, key=min)
    done: list[list[int]] = []
    todo = [list(range(len(x)))]
    parts = k
    while todo:
        group = todo.pop()
        if parts <= 1 and len(group) <= max_size:
            done.append(group)
            continue
        split = [[group[i] for i in g] for g in kmeans(x[group], max(parts, 2))]
        if len(split) == 1:  # indistinguishable vectors: halve in order
            half = (len(group) + 1) // 2
            split = [group[:half], group[half:]]
        parts = 1  # later passes only bisect what is still too large
        todo += [g for g in split if len(g) > max_size]
        done += [g for g in split if len(g) <= max_size]
    return sorted(done, key=min)


def _words(text: str, stop: frozenset[str]) -> list[str]:
    return [w for w in dict.fromkeys(_WORD.findall(text.lower())) if w not in stop]


def extract_summary(
    entities: Sequence[Entity], stop: frozenset[str]
) -> tuple[list[str], list[str]]:
    """Most central member names and most frequent description words of a cluster."""
    bags = [_words(f"{e.name} {e.description}", stop) for e in entities]
    counts: Counter[str] = Counter(w for bag in bags for w in bag)
    central = sorted(
        range(len(entities)),
        key=lambda i: (-sum(counts[w] for w in bags[i]) / (len(bags[i]) or 1), entities[i].name),
    )
    terms = sorted(counts, key=lambda w: (-counts[w], w))[:_TERMS]
    return [entities[i].name for i in central[:_NAMES]], terms


def merge_summaries(children: Sequence[TreeNode]) -> tuple[list[str], list[str]]:
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


def stop_words(participants: Iterable[str]) -> frozenset[str]:
    """Words no summary uses: common words and the participants' names."""
    return _STOP | {w for p in participants for w in _WORD.findall(p.lower())}
