"""What every retrieval path takes and returns.

A path is a function of a :class:`SearchContext` that returns facts ranked best first, each with
the path's own score (and the fact itself when the path read it, so nobody fetches it again).
Paths are independent and testable alone; :mod:`.search` plans and fuses them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from membrain.api.errors import InputError
from membrain.api.metadata import MetadataFilter
from membrain.api.models import Fact, FactStatus, Precision, Scope, TimeSpan, now, utc
from membrain.embeddings import embed_queries
from membrain.extraction.llm import LLMClient
from membrain.records import FactFilter, RecordStore, ScoredFact
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
        view: The beliefs searched: the current ones (active facts) by default, or what the
            memory believed at a record time (:meth:`FactFilter.as_of`).
        past: A valid time the question is about (a time it names, or the caller's
            ``valid_at``): facts superseded since, whose valid time covers it, are searched too.
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
    view: FactFilter = FactFilter()
    past: TimeSpan | None = None
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
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        metadata: MetadataFilter = (),
    ) -> SearchContext:
        """The context of ``question``, with the times it names and whether it asks when.

        Relative times are resolved against ``reference`` (default: now). ``as_of`` searches
        what the memory believed at that record time; ``valid_at`` (or a time the question
        names) brings in the superseded facts that were true then. ``metadata``: only facts
        whose metadata meets these conditions.
        """
        if as_of is not None and valid_at is not None:
            raise InputError("as_of and valid_at cannot be combined: give one of them")
        when = utc(reference) if reference is not None else now()
        times = [match.span for match in find_times(question, when)]
        past: TimeSpan | None = None
        if valid_at is not None:
            moment = utc(valid_at)
            end = moment + timedelta(microseconds=1)
            past = TimeSpan(start=moment, end=end, precision=Precision.DATETIME)
        elif times:
            past = times[0]
        view = FactFilter()
        if as_of is not None:
            view = FactFilter.as_of(as_of)
        elif past is not None:
            view = FactFilter(status=(FactStatus.ACTIVE, FactStatus.SUPERSEDED))
        view = replace(view, metadata=metadata)
        return cls(
            question=question,
            scope=scope,
            store=store,
            participants=participants,
            limit=limit,
            llm=llm,
            reference=when,
            times=times,
            asks_when=bool(_ASKS_WHEN.search(question)),
            view=view,
            past=past if as_of is None else None,
        )

    def where(self, **conditions: Any) -> FactFilter:
        """The searched beliefs (:attr:`view`) narrowed by ``conditions`` (FactFilter fields)."""
        return replace(self.view, **conditions)

    def admits(self, fact: Fact) -> bool:
        """Whether a search of this context may return ``fact``.

        A superseded fact counts only where it answers the past the question is about.
        """
        if not self.view.admits(fact):
            return False
        if self.past is not None and fact.status is FactStatus.SUPERSEDED:
            return FactFilter(status=None, covers=self.past).admits(fact)
        return True

    def dense_vector(self, text: str) -> list[float]:
        """The dense query vector of ``text``, computed once per search."""
        if text not in self._vectors:
            self._vectors[text] = self.store.dense.embed_query(text)
        return self._vectors[text]

    def embed_ahead(self, texts: Sequence[str]) -> None:
        """Compute the dense vectors of ``texts`` now, in one model run where the encoder batches.

        :meth:`dense_vector` then reads them.
        """
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        for text, vector in zip(missing, embed_queries(self.store.dense, missing), strict=True):
            self._vectors[text] = vector


class RetrievalPath(Protocol):
    """One way of finding facts for a question."""

    @property
    def name(self) -> str:
        """Short name used in results and explanations (``bm25``, ``entity_tree``, ...).

        The names of the shipped paths are in :mod:`membrain.api.path_names`.
        """
        ...

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """Facts of ``ctx.scope``, best first, at most ``ctx.limit``."""
        ...
