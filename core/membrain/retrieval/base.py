"""What every retrieval path takes and returns.

A path is a function of a :class:`SearchContext` that returns fact ids ranked best first, each
with the path's own score. Paths are independent and testable alone; :mod:`.fusion` combines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from membrain.embeddings import DenseEncoder, SparseEncoder
from membrain.extraction.llm import LLMClient
from membrain.models import Scope, TimeSpan
from membrain.storage.base import Backend

__all__ = ["Ranked", "RetrievalPath", "SearchContext"]


@dataclass(frozen=True, slots=True)
class Ranked:
    """A fact id with the score one path gave it (higher is better)."""

    id: str
    score: float


@dataclass
class SearchContext:
    """Everything a path may use to answer one question, prepared once per search.

    Attributes:
        question: The question as asked.
        scope: Where to search (every path must keep to it).
        backend: The store (facts, entities, tree nodes).
        dense: Dense encoder; sparse: BM25 encoder.
        participants: The scope's speakers (for name-neutral dense queries).
        limit: How many candidates each path returns.
        llm: A model for rewrites, or ``None`` (paths then use deterministic rewrites).
        reference: "now" for relative times in the question.
        times: Time spans the question mentions, resolved against ``reference``.
        asks_when: The question asks for a time ("when", "what year", "how long ago").
    """

    question: str
    scope: Scope
    backend: Backend
    dense: DenseEncoder
    sparse: SparseEncoder
    participants: Sequence[str] = ()
    limit: int = 50
    llm: LLMClient | None = None
    reference: datetime | None = None
    times: Sequence[TimeSpan] = ()
    asks_when: bool = False
    extra: dict[str, object] = field(default_factory=dict)
    _vectors: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def dense_vector(self, text: str) -> list[float]:
        """The dense query vector of ``text``, computed once per search."""
        if text not in self._vectors:
            self._vectors[text] = self.dense.embed_query(text)
        return self._vectors[text]


class RetrievalPath(Protocol):
    """One way of finding facts for a question."""

    @property
    def name(self) -> str:
        """Short name used in explanations ("A", "B", "B2", "B3", "C", "D")."""
        ...

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """Fact ids of ``ctx.scope``, best first, at most ``ctx.limit``."""
        ...
