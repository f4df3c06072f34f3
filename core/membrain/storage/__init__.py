"""Storage backends: the protocol, Qdrant Edge (embedded default) and qdrant-client (server)."""

from membrain.storage.base import (
    Backend,
    Collection,
    Point,
    ScoredPoint,
    VectorQuery,
    Where,
)

__all__ = ["Backend", "Collection", "Point", "ScoredPoint", "VectorQuery", "Where"]
