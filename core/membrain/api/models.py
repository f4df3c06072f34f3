"""Records MemBrain stores and returns.

All records are frozen pydantic models. Times are timezone-aware UTC datetimes; a naive datetime
given by a caller is taken to be UTC.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, overload

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from membrain.api.checks import MAX_MESSAGE_CHARS, UtcDatetime, bounded_text, now, unicode_text, utc
from membrain.api.errors import ConfigurationError, InputError
from membrain.api.metadata import check_metadata
from membrain.api.profile import ProfileEntry
from membrain.api.scope import Record, Scope

__all__ = [
    "Context",
    "Entity",
    "EntityVersion",
    "EntityView",
    "Fact",
    "FactStatus",
    "Layer",
    "MemoryHit",
    "Message",
    "MessageStatus",
    "Precision",
    "RetrievalMode",
    "Role",
    "Scope",
    "SearchResult",
    "StoredMessage",
    "TimeCheck",
    "TimeSpan",
    "Trust",
    "UtcDatetime",
    "now",
    "unicode_text",
    "utc",
]


Metadata = Annotated[dict[str, Any], BeforeValidator(check_metadata)]
"""A JSON object of the caller's (see :mod:`membrain.api.metadata`)."""


class Precision(StrEnum):
    """Grain of a resolved time."""

    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    DATETIME = "datetime"


class TimeSpan(Record):
    """A resolved time: a half-open UTC range ``[start, end)`` at a precision.

    ``start`` is ``None`` for an open-left interval ("before ..."), ``end`` is ``None`` for an
    open-right one ("since ..."). ``interval`` says whether the source was written as an interval
    (``a/b``, ``a/``, ``/b``) rather than a single value. ``precision`` is the finest grain
    among the written endpoints.
    """

    start: UtcDatetime | None
    end: UtcDatetime | None
    precision: Precision
    interval: bool = False

    @model_validator(mode="after")
    def _check_order(self) -> TimeSpan:
        if self.start is None and self.end is None:
            raise InputError("a time span needs at least one endpoint")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise InputError(f"time span ends ({self.end}) before it starts ({self.start})")
        if not self.interval and (self.start is None or self.end is None):
            raise InputError("a single time value needs both endpoints")
        return self


class Role(StrEnum):
    """Who wrote a message."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    OTHER = "other"


class MessageStatus(StrEnum):
    """Where a message stands in the write path."""

    PENDING = "pending"
    """Stored as evidence, not extracted yet (or the model failed on it: see ``error``)."""
    PROCESSED = "processed"
    FAILED = "failed"
    """Extraction of this message alone failed (see ``error``); the rest of its scope went on.

    Not extracted again by :meth:`membrain.Memory.extract_pending`; adding the message again or
    :meth:`membrain.Memory.retry_failed` does, and :meth:`membrain.Memory.dismiss_failed` gives
    up on it.
    """
    DISMISSED = "dismissed"
    """A failed message someone chose not to extract; kept as evidence, with its last error."""


class Message(Record):
    """One chat message: the evidence facts are derived from.

    Example:
        >>> Message(speaker="Sara", text="I booked the shoot.", timestamp="2024-03-15T14:01:00Z")
        ... # doctest: +ELLIPSIS
        Message(...)
    """

    speaker: str = Field(min_length=1)
    text: str
    timestamp: UtcDatetime
    role: Role = Role.USER
    id: str | None = None
    source_id: str | None = None
    """The caller's own id for the message (a LoCoMo ``dia_id``, a chat message id)."""
    addressee: str | None = None
    caption: str | None = None
    """A description of an attached image, kept as evidence."""
    metadata: Metadata = Field(default_factory=dict)
    """The caller's JSON object, carried to the facts extracted from the message."""

    @model_validator(mode="after")
    def _check_content(self, info: ValidationInfo) -> Message:
        # New messages are bounded; a stored one is read whatever limit it was written under.
        limit = MAX_MESSAGE_CHARS if not (info.context or {}).get("stored") else sys.maxsize
        for name in ("text", "caption"):
            bounded_text(getattr(self, name) or "", f"message {name}", limit)
        if not self.text.strip() and not (self.caption or "").strip():
            raise InputError(f"message from {self.speaker!r} has neither text nor caption")
        for name in ("speaker", "source_id", "addressee"):
            unicode_text(getattr(self, name) or "", f"message {name}")
        return self

    def __hash__(self) -> int:  # metadata is a dict: hash what identifies the message
        return hash(self.identity())

    def identity(self) -> tuple[str, ...]:
        """The parts that identify this message within a scope."""
        if self.source_id:
            return self.identity_of(self.source_id)
        return ("message", self.speaker, self.timestamp.isoformat(), self.text)

    @staticmethod
    def identity_of(source_id: str) -> tuple[str, ...]:
        """The identity of the message whose caller-side id is ``source_id``."""
        return ("message", source_id)


