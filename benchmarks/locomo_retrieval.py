"""LoCoMo evidence-recall benchmark of MemBrain retrieval, against raw-turn baselines.

Usage (from the repository root)::

    python -m benchmarks.locomo_retrieval --data ../shared/data/locomo/locomo10_dev.json \
        [--mode fast|expand|deep|auto] [--k 5 10 25] [--budget 1000 2000] [--json OUT] \
        [--limit-conversations N] [--conversations I ...] [--reranker FILE] [--path DIR] \
        [--search-k N] [--ablate] [--profile-ratio 0.3] [--min-relevance F]

``--conversations 3 4 --reranker test-34.json`` measures a held-out fold: only conversations 3 and
4, with the reranker ``benchmarks/train_reranker.py --folds DIR`` trained without them.

Each LoCoMo conversation is added to its own scope, ``Scope(dataset="locomo-<name>",
task="bench")``, of one store (a fresh temporary folder unless ``--path`` is given); then every
question of the conversation's ``qa`` list is asked of

* the system: ``Memory.search(question, mode=...)`` over the extracted facts;
* three baselines over the raw stored turns, same store, same encoders:
  BM25 only (``bm25``), dense only (``dense``) and their RRF fusion (``rrf``), all through
  ``Memory.search_messages``.

Each method is searched once per question, with ``--search-k`` results (default: enough for the
largest k and the largest budget), and the figures are computed on prefixes of that ranking.

Metric. A question's evidence is a list of LoCoMo dialogue ids (``D<session>:<turn>``). Malformed
strings are repaired or dropped ("D8:6; D9:17" holds two ids, "D:11:26" is read as "D11:26", "D"
is dropped), as are ids naming no turn of the conversation; questions left with no evidence are
skipped. Evidence recall of a ranked list = |evidence ∩ dialogue ids cited by the list| /
|evidence|, averaged over questions (all categories for "overall"). A fact cites the turns in
``MemoryHit.sources``; a raw turn cites itself.

* ``recall@k``: over the top ``k`` items.
* ``recall within B tokens``: each item is rendered as the line an agent's prompt would hold (a
  fact: its plain text plus a citation tag such as `` [D1:3; D1:4]``; a turn:
  ``speaker: text [image: caption] [D1:3]``), and items are taken in rank order while the total
  ``count_tokens`` (cl100k) of their lines stays within ``B``; recall is over what fits.

Fairness note: a fact may cite several turns, so at equal k the system can cover more evidence ids
than a turn baseline whose items each cite exactly one turn; recall@k therefore flatters the
system. The token-budget figures charge every method for the context it actually spends, and are
the fair comparison with the raw-turn baselines.

Also reported: ingest throughput (turns added per wall second, over all conversations, extraction
included), ``Memory.optimize()`` time, search latency (p50/p95 per call, ms; the system's is that of
the ``--mode`` run), facts stored, the mean number of turns cited per returned fact (top 10 of every
question) and question counts.

Paths. ``paths_seen`` lists the retrieval paths that found at least one returned fact (the keys of
``MemoryHit.paths``), and ``paths_seen_questions`` in how many questions each did. With ``--mode
auto``, ``auto_escalation`` is the share of questions that escalated from ``fast`` to ``expand``,
as the search reports it (``SearchResult.escalated``).

Profile (``--profile-ratio R``). After the main run, the system's rankings are scored again
with the user profile opening each context, as ``Memory.context(..., profile_ratio=R)`` puts it:
the profile block of the conversation's scope that fits ``R * B`` tokens
(:func:`membrain.retrieval.profile_block.profile_block`) comes first, citing the turns of the
facts its entries cite, and the facts fill what it leaves of ``B``. Reported per budget: recall
with the profile, the change against the main run, and the share of the budget the block used
(the most recall could lose to it).

Ablation (``--ablate``). After the main run, the system's searches are run again over the same
ingested stores, once per path of the mode with that path removed (``Memory.search(...,
exclude_paths=(name,))``), and once with the three time boosts (``time``, ``stated``, ``when``)
removed together as "time boosts", and once without the answer follow-up ("answers"). Only
paths seen in the main run are ablated: removing a path that found none of any question's results
leaves every ranking unchanged. For ``auto`` the paths are those of ``expand``, which it
escalates to; removing ``bm25`` or ``dense`` there also changes when it escalates. Reported per
removed path: recall@k, recall within each budget, search latency and the change of each against
the full mode (``ablation`` in the JSON).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from benchmarks.locomo_eval import (
    CATEGORIES,
    RecallTable,
    category_counts,
    format_table,
    normalize_dia_id,
    parse_evidence,
    percentile,
    recall_at_k,
    recall_within_budget,
    render_fact_line,
    render_turn_line,
)
from membrain import Memory, SearchResult
from membrain.api.models import MemoryHit, Message, Scope
from membrain.api.profile import ProfileEntry
from membrain.api.tokens import count_tokens
from membrain.files.loaders import Conversation, locomo_conversations
from membrain.retrieval.profile_block import profile_block
from membrain.retrieval.rerank import Reranker
from membrain.retrieval.search import MODE_PATHS, RetrievalMode
from membrain.temporal import plain_text

METHODS: tuple[tuple[str, str], ...] = (
    ("system", "system"),
    ("bm25", "bm25-turns"),
    ("dense", "dense-turns"),
    ("rrf", "rrf-turns"),
)
"""(JSON key, printed row name) of every method, in report order."""

_BASELINE_PATHS: dict[str, tuple[str, ...]] = {
    "bm25": ("sparse",),
    "dense": ("dense",),
    "rrf": ("sparse", "dense"),
}
_CITED_TOP = 10
TIME_BOOSTS = ("time", "stated", "when")
"""The boosts every mode adds when the question names a time or asks when (one ablation group)."""
_PATH_ORDER = (*MODE_PATHS[RetrievalMode.DEEP], *TIME_BOOSTS)


@dataclass(frozen=True, slots=True)
class Question:
    """One scored LoCoMo question."""

    conversation: str
    scope: Scope
    text: str
    category: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Item:
    """One ranked result as scored: the dia_ids it cites and its rendered prompt line."""

    dia_ids: tuple[str, ...]
    line: str


@dataclass
class MethodResult:
    """Accumulated figures of one method."""

    at_k: RecallTable = field(default_factory=RecallTable)
    at_budget: RecallTable = field(default_factory=RecallTable)
    latencies_ms: list[float] = field(default_factory=list)
    candidates_exhausted: dict[str, int] = field(default_factory=dict)
    """Per budget: questions whose whole candidate list fitted (recall may be a lower bound)."""

    def summary(self) -> dict[str, Any]:
        return {
            "recall_at_k": self.at_k.summary(),
            "recall_at_budget": self.at_budget.summary(),
            "candidates_exhausted_within_budget": dict(self.candidates_exhausted),
        }


@dataclass
class QuestionSet:
    """The questions of the selected conversations and what was filtered out."""

    questions: list[Question]
    skipped: int
    skipped_by_category: dict[str, int]
    dropped_tokens: list[str]
    unknown_ids: list[str]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.locomo_retrieval",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--data", required=True, type=Path, help="LoCoMo JSON file")
    parser.add_argument(
        "--mode",
        default="fast",
        choices=[m.value for m in RetrievalMode],
        help="Memory.search retrieval mode",
    )
    parser.add_argument("--k", nargs="+", type=int, default=[5, 10, 25], help="cut-offs k")
    parser.add_argument("--budget", nargs="+", type=int, default=[1000, 2000], help="token budgets")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--limit-conversations", type=int, default=None, metavar="N")
    parser.add_argument(
        "--conversations",
        nargs="+",
        type=int,
        default=None,
        metavar="I",
        help="only these conversations (0-based positions in the file), e.g. a held-out fold",
    )
    parser.add_argument(
        "--reranker",
        type=Path,
        default=None,
        help="reranker trees (JSON, as benchmarks.train_reranker writes) instead of the packaged",
    )
    parser.add_argument(
        "--path", type=Path, default=None, help="store folder (default: a fresh temporary one)"
    )
    parser.add_argument(
        "--search-k",
        type=int,
        default=None,
        metavar="N",
        help="results fetched per search (default: max(max k, 100, largest budget / 20))",
    )
    parser.add_argument(
        "--profile-ratio",
        type=float,
        default=None,
        metavar="R",
        help="also score the rankings with the user profile block taking up to R of each budget",
    )
    parser.add_argument(
        "--min-relevance",
        type=float,
        default=None,
        metavar="F",
        help="drop the system's hits less relevant than F (Memory.search(min_relevance=F)); "
        "the context default is membrain.api.requests.CONTEXT_MIN_RELEVANCE",
    )
    parser.add_argument(
        "--ablate",
        action="store_true",
        help="re-run the system's searches once per path of the mode with that path removed",
    )
    args = parser.parse_args(argv)
    if min(args.k) < 1 or min(args.budget) < 1:
        parser.error("--k and --budget values must be positive")
    if args.limit_conversations is not None and args.limit_conversations < 1:
        parser.error("--limit-conversations must be positive")
    if args.min_relevance is not None and not 0 <= args.min_relevance <= 1:
        parser.error("--min-relevance must be in [0, 1]")
    if args.profile_ratio is not None and not 0 < args.profile_ratio <= 1:
        parser.error("--profile-ratio must be in (0, 1]")
    args.k = sorted(set(args.k))
    args.budget = sorted(set(args.budget))
    if args.search_k is None:
        args.search_k = max(max(args.k), 100, -(-max(args.budget) // 20))
    if args.search_k < max(args.k):
        parser.error("--search-k must be at least the largest --k")
    return args


def build_questions(
    raw: Sequence[dict[str, Any]], conversations: Sequence[Conversation]
) -> QuestionSet:
    """Questions with valid evidence, per conversation; evidence ids must name a turn."""
    by_name = {str(item.get("sample_id")): item for item in raw}
    questions: list[Question] = []
    skipped_by_category: dict[str, int] = {}
    dropped: list[str] = []
    unknown: list[str] = []
    for conv in conversations:
        name = str(conv.name)
        turn_ids = {normalize_dia_id(m.source_id or "") for m in conv.messages} - {None}
        scope = conversation_scope(name)
        for qa in by_name[name].get("qa", []):
            category = str(qa.get("category"))
            ids, bad = parse_evidence(qa.get("evidence"))
            dropped.extend(f"{name}: {token}" for token in bad)
            unknown.extend(f"{name}: {i}" for i in ids if i not in turn_ids)
            evidence = tuple(i for i in ids if i in turn_ids)
            if not evidence:
                skipped_by_category[category] = skipped_by_category.get(category, 0) + 1
                continue
            questions.append(Question(name, scope, str(qa["question"]), category, evidence))
    return QuestionSet(
        questions=questions,
        skipped=sum(skipped_by_category.values()),
        skipped_by_category=skipped_by_category,
        dropped_tokens=dropped,
        unknown_ids=unknown,
    )


def conversation_scope(name: str) -> Scope:
    return Scope(dataset=f"locomo-{name}", task="bench")


def progress_bar(console: Console) -> Progress:
    """The progress bar of the benchmarks' stages (ingest, questions), drawn on ``console``."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


