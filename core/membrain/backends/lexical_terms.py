"""The time terms of the lexical index: which ``year`` / ``month`` / ``day`` a fact covers.

The ``boolean`` path matches times as terms: a fact that happened in May 2023 holds ``year:2023``
and ``month:2023-05``. Long spans are capped (see :func:`time_keys`) so one fact never floods the
index with thousands of terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from membrain.api.models import Fact, Precision, TimeSpan

__all__ = ["MAX_DAYS", "MAX_MONTHS", "MAX_YEARS", "TimeKeys", "fact_keys", "time_keys"]

MAX_DAYS = 31
"""Spans of day precision up to this many days list their days."""
MAX_MONTHS = 24
"""Spans up to this many months list their months."""
MAX_YEARS = 100
"""Spans up to this many years list their years; longer ones only their first and last."""

_EPSILON = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class TimeKeys:
    """The ``year`` / ``month`` / ``day`` terms of a time span."""

    years: tuple[str, ...] = ()
    months: tuple[str, ...] = ()
    days: tuple[str, ...] = ()


def _point_keys(point: datetime, precision: Precision) -> TimeKeys:
    year = f"{point.year:04d}"
    if precision is Precision.YEAR:
        return TimeKeys(years=(year,))
    month = f"{year}-{point.month:02d}"
    if precision is Precision.MONTH:
        return TimeKeys(years=(year,), months=(month,))
    return TimeKeys(years=(year,), months=(month,), days=(f"{month}-{point.day:02d}",))


def time_keys(span: TimeSpan) -> TimeKeys:
    """The terms a span covers, capped for long spans.

    Every covered year is listed (first and last only beyond :data:`MAX_YEARS`), every covered
    month up to :data:`MAX_MONTHS`, and the days of spans of day precision up to
    :data:`MAX_DAYS` days. An open interval ("since May 2023") lists its known endpoint at its
    precision (``/2020``, "up to 2020", lists 2020: the last unit it covers).

    Example:
        >>> from membrain.temporal import parse_resolved
        >>> time_keys(parse_resolved("2023-04/2023-05"))
        TimeKeys(years=('2023',), months=('2023-04', '2023-05'), days=())
    """
    if span.start is None:
        assert span.end is not None  # a TimeSpan has at least one endpoint
        return _point_keys(span.end - _EPSILON, span.precision)
    if span.end is None:
        return _point_keys(span.start, span.precision)
    first, last = span.start, span.end - _EPSILON
    if last.year - first.year + 1 <= MAX_YEARS:
        years = tuple(f"{y:04d}" for y in range(first.year, last.year + 1))
    else:
        years = (f"{first.year:04d}", f"{last.year:04d}")
    months: tuple[str, ...] = ()
    count = (last.year - first.year) * 12 + last.month - first.month + 1
    if count <= MAX_MONTHS:
        index = first.year * 12 + first.month - 1
        months = tuple(f"{i // 12:04d}-{i % 12 + 1:02d}" for i in range(index, index + count))
    days: tuple[str, ...] = ()
    span_days = (last.date() - first.date()).days + 1
    if span.precision in (Precision.DAY, Precision.DATETIME) and span_days <= MAX_DAYS:
        days = tuple((first.date() + timedelta(days=i)).isoformat() for i in range(span_days))
    return TimeKeys(years=years, months=months, days=days)


def fact_keys(fact: Fact) -> TimeKeys:
    """The terms of every time of ``fact``, each listed once."""
    years: dict[str, None] = {}
    months: dict[str, None] = {}
    days: dict[str, None] = {}
    for span in fact.times:
        keys = time_keys(span)
        years.update(dict.fromkeys(keys.years))
        months.update(dict.fromkeys(keys.months))
        days.update(dict.fromkeys(keys.days))
    return TimeKeys(tuple(years), tuple(months), tuple(days))