class StoredMessage(Record):
    """A message as stored: scoped, identified and with its processing status."""

    id: str
    scope: Scope
    message: Message
    status: MessageStatus = MessageStatus.PENDING
    recorded_at: UtcDatetime
    error: str | None = None
    """Why the last extraction of this message failed (it stays pending)."""
    raw_output: str | None = None
    """The extractor's output that could not be used, verbatim."""
    discarded: tuple[str, ...] = ()
    """What extraction chose not to keep from this message, and why."""
    added_by: str | None = None
    """Who added the message when it was not the application (``agent:<name>``)."""
    expires_at: UtcDatetime | None = None
    """When the message and the facts extracted from it expire (``None``: never)."""


class Layer(StrEnum):
    """Which layer of a character's response a statement comes from.

    A thought is private: it is stored as the character's thought and never rendered as
    something said.
    """

    DIALOGUE = "dialogue"
    ACTION = "action"
    THOUGHT = "thought"


class TimeCheck(StrEnum):
    """How a fact's time annotations compare with the deterministic resolver."""

    AGREES = "agrees"
    """Every annotation the resolver can read resolves to an overlapping span."""
    UNCHECKED = "unchecked"
    """The fact has annotations the resolver cannot read (nothing contradicts them)."""
    CONTRADICTS = "contradicts"
    """An annotation's span does not overlap the resolver's: the fact is flagged disputed."""


class FactStatus(StrEnum):
    """Lifecycle of a fact: an update never deletes one (only a purge erases content).

    A fact that stops being current is superseded, forgotten or retracted, and stays for audit.
    """

    ACTIVE = "active"
    """A current belief."""
    SUPERSEDED = "superseded"
    """Replaced by later facts (``superseded_by``); still answers questions about its time."""
    FORGOTTEN = "forgotten"
    """Tombstoned on request: out of every read."""
    RETRACTED = "retracted"
    """Rejected by a reviewer: out of every read, kept for audit."""
    EXPIRED = "expired"
    """Past its ``expires_at``, marked by the expiry sweep: out of current reads, kept for audit
    until retention erases it."""


class Trust(StrEnum):
    """How far a fact can be relied on."""

    STATED = "stated"
    """A participant said it."""
    DERIVED = "derived"
    """The model inferred it, or an agent wrote it through the memory tools."""
    CONFIRMED = "confirmed"
    """A person confirmed it."""
    DISPUTED = "disputed"
    """Someone disputed it, or its times contradict the message time: under review."""


class ActorKind(StrEnum):
    """Who made a change to the memory."""

    EXTRACTOR = "extractor"
    """The extraction of a conversation (offline rules or a model)."""
    API = "api"
    """Application code calling :class:`membrain.Memory`."""
    AGENT = "agent"
    """An agent, through the memory tools or a LangGraph store."""
    REVIEWER = "reviewer"
    """A person reviewing the memory."""
    SYSTEM = "system"
    """MemBrain itself (retention, maintenance)."""


