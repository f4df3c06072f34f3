"""Which facts a read returns (:class:`FactFilter`) and the fact payload fields it filters on.

Besides the fact's own fields the store writes derived datetime fields on every fact, so the
bi-temporal reads are plain range conditions (Qdrant Edge matches no point on a missing field, so
open ends are written as far-away times):

* ``believed_until``: when the memory stopped holding the fact true (superseded, forgotten or
  retracted; the far future while it is active);
* ``valid_start`` / ``valid_end``: the valid time with open or unknown ends made infinite;
* ``revised_at``: the record time of the latest write of the fact (creation or change), which
  derived indexes use to find what changed since they last caught up (``revised_after``);
* ``expires``: the fact's ``expires_at``, the far future when it never expires (current reads
  keep the facts whose ``expires`` is after the read's time; ``believed_until`` counts it too).

And ``claims``, the keys of the single-valued attributes the text states
(:func:`membrain.extraction.attributes.held_keys`, ``"maya|residence"``), so the facts a new
statement may replace are one indexed lookup; a fact stating none holds :data:`NO_CLAIMS`, so a
fact written before the field existed is told by its absence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from membrain.api.errors import InputError
from membrain.api.metadata import MetadataFilter, matches
from membrain.api.models import Fact, FactStatus, Precision, TimeSpan, Trust, now, utc
from membrain.backends.base import TimeRange, Where
from membrain.extraction.attributes import held_keys

__all__ = [
    "DERIVED_FACT_FIELDS",
    "EXPIRES",
    "NO_CLAIMS",
    "FactFilter",
    "fact_claims",
    "is_current",
    "fact_payload",
    "metadata_indexes",
]

EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)
EXPIRES = "expires"
"""The derived payload field of a fact's expiry (the far future when it never expires)."""
DERIVED_FACT_FIELDS = (
    "believed_until",
    "valid_start",
    "valid_end",
    "revised_at",
    "claims",
    EXPIRES,
)
"""Payload fields the store derives from a fact (dropped when the fact is read)."""

NO_CLAIMS = "-"
"""The ``claims`` of a fact stating no single-valued attribute."""

_READABLE = (FactStatus.ACTIVE, FactStatus.SUPERSEDED, FactStatus.FORGOTTEN, FactStatus.EXPIRED)


def iso(moment: datetime) -> str:
    """``moment`` as the payload writes a time (UTC, microseconds, ``Z``)."""
    return _iso(moment)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def fact_payload(fact: Fact, revised_at: datetime | None = None) -> dict[str, Any]:
    """The payload of ``fact``: its fields (scope aside) and the derived time fields.

    ``revised_at`` is the record time of this write (default: when the fact was recorded).
    """
    data: dict[str, Any] = fact.model_dump(mode="json", exclude={"scope"})
    data["revised_at"] = _iso(revised_at or fact.recorded_at)
    data["believed_until"] = _iso(fact.believed_until or LATEST)
    data["valid_start"] = _iso(fact.valid_from or EARLIEST)
    data["valid_end"] = _iso(fact.valid_to or LATEST)
    data["claims"] = fact_claims(fact.text)
    data[EXPIRES] = _iso(fact.expires_at or LATEST)
    return data


def fact_claims(text: str) -> list[str]:
    """The ``claims`` payload of a fact of this text (never empty)."""
    return held_keys(text) or [NO_CLAIMS]