def _cited(messages: Sequence[Message]) -> tuple[str, ...]:
    ids = (normalize_dia_id(m.source_id or "") for m in messages)
    return tuple(dict.fromkeys(i for i in ids if i is not None))


class Evaluator:
    """Runs every method on every question and accumulates the figures."""

    def __init__(
        self,
        mem: Memory,
        *,
        mode: str,
        ks: Sequence[int],
        budgets: Sequence[int],
        search_k: int,
        min_relevance: float | None = None,
    ) -> None:
        self.mem = mem
        self.min_relevance = min_relevance
        self.mode = mode
        self.ks = ks
        self.budgets = budgets
        self.search_k = search_k
        self.results = {key: MethodResult() for key, _ in METHODS}
        self.cited_per_fact: list[int] = []
        self.unresolved_sources = 0
        self.paths_seen: dict[str, int] = {}
        """Path name -> questions in which it found at least one returned fact."""
        self.escalated = 0
        """Questions whose search escalated (``SearchResult.escalated``, ``auto`` only)."""
        self._tokens: dict[str, int] = {}
        self.system_items: list[tuple[Question, list[Item]]] = []
        """The system's ranking of every question of the main run."""

    def _count(self, line: str) -> int:
        tokens = self._tokens.get(line)
        if tokens is None:
            tokens = self._tokens[line] = count_tokens(line)
        return tokens

    def _search(
        self, question: Question, result: MethodResult, exclude: Sequence[str] = ()
    ) -> SearchResult:
        started = time.perf_counter()
        found = self.mem.search(
            question.text,
            scope=question.scope,
            mode=self.mode,
            k=self.search_k,
            exclude_paths=exclude,
            min_relevance=self.min_relevance,
        )
        result.latencies_ms.append((time.perf_counter() - started) * 1000)
        return found

    @staticmethod
    def _items(hits: Sequence[MemoryHit]) -> list[Item]:
        items = []
        for hit in hits:
            ids = _cited(hit.sources)
            items.append(Item(ids, render_fact_line(hit.fact.text, ids, plain_text)))
        return items

    def _system(self, question: Question) -> list[Item]:
        found = self._search(question, self.results["system"])
        hits = found.hits
        for hit in hits[:_CITED_TOP]:
            self.cited_per_fact.append(len(hit.sources))
            self.unresolved_sources += len(hit.fact.sources) - len(hit.sources)
        seen = {name for hit in hits for name in hit.paths}
        for name in seen:
            self.paths_seen[name] = self.paths_seen.get(name, 0) + 1
        self.escalated += found.escalated
        return self._items(hits)

    def ablate(self, questions: Sequence[Question], exclude: Sequence[str]) -> MethodResult:
        """The system's figures over ``questions`` with the ``exclude`` paths removed."""
        result = MethodResult()
        for question in questions:
            self._score(result, question, self._items(self._search(question, result, exclude).hits))
        return result

    def _baseline(self, key: str, question: Question) -> list[Item]:
        started = time.perf_counter()
        hits = self.mem.search_messages(
            question.text, scope=question.scope, k=self.search_k, paths=_BASELINE_PATHS[key]
        )
        self.results[key].latencies_ms.append((time.perf_counter() - started) * 1000)
        items = []
        for hit in hits:
            m = hit.message
            ids = _cited([m])
            items.append(Item(ids, render_turn_line(m.speaker, m.text, m.caption, ids)))
        return items

    def ask(self, question: Question) -> None:
        for key, _ in METHODS:
            items = self._system(question) if key == "system" else self._baseline(key, question)
            if key == "system":
                self.system_items.append((question, items))
            self._score(self.results[key], question, items)

    def with_profile(self, ratio: float) -> tuple[MethodResult, dict[str, float]]:
        """The main run's rankings scored with the profile block first; mean share it used."""
        result = MethodResult()
        used: dict[str, list[float]] = {str(b): [] for b in self.budgets}
        blocks: dict[tuple[Scope, int], Item] = {}
        for question, items in self.system_items:
            entries = self.mem.profile(scope=question.scope)
            for budget in self.budgets:
                key = (question.scope, budget)
                if key not in blocks:
                    blocks[key] = self._profile_item(question.scope, entries, ratio, budget)
                block = blocks[key]
                ranked = [block.dia_ids, *(item.dia_ids for item in items)]
                tokens = [self._count(block.line), *(self._count(item.line) for item in items)]
                value, _ = recall_within_budget(question.evidence, ranked, tokens, budget)
                result.at_budget.add(str(budget), question.category, value)
                used[str(budget)].append(tokens[0] / budget)
        return result, {b: sum(v) / len(v) if v else 0.0 for b, v in used.items()}

    def _profile_item(
        self, scope: Scope, entries: Sequence[ProfileEntry], ratio: float, budget: int
    ) -> Item:
        text, shown = profile_block(entries, int(ratio * budget))
        facts = self.mem.facts(scope=scope, ids=[i for e in shown for i in e.fact_ids])
        stored = self.mem.messages(scope=scope, ids=[i for f in facts for i in f.sources])
        return Item(_cited([m.message for m in stored]), text + "\n\n" if text else "")

    def _score(self, result: MethodResult, question: Question, items: Sequence[Item]) -> None:
        ranked = [item.dia_ids for item in items]
        for k in self.ks:
            value = recall_at_k(question.evidence, ranked, k)
            result.at_k.add(str(k), question.category, value)
        tokens = [self._count(item.line) for item in items]
        for budget in self.budgets:
            value, exhausted = recall_within_budget(question.evidence, ranked, tokens, budget)
            result.at_budget.add(str(budget), question.category, value)
            if exhausted:
                key = str(budget)
                result.candidates_exhausted[key] = result.candidates_exhausted.get(key, 0) + 1


