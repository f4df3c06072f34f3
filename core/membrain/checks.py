"""Value checks the records share: times as aware UTC datetimes, text as valid Unicode.

:mod:`membrain.models` re-exports them; every input that reaches a record passes through them, so
a bad value is an :class:`~membrain.errors.InputError`, never an ``OverflowError`` or a
``UnicodeEncodeError`` from deep inside a write.
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator

from membrain.errors import InputError

__all__ = [
    "MAX_MESSAGE_CHARS",
    "MAX_QUESTION_CHARS",
    "MAX_REASON_CHARS",
    "UtcDatetime",
    "bounded_text",
    "is_loopback",
    "is_unicode",
    "now",
    "unicode_text",
    "utc",
]

MAX_MESSAGE_CHARS = 100_000
"""The longest message text (and, apart, image caption) a memory stores: about 25k tokens."""

MAX_QUESTION_CHARS = 8_000
"""The longest question a search, context or message search accepts."""

MAX_REASON_CHARS = 2_000
"""The longest reason or reviewer's note an audit event records."""


def utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime (naive values are taken to be UTC).

    Raises:
        InputError: ``value`` is not a datetime, or its UTC time falls outside years 1-9999.
    """
    if not isinstance(value, datetime):
        raise InputError(f"expected a datetime, got {type(value).__name__} {value!r:.60}")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InputError(f"{value.isoformat()} is outside years 1-9999 in UTC") from None


UtcDatetime = Annotated[datetime, AfterValidator(utc)]


def unicode_text(value: str, what: str) -> str:
    """``value`` when it is valid Unicode text (no lone surrogate).

    Raises:
        InputError: it is not; the message names ``what``.
    """
    if not is_unicode(value):
        raise InputError(f"{what} {value!r} is not valid Unicode text (a lone surrogate?)")
    return value


def bounded_text(value: object, what: str, limit: int) -> str:
    """``value`` when it is a string of valid Unicode of at most ``limit`` characters.

    Raises:
        InputError: it is not; the message names ``what`` and the limit.
    """
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise InputError(f"{what} has {len(value):,} characters; at most {limit:,} are accepted")
    if not is_unicode(value):
        raise InputError(f"{what} is not valid Unicode text (a lone surrogate?)")
    return value


def is_unicode(text: str) -> bool:
    """Whether ``text`` can be stored: it encodes as UTF-8 (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def now() -> datetime:
    """The current time, UTC."""
    return datetime.now(UTC)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (a name is not resolved)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
