"""The deterministic English time resolver: resolve, find_times and annotate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membrain.api.errors import InputError
from membrain.api.models import Precision
from membrain.temporal import (
    TimeMatch,
    annotate,
    find_annotations,
    find_times,
    format_resolved,
    parse_resolved,
    patterns,
    plain_text,
    readers,
    resolve,
    resolver,
)

MONDAY = datetime(2023, 5, 8, 13, 56)  # naive = UTC; a Monday
WEDNESDAY = datetime(2023, 5, 10, 13, 56, tzinfo=UTC)
SATURDAY = datetime(2023, 5, 13, 10, 0, tzinfo=UTC)


def resolved(expression: str, reference: datetime = MONDAY) -> str | None:
    span = resolve(expression, reference)
    return None if span is None else format_resolved(span)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # days relative to the message
        ("yesterday", "2023-05-07"),
        ("today", "2023-05-08"),
        ("tonight", "2023-05-08T18:00Z/2023-05-08T23:59Z"),
        ("tomorrow", "2023-05-09"),
        ("the day before yesterday", "2023-05-06"),
        ("the day after tomorrow", "2023-05-10"),
        # parts of the day: Duckling's hours (morning 0-12, afternoon 12-19, evening/night 18-24)
        ("last night", "2023-05-07T18:00Z/2023-05-07T23:59Z"),
        ("this morning", "2023-05-08T00:00Z/2023-05-08T11:59Z"),
        ("yesterday evening", "2023-05-07T18:00Z/2023-05-07T23:59Z"),
        ("yesterday morning", "2023-05-07T00:00Z/2023-05-07T11:59Z"),
        ("this afternoon", "2023-05-08T12:00Z/2023-05-08T18:59Z"),
        ("tomorrow afternoon", "2023-05-09T12:00Z/2023-05-09T18:59Z"),
        ("tomorrow night", "2023-05-09T18:00Z/2023-05-09T23:59Z"),
        ("late tonight", "2023-05-08T21:00Z/2023-05-08T23:59Z"),
        ("late last night", "2023-05-07T21:00Z/2023-05-07T23:59Z"),
        ("May 7 in the morning", "2023-05-07T00:00Z/2023-05-07T11:59Z"),
        ("the morning of May 7", "2023-05-07T00:00Z/2023-05-07T11:59Z"),
        ("May 7 at night", "2023-05-07T18:00Z/2023-05-07T23:59Z"),
        ("since last night", "2023-05-07T18:00Z/"),
        ("until tonight", "/2023-05-08T23:59Z"),
        # counts
        ("3 days ago", "2023-05-05"),
        ("a week ago", "2023-05-01"),
        ("two weeks ago", "2023-04-24"),
        ("a couple of days ago", "2023-05-06"),
        # one grain finer than the unit, as Duckling has it, but days stay days
        ("3 months ago", "2023-02"),
        ("3 years ago", "2020"),
        ("twenty-one years ago", "2002"),
        ("a decade ago", "2013"),
        ("7 days ago", "2023-05-01"),
        ("a fortnight ago", "2023-04-24"),
        ("3 years from today", "2026-05-08"),
        ("2 hours ago", "2023-05-08T11:56Z"),
        ("a year ago today", "2022-05-08"),
        ("in 2 days", "2023-05-10"),
        ("in 3 weeks", "2023-05-29"),
        ("two years from now", "2025"),
        ("in 2 months", "2023-07"),
        # calendar periods
        ("last week", "2023-05-01/2023-05-07"),
        ("this week", "2023-05-08/2023-05-14"),
        ("next week", "2023-05-15/2023-05-21"),
        ("the week before last", "2023-04-24/2023-04-30"),
        ("last month", "2023-04"),
        ("this month", "2023-05"),
        ("next month", "2023-06"),
        ("last year", "2022"),
        ("this year", "2023"),
        ("next year", "2024"),
        ("last weekend", "2023-05-06/2023-05-07"),
        ("this past weekend", "2023-05-06/2023-05-07"),
        # weekdays: only when every usual reading agrees
        ("last Friday", "2023-05-05"),
        ("last Monday", "2023-05-01"),
        ("last Tuesday", "2023-05-02"),
        ("this Friday", "2023-05-12"),
        ("next Monday", "2023-05-15"),
        ("this coming Wednesday", "2023-05-10"),
        ("this past Saturday", "2023-05-06"),
        ("Friday of last week", "2023-05-05"),
        ("last Friday night", "2023-05-05T18:00Z/2023-05-05T23:59Z"),
        # month names and dates
        ("May 7, 2023", "2023-05-07"),
        ("7 May 2023", "2023-05-07"),
        ("May 7th", "2023-05-07"),
        ("the 7th of May", "2023-05-07"),
        ("the first of March", "2023-03-01"),
        ("Monday, May 8", "2023-05-08"),
        ("in May 2022", "2022-05"),
        ("October 2023", "2023-10"),
        ("May", "2023-05"),
        ("in May", "2023-05"),
        ("in October", "2023-10"),
        ("in December", None),  # seven months away: this December or last?
        ("January 3", "2023-01-03"),
        ("November 30", None),
        ("last May", "2022-05"),
        ("next March", "2024-03"),
        ("2023-05-07", "2023-05-07"),
        ("5/7/2023", "2023-05-07"),
        ("13/5/2023", "2023-05-13"),
        ("10/31/74", "1974-10-31"),
        ("2023-05-07 18:30", "2023-05-07T18:30Z"),
        ("the first Monday of June", "2023-06-05"),
        ("the last Friday of May", "2023-05-26"),
        ("the last day of February 2024", "2024-02-29"),
        ("the 20th of next month", "2023-06-20"),
        ("Tuesday the 16th", "2023-05-16"),
        # years
        ("in 2022", "2022"),
        ("2019", "2019"),
        ("the year 1999", "1999"),
        # open and closed intervals
        ("since 2020", "2020/"),
        ("since last year", "2022/"),
        ("since yesterday", "2023-05-07/"),
        ("from 2015 on", "2015/"),
        ("before 2020", "/2019"),
        ("before May 8", "/2023-05-07"),
        ("until May", "/2023-05"),
        ("until tomorrow", "/2023-05-09"),
        ("by 2020", "/2020"),  # over: up to its end
        ("by the end of 2019", "/2019-12"),
        ("by 5pm tomorrow", "2023-05-08T13:56Z/2023-05-09T16:59Z"),  # ahead: from now
        ("by the end of next month", "2023-05-08T13:56Z/2023-06-30T23:59Z"),
        ("after 2020", "2021/"),
        ("from March to May", "2023-03/2023-05"),
        ("from May 2020 to June 2021", "2020-05/2021-06"),
        ("between 2015 and 2018", "2015/2018"),
        ("July 13-15", "2023-07-13/2023-07-15"),
        ("from the 13th to the 15th of July", "2023-07-13/2023-07-15"),
        ("May 2 - May 5", "2023-05-02/2023-05-05"),
        ("the week of May 3", "2023-05-01/2023-05-07"),
        # clock times, on the message's day (13:56) unless a day is written
        ("at 9:30 pm", "2023-05-08T21:30Z"),
        ("at 3pm", "2023-05-08T15:00Z"),
        ("21:30", "2023-05-08T21:30Z"),
        ("tonight at 8", "2023-05-08T20:00Z"),
        ("tomorrow at 5pm", "2023-05-09T17:00Z"),
        ("yesterday at 9am", "2023-05-07T09:00Z"),
        ("this morning at 7", "2023-05-08T07:00Z"),  # past, but the day is written
        ("3pm on May 7", "2023-05-07T15:00Z"),
        ("a quarter past 3pm", "2023-05-08T15:15Z"),
        ("3-4pm", "2023-05-08T15:00Z/2023-05-08T16:00Z"),
        ("from 9am to 5pm tomorrow", "2023-05-09T09:00Z/2023-05-09T17:00Z"),
        ("since 2pm", "2023-05-08T14:00Z/"),
        ("4pm CET", "2023-05-08T15:00Z"),
        ("9:30:15 pm", "2023-05-08T21:30:15Z"),
        # seasons (northern meteorological), holidays (US), quarters
        ("this summer", "2023-06/2023-08"),
        ("last summer", "2022-06/2022-08"),
        ("last winter", "2022-12/2023-02"),
        ("summer 2021", "2021-06/2021-08"),
        ("last Christmas", "2022-12-25"),
        ("this Christmas", "2023-12-25"),
        ("Christmas Eve 2020", "2020-12-24"),
        ("Thanksgiving 2023", "2023-11-23"),
        ("Halloween", "2023-10-31"),
        ("Father's Day", "2023-06-18"),
        ("Easter 2024", "2024-03-31"),
        ("Memorial Day", "2023-05-29"),
        ("Q3 2022", "2022-07/2022-09"),
        # parts of months, years and weeks: Duckling's day and month ranges
        ("early March", "2023-03-01/2023-03-10"),
        ("mid-March", "2023-03-11/2023-03-20"),
        ("in late March", "2023-03-21/2023-03-31"),
        ("the end of February", "2023-02-21/2023-02-28"),
        ("at the end of May", "2023-05-21/2023-05-31"),
        ("the beginning of June", "2023-06-01/2023-06-10"),
        ("in the middle of June", "2023-06-11/2023-06-20"),
        ("the beginning of 2017", "2017-01/2017-03"),
        ("at the end of last year", "2022-09/2022-12"),
        ("the beginning of next week", "2023-05-15/2023-05-17"),
        ("the end of next week", "2023-05-19/2023-05-21"),
        ("right now", "2023-05-08T13:56Z"),
    ],
)
def test_resolve(expression: str, expected: str | None) -> None:
    assert resolved(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "recently",
        "someday",
        "soon",
        "a while ago",
        "the other day",
        "a few days ago",
        "about 3 years ago",
        "2 or 3 years ago",
        "years ago",
        "in the 90s",
        "the 2010s",
        "next Tuesday",  # said on a Monday: tomorrow or in 8 days?
        "next Friday",  # said on a Monday: in 4 days or in 11?
        "this weekend",  # said on a Monday: the one just gone or the next?
        "on Friday",
        "Friday",
        "every Sunday",
        "at 9:30",  # am or pm?
        "at 3",
        "at midnight",
        "12 am",
        "winter 2022",
        "Mother's Day",
        "Christmas",  # said in May: last one or next one?
        "the past week",
        "the last 3 days",
        "next few days",
        "the day before",
        "the following week",
        "in a minute",
        "early morning",
        # clock times already past at 13:56 with no day: this morning's or tomorrow's?
        "at 7 in the morning",
        "09:15",
        "noon",
        "a quarter to noon",
        "at 9am",
        "from 9am to 5pm",
        # "by" a period still ahead: until it begins or until it ends?
        "by tomorrow",
        "by next week",
        "by June",
        # parts of periods Duckling has no convention for
        "early 2020",
        "mid-2021",
        "late next week",
        "the end of summer",
        "the end of this weekend",
        # "this" + a month or holiday already over: the one just gone or the next?
        "this January",
        "this Valentine's Day",
        "1 adult",
        "25",
        "this is the one",
        "May I ask",
        "Pay ABC 2000",
        "at 650-650-6500",
        "3 30",
        "2023-13-01",
        "February 30",
        "",
        "   ",
    ],
)
def test_resolve_declines(expression: str) -> None:
    assert resolve(expression, MONDAY) is None


def test_resolve_precision_and_interval_flags() -> None:
    week = resolve("last week", MONDAY)
    assert week is not None and week.interval and week.precision is Precision.DAY
    day = resolve("yesterday", MONDAY)
    assert day is not None and not day.interval and day.precision is Precision.DAY
    since = resolve("since 2020", MONDAY)
    assert (
        since is not None and since.end is None and since.start == datetime(2020, 1, 1, tzinfo=UTC)
    )


def test_weekday_readings_depend_on_the_day_said() -> None:
    assert resolved("next Friday", SATURDAY) == "2023-05-19"
    assert resolved("next Friday", WEDNESDAY) is None
    assert resolved("last Monday", WEDNESDAY) is None
    assert resolved("last Friday", WEDNESDAY) == "2023-05-05"
    assert resolved("this weekend", WEDNESDAY) == "2023-05-13/2023-05-14"
    assert resolved("this weekend", SATURDAY) == "2023-05-13/2023-05-14"
    assert resolved("next weekend", SATURDAY) == "2023-05-20/2023-05-21"
    assert resolved("next weekend", WEDNESDAY) is None


def test_aware_reference_uses_its_local_date_and_zone() -> None:
    evening_in_new_york = datetime(2023, 5, 8, 22, 30, tzinfo=timezone(timedelta(hours=-4)))
    # already May 9 in UTC, but the speaker's "yesterday" is May 7
    assert resolved("yesterday", evening_in_new_york) == "2023-05-07"
    assert resolved("today", evening_in_new_york) == "2023-05-08"
    assert resolved("last week", evening_in_new_york) == "2023-05-01/2023-05-07"
    # clock times are the speaker's wall clock, converted to UTC
    assert resolved("at 11:30 pm", evening_in_new_york) == "2023-05-09T03:30Z"
    assert resolved("at 9:30 pm", evening_in_new_york) is None  # already past at 22:30
    assert resolved("tomorrow at 8am", evening_in_new_york) == "2023-05-09T12:00Z"
    assert resolved("2 hours ago", evening_in_new_york) == "2023-05-09T00:30Z"
    assert resolved("tonight", evening_in_new_york) == "2023-05-08T22:00Z/2023-05-09T03:59Z"
    # a written zone wins over the reference's
    morning_in_new_york = datetime(2023, 5, 8, 8, 0, tzinfo=timezone(timedelta(hours=-4)))
    assert resolved("at 3pm UTC", morning_in_new_york) == "2023-05-08T15:00Z"
    assert resolved("at 11am UTC", morning_in_new_york) is None  # 07:00 there: past


def test_clock_times_without_a_day_resolve_only_while_ahead() -> None:
    early = datetime(2023, 5, 8, 6, 30)
    assert resolved("09:15", early) == "2023-05-08T09:15Z"
    assert resolved("noon", early) == "2023-05-08T12:00Z"
    assert resolved("at 7 in the morning", early) == "2023-05-08T07:00Z"
    assert resolved("a quarter to noon", early) == "2023-05-08T11:45Z"
    assert resolved("from 9am to 5pm", early) == "2023-05-08T09:00Z/2023-05-08T17:00Z"
    assert resolved("at 6:30 am", early) == "2023-05-08T06:30Z"  # the reference minute
    assert resolved("at 6am", early) is None  # this morning's or tomorrow's?
    assert resolved("6-8am", early) is None
    assert resolved("today at 6am", early) == "2023-05-08T06:00Z"
    assert resolved("by 2pm", early) == "2023-05-08T06:30Z/2023-05-08T13:59Z"
    assert resolved("by now", early) == "/2023-05-08T06:29Z"


def test_this_resolves_only_while_not_over() -> None:
    october = datetime(2023, 10, 2, tzinfo=UTC)
    assert resolved("this October", october) == "2023-10"
    assert resolved("this September", october) is None
    assert resolved("this Halloween", october) == "2023-10-31"
    assert resolved("this Memorial Day", october) is None
    assert resolved("this fall", october) == "2023-09/2023-11"
    assert resolved("this summer", october) is None
    assert resolved("this winter", october) == "2023-12/2024-02"
    assert resolved("this winter", datetime(2023, 2, 12)) == "2022-12/2023-02"


def test_parts_of_periods_follow_the_month_length() -> None:
    leap = datetime(2024, 2, 5)
    assert resolved("late February", leap) == "2024-02-21/2024-02-29"
    assert resolved("the end of this month", leap) == "2024-02-21/2024-02-29"
    assert resolved("the end of this year", leap) == "2024-09/2024-12"
    assert resolved("the end of this week", leap) == "2024-02-09/2024-02-11"


def test_naive_and_utc_references_agree() -> None:
    for expression in ["yesterday", "at 3pm", "since 2020", "last week"]:
        assert resolve(expression, MONDAY) == resolve(expression, MONDAY.replace(tzinfo=UTC))


def test_reference_must_be_a_datetime() -> None:
    with pytest.raises(InputError):
        resolve("yesterday", "2023-05-08")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        annotate("yesterday", None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- free text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I went to the support group yesterday.",
            "I went to the support group [yesterday::2023-05-07].",
        ),
        (
            "We're moving to Boston next month!",
            "We're moving to Boston [next month::2023-06]!",
        ),
        (
            "Three years ago I ran my first marathon.",
            "[Three years ago::2020] I ran my first marathon.",
        ),
        (
            "I've volunteered at the shelter since 2019.",
            "I've volunteered at the shelter [since 2019::2019/].",
        ),
        (
            "Let's meet tomorrow at 5pm at the cafe.",
            "Let's meet [tomorrow at 5pm::2023-05-09T17:00Z] at the cafe.",
        ),
        (
            "I'll be in Paris from June 3 to June 10.",
            "I'll be in Paris [from June 3 to June 10::2023-06-03/2023-06-10].",
        ),
        (
            "She was born on March 3rd, 1995 and moved in 2005.",
            "She was born [on March 3rd, 1995::1995-03-03] and moved [in 2005::2005].",
        ),
        (
            "I'll finish in 2 weeks, I did the first half in 2 weeks.",
            "I'll finish [in 2 weeks::2023-05-22], I did the first half in 2 weeks.",
        ),
        (
            "I stayed up late last night, so tonight I'm sleeping early.",
            "I stayed up late [last night::2023-05-07T18:00Z/2023-05-07T23:59Z], so "
            "[tonight::2023-05-08T18:00Z/2023-05-08T23:59Z] I'm sleeping early.",
        ),
        (
            "The workshop is this Saturday morning.",
            "The workshop is [this Saturday morning::2023-05-13T00:00Z/2023-05-13T11:59Z].",
        ),
        (
            "At the end of March we went camping, in early 2020 too.",
            "[At the end of March::2023-03-21/2023-03-31] we went camping, in early 2020 too.",
        ),
        (
            "I need the report by 5pm tomorrow, not by Friday.",
            "I need the report [by 5pm tomorrow::2023-05-08T13:56Z/2023-05-09T16:59Z], not by "
            "Friday.",
        ),
        (
            "I woke up at 6am and the flight is at 9pm.",
            "I woke up at 6am and the flight is [at 9pm::2023-05-08T21:00Z].",
        ),
        (
            "Since yesterday was a holiday we slept in.",
            "Since [yesterday::2023-05-07] was a holiday we slept in.",
        ),
    ],
)
def test_annotate(text: str, expected: str) -> None:
    assert annotate(text, MONDAY) == expected


def test_bare_dates_take_the_nearby_year() -> None:
    november = datetime(2023, 11, 20, tzinfo=UTC)
    assert annotate("I bought a Christmas tree for Christmas.", november) == (
        "I bought a Christmas tree for [Christmas::2023-12-25]."
    )
    assert resolved("Thanksgiving", november) == "2023-11-23"
    assert resolved("in March", november) is None  # March 2023 or March 2024?
    assert resolved("in July", november) == "2023-07"
    assert resolved("on 1/5", november) is None
    assert resolved("on 9/5", november) == "2023-09-05"


def test_annotate_leaves_brackets_alone() -> None:
    text = "[Tom] met [Sara] last week and [yesterday::2023-05-07] [Nate]'s [May party] too"
    assert annotate(text, MONDAY) == (
        "[Tom] met [Sara] [last week::2023-05-01/2023-05-07] and [yesterday::2023-05-07] "
        "[Nate]'s [May party] too"
    )
    assert annotate("[since 2019::2019/] and [Tom in 2020]", MONDAY) == (
        "[since 2019::2019/] and [Tom in 2020]"
    )


@pytest.mark.parametrize(
    "text",
    [
        "I'm fine, thanks!",
        "May I ask what you think?",
        "You may want to try it.",
        "We will march on together.",
        "I have 3 kids and 2 dogs.",
        "I scored 2019 points in the game.",
        "I wrote 2000 words in 3 hours.",
        "He's 25 years old and has a 2-year-old son.",
        "The 90s were great.",
        "It happened a few years ago.",
        "I lost 10 pounds in 2 months.",
        "Every Tuesday I go swimming.",
        "I go to yoga on Fridays.",
        "We met the day before the wedding.",
        "See you next Friday!",
        "The meeting is at 9:30.",
        "Call 555-1234 or visit 12/34 Main St.",
        "I paid $2020 for it.",
        "Available 24/7.",
        "I'm reading about April and June.",
        "The Halloween party was wild.",
        "In the fourth quarter he scored twice.",
        "In the last few weeks I've been busy.",
        "The past week was rough.",
        "This is the one.",
        "One day I'll go to Japan.",
        "We've been married for 10 years.",
        "Half an hour ago I was asleep.",
    ],
)
def test_annotate_leaves_non_times_alone(text: str) -> None:
    assert annotate(text, MONDAY) == text
    assert find_times(text, MONDAY) == []


def test_find_times_offsets_and_spans() -> None:
    text = "Back in 2018, and again last Friday at 3pm."
    found = find_times(text, MONDAY)
    assert [m.raw for m in found] == ["in 2018", "last Friday at 3pm"]
    for match in found:
        assert isinstance(match, TimeMatch)
        assert text[match.start : match.end] == match.raw
    assert found[1].span.start == datetime(2023, 5, 5, 15, tzinfo=UTC)
    assert found[1].span.precision is Precision.DATETIME


def test_find_times_prefers_the_longest_reading() -> None:
    assert [m.raw for m in find_times("on May 7, 2021 at 9:30pm", MONDAY)] == [
        "on May 7, 2021 at 9:30pm"
    ]
    # an indeterminate whole claims its parts: no bare "9am" on an unknown Saturday
    assert find_times("at 9am on Saturday", MONDAY) == []
    # "the last week of May" is not "last week"
    assert find_times("the last week of May", MONDAY) == []


def test_annotations_written_by_annotate_parse_back() -> None:
    text = "Since last summer, and from March to May, and yesterday at 21:15."
    out = annotate(text, MONDAY)
    found = find_annotations(out)
    assert [a.raw for a in found] == [
        "Since last summer",
        "from March to May",
        "yesterday at 21:15",
    ]
    assert [a.span for a in found] == [m.span for m in find_times(text, MONDAY)]
    assert plain_text(out) == text


CHAT_WORDS = st.sampled_from(
    [
        "I", "we", "met", "Tom", "at", "the", "cafe", "and", "it", "was", "great", "on", "in",
        "since", "May", "march", "2019", "5", "pm", "yesterday", "last", "week", "Friday", "3pm",
        "ago", "two", "days", "next", "month", "summer", "Christmas", "before", "from", "to",
        "-", ",", ".", "9:30", "2023-05-07", "5/7/2023", "tonight", "half", "every", "a",
    ]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(CHAT_WORDS, max_size=14))
def test_annotate_only_adds_markup(words: list[str]) -> None:
    text = " ".join(words)
    out = annotate(text, MONDAY)
    assert plain_text(out) == text
    found = find_annotations(out)
    assert [a.span for a in found] == [m.span for m in find_times(text, MONDAY)]
    for annotation in found:
        assert parse_resolved(annotation.resolved) == annotation.span
        assert resolve(annotation.raw, MONDAY) == annotation.span


def test_plain_chat_runs_only_the_rules_its_words_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[readers.Rule] = []

    def counting(kinds: frozenset[str]) -> tuple[tuple[int, readers.Rule], ...]:
        ranked = readers.applicable(kinds)
        tried.extend(rule for _, rule in ranked)
        return ranked

    monkeypatch.setattr(resolver, "applicable", counting)
    no_time_words = [
        "That sounds amazing, I'm so happy for you!",
        "Haha yes, my dog loves the beach too.",
        "What kind of music do you usually listen to?",
    ]
    for message in no_time_words:
        assert annotate(message, MONDAY) == message
    assert tried == []  # the cheap word pass alone turned them away
    message = "I think this is the one I was telling you about."  # "this", "one"
    assert annotate(message, MONDAY) == message
    allowed = patterns.features(message)
    assert tried and all(rule.applies(allowed) for rule in tried)
    assert len(tried) < len(readers.RULES) // 4
    tried.clear()
    assert annotate("We met yesterday.", MONDAY) != "We met yesterday."
    assert tried  # the count sees the rules that do run
