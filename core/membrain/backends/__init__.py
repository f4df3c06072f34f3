"""Storage backends: the protocol, Qdrant Edge (embedded default) and qdrant-client (server)."""

from pathlib import Path

from membrain.api.errors import ConfigurationError
from membrain.backends.base import (
    Backend,
    Collection,
    Point,
    ScoredPoint,
    VectorQuery,
    Where,
)

__all__ = ["Backend", "Collection", "Point", "ScoredPoint", "VectorQuery", "Where", "open_backend"]


def open_backend(
    path: str | Path | None, qdrant_url: str | None, api_key: str | None, *, default: Path
) -> Backend:
    """The backend at ``qdrant_url`` (a server), else the embedded one at ``path`` (or ``default``).

    Raises:
        ConfigurationError: both ``path`` and ``qdrant_url`` are given.
    """
    if qdrant_url is not None:
        if path is not None:
            raise ConfigurationError("pass either path (embedded) or qdrant_url (server), not both")
        from qdrant_client import QdrantClient

        from membrain.backends.client import QdrantClientBackend

        return QdrantClientBackend(QdrantClient(url=qdrant_url, api_key=api_key))
    from membrain.backends.edge import open_edge_backend

    return open_edge_backend(Path(path) if path is not None else default)
