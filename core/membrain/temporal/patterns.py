"""Vocabulary and regular expressions of the English time-expression resolver.

Everything here is data: word tables, number and ordinal parsing, and the compiled patterns the
resolver in :mod:`membrain.temporal.resolver` matches and reads. Patterns are written with
``<NAME>`` placeholders filled from :data:`PARTS` by :func:`build` and compiled
case-insensitively. Each rule pattern names the groups its reader in the resolver uses.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "HOLIDAYS_NEEDING_CONTEXT",
    "HOLIDAY_NAMES",
    "MONTHS",
    "ORDINALS",
    "PARTS",
    "SEASONS",
    "UNITS",
    "WEEKDAYS",
    "build",
    "features",
    "number",
    "ordinal",
]

MONTHS: Final[dict[str, int]] = {
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
"""Month names and abbreviations -> month number."""

WEEKDAYS: Final[dict[str, int]] = {
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
    "mon": 0,
    "tue": 1,
    "tues": 1,
    "wed": 2,
    "weds": 2,
    "thu": 3,
    "thur": 3,
    "thurs": 3,
    "fri": 4,
    "sat": 5,
    "sun": 6,
}
"""Weekday names and abbreviations -> ``date.weekday()`` (Monday is 0)."""

SEASONS: Final[dict[str, tuple[int, int]]] = {
    "spring": (3, 5),
    "summer": (6, 8),
    "fall": (9, 11),
    "autumn": (9, 11),
    "winter": (12, 2),
}
"""Northern-hemisphere meteorological seasons -> (first month, last month)."""

UNITS: Final[dict[str, str]] = {
    "min": "minute",
    "mins": "minute",
    "minute": "minute",
    "minutes": "minute",
    "hr": "hour",
    "hrs": "hour",
    "hour": "hour",
    "hours": "hour",
    "day": "day",
    "days": "day",
    "week": "week",
    "weeks": "week",
    "fortnight": "fortnight",
    "fortnights": "fortnight",
    "month": "month",
    "months": "month",
    "year": "year",
    "years": "year",
    "yr": "year",
    "yrs": "year",
    "decade": "decade",
    "decades": "decade",
}
"""Unit words -> canonical unit."""

_SMALL = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_ORDINAL_SMALL = (
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()

ORDINALS: Final[dict[str, int]] = {word: i for i, word in enumerate(_ORDINAL_SMALL) if i}
"""Ordinal words 1-31 -> number (``twenty-first`` and ``twenty first`` are both listed)."""
ORDINALS.update({"twentieth": 20, "thirtieth": 30})
for _i, _word in enumerate(_ORDINAL_SMALL[1:10], start=1):
    ORDINALS[f"twenty-{_word}"] = 20 + _i
    ORDINALS[f"twenty {_word}"] = 20 + _i
ORDINALS["thirty-first"] = ORDINALS["thirty first"] = 31

_NUMBER_WORDS: dict[str, int] = {word: i for i, word in enumerate(_SMALL)}
_NUMBER_WORDS.update(_TENS)
_NUMBER_WORDS.update({"a": 1, "an": 1, "a couple of": 2, "a couple": 2, "couple of": 2})

HOLIDAY_NAMES: Final[dict[str, str]] = {
    r"christmas\s+eve|xmas\s+eve": "christmas_eve",
    r"christmas\s+day|xmas\s+day": "christmas_day",
    r"christmas|xmas": "christmas",
    r"new\s+year['’]?s\s+eve|nye": "new_years_eve",
    r"new\s+year['’]?s\s+day": "new_years_day",
    r"(?:st\.?|saint)\s+(?:patrick|paddy)['’]?s\s+day": "st_patricks_day",
    r"valentine(?:['’]?s)?\s+day": "valentines_day",
    r"halloween": "halloween",
    r"thanksgiving\s+day": "thanksgiving_day",
    r"thanksgiving": "thanksgiving",
    r"black\s+friday": "black_friday",
    r"cyber\s+monday": "cyber_monday",
    r"easter\s+sunday": "easter_sunday",
    r"easter\s+mon(?:day)?": "easter_monday",
    r"easter": "easter",
    r"good\s+friday": "good_friday",
    r"maundy\s+thursday": "maundy_thursday",
    r"palm\s+sunday": "palm_sunday",
    r"ash\s+wednesday": "ash_wednesday",
    r"mardi\s+gras|shrove\s+tuesday|pancake\s+day": "shrove_tuesday",
    r"pentecost|whit\s+sunday": "pentecost",
    r"trinity\s+sunday": "trinity_sunday",
    r"whit\s+monday": "whit_monday",
    r"father['’]?s\s+day": "fathers_day",
    r"memorial\s+day": "memorial_day",
    r"labor\s+day": "labor_day",
    r"(?:mlk|martin\s+luther\s+king(?:\s+jr\.?)?(?:['’]?s)?)\s+day": "mlk_day",
    r"president['’]?s['’]?\s+day": "presidents_day",
    r"veteran['’]?s['’]?\s+day": "veterans_day",
    r"boxing\s+day": "boxing_day",
    r"cinco\s+de\s+mayo": "cinco_de_mayo",
    # Named but not resolvable without a locale or a lunisolar calendar: matched so that they
    # block their parts ("Mother's Day" must not become a bare "day"), resolved to nothing.
    r"mother['’]?s\s+day|labour\s+day|independence\s+day|chinese\s+new\s+year|lunar\s+new\s+year"
    r"|diwali|eid(?:\s+al-?(?:fitr|adha))?|ramadan|hanukk?ah|chanukah|passover"
    r"|rosh\s+hashanah?|yom\s+kippur": "unresolvable",
}
"""Holiday name patterns -> holiday key (US dates where countries differ)."""

HOLIDAYS_NEEDING_CONTEXT: Final[frozenset[str]] = frozenset(
    {"christmas", "halloween", "thanksgiving", "easter", "black_friday", "unresolvable"}
)
"""Holidays that are often adjectives ("Christmas tree") and need a preposition in free text."""

_MONTH_FULL = "|".join(k for k, v in MONTHS.items() if len(k) > 4 or k in ("may", "june", "july"))
_MONTH_ABBR = "|".join(k for k in MONTHS if len(k) <= 4 and k not in ("may", "june", "july"))
_WEEKDAY_FULL = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_ORDINAL_WORDS = "|".join(sorted((w.replace(" ", r"\s+") for w in ORDINALS), key=len, reverse=True))
_NUMBER = "|".join(
    [r"\d{1,3}", r"a\s+couple(?:\s+of)?", r"couple\s+of"]
    + [rf"{t}(?:[-\s](?:one|two|three|four|five|six|seven|eight|nine)(?![a-z]))?" for t in _TENS]
    + sorted(_SMALL[1:], key=len, reverse=True)
    + ["an", "a"]
)

PARTS: Final[dict[str, str]] = {
    "MONTH": rf"(?:(?:{_MONTH_FULL})(?![a-z])|(?:{_MONTH_ABBR})(?![a-z])\.?)",
    "MONTHFULL": rf"(?:{_MONTH_FULL}|sept)(?![a-z])",
    "WEEKDAY": rf"(?:{_WEEKDAY_FULL})(?![a-z])",
    "WEEKDAYREL": rf"(?:{_WEEKDAY_FULL}|tues|thurs|weds)(?![a-z])",
    "WEEKDAYANY": rf"(?:(?:{_WEEKDAY_FULL})(?![a-z])|(?:tues|thurs|thur|weds|mon|tue|wed|thu|fri"
    r"|sat|sun)(?![a-z])\.?)",
    "WEEKDAYS": rf"(?:{_WEEKDAY_FULL})s(?![a-z])",
    "DAYNUM": r"(?:3[01]|[12]\d|0?[1-9])(?!\d)",
    "ORD": r"(?:st|nd|rd|th)",
    "ORDWORD": rf"(?:{_ORDINAL_WORDS})(?![a-z])",
    "YEAR": r"(?<![\d.,$£€])[12]\d{3}(?![\d%]|[a-z])",
    "SHORTYEAR": r"['’]\d{2}(?![\d%]|[a-z])",
    "NUMBER": rf"(?<![\w.,\-–])(?:{_NUMBER})(?![a-z\d])",
    "UNIT": r"(?:" + "|".join(sorted(UNITS, key=len, reverse=True)) + r")(?![a-z])",
    "MER": r"(?:a\.m\.|p\.m\.|a\.m|p\.m|a\s?m|p\s?m)(?![a-z])",
    "HOURWORD": r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)(?![a-z])",
    "TZ": r"(?:(?:utc|gmt)(?:[+-]\d{1,2}(?::?\d{2})?)?|[ecmp][sd]t|cest|cet|bst)(?![a-z])",
    "SEASON": r"(?:spring|summer|fall|autumn|winter)(?![a-z])",
    "HOLIDAY": "(?:" + "|".join(HOLIDAY_NAMES) + r")(?![\w'’])",
    "POD": r"(?:morning|afternoon|evening|night)(?![a-z])",
    "REL": r"(?:this\s+past|this\s+coming|the\s+coming|last|this|next|current|coming|upcoming"
    r"|past|previous|following)",
}
"""Pattern fragments, referenced as ``<NAME>`` in :func:`build` templates."""

_PLACEHOLDER = re.compile(r"<([A-Z]+)>")


def build(template: str) -> re.Pattern[str]:
    """Compile ``template`` case-insensitively after replacing ``<NAME>`` with :data:`PARTS`."""
    return re.compile(
        _PLACEHOLDER.sub(lambda m: PARTS.get(m.group(1), m.group(0)), template), re.IGNORECASE
    )


def number(text: str) -> int | None:
    """The value of a count written in digits or words ("3", "three", "twenty-one", "a couple")."""
    words = " ".join(text.lower().replace("-", " ").split())
    if words.isdigit():
        return int(words)
    if words in _NUMBER_WORDS:
        return _NUMBER_WORDS[words]
    parts = words.split(" ")
    if len(parts) == 2 and parts[0] in _TENS and parts[1] in _NUMBER_WORDS:
        return _TENS[parts[0]] + _NUMBER_WORDS[parts[1]]
    return None


def ordinal(text: str) -> int | None:
    """The value of a day ordinal ("7", "7th", "seventh", "twenty-first")."""
    cleaned = " ".join(text.lower().split())
    digits = cleaned.rstrip("stndrh")
    if digits.isdigit():
        return int(digits)
    return ORDINALS.get(cleaned)


# --------------------------------------------------------------------------- rule patterns

_DAY = r"(?:<DAYNUM>)<ORD>?"
_CONNECT = r"(?P<c>-|–|—|to|through|thru|till|until|and)"
_TZ_SUFFIX = r"(?:\s*(?P<tzp>\()?(?P<tz><TZ>)(?(tzp)\)))?"
_DAY_POD = r"in\s+the\s+(?:morning|afternoon|evening)|at\s+night"

RELDAY = build(
    r"\b(?P<w>(?:the\s+)?day\s+before\s+yesterday|(?:the\s+)?day\s+after\s+tomorrow|today"
    r"|tonight|tonite|yesterday|tomorrow|tmrw|last\s+night|this\s+(?:morning|afternoon"
    r"|evening))(?:\s+(?P<pod><POD>))?\b"
)
"""today, tonight, yesterday, tomorrow (morning), the day before yesterday, last night."""
NOW = build(r"\b(?P<w>right\s+now|just\s+now|at\s+the\s+moment|now)\b")
AGO = build(
    r"(?<![\w.,\-–])(?P<q>\b(?:about|around|over|almost|nearly|roughly|approximately"
    r"|more\s+than|less\s+than|under|at\s+least|like|some)\s+)?(?P<n><NUMBER>)\s+(?P<u><UNIT>)"
    r"\s+(?P<dir>ago|back|from\s+now|from\s+today|hence)\b(?P<today>\s+today\b)?"
)
"""3 days ago, a couple of weeks back, two years from now, a year ago today (``q``: about)."""
WEEKDAYS_AGO = build(r"(?P<n><NUMBER>)\s+(?P<wd><WEEKDAYS>)\s+(?:ago|back)\b")
IN_COUNT = build(
    r"\bin\s+(?P<n><NUMBER>)\s+(?P<u><UNIT>)(?P<time>['’]?s?\s+time\b|\s+from\s+now\b)?"
)
"""in 2 weeks, in two weeks' time."""
REL_PERIOD = build(r"\b(?P<rel><REL>)\s+(?P<p>week[-\s]?end|wkend|week|month|year|yr)\b")
PERIOD_FAR = build(
    r"\bthe\s+(?P<p>week[-\s]?end|week|month|year)\s+(?P<ba>before\s+last|after\s+next)\b"
)
REL_WEEKDAY = build(r"\b(?P<rel><REL>)\s+(?P<wd><WEEKDAYREL>)(?:\s+(?P<pod><POD>))?")
WEEKDAY_OF_WEEK = build(
    r"\b(?P<wd><WEEKDAYREL>)\s+(?:of\s+)?(?P<rel>last|this|next)\s+week\b(?!['’])"
)
"""Friday of next week, Monday last week."""
WEEK_S_WEEKDAY = build(r"\b(?P<rel>last|this|next)\s+week['’]s\s+(?P<wd><WEEKDAYREL>)")
BARE_WEEKDAY = build(r"\b(?:on\s+)?(?:<WEEKDAY>|<WEEKDAYS>)(?:\s+<POD>)?")
"""(on) Friday (night): never resolved, but it claims its text."""
MONTH_DAY = build(
    r"\b(?:(?P<wd><WEEKDAYANY>),?\s+(?:the\s+)?)?\b(?P<mon><MONTH>)\s*(?:the\s+)?"
    r"(?P<d>" + _DAY + r"|<ORDWORD>)(?![\w:])(?:,?\s*(?P<y><YEAR>|<SHORTYEAR>))?"
    r"(?:,?\s+(?P<wd2><WEEKDAYANY>))?"
)
"""May 7, May 7th 2023, Mon, Feb 18, march first."""
DAY_MONTH = build(
    r"\b(?:(?P<wd><WEEKDAYANY>),?\s+)?(?:\bthe\s+)?(?<![\w/.:-])(?P<d>" + _DAY + r")"
    r"(?:\s*(?:of\s+)?|\s*[-/]\s*)(?P<mon><MONTH>)"
    r"(?:,?\s*(?P<y><YEAR>|<SHORTYEAR>)|[-/](?P<yy>\d{4}|\d{2})(?!\d))?"
)
"""7 May 2023, the 7th of May, 31-Oct-74."""
ORDINAL_OF_MONTH = build(
    r"(?:\bthe\s+)?\b(?P<d><ORDWORD>)\s+(?:day\s+)?of\s+(?P<mon><MONTH>)"
    r"(?:,?\s*(?P<y><YEAR>|<SHORTYEAR>))?"
)
"""the first of March."""
MONTH_YEAR = build(r"\b(?P<mon><MONTH>),?\s+(?:of\s+)?(?P<y><YEAR>|<SHORTYEAR>)")
BARE_MONTH = build(r"\b(?P<mon><MONTHFULL>)(?!['’-])")
REL_MONTH = build(r"\b(?P<rel><REL>)\s+(?P<mon><MONTHFULL>)(?!['’]s)")
ISO_DATE = build(
    r"(?<![\w/.:-])(?P<y>[12]\d{3})(?P<s>[-/])(?P<m>\d{1,2})(?P=s)(?P<d>\d{1,2})"
    r"(?:(?:T|\s+)(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2}))?"
    r"(?P<z>\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))?)?(?![\w/-]|:\d)"
)
ISO_MONTH = build(r"(?<![\w/.:-])(?P<y>[12]\d{3})[-/](?P<m>\d{2})(?![\w/-]|\.\d)")
NUMERIC_DATE = build(
    r"(?<![\w/.:-])(?P<a>\d{1,2})(?P<s>[/.-])(?P<b>\d{1,2})(?P=s)(?P<y>\d{4}|\d{2})"
    r"(?![\w/:-]|\.\d)"
)
"""5/7/2023, 10-31-74, 31.10.1974."""
MONTH_SLASH = build(
    r"(?<![\w/.:-])(?P<a>\d{1,2})\s?(?P<s>[/-])\s?(?:(?P<y>[12]\d{3})|(?P<b>\d{1,2}))"
    r"(?![\w/:]|\.\d|\s?[/-]\s?\d|\s+(?:of|cups?|tsp|tbsp|inch|inches|in)\b)"
)
"""2/2013 (a month), 2/15 (a day of the reference year)."""
CLOCK = build(
    r"(?<![\w:./-])(?:(?P<at>\bat|@)\s*)?(?:"
    r"(?<![\w:./-])(?P<h>\d{1,2}):(?P<mi>[0-5]\d)(?::(?P<s>[0-5]\d))?(?![\d:])"
    r"|(?<![\w:./-])(?P<hh>\d{1,2})(?=\s?<MER>|\s*o['’]?clock)"
    r"|\b(?P<hw><HOURWORD>)(?=\s?<MER>|\s*o['’]?clock)"
    r"|\b(?P<noon>noon|midday|mid-day|midnight)\b"
    r"|(?<![\w:./-])(?P<hb>\d{1,2}|<HOURWORD>)(?=\s+(?:" + _DAY_POD + r"|tonight|tonite"
    r"|tomorrow|today|yesterday|this\s+(?:morning|afternoon|evening)))"
    r"|(?<![\w:./-])(?P<ha>\d{1,2})(?![\w:.])"
    r")(?:\s?(?P<mer><MER>))?(?:\s*(?P<oc>o['’]?clock))?"
    r"(?:\s+(?P<pod>" + _DAY_POD + r"))?" + _TZ_SUFFIX
)
"""9:30 pm, 3pm, three o'clock, noon, 8 (tonight), at 8: a time of day, day still open."""
CLOCK_RANGE = build(
    r"(?<![\w:./-])(?P<h1>\d{1,2})(?::(?P<m1>[0-5]\d))?\s?(?P<mer1><MER>)?\s*"
    + _CONNECT
    + r"\s*(?P<h2>\d{1,2})(?::(?P<m2>[0-5]\d))?\s?(?P<mer2><MER>)"
    + _TZ_SUFFIX
)
"""3-4pm, 9:30 to 11 am."""
PAST_TO = build(
    r"(?<![\w:./-])(?:(?P<at>\bat|@)\s*)?\b(?P<mm>a\s+quarter|quarter|half|<NUMBER>)"
    r"(?P<unit>\s+min(?:ute)?s?)?\s+(?P<dir>past|after|to|before|till|of)\s+"
    r"(?P<hr>\d{1,2}|<HOURWORD>|noon|midnight)(?![\d:])(?:\s?(?P<mer><MER>))?"
    r"(?:\s+(?P<pod>" + _DAY_POD + r"))?"
)
"""a quarter past 3pm, half past seven in the evening, 20 minutes to noon."""
WEEKDAY_ORDINAL = build(r"\b(?P<wd><WEEKDAYREL>),?\s+(?:the\s+)?(?P<d>(?:<DAYNUM>)<ORD>)(?![\w:])")
"""Tuesday the 19th (full names only: "I sat 3rd" is not a date)."""
HOLIDAY = build(r"\b(?P<name><HOLIDAY>)(?:,?\s+(?:of\s+)?(?P<y><YEAR>))?")
REL_HOLIDAY = build(r"\b(?P<rel><REL>)\s+(?P<name><HOLIDAY>)")
REL_SEASON = build(r"\b(?P<rel><REL>)\s+(?P<s><SEASON>)")
SEASON_YEAR = build(r"\b(?:the\s+)?(?P<s><SEASON>)\s+(?:of\s+)?(?P<y><YEAR>)")
QUARTER = build(
    r"\b(?:q(?P<q>[1-4])\s*(?:of\s+)?(?P<y>[12]\d{3})|(?P<y2>[12]\d{3})\s*q(?P<q2>[1-4])"
    r"|(?:the\s+)?(?P<qw>first|second|third|fourth|1st|2nd|3rd|4th)\s+(?:quarter|qtr)\s+"
    r"(?:of\s+)?(?P<y3>[12]\d{3}))\b"
)
DAY_OF_MONTH = build(
    r"\b(?:the\s+)?(?P<d>" + _DAY + r"|<ORDWORD>)\s+(?:day\s+)?of\s+(?P<rel>this|next|last"
    r"|the\s+current|the\s+next|the\s+previous|the\s+following|the|current)\s+month\b"
)
"""the 20th of next month."""
NTH_WEEKDAY = build(
    r"\b(?:the\s+)?(?P<n>first|second|third|fourth|fifth|last|1st|2nd|3rd|4th|5th)\s+"
    r"(?P<wd><WEEKDAY>)\s+(?:of|in)\s+(?:(?P<mon><MONTH>)(?:,?\s+(?P<y><YEAR>))?"
    r"|(?P<rel>this|next|last|the)\s+month\b)"
)
"""the first Tuesday of October (2014), the last Friday of this month."""
NTH_DAY = build(
    r"\b(?:the\s+)?(?P<n><ORDWORD>|last|" + _DAY + r")\s+day\s+(?:of|in)\s+"
    r"(?:(?P<mon><MONTH>)(?:,?\s+(?P<y><YEAR>))?|(?P<rel>this|next|last|the)\s+month\b)"
)
"""the last day of October 2015, the third day of October."""
MONTH_DAY_RANGE = build(
    r"\b(?P<mon><MONTH>)\s*(?:the\s+)?(?P<d1>"
    + _DAY
    + r")\s*"
    + _CONNECT
    + r"\s*(?:the\s+)?(?P<d2>"
    + _DAY
    + r")(?![\w:])(?:,?\s*(?P<y><YEAR>))?"
)
"""July 13-15."""
DAY_RANGE_MONTH = build(
    r"(?:\bthe\s+)?(?<![\w/.:-])(?P<d1>"
    + _DAY
    + r")\s*"
    + _CONNECT
    + r"\s*(?:the\s+)?(?P<d2>"
    + _DAY
    + r")\s+(?:of\s+)?(?P<mon><MONTH>)"
    r"(?:,?\s*(?P<y><YEAR>))?"
)
"""13 to 15 July, the 13th to the 15th of July."""
YEAR = build(r"(?P<y><YEAR>)")
THE_YEAR = build(r"\bthe\s+year\s+(?P<y><YEAR>)")

