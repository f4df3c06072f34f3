"""Value checks the records share: times as aware UTC datetimes, text as valid Unicode, JSON bounds.

:mod:`membrain.api.models` re-exports them; every input that reaches a record passes through them,
so a bad value is an :class:`~membrain.api.errors.InputError`, never an ``OverflowError`` or a
``UnicodeEncodeError`` from deep inside a write.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator

from membrain.api.errors import InputError

__all__ = [
    "MAX_INTEGER",
    "MAX_JSON_DEPTH",
    "MAX_MESSAGE_CHARS",
    "MAX_QUESTION_CHARS",
    "MAX_REASON_CHARS",
    "UtcDatetime",
    "bounded_text",
    "check_json",
    "json_depth",
    "loads_json",
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

MAX_JSON_DEPTH = 32
"""The deepest nesting of caller-given JSON (metadata, filters, event details, item values).

An object or an array is one level: ``{"a": 1}`` is 1 deep, ``{"a": [1]}`` 2. The storage engine
cannot read back a record nested past about 120 levels; the bound keeps every record far from it.
"""

MAX_INTEGER = 2**63 - 1
"""The largest integer caller-given JSON may hold (and ``-MAX_INTEGER - 1`` the smallest)."""


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


def json_depth(value: object, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply ``value``'s objects and arrays nest, counted up to ``limit + 1`` at most.

    Iterative, so a value nested past the interpreter's recursion limit is measured too.

    Example:
        >>> json_depth({"a": [1, {"b": 2}]})
        3
    """
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        pending.extend((child, depth + 1) for child in children)
    return deepest


def check_json(value: object, what: str, *, any_integer: bool = False) -> None:
    """Refuse caller-given JSON that no record may hold: too deep, or an integer past 64 bits.

    Args:
        value: The JSON value (objects, arrays, strings, numbers).
        what: What it is, for the error.
        any_integer: Accept integers of any size (a value that never reaches the index).

    Raises:
        InputError: nested deeper than :data:`MAX_JSON_DEPTH`, or an integer outside the
            signed 64-bit range; the message names ``what``.
    """
    if json_depth(value) > MAX_JSON_DEPTH:
        raise InputError(f"{what}: nested deeper than {MAX_JSON_DEPTH} levels")
    if any_integer:
        return
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif isinstance(item, int) and not -MAX_INTEGER - 1 <= item <= MAX_INTEGER:
            raise InputError(
                f"{what}: an integer outside the signed 64-bit range ({item.bit_length()} bits)"
            )


def loads_json(text: str | bytes, what: str) -> Any:
    """``text`` parsed as JSON and checked by :func:`check_json`.

    Raises:
        InputError: not JSON, or JSON :func:`check_json` refuses.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise InputError(f"{what}: nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # also a number too long to read
        raise InputError(f"{what}: not valid JSON ({str(exc).split(';')[0]:.120})") from None
    check_json(value, what)
    return value