class Actor(Record):
    """Who made a change: a kind and, when known, a name (``agent:Assistant``, ``reviewer:ana``).

    Example:
        >>> Actor.parse("agent:planner")
        Actor(kind=<ActorKind.AGENT: 'agent'>, name='planner')
        >>> str(Actor.parse("ana", default=ActorKind.REVIEWER))
        'reviewer:ana'
    """

    kind: ActorKind
    name: str = ""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return unicode_text(value, "actor name")

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.name}" if self.name else self.kind.value

    @classmethod
    def parse(cls, value: Actor | str | None, default: ActorKind = ActorKind.API) -> Actor:
        """``value`` as an actor: ``"kind:name"``, a bare name (of kind ``default``), or None.

        Raises:
            InputError: ``value`` is neither an Actor nor a string.
        """
        if isinstance(value, Actor):
            return value
        if value is None:
            return cls(kind=default)
        if not isinstance(value, str):
            raise InputError(f"an actor is a string such as 'agent:planner', got {value!r}")
        kind, sep, name = value.strip().partition(":")
        if sep and kind in ActorKind._value2member_map_:
            return cls(kind=ActorKind(kind), name=name.strip())
        return cls(kind=default, name=value.strip())


class Fact(Record):
    """A self-contained statement with bracketed entity refs and time annotations.

    The times written in the text are also parsed into ``times``; ``valid_from`` / ``valid_to``
    (half-open, UTC) span all of them and ``precision`` is their finest grain. ``stated_at`` is the
    time of the message the fact was stated in; ``recorded_at`` when MemBrain stored it.
    """

    id: str
    scope: Scope
    text: str = Field(min_length=1)
    entities: tuple[str, ...] = ()
    """Entity refs as written in the text (aliases)."""
    entity_ids: tuple[str, ...] = ()
    """The ids of the entities ``entities`` resolved to, position by position."""
    times: tuple[TimeSpan, ...] = ()
    valid_from: UtcDatetime | None = None
    valid_to: UtcDatetime | None = None
    precision: Precision | None = None
    stated_at: UtcDatetime
    recorded_at: UtcDatetime
    sources: tuple[str, ...] = Field(min_length=1)
    """Ids of the messages the fact was derived from."""
    status: FactStatus = FactStatus.ACTIVE
    trust: Trust = Trust.STATED
    extractor: str
    layer: Layer = Layer.DIALOGUE
    time_check: TimeCheck | None = None
    """Set when the fact has time annotations."""
    supersedes: tuple[str, ...] = ()
    """Ids of the facts this one replaced."""
    superseded_by: tuple[str, ...] = ()
    """Ids of the facts that replaced this one (status ``superseded``)."""
    superseded_at: UtcDatetime | None = None
    """Record time of the replacement: when MemBrain learned this fact was no longer true."""
    forgotten_at: UtcDatetime | None = None
    """Record time of the tombstone (status ``forgotten``)."""
    retracted_at: UtcDatetime | None = None
    """Record time of a reviewer's rejection (status ``retracted``)."""
    author: str | None = None
    """Who wrote the fact when it did not come from a participant (``agent:<name>``)."""
    metadata: Metadata = Field(default_factory=dict)
    """The metadata of the messages it cites (:mod:`membrain.api.metadata`), filterable."""
    expires_at: UtcDatetime | None = None
    """When the fact leaves current reads (``None``: never); the latest expiry of its sources
    when every source expires (:mod:`membrain.knowledge.expiry`)."""

    @field_validator("supersedes", mode="before")
    @classmethod
    def _as_ids(cls, value: object) -> object:
        # Records written before supersession could name several facts held one id or None.
        if value is None:
            return ()
        return (value,) if isinstance(value, str) else value

    def __hash__(self) -> int:  # metadata is a dict: hash the id (equal facts share it)
        return hash(self.id)

    @property
    def believed_until(self) -> datetime | None:
        """Record time at which the memory stopped holding this fact true (None: it still does).

        Its expiry counts: an expiring fact is held true until ``expires_at``.
        """
        ends = [t for t in (self.superseded_at, self.forgotten_at, self.retracted_at) if t]
        if self.expires_at is not None:
            ends.append(self.expires_at)
        return min(ends) if ends else None

    @model_validator(mode="after")
    def _check_entities(self) -> Fact:
        if self.entity_ids and len(self.entity_ids) != len(self.entities):
            raise InputError("entity_ids must align with entities")
        return self


