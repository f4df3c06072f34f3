"""Fakes for tests, yours and ours: a deterministic hashing embedder.

Example:
    >>> enc = HashingEncoder(dim=32)
    >>> len(enc.embed_query("hello world"))
    32
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

__all__ = ["HashingEncoder"]

_WORD = re.compile(r"[a-z0-9]+")


class HashingEncoder:
    """A dense encoder that hashes lowercase words into ``dim`` buckets (L2-normalised).

    Texts sharing words get positive cosine similarity; it needs no model and no network, so
    tests of storage and retrieval logic run in milliseconds.

    Args:
        dim: Vector dimension.
    """

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim

    @property
    def name(self) -> str:
        """Identifier stored with collections built by this encoder."""
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self._dim
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dim
            sign = 1.0 if digest[4] & 1 else -1.0
            vector[bucket] += sign
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return [x / norm for x in vector]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts to be stored."""
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        return self._embed(text)
