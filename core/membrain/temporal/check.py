"""Checking a fact's time annotations against the resolver, at the time they were stated.

Whoever wrote a ``[raw::resolved]`` annotation (a model, a custom extractor, a person), the
deterministic resolver reads ``raw`` at the message time too; :func:`check_times` compares the
two. A resolved time that does not overlap the resolver's reading is a contradiction: the fact
is kept but disputed, never silently trusted. Text whose markup a user typed never gets here as
markup: :func:`inert` turns message text into plain data before extraction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from membrain.api.models import TimeCheck, TimeSpan
from membrain.temporal.annotation import Annotation, plain_text
from membrain.temporal.resolver import resolve

__all__ = ["check_times", "inert", "overlaps"]

_EARLIEST = datetime.min.replace(tzinfo=UTC)
_MARKUP = str.maketrans({"[": "(", "]": ")"})


def overlaps(a: TimeSpan, b: TimeSpan) -> bool:
    """Whether two spans share a moment (an open end reaches as far as it can)."""
    a_start, b_start = a.start or _EARLIEST, b.start or _EARLIEST
    return (b.end is None or a_start < b.end) and (a.end is None or b_start < a.end)


def check_times(
    annotations: Sequence[Annotation], stated_at: datetime
) -> tuple[TimeCheck | None, list[tuple[Annotation, TimeSpan]]]:
    """How ``annotations`` compare with the resolver at ``stated_at``, and the contradictions.

    Returns ``None`` for a fact without annotations, :attr:`TimeCheck.AGREES` when every one
    the resolver reads overlaps its reading, :attr:`TimeCheck.UNCHECKED` when some cannot be
    read and none contradicts, :attr:`TimeCheck.CONTRADICTS` otherwise, with each contradicting
    annotation and the resolver's span.

    Example:
        >>> from membrain.temporal import find_annotations
        >>> said = datetime(2024, 3, 15, tzinfo=UTC)
        >>> check_times(find_annotations("[Sara] left [yesterday::2024-03-14]."), said)[0]
        <TimeCheck.AGREES: 'agrees'>
        >>> check_times(find_annotations("[Sara] left [yesterday::1999-01-01]."), said)[0]
        <TimeCheck.CONTRADICTS: 'contradicts'>
    """
    if not annotations:
        return None, []
    check = TimeCheck.AGREES
    contradictions: list[tuple[Annotation, TimeSpan]] = []
    for annotation in annotations:
        expected = resolve(annotation.raw, stated_at)
        if expected is None:
            check = TimeCheck.UNCHECKED if check is TimeCheck.AGREES else check
        elif not overlaps(expected, annotation.span):
            check = TimeCheck.CONTRADICTS
            contradictions.append((annotation, expected))
    return check, contradictions


def inert(text: str) -> str:
    """Message text as data: markup someone typed is read as the words it shows.

    A typed annotation keeps its raw words only (``[yesterday::1999-01-01]`` is "yesterday",
    which the extractor then resolves itself), a typed ref its name, and any bracket left
    becomes a parenthesis, so nothing typed can pass for an entity ref or a time annotation.

    Example:
        >>> inert("I met Bob [yesterday::1999-01-01] [sic] :) [")
        'I met Bob yesterday sic :) ('
    """
    return plain_text(text).translate(_MARKUP).replace("::", ": ")