class EntityVersion(Record):
    """One version of an entity's description; later versions extend, never replace."""

    version: int = Field(ge=1)
    description: str
    recorded_at: UtcDatetime
    fact_ids: tuple[str, ...] = ()


class Entity(Record):
    """A named thing facts are about, with a stable id, aliases and versioned descriptions."""

    id: str
    scope: Scope
    name: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()
    versions: tuple[EntityVersion, ...] = ()
    participant: bool = False
    """Whether the entity is a speaker in the scope's conversations."""
    created_at: UtcDatetime

    @property
    def description(self) -> str:
        """The latest description (empty when none was recorded)."""
        return self.versions[-1].description if self.versions else ""


class EntityView(Record):
    """An entity as a reader sees it: its current canonical name and latest description."""

    id: str
    name: str
    description: str = ""


class MemoryHit(Record):
    """One search result: a fact, its fused score, its evidence and how it was found.

    ``text`` is the fact as a reader should see it: every alias rendered as its entity's latest
    canonical name, time annotations as written (``raw``), no brackets. ``entities`` are the
    entities the fact mentions, with their latest descriptions.
    """

    fact: Fact
    score: float
    text: str = ""
    entities: tuple[EntityView, ...] = ()
    sources: tuple[Message, ...] = ()
    paths: dict[str, int] = Field(default_factory=dict)
    """Retrieval path name (``bm25``, ``dense``, ``time``, ...; :mod:`membrain.api.path_names`) ->
    1-based rank at which that path returned the fact."""
    rerank: float | None = None
    """The reranker's score (log-odds that the fact is evidence), when it ordered the results."""
    relevance: float = Field(0.0, ge=0.0, le=1.0)
    """How relevant the hit is, in [0, 1], on one scale for every search and surface: the
    calibrated probability that the memory holds the question's topic and that evidence is at
    this hit or below (:mod:`membrain.retrieval.relevance`). Never higher than the hit above it;
    0 for a hit not made by a search."""

    @property
    def source_ids(self) -> tuple[str, ...]:
        """Caller-side ids of the cited messages (``source_id`` when set, else the stored id)."""
        return tuple(m.source_id or m.id or "" for m in self.sources)

    def metadata(self) -> dict[str, Any]:
        """The hit as flat metadata, as the framework retrievers attach it to documents/nodes.

        Keys: ``fact_id``; ``text`` (the fact as stored, with ``[entity]`` brackets and
        ``[raw::resolved]`` annotations); ``entities`` (canonical names); ``valid_from`` and
        ``valid_to`` (ISO 8601 or ``None``); ``sources`` (the cited messages' caller-side ids);
        ``score`` (fused); ``relevance`` (in [0, 1]); ``paths`` (retrieval path -> rank);
        ``rerank`` (the reranker's score or ``None``); ``scope`` (the ``dataset/task``
        key) and ``session``; ``status`` and ``trust``; ``superseded_by`` (fact ids) and
        ``superseded_at`` (ISO 8601 or ``None``); ``author`` (``agent:<name>`` or ``None``);
        ``metadata`` (the fact's, from its messages: :mod:`membrain.api.metadata`).
        """
        fact = self.fact
        superseded_at = fact.superseded_at.isoformat() if fact.superseded_at else None
        return {
            "fact_id": fact.id,
            "text": fact.text,
            "entities": [entity.name for entity in self.entities],
            "valid_from": fact.valid_from.isoformat() if fact.valid_from is not None else None,
            "valid_to": fact.valid_to.isoformat() if fact.valid_to is not None else None,
            "sources": list(self.source_ids),
            "score": self.score,
            "relevance": self.relevance,
            "paths": dict(self.paths),
            "rerank": self.rerank,
            "scope": fact.scope.key,
            "session": fact.scope.session,
            "status": fact.status.value,
            "trust": fact.trust.value,
            "superseded_by": list(fact.superseded_by),
            "superseded_at": superseded_at,
            "author": fact.author,
            "metadata": dict(fact.metadata),
        }