def run(args: argparse.Namespace) -> dict[str, Any]:
    err = Console(stderr=True)
    raw = json.loads(Path(args.data).read_text(encoding="utf-8"))
    conversations = locomo_conversations(raw)[: args.limit_conversations]
    if args.conversations is not None:
        conversations = [c for i, c in enumerate(conversations) if i in args.conversations]
    reranker = None
    if args.reranker is not None:
        reranker = Reranker.from_json(json.loads(args.reranker.read_text(encoding="utf-8")))
    question_set = build_questions(raw, conversations)
    questions = question_set.questions

    with ExitStack() as stack:
        if args.path is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="locomo-")))
        else:
            folder = args.path
        mem = stack.enter_context(Memory(path=folder, reranker=reranker))
        # Load the encoders before anything is timed.
        mem.search_messages("warm up", scope=Scope(dataset="locomo-warmup", task="bench"), k=1)

        turns = sum(len(c.messages) for c in conversations)
        ingest_s = 0.0
        stored = 0
        extraction_errors = 0
        facts: dict[str, int] = {}
        with progress_bar(err) as progress:
            task = progress.add_task("ingest", total=turns)
            for conv in conversations:
                name = str(conv.name)
                progress.update(task, description=f"ingest {name}")
                started = time.perf_counter()
                added = mem.add(
                    conv.messages,
                    scope=conversation_scope(name),
                    on_progress=lambda n: progress.advance(task, n),
                )
                ingest_s += time.perf_counter() - started
                stored += added.messages_stored
                extraction_errors += len(added.errors)
            progress.update(task, completed=turns)
        started = time.perf_counter()
        mem.optimize()
        optimize_s = time.perf_counter() - started
        for conv in conversations:
            facts[str(conv.name)] = len(mem.facts(scope=conversation_scope(str(conv.name))))

        evaluator = Evaluator(
            mem,
            mode=args.mode,
            ks=args.k,
            budgets=args.budget,
            search_k=args.search_k,
            min_relevance=args.min_relevance,
        )
        with progress_bar(err) as progress:
            task = progress.add_task("questions", total=len(questions))
            for question in questions:
                evaluator.ask(question)
                progress.advance(task)

        profiled: dict[str, Any] = {}
        if args.profile_ratio is not None:
            result, shares = evaluator.with_profile(args.profile_ratio)
            full = evaluator.results["system"].summary()["recall_at_budget"]
            profiled = {
                "ratio": args.profile_ratio,
                "recall_at_budget": result.at_budget.summary(),
                "delta_recall_at_budget": {
                    b: v["overall"] - full[b]["overall"]
                    for b, v in result.at_budget.summary().items()
                },
                "mean_share_used": shares,
                "entries": {
                    str(c.name): len(mem.profile(scope=conversation_scope(str(c.name))))
                    for c in conversations
                },
            }

        ablation: dict[str, Any] = {}
        not_ablated: list[str] = []
        if args.ablate:
            groups, not_ablated = ablation_groups(args.mode, evaluator.paths_seen)
            full = evaluator.results["system"].summary()
            with progress_bar(err) as progress:
                task = progress.add_task("ablation", total=len(groups) * len(questions))
                for label, exclude in groups:
                    progress.update(task, description=f"ablation -{label}")
                    result = evaluator.ablate(questions, exclude)
                    ablation[label] = _ablation_entry(result, exclude, full)
                    progress.advance(task, len(questions))

    system = evaluator.results["system"]
    latency = {key: _latency(evaluator.results[key].latencies_ms) for key, _ in METHODS}
    cited = evaluator.cited_per_fact
    paths_seen = sorted(evaluator.paths_seen, key=_path_order)
    extra: dict[str, Any] = {
        "paths_seen": paths_seen,
        "paths_seen_questions": {p: evaluator.paths_seen[p] for p in paths_seen},
    }
    if args.mode == RetrievalMode.AUTO.value:
        extra["auto_escalation"] = {
            "escalated": evaluator.escalated,
            "questions": len(questions),
            "share": evaluator.escalated / len(questions) if questions else float("nan"),
            "rule": "SearchResult.escalated",
        }
    if profiled:
        extra["profile"] = profiled
    if args.ablate:
        extra["ablation"] = ablation
        extra["ablation_skipped"] = not_ablated
    return {
        "system": system.summary(),
        "baselines": {key: evaluator.results[key].summary() for key, _ in METHODS[1:]},
        "recall_at_k": system.at_k.summary(),
        "ingest": {
            "turns": turns,
            "messages_stored": stored,
            "seconds": ingest_s,
            "turns_per_s": turns / ingest_s if ingest_s > 0 else float("nan"),
            "optimize_s": optimize_s,
            "extraction_errors": extraction_errors,
        },
        "latency_ms": latency,
        "facts": {"overall": sum(facts.values()), "per_conversation": facts},
        "mean_cited_turns_per_fact": sum(cited) / len(cited) if cited else float("nan"),
        "unresolved_fact_sources_top10": evaluator.unresolved_sources,
        "questions": {
            "evaluated": len(questions),
            "skipped": question_set.skipped,
            "evaluated_per_category": dict(category_counts(q.category for q in questions)),
            "skipped_per_category": question_set.skipped_by_category,
            "evidence_tokens_dropped": question_set.dropped_tokens,
            "evidence_ids_unknown": question_set.unknown_ids,
        },
        "conversations": [str(c.name) for c in conversations],
        "k": list(args.k),
        "budgets": list(args.budget),
        "search_k": args.search_k,
        "mode": args.mode,
        "data": str(args.data),
        **extra,
    }


