"""A dense encoder that passes every call to another: benchmarks subclass it to time or cache."""

from __future__ import annotations

from collections.abc import Sequence

from membrain.embeddings import DenseEncoder

__all__ = ["WrappedEncoder"]


class WrappedEncoder:
    """Delegates to ``inner``; a store built with it stays readable with ``inner`` (same name)."""

    def __init__(self, inner: DenseEncoder) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        """The wrapped encoder's name."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped encoder's dimension."""
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """The wrapped encoder's document vectors."""
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The wrapped encoder's query vector."""
        return self.inner.embed_query(text)