@dataclass(frozen=True, slots=True)
class FactFilter:
    """Which facts a read returns; every condition given must hold.

    Attributes:
        status: Only facts of this status, or of one of these (``None``: any status).
        entity_ids: Only facts naming one of these entities.
        sources: Only facts citing one of these messages.
        trust: Only facts of this trust state.
        valid_during: Only timed facts whose valid time overlaps this span.
        covers: Only facts whose valid time may overlap this span (an open or unknown end is
            taken to reach it).
        believed_at: Only facts the memory held true at this record time: recorded by then,
            not yet superseded, forgotten or retracted then (whatever their status now).
        stated_during: Only facts stated within this span.
        stated_after: Only facts stated after this moment (exclusive).
        stated_before: Only facts stated before this moment (exclusive).
        timed: Only facts with a resolved time.
        revised_after: Only facts written (created or changed) after this record time.
        claims: Only facts stating a value of one of these attributes of a subject (keys of
            :func:`membrain.extraction.attributes.claim_key`).
        metadata: Only facts whose metadata meets these key conditions
            (:func:`membrain.api.metadata.metadata_filter`).
        alive_at: Only facts not expired at this time (``expires_at`` after it). A read of
            active facts without ``believed_at`` (a current read) keeps to the facts alive now
            when it is ``None``; ``include_expired`` turns that off.
        include_expired: Keep facts past their expiry in a current read.
        expired_by: Only facts whose expiry is at or before this time (none without one).
    """

    status: FactStatus | tuple[FactStatus, ...] | None = FactStatus.ACTIVE
    entity_ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    trust: Trust | None = None
    valid_during: TimeSpan | None = None
    covers: TimeSpan | None = None
    believed_at: datetime | None = None
    stated_during: TimeSpan | None = None
    stated_after: datetime | None = None
    stated_before: datetime | None = None
    timed: bool = False
    revised_after: datetime | None = None
    claims: tuple[str, ...] = ()
    metadata: MetadataFilter = ()
    alive_at: datetime | None = None
    include_expired: bool = False
    expired_by: datetime | None = None

    @classmethod
    def as_of(cls, moment: datetime) -> FactFilter:
        """What the memory believed at record time ``moment`` (retracted facts never count)."""
        return cls(status=_READABLE, believed_at=utc(moment))

    @property
    def statuses(self) -> tuple[FactStatus, ...] | None:
        """The accepted statuses (``None``: any)."""
        if self.status is None or isinstance(self.status, tuple):
            return self.status
        return (self.status,)

    def alive_moment(self) -> datetime | None:
        """The time a fact must not be expired at to pass (``None``: no expiry condition).

        A current read (active facts, no ``believed_at``) uses now unless ``alive_at`` says;
        ``as_of`` reads need none: ``believed_until`` ends at the expiry.
        """
        if self.alive_at is not None:
            return utc(self.alive_at)
        statuses = self.statuses
        current = statuses is not None and FactStatus.ACTIVE in statuses
        if self.include_expired or self.expired_by is not None:
            return None
        if self.believed_at is not None or not current:
            return None
        return now()

    def where(self) -> Where:
        """The backend condition of this filter."""
        where: dict[str, Any] = {}
        statuses = self.statuses
        if statuses is not None:
            where["status"] = (
                statuses[0].value if len(statuses) == 1 else [s.value for s in statuses]
            )
        if self.entity_ids:
            where["entity_ids"] = list(self.entity_ids)
        if self.sources:
            where["sources"] = list(self.sources)
        if self.trust is not None:
            where["trust"] = self.trust.value
        if self.valid_during is not None:
            span = self.valid_during
            if span.end is not None:
                where["valid_from"] = TimeRange(lt=span.end)
            if span.start is not None:
                where["valid_to"] = TimeRange(gt=span.start)
        if self.covers is not None:
            where["valid_start"] = TimeRange(lt=self.covers.end or LATEST)
            where["valid_end"] = TimeRange(gt=self.covers.start or EARLIEST)
        if self.believed_at is not None:
            where["recorded_at"] = TimeRange(lte=self.believed_at)
            where["believed_until"] = TimeRange(gt=self.believed_at)
        if self.stated_during is not None and (self.stated_after or self.stated_before):
            raise InputError("give stated_during or stated_after/stated_before, not both")
        if self.stated_during is not None:
            span = self.stated_during
            where["stated_at"] = TimeRange(gte=span.start, lt=span.end)
        elif self.stated_after is not None or self.stated_before is not None:
            where["stated_at"] = TimeRange(gt=self.stated_after, lt=self.stated_before)
        if self.timed:
            where["precision"] = [p.value for p in Precision]
        if self.revised_after is not None:
            where["revised_at"] = TimeRange(gt=self.revised_after)
        if self.claims:
            where["claims"] = list(self.claims)
        alive = self.alive_moment()
        if alive is not None:
            where[EXPIRES] = TimeRange(gt=alive)
        elif self.expired_by is not None:
            where[EXPIRES] = TimeRange(lte=utc(self.expired_by))
        for key, wanted in self.metadata:
            where[f"metadata.{key}"] = list(wanted) if isinstance(wanted, tuple) else wanted
        return where

    def admits(self, fact: Fact) -> bool:
        """Whether ``fact`` passes the status, trust, time, expiry and metadata conditions.

        For results found by an index that does not filter on those (the ``boolean`` path's).
        """
        statuses = self.statuses
        if statuses is not None and fact.status not in statuses:
            return False
        if self.trust is not None and fact.trust is not self.trust:
            return False
        if self.believed_at is not None:
            until = fact.believed_until or LATEST
            if not (fact.recorded_at <= self.believed_at < until):
                return False
        if self.covers is not None:
            start, end = fact.valid_from or EARLIEST, fact.valid_to or LATEST
            if not (start < (self.covers.end or LATEST) and end > (self.covers.start or EARLIEST)):
                return False
        alive = self.alive_moment()
        if alive is not None and fact.expires_at is not None and fact.expires_at <= alive:
            return False
        if self.expired_by is not None and not (
            fact.expires_at is not None and fact.expires_at <= utc(self.expired_by)
        ):
            return False
        return matches(fact.metadata, self.metadata)


def is_current(fact: Fact, at: datetime | None = None) -> bool:
    """Whether ``fact`` is a current belief at ``at`` (default now): active and not expired."""
    if fact.status is not FactStatus.ACTIVE:
        return False
    return fact.expires_at is None or fact.expires_at > (utc(at) if at is not None else now())


def metadata_indexes(facts: Sequence[Fact]) -> dict[str, str]:
    """The payload index each metadata key of ``facts`` filters by: keyword or integer.

    A key's first string or integer value decides (lists count by their items); other values
    (floats, objects) are filtered without an index.
    """
    found: dict[str, str] = {}
    for fact in facts:
        for key, value in fact.metadata.items():
            field = f"metadata.{key}"
            if field in found:
                continue
            first = value[0] if isinstance(value, list) and value else value
            if isinstance(first, str):
                found[field] = "keyword"
            elif isinstance(first, int) and not isinstance(first, bool):
                found[field] = "integer"
    return found
