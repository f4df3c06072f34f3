"""Scale: how build time, memory, disk, search and per-tenant work grow with the facts stored.

Usage (from the repository root)::

    python -m benchmarks.scale --data ../shared/data/locomo/locomo10_dev.json \
        [--levels 10000 100000 1000000] [--tenants 1000] [--queries 50] [--json OUT]

What it builds. One embedded store (Qdrant Edge, the packaged MiniLM and BM25 encoders), grown
level by level to each of ``--levels`` facts. Half the facts of a level belong to one large
tenant; the other half are spread evenly over ``--tenants`` small ones. Each fact is a LoCoMo
dev turn (any conversation, drawn at random: turns recombined across conversations) said by its
speaker at a new time (re-timed: a tenant's turns are a few minutes apart from 2023-01-01), with
its message stored beside it, as extraction would leave them; facts and messages are written
through the record store in batches of 1,000, with the speakers as participant entities. A
distinct text is embedded once (the pool holds a few thousand turns), so building a level costs
the writes and the indexes, not the encoder; the encoder's cost is ingest's, measured by
``benchmarks.locomo_retrieval``.

What it measures at each level, in the same run:

* build: seconds and facts per second for the level's new facts (and their messages), the
  process's peak RSS and the store's size on disk;
* search on the large tenant and on one small tenant: p50 / p95 (ms) per mode over
  ``--queries`` LoCoMo questions, and the floor (one query embedding plus one raw Qdrant dense
  query, timed on the same questions) with each mode's ratio to it;
* the per-tenant work as the tenant grows: one new message added to the large tenant and to a
  small one through offline extraction (entity resolution, the known facts a message may
  replace, the lexical index's catch-up), in ms, median of five;
* the lexical catch-up: the first ``deep`` search after the level's writes (it brings the boolean
  path's tantivy index up to date) against its steady p50.

Each level's figures are printed as soon as it is measured, the whole table at the end.

Figures are ratios within one run where they compare (a mode to its floor); absolute times on a
shared machine are noise. RSS is the peak of the whole process (it never goes down).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
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
from membrain.api.indexing import fact_dense_text, fact_sparse_text
from membrain.api.models import Entity, EntityVersion, Message, MessageStatus, Scope, StoredMessage
from membrain.backends.base import DENSE, Collection, VectorQuery
from membrain.embeddings import DenseEncoder, SparseEncoder, SparseVector
from membrain.extraction.base import FactDraft
from membrain.files.loaders import locomo_conversations
from membrain.knowledge.facts import PARTICIPANT_DESCRIPTION, build_facts, entity_id

DEFAULT_DATA = Path("/work/shared/data/locomo/locomo10_dev.json")
MODES = ("fast", "expand", "deep")
BATCH = 1000
PROGRESS = 50_000
"""Facts written between two progress lines while a level builds."""
EXTRACTOR = "synthetic-scale-v1"
START = datetime(2023, 1, 1, 9, 0, tzinfo=UTC)
LARGE = Scope(dataset="scale-large", task="bench")


# -- encoders that embed a text once ------------------------------------------------------------
class OnceDense(WrappedEncoder):
    """A dense encoder that embeds each distinct text once (the pool repeats its turns)."""

    def __init__(self, inner: DenseEncoder) -> None:
        super().__init__(inner)
        self._seen: dict[str, list[float]] = {}

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._seen))
        if missing:
            self._seen.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        return [self._seen[t] for t in texts]


class OnceSparse:
    """A sparse encoder that encodes each distinct text once."""

    def __init__(self, inner: SparseEncoder) -> None:
        self.inner = inner
        self._seen: dict[str, SparseVector] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    def embed_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._seen))
        if missing:
            self._seen.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        return [self._seen[t] for t in texts]

    def embed_query(self, text: str) -> SparseVector:
        return self.inner.embed_query(text)


# -- the corpus ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str


def turn_pool(raw: Sequence[dict[str, Any]]) -> tuple[list[Turn], list[str]]:
    """Every LoCoMo turn with text, and every question."""
    turns = [
        Turn(m.speaker, " ".join(m.text.split()))
        for conv in locomo_conversations(raw)
        for m in conv.messages
        if m.text.strip()
    ]
    questions = [
        str(q["question"]) for item in raw for q in item.get("qa", []) if q.get("question")
    ]
    return turns, questions


def plan(level: int, tenants: int) -> dict[Scope, int]:
    """How many facts each tenant holds at ``level``: half in the large one."""
    small = (level - level // 2) // tenants
    counts = {Scope(dataset=f"scale-{n:04d}", task="bench"): small for n in range(tenants)}
    counts[LARGE] = level - small * tenants
    return counts


def grow(
    mem: Memory, scope: Scope, have: int, want: int, pool: Sequence[Turn], rng: random.Random
) -> None:
    """Write facts ``have`` to ``want`` of ``scope``, with their messages and speakers."""
    if want <= have:
        return
    chosen = [pool[rng.randrange(len(pool))] for _ in range(want - have)]
    speakers = sorted({t.speaker for t in chosen})
    recorded = datetime.now(UTC)
    mem.store.put_entities(scope, [_participant(scope, name, recorded) for name in speakers])
    for start in range(0, len(chosen), BATCH):
        part = chosen[start : start + BATCH]
        messages, drafts = [], []
        for offset, turn in enumerate(part, have + start):
            at = START + timedelta(minutes=7 * offset)
            ident = scope.record_id("scale", str(offset))
            messages.append(
                StoredMessage(
                    id=ident,
                    scope=scope,
                    message=Message(speaker=turn.speaker, text=turn.text, timestamp=at),
                    status=MessageStatus.PROCESSED,
                    recorded_at=recorded,
                )
            )
            drafts.append(
                FactDraft(
                    text=f"[{turn.speaker}] said: {turn.text}", sources=(ident,), stated_at=at
                )
            )
        mem.store.put_messages(scope, messages)
        facts, _ = build_facts(scope, drafts, extractor=EXTRACTOR, recorded_at=recorded)
        mem.store.put_facts(scope, facts, speakers)


def _participant(scope: Scope, name: str, at: datetime) -> Entity:
    version = EntityVersion(version=1, description=PARTICIPANT_DESCRIPTION, recorded_at=at)
    return Entity(
        id=entity_id(scope, name),
        scope=scope.without_session(),
        name=name,
        versions=(version,),
        participant=True,
        created_at=at,
    )


def _embed_all(mem: Memory, turns: Sequence[Turn], speakers: Sequence[str]) -> None:
    """Embed the turns as a message and as a fact would be (the encoders keep them)."""
    texts = [f"{t.speaker}: {t.text}" for t in turns]
    facts = [f"[{t.speaker}] said: {t.text}" for t in turns]
    mem.store.dense.embed_documents(texts)
    mem.store.sparse.embed_documents(texts)
    mem.store.sparse.embed_documents([fact_sparse_text(f) for f in facts])
    mem.store.dense.embed_documents([fact_dense_text(f, speakers) for f in facts])


# -- measuring ----------------------------------------------------------------------------------
def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95)}


def search_times(mem: Memory, scope: Scope, questions: Sequence[str]) -> dict[str, Any]:
    """Per mode p50/p95 (ms), the floor's, and each mode's p50 ratio to the floor's."""
    dense = mem.store.dense
    embed, raw = [], []
    for question in questions:
        t0 = time.perf_counter()
        vector = dense.embed_query(question)
        t1 = time.perf_counter()
        mem.store.backend.query(Collection.FACTS, scope, [VectorQuery(DENSE, vector)], limit=10)
        t2 = time.perf_counter()
        embed.append((t1 - t0) * 1000)
        raw.append((t2 - t1) * 1000)
    floor = [e + r for e, r in zip(embed, raw, strict=True)]
    out: dict[str, Any] = {"floor": _stats(floor), "embed": _stats(embed), "raw_query": _stats(raw)}
    for mode in MODES:
        times = []
        for question in questions:
            t0 = time.perf_counter()
            mem.search(question, scope=scope, mode=mode, k=10)
            times.append((time.perf_counter() - t0) * 1000)
        out[mode] = {**_stats(times), "ratio": percentile(times, 50) / out["floor"]["p50"]}
    return out


