"""Calibrate ``MemoryHit.relevance`` on LoCoMo dev questions and off-topic questions.

Usage (from the repository root)::

    python -m benchmarks.calibrate_relevance --data ../shared/data/locomo/locomo10_dev.json \
        [--modes fast expand] [--k 50] [--rows FILE] [--out core/membrain/data/relevance.json]

Every dev conversation is added to its own scope of a fresh store (offline extractor, packaged
encoder and reranker). Every dev question is searched in each mode (``k`` hits), and so is every
off-topic question of ``benchmarks/data/off_topic_questions.json`` in every conversation: the
even-numbered ones only are calibration data, the odd-numbered ones are held out. Of each hit the
script records what :mod:`membrain.retrieval.relevance` reads (:class:`Evidence`: the reranker's
log-odds where it ran, the dense cosine, the word overlap and the best of them over the hits) and
a label: a dev hit citing an evidence turn of its question is positive, every other hit and every
hit of an off-topic question negative. ``--rows FILE`` stores the rows (JSON) on the first run
and reads them on the next.

Four logistic models are fitted (L2-regularised, Newton steps in numpy): per kind of hit,
``reranked`` (margin, cos, overlap, best_cos, best_overlap) and ``plain`` (the same without
margin), for the packaged encoder; and the ``lexical`` pair without the cosines, the fallback for
any other encoder. Figures, in-sample and cross-validated by conversation (fit on four dev
conversations, predict the fifth, off-topic rows going with the conversation they were asked
in): log-loss and AUC per model; per floor, the share of off-topic questions that keep no hit
(calibration and held-out halves) and the evidence recall over the ``k`` hits with the floor
against without it, per mode. ``--out`` writes the models fitted on everything.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.locomo_eval import format_table
from benchmarks.locomo_retrieval import _cited, build_questions, conversation_scope
from membrain import Memory
from membrain.api.models import Fact
from membrain.embeddings import default_dense_encoder
from membrain.files.loaders import locomo_conversations
from membrain.retrieval.base import SearchContext
from membrain.retrieval.relevance import (
    LEXICAL,
    Evidence,
    Logistic,
    RelevanceModel,
    capped,
    evidence,
    list_features,
)

OFF_TOPIC = Path(__file__).parent / "data" / "off_topic_questions.json"
FLOORS = (0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3)
MODELS: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("dense", "reranked", "topic"): ("best_cos", "best_overlap", "best_margin"),
    ("dense", "reranked", "rest"): ("rank", "rest_cos", "rest_overlap"),
    ("dense", "plain", "topic"): ("best_cos", "best_overlap"),
    ("dense", "plain", "rest"): ("rank", "rest_cos", "rest_overlap"),
    ("lexical", "reranked", "topic"): ("best_overlap", "best_margin"),
    ("lexical", "reranked", "rest"): ("rank", "rest_overlap"),
    ("lexical", "plain", "topic"): ("best_overlap",),
    ("lexical", "plain", "rest"): ("rank", "rest_overlap"),
}
"""(calibration, kind of list, model) -> features.

