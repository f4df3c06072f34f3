"""Context assembly: ranked hits as a cited prompt block that fits a token budget.

:func:`assemble_context` takes the hits of a search, best first, and a budget. The budget is a
parameter of the selection, not a cut of finished text: facts are chosen in rank order while
their rendered lines (and the header of any group they open) still fit, a fact that does not fit
is skipped and later, smaller ones are still tried (a greedy knapsack in rank order; nothing is
reordered by size). The chosen facts are then rendered, and the final text is counted exactly
with :func:`membrain.api.tokens.count_tokens` (cl100k); ``Context.tokens`` is that count and never
exceeds ``max_tokens - profile_tokens``. A budget too small for anything gives an empty context
(``text == ""``, ``tokens == 0``).

Format
------
Facts are grouped under the canonical entity each one mentions first (``hit.entities[0]``,
current name and latest description); facts that mention no entity go under ``## Other``::

    ## Caroline — Transgender woman, counsels LGBTQ youth
    - 2023-05-01..2023-05-07: Caroline went to a pride parade with Melanie. [D1:3; D2:1]
    - 2023-05-07: Caroline attended an LGBTQ support group. [D1:5]

    ## Melanie
    - 2023: Melanie painted a sunrise. [D2:4]
    - thought 2023-05-08: Melanie privately thought: "I should have said yes." [D3:2]

    ## Other
    - said 2023-05-09: The concert was cancelled. [9f1c2ab4]

* A group's header is ``## <name> — <description>`` (``## <name>`` when the description is
  empty). Groups are separated by a blank line and ordered by their best-ranked fact.
* Inside a group, facts are in time order: ``valid_from``, else ``valid_to`` (an open-left
  "before ..." fact sorts by its end), else ``stated_at``; ties keep rank order.
* Each line is ``- <time>: <text> [msg <sources>]``, or ``- <time>: <text> (<marks>) [msg
  <sources>]`` when the reader must know the fact's standing (:func:`belief_marks`):
  ``disputed``, ``written by agent:<name>``, ``superseded 2024-05-02 by fact 431162a2`` (in a
  search of the past). Every id shown says what it names: ``msg`` cites messages, ``fact``
  names facts (8 hex digits, which every call taking fact ids accepts as a prefix).

  - ``<time>`` is the valid time at the fact's precision when it has one: ``2023``,
    ``2023-05``, ``2023-05-07``, ``2023-05-07T14:30Z`` (UTC); an interval is ``start..end``
    with the end inclusive (``2023-05-01..2023-05-07``), an open end is left empty
    (``2020..``, ``..2023-05``). Without a valid time it is the day the fact was stated:
    ``said 2023-05-08``, or ``thought 2023-05-08`` for a private thought, so nothing makes a
    thought look said.
  - ``<text>`` is ``hit.text`` (aliases already rendered as canonical names, no markup) with
    runs of whitespace, newlines included, collapsed to one space so a fact stays on one line.
    A thought's text ("... privately thought: ...") is kept as it is. When ``hit.text`` is
    empty the fact's own text without bracket markup is used.
  - ``<sources>`` cites the evidence messages (:func:`cited_as`): each message's
    ``source_id`` when set (a LoCoMo ``dia_id`` such as ``D1:3``) and not a generated one
    (holding a UUID or a long hex digest, as tools write them), else the first 8 characters of
    its stored id, which every call taking message ids accepts as a prefix; several are
    joined with ``"; "``. A hit without loaded messages cites the first 8 characters of its
    fact's source ids.

Profile block
-------------
The stable profile and the episodic facts are assembled against one budget. Given the
profile's entries, the block of those that fit ``profile_tokens``
(:func:`~membrain.retrieval.profile_block.profile_block`) opens the context, a blank line
follows, and the facts get everything the block left: ``Context.tokens <= max_tokens``. Without
entries, ``profile_tokens`` is a reserve: the facts get ``max_tokens - profile_tokens``.

Hits repeating a fact already seen (same fact id) are ignored. Rendering is pure: the same
arguments always give the same context.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from membrain.api.errors import InputError
from membrain.api.models import (
    Context,
    EntityView,
    Fact,
    Layer,
    MemoryHit,
    Message,
    Precision,
    Trust,
)
from membrain.api.profile import ProfileEntry
from membrain.api.tokens import count_tokens
from membrain.retrieval.profile_block import profile_block
from membrain.temporal import plain_text
from membrain.temporal.annotation import format_moment

__all__ = [
    "NOTHING_RELEVANT",
    "OTHER_GROUP",
    "SHORT_ID",
    "assemble_context",
    "cited_as",
    "nothing_relevant",
]

NOTHING_RELEVANT = "(Nothing relevant to this question was found in memory.)"
"""The text of a context no fact was relevant enough for (see :func:`nothing_relevant`)."""
OTHER_GROUP = "Other"
"""Heading of the group of facts that mention no entity."""
SHORT_ID = 8
"""Characters of a stored id shown to people (every call taking ids accepts them as a prefix)."""
_GENERATED = re.compile(
    r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}|[0-9a-f]{16,}", re.I
)
"""A UUID or a long hex digest in a ``source_id``: a program's id, not a person's."""

_LINE_SEP = "\n"
_GROUP_SEP = "\n\n"
_SLACK_PER_PIECE = 4
"""How far a sum of per-piece counts may plausibly exceed the count of the joined text."""


@dataclass(slots=True)
class _Group:
    view: EntityView | None
    header: str
    members: list[int] = field(default_factory=list)


def assemble_context(
    question: str,
    hits: Sequence[MemoryHit],
    *,
    max_tokens: int,
    profile_tokens: int = 0,
    profile: Sequence[ProfileEntry] | None = None,
) -> Context:
    """Render ranked hits as a cited context block within a token budget.

    Args:
        question: The question the hits answer (recorded in the context).
        hits: Search results, best first.
        max_tokens: The whole budget (cl100k tokens), at least 1.
        profile_tokens: The profile block's share of ``max_tokens``, between 0 and
            ``max_tokens``. Without ``profile`` it is a reserve the facts never use.
        profile: The profile's entries in block order (:func:`profile_block`): the block that
            fits ``profile_tokens`` opens the context, and the facts get everything it leaves.

    Returns:
        The context: ``text`` (format in the module docstring), ``tokens ==
        count_tokens(text) <= max_tokens`` (``<= max_tokens - profile_tokens`` without a
        profile), the included ``hits`` in rank order, the ``entities`` of the groups rendered
        in group order, and the ``profile`` entries of its block.

    Raises:
        InputError: ``max_tokens`` is below 1, or ``profile_tokens`` is negative or larger than
            ``max_tokens``.

    Example:
        >>> assemble_context("Anything?", [], max_tokens=100).tokens
        0
    """
    _check_budget(max_tokens, profile_tokens)
    ranked = _unique(hits)
    shown: tuple[ProfileEntry, ...] = ()
    if profile is None:
        text, chosen, groups = _facts_block(ranked, max_tokens - profile_tokens)
        tokens = count_tokens(text)
    else:
        block, shown = profile_block(profile, profile_tokens)
        lead = block + _GROUP_SEP if block else ""
        available = max_tokens - count_tokens(lead)
        while True:  # joining two blocks may cost a token more than their parts
            text, chosen, groups = _facts_block(ranked, available)
            text = lead + text if text else block
            tokens = count_tokens(text)
            if tokens <= max_tokens:
                break
            available -= tokens - max_tokens
    return Context(
        question=question,
        text=text,
        tokens=tokens,
        max_tokens=max_tokens,
        hits=tuple(ranked[i] for i in chosen),
        entities=tuple(g.view for g in groups if g.view is not None),
        profile=shown,
        profile_tokens=profile_tokens,
    )


def nothing_relevant(context: Context) -> Context:
    """``context`` (built from no hits) marked ``nothing_relevant``.

    Its text, when no profile block opens it, is :data:`NOTHING_RELEVANT` if that fits the
    budget, so an agent reading the prompt sees that memory was searched and held nothing.
    """
    text, tokens = context.text, context.tokens
    if not text and count_tokens(NOTHING_RELEVANT) <= context.max_tokens - context.profile_tokens:
        text, tokens = NOTHING_RELEVANT, count_tokens(NOTHING_RELEVANT)
    return context.model_copy(update={"text": text, "tokens": tokens, "nothing_relevant": True})


def _facts_block(
    ranked: Sequence[MemoryHit], available: int
) -> tuple[str, list[int], list[_Group]]:
    """The facts block of the ranked hits that fits ``available`` tokens, its hits and groups."""
    lines = [_fact_line(hit) for hit in ranked]
    keys = [_group_key(hit) for hit in ranked]
    chosen: list[int] = []
    if available > 0 and ranked:
        line_costs = [count_tokens(line + _LINE_SEP) for line in lines]
        header_costs: dict[str | None, int] = {}
        for index, key in enumerate(keys):
            if key not in header_costs:
                header_costs[key] = count_tokens(_header(_view(ranked[index])) + _LINE_SEP)
        sep_cost = count_tokens(_LINE_SEP)
        estimate = sum(line_costs) + sum(header_costs.values()) + sep_cost * (len(header_costs) - 1)
        pieces = len(line_costs) + 2 * len(header_costs)
        everything = list(range(len(ranked)))
        if estimate - available <= _SLACK_PER_PIECE * pieces and _fits(
            ranked, lines, everything, available
        ):
            chosen = everything
        else:
            chosen = _greedy(keys, line_costs, header_costs, sep_cost, available)

    while True:
        groups = _groups(ranked, chosen)
        text = _render(ranked, lines, groups)
        if count_tokens(text) <= max(available, 0):
            return text, chosen, groups
        chosen.pop()  # the per-piece estimate was short: drop the lowest-ranked fact


def _check_budget(max_tokens: int, profile_tokens: int) -> None:
    for name, value in (("max_tokens", max_tokens), ("profile_tokens", profile_tokens)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{name} must be an integer, got {value!r}")
    if max_tokens < 1:
        raise InputError(f"max_tokens must be at least 1, got {max_tokens}")
    if profile_tokens < 0:
        raise InputError(f"profile_tokens must not be negative, got {profile_tokens}")
    if profile_tokens > max_tokens:
        raise InputError(
            f"profile_tokens ({profile_tokens}) must not exceed max_tokens ({max_tokens})"
        )


def _unique(hits: Sequence[MemoryHit]) -> list[MemoryHit]:
    seen: set[str] = set()
    out: list[MemoryHit] = []
    for hit in hits:
        if hit.fact.id not in seen:
            seen.add(hit.fact.id)
            out.append(hit)
    return out


def _greedy(
    keys: Sequence[str | None],
    line_costs: Sequence[int],
    header_costs: dict[str | None, int],
    sep_cost: int,
    available: int,
) -> list[int]:
    """Indices chosen in rank order by estimated cost; skipped facts leave room for later ones."""
    chosen: list[int] = []
    opened: set[str | None] = set()
    used = 0
    for index, key in enumerate(keys):
        if used >= available:
            break
        cost = line_costs[index]
        if key not in opened:
            cost += header_costs[key] + (sep_cost if opened else 0)
        if used + cost <= available:
            chosen.append(index)
            opened.add(key)
            used += cost
    return chosen


def _fits(
    ranked: Sequence[MemoryHit], lines: Sequence[str], chosen: list[int], available: int
) -> bool:
    return count_tokens(_render(ranked, lines, _groups(ranked, chosen))) <= available


def _groups(ranked: Sequence[MemoryHit], chosen: Sequence[int]) -> list[_Group]:
    """The groups of the chosen hits, ordered by their best-ranked member."""
    groups: dict[str | None, _Group] = {}
    for index in chosen:
        hit = ranked[index]
        key = _group_key(hit)
        group = groups.get(key)
        if group is None:
            view = _view(hit)
            group = groups[key] = _Group(view, _header(view))
        group.members.append(index)
    return list(groups.values())


def _render(ranked: Sequence[MemoryHit], lines: Sequence[str], groups: Sequence[_Group]) -> str:
    blocks = []
    for group in groups:
        members = sorted(group.members, key=lambda i: (_when(ranked[i].fact), i))
        blocks.append(_LINE_SEP.join([group.header, *(lines[i] for i in members)]))
    return _GROUP_SEP.join(blocks)


def _view(hit: MemoryHit) -> EntityView | None:
    return hit.entities[0] if hit.entities else None


def _group_key(hit: MemoryHit) -> str | None:
    return hit.entities[0].id if hit.entities else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _header(view: EntityView | None) -> str:
    if view is None:
        return f"## {OTHER_GROUP}"
    name = _one_line(view.name) or view.id[:SHORT_ID]
    description = _one_line(view.description)
    return f"## {name} — {description}" if description else f"## {name}"


def _when(fact: Fact) -> datetime:
    return fact.valid_from or fact.valid_to or fact.stated_at


def _fact_line(hit: MemoryHit) -> str:
    text = _one_line(hit.text) or _one_line(plain_text(hit.fact.text))
    line = f"- {time_label(hit.fact)}: {text}"
    marks = belief_marks(hit.fact)
    if marks:
        line = f"{line} ({'; '.join(marks)})"
    sources = _citations(hit)
    return f"{line} [msg {'; '.join(sources)}]" if sources else line


def _citations(hit: MemoryHit) -> list[str]:
    labels = [cited_as(m) for m in hit.sources]
    labels = [label for label in labels if label]
    if not labels:
        labels = [_one_line(s[:SHORT_ID]) for s in hit.fact.sources if s.strip()]
    return list(dict.fromkeys(labels))


def cited_as(message: Message) -> str:
    """How a message is cited: its ``source_id``, unless generated, else its short stored id.

    A ``source_id`` holding a UUID or 16 or more hex digits (``membrain:tool:<uuid>``, a
    digest) was made by a program, not a person: the first :data:`SHORT_ID` characters of the
    stored id stand for it, which ``Memory.messages(ids=...)`` takes back.
    """
    stored = (message.id or "")[:SHORT_ID]
    given = _one_line(message.source_id or "")
    if given and not (stored and _GENERATED.search(given)):
        return given
    return stored


def belief_marks(fact: Fact) -> list[str]:
    """What a reader of the fact must know about its standing, in words.

    ``disputed``; ``written by agent:<name>``; ``superseded <day> by <fact ids>``;
    ``forgotten <day>`` (an ``as_of`` search reads facts forgotten since).
    """
    marks = []
    if fact.trust is Trust.DISPUTED:
        marks.append("disputed")
    if fact.author:
        marks.append(f"written by {_one_line(fact.author)}")
    if fact.superseded_at is not None:
        day = _write(fact.superseded_at, Precision.DAY, fine=False)
        by = ", ".join(f"fact {i[:SHORT_ID]}" for i in fact.superseded_by)
        marks.append(f"superseded {day} by {by}" if by else f"superseded {day}")
    if fact.forgotten_at is not None:
        marks.append(f"forgotten {_write(fact.forgotten_at, Precision.DAY, fine=False)}")
    return marks


def time_label(fact: Fact) -> str:
    """When a fact holds, at its precision ("2023-05-07", "2021..2024-06"), else when said."""
    start, end = fact.valid_from, fact.valid_to
    if start is None and end is None:
        verb = "thought" if fact.layer is Layer.THOUGHT else "said"
        return f"{verb} {_write(fact.stated_at, Precision.DAY, fine=False)}"
    precision = fact.precision or Precision.DAY
    fine = precision is Precision.DATETIME and any(t.second for t in (start, end) if t)
    first = _write(start, precision, fine=fine) if start is not None else ""
    last = ""
    if end is not None and (start is None or end > start):
        try:
            last = _write(end - timedelta(microseconds=1), precision, fine=fine)
        except OverflowError:  # an end at the very start of the calendar
            last = _write(end, precision, fine=fine)
    if start is not None and end is not None and (not last or last == first):
        return first
    return f"{first}..{last}"


def _write(moment: datetime, precision: Precision, *, fine: bool) -> str:
    """``moment`` truncated to ``precision`` (seconds only when ``fine``)."""
    return format_moment(moment, precision, seconds=fine)
