"""Train the packaged reranker on LoCoMo dev conversations and report cross-validated recall.

Usage (from the repository root)::

    python -m benchmarks.train_reranker --data ../shared/data/locomo/locomo10_dev.json \
        [--modes fast expand] [--out core/membrain/data/reranker.json] [--candidates FILE]

Every dev conversation is added to its own scope of a fresh store (offline extractor); every
question is searched in each mode with the reranker off (``rerank=False``), keeping the first
:data:`~membrain.retrieval.rerank.RERANK_DEPTH` results (fused, then the answer follow-up):
exactly the list the reranker orders at search time. A candidate is labelled evidence when it
cites an evidence turn of its question.
``--candidates FILE`` stores them (JSON) on the first run and reads them on the next.

The model is a logistic regression over standardised
:data:`~membrain.retrieval.rerank.FEATURES` (L2, full-batch gradient descent from zero for a
fixed number of steps: the same candidates give the same weights). Figures: recall@10 of the
fused order and of the reranked order, cross-validated (train on conversations 0-2, test on 3-4,
and the reverse) and in-sample, per mode; the weights of the model trained on every
conversation; and an ablation (each feature removed, cross-validated). The model trained on
every conversation and mode is what ``--out`` writes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.locomo_eval import format_table, recall_at_k
from benchmarks.locomo_retrieval import build_questions, conversation_scope
from membrain import Memory
from membrain.loaders import locomo_conversations
from membrain.retrieval.rerank import FEATURES, RERANK_DEPTH, Candidate, Reranker, features

L2 = 1.0
STEPS = 1000
RATE = 0.5
FOLDS = ((0, 1, 2), (3, 4))


@dataclass(frozen=True, slots=True)
class Asked:
    """One question's candidates in one mode: feature rows, labels, cited turns."""

    conversation: int
    mode: str
    category: str
    evidence: tuple[str, ...]
    rows: np.ndarray
    labels: np.ndarray
    cited: tuple[tuple[str, ...], ...]


def collect(data: Path, modes: Sequence[str]) -> list[dict[str, Any]]:
    """Search every dev question in every mode; the candidates as JSON-ready records."""
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = locomo_conversations(raw)
    questions = build_questions(raw, conversations).questions
    index = {conversation_scope(str(c.name)).dataset: i for i, c in enumerate(conversations)}
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rerank-") as folder, Memory(path=folder) as mem:
        for conversation in conversations:
            mem.add(conversation.messages, scope=conversation_scope(str(conversation.name)))
        for question in questions:
            participants = mem.participants(scope=question.scope)
            for mode in modes:
                found = mem.search(
                    question.text, scope=question.scope, mode=mode, k=RERANK_DEPTH, rerank=False
                )
                out.append(
                    {
                        "conversation": index[question.scope.dataset],
                        "mode": mode,
                        "question": question.text,
                        "category": question.category,
                        "evidence": list(question.evidence),
                        "participants": list(participants),
                        "hits": [
                            {
                                "text": h.fact.text,
                                "paths": h.paths,
                                "score": h.score,
                                "cited": [m.source_id or m.id or "" for m in h.sources],
                            }
                            for h in found.hits
                        ],
                    }
                )
    return out


def prepare(records: Sequence[dict[str, Any]]) -> list[Asked]:
    """Feature rows and labels of every record."""
    asked = []
    for record in records:
        hits = record["hits"]
        candidates = [Candidate(h["text"], h["paths"], h["score"], i) for i, h in enumerate(hits)]
        evidence = set(record["evidence"])
        asked.append(
            Asked(
                conversation=record["conversation"],
                mode=record["mode"],
                category=record["category"],
                evidence=tuple(record["evidence"]),
                rows=features(record["question"], candidates, record["participants"]),
                labels=np.array([float(bool(evidence & set(h["cited"]))) for h in hits]),
                cited=tuple(tuple(h["cited"]) for h in hits),
            )
        )
    return asked


