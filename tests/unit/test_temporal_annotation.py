"""The [raw::resolved] wire format: parsing, writing, finding and stripping annotations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from dateutil.relativedelta import relativedelta
from hypothesis import given, settings
from hypothesis import strategies as st

from membrain.api.errors import AnnotationError, InputError
from membrain.api.models import Precision, TimeSpan
from membrain.temporal import (
    Annotation,
    find_annotations,
    format_annotation,
    format_resolved,
    parse_resolved,
    plain_text,
)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


# --------------------------------------------------------------------------- parse_resolved


@pytest.mark.parametrize(
    ("value", "start", "end", "precision", "interval"),
    [
        ("2022", utc(2022, 1, 1), utc(2023, 1, 1), Precision.YEAR, False),
        ("2023-10", utc(2023, 10, 1), utc(2023, 11, 1), Precision.MONTH, False),
        ("2023-12", utc(2023, 12, 1), utc(2024, 1, 1), Precision.MONTH, False),
        ("2023-05-07", utc(2023, 5, 7), utc(2023, 5, 8), Precision.DAY, False),
        ("2024-02-29", utc(2024, 2, 29), utc(2024, 3, 1), Precision.DAY, False),
        (
            "2023-05-08T21:30Z",
            utc(2023, 5, 8, 21, 30),
            utc(2023, 5, 8, 21, 31),
            Precision.DATETIME,
            False,
        ),
        (
            "2023-05-08T21:30",
            utc(2023, 5, 8, 21, 30),
            utc(2023, 5, 8, 21, 31),
            Precision.DATETIME,
            False,
        ),
        (
            "2023-05-08T21:30:15+02:00",
            utc(2023, 5, 8, 19, 30, 15),
            utc(2023, 5, 8, 19, 30, 16),
            Precision.DATETIME,
            False,
        ),
        (
            "2023-05-08T21:30:00Z",
            utc(2023, 5, 8, 21, 30),
            utc(2023, 5, 8, 21, 31),
            Precision.DATETIME,
            False,
        ),
        (
            "2023-05-08T00:30-05:00",
            utc(2023, 5, 8, 5, 30),
            utc(2023, 5, 8, 5, 31),
            Precision.DATETIME,
            False,
        ),
        (
            "2023-05-08T23:45-0130",
            utc(2023, 5, 9, 1, 15),
            utc(2023, 5, 9, 1, 16),
            Precision.DATETIME,
            False,
        ),
        ("2023-03/2023-05", utc(2023, 3, 1), utc(2023, 6, 1), Precision.MONTH, True),
        ("2024-03-04/2024-03-10", utc(2024, 3, 4), utc(2024, 3, 11), Precision.DAY, True),
        ("2022/", utc(2022, 1, 1), None, Precision.YEAR, True),
        ("/2023-05-08", None, utc(2023, 5, 9), Precision.DAY, True),
        ("2020/2023-05-07", utc(2020, 1, 1), utc(2023, 5, 8), Precision.DAY, True),
        (
            "2023-05-07/2023-05-08T10:00Z",
            utc(2023, 5, 7),
            utc(2023, 5, 8, 10, 1),
            Precision.DATETIME,
            True,
        ),
        ("2023/2023", utc(2023, 1, 1), utc(2024, 1, 1), Precision.YEAR, True),
        ("  2023-05  ", utc(2023, 5, 1), utc(2023, 6, 1), Precision.MONTH, False),
    ],
)
def test_parse_resolved(
    value: str, start: datetime | None, end: datetime | None, precision: Precision, interval: bool
) -> None:
    span = parse_resolved(value)
    assert (span.start, span.end, span.precision, span.interval) == (
        start,
        end,
        precision,
        interval,
    )


def test_parsed_datetimes_are_utc() -> None:
    span = parse_resolved("2023-05-08T21:30+02:00")
    assert span.start is not None and span.start.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "2023-13",
        "2023-00",
        "2023-02-30",
        "2023-5-7",
        "23",
        "20233",
        "0000",
        "yesterday",
        "2023-05-08T24:00Z",
        "2023-05-08T21:60Z",
        "2023-05-08T21:30:15.5Z",
        "2023-05-08T21:30+25:00",
        "2023-05-08T21:30+02:99",
        "2023-05-08 21:30 PM",
        "/",
        "2023//2024",
        "2023/2024/2025",
        "2023-05-08/2023-05-07",
        "2024/2023",
        "2023-05/2023-04-30",
        "2023-W18",
        "9999-12-31T23:59-01:00",
    ],
)
def test_parse_resolved_rejects(value: str) -> None:
    with pytest.raises(AnnotationError) as caught:
        parse_resolved(value)
    assert repr(value) in str(caught.value)


def test_annotation_error_is_an_input_error() -> None:
    with pytest.raises(InputError):
        parse_resolved("garbage")


# --------------------------------------------------------------------------- format_resolved


@pytest.mark.parametrize(
    "value",
    [
        "2022",
        "2023-10",
        "2023-05-07",
        "2023-05-08T21:30Z",
        "2023-05-08T21:30:15Z",
        "2023-03/2023-05",
        "2024-03-04/2024-03-10",
        "2022/",
        "/2023-05-08",
        "2023-05-08T09:00Z/2023-05-08T17:30Z",
        "/2023-05-08T21:30:58Z",
    ],
)
def test_format_resolved_is_canonical(value: str) -> None:
    assert format_resolved(parse_resolved(value)) == value


@pytest.mark.parametrize(
    ("value", "canonical"),
    [
        ("2023-05-08T21:30+02:00", "2023-05-08T19:30Z"),
        ("2023-05-08T21:30", "2023-05-08T21:30Z"),
        ("2023-05-08T21:30:00Z", "2023-05-08T21:30Z"),
        ("2020/2023-05-07", "2020-01-01/2023-05-07"),
        ("/2023-05-08T21:30:59Z", "/2023-05-08T21:30Z"),  # both end at 21:31:00
        (" 2023 ", "2023"),
    ],
)
def test_format_resolved_normalises(value: str, canonical: str) -> None:
    assert format_resolved(parse_resolved(value)) == canonical


@pytest.mark.parametrize(
    "span",
    [
        TimeSpan(start=utc(2023, 5, 8, 10), end=utc(2023, 5, 8, 11), precision=Precision.DATETIME),
        TimeSpan(start=utc(2023, 5, 2), end=utc(2023, 6, 2), precision=Precision.MONTH),
        TimeSpan(start=utc(2023, 5, 1), end=utc(2023, 5, 3), precision=Precision.DAY),
        TimeSpan(start=utc(2023, 5, 1, 12), end=None, precision=Precision.DAY, interval=True),
        TimeSpan(
            start=None,
            end=utc(2023, 5, 1, 12, 0, 1),
            precision=Precision.DATETIME,
            interval=True,
        ),
    ],
)
def test_format_resolved_refuses_spans_without_a_written_form(span: TimeSpan) -> None:
    with pytest.raises(AnnotationError):
        format_resolved(span)


# --------------------------------------------------------------------------- round trips

years = st.integers(min_value=1000, max_value=9998)
months = st.integers(min_value=1, max_value=12)


@st.composite
def points(draw: st.DrawFn, precision: Precision, last: bool = False) -> str:
    """A canonical endpoint; as an interval's end, :59 seconds would be written as the minute."""
    year = draw(years)
    if precision is Precision.YEAR:
        return f"{year:04d}"
    month = draw(months)
    if precision is Precision.MONTH:
        return f"{year:04d}-{month:02d}"
    month_end = (datetime(year, month, 1) + relativedelta(months=1, days=-1)).day
    day = draw(st.integers(min_value=1, max_value=month_end))
    if precision is Precision.DAY:
        return f"{year:04d}-{month:02d}-{day:02d}"
    hour, minute = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    second = draw(st.integers(0, 58 if last else 59))
    clock = f"{hour:02d}:{minute:02d}" + (f":{second:02d}" if second else "")
    return f"{year:04d}-{month:02d}-{day:02d}T{clock}Z"