The reranker's log-odds enter the topic models only: read by the ``rest`` models too (its
margins fall steeply after the first hits) they cut evidence a few ranks down, on LoCoMo dev at a
floor of 0.03 ``expand`` recall over 50 hits 91.9 -> 91.4, and within 2,000 tokens of the
retrieval benchmark (two conversations, 100 hits) 93.5 -> 91.7; without, 91.9 over 50 hits."""
L2 = 1e-4
Record = dict[str, Any]
Fitted = dict[tuple[str, str, str], Logistic]


class _Recorder(RelevanceModel):
    """Keeps the evidence of every search it is asked to score (every hit reads 1.0)."""

    def __init__(self) -> None:
        self.seen: list[list[Evidence]] = []

    def relevance(
        self, ctx: SearchContext, facts: Sequence[Fact], margins: Mapping[str, float]
    ) -> list[float]:
        self.seen.append(evidence(ctx, facts, margins))
        return [1.0] * len(facts)


def collect(data: Path, modes: Sequence[str], ks: Sequence[int]) -> list[Record]:
    """One record per (question, conversation, mode, k): kind, labels, evidence per hit."""
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = locomo_conversations(raw)
    questions = build_questions(raw, conversations).questions
    off_topic = json.loads(OFF_TOPIC.read_text(encoding="utf-8"))["questions"]
    index = {conversation_scope(str(c.name)).dataset: i for i, c in enumerate(conversations)}
    out: list[Record] = []
    recorder = _Recorder()
    with tempfile.TemporaryDirectory(prefix="relevance-") as folder, Memory(path=folder) as mem:
        mem._relevance = recorder  # the rows are what a search computes, before the model
        for conversation in conversations:
            mem.add(conversation.messages, scope=conversation_scope(str(conversation.name)))
        asked: list[tuple[str, Any, int, tuple[str, ...], str]] = [
            (q.text, q.scope, index[q.scope.dataset], q.evidence, "dev") for q in questions
        ]
        for c in conversations:
            scope = conversation_scope(str(c.name))
            for n, text in enumerate(off_topic):
                kind = "off" if n % 2 == 0 else "off-heldout"
                asked.append((text, scope, index[scope.dataset], (), kind))
        for (text, scope, conversation, wanted, kind), mode, k in itertools.product(
            asked, modes, ks
        ):
            recorder.seen.clear()
            found = mem.search(text, scope=scope, mode=mode, k=k)
            rows = recorder.seen[0] if recorder.seen else []
            cited = [list(_cited(h.sources)) for h in found.hits]
            out.append(
                {
                    "conversation": conversation,
                    "kind": kind,
                    "mode": mode,
                    "k": k,
                    "evidence": list(wanted),
                    "cited": cited,
                    "labels": [int(bool(set(wanted) & set(c))) for c in cited],
                    "hits": [[e.margin, e.cos, e.overlap] for e in rows],
                }
            )
    return out


def _hits(record: Record) -> list[Evidence]:
    return [Evidence(float(c), float(o), m) for m, c, o, *_ in record["hits"]]


def _kind(record: Record) -> str:
    return "reranked" if any(h[0] is not None for h in record["hits"]) else "plain"


def training_rows(
    records: Sequence[Record], key: tuple[str, str, str]
) -> tuple[list[dict[str, float]], np.ndarray]:
    """The rows and labels one model is fitted on.

    ``topic``: one row per list (its first hit's features), positive for a dev question,
    negative for a calibration off-topic one. ``rest``: one row per hit of a dev question,
    positive when it or a hit below it cites evidence. ``plain`` models read every list (a
    reranked list as if not reranked), ``reranked`` ones only reranked lists.
    """
    _, kind, model = key
    rows: list[dict[str, float]] = []
    labels: list[float] = []
    for r in records:
        if not r["hits"] or r["kind"] == "off-heldout" or (kind == "reranked" != _kind(r)):
            continue
        hits = _hits(r)
        if kind == "plain":
            hits = [Evidence(e.cos, e.overlap) for e in hits]
        features = list_features(hits)
        if model == "topic":
            rows.append(features[0])
            labels.append(float(r["kind"] == "dev"))
        elif r["kind"] == "dev":
            rest = np.maximum.accumulate(np.array(r["labels"])[::-1])[::-1]
            rows += features
            labels += [float(x) for x in rest]
    return rows, np.array(labels)


def fit_logistic(
    rows: Sequence[Mapping[str, float]], y: np.ndarray, names: Sequence[str]
) -> Logistic:
    """L2-regularised logistic regression by Newton steps (standardised, then mapped back)."""
    x = np.array([[row[n] for n in names] for row in rows], dtype=np.float64)
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / std])
    w = np.zeros(z.shape[1])
    penalty = np.diag([0.0, *([L2 * len(x)] * (z.shape[1] - 1))])
    for _ in range(100):
        p = 1 / (1 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + penalty @ w
        hess = (z * (p * (1 - p))[:, None]).T @ z + penalty + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    coef = w[1:] / std
    intercept = w[0] - float((coef * mean).sum())
    return Logistic(
        features=tuple(names),
        coef=tuple(round(float(c), 6) for c in coef),
        intercept=round(float(intercept), 6),
    )


def fit_all(records: Sequence[Record]) -> Fitted:
    """Every model of :data:`MODELS`, fitted on ``records``."""
    return {key: fit_logistic(*training_rows(records, key), names) for key, names in MODELS.items()}


def model_of(fitted: Fitted, calibration: str) -> RelevanceModel:
    """A :class:`RelevanceModel` whose calibration for encoder ``"x"`` is ``calibration``'s."""
    data = relevance_file(fitted, "x", "")
    data["encoders"]["x"] = data["encoders"]["x" if calibration == "dense" else LEXICAL]
    return RelevanceModel.from_json(data)


def _auc(p: np.ndarray, y: np.ndarray) -> float:
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _logloss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def floor_figures(
    records: Sequence[Record], relevance: Mapping[int, list[float]]
) -> dict[str, dict[float, float]]:
    """Per floor: off-topic questions keeping no hit (%), and dev recall over the hits (%)."""
    out: dict[str, dict[float, float]] = {}
    lists = sorted({(r["mode"], r.get("k", 0)) for r in records})

    def chosen(kind: str, mode: str, k: int) -> list[int]:
        return [
            i
            for i, r in enumerate(records)
            if r["kind"] == kind and r["mode"] == mode and r.get("k", 0) == k
        ]

    for kind in ("off", "off-heldout"):
        for mode, k in lists:
            asked = chosen(kind, mode, k)
            out[f"{kind}: no hit, {mode} k={k}"] = {
                f: 100 * float(np.mean([not relevance[i] or relevance[i][0] < f for i in asked]))
                for f in FLOORS
            }

    def recall(i: int, floor: float) -> float:
        r = records[i]
        kept = [c for c, p in zip(r["cited"], relevance[i], strict=True) if p >= floor]
        return len({x for c in kept for x in c} & set(r["evidence"])) / len(r["evidence"])

    for mode, k in lists:
        asked = chosen("dev", mode, k)
        base = float(np.mean([recall(i, 0.0) for i in asked]))
        out[f"dev recall, {mode} k={k} (none: {100 * base:.1f})"] = {
            f: 100 * float(np.mean([recall(i, f) for i in asked])) for f in FLOORS
        }
    return out


def report(records: list[Record]) -> str:
    """Model figures and floor tables, in-sample and cross-validated by conversation."""
    conversations = sorted({r["conversation"] for r in records})
    everything = fit_all(records)
    folds = {c: fit_all([r for r in records if r["conversation"] != c]) for c in conversations}
    lines = ["log-loss / AUC per model; cross-validated: fit on 4 conversations, test on the 5th"]
    table = []
    for key in MODELS:
        rows, y = training_rows(records, key)
        p = np.array([everything[key].probability(row) for row in rows])
        cv_p, cv_y = [], []
        for c, fitted in folds.items():
            rows_c, y_c = training_rows([r for r in records if r["conversation"] == c], key)
            cv_p += [fitted[key].probability(row) for row in rows_c]
            cv_y.append(y_c)
        cy = np.concatenate(cv_y)
        table.append(
            [
                " ".join(key),
                f"{_logloss(p, y):.4f}",
                f"{_auc(p, y):.3f}",
                f"{_logloss(np.array(cv_p), cy):.4f}",
                f"{_auc(np.array(cv_p), cy):.3f}",
            ]
        )
    lines.append(format_table(["model", "log-loss", "AUC", "CV log-loss", "CV AUC"], table))
    for calibration in ("dense", "lexical"):
        whole = model_of(everything, calibration)
        by_fold = {c: model_of(f, calibration) for c, f in folds.items()}
        in_sample = {i: capped(whole.probabilities("x", _hits(r))) for i, r in enumerate(records)}
        held = {
            i: capped(by_fold[r["conversation"]].probabilities("x", _hits(r)))
            for i, r in enumerate(records)
        }
        name = "packaged encoder" if calibration == "dense" else "lexical fallback"
        for title, relevance in (("in-sample", in_sample), ("cross-validated", held)):
            figures = floor_figures(records, relevance)
            lines += [
                "",
                f"{name}, {title}: per floor, % of off-topic questions with no hit; "
                "dev evidence recall over the hits (%)",
            ]
            head = ["", *(f"{f:g}" for f in FLOORS)]
            body = [[k, *(f"{v[f]:.1f}" for f in FLOORS)] for k, v in figures.items()]
            lines.append(format_table(head, body))
    return "\n".join(lines)


def relevance_file(fitted: Fitted, encoder: str, trained_on: str) -> dict[str, Any]:
    """The fields of ``membrain/data/relevance.json``."""

    def pair(calibration: str, kind: str) -> dict[str, Any]:
        return {
            m: fitted[(calibration, kind, m)].model_dump(mode="json") for m in ("topic", "rest")
        }

    return {
        "trained_on": trained_on,
        "encoders": {
            name: {"reranked": pair(c, "reranked"), "plain": pair(c, "plain")}
            for name, c in ((encoder, "dense"), (LEXICAL, "lexical"))
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="LoCoMo dev JSON file")
    parser.add_argument("--modes", nargs="+", default=["fast", "expand"])
    parser.add_argument("--k", nargs="+", type=int, default=[50, 100], help="hits per search")
    parser.add_argument("--rows", type=Path, default=None, help="cache of the recorded rows")
    parser.add_argument("--out", type=Path, default=None, help="write the calibration here")
    args = parser.parse_args(argv)
    if args.rows is not None and args.rows.exists():
        records = json.loads(args.rows.read_text(encoding="utf-8"))
    else:
        records = collect(args.data, args.modes, args.k)
        if args.rows is not None:
            args.rows.write_text(json.dumps(records), encoding="utf-8")
    print(report(records))
    if args.out is not None:
        trained_on = f"LoCoMo dev ({args.data.name}) and off-topic questions, modes {args.modes}"
        data = relevance_file(fit_all(records), default_dense_encoder().name, trained_on)
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