def fit(asked: Sequence[Asked], keep: Sequence[int] | None = None) -> Reranker:
    """A logistic regression over the candidates of ``asked`` (features ``keep`` only)."""
    rows = np.concatenate([a.rows for a in asked if len(a.rows)])
    labels = np.concatenate([a.labels for a in asked if len(a.rows)])
    mean, scale = rows.mean(axis=0), rows.std(axis=0)
    scale[scale == 0] = 1.0
    z = (rows - mean) / scale
    mask = np.zeros(len(FEATURES))
    mask[list(range(len(FEATURES)) if keep is None else keep)] = 1.0
    z = z * mask
    weights, bias = np.zeros(len(FEATURES)), 0.0
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(z @ weights + bias)))
        error = p - labels
        weights -= RATE * (z.T @ error / len(labels) + L2 * weights / len(labels))
        bias -= RATE * float(error.mean())
    return Reranker(weights * mask, bias, mean, scale)


def recall(asked: Sequence[Asked], model: Reranker | None, k: int = 10) -> float:
    """Mean recall@k over ``asked``, fused order (``None``) or reranked."""
    values = []
    for a in asked:
        order = list(range(len(a.cited)))
        if model is not None and len(a.rows):
            scores = model.scores(a.rows)
            order.sort(key=lambda i: (-scores[i], i))
        values.append(recall_at_k(a.evidence, [a.cited[i] for i in order], k))
    return 100.0 * float(np.mean(values)) if values else 0.0


def cross_validated(asked: Sequence[Asked], keep: Sequence[int] | None = None) -> float:
    """Recall@10 of each fold's test conversations by the model trained on the other fold."""
    total, count = 0.0, 0
    for test in FOLDS:
        train = [a for a in asked if a.conversation not in test]
        held = [a for a in asked if a.conversation in test]
        total += recall(held, fit(train, keep)) * len(held)
        count += len(held)
    return total / count


def report(asked: Sequence[Asked], modes: Sequence[str]) -> tuple[str, Reranker]:
    """The figures as text, and the model trained on everything."""
    rows = []
    for mode in modes:
        of_mode = [a for a in asked if a.mode == mode]
        folds = []
        for test in FOLDS:
            train = [a for a in of_mode if a.conversation not in test]
            held = [a for a in of_mode if a.conversation in test]
            folds.append(f"{recall(held, None):.1f} -> {recall(held, fit(train)):.1f}")
        everything = fit(of_mode)
        rows.append(
            [
                mode,
                f"{recall(of_mode, None):.1f}",
                *folds,
                f"{cross_validated(of_mode):.1f}",
                f"{recall(of_mode, everything):.1f}",
            ]
        )
    header = [
        "mode",
        "fused R@10",
        "test 3-4 (train 0-2)",
        "test 0-2 (train 3-4)",
        "CV",
        "in-sample",
    ]
    model = fit(asked)
    base = cross_validated(asked)
    weights = [
        [name, f"{w:+.3f}", f"{cross_validated(asked, _without(i)) - base:+.2f}"]
        for i, (name, w) in enumerate(zip(FEATURES, model.weights, strict=True))
    ]
    text = "\n".join(
        [
            "Recall@10 (%), fused order -> reranked, LoCoMo dev",
            format_table(header, rows),
            "",
            "Model on every conversation and mode: weights (standardised features), and the "
            f"change of pooled CV recall@10 ({base:.2f}) when the feature is removed",
            format_table(["feature", "weight", "without it"], weights),
        ]
    )
    return text, model


def _without(index: int) -> list[int]:
    return [i for i in range(len(FEATURES)) if i != index]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--modes", nargs="+", default=["fast", "expand"])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--candidates", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.candidates is not None and args.candidates.exists():
        records = json.loads(args.candidates.read_text(encoding="utf-8"))
    else:
        records = collect(args.data, args.modes)
        if args.candidates is not None:
            args.candidates.write_text(json.dumps(records), encoding="utf-8")
    asked = [a for a in prepare(records) if a.mode in args.modes]
    text, model = report(asked, args.modes)
    print(text)
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "features": list(FEATURES),
                    "weights": model.weights.round(6).tolist(),
                    "bias": round(model.bias, 6),
                    "mean": model.mean.round(6).tolist(),
                    "scale": model.scale.round(6).tolist(),
                    "trained_on": f"LoCoMo dev ({args.data.name}), modes {', '.join(args.modes)}",
                    "depth": RERANK_DEPTH,
                },
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