BLOCKERS = tuple(
    (build(template), needs)
    for template, needs in (
        # rolling or relative periods: "the last 2 weeks", "the next few days"
        (
            r"\b(?:the\s+)?(?:last|past|next|previous|following|coming|upcoming|first)\s+"
            r"(?:<NUMBER>|few|several|couple(?:\s+of)?)\s+<UNIT>",
            "unit rel|ord",
        ),
        (
            r"\bthe\s+(?:last|past|next|previous|following|first)\s+(?:week[-\s]?end|week"
            r"|month|year|day|night|<WEEKDAY>|<MONTHFULL>|<SEASON>)s?\b",
            "rel|ord",
        ),
        (
            r"\b(?:first|second|third|fourth|last|final|1st|2nd|3rd|4th)\s+(?:week[-\s]?end"
            r"|week)\s+(?:of|in)\b",
            "unit",
        ),
        # frequencies: "every Tuesday", "each summer"
        (
            r"\b(?:every|each)\s+(?:other\s+|single\s+)?(?:week[-\s]?end|week|month|year|day"
            r"|night|morning|evening|afternoon|<WEEKDAY>|<MONTHFULL>|<SEASON>|<HOLIDAY>)s?\b",
            "every",
        ),
        # relative to another event: "the day before", "the week after"
        (r"\b(?:the\s+)?(?:day|night|week|weekend|month|year)\s+(?:before|after|prior)\b", "unit"),
        # approximate counts: "half an hour", "2 and a half", "2 or 3 years"
        (
            r"\bhalf\s+(?:an?\s+)?<UNIT>|<NUMBER>\s+and\s+a\s+half\b"
            r"|<NUMBER>\s*(?:or|to|-|–)\s*<NUMBER>\s+<UNIT>",
            "unit",
        ),
    )
)
"""Indeterminate constructions that must not be read in part ("the last week of May"), each
with the words it needs (see :func:`features`)."""