@st.composite
def canonical(draw: st.DrawFn) -> str:
    precision = draw(st.sampled_from(list(Precision)))
    form = draw(st.sampled_from(["single", "closed", "open-right", "open-left"]))
    if form == "single":
        return draw(points(precision))
    if form == "open-right":
        return draw(points(precision)) + "/"
    if form == "open-left":
        return "/" + draw(points(precision, last=True))
    first, last = sorted([draw(points(precision, last=True)), draw(points(precision, last=True))])
    return f"{first}/{last}"


@settings(max_examples=300, deadline=None)
@given(canonical())
def test_canonical_text_round_trips(value: str) -> None:
    assert format_resolved(parse_resolved(value)) == value


@st.composite
def spans(draw: st.DrawFn) -> TimeSpan:
    """Spans built from whole units, the only ones with a written form."""
    precision = draw(st.sampled_from(list(Precision)))
    steps: dict[Precision, timedelta | relativedelta] = {
        Precision.YEAR: relativedelta(years=1),
        Precision.MONTH: relativedelta(months=1),
        Precision.DAY: timedelta(days=1),
        Precision.DATETIME: timedelta(minutes=1),
    }
    step = steps[precision]
    base = draw(st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9000, 1, 1)))
    base = base.replace(microsecond=0, tzinfo=UTC)
    if precision is Precision.DATETIME:
        fine = draw(st.booleans()) and base.second != 0
        step = timedelta(seconds=1) if fine else step
        start = base if fine else base.replace(second=0)
    elif precision is Precision.DAY:
        start = base.replace(hour=0, minute=0, second=0)
    elif precision is Precision.MONTH:
        start = base.replace(day=1, hour=0, minute=0, second=0)
    else:
        start = base.replace(month=1, day=1, hour=0, minute=0, second=0)
    form = draw(st.sampled_from(["single", "closed", "open-right", "open-left"]))
    if form == "single":
        return TimeSpan(start=start, end=start + step, precision=precision)
    units = draw(st.integers(min_value=1, max_value=40))
    end = start + step * units
    if precision is Precision.DATETIME and end.second == 1:
        end += timedelta(seconds=1)  # a minute plus one second has no written end
    return TimeSpan(
        start=None if form == "open-left" else start,
        end=None if form == "open-right" else end,
        precision=precision,
        interval=True,
    )


