"""Clock-time readers of the time resolver (internal), and the helpers every reader shares.

See :mod:`.readers` for what a reader is; these read times of day ("at 5pm", "3-4pm",
"a quarter to noon").
"""

from __future__ import annotations

import re
from dataclasses import replace

from membrain.temporal import patterns as P
from membrain.temporal.values import Cand, Clock, Ctx, Tod, Val, parse_zone, place_today

__all__ = ["between_before", "candidate", "read_clock", "read_clock_range", "read_past_to"]


def candidate(
    m: re.Match[str],
    val: Val | None,
    kind: str = "period",
    needs: frozenset[str] | None = None,
    *,
    clock: Clock | None = None,
    pairable: bool = False,
) -> Cand:
    """The candidate a reader returns for its match ``m``."""
    return Cand(m.start(), m.end(), val, kind, needs, clock, pairable)


def between_before(position: int, ctx: Ctx) -> bool:
    """Whether "between" stands just before ``position`` ("between 3 and 4pm")."""
    return bool(P.BETWEEN.search(ctx.text, max(0, position - 12), position))


def _meridiem(text: str | None) -> str | None:
    return None if not text else ("am" if text.lower()[0] == "a" else "pm")


def _tod(hour_text: str, minute: str | None, second: str | None, mer: str | None) -> Tod:
    hour = int(hour_text) if hour_text.isdigit() else (P.number(hour_text) or 0)
    exact = minute is not None and (hour >= 13 or hour == 0 or hour_text.startswith("0"))
    return Tod(hour, int(minute or 0), int(second or 0), _meridiem(mer), exact)


def _pod(text: str | None) -> str | None:
    if not text:
        return None
    return next(
        (w for w in ("morning", "afternoon", "evening", "night") if w in text.lower()), None
    )


def read_clock(m: re.Match[str], ctx: Ctx) -> Cand | None:
    """A clock time: "at 5", "5:30pm", "noon", "at seven in the evening"."""
    if m["ha"] and not m["at"]:
        return None  # a bare number is not a time
    hint, zone = _pod(m["pod"]), parse_zone(m["tz"]) if m["tz"] else None
    if (m["tz"] and zone is None) or (m["noon"] and (m["mer"] or m["noon"].lower() == "midnight")):
        return candidate(m, None, "clock")
    if m["noon"]:
        tod = Tod(12, exact=True)
    elif m["h"] is not None:
        tod = _tod(m["h"], m["mi"], m["s"], m["mer"])
    else:
        tod = _tod(m["hh"] or m["hw"] or m["hb"] or m["ha"], None, None, m["mer"])
    clock = Clock(tod, hint=hint, zone=zone, day_after=bool(m["hb"]))
    return candidate(m, place_today(clock, ctx), "clock", clock=clock)


def read_clock_range(m: re.Match[str], ctx: Ctx) -> Cand | None:
    """A range of clock times: "3-4pm", "between 11 and 1pm"."""
    if m["c"].lower() == "and" and not between_before(m.start(), ctx):
        return None
    first = _tod(m["h1"], m["m1"], None, m["mer1"])
    last = _tod(m["h2"], m["m2"], None, m["mer2"])
    if first.meridiem is None and not first.exact:  # "3-4pm"; "11-1pm" is 11am to 1pm
        wraps = first.hour % 12 > last.hour % 12 and last.meridiem == "pm"
        first = replace(first, meridiem="am" if wraps else last.meridiem)
    clock = Clock(first, last, zone=parse_zone(m["tz"]) if m["tz"] else None)
    return candidate(m, place_today(clock, ctx), "clock", clock=clock)


def read_past_to(m: re.Match[str], ctx: Ctx) -> Cand | None:
    """Minutes past or to an hour: "half past two", "a quarter to noon"."""
    words = " ".join(m["mm"].lower().split())
    minutes = {"a quarter": 15, "quarter": 15, "half": 30}.get(words) or P.number(words)
    backwards = m["dir"].lower() in ("to", "before", "till", "of")
    if backwards and words not in ("a quarter", "quarter") and not m["unit"]:
        return None  # "2 to 3pm" is a range, not 2:58
    bad = minutes is None or not 1 <= minutes <= 59 or (words == "half" and backwards)
    if bad or m["hr"].lower() == "midnight":
        return candidate(m, None, "clock")
    assert minutes is not None
    base = Tod(12, exact=True) if m["hr"].lower() == "noon" else _tod(m["hr"], None, None, m["mer"])
    tod = replace(base, minute=0 if backwards else minutes, offset=-minutes if backwards else 0)
    clock = Clock(tod, hint=_pod(m["pod"]))
    return candidate(m, place_today(clock, ctx), "clock", clock=clock)
