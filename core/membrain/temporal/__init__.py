"""Time annotations: the ``[raw::resolved]`` wire format and a deterministic English resolver.

:mod:`membrain.temporal.annotation` parses and writes annotations; :mod:`membrain.temporal.resolver`
turns English time expressions into spans against a message's timestamp;
:mod:`membrain.temporal.check` compares the two, and makes message text inert.
"""

from membrain.temporal.annotation import (
    Annotation,
    find_annotations,
    format_annotation,
    format_resolved,
    parse_resolved,
    plain_text,
)
from membrain.temporal.check import check_times, inert
from membrain.temporal.resolver import TimeMatch, annotate, find_times, resolve

__all__ = [
    "Annotation",
    "TimeMatch",
    "annotate",
    "check_times",
    "find_annotations",
    "find_times",
    "format_annotation",
    "format_resolved",
    "inert",
    "parse_resolved",
    "plain_text",
    "resolve",
]
