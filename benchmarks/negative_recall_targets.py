"""Records of the negative-recall benchmark and the queries made from a target's text.

Shared by the build (``benchmarks.negative_recall_build``: the store, the targets, the
operations) and the probes (``benchmarks.negative_recall_probes``); the entry point and the
report are ``benchmarks.negative_recall``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from membrain.api.models import Scope, now
from membrain.api.profile import DEFAULT_PROFILE_SCHEMA, ProfileSchema, ProfileTopic
from membrain.temporal import find_times, plain_text

OPERATIONS = ("forget", "supersede", "purge", "reject", "delete")
"""The operations under test, in report order."""
PROFILE_TOPIC = "bench"
"""The profile topic of the entries citing the targets (one each, written before the
operations; :data:`PROFILE_SCHEMA`)."""
PROFILE_SCHEMA = ProfileSchema(
    topics=(*DEFAULT_PROFILE_SCHEMA.topics, ProfileTopic(name=PROFILE_TOPIC, cap=100)),
    strict=False,
)
"""The default schema, and a topic that holds an entry per target."""

_KEYWORDS = 6
_STOPWORDS = frozenset(
    """a about after again all also always am an and any are as at be because been before being
    but by can could did didn do does doesn doing don done down for from had has have haven having
    he her here hers him his how i if in into is isn it its just like made make many me more most
    much my never no not now of off oh on once only or other our out over really so some such than
    that the their them then there these they this those through to too up very was wasn way we
    well were what when where which while who why will with won would wow yeah yes you
    your""".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]+")


# -- records -----------------------------------------------------------------------------------
@dataclass
class Target:
    """A named fact (with what else its operation names) and the queries that probe it."""

    operation: str
    conversation: str
    scope: Scope
    fact_id: str
    text: str
    """The fact as stored (entity brackets, time annotations)."""
    sources: tuple[str, ...]
    """Stored ids of its source messages."""
    cited: tuple[str, ...]
    """Caller-side ids of its source messages (LoCoMo ``dia_id``)."""
    message_text: str
    speaker: str
    queries: tuple[str, ...] = ()
    rendered: str = ""
    """The fact as a reader sees it (``MemoryHit.text``), whitespace collapsed."""
    fact_ids: set[str] = field(default_factory=set)
    """Every fact the operation names: none may come back."""
    message_ids: set[str] = field(default_factory=set)
    """Stored messages the operation names (purge, delete)."""
    source_ids: set[str] = field(default_factory=set)
    """Caller-side ids of those messages."""
    needles: tuple[str, ...] = ()
    """Distinctive texts of what a purge erased (searched in context texts and in the files)."""
    found_before: bool = False
    skipped: str | None = None
    profile: str = ""
    """The subtopic of its profile entry (topic :data:`PROFILE_TOPIC`), citing it."""
    review: str = ""
    """The review item of its dispute (a ``reject`` target, disputed before the operations)."""


@dataclass
class StoreTarget:
    """An item of the LangGraph store that is overwritten (``supersede``) or deleted."""

    operation: str
    conversation: str
    namespace: tuple[str, ...]
    scope: Scope
    key: str
    old_text: str
    new_text: str | None
    queries: tuple[str, ...]
    source_id: str = ""
    """Caller-side id of the message the store wrote for the previous value."""
    fact_ids: set[str] = field(default_factory=set)
    """Facts extracted from the previous value."""
    found_before: bool = False


@dataclass
class ConversationSetup:
    """The scopes and targets of one conversation."""

    name: str
    main: Scope
    deleted: Scope
    other_dataset: Scope
    other_task: Scope
    store_scope: Scope
    namespace: tuple[str, ...]
    targets: list[Target] = field(default_factory=list)
    store_targets: list[StoreTarget] = field(default_factory=list)
    controls: list[str] = field(default_factory=list)
    """Kept message texts the file scan must find (its positive control)."""


# -- text helpers ------------------------------------------------------------------------------
def collapse(text: str) -> str:
    """``text`` with every run of whitespace made one space, stripped."""
    return " ".join(text.split())


def without_times(text: str) -> str:
    """``text`` with every time expression the search would read removed."""
    for _ in range(5):
        matches = find_times(text, now())
        if not matches:
            break
        for match in reversed(matches):
            text = text[: match.start] + " " + text[match.end :]
    return collapse(text)


def keywords(text: str, names: Iterable[str]) -> str:
    """The longest content words of ``text`` (names left out), in their order, or ""."""
    skip = {n.lower() for name in names for n in name.split()}
    seen: dict[str, str] = {}
    for word in _WORD.findall(text):
        base = re.split("['’]", word)[0]  # "Painting's" -> "Painting", "we've" -> "we"
        low = base.lower()
        if len(low) < 4 or low in _STOPWORDS or low in skip or low in seen:
            continue
        seen[low] = base
    if len(seen) < 2:
        return ""
    longest = set(sorted(seen, key=lambda w: (-len(w), w))[:_KEYWORDS])
    return " ".join(word for low, word in seen.items() if low in longest)


def queries_for(text: str, operation: str, names: Iterable[str]) -> tuple[str, ...]:
    """A target's queries: its plain text (times removed for ``supersede``), its keywords."""
    plain = collapse(plain_text(text))
    if operation == "supersede":
        plain = without_times(plain)
    short = keywords(plain, names)
    return tuple(dict.fromkeys(q for q in (plain, short) if q))
