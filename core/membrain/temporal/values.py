"""Values, calendar arithmetic and clock placement of the time resolver (internal).

The resolver works in the reference's local wall clock: a :class:`Val` is a first and a last
included :class:`Unit` (a year, month, day or minute starting at a naive local datetime), and
:func:`to_span` turns it into a UTC :class:`~membrain.api.models.TimeSpan` at the end: calendar
units are floating (midnight UTC of the local date), clock units are converted through their zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from typing import Final

from dateutil.easter import easter
from dateutil.relativedelta import FR, MO, SA, SU, TH, TU, WE, relativedelta

from membrain.api.errors import InputError
from membrain.api.models import Precision, TimeSpan

__all__ = [
    "NEAR_MONTHS",
    "STANDALONE",
    "WEEKDAY_FNS",
    "Cand",
    "Clock",
    "Ctx",
    "Tod",
    "Unit",
    "Val",
    "edge_of",
    "expand",
    "holiday_date",
    "make_date",
    "monday_of",
    "month_start",
    "offset",
    "pair",
    "parse_zone",
    "place",
    "place_today",
    "single",
    "to_span",
    "week_of",
    "written_year",
]

_ORDER: Final = {Precision.YEAR: 0, Precision.MONTH: 1, Precision.DAY: 2, Precision.DATETIME: 3}
WEEKDAY_FNS: Final = (MO, TU, WE, TH, FR, SA, SU)
NEAR_MONTHS: Final = 5
"""How far (in months) a date without a year may be from the reference to take its year."""
STANDALONE: Final = "standalone"
"""A licence no preposition gives: the form counts only as a whole expression ("2014-10")."""
PODS: Final = {
    "morning": (0, 12),
    "afternoon": (12, 19),
    "evening": (18, 24),
    "night": (18, 24),
    "late": (21, 24),
}
"""Parts of the day (Duckling's hours) -> (first hour, hour it ends); "late" is late at night."""
_EDGE_PARTS: Final = {
    "early": "begin",
    "beginning": "begin",
    "start": "begin",
    "mid": "mid",
    "middle": "mid",
    "late": "end",
    "end": "end",
}


@dataclass(frozen=True, slots=True)
class Unit:
    """One calendar or clock unit, in local wall-clock time."""

    start: datetime
    precision: Precision
    fine: bool = False  # a datetime unit of one second rather than one minute
    zone: tzinfo | None = None  # a zone written with the clock time (None: the reference's)

    def step(self) -> timedelta | relativedelta:
        """The length of the unit."""
        if self.precision is Precision.YEAR:
            return relativedelta(years=1)
        if self.precision is Precision.MONTH:
            return relativedelta(months=1)
        if self.precision is Precision.DAY:
            return timedelta(days=1)
        return timedelta(seconds=1) if self.fine else timedelta(minutes=1)

    def after(self) -> datetime:
        """Where the unit ends (exclusive)."""
        end: datetime = self.start + self.step()
        return end

    def shifted(self, sign: int) -> Unit:
        """The unit just after (``sign`` > 0) or just before this one."""
        moved: datetime = self.start + self.step() if sign > 0 else self.start - self.step()
        return replace(self, start=moved)


@dataclass(frozen=True, slots=True)
class Val:
    """A resolved value: its first and last included units (``None``: open on that side)."""

    first: Unit | None
    last: Unit | None
    interval: bool = False
    hint: str | None = None  # a part of the day written with a day ("morning", "night", ...)

    @property
    def day(self) -> date | None:
        """The date of a single day value, else ``None``."""
        if self.interval or self.first is None or self.first.precision is not Precision.DAY:
            return None
        return self.first.start.date()


@dataclass(frozen=True, slots=True)
class Tod:
    """A time of day as written, before am/pm is settled."""

    hour: int
    minute: int = 0
    second: int = 0
    meridiem: str | None = None  # "am" or "pm"
    exact: bool = False  # a 24-hour time beyond doubt ("09:30", "21:30", "00:15", noon)
    offset: int = 0  # minutes to add once the hour is known ("a quarter to 3" = 3:00 - 15)


@dataclass(frozen=True, slots=True)
class Clock:
    """A time of day (or a range of them) not yet placed on a day."""

    first: Tod
    last: Tod | None = None
    hint: str | None = None
    zone: tzinfo | None = None
    day_after: bool = False  # a bare hour read only with the day written after it ("8 tonight")


@dataclass(slots=True)
class Ctx:
    """The reference time and the text being read."""

    local: datetime  # the reference's wall clock, naive
    zone: tzinfo
    text: str
    free: bool  # reading free text (True) or one whole expression (False)

    @property
    def today(self) -> date:
        """The reference's local date."""
        return self.local.date()


@dataclass(slots=True)
class Cand:
    """A candidate expression: a stretch of text and its value (``None``: indeterminate)."""

    start: int
    end: int
    val: Val | None
    kind: str = "period"  # period | day | clock | dayclock | interval | open
    needs: frozenset[str] | None = None  # licences that make a bare form a time; None: free
    clock: Clock | None = None
    pairable: bool = False  # a bare month or year that may pair up: "May to July"
    rank: int = 0


def single(start: datetime | date, precision: Precision, hint: str | None = None) -> Val:
    """One unit of ``precision`` starting at ``start`` (a date starts at midnight)."""
    moment = start if isinstance(start, datetime) else datetime.combine(start, time())
    unit = Unit(moment, precision)
    return Val(unit, unit, hint=hint)


def pair(first: date, last: date, precision: Precision) -> Val:
    """An interval from the unit at ``first`` to the unit at ``last``, both included."""
    return Val(single(first, precision).first, single(last, precision).first, interval=True)


def to_span(val: Val, ctx: Ctx) -> TimeSpan | None:
    """The UTC span of a value: calendar units floating, clock units through their zone."""

    def instant(moment: datetime, unit: Unit) -> datetime:
        if unit.precision is Precision.DATETIME:
            return moment.replace(tzinfo=unit.zone or ctx.zone).astimezone(UTC)
        return moment.replace(tzinfo=UTC)

    val = expand(val)
    ends = [u for u in (val.first, val.last) if u is not None]
    try:
        start = instant(val.first.start, val.first) if val.first is not None else None
        end = instant(val.last.after(), val.last) if val.last is not None else None
        precision = max((u.precision for u in ends), key=_ORDER.__getitem__)
        return TimeSpan(start=start, end=end, precision=precision, interval=val.interval)
    except (InputError, OverflowError, ValueError):
        return None


def expand(val: Val) -> Val:
    """A part of a day ("tonight", "yesterday morning") as its clock interval; others as is."""
    day = val.day
    if day is None or val.hint is None:
        return val
    first, end = PODS[val.hint]
    midnight = datetime.combine(day, time())
    start = Unit(midnight + timedelta(hours=first), Precision.DATETIME)
    last = Unit(midnight + timedelta(hours=end, minutes=-1), Precision.DATETIME)
    return Val(start, last, interval=True)


def edge_of(word: str, val: Val | None) -> Val | None:
    """Duckling's part of a month, year or week, or None where it has no convention.

    Months: early / the beginning of = days 1-10, mid / the middle of = 11-20, late / the end of
    = 21 to the last day. Years: the beginning of = January-March, the end of =
    September-December. Weeks: the beginning of = Monday-Wednesday, the end of = Friday-Sunday.
    """
    part = _EDGE_PARTS.get(word)
    if part is None or val is None or val.first is None or val.last is None:
        return None
    start, precision = val.first.start.date(), val.first.precision
    if precision is Precision.MONTH and not val.interval:
        last_day = (start + relativedelta(day=31)).day
        first, last = {"begin": (1, 10), "mid": (11, 20), "end": (21, last_day)}[part]
        return pair(start.replace(day=first), start.replace(day=last), Precision.DAY)
    if part == "mid" or word in ("early", "late"):
        return None  # "mid-2020", "early next week": no convention to follow
    if precision is Precision.YEAR and not val.interval:
        first, last = (1, 3) if part == "begin" else (9, 12)
        return pair(start.replace(month=first), start.replace(month=last), Precision.MONTH)
    is_week = val.last.start.date() - start == timedelta(days=6) and start.weekday() == 0
    if precision is Precision.DAY and val.interval and is_week:
        first, last = (0, 2) if part == "begin" else (4, 6)
        return pair(start + timedelta(days=first), start + timedelta(days=last), Precision.DAY)
    return None


# --------------------------------------------------------------------------- calendar


_STEPS: Final = {
    "day": relativedelta(days=1),
    "week": relativedelta(weeks=1),
    "fortnight": relativedelta(weeks=2),
    "month": relativedelta(months=1),
    "year": relativedelta(years=1),
    "decade": relativedelta(years=10),
}


def offset(n: int, unit: str, sign: int, ctx: Ctx, day: bool = False) -> Val:
    """N units from the reference, at the grain of the unit.

    "3 days ago" and "2 weeks ago" are that day, "3 months ago" that month, "2 years ago" and
    "a decade ago" that year, "2 hours ago" that minute. Duckling answers one grain finer ("3
    months ago" = that day); in chat that invents a precision the speaker did not give, so we
    keep the unit's grain (it costs 4 of Duckling's answers; the benchmark counts them coarser).
    ``day``: "a year ago today", "3 years from today" is that very day.
    """
    if unit in ("hour", "minute"):
        delta = timedelta(hours=n) if unit == "hour" else timedelta(minutes=n)
        return single(
            (ctx.local + sign * delta).replace(second=0, microsecond=0), Precision.DATETIME
        )
    moved: date = ctx.today + sign * n * _STEPS[unit]
    if day or unit in ("day", "week", "fortnight"):
        return single(moved, Precision.DAY)
    if unit == "month":
        return single(moved.replace(day=1), Precision.MONTH)
    return single(moved.replace(month=1, day=1), Precision.YEAR)


def monday_of(day: date) -> date:
    """The Monday of the (Monday-Sunday) week of ``day``."""
    return day - timedelta(days=day.weekday())


def month_start(day: date, offset: int = 0) -> date:
    """The first day of the month ``offset`` months from the month of ``day``."""
    start: date = day.replace(day=1) + relativedelta(months=offset)
    return start


def make_date(year: int | None, month: int, day: int | None) -> date | None:
    """The date, or None when it does not exist (or a part is missing)."""
    if year is None or day is None:
        return None
    try:
        return date(year, month, day)
    except ValueError:
        return None


def written_year(text: str | None, ctx: Ctx, month: int | None = None) -> int | None:
    """A written year; two-digit years take the century nearest the reference.

    With no year written, the reference's year, except that a ``month`` more than five months
    from the reference's is ambiguous ("in January" said in December: which January?).
    """
    if text is None:
        if month is not None and abs(month - ctx.today.month) > NEAR_MONTHS:
            return None
        return ctx.today.year
    digits = text.lstrip("'’")
    value = int(digits)
    if len(digits) == 2:
        value += ctx.today.year // 100 * 100
        if value > ctx.today.year + 50:
            value -= 100
        elif value <= ctx.today.year - 50:
            value += 100
    return value if 1 <= value <= 9998 else None


_FIXED_HOLIDAYS: Final = {
    "christmas_eve": (12, 24),
    "christmas_day": (12, 25),
    "christmas": (12, 25),
    "new_years_eve": (12, 31),
    "new_years_day": (1, 1),
    "st_patricks_day": (3, 17),
    "valentines_day": (2, 14),
    "halloween": (10, 31),
    "veterans_day": (11, 11),
    "boxing_day": (12, 26),
    "cinco_de_mayo": (5, 5),
}
_EASTER_OFFSETS: Final = {
    "easter": 0,
    "easter_sunday": 0,
    "easter_monday": 1,
    "good_friday": -2,
    "maundy_thursday": -3,
    "palm_sunday": -7,
    "ash_wednesday": -46,
    "shrove_tuesday": -47,
    "pentecost": 49,
    "whit_monday": 50,
    "trinity_sunday": 56,
}
_THANKSGIVING: Final = relativedelta(month=11, day=1, weekday=TH(4))
_NTH_HOLIDAYS: Final = {
    "thanksgiving": (_THANKSGIVING, 0),
    "thanksgiving_day": (_THANKSGIVING, 0),
    "black_friday": (_THANKSGIVING, 1),
    "cyber_monday": (_THANKSGIVING, 4),
    "fathers_day": (relativedelta(month=6, day=1, weekday=SU(3)), 0),
    "memorial_day": (relativedelta(month=5, day=31, weekday=MO(-1)), 0),
    "labor_day": (relativedelta(month=9, day=1, weekday=MO(1)), 0),
    "mlk_day": (relativedelta(month=1, day=1, weekday=MO(3)), 0),
    "presidents_day": (relativedelta(month=2, day=1, weekday=MO(3)), 0),
}


def holiday_date(key: str, year: int) -> date | None:
    """The date of a holiday (a key of :data:`~.patterns.HOLIDAY_NAMES`) in ``year``."""
    if not 1 <= year <= 9998:
        return None
    if key in _FIXED_HOLIDAYS:
        return date(year, *_FIXED_HOLIDAYS[key])
    if key in _EASTER_OFFSETS:
        return easter(year) + timedelta(days=_EASTER_OFFSETS[key])
    if key in _NTH_HOLIDAYS:
        rule, days = _NTH_HOLIDAYS[key]
        day: date = date(year, 1, 1) + rule
        return day + timedelta(days=days)
    return None


def _hour(tod: Tod, hint: str | None) -> int | None:
    """The 24-hour hour of a written time of day, or None when am/pm cannot be told."""
    hour, meridiem = tod.hour, tod.meridiem
    if hour > 23:
        return None
    if meridiem is not None:
        if not 1 <= hour <= 12 or (meridiem == "am" and hour == 12):
            return None  # "15 pm" is malformed; "12 am" (which midnight?) is ambiguous
        if (meridiem == "am" and hint in ("afternoon", "evening", "night")) or (
            meridiem == "pm" and hint == "morning"
        ):
            return None
        return hour % 12 + (12 if meridiem == "pm" else 0)
    if tod.exact:
        if (hint == "morning" and hour >= 12) or (hint in ("evening", "night") and hour < 12):
            return None
        return hour
    ranges = {"morning": (1, 11, 0), "afternoon": (1, 6, 12), "evening": (4, 11, 12)}
    low, high, add = ranges.get(hint or "", (5, 11, 12) if hint == "night" else (1, 0, 0))
    return hour + add if low <= hour <= high else None


def place(clock: Clock, day: date, hint: str | None) -> Val | None:
    """A clock time (or range) on a day, or None when it cannot be placed unambiguously."""
    if hint and clock.hint and hint != clock.hint and {hint, clock.hint} != {"evening", "night"}:
        return None
    hint = clock.hint or hint
    units: list[Unit] = []
    for tod in (clock.first, clock.last or clock.first):
        hour = _hour(tod, hint)
        if hour is None:
            return None
        moment = datetime.combine(day, time(hour, tod.minute, tod.second))
        moment += timedelta(minutes=tod.offset)
        units.append(Unit(moment, Precision.DATETIME, bool(tod.second), clock.zone))
    if units[1].start < units[0].start:
        return None
    return Val(units[0], units[1], interval=clock.last is not None)


def place_today(clock: Clock, ctx: Ctx) -> Val | None:
    """A clock time written without a day, on the reference's day; None once that has passed.

    "at 3am" said at 4:30 may be this morning's ("I woke up at 3am") or tomorrow's ("my flight
    is at 3am"), so a time already past at the reference minute is not resolved.
    """
    val = place(clock, ctx.today, None)
    if val is None or val.first is None:
        return None
    start = val.first.start.replace(tzinfo=val.first.zone or ctx.zone)
    now = ctx.local.replace(second=0, microsecond=0, tzinfo=ctx.zone)
    return None if start < now else val


def parse_zone(text: str) -> tzinfo | None:
    """A fixed zone from "UTC", "GMT+2", "PST", ... or None when unknown or ambiguous."""
    word = re.sub(r"\s", "", text.lower())
    fixed = {"z": 0, "utc": 0, "gmt": 0, "est": -5, "edt": -4, "cst": -6, "cdt": -5}
    fixed |= {"mst": -7, "mdt": -6, "pst": -8, "pdt": -7, "cet": 1, "cest": 2, "bst": 1}
    if word in fixed:
        return timezone(timedelta(hours=fixed[word]))
    found = re.fullmatch(r"(?:utc|gmt)?([+-])(\d{1,2}):?(\d{2})?", word)
    if found is None:
        return None
    offset = timedelta(hours=int(found[2]), minutes=int(found[3] or 0))
    if offset > timedelta(hours=14):
        return None
    return timezone(-offset if found[1] == "-" else offset)


def week_of(day: date) -> Val:
    """The Monday-Sunday week of ``day`` as a day interval."""
    return pair(monday_of(day), monday_of(day) + timedelta(days=6), Precision.DAY)
