"""An embedded store's disk grows with its records, not with how often it was optimised."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

from membrain import Scope
from membrain.backends.base import Collection, Point
from membrain.backends.edge import open_edge_backend

SCOPE = Scope(dataset="disk", task="bench")
DIM = 384
"""Vectors this size make Qdrant Edge merge the segments of 24,000 points (its threshold is in
bytes); four rounds of 6,000 then leave a merged copy behind without a flush."""


def _points(count: int, seed: int) -> Iterator[Point]:
    rng = random.Random(seed)
    for _ in range(count):
        vector = [rng.uniform(-1, 1) for _ in range(DIM)]
        payload = {"status": "active"}
        yield Point(str(uuid.UUID(int=rng.getrandbits(128))), payload, dense=vector)


def _megabytes(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6


def _store(folder: Path, rounds: int, total: int) -> float:
    """Write ``total`` points in ``rounds`` batches, optimising after each; the shard's size."""
    backend = open_edge_backend(folder)
    try:
        backend.ensure_collections(dense_dim=DIM, dense_model="test", sparse_model="test")
        for number in range(rounds):
            backend.upsert(Collection.FACTS, SCOPE, list(_points(total // rounds, number)))
            backend.optimize()
        return _megabytes(folder / Collection.FACTS.value)
    finally:
        backend.close()


def test_optimising_often_leaves_no_copy_of_the_merged_segments(tmp_path: Path) -> None:
    once = _store(tmp_path / "once", 1, 24_000)
    often = _store(tmp_path / "often", 4, 24_000)
    # Each optimisation merges everything written so far; the segments it replaced must go,
    # else the shard holds the 6,000 + 12,000 + 18,000 points of the earlier merges as well.
    assert often < 1.5 * once, (often, once)


def test_an_optimised_store_reads_every_point_back(tmp_path: Path) -> None:
    backend = open_edge_backend(tmp_path / "store")
    try:
        backend.ensure_collections(dense_dim=DIM, dense_model="test", sparse_model="test")
        written = []
        for number in range(3):
            batch = list(_points(500, number))
            written += [p.id for p in batch]
            backend.upsert(Collection.FACTS, SCOPE, batch)
            backend.optimize()
        assert backend.count(Collection.FACTS, SCOPE) == len(written)
        read = backend.retrieve(Collection.FACTS, SCOPE, written[::97])
        assert [p.id for p in read] == written[::97]
    finally:
        backend.close()
