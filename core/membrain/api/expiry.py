"""When messages and the facts extracted from them expire.

An add (or an update) may give its messages an expiry: ``expires_at`` (an aware datetime) or
``ttl`` (a duration from the add). Otherwise the memory's :class:`ExpiryRule` list decides, by
the message's metadata: the first rule whose ``metadata`` the message's metadata holds gives it
``timestamp + after``. A fact expires with the latest expiry of the messages it cites when every
one of them expires, never when one of them does not (:func:`fact_expiry`).

An expired fact leaves every current read at once (search, context, ``facts()``, the profile);
``as_of`` reads before its expiry, ``history``, ``get`` and the audit still show it. The sweep
(``Memory.expire``, also run by ``apply_retention``) marks it ``expired``; retention erases the
facts and messages expired longer ago than the grace period.

Example:
    >>> from datetime import timedelta
    >>> rule = ExpiryRule(metadata={"kind": "otp"}, after=timedelta(minutes=10))
    >>> rule.after.total_seconds()
    600.0
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from membrain.api.checks import now, utc
from membrain.api.errors import ConfigurationError, InputError
from membrain.api.metadata import check_metadata
from membrain.api.models import Fact, Message, StoredMessage

__all__ = [
    "DEFAULT_EXPIRY_GRACE",
    "ExpiryRule",
    "ExpiresAt",
    "Ttl",
    "aware_expiry",
    "expiry_rules",
    "one_expiry",
    "fact_expiry",
    "has_expired",
    "message_expiry",
    "positive_ttl",
]

DEFAULT_EXPIRY_GRACE = timedelta(days=7)
"""How long expired facts and messages are kept (for audit) before retention erases them."""


def positive_ttl(value: object) -> timedelta | None:
    """``value`` (a timedelta, seconds, or an ISO 8601 duration) as a positive timedelta.

    Raises:
        InputError: it is no duration, or not positive.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"ttl must be a duration or seconds, got {value!r}")
    if isinstance(value, int | float):
        try:
            value = timedelta(seconds=value)
        except (OverflowError, ValueError):
            raise InputError(f"ttl {value!r} seconds is out of range") from None
    if isinstance(value, str):
        with suppress(ValueError, OverflowError):
            value = timedelta(seconds=float(value))  # seconds, as a command line gives them
    if isinstance(value, str):
        try:
            value = TypeAdapter(timedelta).validate_python(value)
        except ValidationError:
            raise InputError(f"ttl {value!r} is no duration (seconds or ISO 8601)") from None
    if not isinstance(value, timedelta):
        raise InputError(f"ttl must be a duration or seconds, got {type(value).__name__}")
    if value <= timedelta(0):
        raise InputError(f"ttl must be positive, got {value}")
    return value


def aware_expiry(value: object) -> datetime | None:
    """``value`` as an aware UTC datetime (an ISO 8601 string is read).

    Raises:
        InputError: it is no datetime, or a naive one (an expiry must say its time zone).
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"expires_at {value!r:.60} is no ISO 8601 datetime") from None
    if not isinstance(value, datetime):
        raise InputError(f"expires_at must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InputError("expires_at must be timezone-aware (a naive datetime is ambiguous)")
    return utc(value)


Ttl = Annotated[
    timedelta | None,
    BeforeValidator(positive_ttl),
    Field(description="How long after this call the messages and their facts expire."),
]
ExpiresAt = Annotated[
    datetime | None,
    BeforeValidator(aware_expiry),
    Field(description="When the messages and their facts expire (an aware datetime)."),
]


def one_expiry(expires_at: datetime | None, ttl: timedelta | None) -> None:
    """Refuse a call that gives both ``expires_at`` and ``ttl``.

    Raises:
        InputError: both are given.
    """
    if expires_at is not None and ttl is not None:
        raise InputError("give expires_at or ttl, not both")


class ExpiryRule(BaseModel):
    """Messages whose metadata holds every item of ``metadata`` expire ``after`` their time.

    ``after`` counts from the message's ``timestamp``; an empty ``metadata`` matches every
    message. Set on a memory (``Memory(expiry=[...])``, ``MEMBRAIN_EXPIRY``); an add's own
    ``expires_at`` or ``ttl`` wins over the rules.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    metadata: dict[str, Any] = Field(default_factory=dict)
    after: timedelta

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata(cls, value: object) -> object:
        return check_metadata(value)

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, value: object) -> object:
        return positive_ttl(value)

    def matches(self, message: Message) -> bool:
        """Whether this rule applies to ``message``."""
        held = message.metadata
        return all(key in held and held[key] == want for key, want in self.metadata.items())


def expiry_rules(given: object) -> tuple[ExpiryRule, ...]:
    """``given`` (a rule, a list of rules or of their dicts, or ``None``) as a tuple of rules.

    Raises:
        ConfigurationError: something else, or a rule that does not validate.
    """
    if given is None:
        return ()
    items = [given] if isinstance(given, ExpiryRule | dict) else given
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise ConfigurationError(f"expiry takes ExpiryRule objects, got {type(given).__name__}")
    try:
        return tuple(ExpiryRule.model_validate(item) for item in items)
    except (ValidationError, InputError) as exc:
        raise ConfigurationError(f"invalid expiry rule: {exc}") from None


def message_expiry(
    message: Message,
    *,
    at: datetime,
    expires_at: datetime | None = None,
    ttl: timedelta | None = None,
    rules: Sequence[ExpiryRule] = (),
) -> datetime | None:
    """When ``message``, added at ``at``, expires (``None``: never).

    The call's ``expires_at`` or ``ttl`` (from ``at``) first, else the first matching rule.
    """
    if expires_at is not None:
        return utc(expires_at)
    if ttl is not None:
        return _plus(at, ttl)
    for rule in rules:
        if rule.matches(message):
            return _plus(message.timestamp, rule.after)
    return None


def fact_expiry(sources: Iterable[datetime | None]) -> datetime | None:
    """The expiry of a fact citing messages of these expiries: the latest, if all expire."""
    ends = list(sources)
    if not ends or any(end is None for end in ends):
        return None
    return max(end for end in ends if end is not None)


def has_expired(record: Fact | StoredMessage, at: datetime | None = None) -> bool:
    """Whether a fact or message is past its expiry at ``at`` (default now), whatever its status."""
    moment = utc(at) if at is not None else now()
    return record.expires_at is not None and record.expires_at <= moment


def _plus(moment: datetime, span: timedelta) -> datetime:
    try:
        return utc(moment) + span
    except OverflowError:
        raise InputError(f"{moment.isoformat()} plus {span} is after year 9999") from None