def _path_order(name: str) -> tuple[int, str]:
    return (_PATH_ORDER.index(name), "") if name in _PATH_ORDER else (len(_PATH_ORDER), name)


def _latency(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
    }


def ablation_groups(
    mode: str, paths_seen: Mapping[str, int]
) -> tuple[list[tuple[str, tuple[str, ...]]], list[str]]:
    """``(label, paths to exclude)`` per ablation run, and the mode's paths left out (unseen).

    One run per path of the mode (``expand``'s for ``auto``) seen in the main run, then one for
    the time boosts together when any of them was seen, and one without the answer follow-up
    (:mod:`membrain.retrieval.followup`) when it placed a reply.
    """
    resolved = RetrievalMode(mode)
    base = MODE_PATHS[RetrievalMode.EXPAND if resolved is RetrievalMode.AUTO else resolved]
    groups: list[tuple[str, tuple[str, ...]]] = [
        (name, (name,)) for name in base if name in paths_seen
    ]
    skipped = [name for name in base if name not in paths_seen]
    if any(b in paths_seen for b in TIME_BOOSTS):
        groups.append(("time boosts", TIME_BOOSTS))
    else:
        skipped.append("time boosts")
    if "answers" in paths_seen:
        groups.append(("answers", ("answers",)))
    elif resolved is not RetrievalMode.FAST:
        skipped.append("answers")
    return groups, skipped