@settings(max_examples=300, deadline=None)
@given(spans())
def test_spans_round_trip(span: TimeSpan) -> None:
    assert parse_resolved(format_resolved(span)) == span


# --------------------------------------------------------------------------- annotations in text


def test_find_annotations_reads_offsets_and_skips_entity_refs() -> None:
    text = (
        "[Tom]'s [bakery] opened [last week::2024-03-04/2024-03-10] and [Sara] came "
        "[in 2022::2022]."
    )
    found = find_annotations(text)
    assert [(a.raw, a.resolved) for a in found] == [
        ("last week", "2024-03-04/2024-03-10"),
        ("in 2022", "2022"),
    ]
    for annotation in found:
        assert text[annotation.start : annotation.end] == (
            f"[{annotation.raw}::{annotation.resolved}]"
        )
    assert found[1].span == parse_resolved("2022")
    assert isinstance(found[0], Annotation)


def test_entity_refs_nested_in_an_annotation() -> None:
    text = "[Sara] moved [before [Tom]'s wedding::/2023-05-07] to [Oslo]."
    (annotation,) = find_annotations(text)
    assert annotation.raw == "before [Tom]'s wedding"
    assert annotation.span.end == utc(2023, 5, 8)
    assert plain_text(text) == "Sara moved before Tom's wedding to Oslo."


def test_annotation_inside_an_entity_ref() -> None:
    text = "[[yesterday::2023-05-07]'s party] was fun"
    assert [a.raw for a in find_annotations(text)] == ["yesterday"]
    assert plain_text(text) == "yesterday's party was fun"


def test_find_annotations_strict_and_lenient() -> None:
    text = "[a::2023-13] then [b::2023-05] then [c::soon]"
    with pytest.raises(AnnotationError, match=r"\[a::2023-13\]"):
        find_annotations(text)
    assert [a.raw for a in find_annotations(text, strict=False)] == ["b"]


def test_resolved_part_whitespace_and_triple_colon() -> None:
    assert find_annotations("[in 2022:: 2022 ]")[0].resolved == "2022"
    assert find_annotations("[ratio a::: 2022]")[0].raw == "ratio a:"


@pytest.mark.parametrize(
    "text", ["[::1]", "[ ::2022]", "no brackets", "[Tom] and [Ann]", "[x::", "x::2022]"]
)
def test_not_annotations(text: str) -> None:
    assert find_annotations(text) == []


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("[Tom] left [yesterday::2023-05-07].", "Tom left yesterday."),
        ("[Tom]'s [bakery]", "Tom's bakery"),
        ("no markup here", "no markup here"),
        ("a ] stray [ bracket", "a ] stray [ bracket"),
        ("[a [b] c", "[a b c"),
        ("[x::garbage] stays readable", "x stays readable"),
        ("[since [Tom]'s [move]::2020/]", "since Tom's move"),
    ],
)
def test_plain_text(text: str, plain: str) -> None:
    assert plain_text(text) == plain


def test_format_annotation() -> None:
    span = parse_resolved("2023-05-08T21:30Z")
    assert format_annotation("at 9:30 pm", span) == "[at 9:30 pm::2023-05-08T21:30Z]"
    for raw in ["", "  ", "a::b", "a]b", "[a", "ends:"]:
        with pytest.raises(AnnotationError):
            format_annotation(raw, span)


WORDS = st.sampled_from(["we", "met", "at", "the", "cafe", "and", "it", "was", "fun", "9:30", "::"])
NAMES = st.sampled_from(["Tom", "Sara", "the bakery", "Nate's regulars"])
RAWS = st.sampled_from(["yesterday", "last week", "in 2022", "at 9:30 pm", "since [Tom]'s move"])


@st.composite
def annotated_texts(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    pieces: list[str] = []
    expected: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        kind = draw(st.sampled_from(["word", "ref", "annotation"]))
        if kind == "word":
            pieces.append(draw(WORDS))
        elif kind == "ref":
            pieces.append(f"[{draw(NAMES)}]")
        else:
            raw, resolved = draw(RAWS), draw(canonical())
            pieces.append(f"[{raw}::{resolved}]")
            expected.append((raw, resolved))
    return " ".join(pieces), expected


@settings(max_examples=200, deadline=None)
@given(annotated_texts())
def test_find_annotations_recovers_what_was_written(
    case: tuple[str, list[tuple[str, str]]],
) -> None:
    text, expected = case
    found = find_annotations(text)
    assert [(a.raw, a.resolved) for a in found] == expected
    assert all(a.span == parse_resolved(a.resolved) for a in found)
    assert "[" not in plain_text(text) and "::2" not in plain_text(text)
