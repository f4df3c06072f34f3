"""The accountability records: audit events, their causes, review items and a fact's history.

Every change to a fact, an entity or a message is written by :class:`membrain.records.RecordStore`
together with an append-only :class:`AuditEvent` saying what changed, who changed it (an
:class:`~membrain.api.models.Actor`) and why. Events hold ids, actors and reasons, never the content
of what they describe, so a purge that erases content leaves an audit trail without it.

A :class:`ReviewItem` is something a person should look at (a disputed fact, a supersession
made by the model, an agent's request to forget); it is an audit event of action
``review_requested`` until a ``review_resolved`` event answers it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict

from membrain.api.checks import MAX_REASON_CHARS, bounded_text, check_json
from membrain.api.errors import InputError
from membrain.api.models import Actor, ActorKind, Fact, Scope, UtcDatetime

__all__ = [
    "AuditAction",
    "AuditEvent",
    "Cause",
    "FactHistory",
    "ReviewItem",
    "ReviewKind",
    "ReviewPolicy",
]


class AuditAction(StrEnum):
    """What an audit event records."""

    STORED = "stored"
    """Messages were stored as evidence."""
    PROCESSED = "processed"
    """Messages were extracted."""
    EXTRACTION_FAILED = "extraction_failed"
    """Extraction of messages failed: they stay pending, or are marked failed."""
    DISMISSED = "dismissed"
    """Failed messages were given up on: they stay stored, never extracted."""
    DISCARDED = "discarded"
    """The extractor chose not to keep something a message said (the reasons, not the text)."""
    CREATED = "created"
    """A fact or an entity was written."""
    SUPERSEDED = "superseded"
    """A fact was replaced by later facts."""
    FORGOTTEN = "forgotten"
    """A fact was tombstoned."""
    CONFIRMED = "confirmed"
    """A person confirmed a fact."""
    DISPUTED = "disputed"
    """A fact was disputed (by someone, or by a time contradiction)."""
    RETRACTED = "retracted"
    """A reviewer rejected a fact: it is out of every read."""
    DESCRIPTION_VERSIONED = "description_versioned"
    """An entity gained a description version (or aliases)."""
    REVIEW_REQUESTED = "review_requested"
    """A change waits for a person (a :class:`ReviewItem`)."""
    REVIEW_RESOLVED = "review_resolved"
    """A person accepted or rejected a review item."""
    PURGED = "purged"
    """Content was erased (ids only remain, here)."""
    SCOPE_DELETED = "scope_deleted"
    """Whole scopes were deleted (recorded in their dataset's erasure log, ids and names)."""
    PROFILE_SET = "profile_set"
    """A profile entry gained a version (its topic, subtopic and cited facts in the details)."""
    PROFILE_REMOVED = "profile_removed"
    """A profile entry was removed (a last version marks it)."""
    ERASURE_RECEIPT = "erasure_receipt"
    """An erasure finished: its receipt (ids and salted hashes), in the dataset's erasure log."""
    EXPIRED = "expired"
    """Facts or messages past their expiry were marked expired (ids only)."""
    EXPIRY_SET = "expiry_set"
    """The expiry of facts was moved (a refreshed time to live)."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _bounded_details(details: dict[str, Any]) -> dict[str, Any]:
    check_json(details, "audit event details")  # an imported event's are the file's
    return details


class AuditEvent(_Record):
    """One append-only entry of the audit log.

    ``targets`` are the ids the event is about (facts, entities, messages or a review item),
    ``details`` ids and settings that explain it (the sources of a created fact, the facts that
    superseded another, the extractor and its prompt version), never content.
    """

    id: str
    scope: Scope
    action: AuditAction
    targets: tuple[str, ...]
    actor: Actor
    reason: str = ""
    at: UtcDatetime
    details: Annotated[dict[str, Any], AfterValidator(_bounded_details)] = {}


@dataclass(frozen=True, slots=True)
class Cause:
    """Who makes a change and why: the store writes it into the change's audit events.

    Attributes:
        actor: Who.
        reason: Why, in words (no content of the records it is about).
        details: Ids explaining the change, merged into every event.
    """

    actor: Actor = field(default_factory=lambda: Actor(kind=ActorKind.SYSTEM))
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse what an audit event could not record, before anything is written.

        Raises:
            InputError: the reason (or note) is not text, not valid Unicode or longer than
                :data:`~membrain.api.checks.MAX_REASON_CHARS`; the actor is not an :class:`Actor`
                or its name is longer than that.
        """
        bounded_text(self.reason, "a reason", MAX_REASON_CHARS)
        if not isinstance(self.actor, Actor):
            raise InputError(f"an actor must be an Actor, got {type(self.actor).__name__}")
        bounded_text(self.actor.name, "an actor name", MAX_REASON_CHARS)

    @classmethod
    def of(cls, actor: Actor | str | None, default: ActorKind, reason: str = "") -> Cause:
        """The cause of a change by ``actor`` (see :meth:`Actor.parse`)."""
        return cls(Actor.parse(actor, default), reason)


class ReviewKind(StrEnum):
    """What a review item asks a person to decide."""

    DISPUTE = "dispute"
    """Is this disputed fact true? Accepting confirms it, rejecting retracts it."""
    SUPERSESSION = "supersession"
    """Do these facts replace that one? Accepting applies the supersession."""
    FORGET = "forget"
    """Should these facts be forgotten? Accepting tombstones them."""
    KNOCK_ON = "knock_on"
    """Do these facts still hold now that ``old`` was superseded by ``new``? Accepting
    supersedes them by ``new``, rejecting confirms them."""


class ReviewItem(_Record):
    """An open question for a person, from the review queue.

    ``fact_ids`` are the facts it is about: the disputed facts, the facts to forget, or, for a
    supersession, the replaced fact (``old``) and its replacements (``new``). For a knock-on
    review they are the facts that may depend on ``old``'s value, superseded by ``new``.
    """

    id: str
    scope: Scope
    kind: ReviewKind
    fact_ids: tuple[str, ...]
    old: str | None = None
    new: tuple[str, ...] = ()
    requested_by: Actor
    reason: str = ""
    requested_at: UtcDatetime


@dataclass(frozen=True, slots=True)
class ReviewPolicy:
    """Which changes wait for a person instead of being applied.

    Disputed facts are always queued. Attributes:
        model_supersessions: A supersession the extraction model finds is queued, not applied.
        agent_forgets: An agent's request to forget (memory tools) is queued, not applied.
        knock_on: After a supersession, the active facts that depend on the replaced value are
            queued for review (:mod:`membrain.knowledge.knock_on`).
    """

    model_supersessions: bool = False
    agent_forgets: bool = False
    knock_on: bool = True


class FactHistory(_Record):
    """A fact's life: the chain of facts it belongs to and every event about them, oldest first.

    ``facts`` holds the fact, the facts it replaced (and theirs, transitively) and the facts
    that replaced it, in record order; ``events`` every audit event about any of them.
    Iterating a history iterates its events.
    """

    fact_id: str
    facts: tuple[Fact, ...] = ()
    events: tuple[AuditEvent, ...] = ()

    def __iter__(self) -> Iterator[AuditEvent]:  # type: ignore[override]
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def fact(self) -> Fact | None:
        """The fact the history is of (None when it was purged)."""
        return next((f for f in self.facts if f.id == self.fact_id), None)

    def text(self) -> str:
        """The history as lines a person reads (``membrain history`` prints it)."""
        lines = []
        for fact in self.facts:
            mark = "*" if fact.id == self.fact_id else "-"
            lines.append(f"{mark} {fact.id} [{fact.status.value}, {fact.trust.value}] {fact.text}")
            lines.append(f"    valid {_span(fact.valid_from, fact.valid_to)}; {_record(fact)}")
        for event in self.events:
            why = f" ({event.reason})" if event.reason else ""
            ids = ", ".join(event.targets)
            lines.append(f"{_iso(event.at)} {event.action.value} {ids} by {event.actor}{why}")
        return "\n".join(lines)


def _iso(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else ""


def _span(start: datetime | None, end: datetime | None) -> str:
    if start is None and end is None:
        return "unknown"
    return f"{_iso(start) or '?'} -> {_iso(end) or 'open'}"


def _record(fact: Fact) -> str:
    text = f"recorded {_iso(fact.recorded_at)}"
    if fact.superseded_at is not None:
        by = ", ".join(fact.superseded_by)
        text += f", superseded {_iso(fact.superseded_at)} by {by}"
    if fact.forgotten_at is not None:
        text += f", forgotten {_iso(fact.forgotten_at)}"
    if fact.retracted_at is not None:
        text += f", retracted {_iso(fact.retracted_at)}"
    return text
