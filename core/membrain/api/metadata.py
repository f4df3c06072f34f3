"""Metadata: the caller's JSON object on a message, carried to the facts extracted from it.

``{"project": "apollo", "channel": "support"}`` on a message is stored with it, copied to every
fact that cites it (several cited messages: their objects merged, the first cited message's value
kept on a clash), returned in hits and on :attr:`Fact.metadata`, and filterable: ``filters=``
on search, context and the fact listing takes ``{"project": "apollo"}`` (equals) or
``{"project": {"in": ["apollo", "zeus"]}}`` (one of), every key's condition holding. A list
value matches when one of its items does: ``{"tags": ["x", "y"]}`` meets ``{"tags": "x"}``.

Metadata and filters nest at most :data:`~membrain.api.checks.MAX_JSON_DEPTH` levels and hold
integers of at most 64 bits (:func:`~membrain.api.checks.check_json`): every surface builds its
records and filters through this module, so a deeper value is refused before anything is stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from membrain.api.checks import check_json, is_unicode
from membrain.api.errors import InputError

__all__ = [
    "MAX_METADATA_BYTES",
    "FilterValue",
    "MetadataFilter",
    "check_metadata",
    "matches",
    "merged",
    "metadata_filter",
]

MAX_METADATA_BYTES = 16_384
"""The largest metadata object, as compact JSON."""
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}\Z")

FilterValue = str | int | tuple[str | int, ...]
"""What a key must equal, or (a tuple) be one of."""
MetadataFilter = tuple[tuple[str, FilterValue], ...]
"""Key conditions, every one holding (sorted by key, so equal filters compare equal)."""


def check_metadata(value: object) -> dict[str, Any]:
    """``value`` as stored metadata: a JSON object with plain keys, at most 16 KB.

    Raises:
        InputError: not a mapping, a key not made of letters, digits, ``_`` and ``-`` (1-64),
            a value JSON cannot hold, nested too deeply, or too large.
    """
    if value is None or (isinstance(value, dict) and not value):
        return {}  # most records carry none: nothing to check
    if not isinstance(value, Mapping):
        raise InputError(f"metadata must be a JSON object, got {type(value).__name__}")
    for key in value:
        _check_key(key)
    check_json(value, "metadata")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InputError(f"metadata must be JSON: {exc}") from None
    if not is_unicode(text):
        raise InputError("metadata is not valid Unicode text (a lone surrogate?)")
    if len(text.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InputError(f"metadata is larger than {MAX_METADATA_BYTES:,} bytes as JSON")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def metadata_filter(filters: Mapping[str, object] | None) -> MetadataFilter:
    """``filters`` as key conditions: ``{"k": v}`` (equals) or ``{"k": {"in": [v, ...]}}``.

    Raises:
        InputError: a key that metadata cannot have, or a value that is not a string or an
            integer (or a non-empty list of them under ``"in"``).
    """
    if not filters:
        return ()
    if not isinstance(filters, Mapping):
        raise InputError(f"filters must be an object, got {type(filters).__name__}")
    check_json(filters, "filters")
    found: list[tuple[str, FilterValue]] = []
    for key, wanted in filters.items():
        _check_key(key)
        if isinstance(wanted, Mapping):
            if set(wanted) != {"in"} or isinstance(wanted["in"], str | bytes):
                raise InputError(f'filter on {key!r}: give a value or {{"in": [values]}}')
            values = tuple(_value(key, v) for v in wanted["in"])
            if not values:
                raise InputError(f'filter on {key!r}: "in" needs at least one value')
            found.append((key, values))
        else:
            found.append((key, _value(key, wanted)))
    return tuple(sorted(found))


def matches(metadata: Mapping[str, Any], conditions: MetadataFilter) -> bool:
    """Whether ``metadata`` meets every condition (a list value: when one of its items does)."""
    for key, wanted in conditions:
        if key not in metadata:
            return False
        value = metadata[key]
        accepted = wanted if isinstance(wanted, tuple) else (wanted,)
        values = value if isinstance(value, list) else [value]
        if not any(_plain(v) and v in accepted for v in values):
            return False
    return True


def _plain(value: object) -> bool:
    """Whether a filter can match ``value``: a string or an integer (not a boolean)."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def merged(objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The objects as one, the first value of a key kept."""
    out: dict[str, Any] = {}
    for item in objects:
        for key, value in item.items():
            out.setdefault(key, value)
    return out


def _check_key(key: object) -> None:
    if not isinstance(key, str) or not _KEY.match(key):
        raise InputError(
            f"metadata key {key!r:.80}: 1-64 letters, digits, '_' or '-' (no dot, no space)"
        )


def _value(key: str, value: object) -> str | int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"filter on {key!r}: values are strings or integers, got {value!r:.80}")
    return value
