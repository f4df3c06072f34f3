"""Atom readers of the time resolver (internal): one per pattern of :mod:`.patterns`.

Each reader gets a match of its pattern and returns a :class:`~.values.Cand`: with a value, with
``val=None`` (an indeterminate expression that still claims its text, so that none of its parts
is read alone), or ``None`` when the match is not an expression at all. A candidate's ``needs``
lists the prepositions that make a bare form a time in free text ("in May", "since 2019").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from typing import Final

from dateutil.relativedelta import relativedelta

from membrain.api.models import Precision
from membrain.temporal import patterns as P
from membrain.temporal.clock_readers import (
    between_before,
    candidate,
    read_clock,
    read_clock_range,
    read_past_to,
)
from membrain.temporal.values import (
    STANDALONE,
    WEEKDAY_FNS,
    Cand,
    Ctx,
    Unit,
    Val,
    holiday_date,
    make_date,
    monday_of,
    month_start,
    offset,
    pair,
    parse_zone,
    single,
    written_year,
)

__all__ = ["RULES", "Rule", "applicable"]


def _week(ctx: Ctx, offset: int) -> Val:
    monday = monday_of(ctx.today) + timedelta(weeks=offset)
    return pair(monday, monday + timedelta(days=6), Precision.DAY)


def _weekend(ctx: Ctx, offset: int) -> Val:
    saturday = monday_of(ctx.today) + timedelta(weeks=offset, days=5)
    return pair(saturday, saturday + timedelta(days=1), Precision.DAY)


def _rel(text: str) -> str:
    return " ".join(text.lower().split()).removeprefix("the ")


def _month(text: str) -> int:
    return P.MONTHS[text.lower().rstrip(".")]


# --------------------------------------------------------------------------- readers

_BARE_MONTH_NEEDS: Final = frozenset(
    {"in", "during", "since", "until", "till", "through", "from", "edge", "between"}
)
_BARE_YEAR_NEEDS: Final = _BARE_MONTH_NEEDS | {"before", "after", "by"}
_VERB_MONTH_NEEDS: Final = _BARE_YEAR_NEEDS | {"on"}
_HOLIDAY_NEEDS: Final = frozenset(
    {"on", "at", "for", "since", "before", "after", "until", "till", "by", "from", "between"}
)
_NAME_MONTHS: Final = frozenset({"april", "may", "june"})  # also names: "by April" is ambiguous
_Reader = Callable[[re.Match[str], Ctx], "Cand | None"]


def _month_needs(m: re.Match[str]) -> frozenset[str] | None:
    """Lowercase "may"/"march" are usually verbs: they need a preposition in free text."""
    return _VERB_MONTH_NEEDS if P.VERB_MONTHS.fullmatch(m["mon"].rstrip(".")) else None


def _r_relday(m: re.Match[str], ctx: Ctx) -> Cand | None:
    word = _rel(m["w"])
    offset, hint = {
        "day before yesterday": (-2, None),
        "day after tomorrow": (2, None),
        "yesterday": (-1, None),
        "tomorrow": (1, None),
        "tmrw": (1, None),
        "tonight": (0, "night"),
        "tonite": (0, "night"),
        "last night": (-1, "night"),
        "this morning": (0, "morning"),
        "this afternoon": (0, "afternoon"),
        "this evening": (0, "evening"),
    }.get(word, (0, None))
    if m["pod"]:
        if hint is not None:
            return candidate(m, None, "day")  # "tonight morning"
        hint = m["pod"].lower()
    return candidate(m, single(ctx.today + timedelta(days=offset), Precision.DAY, hint), "day")


def _r_now(m: re.Match[str], ctx: Ctx) -> Cand | None:
    needs = frozenset({"from", "until", "till", "by"}) if m["w"].lower() == "now" else None
    moment = ctx.local.replace(second=0, microsecond=0)
    return candidate(m, single(moment, Precision.DATETIME), "clock", needs)


def _r_ago(m: re.Match[str], ctx: Ctx) -> Cand | None:
    n = P.number(m["n"])
    if m["q"] or n is None or n > 400:
        return candidate(m, None)  # "about 3 years ago"
    sign = -1 if m["dir"].lower() in ("ago", "back") else 1
    unit = P.UNITS[m["u"].lower()]
    if m["today"] and unit in ("hour", "minute"):
        return None
    today = bool(m["today"]) or m["dir"].lower().endswith("today")
    try:
        return candidate(m, offset(n, unit, sign, ctx, today))
    except (OverflowError, ValueError):
        return candidate(m, None)


def _r_weekdays_ago(m: re.Match[str], ctx: Ctx) -> Cand | None:
    n = P.number(m["n"])
    if n is None or not 1 <= n <= 52:
        return candidate(m, None, "day")
    weekday = WEEKDAY_FNS[P.WEEKDAYS[m["wd"].lower()[:-1]]]
    day: date = ctx.today - timedelta(days=1) + relativedelta(weekday=weekday(-n))
    return candidate(m, single(day, Precision.DAY), "day")


def _r_in_count(m: re.Match[str], ctx: Ctx) -> Cand | None:
    n = P.number(m["n"])
    unit = P.UNITS[m["u"].lower()]
    if n is None or n > 400 or (m["n"].lower() in ("a", "an") and unit == "minute"):
        return candidate(m, None)  # "in a minute" is an idiom, not a minute from now
    if ctx.free and not m["time"]:
        clause = P.CLAUSE_END.split(ctx.text[max(0, m.start() - 80) : m.start()])[-1]
        if not P.FUTURE.search(clause):
            return candidate(m, None)  # "I finished it in 2 days" is a duration
    try:
        return candidate(m, offset(n, unit, 1, ctx))
    except (OverflowError, ValueError):
        return candidate(m, None)


def _period(period: str, offset: int, ctx: Ctx) -> Val:
    if period == "week":
        return _week(ctx, offset)
    if period == "weekend":
        return _weekend(ctx, offset)
    if period == "month":
        return single(month_start(ctx.today, offset), Precision.MONTH)
    return single(date(ctx.today.year + offset, 1, 1), Precision.YEAR)


def _r_rel_period(m: re.Match[str], ctx: Ctx) -> Cand | None:
    rel = _rel(m["rel"])
    period = re.sub(r"[-\s]", "", m["p"].lower()).replace("wkend", "weekend")
    period = "year" if period == "yr" else period
    offset: int | None
    if period == "weekend":
        on_weekend, monday = ctx.today.weekday() >= 5, ctx.today.weekday() == 0
        offset = {
            "last": -1,
            "this": None if monday else 0,
            "current": None if monday else 0,
            "next": 1 if on_weekend else None,
            "coming": None if on_weekend else 0,
            "upcoming": None if on_weekend else 0,
            "this coming": None if on_weekend else 0,
            "this past": None if on_weekend else -1,
            "past": None if on_weekend else -1,
        }.get(rel)
    else:
        # "past/previous/following week" are rolling or relative to another event
        offset = {"last": -1, "this": 0, "current": 0, "next": 1, "coming": 1}.get(rel)
        offset = 1 if rel in ("upcoming", "this coming") else offset
    return candidate(m, None if offset is None else _period(period, offset, ctx))


def _r_period_far(m: re.Match[str], ctx: Ctx) -> Cand | None:
    offset = -2 if m["ba"].lower().startswith("before") else 2
    return candidate(m, _period(re.sub(r"[-\s]", "", m["p"].lower()), offset, ctx))


def _weekday_day(rel: str, target: int, ctx: Ctx) -> date | None:
    """The day of ``rel`` + weekday, or None when the usual readings disagree."""
    today, now = ctx.today, ctx.today.weekday()
    monday = monday_of(today)
    if rel == "last":  # "the most recent one" and "the one of last week" agree
        return monday - timedelta(days=7 - target) if target >= now else None
    if rel == "this":  # "the one of this week" and "the coming one" agree
        return monday + timedelta(days=target) if target >= now else None
    if rel == "next":  # "the next one" and "the one of next week" agree
        return monday + timedelta(days=7 + target) if target <= now else None
    if rel in ("coming", "this coming"):
        return today + timedelta(days=(target - now - 1) % 7 + 1)
    if rel in ("this past", "past"):
        return today - timedelta(days=(now - target - 1) % 7 + 1)
    return None


def _r_rel_weekday(m: re.Match[str], ctx: Ctx) -> Cand | None:
    day = _weekday_day(_rel(m["rel"]), P.WEEKDAYS[m["wd"].lower()], ctx)
    hint = m["pod"].lower() if m["pod"] else None
    return candidate(m, None if day is None else single(day, Precision.DAY, hint), "day")


def _r_weekday_of_week(m: re.Match[str], ctx: Ctx) -> Cand | None:
    offset = {"last": -1, "this": 0, "next": 1}[m["rel"].lower()]
    day = monday_of(ctx.today) + timedelta(weeks=offset, days=P.WEEKDAYS[m["wd"].lower()])
    return candidate(m, single(day, Precision.DAY), "day")


def _r_null_day(m: re.Match[str], ctx: Ctx) -> Cand | None:
    return candidate(m, None, "day")


def _r_null(m: re.Match[str], ctx: Ctx) -> Cand | None:
    return candidate(m, None)


def _weekday_ok(day: date, m: re.Match[str]) -> bool:
    names = [m.groupdict().get(group) for group in ("wd", "wd2")]
    return all(n is None or P.WEEKDAYS[n.lower().rstrip(".")] == day.weekday() for n in names)


def _r_date(m: re.Match[str], ctx: Ctx) -> Cand | None:
    """A day named with a month word: "May 7", "7 May 2023", "the first of March"."""
    short = m.groupdict().get("yy")
    month = _month(m["mon"])
    day = make_date(written_year(short or m["y"], ctx, month), month, P.ordinal(m["d"]))
    if day is None or not _weekday_ok(day, m):
        day = None  # "Friday, May 7" when May 7 is a Sunday
    val = None if day is None else single(day, Precision.DAY)
    return candidate(m, val, "day", None if short else _month_needs(m))


def _r_month_year(m: re.Match[str], ctx: Ctx) -> Cand | None:
    year = written_year(m["y"], ctx)
    val = single(date(year, _month(m["mon"]), 1), Precision.MONTH) if year else None
    return candidate(m, val, needs=_month_needs(m), pairable=True)


def _r_bare_month(m: re.Match[str], ctx: Ctx) -> Cand | None:
    name = m["mon"].lower()
    needs = _BARE_MONTH_NEEDS if name in _NAME_MONTHS else _BARE_YEAR_NEEDS
    year = written_year(None, ctx, _month(name))
    val = single(date(year, _month(name), 1), Precision.MONTH) if year else None
    return candidate(m, val, needs=needs, pairable=True)


def _r_rel_month(m: re.Match[str], ctx: Ctx) -> Cand | None:
    month, now, year = _month(m["mon"]), ctx.today.month, ctx.today.year
    target = {
        "this": year if month >= now else None,  # "this January" said in May: which one?
        "last": year - 1 if month >= now else None,
        "next": year + 1 if month <= now else None,
        "coming": year if month > now else year + 1,
        "this coming": year if month > now else year + 1,
        "this past": year if month < now else year - 1,
    }.get(_rel(m["rel"]))
    val = None if target is None else single(date(target, month, 1), Precision.MONTH)
    return candidate(m, val, needs=_month_needs(m))


def _r_iso_date(m: re.Match[str], ctx: Ctx) -> Cand | None:
    day = make_date(int(m["y"]), int(m["m"]), int(m["d"]))
    if day is None or m["H"] is None:
        return candidate(m, None if day is None else single(day, Precision.DAY), "day")
    hour, minute, second = int(m["H"]), int(m["M"]), int(m["S"] or 0)
    if hour > 23 or minute > 59 or second > 59:
        return candidate(m, None, "dayclock")
    moment = datetime.combine(day, time(hour, minute, second))
    unit = Unit(moment, Precision.DATETIME, bool(second), parse_zone(m["z"]) if m["z"] else None)
    return candidate(m, Val(unit, unit), "dayclock")


def _r_iso_month(m: re.Match[str], ctx: Ctx) -> Cand | None:
    month = int(m["m"])
    val = single(date(int(m["y"]), month, 1), Precision.MONTH) if 1 <= month <= 12 else None
    return candidate(m, val, needs=frozenset({STANDALONE}))  # "2010-12": a month or two years?


def _r_numeric_date(m: re.Match[str], ctx: Ctx) -> Cand | None:
    a, b = int(m["a"]), int(m["b"])
    dotted = m["s"] == "."
    needs = frozenset({STANDALONE}) if dotted and len(m["y"]) == 2 else None  # "1.15.22"
    if dotted and a <= 12 and b <= 12 and a != b:
        return candidate(m, None, "day", needs)  # dotted dates are day-first as often as not
    month, day_number = (a, b) if a <= 12 else (b, a)
    day = make_date(written_year(m["y"], ctx), month, day_number)
    return candidate(m, None if day is None else single(day, Precision.DAY), "day", needs)


def _r_month_slash(m: re.Match[str], ctx: Ctx) -> Cand | None:
    a = int(m["a"])
    dashed = frozenset({STANDALONE}) if m["s"] != "/" else None
    if m["y"] is not None:
        val = single(date(int(m["y"]), a, 1), Precision.MONTH) if 1 <= a <= 12 else None
        return candidate(m, val, needs=dashed)
    b = int(m["b"])
    month, day_number = (a, b) if a <= 12 else (b, a)
    day = make_date(written_year(None, ctx, month), month, day_number) if month <= 12 else None
    needs = dashed or frozenset({"on", "from", "between"})  # "since 9/11" is not this year's
    return candidate(m, None if day is None else single(day, Precision.DAY), "day", needs)


def _r_weekday_ordinal(m: re.Match[str], ctx: Ctx) -> Cand | None:
    """Tuesday the 19th: the one month around the reference with a Tuesday the 19th."""
    number, target = P.ordinal(m["d"]), P.WEEKDAYS[m["wd"].lower().rstrip(".")]
    found = []
    for shift in (-1, 0, 1):
        start = month_start(ctx.today, shift)
        day = make_date(start.year, start.month, number)
        if day is not None and day.weekday() == target:
            found.append(day)
    return candidate(m, single(found[0], Precision.DAY) if len(found) == 1 else None, "day")


def _holiday_key(name: str) -> str:
    for pattern, key in P.HOLIDAY_NAMES.items():
        if re.fullmatch(pattern, name, re.IGNORECASE):
            return key
    return "unresolvable"  # pragma: no cover - the pattern only matches listed names


def _r_holiday(m: re.Match[str], ctx: Ctx) -> Cand | None:
    key = _holiday_key(m["name"])
    year = written_year(m["y"], ctx)
    day = holiday_date(key, year) if year else None
    if day is not None and not m["y"] and written_year(None, ctx, day.month) is None:
        day = None  # "Christmas" said in April: last one or next one?
    needs = _HOLIDAY_NEEDS if key in P.HOLIDAYS_NEEDING_CONTEXT and not m["y"] else None
    return candidate(m, None if day is None else single(day, Precision.DAY), "day", needs)


def _r_rel_holiday(m: re.Match[str], ctx: Ctx) -> Cand | None:
    key, today, year = _holiday_key(m["name"]), ctx.today, ctx.today.year
    this = holiday_date(key, year)
    if this is None:
        return candidate(m, None, "day")
    before, after = holiday_date(key, year - 1), holiday_date(key, year + 1)
    choice = {
        "this": this if this >= today else None,
        "current": this if this >= today else None,
        "last": before if this >= today else None,
        "next": after if this <= today else None,
        "coming": this if this > today else after,
        "this coming": this if this > today else after,
        "upcoming": this if this > today else after,
        "this past": this if this < today else before,
        "past": this if this < today else before,
    }.get(_rel(m["rel"]))
    return candidate(m, None if choice is None else single(choice, Precision.DAY), "day")


def _season(name: str, year: int) -> Val:
    first, last = P.SEASONS[name]
    return pair(date(year, first, 1), date(year + (first > last), last, 1), Precision.MONTH)


def _r_rel_season(m: re.Match[str], ctx: Ctx) -> Cand | None:
    name, rel = m["s"].lower(), _rel(m["rel"])
    month, year = ctx.today.month, ctx.today.year
    first, last = P.SEASONS[name]
    if name == "winter":  # winter Y is December Y to February Y+1
        inside = month in (12, 1, 2)
        now = year if month == 12 else year - 1
        target = {
            "this": now if inside else (year if month >= 9 else None),
            "current": now if inside else None,
            "last": now - 1 if inside else year - 1,
            "next": now + 1 if inside else None,
            "coming": now + 1 if inside else year,
            "this coming": now + 1 if inside else year,
            "upcoming": now + 1 if inside else year,
            "this past": now - 1 if inside else year - 1,
            "past": now - 1 if inside else year - 1,
        }.get(rel)
    else:
        target = {
            "this": year if month <= last else None,
            "current": year if first <= month <= last else None,
            "last": year - 1 if month <= last else None,
            "next": year + 1 if month >= first else None,
            "coming": year if month < first else year + 1,
            "this coming": year if month < first else year + 1,
            "upcoming": year if month < first else year + 1,
            "this past": year if month > last else year - 1,
            "past": year if month > last else year - 1,
        }.get(rel)
    return candidate(m, None if target is None else _season(name, target))


def _r_season_year(m: re.Match[str], ctx: Ctx) -> Cand | None:
    name = m["s"].lower()  # "winter 2022": December 2021 or December 2022?
    return candidate(m, None if name == "winter" else _season(name, int(m["y"])))


def _r_quarter(m: re.Match[str], ctx: Ctx) -> Cand | None:
    quarter = P.ordinal(m["q"] or m["q2"] or m["qw"])
    year = int(m["y"] or m["y2"] or m["y3"])
    if quarter is None or not 1 <= quarter <= 4:
        return candidate(m, None)
    first = date(year, 3 * quarter - 2, 1)
    return candidate(m, pair(first, first + relativedelta(months=2), Precision.MONTH))


def _r_day_of_month(m: re.Match[str], ctx: Ctx) -> Cand | None:
    rel = " ".join(m["rel"].lower().split())  # "of the next month" is relative to an event
    offset = {"this": 0, "current": 0, "the current": 0, "next": 1, "last": -1}.get(rel)
    start = month_start(ctx.today, offset) if offset is not None else None
    day = make_date(start.year, start.month, P.ordinal(m["d"])) if start else None
    return candidate(m, None if day is None else single(day, Precision.DAY), "day")


def _month_of(m: re.Match[str], ctx: Ctx) -> date | None:
    """The first day of the month named by groups ``mon``/``y`` or by ``rel`` month."""
    if m["mon"]:
        year = written_year(m["y"], ctx, _month(m["mon"]))
        return date(year, _month(m["mon"]), 1) if year else None
    offset = {"this": 0, "next": 1, "last": -1}.get(m["rel"].lower())  # "the month": which?
    return None if offset is None else month_start(ctx.today, offset)


def _r_nth_weekday(m: re.Match[str], ctx: Ctx) -> Cand | None:
    start = _month_of(m, ctx)
    n = -1 if m["n"].lower() == "last" else P.ordinal(m["n"])
    needs = _month_needs(m) if m["mon"] else None
    if start is None or n is None:
        return candidate(m, None, "day", needs)
    weekday = WEEKDAY_FNS[P.WEEKDAYS[m["wd"].lower()]]
    anchor = start + relativedelta(day=31) if n < 0 else start
    day: date = anchor + relativedelta(weekday=weekday(n))
    val = single(day, Precision.DAY) if day.month == start.month else None
    return candidate(m, val, "day", needs)


def _r_nth_day(m: re.Match[str], ctx: Ctx) -> Cand | None:
    start = _month_of(m, ctx)
    needs = _month_needs(m) if m["mon"] else None
    if start is None:
        return candidate(m, None, "day", needs)
    if m["n"].lower() == "last":
        day: date | None = start + relativedelta(day=31)
    else:
        day = make_date(start.year, start.month, P.ordinal(m["n"]))
    return candidate(m, None if day is None else single(day, Precision.DAY), "day", needs)


def _r_day_range(m: re.Match[str], ctx: Ctx) -> Cand | None:
    if m["c"].lower() == "and" and not between_before(m.start(), ctx):
        return None
    month = _month(m["mon"])
    year = written_year(m["y"], ctx, month)
    first = make_date(year, month, P.ordinal(m["d1"]))
    last = make_date(year, month, P.ordinal(m["d2"]))
    ok = first is not None and last is not None and first < last
    val = pair(first, last, Precision.DAY) if ok and first and last else None
    return candidate(m, val, "interval", _month_needs(m))


def _r_year(m: re.Match[str], ctx: Ctx) -> Cand | None:
    year = int(m["y"])
    if P.NOT_YEAR_AFTER.match(ctx.text, m.end()) or (ctx.free and not 1900 <= year <= 2100):
        return None  # "in 2000 words", "by 1500"
    val = single(date(year, 1, 1), Precision.YEAR)
    return candidate(m, val, needs=_BARE_YEAR_NEEDS, pairable=True)


def _r_the_year(m: re.Match[str], ctx: Ctx) -> Cand | None:
    return candidate(m, single(date(int(m["y"]), 1, 1), Precision.YEAR))


@dataclass(frozen=True, slots=True)
class Rule:
    """A pattern, the reader of its matches, and the kinds of words it needs to be tried."""

    pattern: re.Pattern[str]
    read: _Reader
    needs: tuple[frozenset[str], ...]  # every clause must meet the text's kinds of words

    def applies(self, kinds: frozenset[str] | set[str]) -> bool:
        """Whether a text with these kinds of words can match the pattern."""
        return all(not clause.isdisjoint(kinds) for clause in self.needs)


def _rules() -> tuple[Rule, ...]:
    # needs: space-separated clauses that must all hold, each a |-separated choice of word
    # kinds (see patterns.features): "month digit|ord" = a month word and a digit or ordinal
    spec: list[tuple[re.Pattern[str], _Reader, str]] = [
        (P.RELDAY, _r_relday, "rel"),
        (P.NOW, _r_now, "rel"),
        (P.AGO, _r_ago, "unit dir"),
        (P.WEEKDAYS_AGO, _r_weekdays_ago, "weekday dir"),
        (P.IN_COUNT, _r_in_count, "unit in"),
        (P.REL_PERIOD, _r_rel_period, "rel unit"),
        (P.PERIOD_FAR, _r_period_far, "rel unit"),
        (P.REL_WEEKDAY, _r_rel_weekday, "rel weekday"),
        (P.WEEKDAY_OF_WEEK, _r_weekday_of_week, "weekday unit"),
        (P.WEEK_S_WEEKDAY, _r_weekday_of_week, "weekday unit"),
        (P.BARE_WEEKDAY, _r_null_day, "weekday"),
        (P.MONTH_DAY, _r_date, "month digit|ord"),
        (P.DAY_MONTH, _r_date, "month digit"),
        (P.ORDINAL_OF_MONTH, _r_date, "month ord"),
        (P.MONTH_YEAR, _r_month_year, "month digit"),
        (P.BARE_MONTH, _r_bare_month, "month"),
        (P.REL_MONTH, _r_rel_month, "month rel"),
        (P.ISO_DATE, _r_iso_date, "digit"),
        (P.ISO_MONTH, _r_iso_month, "digit"),
        (P.NUMERIC_DATE, _r_numeric_date, "digit"),
        (P.MONTH_SLASH, _r_month_slash, "digit"),
        (P.CLOCK, read_clock, "digit|clock|num"),
        (P.CLOCK_RANGE, read_clock_range, "digit"),
        (P.PAST_TO, read_past_to, "digit|num|clock pastto"),
        (P.WEEKDAY_ORDINAL, _r_weekday_ordinal, "weekday digit"),
        (P.HOLIDAY, _r_holiday, "holiday"),
        (P.REL_HOLIDAY, _r_rel_holiday, "holiday rel"),
        (P.REL_SEASON, _r_rel_season, "season rel"),
        (P.SEASON_YEAR, _r_season_year, "season digit"),
        (P.QUARTER, _r_quarter, "digit"),
        (P.DAY_OF_MONTH, _r_day_of_month, "unit digit|ord"),
        (P.NTH_WEEKDAY, _r_nth_weekday, "weekday ord|rel|digit"),
        (P.NTH_DAY, _r_nth_day, "unit ord|rel|digit"),
        (P.MONTH_DAY_RANGE, _r_day_range, "month digit"),
        (P.DAY_RANGE_MONTH, _r_day_range, "month digit"),
        (P.YEAR, _r_year, "digit"),
        (P.THE_YEAR, _r_the_year, "digit"),
    ]
    spec += [(pattern, _r_null, needs) for pattern, needs in P.BLOCKERS]
    return tuple(
        Rule(p, read, tuple(frozenset(c.split("|")) for c in needs.split()))
        for p, read, needs in spec
    )


RULES: Final = _rules()
"""Every rule, in priority order (a lower index wins a tie)."""


@lru_cache(maxsize=2048)
def applicable(kinds: frozenset[str]) -> tuple[tuple[int, Rule], ...]:
    """The rules (with their rank) that can match a text with these kinds of words."""
    return tuple((rank, rule) for rank, rule in enumerate(RULES) if rule.applies(kinds))
