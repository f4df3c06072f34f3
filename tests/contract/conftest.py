"""Fixtures for the backend contract suite: one ``backend`` fixture parametrized over every backend.

Dense vectors come from :class:`HashingEncoder` and sparse vectors from :class:`Bm25Encoder`, both
offline and fast. The server backend runs only when ``QDRANT_URL`` points at a Qdrant server.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient
from store_templates import EmptyStores

from membrain.api.models import Scope
from membrain.backends.base import Backend, Collection, Point
from membrain.backends.client import QdrantClientBackend
from membrain.backends.edge import open_edge_backend
from membrain.embeddings import Bm25Encoder
from membrain.testing import HashingEncoder

DIM = 32
DENSE_ENCODER = HashingEncoder(dim=DIM)
SPARSE_ENCODER = Bm25Encoder()

BACKENDS = ["edge", "client-memory", "client-server"]


def ensure(backend: Backend) -> None:
    backend.ensure_collections(
        dense_dim=DIM, dense_model=DENSE_ENCODER.name, sparse_model=SPARSE_ENCODER.name
    )


def open_edge(path: Path) -> Any:
    """Open (or share) the Edge backend at ``path`` and make sure its collections exist."""
    backend = open_edge_backend(path)
    ensure(backend)
    return backend


def make_point(
    scope: Scope,
    key: str,
    text: str,
    payload: Mapping[str, Any] | None = None,
    *,
    dense: bool = True,
    sparse: bool = True,
) -> Point:
    """A point whose id is derived from ``scope`` and ``key``, with ``text`` embedded both ways."""
    return Point(
        id=scope.record_id(key),
        payload={"key": key, "text": text, **(payload or {})},
        dense=DENSE_ENCODER.embed_query(text) if dense else None,
        sparse=SPARSE_ENCODER.embed_documents([text])[0] if sparse else None,
    )


def keys(points: Sequence[Any]) -> list[str]:
    """The ``key`` payload field of each returned point, in order."""
    return [p.payload["key"] for p in points]


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _create_edge(path: Path) -> None:
    open_edge(path).close()


@pytest.fixture
def backend(backend_name: str, tmp_path: Path, empty_stores: EmptyStores) -> Iterator[Backend]:
    """A fresh backend with its collections created; closed (and cleaned) at teardown.

    The Edge backend opens a copy of an empty store made once (see ``store_templates``).
    """
    if backend_name == "edge":
        edge = open_edge(empty_stores.copy(tmp_path / "store", "contract-edge", _create_edge))
        yield edge
        edge.close()
    elif backend_name == "client-memory":
        memory = QdrantClientBackend(QdrantClient(location=":memory:"))
        ensure(memory)
        yield memory
        memory.close()
    else:
        url = os.environ.get("QDRANT_URL")
        if not url:
            pytest.skip("QDRANT_URL is not set: no Qdrant server to run the server backend against")
        # The version check runs in a thread and warns; the suite turns warnings into errors.
        client = QdrantClient(url=url, check_compatibility=False)
        prefix = f"contract_{uuid.uuid4().hex[:12]}"
        server = QdrantClientBackend(client, prefix=prefix, owns_client=False)
        try:
            ensure(server)
            yield server
            server.close()
        finally:
            with contextlib.suppress(Exception):  # cleanup must not hide the test's own error
                for collection in Collection:
                    client.delete_collection(f"{prefix}_{collection.value}")
            client.close()