_FEATURE_WORDS: Final[dict[str, str]] = {
    "month": " ".join(MONTHS),
    "weekday": " ".join(WEEKDAYS) + " " + " ".join(f"{d}s" for d in WEEKDAYS if len(d) > 5),
    "rel": "today tonight tonite tomorrow tmrw yesterday last this next coming upcoming current"
    " past previous following now moment",
    "unit": "week weeks weekend weekends wkend month months year years yr yrs fortnight"
    " fortnights decade decades day days hour hours hr hrs min mins minute minutes",
    "dir": "ago back hence now today",
    "in": "in",
    "every": "every each",
    "pastto": "past after to before till of",
    "clock": "noon midday mid midnight",
    "num": "one two three four five six seven eight nine ten eleven twelve quarter half",
    "ord": " ".join(w for w in ORDINALS if " " not in w and "-" not in w),
    "season": " ".join(SEASONS),
    "holiday": "christmas xmas year years nye patrick patricks paddy paddys valentine valentines"
    " halloween thanksgiving black cyber easter friday maundy palm ash mardi shrove pancake"
    " pentecost whit trinity father fathers mother mothers memorial labor labour mlk martin"
    " president presidents veteran veterans boxing cinco independence chinese lunar diwali eid"
    " ramadan hanukkah hanukah chanukah passover rosh yom",
}
FEATURES: Final[dict[str, frozenset[str]]] = {}
"""Word -> the kinds of time words it is ("may" -> month, "last" -> rel, ...)."""
for _feature, _words in _FEATURE_WORDS.items():
    for _word in _words.split():
        FEATURES[_word] = FEATURES.get(_word, frozenset()) | {_feature}
