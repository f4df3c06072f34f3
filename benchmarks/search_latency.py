"""Search latency of ``Memory.search`` per retrieval mode, on one scope of N synthetic facts.

Usage (from the repository root)::

    python -m benchmarks.search_latency [--facts 10000] [--queries 200] \
        [--modes fast expand deep] [--warmup 10] [--seed 0] [--json OUT]

A mode ending in ``-fused`` (``expand-fused``) runs with ``rerank=False``: time it beside the
same mode to get the reranker's cost as a ratio measured in one run. A mode ending in
``-traced`` (``fast-traced``) runs with the recall trace on (``Memory(trace_recalls=True)``):
time it beside the same mode for the trace's cost.

What it does:

1. Generates ``--facts`` varied fact sentences from templates (three participants, a few hundred
   other people, activities, places, objects, feelings; about 40% carry a ``[raw::resolved]``
   time annotation such as ``[last month::2023-04]``) and writes them to ONE scope of a fresh
   temporary embedded store (Qdrant Edge) with the real default encoders (the packaged
   all-MiniLM-L6-v2 and BM25): facts are built with ``build_facts`` from ``FactDraft``s whose
   sources are synthetic message ids and written in batches through the record store, with the
   entities they name, and the messages they cite (each the text of its facts, so the paths and
   signals that read whole turns have turns to read); no extraction runs. Then
   ``Memory.optimize()``.
2. Generates ``--queries`` templated questions about those facts (about 20% ask when, about 20%
   name a month, so the time boosts run), with a fixed reference time.
3. After ``--warmup`` untimed rounds, takes the questions one by one and, for each, times
   ``Memory.search(question, mode=m, k=10)`` in every mode, then the baselines: the query
   embedding alone (``dense.embed_query``), one raw Qdrant dense query with that vector
   (``backend.query(FACTS, scope, [VectorQuery("dense", v)], limit=10)``), and the two in
   sequence (the least a search can do). Taking every mode and baseline in turn per question
   makes a busy spell of this shared machine weigh on all of them alike.

Reported per mode: p50 / p95 / p99 (ms); the ratio of its p50 to the raw dense query's p50, to
the **floor** (the embedding's p50 plus the raw query's p50) and to the minimal search's p50;
the time it spent embedding query texts (p50, and how many texts a search embedded on average:
``expand`` embeds its rewrites with the question in one call); and the paths that ran (the
union of ``MemoryHit.paths`` keys over every timed search: a path that ran but contributed none
of the top 10 of any question is not listed). Whether ``fast``
stays within 1.5x the floor and ``expand`` within 2.5x (:data:`FLOOR_TARGETS`), and whether
fast-mode p95 is below 50 ms at 10,000 facts: measurements, not assertions. Also the build time
(embedding and writing) and the ``optimize()`` time. A second
table splits the latencies by question kind: plain, asking when (the ``when`` boost runs) and
naming a month (the ``time`` and ``stated`` boosts run). The 1-minute load average before and
after the timed searches is printed too: tail latencies on a busy machine measure the machine.

``--hashing-encoder`` swaps the real dense model for :class:`membrain.testing.HashingEncoder`:
for smoke tests only, the figures then say nothing about real latency.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.locomo_eval import format_table, percentile
from benchmarks.wrapped import WrappedEncoder
from membrain import Memory
from membrain.api.models import (
    Entity,
    EntityVersion,
    Message,
    MessageStatus,
    Scope,
    StoredMessage,
)
from membrain.backends.base import DENSE, Collection, VectorQuery
from membrain.embeddings import DenseEncoder, embed_queries
from membrain.extraction.base import FactDraft, entity_refs
from membrain.knowledge.facts import PARTICIPANT_DESCRIPTION, build_facts, entity_id
from membrain.retrieval.search import MODE_PATHS, RetrievalMode
from membrain.temporal import plain_text
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="latency", task="bench")
REFERENCE = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
""""Now" for every search, so relative times in questions resolve the same on every run."""
TARGET_MODE = "fast"
TARGET_P95_MS = 50.0
TARGET_FACTS = 10_000
K = 10
EXTRACTOR = "synthetic-latency-v1"
WRITE_BATCH = 1000

PARTICIPANTS = ("Sara", "Tom", "Priya")
_FIRST = (
    "Maya Liam Noah Emma Olivia Ava Lucas Mia Ethan Zoe Leo Chloe Mateo Aria Jonas Elena Omar "
    "Fatima Kenji Yuki Diego Lucia Ivan Anya Kwame Amara Raj Meera Hugo Ines Felix Clara Oscar "
    "Nora Theo Lena Marco Sofia Andre Beatriz Samuel Hannah Daniel Rosa Victor Julia Tariq Leila "
    "Henrik Astrid Pablo Carmen Arjun Divya Kofi Esi Mikhail Olga Rafael Camila Tobias Greta"
).split()
_LAST = (
    "Chen Okafor Silva Novak Haddad Tanaka Morales Kowalski Nguyen Fischer Rossi Andersen Patel "
    "Dubois Garcia Kim Larsen Mendes Ivanova Osei"
).split()
_RELATIONS = (
    "sister brother cousin colleague neighbour friend mentor roommate aunt uncle coach manager "
    "classmate partner"
).split()
_PLACES = (
    "Lisbon",
    "Kyoto",
    "Golden Gate Park",
    "Lake Tahoe",
    "Yosemite",
    "Barcelona",
    "Central Park",
    "the Louvre",
    "Brighton Beach",
    "Mount Rainier",
    "Reykjavik",
    "Cape Town",
    "Banff",
    "Prague",
    "Marrakech",
    "the Riverside Climbing Gym",
    "the Oak Street Farmers Market",
    "Blue Bottle Cafe",
    "the city library",
    "Seattle Aquarium",
    "Hanoi",
    "Vancouver",
    "the Tate Modern",
    "Zion National Park",
    "Copenhagen",
    "the community garden",
    "Edinburgh",
    "Santorini",
    "the Jazz Corner",
    "Lincoln High School",
)
_ACTIVITIES: tuple[tuple[str, str], ...] = (
    ("went hiking", "go hiking"),
    ("ran a half marathon", "run a half marathon"),
    ("took a pottery class", "take a pottery class"),
    ("went camping", "go camping"),
    ("painted a sunset landscape", "paint a sunset landscape"),
    ("played chess", "play chess"),
    ("volunteered at a food bank", "volunteer at a food bank"),
    ("learned to surf", "learn to surf"),
    ("went to a jazz concert", "go to a jazz concert"),
    ("baked sourdough bread", "bake sourdough bread"),
    ("adopted a rescue dog", "adopt a rescue dog"),
    ("started a book club", "start a book club"),
    ("went kayaking", "go kayaking"),
    ("joined a salsa class", "join a salsa class"),
    ("visited an art exhibition", "visit an art exhibition"),
    ("went birdwatching", "go birdwatching"),
    ("gave a talk on machine learning", "give a talk on machine learning"),
    ("planted tomatoes", "plant tomatoes"),
    ("went to a support group meeting", "go to a support group meeting"),
    ("took photos of the skyline", "take photos of the skyline"),
    ("rode a tandem bicycle", "ride a tandem bicycle"),
    ("cooked a Thai curry", "cook a Thai curry"),
    ("went ice skating", "go ice skating"),
    ("practised the violin", "practise the violin"),
    ("watched a documentary about whales", "watch a documentary about whales"),
    ("built a birdhouse", "build a birdhouse"),
    ("went to a pride parade", "go to a pride parade"),
    ("signed up for a coding bootcamp", "sign up for a coding bootcamp"),
    ("went scuba diving", "go scuba diving"),
    ("attended a wedding", "attend a wedding"),
)
_ADJECTIVES = (
    "red blue vintage handmade secondhand tiny enormous wooden leather ceramic silver green "
    "waterproof electric antique"
).split()
_OBJECTS = (
    "bicycle camera guitar teapot backpack novel lamp scarf telescope keyboard vase journal "
    "tent skateboard watch painting sweater mug drone puzzle"
).split()
_TOPICS = (
    "moving abroad",
    "the new job",
    "running a marathon",
    "adopting a child",
    "going back to school",
    "the election",
    "climate change",
    "learning Spanish",
    "buying a house",
    "becoming a counselor",
    "their health",
    "the band reunion",
    "online dating",
    "starting a business",
    "social media",
)
_FEELINGS = (
    "is excited",
    "feels nervous",
    "is worried",
    "feels hopeful",
    "is proud",
    "feels conflicted",
    "is curious",
    "feels relieved",
)
_HOBBIES = (
    "pottery",
    "rock climbing",
    "jazz",
    "gardening",
    "astronomy",
    "chess",
    "salsa dancing",
    "birdwatching",
    "photography",
    "baking",
)
_MONTHS = (
    "January February March April May June July August September October November December"
).split()


@dataclass(frozen=True, slots=True)
class Event:
    """What one synthetic fact says, kept so that questions can be asked about it."""

    kind: str
    who: str
    other: str
    activity: int
    place: str
    thing: str
    topic: str
    stated_at: datetime
    month: tuple[int, int] | None
    """(year, month) the fact's time annotation falls in, when it has one."""