def add_one(mem: Memory, scope: Scope, count: int) -> float:
    """Median ms to add one new message (offline extraction) to ``scope``."""
    times = []
    for n in range(5):
        said = {
            "speaker": "Caroline",
            "text": f"I moved to Porto and I work as a nurse now, note {count}-{n}.",
            "timestamp": (START + timedelta(days=3000 + n)).isoformat(),
        }
        t0 = time.perf_counter()
        mem.add([said], scope=scope)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _disk(path: Path) -> int:
    """Bytes the files under ``path`` take on disk (blocks: engines preallocate sparse files)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def _disk_by_part(path: Path) -> dict[str, float]:
    """MB on disk per collection (and the lexical index)."""
    return {p.name: _disk(p) / 2**20 for p in sorted(path.iterdir()) if p.is_dir()}


def _progress(written: int, started: float, folder: Path) -> None:
    """A line on stderr while a level builds: how far, how fast, memory and disk so far."""
    elapsed = time.perf_counter() - started
    print(
        f"  {written:,} facts written, {elapsed:,.0f} s into the level, peak RSS "
        f"{_rss_mb():,.0f} MB, disk {_disk(folder) / 2**20:,.0f} MB",
        file=sys.stderr,
        flush=True,
    )


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args: argparse.Namespace) -> dict[str, Any]:
    raw = json.loads(Path(args.data).read_text(encoding="utf-8"))
    pool, all_questions = turn_pool(raw)
    rng = random.Random(args.seed)
    questions = rng.sample(all_questions, min(args.queries, len(all_questions)))
    levels: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="scale-") as folder:
        mem = Memory(path=folder)
        mem.store.dense = OnceDense(mem.store.dense)
        mem.store.sparse = OnceSparse(mem.store.sparse)
        have: dict[Scope, int] = {}
        small = Scope(dataset="scale-0000", task="bench")
        warm = Scope(dataset="scale-warm-up", task="bench")  # every turn embedded before timing
        grow(mem, warm, 0, 1, pool, rng)
        speakers = sorted({t.speaker for t in pool})
        for start in range(0, len(pool), BATCH):
            _embed_all(mem, pool[start : start + BATCH], speakers)
        try:
            for level in args.levels:
                started = time.perf_counter()
                reported = sum(have.values()) // PROGRESS
                for scope, want in plan(level, args.tenants).items():
                    grow(mem, scope, have.get(scope, 0), want, pool, rng)
                    have[scope] = max(have.get(scope, 0), want)
                    if sum(have.values()) // PROGRESS > reported:
                        reported = sum(have.values()) // PROGRESS
                        _progress(sum(have.values()), started, Path(folder))
                mem.optimize()
                built = time.perf_counter() - started
                new = level - (levels[-1]["facts"] if levels else 0)
                t0 = time.perf_counter()
                mem.search(questions[0], scope=LARGE, mode="deep", k=10)
                catch_up = (time.perf_counter() - t0) * 1000
                entry = {
                    "facts": level,
                    "large_tenant_facts": have[LARGE],
                    "small_tenant_facts": have[small],
                    "build_s": built,
                    "facts_per_s": new / built if built else float("nan"),
                    "peak_rss_mb": _rss_mb(),
                    "disk_mb": _disk(Path(folder)) / 2**20,
                    "disk_mb_by_part": _disk_by_part(Path(folder)),
                    "search_large": search_times(mem, LARGE, questions),
                    "search_small": search_times(mem, small, questions),
                    "add_one_large_ms": add_one(mem, LARGE, level),
                    "add_one_small_ms": add_one(mem, small, level),
                    "first_deep_ms": catch_up,
                }
                levels.append(entry)
                print(format_level(entry), format_search([entry]), sep="\n", flush=True)
        finally:
            mem.close()
    return {
        "levels": levels,
        "tenants": args.tenants,
        "queries": len(questions),
        "pool_turns": len(pool),
        "data": str(args.data),
    }


# -- the report ---------------------------------------------------------------------------------
def format_level(e: dict[str, Any]) -> str:
    parts = ", ".join(f"{name} {mb:,.0f}" for name, mb in e["disk_mb_by_part"].items())
    return (
        f"{e['facts']:,} facts: built in {e['build_s']:.0f} s ({e['facts_per_s']:,.0f} facts/s), "
        f"peak RSS {e['peak_rss_mb']:,.0f} MB, disk {e['disk_mb']:,.0f} MB ({parts})"
    )


def format_report(report: dict[str, Any]) -> str:
    levels = report["levels"]
    header = [
        "facts",
        "build s",
        "facts/s",
        "peak RSS MB",
        "disk MB",
        "add 1 msg large ms",
        "add 1 msg small ms",
        "first deep ms",
    ]
    rows = [
        [
            f"{e['facts']:,}",
            f"{e['build_s']:.0f}",
            f"{e['facts_per_s']:,.0f}",
            f"{e['peak_rss_mb']:,.0f}",
            f"{e['disk_mb']:,.0f}",
            f"{e['add_one_large_ms']:.0f}",
            f"{e['add_one_small_ms']:.0f}",
            f"{e['first_deep_ms']:.0f}",
        ]
        for e in levels
    ]
    return "\n".join(
        [
            f"Scale ({report['tenants']} small tenants and one large; {report['queries']} "
            f"questions; {report['pool_turns']:,} LoCoMo turns recombined)",
            format_table(header, rows),
            "",
            "Search latency (ms) per tenant",
            format_search(levels),
        ]
    )


def format_search(levels: Sequence[dict[str, Any]]) -> str:
    """The search table of ``levels``: per level and tenant, each mode against the floor."""
    header = ["facts", "tenant", "floor p50", *(f"{m} p50 / p95 (x floor)" for m in MODES)]
    rows = []
    for e in levels:
        for tenant, key in (("large", "search_large"), ("small", "search_small")):
            s = e[key]
            rows.append(
                [
                    f"{e['facts']:,}",
                    f"{tenant} ({e[f'{tenant}_tenant_facts']:,})",
                    f"{s['floor']['p50']:.1f}",
                    *(
                        f"{s[m]['p50']:.1f} / {s[m]['p95']:.1f} ({s[m]['ratio']:.1f}x)"
                        for m in MODES
                    ),
                ]
            )
    return format_table(header, rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON file")
    parser.add_argument("--levels", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args(argv)
    args.levels = sorted(set(args.levels))
    if args.levels[0] < 2 * args.tenants:
        parser.error("each level needs at least two facts per small tenant")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