def _ablation_entry(
    result: MethodResult, exclude: Sequence[str], full: Mapping[str, Any]
) -> dict[str, Any]:
    figures = result.summary()
    return {
        "excluded": list(exclude),
        **figures,
        "delta_recall_at_k": {
            k: v["overall"] - full["recall_at_k"][k]["overall"]
            for k, v in figures["recall_at_k"].items()
        },
        "delta_recall_at_budget": {
            b: v["overall"] - full["recall_at_budget"][b]["overall"]
            for b, v in figures["recall_at_budget"].items()
        },
        "latency_ms": _latency(result.latencies_ms),
    }


def _pct(value: float) -> str:
    return f"{100 * value:5.1f}"


def format_report(report: dict[str, Any]) -> str:
    ks = [str(k) for k in report["k"]]
    budgets = [str(b) for b in report["budgets"]]
    per_method = {"system": report["system"], **report["baselines"]}
    header = ["method", *(f"R@{k}" for k in ks), *(f"R<={b}tok" for b in budgets)]
    rows = []
    for key, label in METHODS:
        figures = per_method[key]
        rows.append(
            [
                label,
                *(_pct(figures["recall_at_k"][k]["overall"]) for k in ks),
                *(_pct(figures["recall_at_budget"][b]["overall"]) for b in budgets),
            ]
        )
    cut = "10" if "10" in ks else ks[0]
    counts = report["questions"]["evaluated_per_category"]
    categories = list(counts)
    cat_header = ["method", *(f"{c} {CATEGORIES.get(c, '?')} (n={counts[c]})" for c in categories)]
    cat_rows = [
        [
            label,
            *(_pct(per_method[key]["recall_at_k"][cut].get(c, float("nan"))) for c in categories),
        ]
        for key, label in METHODS
    ]
    ingest = report["ingest"]
    lat = report["latency_ms"]
    q = report["questions"]
    facts = report["facts"]
    per_conv = ", ".join(f"{n}={v}" for n, v in facts["per_conversation"].items())
    lines = [
        f"LoCoMo evidence recall (%), mode={report['mode']}, search k={report['search_k']}, "
        f"{len(report['conversations'])} conversation(s)",
        format_table(header, rows),
        "",
        f"Per-category recall@{cut} (%)",
        format_table(cat_header, cat_rows),
        "",
        f"ingest: {ingest['turns']} turns in {ingest['seconds']:.1f} s = "
        f"{ingest['turns_per_s']:.1f} turns/s (stored {ingest['messages_stored']}, "
        f"extraction errors {ingest['extraction_errors']}); optimize {ingest['optimize_s']:.2f} s",
        f"search latency (ms): system (mode {report['mode']}) p50 {lat['system']['p50']:.1f} / "
        f"p95 {lat['system']['p95']:.1f}; "
        + "; ".join(f"{k} p50 {lat[k]['p50']:.1f}" for k, _ in METHODS[1:]),
        f"facts: {facts['overall']} ({per_conv})",
        f"mean cited turns per returned fact (top {_CITED_TOP}): "
        f"{report['mean_cited_turns_per_fact']:.2f}",
        f"questions: {q['evaluated']} evaluated, {q['skipped']} skipped (no valid evidence); "
        f"evidence tokens dropped: {len(q['evidence_tokens_dropped'])}, "
        f"unknown ids dropped: {len(q['evidence_ids_unknown'])}",
    ]
    seen = report.get("paths_seen_questions", {})
    lines.append(
        "paths seen in hits (questions): " + (", ".join(f"{p} {n}" for p, n in seen.items()) or "-")
    )
    escalation = report.get("auto_escalation")
    if escalation is not None:
        lines.append(
            f"auto escalated to expand: {escalation['escalated']} of {escalation['questions']} "
            f"questions ({_pct(escalation['share']).strip()}%)"
        )
    exhausted = {key: per_method[key]["candidates_exhausted_within_budget"] for key, _ in METHODS}
    if any(v for v in exhausted.values()):
        lines.append(
            "candidate list used up within budget (recall may be a lower bound): "
            + "; ".join(
                f"{key} " + ", ".join(f"{b}:{n}" for b, n in v.items())
                for key, v in exhausted.items()
                if v
            )
        )
    if "profile" in report:
        lines += ["", format_profile(report)]
    if "ablation" in report:
        lines += ["", format_ablation(report)]
    return "\n".join(lines)