@dataclass(frozen=True, slots=True)
class Corpus:
    """Generated facts (as drafts), the events they state and the people they name."""

    drafts: list[FactDraft]
    events: list[Event]
    others: list[str]


def _month_start(day: datetime) -> datetime:
    return day.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _time(rng: random.Random, stated_at: datetime) -> tuple[str, tuple[int, int]]:
    """A ``[raw::resolved]`` annotation of a past time relative to ``stated_at``."""
    choice = rng.randrange(7)
    if choice == 0:
        day = stated_at - timedelta(days=1)
        return f"[yesterday::{day:%Y-%m-%d}]", (day.year, day.month)
    if choice == 1:
        day = stated_at - timedelta(days=stated_at.weekday() + 2)
        return f"[last weekend::{day:%Y-%m-%d}]", (day.year, day.month)
    if choice == 2:
        day = _month_start(stated_at) - timedelta(days=1)
        return f"[last month::{day:%Y-%m}]", (day.year, day.month)
    if choice == 3:
        weeks = rng.randint(2, 5)
        day = stated_at - timedelta(weeks=weeks)
        return f"[{weeks} weeks ago::{day:%Y-%m-%d}]", (day.year, day.month)
    if choice == 4:
        day = stated_at - timedelta(days=rng.randint(20, 300))
        name = _MONTHS[day.month - 1]
        return f"[in {name} {day.year}::{day:%Y-%m}]", (day.year, day.month)
    if choice == 5:
        day = stated_at - timedelta(days=rng.randint(2, 25))
        return f"[on {day.day} {_MONTHS[day.month - 1]}::{day:%Y-%m-%d}]", (day.year, day.month)
    year = stated_at.year - 1
    return f"[last year::{year}]", (year, 6)


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _sentence(kind: str, e: dict[str, str], when: str) -> str:
    """The fact text of one template; ``when`` is "" or " <annotation>"."""
    if kind == "activity_place":
        return f"[{e['who']}] {e['past']} at [{e['place']}]{when}."
    if kind == "activity_with":
        return f"[{e['who']}] {e['past']} with [{e['other']}]{when}."
    if kind == "bought":
        return f"[{e['who']}] bought {_a(e['thing'])} for [{e['other']}]{when}."
    if kind == "told":
        return f"[{e['other']}] told [{e['who']}] that they {e['past']} in [{e['place']}]{when}."
    if kind == "relation":
        return f"[{e['other']}] is [{e['who']}]'s {e['relation']} and loves {e['hobby']}."
    if kind == "feeling":
        return f"[{e['who']}] {e['feeling']} about {e['topic']}."
    if kind == "plan":
        return f"[{e['who']}] is planning to {e['inf']} with [{e['other']}] at [{e['place']}]."
    if kind == "gift":
        return f"[{e['other']}] gave [{e['who']}] {_a(e['thing'])} after they {e['past']}{when}."
    raise ValueError(kind)


