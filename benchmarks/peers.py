"""MemBrain against three peer memory stacks on LoCoMo, every one with the same packaged MiniLM.

Usage (from the repository root)::

    python -m benchmarks.peers --data ../shared/data/locomo/locomo10_dev.json \
        [--conversations I ...] [--systems membrain langchain-qdrant mem0 llamaindex] \
        [--membrain-modes fast expand] [--reranker FILE] [--max-questions N] [--require-all] \
        [--json OUT]

The peers come with the ``bench`` extra (``pip install '.[bench]'``). A peer whose packages are
missing gets a "not installed" row and the run goes on (so does one that fails: a "failed" row);
``--require-all`` stops before any work instead, and exits with 1 when a system failed.

Nothing is downloaded: every system embeds with ONE dense encoder object, the packaged
all-MiniLM-L6-v2 int8 (``membrain.embeddings.default_dense_encoder()``), and the peers that rank
by keywords use MemBrain's BM25 where theirs would come from the model hub (see
:mod:`benchmarks.peers_systems` for how each stack is set up, mem0's telemetry off included).

Systems (``--systems``):

* ``membrain``: an embedded :class:`membrain.Memory` on a temporary folder, default offline
  extractor; one row per ``--membrain-modes`` mode, all searching the same store.
* ``langchain-qdrant``: ``QdrantVectorStore``, ``RetrievalMode.HYBRID`` (dense + BM25, RRF),
  in-memory Qdrant, one document per turn.
* ``mem0``: mem0 OSS with ``infer=False`` (turns stored verbatim, no LLM), in-memory Qdrant.
* ``llamaindex``: ``VectorStoreIndex`` over the default in-memory store, one node per turn.

What it does, system after system, in the same order for each: open a fresh store; one untimed
warm-up search; add each conversation of the selection (``--conversations``: 0-based positions
in the file; default all) to its own namespace, timing each conversation's add; the step each
system takes once after the last add (MemBrain's ``optimize()``; nothing for the peers), timed
apart; then every question, in file order, searched once per row for the top 25 and timed.

Questions are those of ``benchmarks.locomo_retrieval`` (its ``build_questions``): every category,
adversarial ones included, and only questions with at least one evidence id naming a turn of
the conversation. ``--max-questions N`` keeps the first N of each conversation.

Metric (that of ``benchmarks.locomo_retrieval``): evidence recall@k = |evidence ∩ dialogue ids
cited by the first k hits| / |evidence|, averaged over questions. A MemBrain hit is a fact and
cites the turns in ``MemoryHit.sources``; a peer hit is a turn and cites itself. A fact may cite
several turns, so at equal k MemBrain can cover more evidence than a peer; the mean number of
turns cited per hit (top 10) is printed under the table for that reason.

Reranker. MemBrain's packaged reranker (``expand`` and ``deep`` use it, ``fast`` does not) was
fitted on these dev conversations, so its rows on them are in-sample. For held-out figures train
one per fold (``python -m benchmarks.train_reranker --data ... --folds DIR``) and run each fold
with its trees: ``--conversations 3 4 --reranker DIR/test-34.json``, then ``--conversations 0 1 2
--reranker DIR/test-012.json``. The peers have nothing fitted; their recall moves a little from
fold to whole split only through BM25's term statistics, which a smaller store changes.

Reported per row: recall@5/@10/@25 (%), ingest throughput (turns of the selection per second of
add wall time, extraction and embedding included), search latency p50 / p95 (ms, one call per
question, query embedding included), and against the first MemBrain row: the ratio of ingest
throughputs, the ratio of search p50s (above 1: slower than MemBrain) and the recall difference
in points. Per-category recall and the raw figures are in the ``--json`` report. The machine's
load shows in the timings: compare rows of one run, not of different runs. The two Qdrant
peers run qdrant-client's local mode (in memory, in Python: a filtered search scans the points),
as an application without a Qdrant server would; a server would answer them faster.

``--hashing-encoder`` swaps the real model for :class:`membrain.testing.HashingEncoder`: for smoke
tests only, its figures say nothing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from benchmarks.locomo_eval import (
    RecallTable,
    category_counts,
    format_table,
    percentile,
    recall_at_k,
)
from benchmarks.locomo_retrieval import Question, build_questions, progress_bar
from benchmarks.peers_systems import (
    INSTALL_HINT,
    SYSTEMS,
    MemorySystem,
    missing_modules,
    open_system,
)
from membrain.embeddings import DenseEncoder, default_dense_encoder
from membrain.files.loaders import Conversation, locomo_conversations
from membrain.retrieval.rerank import Reranker
from membrain.retrieval.search import RetrievalMode
from membrain.testing import HashingEncoder

KS = (5, 10, 25)
SEARCH_K = max(KS)
CITED_TOP = 10
REFERENCE_SYSTEM = "membrain"
NOT_INSTALLED = f"not installed ({INSTALL_HINT})"


@dataclass
class RowFigures:
    """What one row (a system, or a MemBrain mode) measured."""

    recall: RecallTable = field(default_factory=RecallTable)
    latencies_ms: list[float] = field(default_factory=list)
    cited_per_hit: list[int] = field(default_factory=list)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--data", required=True, type=Path, help="LoCoMo JSON file")
    parser.add_argument(
        "--conversations",
        nargs="+",
        type=int,
        default=None,
        metavar="I",
        help="only these conversations (0-based positions in the file)",
    )
    parser.add_argument(
        "--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS, help="systems to run"
    )
    parser.add_argument(
        "--membrain-modes",
        nargs="+",
        default=["fast", "expand"],
        choices=[m.value for m in RetrievalMode],
        help="one MemBrain row per mode",
    )
    parser.add_argument(
        "--reranker",
        type=Path,
        default=None,
        help="MemBrain's reranker trees (JSON, as benchmarks.train_reranker writes) instead of "
        "the packaged ones",
    )
    parser.add_argument(
        "--max-questions", type=int, default=None, metavar="N", help="first N per conversation"
    )
    parser.add_argument(
        "--require-all", action="store_true", help="fail when a peer is not installed or fails"
    )
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument(
        "--hashing-encoder",
        action="store_true",
        help="use the test HashingEncoder instead of the real model (smoke runs only)",
    )
    args = parser.parse_args(argv)
    if args.max_questions is not None and args.max_questions < 1:
        parser.error("--max-questions must be positive")
    args.systems = list(dict.fromkeys(args.systems))
    args.membrain_modes = list(dict.fromkeys(args.membrain_modes))
    return args


def select_questions(
    raw: Sequence[dict[str, Any]], conversations: Sequence[Conversation], limit: int | None
) -> tuple[list[Question], int]:
    """The scored questions (the first ``limit`` per conversation) and how many were skipped."""
    question_set = build_questions(raw, conversations)
    kept: list[Question] = []
    per_conversation: dict[str, int] = {}
    for question in question_set.questions:
        seen = per_conversation.get(question.conversation, 0)
        if limit is None or seen < limit:
            kept.append(question)
        per_conversation[question.conversation] = seen + 1
    return kept, question_set.skipped


def ask(
    system: MemorySystem,
    variant: str,
    questions: Sequence[Question],
    progress: Progress,
    label: str = "",
) -> RowFigures:
    """Every question searched once (top ``SEARCH_K``, timed) and scored."""
    figures = RowFigures()
    task = progress.add_task(f"questions {label}".strip(), total=len(questions))
    for question in questions:
        started = time.perf_counter()
        ranking = system.search(question.conversation, question.text, SEARCH_K, variant)
        figures.latencies_ms.append((time.perf_counter() - started) * 1000)
        for k in KS:
            value = recall_at_k(question.evidence, ranking, k)
            figures.recall.add(str(k), question.category, value)
        figures.cited_per_hit.extend(len(ids) for ids in ranking[:CITED_TOP])
        progress.advance(task)
    return figures


def run_system(
    name: str,
    conversations: Sequence[Conversation],
    questions: Sequence[Question],
    *,
    dense: DenseEncoder,
    folder: Path,
    membrain_modes: Sequence[str] = ("fast", "expand"),
    reranker: Reranker | None = None,
    fastembed_sparse: bool = True,
    progress: Progress,
) -> list[dict[str, Any]]:
    """Open, fill and question one system; one row per way it is searched."""
    system = open_system(
        name,
        dense,
        folder,
        membrain_modes=membrain_modes,
        reranker=reranker,
        fastembed_sparse=fastembed_sparse,
    )
    try:
        system.warm_up()
        turns = sum(len(c.messages) for c in conversations)
        ingest_s = 0.0
        task = progress.add_task(f"ingest {name}", total=turns)
        for conversation in conversations:
            started = time.perf_counter()
            system.add(str(conversation.name), conversation.messages)
            ingest_s += time.perf_counter() - started
            progress.advance(task, len(conversation.messages))
        started = time.perf_counter()
        system.finish()
        finish_s = time.perf_counter() - started
        rows = []
        for variant in system.variants:
            label = f"{name}-{variant}" if variant else name
            figures = ask(system, variant, questions, progress, label)
            cited = figures.cited_per_hit
            rows.append(
                {
                    "row": label,
                    "system": name,
                    "status": "ok",
                    "recall_at_k": figures.recall.summary(),
                    "ingest": {
                        "turns": turns,
                        "seconds": ingest_s,
                        "turns_per_s": turns / ingest_s if ingest_s > 0 else float("nan"),
                        "finish_s": finish_s,
                    },
                    "latency_ms": {
                        "n": len(figures.latencies_ms),
                        "p50": percentile(figures.latencies_ms, 50),
                        "p95": percentile(figures.latencies_ms, 95),
                    },
                    "mean_cited_turns_per_hit": sum(cited) / len(cited) if cited else float("nan"),
                    **_setup(system),
                }
            )
        return rows
    finally:
        system.close()


def _setup(system: MemorySystem) -> dict[str, Any]:
    sparse = getattr(system, "sparse", None)
    return {"sparse": sparse} if isinstance(sparse, str) else {}


def add_ratios(rows: list[dict[str, Any]]) -> str | None:
    """Add each ok row's figures against the first ok MemBrain row; that row's label."""
    reference = next(
        (r for r in rows if r["system"] == REFERENCE_SYSTEM and r["status"] == "ok"), None
    )
    if reference is None:
        return None
    for row in rows:
        if row["status"] != "ok":
            continue
        row["to_reference"] = {
            "ingest_turns_per_s_ratio": _ratio(
                row["ingest"]["turns_per_s"], reference["ingest"]["turns_per_s"]
            ),
            "search_p50_ratio": _ratio(row["latency_ms"]["p50"], reference["latency_ms"]["p50"]),
            "recall_delta": {
                k: row["recall_at_k"][k]["overall"] - reference["recall_at_k"][k]["overall"]
                for k in reference["recall_at_k"]
            },
        }
    label: str = reference["row"]
    return label


def _ratio(value: float, base: float) -> float:
    return value / base if base > 0 else float("nan")


def unavailable_row(name: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"row": name, "system": name, "status": status, **extra}


def run(args: argparse.Namespace) -> dict[str, Any]:
    missing = {name: missing_modules(name) for name in args.systems}
    missing = {name: modules for name, modules in missing.items() if modules}
    if args.require_all and missing:
        listed = "; ".join(f"{n} (no {', '.join(m)})" for n, m in missing.items())
        raise SystemExit(f"--require-all: not installed: {listed}; {INSTALL_HINT}")
    raw = json.loads(Path(args.data).read_text(encoding="utf-8"))
    conversations = locomo_conversations(raw)
    if args.conversations is not None:
        unknown = sorted(set(args.conversations) - set(range(len(conversations))))
        if unknown:
            raise SystemExit(f"--conversations: no conversation at {unknown} in {args.data}")
        conversations = [c for i, c in enumerate(conversations) if i in args.conversations]
    questions, skipped = select_questions(raw, conversations, args.max_questions)
    reranker = None
    if args.reranker is not None:
        reranker = Reranker.from_json(json.loads(args.reranker.read_text(encoding="utf-8")))
    dense: DenseEncoder = (
        HashingEncoder(dim=64) if args.hashing_encoder else default_dense_encoder()
    )

    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="peers-") as folder,
        progress_bar(Console(stderr=True)) as progress,
    ):
        for name in args.systems:
            if name in missing:
                rows.append(unavailable_row(name, NOT_INSTALLED, missing=missing[name]))
                continue
            try:
                rows += run_system(
                    name,
                    conversations,
                    questions,
                    dense=dense,
                    folder=Path(folder) / name,
                    membrain_modes=args.membrain_modes,
                    reranker=reranker,
                    progress=progress,
                )
            except Exception as exc:  # one broken peer must not lose the others' figures
                rows.append(unavailable_row(name, f"failed: {type(exc).__name__}: {exc}"))
    reference = add_ratios(rows)
    return {
        "rows": rows,
        "reference": reference,
        "k": list(KS),
        "search_k": SEARCH_K,
        "dense_encoder": dense.name,
        "conversations": [str(c.name) for c in conversations],
        "turns": sum(len(c.messages) for c in conversations),
        "questions": {
            "evaluated": len(questions),
            "skipped_no_evidence": skipped,
            "max_per_conversation": args.max_questions,
            "evaluated_per_category": dict(category_counts(q.category for q in questions)),
        },
        "systems": list(args.systems),
        "membrain_modes": list(args.membrain_modes),
        "reranker": str(args.reranker) if args.reranker is not None else "packaged",
        "data": str(args.data),
    }


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def format_report(report: dict[str, Any]) -> str:
    ks = [str(k) for k in report["k"]]
    header = [
        "system",
        *(f"R@{k}" for k in ks),
        "turns/s",
        "p50 ms",
        "p95 ms",
        "ingest x",
        "p50 x",
        *(f"dR@{k}" for k in ks),
    ]
    table_rows = []
    notes = []
    for row in report["rows"]:
        if row["status"] != "ok":
            notes.append((row["row"], row["status"]))
            continue
        versus = row.get("to_reference")
        table_rows.append(
            [
                row["row"],
                *(_pct(row["recall_at_k"][k]["overall"]) for k in ks),
                f"{row['ingest']['turns_per_s']:.1f}",
                f"{row['latency_ms']['p50']:.1f}",
                f"{row['latency_ms']['p95']:.1f}",
                f"{versus['ingest_turns_per_s_ratio']:.2f}" if versus else "-",
                f"{versus['search_p50_ratio']:.2f}" if versus else "-",
                *(f"{100 * versus['recall_delta'][k]:+.1f}" if versus else "-" for k in ks),
            ]
        )
    questions = report["questions"]
    lines = [
        f"LoCoMo evidence recall (%) and speed, {len(report['conversations'])} conversation(s), "
        f"{report['turns']} turns, {questions['evaluated']} questions, top {report['search_k']} "
        f"per search; dense encoder {report['dense_encoder']} for every system",
        format_table(header, table_rows) if table_rows else "(no system ran)",
    ]
    width = max((len(r[0]) for r in table_rows), default=0)
    lines += [f"{name.ljust(width)}  {status}" for name, status in notes]
    lines.append("")
    if report["reference"] is not None:
        lines.append(
            f"against {report['reference']}: ingest x = turns/s ratio, p50 x = search p50 ratio "
            "(above 1: slower), dR@k = recall difference in points"
        )
    ran = [r for r in report["rows"] if r["status"] == "ok"]
    lines.append(
        f"mean turns cited per hit (top {CITED_TOP}): "
        + ", ".join(f"{r['row']} {r['mean_cited_turns_per_hit']:.2f}" for r in ran)
    )
    finish = {r["system"]: r["ingest"]["finish_s"] for r in ran if r["ingest"]["finish_s"] > 0.01}
    if finish:
        lines.append(
            "after the last add (not in turns/s): "
            + ", ".join(f"{s} {seconds:.2f} s" for s, seconds in finish.items())
        )
    if any(r["system"] == REFERENCE_SYSTEM for r in ran):
        lines.append(f"MemBrain reranker: {report['reranker']}")
    sparse = {r["system"]: r["sparse"] for r in ran if "sparse" in r}
    if sparse:
        lines.append("sparse encoder: " + ", ".join(f"{s} {v}" for s, v in sparse.items()))
    lines.append(
        f"questions: {questions['evaluated']} evaluated, {questions['skipped_no_evidence']} "
        "skipped (no valid evidence)"
        + (
            f", at most {questions['max_per_conversation']} per conversation"
            if questions["max_per_conversation"]
            else ""
        )
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    failed = [r["row"] for r in report["rows"] if r["status"] != "ok"]
    return 1 if args.require_all and failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
