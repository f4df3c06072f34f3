"""What every retrieval path takes and returns.

A path is a function of a :class:`SearchContext` that returns facts ranked best first, each with
the path's own score (and the fact itself when the path read it, so nobody fetches it again).
Paths are independent and testable alone; :mod:`.search` plans and fuses them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from membrain.extraction.llm import LLMClient
from membrain.models import Fact, Scope, TimeSpan, now, utc
from membrain.store import RecordStore, ScoredFact
from membrain.temporal import find_times

__all__ = ["Ranked", "RetrievalPath", "SearchContext"]

_ASKS_WHEN = re.compile(
    r"^\s*(?:when\b|what (?:year|month|day|date|time)\b|how long ago\b|since when\b)", re.I
)


@dataclass(frozen=True, slots=True)
class Ranked:
    """A fact id with the score one path gave it (higher is better).

    ``found`` is the store's hit when the path read one (its fact is built on demand), so the
    facts that rank are never fetched again.
    """

    id: str
    score: float
    found: ScoredFact | None = None

    @property
    def fact(self) -> Fact | None:
        """The fact, when the path found it in the store."""
        return self.found.fact if self.found is not None else None


@dataclass
class SearchContext:
    """Everything a path may use to answer one question, prepared once per search.

    Attributes:
        question: The question as asked.
        scope: Where to search (every path must keep to it).
        store: The record store (facts, entities, tree nodes) and its encoders.
        participants: The scope's speakers (for name-neutral dense queries).
        limit: How many candidates each path returns.
        llm: A model for rewrites, or ``None`` (paths then use deterministic rewrites).
        reference: "now" for relative times in the question.
        times: Time spans the question mentions, resolved against ``reference``.
        asks_when: The question asks for a time ("when", "what year", "how long ago").
    """

    question: str
    scope: Scope
    store: RecordStore
    participants: Sequence[str] = ()
    limit: int = 50
    llm: LLMClient | None = None
    reference: datetime | None = None
    times: Sequence[TimeSpan] = ()
    asks_when: bool = False
    extra: dict[str, object] = field(default_factory=dict)
    _vectors: dict[str, list[float]] = field(default_factory=dict, repr=False)

    @classmethod
    def for_question(
        cls,
        question: str,
        scope: Scope,
        store: RecordStore,
        *,
        participants: Sequence[str] = (),
        limit: int = 50,
        llm: LLMClient | None = None,
        reference: datetime | None = None,
    ) -> SearchContext:
        """The context of ``question``, with the times it names and whether it asks when.

        Relative times are resolved against ``reference`` (default: now).
        """
        when = utc(reference) if reference is not None else now()
        return cls(
            question=question,
            scope=scope,
            store=store,
            participants=participants,
            limit=limit,
            llm=llm,
            reference=when,
            times=[match.span for match in find_times(question, when)],
            asks_when=bool(_ASKS_WHEN.search(question)),
        )

    def dense_vector(self, text: str) -> list[float]:
        """The dense query vector of ``text``, computed once per search."""
        if text not in self._vectors:
            self._vectors[text] = self.store.dense.embed_query(text)
        return self._vectors[text]


class RetrievalPath(Protocol):
    """One way of finding facts for a question."""

    @property
    def name(self) -> str:
        """Short name used in explanations ("A", "B", "B2", "B3", "C", "D")."""
        ...

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """Facts of ``ctx.scope``, best first, at most ``ctx.limit``."""
        ...