_WORD = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")


def features(text: str) -> set[str]:
    """The kinds of time words ``text`` contains: a cheap first pass before any rule runs.

    Kinds are ``digit`` and the keys of the word table: ``month``, ``weekday``, ``rel``,
    ``unit``, ``dir``, ``in``, ``every``, ``pastto``, ``clock``, ``num``, ``ord``, ``season``,
    ``holiday``. An empty set means the text has no time expression.
    """
    found: set[str] = set()
    for word in _WORD.findall(text.lower()):
        kinds = FEATURES.get(word)
        if kinds is not None:
            found |= kinds
    if _DIGIT.search(text):
        found.add("digit")
    return found


PREFIX = re.compile(
    r"(?:\b(?P<prep>since|before|prior\s+to|after|until|till|til|up\s+until|up\s+to|through"
    r"|thru|by|from|in|during|on|at|for))?\s*(?:\b(?:the\s+)?(?P<edge>early|mid|late"
    r"|beginning\s+of|start\s+of|middle\s+of|end\s+of|week\s+of)(?:\s+|-)(?:the\s+)?)?$",
    re.IGNORECASE,
)
"""A preposition and/or an edge word right before a candidate ("since", "in late")."""
EDGE_WORD = re.compile(
    r"\b(?:the\s+)?(?:early|mid|late|beginning|start|middle|end|week)\b", re.IGNORECASE
)
ONWARDS = re.compile(r"\s+(?:on|onwards?|forward)\b", re.IGNORECASE)
CAUSAL = re.compile(
    r"\s*,?\s*(?:is|was|were|are|['’]s|has|had|will|would|can|could)\b", re.IGNORECASE
)
"""After "since X": "since today is Monday" means because."""
FROM_BETWEEN = re.compile(r"\b(?P<p>from|between)\s+$", re.IGNORECASE)
BETWEEN = re.compile(r"\bbetween\s+$", re.IGNORECASE)
GAP_INTERVAL = re.compile(r"\s*(?P<c>-|–|—|to|through|thru|till|til|until|and)\s*", re.IGNORECASE)
GAP_DAY_CLOCK = re.compile(r"\s*,?\s*")
GAP_CLOCK_DAY = re.compile(r"\s*,?\s*(?:on\s+)?", re.IGNORECASE)
POD_AFTER = re.compile(
    r"\s+(?:in\s+the\s+(?P<p>morning|afternoon|evening)|at\s+(?P<n>night))\b", re.IGNORECASE
)
"""A part of the day after a written day: "May 7 in the morning"."""
POD_BEFORE = re.compile(
    r"\b(?:the\s+)?(?P<p>morning|afternoon|evening|night)\s+of\s+$", re.IGNORECASE
)
"""A part of the day before a written day: "the morning of May 7"."""
FUTURE = re.compile(
    r"\b(?:will|shall|gonna|going\s+to)\b|['’]ll\b|\b(?:won['’]t|wo\s+not)\b", re.IGNORECASE
)
"""Future markers that make "in 2 days" a time rather than a duration."""
CLAUSE_END = re.compile(
    r"[.!?;\n]|(?:,|\b(?:and|but|so|because)\b)\s*(?=(?:i|we|he|she|they|you|it)\b)",
    re.IGNORECASE,
)
"""Where a clause ends: punctuation, or a comma or conjunction before a new subject."""
VERB_MONTHS = re.compile(r"(?:may|march)")
"""Lowercase month names that are usually verbs ("you may", "we march"): case-sensitive."""
NOT_YEAR_AFTER = re.compile(
    r"\s*(?:%|[a-z]*(?:dollars|euros|pounds|bucks|people|persons|words|pages|calories|steps"
    r"|points|miles|km|kilometers|meters|feet|lbs|kg|users|members|followers|views|copies"
    r"|units|items|students|employees|times|rpm|mg|ml|cc|hp|sq|square|per)\b)",
    re.IGNORECASE,
)
"""Words after a four-digit number that make it a count, not a year ("in 2000 words")."""
