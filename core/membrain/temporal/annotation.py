"""The ``[raw::resolved]`` time annotation: grammar, parsing and writing.

A determinate time expression in a fact is written ``[raw::resolved]``: ``raw`` is the expression
as the speaker wrote it and ``resolved`` an ISO 8601 value. The resolved part is one of

==========================  ===========  ==============================================
written                     precision    span (half-open, UTC)
==========================  ===========  ==============================================
``2022``                    year         the whole year
``2023-10``                 month        the whole month
``2023-05-07``              day          the whole (floating) day, midnight to midnight UTC
``2023-05-08T21:30Z``       datetime     one minute; one second when seconds are written
                                         non-zero (``T21:30:15Z``); an offset is converted
                                         to UTC and a value without one is taken as UTC
``a/b``, ``a/``, ``/b``     finest end   from the start of ``a`` to the end of ``b``
==========================  ===========  ==============================================

Calendar values (year, month, day) are *floating*: they name a calendar date, stored as midnight
UTC of that date, whatever the speaker's zone. In an interval the end is written as the last unit
included, so ``2023-03/2023-05`` is March to May inclusive (it ends 2023-06-01).

Entity refs share the bracket syntax (``[Tom]``) and may be nested inside an annotation
(``[before [Tom]'s wedding::/2023-05-07]``); an annotation is a bracket whose top level holds
``::``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

from dateutil.relativedelta import relativedelta

from membrain.api.errors import AnnotationError, InputError
from membrain.api.models import Precision, TimeSpan

__all__ = [
    "Annotation",
    "find_annotations",
    "format_annotation",
    "format_resolved",
    "parse_resolved",
    "plain_text",
]

_ORDER = {Precision.YEAR: 0, Precision.MONTH: 1, Precision.DAY: 2, Precision.DATETIME: 3}

_POINT = re.compile(
    r"""
    (?P<year>\d{4})
    (?:-(?P<month>\d{2})
      (?:-(?P<day>\d{2})
        (?:[Tt ](?P<hour>\d{2}):(?P<minute>\d{2})
          (?::(?P<second>\d{2})(?:[.,](?P<fraction>\d+))?)?
          (?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?
        )?
      )?
    )?
    """,
    re.VERBOSE,
)
_TOKENS = re.compile(r"\[|\]|::(?!:)")


@dataclass(frozen=True, slots=True)
class _Point:
    """One written endpoint: where it starts, its grain and where its unit ends."""

    start: datetime
    end: datetime
    precision: Precision


@dataclass(frozen=True, slots=True)
class Annotation:
    """One ``[raw::resolved]`` annotation found in a text.

    Attributes:
        raw: The expression as written, between ``[`` and ``::`` (entity refs kept).
        resolved: The resolved part as written, without surrounding whitespace.
        span: The parsed ``resolved`` part.
        start: Offset of the opening ``[`` in the text.
        end: Offset just past the closing ``]``.
    """

    raw: str
    resolved: str
    span: TimeSpan
    start: int
    end: int


def _fail(value: str, reason: str) -> AnnotationError:
    return AnnotationError(f"invalid resolved time {value!r}: {reason}")


def _parse_point(text: str, value: str) -> _Point:
    match = _POINT.fullmatch(text)
    if match is None:
        raise _fail(value, f"{text!r} is not YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z]")
    year = int(match["year"])
    month = int(match["month"] or 1)
    day = int(match["day"] or 1)
    if year < 1:
        raise _fail(value, "year 0000 does not exist")
    if not 1 <= month <= 12:
        raise _fail(value, f"month {month:02d} is out of range")
    try:
        date_start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        raise _fail(value, f"day {day:02d} does not exist in {year:04d}-{month:02d}") from None
    try:
        if match["hour"] is None:
            if match["day"] is not None:
                return _Point(date_start, date_start + timedelta(days=1), Precision.DAY)
            if match["month"] is not None:
                return _Point(date_start, date_start + relativedelta(months=1), Precision.MONTH)
            return _Point(date_start, date_start.replace(year=year + 1), Precision.YEAR)
    except (OverflowError, ValueError):
        raise _fail(value, "the value is out of the supported range") from None
    hour, minute = int(match["hour"]), int(match["minute"])
    second = int(match["second"] or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise _fail(value, f"{hour:02d}:{minute:02d}:{second:02d} is not a time of day")
    if match["fraction"] is not None and int(match["fraction"]) != 0:
        raise _fail(value, "fractions of a second are not supported")
    zone = UTC
    if match["zone"] is not None and match["zone"] not in "Zz":
        digits = match["zone"][1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        if offset >= timedelta(hours=24) or int(digits[2:] or 0) > 59:
            raise _fail(value, f"offset {match['zone']} is out of range")
        zone = timezone(-offset if match["zone"][0] == "-" else offset)
    try:
        local = datetime(year, month, day, hour, minute, second, tzinfo=zone)
        start = local.astimezone(UTC)
        unit = timedelta(seconds=1) if second else timedelta(minutes=1)
        return _Point(start, start + unit, Precision.DATETIME)
    except (OverflowError, ValueError):
        raise _fail(value, "the value is out of the supported range") from None


def parse_resolved(value: str) -> TimeSpan:
    """Parse the resolved (ISO 8601) part of an annotation.

    Args:
        value: ``2022``, ``2023-10``, ``2023-05-07``, ``2023-05-08T21:30Z`` (an offset such as
            ``+02:00`` is converted to UTC; no offset means UTC), or an interval ``a/b``,
            ``a/`` or ``/b`` of those. Surrounding whitespace is ignored.

    Returns:
        The half-open UTC span. A single value covers its whole unit; an interval runs from the
        start of ``a`` to the end of ``b`` and its precision is the finest written endpoint.

    Raises:
        AnnotationError: The value is empty, not one of the forms above, names a date or time
            that does not exist, or ends before it starts.

    Example:
        >>> parse_resolved("2023-03/2023-05").end.isoformat()
        '2023-06-01T00:00:00+00:00'
    """
    if not isinstance(value, str):
        raise AnnotationError(f"the resolved time must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise _fail(value, "it is empty")
    if text.count("/") > 1:
        raise _fail(value, "an interval has exactly one '/'")
    if "/" not in text:
        point = _parse_point(text, value)
        return TimeSpan(start=point.start, end=point.end, precision=point.precision)
    left, right = (part.strip() for part in text.split("/"))
    if not left and not right:
        raise _fail(value, "an interval needs at least one endpoint")
    first = _parse_point(left, value) if left else None
    last = _parse_point(right, value) if right else None
    ends = [p for p in (first, last) if p is not None]
    precision = max((p.precision for p in ends), key=_ORDER.__getitem__)
    start = first.start if first else None
    end = last.end if last else None
    if start is not None and end is not None and end <= start:
        raise _fail(value, "the interval ends before it starts")
    try:
        return TimeSpan(start=start, end=end, precision=precision, interval=True)
    except InputError as exc:  # pragma: no cover - the checks above mirror TimeSpan's
        raise _fail(value, str(exc)) from exc


def _step(precision: Precision, fine: bool) -> timedelta | relativedelta:
    if precision is Precision.YEAR:
        return relativedelta(years=1)
    if precision is Precision.MONTH:
        return relativedelta(months=1)
    if precision is Precision.DAY:
        return timedelta(days=1)
    return timedelta(seconds=1) if fine else timedelta(minutes=1)


def format_moment(moment: datetime, precision: Precision, *, seconds: bool | None = None) -> str:
    """``moment`` in ISO 8601 at ``precision``: ``2023``, ``2023-05``, ``2023-05-07``, ``…T21:30Z``.

    Seconds are written when ``seconds`` is true, or, by default, when they are not zero.
    """
    if precision is Precision.YEAR:
        return f"{moment.year:04d}"
    if precision is Precision.MONTH:
        return f"{moment.year:04d}-{moment.month:02d}"
    day = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    if precision is Precision.DAY:
        return day
    clock = f"{moment.hour:02d}:{moment.minute:02d}"
    if seconds or (seconds is None and moment.second):
        clock += f":{moment.second:02d}"
    return f"{day}T{clock}Z"


def _aligned(moment: datetime, precision: Precision) -> bool:
    if moment.microsecond:
        return False
    if precision is Precision.DATETIME:
        return True
    if moment.hour or moment.minute or moment.second:
        return False
    if precision is Precision.DAY:
        return True
    return moment.day == 1 and (precision is Precision.MONTH or moment.month == 1)


def _unwritable(span: TimeSpan, why: str) -> AnnotationError:
    return AnnotationError(f"cannot write {span!r} as an ISO annotation: {why}")


def format_resolved(span: TimeSpan) -> str:
    """Write a span in the canonical resolved form (the inverse of :func:`parse_resolved`).

    Datetimes are written in UTC as ``YYYY-MM-DDTHH:MMZ`` (``:SS`` only when non-zero). Interval
    endpoints are written at the span's precision, the end as the last unit it includes.

    Args:
        span: The span to write.

    Returns:
        The canonical text, e.g. ``2023-05-07``, ``2023-03/2023-05`` or ``2020/``.

    Raises:
        AnnotationError: The span has no exact written form, e.g. a single value that is not one
            whole unit, or an endpoint that does not fall on its precision's boundary.

    Example:
        >>> format_resolved(parse_resolved("2023-05-08T23:30+02:00"))
        '2023-05-08T21:30Z'
    """
    precision = span.precision
    start = span.start.astimezone(UTC) if span.start is not None else None
    end = span.end.astimezone(UTC) if span.end is not None else None
    if start is not None and not _aligned(start, precision):
        raise _unwritable(span, f"its start is not on a {precision.value} boundary")
    if end is not None and not _aligned(end, precision):
        raise _unwritable(span, f"its end is not on a {precision.value} boundary")
    if not span.interval:
        assert start is not None and end is not None  # guaranteed by TimeSpan
        if start + _step(precision, bool(start.second)) != end:
            raise _unwritable(span, f"a single value spans exactly one {precision.value}")
        return format_moment(start, precision)
    first = format_moment(start, precision) if start is not None else ""
    last = ""
    if end is not None:
        if precision is Precision.DATETIME and end.second:
            moment = end - timedelta(seconds=1)
            if not moment.second:
                raise _unwritable(span, "its end falls one second after a whole minute")
        else:
            moment = end - _step(precision, False)
        last = format_moment(moment, precision)
    return f"{first}/{last}"


def format_annotation(raw: str, span: TimeSpan) -> str:
    """Write ``[raw::resolved]`` for an expression and its span.

    Args:
        raw: The expression as written; it must not contain ``]`` or ``::``.
        span: Its resolved span.

    Returns:
        The annotation text.

    Raises:
        AnnotationError: ``raw`` is empty or would break the bracket syntax, or the span has no
            exact written form.

    Example:
        >>> format_annotation("yesterday", parse_resolved("2023-05-07"))
        '[yesterday::2023-05-07]'
    """
    if not raw.strip():
        raise AnnotationError("an annotation needs a non-empty raw expression")
    if "::" in raw or raw.count("[") != raw.count("]") or raw.endswith(":"):
        raise AnnotationError(f"raw expression {raw!r} would break the [raw::resolved] syntax")
    return f"[{raw}::{format_resolved(span)}]"


@dataclass(slots=True)
class _Bracket:
    open: int
    close: int = -1
    separator: int = -1  # last top-level "::", or -1


def _brackets(text: str) -> list[_Bracket]:
    """Every balanced ``[...]`` pair, with the position of its last top-level ``::``."""
    if "[" not in text:
        return []
    stack: list[_Bracket] = []
    pairs: list[_Bracket] = []
    for token in _TOKENS.finditer(text):
        kind = token.group()
        if kind == "[":
            stack.append(_Bracket(token.start()))
        elif kind == "::":
            if stack:
                stack[-1].separator = token.start()
        elif stack:
            bracket = stack.pop()
            bracket.close = token.start()
            if bracket.separator >= 0 and not text[bracket.open + 1 : bracket.separator].strip():
                bracket.separator = -1  # "[::1]" is not an annotation: it has no expression
            pairs.append(bracket)
    pairs.sort(key=lambda b: b.open)
    return pairs


def find_annotations(text: str, strict: bool = True) -> list[Annotation]:
    """Every ``[raw::resolved]`` annotation in a fact text, in order of position.

    Brackets without a top-level ``::`` are entity refs and are skipped; refs nested in the raw
    part are kept verbatim in :attr:`Annotation.raw`.

    Args:
        text: The fact text.
        strict: When true (the default) a malformed resolved part raises; when false it is
            skipped.

    Returns:
        The annotations, ordered by their opening bracket.

    Raises:
        AnnotationError: ``strict`` is true and a resolved part does not parse; the message names
            the annotation.

    Example:
        >>> [a.resolved for a in find_annotations("[Tom] left [in 2022::2022].")]
        ['2022']
    """
    found: list[Annotation] = []
    for bracket in _brackets(text):
        if bracket.separator < 0:
            continue
        resolved = text[bracket.separator + 2 : bracket.close].strip()
        try:
            span = parse_resolved(resolved)
        except AnnotationError as exc:
            if strict:
                whole = text[bracket.open : bracket.close + 1]
                raise AnnotationError(f"in annotation {whole!r}: {exc}") from exc
            continue
        found.append(
            Annotation(
                raw=text[bracket.open + 1 : bracket.separator],
                resolved=resolved,
                span=span,
                start=bracket.open,
                end=bracket.close + 1,
            )
        )
    return found


def bracket_regions(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` offsets of every outermost balanced bracket in ``text``."""
    regions: list[tuple[int, int]] = []
    for bracket in _brackets(text):
        if regions and bracket.open < regions[-1][1]:
            continue
        regions.append((bracket.open, bracket.close + 1))
    return regions


def plain_text(text: str) -> str:
    """The readable text: ``[raw::resolved]`` becomes ``raw`` and ``[Tom]`` becomes ``Tom``.

    Unbalanced brackets are left as they are.

    Args:
        text: A fact text with entity refs and time annotations.

    Returns:
        The text without bracket markup.

    Example:
        >>> plain_text("[Tom]'s [bakery] opened [last week::2024-03-04/2024-03-10].")
        "Tom's bakery opened last week."
    """
    pairs = _brackets(text)
    if not pairs:
        return text
    cuts: list[tuple[int, int]] = []
    for bracket in pairs:
        cuts.append((bracket.open, bracket.open + 1))
        if bracket.separator >= 0:
            cuts.append((bracket.separator, bracket.close + 1))
        else:
            cuts.append((bracket.close, bracket.close + 1))
    cuts.sort()
    pieces: list[str] = []
    position = 0
    for cut_start, cut_end in cuts:
        if cut_start >= position:
            pieces.append(text[position:cut_start])
        position = max(position, cut_end)
    pieces.append(text[position:])
    return "".join(pieces)
