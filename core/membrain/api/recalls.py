"""What an agent was told: the recall trace of a memory's reads.

A memory made with ``trace_recalls=True`` records, for each read that hands facts to an agent
(``search``, ``context`` and every surface made from them), a :class:`Recall`: the question,
the run it served, and the facts in the order they were given. ``memory.trace(run=...)`` reads
a run's recalls back, each fact with its sources; ``memory.recalls(fact_id)`` the runs a fact
was given to.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from membrain.api.checks import UtcDatetime
from membrain.api.models import Fact, Message
from membrain.api.scope import Record, Scope

__all__ = ["MAX_RUN_CHARS", "MAX_RUN_TAGS", "Recall", "RecalledFact", "RunName", "RunTags"]

MAX_RUN_CHARS = 256
"""The longest run name or tag."""
MAX_RUN_TAGS = 32
"""The most tags a read may carry."""

RunName = Annotated[
    str | None,
    Field(
        description="The run this read serves (a LangGraph thread, a LangChain run id, any "
        "name): a memory that traces recalls records the facts it gave under it "
        "(:meth:`trace`).",
    ),
    StringConstraints(min_length=1, max_length=MAX_RUN_CHARS),
]
RunTags = Annotated[
    tuple[Annotated[str, StringConstraints(min_length=1, max_length=MAX_RUN_CHARS)], ...],
    Field(
        max_length=MAX_RUN_TAGS,
        description="Labels of the run recorded with the read (LangChain tags, a checkpoint id).",
    ),
]


class RecalledFact(Record):
    """One fact a read gave, at its rank, with what it cites."""

    fact_id: str
    rank: int = Field(ge=1)
    """1-based position in what the read returned."""
    relevance: float = Field(0.0, ge=0.0, le=1.0)
    """The hit's relevance when it was given (:attr:`membrain.MemoryHit.relevance`)."""
    fact: Fact | None = None
    """The fact as stored now (filled by :meth:`trace` and :meth:`recalls`)."""
    sources: tuple[Message, ...] = ()
    """The messages it cites that are still kept."""


class Recall(Record):
    """One read that handed facts to an agent: which, in which order, for which question."""

    id: str
    scope: Scope
    run: str | None = None
    tags: tuple[str, ...] = ()
    operation: str
    """The operation that read: ``search`` or ``context``."""
    query: str
    """The question (``""`` once a fact it found was purged: it may have quoted it)."""
    at: UtcDatetime
    facts: tuple[RecalledFact, ...] = ()

    @property
    def fact_ids(self) -> tuple[str, ...]:
        """The ids of the facts given, in order."""
        return tuple(f.fact_id for f in self.facts)
