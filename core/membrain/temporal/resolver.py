"""A deterministic resolver of English time expressions, tuned for precision on chat messages.

:func:`resolve` turns one expression into a :class:`~membrain.api.models.TimeSpan` against the time
a message was sent; :func:`find_times` finds every determinate expression in free text and
:func:`annotate` writes them as ``[raw::resolved]``. A wrong resolution is worse than none, so
anything indeterminate or ambiguous resolves to nothing.

How it works: a cheap keyword scan decides which rules can apply (a message without time words
costs one regex pass); each rule's pattern (:mod:`membrain.temporal.patterns`) finds atoms such as
"May 7" or "3pm"; atoms are then combined ("May 7 at 3pm", "from March to May", "since 2020");
the longest non-overlapping candidates win, and an indeterminate candidate still claims its text
so that no part of it is read alone ("at 9am on Saturday" does not yield a bare "9am").

Conventions:

* Calendar values (year, month, day, week) are computed on the reference's *local* date and are
  floating (midnight UTC of that date); clock times are read in the reference's zone (or a zone
  written after them: UTC, GMT, EST/EDT, CST/CDT, MST/MDT, PST/PDT, CET/CEST, BST) and
  converted to UTC. A naive reference is UTC.
* Weeks run Monday to Sunday; "last week" is the previous Monday-Sunday as a day interval and a
  weekend is its Saturday-Sunday. "this weekend" said on a Monday (the one just gone, or the
  next?) and "next weekend" said on a weekday are ambiguous.
* Month names, dates and holidays written without a year take the reference's year ("in May"
  said in February is May of that year), but only within five months of the reference's month:
  "in January" said in December, or "Christmas" said in April, could be either year and is
  not resolved. (Duckling takes the next one: "New Year's Day" said in February is next
  January's there, this January's here: chat tells of the past more than it plans.) Numeric
  dates are US month-first ``5/7/2023``; day-first is read only when the first number is over
  12. Two-digit years take the century nearest the reference.
* ``last``/``this``/``next`` + weekday, month or holiday resolve only when the usual readings
  agree: "next Friday" said on a Tuesday may be in 3 or in 10 days and is left alone, as is "last
  Monday" said on a Tuesday; said on a Saturday, "next Friday" is the Friday of next week under
  every reading. "this" + month, season or holiday is the one in the reference's year while it
  is not over ("this May" said in May, "this Christmas" said in May); once over, the one just
  gone and the next one compete and it is not resolved. "coming" and "this past" are always
  the nearest one after / before the reference. Bare weekdays ("on
  Friday") are never resolved; "Tuesday the 19th" is, when exactly one month around the
  reference has a Tuesday the 19th.
* Seasons are northern-hemisphere meteorological seasons (spring = March-May, summer =
  June-August, fall/autumn = September-November, winter = December-February) written as month
  intervals; "winter 2022" is ambiguous and is not resolved. (Duckling uses astronomical
  seasons, "this summer" = June 21 - September 23, and its "this season" disagrees with its
  own named seasons by a day or two; months are what people mean in chat.)
* Holidays follow US dates where countries differ (Thanksgiving, Memorial Day, Labor Day); those
  that depend on a locale or a lunisolar calendar (Mother's Day, Diwali, Eid, ...) are not
  resolved. Bare "Christmas", "Easter", "Halloween", "Thanksgiving" need a preposition in free
  text ("a Christmas tree" is not a date).
* Parts of the day are Duckling's clock intervals on their day, at datetime precision: morning
  00:00-12:00, afternoon 12:00-19:00, evening and night 18:00-24:00. "tonight" and "this
  evening" are the reference day's evening, "last night" and "yesterday evening" the previous
  day's, "this morning" / "tomorrow afternoon" / "last Friday night" / "May 7 in the morning" /
  "the morning of May 7" likewise; "late tonight", "late last night" (as whole expressions) are
  21:00-24:00. They also settle am/pm for a clock time ("tonight at 8" is 20:00).
* A clock time with hour 1-12 and neither am/pm nor a part of the day ("at 9:30", "at 3") is
  ambiguous and not resolved; "09:30", "21:30", "9:30 pm", "noon" are. Clock times fall on the
  reference's day unless a day is written ("tomorrow at 5pm"), and a clock time without a day
  that is already past at the reference minute is not resolved: "at 3am" said at 04:30 is this
  morning's ("I woke up at 3am") or tomorrow's (Duckling: "my flight is at 3am"). With a day
  written it is that day's: "this morning at 3" said at 04:30 is 03:00 today (Duckling reads
  tomorrow). "midnight" and "12 am" are ambiguous. "now", "right now", "at the moment" are the
  reference minute.
* "N units ago / from now" is one grain finer than the unit, as in Duckling: "3 months ago" is
  that day, "2 years ago" that month, "a decade ago" that year, "2 hours ago" that minute;
  "3 weeks ago" is that day. "3 days ago" is that day too, where Duckling gives the reference's
  hour 3 days back (a time of day nobody said). "a year ago today", "3 years from today" are
  that day. Approximate counts ("a few", "about 3", "over 2", "2 or 3") are not resolved. "in N
  days" is the future, but in free text only after a future marker (will, 'll, going to, gonna,
  shall) or written "in N days' time" / "N days from now", since "I did it in 2 days" is a
  duration.
* "since X" / "from X on" is ``X/`` (from the start of X, open right); "after X" starts when X
  ends; "before X" ends when X starts (X excluded); "until X" and "through X" end when X ends (X
  included); "from X to Y" and "between X and Y" run from the start of X to the end of Y. "by X"
  is Duckling's "from now until X" when X is a moment still ahead ("by 5pm tomorrow", "by the
  end of next month", to the minute), ``/X`` when X is over ("by 2019"), and not resolved when
  X is a period still ahead ("by May": until May begins, as Duckling has it, or until it ends?).
* Parts of periods follow Duckling: "early / the beginning of <month>" is days 1-10, "mid / the
  middle of" 11-20, "late / the end of" 21 to the last day; "the beginning of <year>" is
  January-March and "the end of <year>" September-December; "the beginning of <week>" is
  Monday-Wednesday and "the end of <week>" Friday-Sunday. Parts Duckling has no convention for
  ("early 2020", "mid-2021", "late next week", "the end of summer") are not resolved. "the week
  of <date>" is that Monday-Sunday week.
* Not resolved: "recently", "soon", "someday", "the other day", decades ("the 90s"), rolling
  periods ("the past week", "the last 3 days", "next few days"), frequencies ("every Tuesday"),
  and anything relative to another event ("the day before", "two weeks after the move").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Final

from membrain.api.errors import AnnotationError, InputError
from membrain.api.models import Precision, TimeSpan
from membrain.temporal import patterns as P
from membrain.temporal.annotation import bracket_regions, format_annotation
from membrain.temporal.readers import applicable
from membrain.temporal.values import (
    STANDALONE,
    Cand,
    Ctx,
    Unit,
    Val,
    edge_of,
    expand,
    place,
    to_span,
    week_of,
)

__all__ = ["TimeMatch", "annotate", "find_times", "resolve"]


@dataclass(frozen=True, slots=True)
class TimeMatch:
    """A determinate time expression found in free text.

    Attributes:
        raw: The expression exactly as it appears in the text.
        start: Offset of its first character.
        end: Offset just past its last character.
        span: What it resolves to.
    """

    raw: str
    start: int
    end: int
    span: TimeSpan


# --------------------------------------------------------------------------- composition


def _day_clocks(cands: list[Cand], ctx: Ctx) -> list[Cand]:
    """Clock times placed on a written day: "tomorrow at 5pm", "3pm on May 7"."""
    days = [c for c in cands if c.kind == "day"]
    clocks = [c for c in cands if c.clock is not None]
    made: list[Cand] = []
    for day in days:
        for clock in clocks:
            assert clock.clock is not None
            if (
                day.end <= clock.start
                and not clock.clock.day_after
                and P.GAP_DAY_CLOCK.fullmatch(ctx.text, day.end, clock.start)
            ):
                start, end = day.start, clock.end
            elif clock.end <= day.start and P.GAP_CLOCK_DAY.fullmatch(
                ctx.text, clock.end, day.start
            ):
                start, end = clock.start, day.end
            else:
                continue
            if day.val is None:  # "at 9am on Saturday": no part of it may stand alone
                made.append(Cand(start, end, None, "dayclock", day.needs))
                continue
            when = day.val.day
            placed = place(clock.clock, when, day.val.hint) if when else None
            if placed is not None:  # "tomorrow at 9" leaves "tomorrow" to stand alone
                made.append(Cand(start, end, placed, "dayclock", day.needs))
    return made


def _day_parts(cands: list[Cand], ctx: Ctx) -> list[Cand]:
    """Parts of a written day: "May 7 in the morning", "the night of the 15th"."""
    made: list[Cand] = []
    for day in cands:
        if day.kind != "day" or day.val is None or day.val.day is None or day.val.hint:
            continue
        after = P.POD_AFTER.match(ctx.text, day.end)
        if after is not None:
            val = replace(day.val, hint=(after["p"] or after["n"]).lower())
            made.append(Cand(day.start, after.end(), val, "day", day.needs))
        before = P.POD_BEFORE.search(ctx.text, max(0, day.start - 24), day.start)
        if before is not None:
            val = replace(day.val, hint=before["p"].lower())
            made.append(Cand(before.start(), day.end, val, "day", day.needs))
    return made


def _placed(cand: Cand, day: date) -> Val | None:
    """A clock candidate placed on a written day (other candidates as they are)."""
    return place(cand.clock, day, None) if cand.clock is not None else cand.val


def _join(x: Cand, y: Cand) -> Val | None:
    first_val, last_val = x.val, y.val
    if x.kind == "clock" and y.kind == "dayclock" and y.val and y.val.first:
        first_val = _placed(x, y.val.first.start.date())  # "from 3pm to 5pm tomorrow"
    elif y.kind == "clock" and x.kind == "dayclock" and x.val and x.val.last:
        last_val = _placed(y, x.val.last.start.date())  # "tomorrow from 3pm to 5pm"
    if first_val is None or last_val is None:
        return None
    first, last = expand(first_val).first, expand(last_val).last
    if first is None or last is None or last.start < first.start:
        return None
    return Val(first, last, interval=True)


def _intervals(cands: list[Cand], ctx: Ctx) -> list[Cand]:
    """Intervals: "from X to Y", "between X and Y", "X - Y"."""
    made: list[Cand] = []
    items = [c for c in cands if c.kind != "open"]
    for x in items:
        for y in items:
            if x.end > y.start or y.start - x.end > 12:
                continue
            gap = P.GAP_INTERVAL.fullmatch(ctx.text, x.end, y.start)
            if gap is None:
                continue
            prefix = P.FROM_BETWEEN.search(ctx.text, max(0, x.start - 9), x.start)
            word = prefix["p"].lower() if prefix else None
            if gap["c"].lower() == "and" and word != "between":
                continue
            if ctx.free:
                needs = (x.needs or frozenset()) | (y.needs or frozenset())
                if word is None and needs and not (x.pairable and y.pairable):
                    continue  # "May to July" pairs; "may to" does not
                if STANDALONE in needs:
                    continue
            made.append(Cand(prefix.start() if prefix else x.start, y.end, _join(x, y), "interval"))
    return made


def _prefixed(cands: list[Cand], ctx: Ctx) -> list[Cand]:
    """Prepositions and edge words: "since May", "before 2020", "in late March", "on May 7"."""
    made: list[Cand] = []
    for cand in cands:
        if cand.kind == "open" or not _may_have_prefix(ctx.text, cand.start):
            continue
        found = P.PREFIX.search(ctx.text, max(0, cand.start - 40), cand.start)
        if found is None or not (found["prep"] or found["edge"]):
            continue
        prep = " ".join(found["prep"].lower().split()) if found["prep"] else None
        edge = " ".join(found["edge"].lower().split()) if found["edge"] else None
        made.extend(_with_prefix(cand, prep, edge, found.start(), ctx))
    return made


_PREFIX_ENDINGS: Final = frozenset(
    "since before to after until till til through thru by from in during on at for of the early"
    " mid late".split()
)


def _may_have_prefix(text: str, start: int) -> bool:
    """A cheap test before the prefix regex: does the word before ``start`` end a prefix?"""
    before = text[max(0, start - 20) : start].rstrip(" -")
    return before[before.rfind(" ") + 1 :].lower() in _PREFIX_ENDINGS


def _licensed(cand: Cand, licence: str | None, ctx: Ctx) -> bool:
    return not ctx.free or cand.needs is None or (licence is not None and licence in cand.needs)


def _with_prefix(
    cand: Cand, prep: str | None, edge: str | None, start: int, ctx: Ctx
) -> list[Cand]:
    if edge is not None:
        if not (_licensed(cand, "edge", ctx) or _licensed(cand, prep, ctx)):
            return []
        val = cand.val
        if edge == "week of":  # the Monday-Sunday week of a day; a Sunday starts a US week
            day = val.day if val is not None and cand.kind == "day" else None
            if cand.kind != "day":
                return []
            val = None if day is None or day.weekday() == 6 else week_of(day)
        elif cand.kind in ("day", "clock", "dayclock"):
            # "late tonight", "late last night" (whole expressions only: in "I stayed up late
            # last night" the "late" is the staying up)
            if edge != "late" or ctx.free or val is None or val.hint not in ("evening", "night"):
                return []
            val = replace(val, hint="late")
        else:
            val = edge_of(edge.split()[0], val)
        if prep == "at":  # "at the end of April"
            return [Cand(start, cand.end, val, "period")]
        found = P.EDGE_WORD.search(ctx.text, start, cand.start) if prep else None
        cand = Cand(found.start() if found else start, cand.end, val, "period")
        if prep is None:
            return [cand]
    if prep is None or not _licensed(cand, prep, ctx):
        return []
    val, end, kind = cand.val, cand.end, "open"
    if prep == "by":
        return [Cand(start, end, None if val is None else _by(val, edge, cand.kind, ctx), kind)]
    if prep in ("in", "during", "on", "at", "for"):
        fits = {
            "in": cand.kind not in ("day", "clock", "dayclock"),
            "during": cand.kind not in ("day", "clock", "dayclock"),
            "on": cand.kind in ("day", "dayclock"),
            # only holidays: "at Christmas", "for Thanksgiving" (and "for" is left out)
            "at": cand.kind == "day" and cand.needs is not None and "for" in cand.needs,
            "for": cand.kind == "day" and cand.needs is not None and "for" in cand.needs,
        }[prep]
        if not fits:
            return []
        return [Cand(cand.start if prep == "for" else start, end, val, cand.kind)]
    if prep == "from":
        if cand.kind == "interval":
            return [Cand(start, end, val, "interval")]  # "from July 13-15"
        onwards = P.ONWARDS.match(ctx.text, end)
        if onwards is None:
            return []  # "from X" alone is half of "from X to Y"
        end = onwards.end()
    if val is None:
        return [Cand(start, end, None, kind)]
    val = expand(val)  # "since last night": from yesterday 18:00
    if prep in ("since", "from"):
        if prep == "since" and P.CAUSAL.match(ctx.text, end):
            return []  # "since today is a holiday": because, not from
        opened = Val(val.first, None, interval=True) if val.first else None
    elif prep in ("before", "prior to"):
        opened = Val(None, val.first.shifted(-1), interval=True) if val.first else None
    elif prep == "after":
        opened = Val(val.last.shifted(1), None, interval=True) if val.last else None
    else:  # until, till, through: X included
        opened = Val(None, val.last, interval=True) if val.last else None
    return [Cand(start, end, opened, kind)]


def _by(val: Val, edge: str | None, kind: str, ctx: Ctx) -> Val | None:
    """By X: from now until X while X is ahead, up to X (included) once X is past.

    Ahead, only a moment is clear: "by 2pm" (now to 14:00), "by the end of next month" (now to
    its last minute); "by May" said in March (until May begins, as Duckling has it, or ends?)
    is not resolved. "by 2019" said in 2023 is ``/2019``.
    """
    val = expand(val)
    if val.first is None or val.last is None:
        return None
    now = ctx.local.replace(second=0, microsecond=0)
    if edge == "end of" or (kind in ("clock", "dayclock") and not val.interval):
        unit = val.last if edge else val.first
        moment = _wall(unit.after() if edge else unit.start, unit, ctx)
        if moment <= now:
            return Val(None, val.last if edge else val.first.shifted(-1), interval=True)
        last = Unit(moment - timedelta(minutes=1), Precision.DATETIME)
        return Val(Unit(now, Precision.DATETIME), last, interval=True)
    ended = _wall(val.last.after(), val.last, ctx) <= now
    return Val(None, val.last, interval=True) if ended else None


def _wall(moment: datetime, unit: Unit, ctx: Ctx) -> datetime:
    """A unit's moment on the reference's wall clock (a clock time may carry its own zone)."""
    if unit.zone is None:
        return moment
    return moment.replace(tzinfo=unit.zone).astimezone(ctx.zone).replace(tzinfo=None)


def _candidates(text: str, ctx: Ctx) -> list[Cand]:
    kinds = P.features(text)
    if not kinds:
        return []
    cands: list[Cand] = []
    for rank, rule in applicable(frozenset(kinds)):
        for match in rule.pattern.finditer(text):
            found = rule.read(match, ctx)
            if found is not None:
                found.rank = rank
                cands.append(found)
    if cands:
        cands.extend(_day_parts(cands, ctx))
        cands.extend(_day_clocks(cands, ctx))
        cands.extend(_intervals(cands, ctx))
        cands.extend(_prefixed(cands, ctx))
    return cands


def _select(cands: list[Cand], protected: list[tuple[int, int]]) -> list[Cand]:
    """The longest non-overlapping candidates; an indeterminate one still claims its text."""
    pool = [
        c
        for c in cands
        if c.needs is None and not any(c.start < b and a < c.end for a, b in protected)
    ]
    pool.sort(key=lambda c: (c.start - c.end, c.val is None, c.start, c.rank))
    taken: list[Cand] = []
    for cand in pool:
        if all(cand.end <= t.start or t.end <= cand.start for t in taken):
            taken.append(cand)
    return sorted(taken, key=lambda c: c.start)


def _context(text: str, reference: datetime, free: bool) -> Ctx:
    if not isinstance(reference, datetime):
        raise InputError(f"the reference must be a datetime, got {type(reference).__name__}")
    if reference.tzinfo is None or reference.utcoffset() is None:
        return Ctx(reference.replace(tzinfo=None), UTC, text, free)
    return Ctx(reference.replace(tzinfo=None), reference.tzinfo, text, free)


# --------------------------------------------------------------------------- public API


_OUT_OF_CALENDAR = (OverflowError, ValueError)
"""What date arithmetic raises past year 1 or 9999: the resolver declines such a time."""


def resolve(expression: str, reference: datetime) -> TimeSpan | None:
    """Resolve one time expression against the time a message was sent.

    Args:
        expression: The expression alone, e.g. ``"yesterday"``, ``"last week"``,
            ``"since 2020"``, ``"May 7, 2023"``, ``"at 9:30 pm"``. Bare forms that free text
            does not read as times without a preposition ("May", "1974", "2/15") are accepted.
        reference: The message time; naive means UTC. Calendar values are taken on its local
            date, clock times in its zone.

    Returns:
        The span, or ``None`` when the expression is indeterminate ("recently", "soon"),
        ambiguous ("next Friday" said on a Tuesday, "at 9:30") or not a time.

    Raises:
        InputError: ``reference`` is not a datetime.

    Example:
        >>> from datetime import datetime
        >>> from membrain.temporal import format_resolved
        >>> format_resolved(resolve("last week", datetime(2023, 5, 8, 13, 56)))
        '2023-05-01/2023-05-07'
    """
    text = expression.strip().rstrip(",;!?").rstrip()
    if text.endswith(".") and not text.lower().endswith(("a.m.", "p.m.")):
        text = text[:-1].rstrip()
    ctx = _context(text, reference, free=False)
    if not text:
        return None
    try:
        whole = [c for c in _candidates(text, ctx) if c.start == 0 and c.end == len(text)]
        whole.sort(key=lambda c: (c.val is None, c.rank))
        if not whole or whole[0].val is None:
            return None
        return to_span(whole[0].val, ctx)
    except _OUT_OF_CALENDAR:  # "yesterday" said on 0001-01-01 has no date to give
        return None


def find_times(text: str, reference: datetime) -> list[TimeMatch]:
    """Find every determinate time expression in free text.

    Matches are the longest that do not overlap. Text inside brackets (entity refs and existing
    ``[raw::resolved]`` annotations) is never read. Bare month names, years, holidays and
    ``M/D`` dates count only after a preposition ("in May", "since 2019", "on 5/7"), and
    "in N days" only after a future marker (see the module notes).

    Args:
        text: A chat message or fact text.
        reference: The message time; naive means UTC.

    Returns:
        The matches in order of position.

    Raises:
        InputError: ``reference`` is not a datetime.

    Example:
        >>> from datetime import datetime
        >>> [m.raw for m in find_times("We met yesterday, in May 2022.", datetime(2023, 5, 8))]
        ['yesterday', 'in May 2022']
    """
    ctx = _context(text, reference, free=True)
    found: list[TimeMatch] = []
    try:
        candidates = _select(_candidates(text, ctx), bracket_regions(text))
    except _OUT_OF_CALENDAR:  # a message at the calendar's edge: its times decline
        return []
    for cand in candidates:
        try:
            span = to_span(cand.val, ctx) if cand.val is not None else None
        except _OUT_OF_CALENDAR:
            span = None
        if span is not None:
            found.append(TimeMatch(text[cand.start : cand.end], cand.start, cand.end, span))
    return found


def annotate(text: str, reference: datetime) -> str:
    """Write every determinate time expression in ``text`` as ``[raw::resolved]``.

    Existing annotations and bracketed entity refs are left untouched.

    Args:
        text: A chat message or fact text.
        reference: The message time; naive means UTC.

    Returns:
        The annotated text (the text itself when nothing is found).

    Raises:
        InputError: ``reference`` is not a datetime.

    Example:
        >>> from datetime import datetime
        >>> annotate("[Tom] moved here last year.", datetime(2023, 5, 8))
        '[Tom] moved here [last year::2022].'
    """
    pieces: list[str] = []
    position = 0
    for match in find_times(text, reference):
        try:
            written = format_annotation(match.raw, match.span)
        except AnnotationError:  # pragma: no cover - every resolved span has a written form
            continue
        pieces += [text[position : match.start], written]
        position = match.end
    return "".join([*pieces, text[position:]]) if pieces else text
