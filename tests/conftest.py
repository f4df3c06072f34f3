from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from store_templates import EmptyStores, shared_empty_stores

from membrain import Memory, Scope
from membrain.testing import HashingEncoder

# Shared CI machines are slow and noisy: no per-example deadline (a slow example is not a bug).
settings.register_profile("membrain", deadline=None)
settings.load_profile("membrain")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def empty_stores() -> EmptyStores:
    """Empty embedded stores, copied from one made once per configuration (``store_templates``)."""
    return shared_empty_stores()


@pytest.fixture
def memory(tmp_path: Path, empty_stores: EmptyStores) -> Iterator[Memory]:
    """A Memory on an empty embedded store with the fast hashing encoder."""
    store = empty_stores.memory(tmp_path / "store", dim=64)
    with Memory(path=store, dense=HashingEncoder(dim=64)) as mem:
        yield mem


@pytest.fixture(scope="session")
def scope() -> Scope:
    return Scope(dataset="sara", task="assistant")