class RetrievalMode(StrEnum):
    """Which retrieval paths a search runs."""

    FAST = "fast"
    """The ``bm25`` and ``dense`` paths over facts, fused by reciprocal rank fusion. No LLM call."""
    EXPAND = "expand"
    """``bm25`` on a rewritten query, ``dense``, ``hyde`` (hypothetical fact), ``event``."""
    DEEP = "deep"
    """All six paths: those four, ``entity_tree`` and ``boolean`` (boolean tantivy query)."""
    AUTO = "auto"
    """Starts as ``fast``; escalates to ``expand`` when the best result is a question."""

    @classmethod
    def parse(cls, value: RetrievalMode | str) -> RetrievalMode:
        """The mode named ``value``.

        Raises:
            ConfigurationError: no mode has that name.
        """
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise ConfigurationError(
                f"unknown retrieval mode {value!r}; available: {known}"
            ) from None


class SearchResult(Record):
    """What one search returned, and how: the hits, the mode that ran, the paths it ran.

    A sequence of its hits: ``result[0]``, ``len(result)`` and ``for hit in result`` read
    :attr:`hits`, so code written for a list of hits keeps working.

    Example:
        >>> result = mem.search("Where does Sara live?", scope=scope, mode="auto")  # doctest: +SKIP
        >>> result.mode, result.escalated, result[0].paths  # doctest: +SKIP
        (<RetrievalMode.EXPAND: 'expand'>, True, {'bm25': 1, 'hyde': 3})
    """

    question: str
    hits: tuple[MemoryHit, ...] = ()
    requested: RetrievalMode
    """The mode the caller asked for."""
    mode: RetrievalMode
    """The mode that produced the hits (``auto`` ends as ``fast`` or ``expand``)."""
    escalated: bool = False
    """``auto`` found its ``fast`` results weak and ran ``expand``."""
    paths: tuple[str, ...] = ()
    """Every path that ran, in the order run (each hit's ``paths`` gives its rank in each)."""

    def __len__(self) -> int:
        return len(self.hits)

    @overload
    def __getitem__(self, index: int) -> MemoryHit: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[MemoryHit, ...]: ...

    def __getitem__(self, index: int | slice) -> MemoryHit | tuple[MemoryHit, ...]:
        return self.hits[index]

    def __iter__(self) -> Iterator[MemoryHit]:  # type: ignore[override]
        return iter(self.hits)

    def __bool__(self) -> bool:
        return bool(self.hits)


class Context(Record):
    """A context block for a prompt: cited facts grouped by entity, within a token budget.

    ``text`` is what goes into the prompt; ``tokens`` its size (cl100k), never more than
    ``max_tokens``. ``hits`` are the facts it holds, in rank order; ``entities`` the entities it
    describes. ``profile`` are the profile entries of the block that opens ``text`` (in block
    order) and ``profile_tokens`` the share of the budget it was given; what it left unused went
    to the facts. ``nothing_relevant`` is set when no fact passed the relevance floor.
    """

    question: str
    text: str
    tokens: int
    max_tokens: int
    hits: tuple[MemoryHit, ...] = ()
    entities: tuple[EntityView, ...] = ()
    profile: tuple[ProfileEntry, ...] = ()
    profile_tokens: int = 0
    nothing_relevant: bool = False
    """No fact was relevant enough (``min_relevance``), or none was found: ``hits`` is empty.
    When the floor left out what the search found, ``text`` says so (unless a profile block
    opens it, or the note does not fit); an empty memory keeps an empty text."""
