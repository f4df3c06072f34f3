"""Benchmark the deterministic time resolver against Duckling's English time corpus.

Usage (from the repository root)::

    python -m benchmarks.temporal_resolver \
        --data ../shared/data/temporal/duckling_time_en_corpus.json
    python -m benchmarks.temporal_resolver --data PATH --json out.json --show 40

The corpus (converted from facebook/duckling ``Duckling/Time/EN/Corpus.hs``) holds ``examples``,
each with a ``text``, a ``ref_time`` (2013-02-12T04:30:00-02:00), a ``kind``
(``datetime``, ``datetimeInterval``, ``datetimeOpenInterval`` and their ``...Holiday`` variants),
a ``grain``, and either a ``value`` or ``from``/``to`` (local wall clock; ``to`` exclusive) or a
``value`` with a ``direction`` (``before``/``after``), plus ``negative_examples`` that are not
times. Every example is passed to ``resolve(text, ref_time)``.

How an answer is judged (all comparisons in the reference's local wall clock; our calendar values
are floating dates and are read as local dates, our datetimes are converted to local time):

* resolved: ``resolve`` returned a span.
* correct: the span equals the expected value under this mapping:

  - grain year / month / day -> a single value of precision year / month / day starting at
    ``value``;
  - grain week -> a day-precision interval of 7 days starting at the given Monday;
  - grain quarter -> a month-precision interval of 3 months starting at ``value``;
  - grain hour / minute / second -> datetime precision starting at ``value`` (only the start is
    compared: our datetime unit is a minute, so "3pm" at hour grain is 15:00-15:01);
  - intervals (``from``/``to``) -> an interval at the mapped precision whose start equals
    ``from`` and whose last included unit starts where Duckling's does (``to`` minus one grain;
    for week grain, minus one day; ours is ``end`` minus our unit), or whose half-open
    ``[start, end)`` is exactly Duckling's ``[from, to)`` (the same instants: "tonight" as
    18:00-00:00, "by 2pm" as now-14:00);
  - Duckling's weekend convention (Friday 18:00 to Monday 00:00, hour grain) is compared as our
    Saturday-Sunday day interval;
  - open intervals: ``after`` -> open right, starting at ``value`` (or one of our units after it,
    for "after X" read as starting when X ends); ``before`` -> open left, ending at ``value``
    (X excluded, "before X") or with its last unit at ``value`` (X included, "until X").

* coarser: not correct, but the span contains the expected one (e.g. "tonight" resolved to the
  whole day, "three months ago" to the month). Counted as resolved, not as correct.
* wrong: everything else.

precision = correct / resolved; coverage = resolved / examples; lenient precision counts coarser
answers as right; exact-grain precision = correct / (correct + wrong), i.e. leaves the deliberately
coarser answers out. A negative example resolved to anything is a false positive.

Speed: ``annotate`` is timed on typical chat messages (with and without time words) against a
plain keyword regex scan of the same messages, in the same run.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dateutil.relativedelta import relativedelta

from membrain.api.models import Precision, TimeSpan
from membrain.temporal import annotate, format_resolved, resolve

GRAINS = ("year", "quarter", "month", "week", "day", "hour", "minute", "second")
PRECISION_OF = {
    "year": Precision.YEAR,
    "quarter": Precision.MONTH,
    "month": Precision.MONTH,
    "week": Precision.DAY,
    "day": Precision.DAY,
    "hour": Precision.DATETIME,
    "minute": Precision.DATETIME,
    "second": Precision.DATETIME,
}
STEP: dict[str, timedelta | relativedelta] = {
    "year": relativedelta(years=1),
    "quarter": relativedelta(months=3),
    "month": relativedelta(months=1),
    "week": timedelta(days=7),
    "day": timedelta(days=1),
    "hour": timedelta(hours=1),
    "minute": timedelta(minutes=1),
    "second": timedelta(seconds=1),
}
NOTE = (
    "mapping: year/month/day -> single value at that precision; week -> 7-day day interval from "
    "the Monday; quarter -> 3-month month interval; hour/minute/second -> datetime, start "
    "compared; intervals -> start and last included unit compared (Duckling 'to' is "
    "exclusive); Duckling weekends (Fri 18:00-Mon 00:00) -> Sat-Sun; open intervals -> anchor "
    "compared (either boundary convention); an interval whose [start, end) equals Duckling's "
    "[from, to) exactly is correct. 'coarser' = a containing span at a coarser grain, counted "
    "as resolved but not correct."
)

CHAT_PLAIN = [
    "I'm fine, thanks for asking!",
    "That sounds amazing, I'm so happy for you.",
    "Haha yes, my dog loves the beach too.",
    "What kind of music do you usually listen to?",
    "I've been painting a lot, it really helps me relax.",
    "Do you think I should take the job offer?",
    "My sister and I went hiking and it was beautiful up there.",
    "Thanks! I'll send you the photos when I get home.",
    "That's so cool, tell me more about the pottery class.",
    "I think this is the one I was telling you about.",
    "We adopted two cats and they are adorable.",
    "Sure, I can help you with that recipe.",
    "The concert was incredible, the band played all my favourites.",
    "I'm reading a book about the history of Rome.",
    "May I ask what inspired you to start running?",
    "It was a big step for me, but I'm glad I did it.",
]
CHAT_TIMES = [
    "I went to the LGBTQ support group yesterday and it was so powerful.",
    "We're moving to Boston next month, so excited!",
    "I started pottery classes last week, my first bowl is drying.",
    "My daughter's birthday was on May 7 and we had a picnic.",
    "I've been volunteering at the shelter since 2019.",
    "Let's meet tomorrow at 5pm at the cafe.",
    "Three years ago I ran my first marathon.",
    "Last Friday we went camping by the lake.",
    "I'll be in Paris from June 3 to June 10.",
    "The workshop is this Saturday morning.",
]
BASELINE = re.compile(
    r"\d+|\b(?:today|tonight|tomorrow|yesterday|ago|last|next|this|week|month|year|monday"
    r"|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june"
    r"|july|august|september|october|november|december)\b",
    re.IGNORECASE,
)


@dataclass
class Outcome:
    text: str
    grain: str
    kind: str
    expected: str
    got: str | None
    verdict: str  # "unresolved" | "correct" | "coarser" | "wrong"


def local(moment: datetime | None, span: TimeSpan, zone: Any) -> datetime | None:
    """An endpoint of our span as local wall clock (calendar values are floating dates)."""
    if moment is None:
        return None
    if span.precision is Precision.DATETIME:
        return moment.astimezone(zone).replace(tzinfo=None)
    return moment.replace(tzinfo=None)


def our_unit(span: TimeSpan, end: datetime) -> timedelta | relativedelta:
    if span.precision is Precision.DATETIME:
        return timedelta(seconds=1) if end.second else timedelta(minutes=1)
    if span.precision is Precision.DAY:
        return timedelta(days=1)
    return relativedelta(years=1) if span.precision is Precision.YEAR else relativedelta(months=1)


def expected_span(example: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    """The expected [start, end) in local wall clock (None = open)."""
    grain = example["grain"]
    if "from" in example:
        return parse_local(example["from"]), parse_local(example["to"])
    value = parse_local(example["value"])
    if example.get("direction") == "after":
        return value, None
    if example.get("direction") == "before":
        return None, value
    assert value is not None
    return value, value + STEP[grain]


def parse_local(text: str | None) -> datetime | None:
    if text is None or text.startswith("-"):
        return None
    return datetime.fromisoformat(text)


def is_weekend(start: datetime, end: datetime) -> bool:
    return start.weekday() == 4 and start.hour == 18 and end - start == timedelta(hours=54)


def judge(example: dict[str, Any], span: TimeSpan, zone: Any) -> str:
    grain = example["grain"]
    start = local(span.start, span, zone)
    end = local(span.end, span, zone)
    precision = PRECISION_OF[grain]
    exp_start, exp_end = expected_span(example)
    if exp_start is None and exp_end is None:
        return "wrong"
    correct = False
    if "direction" in example:
        anchor = exp_start if example["direction"] == "after" else exp_end
        if span.precision is precision and span.interval:
            if example["direction"] == "after" and end is None and start is not None:
                unit = our_unit(span, span.start or datetime.min)
                correct = start == anchor or (anchor is not None and start == anchor + unit)
            elif example["direction"] == "before" and start is None and end is not None:
                correct = end == anchor or end - our_unit(span, end) == anchor
    elif "from" in example:
        assert exp_start is not None and exp_end is not None
        if grain == "hour" and is_weekend(exp_start, exp_end):
            exp_start, exp_end = exp_start + timedelta(hours=6), exp_end
            grain, precision = "day", Precision.DAY
        last_step = timedelta(days=1) if grain == "week" else STEP[grain]
        if span.interval and span.precision is precision and start is not None and end:
            correct = (start, end) == (exp_start, exp_end) or (
                start == exp_start and end - our_unit(span, end) == exp_end - last_step
            )
    elif grain in ("week", "quarter"):
        correct = (
            span.interval
            and span.precision is precision
            and (start, end)
            == (
                exp_start,
                exp_end,
            )
        )
    elif precision is Precision.DATETIME:
        correct = span.precision is precision and not span.interval and start == exp_start
    else:
        correct = (
            span.precision is precision
            and not span.interval
            and (start, end)
            == (
                exp_start,
                exp_end,
            )
        )
    if correct:
        return "correct"
    low_ok = start is None or (exp_start is not None and start <= exp_start)
    high_ok = end is None or (exp_end is not None and end >= exp_end)
    return "coarser" if low_ok and high_ok else "wrong"


def describe(example: dict[str, Any]) -> str:
    if "from" in example:
        return f"{example['from']} .. {example['to']} ({example['grain']})"
    if "direction" in example:
        return f"{example['direction']} {example['value']} ({example['grain']})"
    return f"{example['value']} ({example['grain']})"


def evaluate(data: dict[str, Any]) -> tuple[list[Outcome], list[tuple[str, str]]]:
    outcomes: list[Outcome] = []
    for example in data["examples"]:
        reference = datetime.fromisoformat(example["ref_time"])
        span = resolve(example["text"], reference)
        if span is None:
            verdict, got = "unresolved", None
        else:
            verdict, got = judge(example, span, reference.tzinfo), format_resolved(span)
        outcomes.append(
            Outcome(
                example["text"], example["grain"], example["kind"], describe(example), got, verdict
            )
        )
    reference = datetime.fromisoformat(data["examples"][0]["ref_time"])
    false_positives = []
    for text in data["negative_examples"]:
        span = resolve(text, reference)
        if span is not None:
            false_positives.append((text, format_resolved(span)))
    return outcomes, false_positives


def rates(outcomes: list[Outcome]) -> dict[str, float | int]:
    counts = Counter(o.verdict for o in outcomes)
    resolved = counts["correct"] + counts["coarser"] + counts["wrong"]
    total = len(outcomes)
    return {
        "examples": total,
        "resolved": resolved,
        "coverage": round(resolved / total, 4) if total else 0.0,
        "correct": counts["correct"],
        "coarser": counts["coarser"],
        "wrong": counts["wrong"],
        "precision": round(counts["correct"] / resolved, 4) if resolved else 0.0,
        "lenient_precision": (
            round((counts["correct"] + counts["coarser"]) / resolved, 4) if resolved else 0.0
        ),
        "exact_grain_precision": (
            round(counts["correct"] / (counts["correct"] + counts["wrong"]), 4)
            if counts["correct"] + counts["wrong"]
            else 0.0
        ),
    }


def per_message_us(fn: Any, messages: list[str], rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        for message in messages:
            fn(message)
    return (time.perf_counter() - started) / (rounds * len(messages)) * 1e6


def speed(rounds: int) -> dict[str, float]:
    reference = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    everything = CHAT_PLAIN + CHAT_TIMES
    for message in everything:  # warm up compiled patterns and caches
        annotate(message, reference)
    baseline = per_message_us(lambda m: list(BASELINE.finditer(m)), everything, rounds)
    plain = per_message_us(lambda m: annotate(m, reference), CHAT_PLAIN, rounds)
    timed = per_message_us(lambda m: annotate(m, reference), CHAT_TIMES, rounds)
    mixed = per_message_us(lambda m: annotate(m, reference), everything, rounds)
    return {
        "annotate_us_no_time_words": round(plain, 1),
        "annotate_us_with_times": round(timed, 1),
        "annotate_us_all": round(mixed, 1),
        "baseline_regex_us": round(baseline, 2),
        "ratio_vs_baseline": round(mixed / baseline, 1) if baseline else 0.0,
        "messages": len(everything),
        "rounds": rounds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.temporal_resolver", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--data", required=True, type=Path, help="duckling_time_en_corpus.json")
    parser.add_argument("--json", type=Path, help="write all figures to this JSON file")
    parser.add_argument(
        "--show", type=int, default=0, help="print up to N wrong and N coarser answers"
    )
    parser.add_argument("--rounds", type=int, default=200, help="timing rounds")
    args = parser.parse_args(argv)
    data = json.loads(args.data.read_text(encoding="utf-8"))

    started = time.perf_counter()
    outcomes, false_positives = evaluate(data)
    elapsed = time.perf_counter() - started

    per_grain = {g: rates([o for o in outcomes if o.grain == g]) for g in GRAINS}
    overall = rates(outcomes)
    holiday = rates([o for o in outcomes if "Holiday" in o.kind])
    non_holiday = rates([o for o in outcomes if "Holiday" not in o.kind])
    negatives = {
        "examples": len(data["negative_examples"]),
        "false_positives": len(false_positives),
        "false_positive_rate": round(len(false_positives) / len(data["negative_examples"]), 4),
        "items": [{"text": t, "resolved": r} for t, r in false_positives],
    }
    timing = speed(args.rounds)

    header = (
        f"{'grain':<12}{'examples':>9}{'resolved':>9}{'coverage':>9}{'correct':>8}"
        f"{'coarser':>8}{'wrong':>6}{'precision':>10}{'lenient':>9}"
    )
    print(header)
    print("-" * len(header))
    rows = [*per_grain.items(), ("holidays", holiday), ("non-holiday", non_holiday)]
    rows.append(("OVERALL", overall))
    for name, r in rows:
        if name == "holidays":
            print("-" * len(header))
        print(
            f"{name:<12}{r['examples']:>9}{r['resolved']:>9}{r['coverage']:>9.3f}"
            f"{r['correct']:>8}{r['coarser']:>8}{r['wrong']:>6}{r['precision']:>10.3f}"
            f"{r['lenient_precision']:>9.3f}"
        )
    print()
    print(
        f"overall precision {overall['precision']:.3f} (correct / resolved); "
        f"{overall['lenient_precision']:.3f} counting coarser containing answers; "
        f"{overall['exact_grain_precision']:.3f} among answers at the expected grain "
        f"(correct / (correct + wrong)); coverage {overall['coverage']:.3f}"
    )
    print(
        f"negatives: {negatives['false_positives']}/{negatives['examples']} resolved "
        f"(false-positive rate {negatives['false_positive_rate']:.3f})"
        + (f": {false_positives}" if false_positives else "")
    )
    print(
        f"annotate(): {timing['annotate_us_no_time_words']:.1f} us/message without time words, "
        f"{timing['annotate_us_with_times']:.1f} us with, {timing['annotate_us_all']:.1f} us "
        f"overall; plain regex scan {timing['baseline_regex_us']:.2f} us "
        f"(x{timing['ratio_vs_baseline']:.0f})"
    )
    print(f"corpus resolved in {elapsed:.2f} s")
    print(f"note: {NOTE}")
    if args.show:
        wrong = [o for o in outcomes if o.verdict == "wrong"]
        print(f"\nwrong answers ({len(wrong)}):")
        for o in wrong[: args.show]:
            print(f"  {o.text!r:45} got {o.got:40} expected {o.expected}")
        coarser = [o for o in outcomes if o.verdict == "coarser"]
        print(f"\ncoarser answers ({len(coarser)}):")
        for o in coarser[: args.show]:
            print(f"  {o.text!r:45} got {o.got:40} expected {o.expected}")
    if args.json:
        figures = {
            "per_grain": per_grain,
            "overall": overall,
            "holidays": holiday,
            "non_holiday": non_holiday,
            "negatives": negatives,
            "speed": timing,
            "corpus_seconds": round(elapsed, 3),
            "note": NOTE,
            "wrong": [o.__dict__ for o in outcomes if o.verdict == "wrong"],
        }
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
