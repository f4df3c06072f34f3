"""Pure scoring helpers of the LoCoMo retrieval benchmark (no I/O, no models).

Kept apart from ``locomo_retrieval.py`` so they can be unit-tested on hand-made inputs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CATEGORIES",
    "RecallTable",
    "category_counts",
    "citation_tag",
    "normalize_dia_id",
    "pack_budget",
    "parse_evidence",
    "percentile",
    "recall",
    "recall_at_k",
    "recall_within_budget",
    "render_fact_line",
    "render_turn_line",
]

CATEGORIES: dict[str, str] = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
"""LoCoMo question categories, keyed by the category number as a string."""

# "D<session>:<turn>"; the optional colon after "D" rescues the one "D:11:26" typo in the data.
_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$")
_SEPARATORS = re.compile(r"[;,\s]+")


def normalize_dia_id(value: str) -> str | None:
    """The canonical ``D<n>:<m>`` form of a dialogue id, or ``None`` when it is not one.

    Leading zeros are dropped ("D10:05" -> "D10:5") and a stray colon after the ``D`` is
    tolerated ("D:11:26" -> "D11:26"); anything else ("D", "S1:2", "D1") is not a dialogue id.
    """
    match = _DIA_ID.match(value.strip())
    if match is None:
        return None
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def parse_evidence(raw: object) -> tuple[list[str], list[str]]:
    """Split a question's ``evidence`` field into (valid dia_ids, dropped tokens).

    Each item is split on ``;``, ``,`` and whitespace ("D8:6; D9:17" holds two ids); every piece
    is normalised with :func:`normalize_dia_id`. Valid ids are returned in order, de-duplicated.
    A field that is not a list (or a non-string item) is dropped whole, as its ``repr``.
    """
    if isinstance(raw, str):
        items: list[object] = [raw]
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        return [], [] if raw is None else [repr(raw)]
    valid: dict[str, None] = {}
    dropped: list[str] = []
    for item in items:
        if not isinstance(item, str):
            dropped.append(repr(item))
            continue
        for piece in _SEPARATORS.split(item):
            if not piece:
                continue
            dia_id = normalize_dia_id(piece)
            if dia_id is None:
                dropped.append(piece)
            else:
                valid[dia_id] = None
    return list(valid), dropped


def recall(evidence: Iterable[str], cited: Iterable[str]) -> float:
    """Share of the evidence ids found among the cited ids.

    Raises:
        ValueError: empty evidence (such questions are skipped, not scored).
    """
    wanted = set(evidence)
    if not wanted:
        raise ValueError("recall needs at least one evidence id")
    return len(wanted & set(cited)) / len(wanted)


def recall_at_k(evidence: Iterable[str], ranked: Sequence[Sequence[str]], k: int) -> float:
    """Evidence recall of the first ``k`` ranked items, each given as the ids it cites."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return recall(evidence, (dia_id for item in ranked[:k] for dia_id in item))


def pack_budget(token_counts: Sequence[int], budget: int) -> int:
    """How many leading items fit in ``budget`` tokens.

    Items are taken in rank order while the running total stays ``<= budget``; the first item
    that does not fit ends the packing (later, smaller items are not used to fill the gap).
    """
    total = 0
    for index, tokens in enumerate(token_counts):
        if tokens < 0:
            raise ValueError(f"token count must be >= 0, got {tokens}")
        if total + tokens > budget:
            return index
        total += tokens
    return len(token_counts)


def recall_within_budget(
    evidence: Iterable[str],
    ranked: Sequence[Sequence[str]],
    token_counts: Sequence[int],
    budget: int,
) -> tuple[float, bool]:
    """Evidence recall of what fits in ``budget`` tokens, and whether every item fitted.

    The second value flags a candidate list that ran out before the budget did: the recall could
    then be higher with more candidates (unless the store holds no more).
    """
    if len(ranked) != len(token_counts):
        raise ValueError("ranked and token_counts must have the same length")
    fits = pack_budget(token_counts, budget)
    return recall(evidence, (d for item in ranked[:fits] for d in item)), fits == len(ranked)


def citation_tag(dia_ids: Sequence[str]) -> str:
    """The citation suffix of a rendered line: ``" [D1:3]"``, ``" [D1:3; D2:4]"`` or ``""``."""
    return f" [{'; '.join(dia_ids)}]" if dia_ids else ""


def render_fact_line(
    fact_text: str, dia_ids: Sequence[str], plain: Callable[[str], str] = lambda s: s
) -> str:
    """A fact as put in a context window: its plain text plus its citation tag."""
    return plain(fact_text).strip() + citation_tag(dia_ids)


def render_turn_line(speaker: str, text: str, caption: str | None, dia_ids: Sequence[str]) -> str:
    """A raw turn as put in a context window: ``speaker: text [image: caption] [D1:3]``."""
    line = f"{speaker}: {text}".strip()
    if caption:
        line += f" [image: {caption}]"
    return line + citation_tag(dia_ids)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between order statistics."""
    if not values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within [0, 100], got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class RecallTable:
    """Per-question recall values grouped by metric key and category, averaged on demand."""

    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, key: str, category: str, value: float) -> None:
        """Record one question's ``value`` for metric ``key`` (e.g. ``"10"`` or ``"1000"``)."""
        self.values.setdefault(key, {}).setdefault(category, []).append(value)

    def summary(self) -> dict[str, dict[str, float]]:
        """``{key: {"overall": mean, "<category>": mean, ...}}``; categories in numeric order."""
        out: dict[str, dict[str, float]] = {}
        for key, by_category in self.values.items():
            every = [v for values in by_category.values() for v in values]
            row = {"overall": _mean(every)}
            for category in sorted(by_category, key=_category_order):
                row[category] = _mean(by_category[category])
            out[key] = row
        return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _category_order(category: str) -> tuple[int, str]:
    return (int(category), "") if category.isdigit() else (1 << 30, category)


def category_counts(categories: Iterable[str]) -> Mapping[str, int]:
    """How many questions each category has, in category order."""
    counts: dict[str, int] = {}
    for category in categories:
        counts[category] = counts.get(category, 0) + 1
    return {c: counts[c] for c in sorted(counts, key=_category_order)}


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned plain-text table: first column left, the rest right-aligned."""
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = []
    for n, row in enumerate((header, *rows)):
        cells = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
