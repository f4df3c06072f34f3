"""What the inspector's pages show, computed from the public :class:`~membrain.Memory` API.

The functions here hold no HTTP: counts of a scope, the belief timeline of an entity (laid out
as an SVG the template draws), audit filtering and paging, and the formatting of times. The
routes in :mod:`membrain.server.inspector` call them and hand the results to the templates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import MAXYEAR, UTC, datetime, timedelta
from urllib.parse import urlencode

from membrain.api.audit import AuditAction, AuditEvent
from membrain.api.models import Fact, FactStatus, MessageStatus, Scope, Trust
from membrain.memory import Memory

__all__ = [
    "AUDIT_PAGE_SIZE",
    "PREFIX",
    "AuditPage",
    "Bar",
    "Mark",
    "ScopeCounts",
    "Timeline",
    "audit_page",
    "moment",
    "parse_moment",
    "plain",
    "safe_next",
    "scope_counts",
    "short",
    "timeline",
    "url",
]

PREFIX = "/ui"
"""Where the inspector is served."""
AUDIT_PAGE_SIZE = 50
"""Audit events per page."""

WIDTH = 800
"""The timeline's drawing width (SVG user units; the drawing scales to the page)."""
MARGIN = 12
ROW = 46
AXIS = 28


def short(identifier: str) -> str:
    """The first 8 characters of an id, as people read and type them."""
    return identifier[:8]


def moment(value: datetime | None) -> str:
    """A time as people read it (UTC, to the minute); empty when unknown."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if value is not None else ""


def parse_moment(text: str | None, *, end: bool = False) -> datetime | None:
    """A date or date-time typed in a filter, as UTC (``None`` when empty or unreadable).

    A bare date is its day's start, or with ``end`` the next day's start, so a range whose
    last day is ``2024-05-02`` includes that whole day. A moment past the calendar's edge in
    UTC (the day after ``9999-12-31``) is that edge.
    """
    if not text or not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    bare_date = len(text.strip()) <= 10
    try:
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value + timedelta(days=1) if end and bare_date else value
    except OverflowError:
        edge = datetime.max if value.year == MAXYEAR else datetime.min
        return edge.replace(tzinfo=UTC)


def url(page: str, scope: Scope | None = None, **query: object) -> str:
    """The inspector URL of ``page`` for ``scope`` with more query parameters (empty dropped)."""
    params: dict[str, object] = {}
    if scope is not None:
        params.update(dataset=scope.dataset, task=scope.task)
    params.update({k: v for k, v in query.items() if v not in (None, "")})
    tail = f"?{urlencode(params)}" if params else ""
    return f"{PREFIX}/{page}{tail}"


def safe_next(target: str | None) -> str:
    """A redirect target inside the inspector (anything else goes to its start page)."""
    inside = bool(target) and str(target).startswith(f"{PREFIX}/")
    if inside and target and not any(char in target for char in "\\\r\n"):
        return target
    return f"{PREFIX}/"


@dataclass(frozen=True, slots=True)
class ScopeCounts:
    """What one (dataset, task) holds, counted for the scopes page."""

    scope: Scope
    facts: Counter[str]
    messages: Counter[str]
    review: int

    @property
    def active(self) -> int:
        """Current facts."""
        return self.facts[FactStatus.ACTIVE.value]

    @property
    def superseded(self) -> int:
        """Facts replaced by later ones."""
        return self.facts[FactStatus.SUPERSEDED.value]

    @property
    def forgotten(self) -> int:
        """Facts tombstoned (forgotten) or retracted by a reviewer."""
        return self.facts[FactStatus.FORGOTTEN.value] + self.facts[FactStatus.RETRACTED.value]

    @property
    def pending(self) -> int:
        """Messages stored and not extracted yet."""
        return self.messages[MessageStatus.PENDING.value]

    @property
    def failed(self) -> int:
        """Messages whose extraction failed."""
        return self.messages[MessageStatus.FAILED.value]


def scope_counts(memory: Memory, scope: Scope) -> ScopeCounts:
    """Count the facts (by status), messages (by status) and open review items of ``scope``."""
    facts = Counter(f.status.value for f in memory.facts(scope=scope, include_inactive=True))
    messages = Counter(m.status.value for m in memory.messages(scope=scope))
    review = len(memory.review_queue(scope=scope))
    return ScopeCounts(scope=scope, facts=facts, messages=messages, review=review)


@dataclass(frozen=True, slots=True)
class Mark:
    """A point in record time on a fact's row: when it was recorded, superseded, forgotten."""

    x: float
    kind: str
    title: str