def format_profile(report: Mapping[str, Any]) -> str:
    """The recall within each budget with the profile block first, and the share it used."""
    profile = report["profile"]
    header = ["budget", "system", "with profile", "change", "share used by the block"]
    rows = []
    for budget in (str(b) for b in report["budgets"]):
        full = report["system"]["recall_at_budget"][budget]["overall"]
        rows.append(
            [
                f"{budget} tok",
                _pct(full),
                _pct(profile["recall_at_budget"][budget]["overall"]),
                f"{100 * profile['delta_recall_at_budget'][budget]:+.1f}",
                f"{100 * profile['mean_share_used'][budget]:.1f}%",
            ]
        )
    entries = sum(profile["entries"].values())
    return "\n".join(
        [
            f"Profile block first (profile_ratio={profile['ratio']}; {entries} entries over "
            f"{len(profile['entries'])} conversation(s))",
            format_table(header, rows),
        ]
    )


def format_ablation(report: Mapping[str, Any]) -> str:
    """The ablation table: the system's recall with each path removed, against the full mode."""
    ks = [str(k) for k in report["k"]]
    budgets = [str(b) for b in report["budgets"]]
    cut = "10" if "10" in ks else ks[0]
    header = [
        "removed path",
        *(f"R@{k}" for k in ks),
        *(f"R<={b}tok" for b in budgets),
        f"delta R@{cut}",
        "p50 ms",
    ]
    full = report["system"]
    rows = [
        [
            f"(none: full {report['mode']})",
            *(_pct(full["recall_at_k"][k]["overall"]) for k in ks),
            *(_pct(full["recall_at_budget"][b]["overall"]) for b in budgets),
            "",
            f"{report['latency_ms']['system']['p50']:.1f}",
        ]
    ]
    for label, entry in report["ablation"].items():
        delta = 100 * entry["delta_recall_at_k"][cut]
        rows.append(
            [
                label,
                *(_pct(entry["recall_at_k"][k]["overall"]) for k in ks),
                *(_pct(entry["recall_at_budget"][b]["overall"]) for b in budgets),
                f"{delta:+.1f}",
                f"{entry['latency_ms']['p50']:.1f}",
            ]
        )
    lines = [
        f"Ablation (%), mode={report['mode']}: the system's searches re-run with one path removed",
        format_table(header, rows),
    ]
    if report.get("ablation_skipped"):
        lines.append(
            "not ablated (found no returned fact in the full run): "
            + ", ".join(report["ablation_skipped"])
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