_KINDS = (
    "activity_place",
    "activity_with",
    "bought",
    "told",
    "relation",
    "feeling",
    "plan",
    "gift",
)
_TIMED = {"activity_place", "activity_with", "bought", "told", "gift"}


def generate_facts(count: int, seed: int = 0) -> Corpus:
    """``count`` distinct synthetic facts, sourced from synthetic message ids."""
    rng = random.Random(seed)
    others = sorted(
        {*_FIRST, *(f"{f} {last}" for f in _FIRST for last in _LAST if rng.random() < 0.2)}
    )
    start = datetime(2022, 1, 1, tzinfo=UTC)
    span_s = int((datetime(2024, 12, 31, tzinfo=UTC) - start).total_seconds())
    drafts: list[FactDraft] = []
    events: list[Event] = []
    seen: set[str] = set()
    while len(drafts) < count:
        stated_at = start + timedelta(seconds=rng.randrange(span_s))
        kind = rng.choice(_KINDS)
        activity = rng.randrange(len(_ACTIVITIES))
        fields = {
            "who": rng.choice(PARTICIPANTS),
            "other": rng.choice(others),
            "past": _ACTIVITIES[activity][0],
            "inf": _ACTIVITIES[activity][1],
            "place": rng.choice(_PLACES),
            "thing": f"{rng.choice(_ADJECTIVES)} {rng.choice(_OBJECTS)}",
            "relation": rng.choice(_RELATIONS),
            "hobby": rng.choice(_HOBBIES),
            "feeling": rng.choice(_FEELINGS),
            "topic": rng.choice(_TOPICS),
        }
        when, month = "", None
        if kind in _TIMED and rng.random() < 0.55:
            annotation, month = _time(rng, stated_at)
            when = " " + annotation
        text = _sentence(kind, fields, when)
        if text in seen:
            continue
        seen.add(text)
        message = SCOPE.record_id("message", "synthetic", str(len(drafts) // 3))
        drafts.append(FactDraft(text=text, sources=(message,), stated_at=stated_at))
        events.append(
            Event(
                kind=kind,
                who=fields["who"],
                other=fields["other"],
                activity=activity,
                place=fields["place"],
                thing=fields["thing"],
                topic=fields["topic"],
                stated_at=stated_at,
                month=month,
            )
        )
    return Corpus(drafts=drafts, events=events, others=others)


def generate_questions(events: Sequence[Event], count: int, seed: int = 1) -> list[str]:
    """``count`` templated questions about the facts (some ask when, some name a month)."""
    rng = random.Random(seed)
    asks_when = [e for e in events if e.kind in ("activity_place", "activity_with", "told")]
    dated = [e for e in events if e.month is not None]
    questions: list[str] = []
    while len(questions) < count:
        roll = rng.random()
        if roll < 0.2 and asks_when:
            e = rng.choice(asks_when)
            questions.append(f"When did {e.who} {_ACTIVITIES[e.activity][1]}?")
            continue
        if roll < 0.4 and dated:
            e = rng.choice(dated)
            assert e.month is not None
            questions.append(f"What did {e.who} do in {_MONTHS[e.month[1] - 1]} {e.month[0]}?")
            continue
        e = rng.choice(events)
        inf = _ACTIVITIES[e.activity][1]
        if e.kind == "activity_place":
            questions.append(f"Where did {e.who} {inf}?")
        elif e.kind == "activity_with":
            questions.append(f"Who did {e.who} {inf} with?")
        elif e.kind in ("bought", "gift"):
            noun = e.thing.split()[-1]
            questions.append(f"Who gave {e.who} {_a(noun)}, or who did {e.who} buy one for?")
        elif e.kind == "told":
            questions.append(f"What did {e.other} tell {e.who} about {e.place}?")
        elif e.kind == "relation":
            questions.append(f"How does {e.who} know {e.other}, and what does {e.other} love?")
        elif e.kind == "feeling":
            questions.append(f"How does {e.who} feel about {e.topic}?")
        else:
            questions.append(f"What is {e.who} planning to do at {e.place}?")
    return questions


KINDS = ("plain", "asks when", "names a time")
"""Question kinds, by the time boosts they trigger: none, ``when``, ``time`` and ``stated``."""
_NAMED_TIME = re.compile(r" in [A-Z][a-z]+ \d{4}\?$")


def question_kind(question: str) -> str:
    """Which of :data:`KINDS` a generated question is."""
    if question.startswith("When did "):
        return "asks when"
    return "names a time" if _NAMED_TIME.search(question) else "plain"


def _entities(corpus: Corpus, recorded_at: datetime) -> list[Entity]:
    names: dict[str, None] = {}
    for draft in corpus.drafts:
        names.update(dict.fromkeys(entity_refs(draft.text)))
    places = set(_PLACES)
    entities = []
    for name in names:
        participant = name in PARTICIPANTS
        if participant:
            description = PARTICIPANT_DESCRIPTION
        elif name in places:
            description = "A place."
        else:
            description = "A person the participants know."
        entities.append(
            Entity(
                id=entity_id(SCOPE, name),
                scope=SCOPE.without_session(),
                name=name,
                versions=(
                    EntityVersion(version=1, description=description, recorded_at=recorded_at),
                ),
                participant=participant,
                created_at=recorded_at,
            )
        )
    return entities


def write_corpus(mem: Memory, corpus: Corpus) -> int:
    """Write the corpus (entities, messages, then facts in batches); the facts written.

    Each synthetic message holds the plain text of the facts citing it, said by the first
    participant its first fact names, at that fact's statement time.
    """
    recorded_at = datetime.now(UTC)
    mem.store.put_entities(SCOPE.without_session(), _entities(corpus, recorded_at))
    said: dict[str, list[FactDraft]] = {}
    for draft in corpus.drafts:
        said.setdefault(draft.sources[0], []).append(draft)
    messages = [
        StoredMessage(
            id=message_id,
            scope=SCOPE,
            message=Message(
                speaker=next((p for p in PARTICIPANTS if p in drafts[0].text), PARTICIPANTS[0]),
                text=" ".join(plain_text(d.text) for d in drafts),
                timestamp=drafts[0].stated_at,
            ),
            status=MessageStatus.PROCESSED,
            recorded_at=recorded_at,
        )
        for message_id, drafts in said.items()
    ]
    for start in range(0, len(messages), WRITE_BATCH):
        mem.store.put_messages(SCOPE, messages[start : start + WRITE_BATCH])
    written = 0
    for start in range(0, len(corpus.drafts), WRITE_BATCH):
        facts, _ = build_facts(
            SCOPE,
            corpus.drafts[start : start + WRITE_BATCH],
            extractor=EXTRACTOR,
            recorded_at=recorded_at,
        )
        mem.store.put_facts(SCOPE, facts, PARTICIPANTS)
        written += len(facts)
    return written


BASELINES = ("embed_query", "raw_dense_query", "minimal_search")
"""Timed beside the modes: the query embedding, one raw dense query, the two in sequence."""
RATIOS = ("ratio_p50_to_raw_query", "ratio_p50_to_floor", "ratio_p50_to_minimal_search")
FLOOR_TARGETS = {"fast": 1.5, "expand": 2.5}
IN_ENCODER, TEXTS = ":in_encoder", ":texts"
"""Suffixes of the per-search series: ms spent embedding queries, and how many texts."""
"""The most a mode's p50 may be, as a multiple of the floor (embedding p50 + raw query p50)."""
UNRERANKED = "-fused"
"""Suffix of a mode timed with the reranker off (``expand-fused``), for a same-run ratio."""
TRACED = "-traced"
"""Suffix of a mode timed with the recall trace on (``fast-traced``), for a same-run ratio."""


def _search(mem: Memory, mode: str, question: str) -> Any:
    traced = mode.endswith(TRACED)
    mode = mode.removesuffix(TRACED)
    # ``rerank`` is passed only to turn the reranker off: a store of code before it times too.
    off: dict[str, Any] = {"rerank": False} if mode.endswith(UNRERANKED) else {}
    plain = mode.removesuffix(UNRERANKED)
    if traced:  # the recall trace on for this search only, under one run
        mem.trace_recalls = True
        off["run"] = "search-latency"
    try:
        return mem.search(question, scope=SCOPE, mode=plain, k=K, reference=REFERENCE, **off)
    finally:
        mem.trace_recalls = False


class QueryTimer(WrappedEncoder):
    """The store's dense encoder, timing the query embeddings a search asks for."""

    def __init__(self, inner: DenseEncoder) -> None:
        super().__init__(inner)
        self.seconds = 0.0
        self.texts = 0

    def reset(self) -> None:
        """Start counting again."""
        self.seconds, self.texts = 0.0, 0

    def embed_query(self, text: str) -> list[float]:
        """Embed one query, timed."""
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed queries in one call where the encoder can, timed."""
        started = time.perf_counter()
        try:
            return embed_queries(self.inner, texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)


def _minimal_search(mem: Memory, question: str) -> None:
    """The least a search does: embed the question, then one raw dense query."""
    vector = mem.store.dense.embed_query(question)
    mem.store.backend.query(Collection.FACTS, SCOPE, [VectorQuery(DENSE, vector)], limit=K)


def _time_interleaved(
    mem: Memory, modes: Sequence[str], questions: Sequence[str], warmup: int
) -> tuple[dict[str, list[float]], dict[str, list[str]], dict[str, int], dict[str, str]]:
    """Per-question latencies (ms) of every mode and baseline, taken in turn question by question.

    Each question runs every mode, then the baselines (the query embedding alone, one raw dense
    query alone, and the two in sequence), so a busy spell of the machine weighs on all alike.
    Also: the paths seen in hits, how many searches found nothing, and the modes that failed.
    """
    store = mem.store
    vectors: dict[str, list[float]] = {}
    for question in questions[:warmup]:
        for mode in modes:
            _search(mem, mode, question)
        _minimal_search(mem, question)
    timer = store.dense if isinstance(store.dense, QueryTimer) else None
    times: dict[str, list[float]] = {m: [] for m in (*modes, *BASELINES)}
    times.update({f"{m}{IN_ENCODER}": [] for m in modes})
    times.update({f"{m}{TEXTS}": [] for m in modes})
    seen: dict[str, set[str]] = {m: set() for m in modes}
    empty = dict.fromkeys(modes, 0)
    errors: dict[str, str] = {}
    for question in questions:
        for mode in modes:
            if mode in errors:
                continue
            if timer is not None:
                timer.reset()
            t0 = time.perf_counter()
            try:
                hits = _search(mem, mode, question)
            except Exception as exc:  # a broken mode is reported, the others still run
                errors[mode] = f"{type(exc).__name__}: {exc}"
                continue
            times[mode].append((time.perf_counter() - t0) * 1000)
            if timer is not None:
                times[f"{mode}{IN_ENCODER}"].append(timer.seconds * 1000)
                times[f"{mode}{TEXTS}"].append(float(timer.texts))
            empty[mode] += not hits
            for hit in hits:
                seen[mode].update(hit.paths)
        t0 = time.perf_counter()
        vectors[question] = store.dense.embed_query(question)
        times["embed_query"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        store.backend.query(
            Collection.FACTS, SCOPE, [VectorQuery(DENSE, vectors[question])], limit=K
        )
        times["raw_dense_query"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        _minimal_search(mem, question)
        times["minimal_search"].append((time.perf_counter() - t0) * 1000)
    paths = {m: sorted(seen[m], key=_path_order) for m in modes}
    return times, paths, empty, errors


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values) if values else float("nan"),
    }


def run(
    *,
    facts: int,
    queries: int,
    modes: Sequence[str],
    warmup: int = 10,
    seed: int = 0,
    dense: DenseEncoder | None = None,
    log: bool = True,
) -> dict[str, Any]:
    """Build the store, time every mode and the baselines; the report as a JSON-able dict."""

    def say(text: str) -> None:
        if log:
            print(text, file=sys.stderr, flush=True)

    started = time.perf_counter()
    corpus = generate_facts(facts, seed)
    questions = generate_questions(corpus.events, queries, seed + 1)
    generate_s = time.perf_counter() - started
    with (
        tempfile.TemporaryDirectory(prefix="search-latency-") as folder,
        Memory(path=Path(folder) / "store", dense=dense) as mem,
    ):
        store = mem.store
        encoder = store.dense.name
        say(f"writing {facts} facts with {encoder} ...")
        started = time.perf_counter()
        written = write_corpus(mem, corpus)
        build_s = time.perf_counter() - started
        say(f"  {written} facts written in {build_s:.1f} s; optimize ...")
        started = time.perf_counter()
        mem.optimize()
        optimize_s = time.perf_counter() - started
        stored = store.count_facts(SCOPE)

        store.dense = QueryTimer(store.dense)
        load_before = os.getloadavg()[0]
        say(
            f"{len(modes)} modes and the baselines, {warmup} warm-up + {len(questions)} timed "
            "questions, in turn ..."
        )
        timings, paths_ran, hits_empty, errors = _time_interleaved(mem, modes, questions, warmup)
        load_after = os.getloadavg()[0]

    raw = _stats(timings.pop("raw_dense_query"))
    embed = _stats(timings.pop("embed_query"))
    minimal = _stats(timings.pop("minimal_search"))
    floor = embed["p50"] + raw["p50"]
    in_encoder = {
        m: {
            "p50": percentile(timings.pop(f"{m}{IN_ENCODER}"), 50),
            "texts": statistics.fmean(timings.pop(f"{m}{TEXTS}") or [float("nan")]),
        }
        for m in modes
    }
    timings = {m: t for m, t in timings.items() if m not in errors}
    kinds = [question_kind(q) for q in questions]
    by_kind = {
        mode: {
            kind: _stats([t for t, k in zip(times, kinds, strict=True) if k == kind])
            for kind in KINDS
            if kind in kinds
        }
        for mode, times in timings.items()
    }
    latency: dict[str, dict[str, float | None]] = {}
    for mode in modes:
        if mode in timings:
            stats: dict[str, float | None] = {**_stats(timings[mode])}
            p50 = _stats(timings[mode])["p50"]
            stats["ratio_p50_to_raw_query"] = p50 / raw["p50"]
            stats["ratio_p50_to_floor"] = p50 / floor
            stats["ratio_p50_to_minimal_search"] = p50 / minimal["p50"]
        else:
            stats = dict.fromkeys(("p50", "p95", "p99", "mean", *RATIOS))
        latency[mode] = stats
    fast_p95 = latency.get(TARGET_MODE, {}).get("p95")
    target: dict[str, Any] = {
        "mode": TARGET_MODE,
        "p95_below_ms": TARGET_P95_MS,
        "at_facts": TARGET_FACTS,
        "measured_p95_ms": fast_p95,
        "holds": None if fast_p95 is None else fast_p95 < TARGET_P95_MS,
        "applicable": stored >= TARGET_FACTS,
    }
    return {
        "latency_ms": latency,
        "baseline_ms": {"raw_dense_query": raw, "embed_query": embed, "minimal_search": minimal},
        "in_encoder_ms": in_encoder,
        "floor_ms": floor,
        "floor_targets": {
            mode: _floor_target(latency[mode]["ratio_p50_to_floor"], bound)
            for mode, bound in FLOOR_TARGETS.items()
            if mode in latency
        },
        "paths_ran": paths_ran,
        "questions_without_hits": hits_empty,
        "errors": errors,
        "latency_ms_by_kind": by_kind,
        "questions_per_kind": {kind: kinds.count(kind) for kind in KINDS},
        "load_avg_1min": {"before_timing": load_before, "after_timing": load_after},
        "cpus": os.cpu_count(),
        "facts": stored,
        "facts_requested": facts,
        "queries": len(questions),
        "warmup": warmup,
        "k": K,
        "modes": list(modes),
        "build_s": build_s,
        "optimize_s": optimize_s,
        "generate_s": generate_s,
        "build_facts_per_s": written / build_s if build_s > 0 else float("nan"),
        "dense_encoder": encoder,
        "target": target,
        "seed": seed,
    }


def _floor_target(measured: float | None, bound: float) -> dict[str, Any]:
    holds = None if measured is None else measured <= bound
    return {"at_most": bound, "measured": measured, "holds": holds}


_ORDER = (*MODE_PATHS[RetrievalMode.DEEP], "time", "stated", "when")


def _path_order(name: str) -> tuple[int, str]:
    return (_ORDER.index(name), "") if name in _ORDER else (len(_ORDER), name)


def format_report(report: dict[str, Any]) -> str:
    """The printed tables of a :func:`run` report."""
    header = [
        "mode",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "p50 / raw query",
        "p50 / floor",
        "p50 / minimal search",
        "embedding queries p50 ms (texts)",
        "paths that ran",
    ]
    rows = []
    in_encoder = report.get("in_encoder_ms", {})
    for mode in report["modes"]:
        lat = report["latency_ms"][mode]
        if mode in report["errors"]:
            failed = f"FAILED: {report['errors'][mode]}"
            rows.append([mode, "-", "-", "-", "-", "-", "-", "-", failed])
            continue
        spent = in_encoder.get(mode)
        rows.append(
            [
                mode,
                f"{lat['p50']:.1f}",
                f"{lat['p95']:.1f}",
                f"{lat['p99']:.1f}",
                *(f"{lat[r]:.1f}x" for r in RATIOS),
                "-" if spent is None else f"{spent['p50']:.1f} ({spent['texts']:.1f})",
                " ".join(report["paths_ran"][mode]) or "-",
            ]
        )
    labels = {
        "raw_dense_query": "raw dense query",
        "embed_query": "embed query",
        "minimal_search": "embed, then raw query",
    }
    baselines = report["baseline_ms"]
    for key, label in labels.items():
        base = baselines[key]
        rows.append(
            [
                f"({label})",
                f"{base['p50']:.2f}",
                f"{base['p95']:.2f}",
                f"{base['p99']:.2f}",
                f"{base['p50'] / baselines['raw_dense_query']['p50']:.1f}x",
                f"{base['p50'] / report['floor_ms']:.1f}x",
                f"{base['p50'] / baselines['minimal_search']['p50']:.1f}x",
                "-",
                "-",
            ]
        )
    floor_lines = [
        f"target {mode} p50 <= {t['at_most']}x the floor ({report['floor_ms']:.2f} ms = embed "
        f"query p50 + raw dense query p50): "
        + ("not measured" if t["holds"] is None else "HOLDS" if t["holds"] else "DOES NOT HOLD")
        + ("" if t["measured"] is None else f" ({t['measured']:.2f}x)")
        for mode, t in report["floor_targets"].items()
    ]
    target = report["target"]
    if target["holds"] is None:
        verdict = f"not measured ({target['mode']} mode not run)"
    else:
        verdict = (
            f"{'HOLDS' if target['holds'] else 'DOES NOT HOLD'} "
            f"(p95 {target['measured_p95_ms']:.1f} ms)"
        )
        if not target["applicable"]:
            verdict += f" [only {report['facts']} facts: not the target's size]"
    counts = report["questions_per_kind"]
    kind_header = ["mode", *(f"{k} (n={counts[k]}) p50 / p95" for k in KINDS if counts[k])]
    kind_rows = [
        [
            mode,
            *(f"{figures[k]['p50']:.1f} / {figures[k]['p95']:.1f}" for k in KINDS if k in figures),
        ]
        for mode, figures in report["latency_ms_by_kind"].items()
    ]
    load = report["load_avg_1min"]
    return "\n".join(
        [
            f"Memory.search latency, {report['facts']} facts in one scope, "
            f"{report['queries']} questions x mode (k={report['k']}, warm-up "
            f"{report['warmup']}), dense encoder {report['dense_encoder']}",
            format_table(header, rows),
            "",
            "by question kind (ms)",
            format_table(kind_header, kind_rows),
            "",
            f"build: {report['facts']} facts embedded and written in {report['build_s']:.1f} s "
            f"({report['build_facts_per_s']:.0f} facts/s); optimize {report['optimize_s']:.2f} s",
            f"target {target['mode']}-mode p95 < {target['p95_below_ms']:.0f} ms at "
            f"{target['at_facts']} facts (embedded default): {verdict}",
            *floor_lines,
            f"1-min load average {load['before_timing']:.1f} before / {load['after_timing']:.1f} "
            f"after the timed searches, {report['cpus']} CPUs",
        ]
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.search_latency",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--facts", type=int, default=TARGET_FACTS, help="facts in the scope")
    parser.add_argument("--queries", type=int, default=200, help="timed questions per mode")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["fast", "expand", "deep"],
        choices=[
            m.value + suffix
            for m in RetrievalMode
            for suffix in ("", UNRERANKED, TRACED, UNRERANKED + TRACED)
        ],
        help=f"retrieval modes to time; a mode ending in {UNRERANKED} runs with rerank=False, "
        f"one ending in {TRACED} with the recall trace on",
    )
    parser.add_argument("--warmup", type=int, default=10, help="untimed searches per mode")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument(
        "--hashing-encoder",
        action="store_true",
        help="use the test HashingEncoder instead of the real model (smoke runs only)",
    )
    args = parser.parse_args(argv)
    if args.facts < 1 or args.queries < 1 or args.warmup < 0:
        parser.error("--facts and --queries must be positive, --warmup not negative")
    args.modes = list(dict.fromkeys(args.modes))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(
        facts=args.facts,
        queries=args.queries,
        modes=args.modes,
        warmup=args.warmup,
        seed=args.seed,
        dense=HashingEncoder(dim=64) if args.hashing_encoder else None,
    )
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
