from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from membrain import Memory, Scope
from membrain.testing import HashingEncoder

# Shared CI machines are slow and noisy: no per-example deadline (a slow example is not a bug).
settings.register_profile("membrain", deadline=None)
settings.load_profile("membrain")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    """A Memory on an embedded store with the fast hashing encoder."""
    with Memory(path=tmp_path / "store", dense=HashingEncoder(dim=64)) as mem:
        yield mem


@pytest.fixture
def scope() -> Scope:
    return Scope(dataset="sara", task="assistant")