@dataclass(frozen=True, slots=True)
class Bar:
    """One fact's row of the timeline: its valid time as a bar, its record times as marks."""

    fact: Fact
    label: str
    y: float
    x: float
    width: float
    classes: str
    title: str
    href: str
    open_start: bool
    open_end: bool
    marks: tuple[Mark, ...] = ()

    @property
    def current(self) -> bool:
        """The fact is a current belief."""
        return self.fact.status is FactStatus.ACTIVE


@dataclass(frozen=True, slots=True)
class Timeline:
    """An entity's facts laid out in time: bars, axis ticks and the drawing's size."""

    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, str], ...]
    now_x: float
    links: tuple[tuple[float, float, float, float], ...] = ()
    """Connectors (x1, y1, x2, y2) from a superseded bar's end to its replacement's start."""
    width: int = WIDTH
    height: float = 0.0
    summary: str = ""
    statuses: tuple[str, ...] = field(default=())


def _start(fact: Fact) -> datetime:
    return fact.valid_from or fact.stated_at


def _end(fact: Fact, now: datetime) -> datetime | None:
    """Where the fact's bar ends (``None``: open, it is still held)."""
    if fact.valid_to is not None:
        return fact.valid_to
    closed = fact.superseded_at or fact.forgotten_at or fact.retracted_at
    return closed if fact.status is not FactStatus.ACTIVE else None


def _ticks(
    first: datetime, last: datetime, place: Callable[[datetime], float]
) -> list[tuple[float, str]]:
    """Axis ticks: years, else quarters, else months, else days (at most about 8)."""
    span = (last - first).days
    ticks: list[tuple[float, str]] = []
    if span > 3 * 365:
        step = max(1, span // 365 // 7)
        for year in range(first.year + 1, last.year + 1, step):
            ticks.append((place(datetime(year, 1, 1, tzinfo=UTC)), str(year)))
        return ticks
    if span > 60:
        months = 3 if span > 400 else 1
        year, month = first.year, first.month
        while True:
            month += months
            while month > 12:
                month -= 12
                year += 1
            at = datetime(year, month, 1, tzinfo=UTC)
            if at >= last:
                return ticks
            ticks.append((place(at), at.strftime("%b %Y")))
    day = datetime(first.year, first.month, first.day, tzinfo=UTC)
    step_days = max(1, span // 7)
    while day < last:
        day += timedelta(days=step_days)
        if day < last:
            ticks.append((place(day), day.strftime("%d %b %Y")))
    return ticks


def timeline(facts: Sequence[Fact], link: Callable[[str], str], now: datetime) -> Timeline:
    """Lay out ``facts`` (any status) as bars of valid time with marks of record time.

    A fact without a start of validity starts where it was said (``stated_at``, drawn with an
    open start); an active fact without an end is drawn to now (open end). A superseded bar
    links (``link``) to the fact that replaced it, every other bar to its own fact.
    """
    ordered = sorted(facts, key=lambda f: (_start(f), f.recorded_at, f.id))
    times: list[datetime] = [now]
    for fact in ordered:
        times.append(_start(fact))
        times.append(fact.recorded_at)
        end = _end(fact, now)
        if end is not None:
            times.append(end)
    first, last = min(times), max(times)
    pad = max((last - first) * 0.03, timedelta(days=1))
    first, last = first - pad, last + pad
    total = (last - first).total_seconds()
    inner = WIDTH - 2 * MARGIN

    def place(at: datetime) -> float:
        return round(MARGIN + inner * (at - first).total_seconds() / total, 1)

    bars = []
    for row, fact in enumerate(ordered):
        y = AXIS + row * ROW
        left, right = place(_start(fact)), place(_end(fact, now) or now)
        width = max(right - left, 4.0)
        classes = f"bar status-{fact.status.value} trust-{fact.trust.value}"
        replaced = fact.status is FactStatus.SUPERSEDED and fact.superseded_by
        href = link(fact.superseded_by[0]) if replaced else link(fact.id)
        title = _bar_title(fact)
        marks = [Mark(place(fact.recorded_at), "recorded", f"recorded {moment(fact.recorded_at)}")]
        for kind, at in (
            ("superseded", fact.superseded_at),
            ("forgotten", fact.forgotten_at),
            ("retracted", fact.retracted_at),
        ):
            if at is not None:
                marks.append(Mark(place(at), kind, f"{kind} {moment(at)}"))
        bars.append(
            Bar(
                fact=fact,
                label=plain(fact.text),
                y=y,
                x=left,
                width=round(width, 1),
                classes=classes,
                title=title,
                href=href,
                open_start=fact.valid_from is None,
                open_end=_end(fact, now) is None,
                marks=tuple(marks),
            )
        )
    rows = {bar.fact.id: bar for bar in bars}
    links = tuple(
        (old.x + old.width, old.y + 24, rows[new].x, rows[new].y + 24)
        for old in bars
        for new in old.fact.superseded_by
        if new in rows
    )
    current = sum(bar.current for bar in bars)
    summary = f"{len(bars)} facts in time, {current} current"
    return Timeline(
        bars=tuple(bars),
        ticks=tuple(t for t in _ticks(first, last, place) if t[0] < WIDTH - 40),
        links=links,
        now_x=place(now),
        height=AXIS + len(bars) * ROW + 8,
        summary=summary,
        statuses=tuple(sorted({f.status.value for f in ordered})),
    )


def plain(text: str) -> str:
    """Fact text without its entity brackets and time annotations."""
    out: list[str] = []
    depth = 0
    skipping = False
    for char in text:
        if char == "[":
            depth += 1
            continue
        if char == "]" and depth:
            depth -= 1
            skipping = False
            continue
        if depth and char == ":" and out and out[-1] == ":":
            out.pop()
            skipping = True
            continue
        if not skipping:
            out.append(char)
    return "".join(out)


def _bar_title(fact: Fact) -> str:
    valid = f"valid {moment(fact.valid_from) or '?'} to {moment(fact.valid_to) or 'open'}"
    parts = [plain(fact.text), f"{fact.status.value}, {fact.trust.value}", valid]
    if fact.superseded_by:
        parts.append("replaced by " + ", ".join(short(i) for i in fact.superseded_by))
    return " — ".join(parts)


@dataclass(frozen=True, slots=True)
class AuditPage:
    """One page of the filtered audit log, newest first."""

    events: tuple[AuditEvent, ...]
    page: int
    pages: int
    total: int


def audit_page(
    memory: Memory,
    scope: Scope,
    *,
    action: str = "",
    actor: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
    page: int = 1,
) -> AuditPage:
    """The audit events of ``scope`` meeting the filters, newest first, one page of them.

    ``action`` is one :class:`AuditAction` value (empty: every action), ``actor`` a part of
    the actor as written (``reviewer:ana``; case ignored), ``since``/``until`` a half-open
    time range.
    """
    actions = [AuditAction(action)] if action in AuditAction._value2member_map_ else None
    events = memory.audit(scope=scope, since=since, actions=actions)
    wanted = actor.strip().lower()
    kept = [
        e
        for e in events
        if (not wanted or wanted in str(e.actor).lower()) and (until is None or e.at < until)
    ]
    kept.reverse()
    pages = max(1, -(-len(kept) // AUDIT_PAGE_SIZE))
    page = min(max(page, 1), pages)
    start = (page - 1) * AUDIT_PAGE_SIZE
    chosen = tuple(kept[start : start + AUDIT_PAGE_SIZE])
    return AuditPage(events=chosen, page=page, pages=pages, total=len(kept))


def trust_note(fact: Fact) -> str:
    """A few words on the fact's trust, for people."""
    return {
        Trust.STATED: "a participant said it",
        Trust.DERIVED: "inferred by a model or written by an agent",
        Trust.CONFIRMED: "a person confirmed it",
        Trust.DISPUTED: "disputed: waiting for a review",
    }[fact.trust]
