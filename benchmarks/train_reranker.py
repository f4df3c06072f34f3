"""Train the packaged reranker on LoCoMo dev conversations and report cross-validated recall.

Usage (from the repository root; needs the ``train`` extra, LightGBM)::

    python -m benchmarks.train_reranker --data ../shared/data/locomo/locomo10_dev.json \
        [--modes expand deep] [--out core/membrain/data/reranker.json] [--candidates FILE] \
        [--ablate]

Every dev conversation is added to its own scope of a fresh store (offline extractor); every
question is searched in each mode with a reranker that only records what it is given: the
feature rows (:func:`~membrain.retrieval.rerank.features`, signals included) of the first
:data:`~membrain.retrieval.rerank.RERANK_DEPTH` results, exactly the list the packaged reranker
orders at search time. A candidate is labelled evidence when it cites an evidence turn of its
question. ``--candidates FILE`` stores them (JSON) on the first run and reads them on the next.

The model is gradient-boosted trees (LightGBM, binary log-loss, :data:`PARAMS`; one thread and a
fixed seed, so the same candidates give the same trees), converted to the arrays
:class:`~membrain.retrieval.rerank.Reranker` evaluates in numpy. Figures: recall@10 of the fused
order and of the reranked order, cross-validated (train on conversations 0-2, test on 3-4, and
the reverse) and in-sample, per mode and for temporal questions; each feature's share of the
trees' gain; with ``--ablate`` the change of the cross-validated figure when one feature is
left out. The model trained on every conversation and mode is what ``--out`` writes.
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
from membrain.embeddings import default_dense_encoder
from membrain.files.loaders import locomo_conversations
from membrain.retrieval.rerank import FEATURES, RERANK_DEPTH, Candidate, Reranker, features
from membrain.retrieval.search import one_per_message

PARAMS: dict[str, Any] = {
    "objective": "binary",
    "num_boost_round": 200,
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 50,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "feature_fraction": 0.8,
    "seed": 0,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,
    "verbose": -1,
}
"""LightGBM settings, chosen by the cross-validated ``expand`` figure among 100-600 trees of 5-31
leaves (learning rate 0.03-0.05, 50-100 candidates per leaf): 82.4-83.4."""
FOLDS = ((0, 1, 2), (3, 4))
TEMPORAL = "2"
"""LoCoMo's category of temporal questions."""


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


class _Recorder(Reranker):
    """A reranker that keeps the fused order and records the feature rows it is given."""

    def __init__(self) -> None:
        leaf = np.full((1, 1), -1)
        super().__init__(leaf, np.zeros((1, 1)), leaf * 0, leaf * 0, np.zeros((1, 1)))
        self.seen: list[tuple[list[str], np.ndarray]] = []

    def order(
        self, question: str, candidates: Sequence[Candidate], participants: Sequence[str] = ()
    ) -> list[tuple[int, float]]:
        rows = features(question, candidates, participants)
        self.seen.append(([c.id for c in candidates], rows))
        return [(i, 0.0) for i in range(len(candidates))]


def collect(data: Path, modes: Sequence[str]) -> list[dict[str, Any]]:
    """Search every dev question in every mode; the candidates as JSON-ready records."""
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = locomo_conversations(raw)
    questions = build_questions(raw, conversations).questions
    index = {conversation_scope(str(c.name)).dataset: i for i, c in enumerate(conversations)}
    out: list[dict[str, Any]] = []
    recorder = _Recorder()
    with (
        tempfile.TemporaryDirectory(prefix="rerank-") as folder,
        Memory(path=folder, reranker=recorder) as mem,
    ):
        for conversation in conversations:
            mem.add(conversation.messages, scope=conversation_scope(str(conversation.name)))
        for question in questions:
            for mode in modes:
                recorder.seen.clear()
                found = mem.search(question.text, scope=question.scope, mode=mode, k=RERANK_DEPTH)
                ids, rows = recorder.seen[0] if recorder.seen else ([], np.zeros((0, 0)))
                cited = {h.fact.id: list(h.source_ids) for h in found.hits}
                out.append(
                    {
                        "conversation": index[question.scope.dataset],
                        "mode": mode,
                        "category": question.category,
                        "evidence": list(question.evidence),
                        "rows": rows.round(6).tolist(),
                        "cited": [cited.get(i, []) for i in ids],
                    }
                )
    return out


def prepare(records: Sequence[dict[str, Any]]) -> list[Asked]:
    """Feature rows and labels of every record."""
    asked = []
    for record in records:
        evidence = set(record["evidence"])
        rows = np.asarray(record["rows"], dtype=np.float64).reshape(-1, len(FEATURES))
        asked.append(
            Asked(
                conversation=record["conversation"],
                mode=record["mode"],
                category=record["category"],
                evidence=tuple(record["evidence"]),
                rows=rows,
                labels=np.array([float(bool(evidence & set(c))) for c in record["cited"]]),
                cited=tuple(tuple(c) for c in record["cited"]),
            )
        )
    return asked


def fit(asked: Sequence[Asked], leave_out: int | None = None) -> Reranker:
    """Boosted trees over the candidates of ``asked`` (without feature ``leave_out``)."""
    import lightgbm  # the ``train`` extra

    rows = np.concatenate([a.rows for a in asked if len(a.rows)])
    labels = np.concatenate([a.labels for a in asked if len(a.rows)])
    if leave_out is not None:
        rows = rows.copy()
        rows[:, leave_out] = 0.0
    params = {k: v for k, v in PARAMS.items() if k != "num_boost_round"}
    booster = lightgbm.train(
        params, lightgbm.Dataset(rows, labels), num_boost_round=PARAMS["num_boost_round"]
    )
    return from_booster(booster.dump_model())


def from_booster(dump: dict[str, Any]) -> Reranker:
    """The :class:`Reranker` of a LightGBM model dump (``Booster.dump_model()``)."""
    trees = []
    for info in dump["tree_info"]:
        nodes: list[list[float]] = []  # feature, threshold, left, right, value
        pending = [(info["tree_structure"], 0)]
        nodes.append([-1, 0.0, 0, 0, 0.0])
        while pending:
            node, at = pending.pop()
            if "leaf_value" in node:
                nodes[at] = [-1, 0.0, 0, 0, float(node["leaf_value"])]
                continue
            if node["decision_type"] != "<=":
                raise ValueError(f"unsupported split {node['decision_type']!r}")
            left, right = len(nodes), len(nodes) + 1
            nodes += [[-1, 0.0, 0, 0, 0.0], [-1, 0.0, 0, 0, 0.0]]
            nodes[at] = [node["split_feature"], float(node["threshold"]), left, right, 0.0]
            pending += [(node["left_child"], left), (node["right_child"], right)]
        trees.append(nodes)
    width = max(len(t) for t in trees)
    padded = np.array([t + [[-1, 0.0, 0, 0, 0.0]] * (width - len(t)) for t in trees])
    return Reranker(
        feature=padded[:, :, 0].astype(np.int64),
        threshold=padded[:, :, 1],
        left=padded[:, :, 2].astype(np.int64),
        right=padded[:, :, 3].astype(np.int64),
        value=padded[:, :, 4],
    )


def recall(asked: Sequence[Asked], model: Reranker | None, k: int = 10) -> float:
    """Mean recall@k over ``asked``, fused order (``None``) or as a search orders it with
    ``model``: reranked, then one fact per message first
    (:func:`~membrain.retrieval.search.one_per_message`)."""
    values = []
    for a in asked:
        ranked = list(a.cited)
        if model is not None and len(a.rows):
            scores = model.scores(a.rows)
            order = sorted(range(len(ranked)), key=lambda i: (-scores[i], i))
            ranked = one_per_message([ranked[i] for i in order], lambda cited: cited)
        values.append(recall_at_k(a.evidence, ranked, k))
    return 100.0 * float(np.mean(values)) if values else 0.0


def cross_validated(
    asked: Sequence[Asked], leave_out: int | None = None, among: Sequence[Asked] | None = None
) -> float:
    """Recall@10 of one fold's test conversations by the model trained on the other fold.

    The model is trained on every mode of the training conversations (as the shipped one is);
    it is tested on ``among`` (default: everything in ``asked``).
    """
    total, count = 0.0, 0
    for test in FOLDS:
        train = [a for a in asked if a.conversation not in test]
        held = [a for a in (asked if among is None else among) if a.conversation in test]
        total += recall(held, fit(train, leave_out)) * len(held)
        count += len(held)
    return total / count if count else 0.0


def report(asked: Sequence[Asked], modes: Sequence[str], ablate: bool) -> tuple[str, Reranker]:
    """The figures as text, and the model trained on everything."""
    model = fit(asked)
    rows = []
    for mode in modes:
        of_mode = [a for a in asked if a.mode == mode]
        temporal = [a for a in of_mode if a.category == TEMPORAL]
        rows.append(
            [
                mode,
                f"{recall(of_mode, None):.1f}",
                f"{cross_validated(asked, among=of_mode):.1f}",
                f"{recall(of_mode, model):.1f}",
                f"{recall(temporal, None):.1f}",
                f"{cross_validated(asked, among=temporal):.1f}",
                f"{recall(temporal, model):.1f}",
            ]
        )
    header = [
        "mode",
        "fused R@10",
        "CV",
        "in-sample",
        "temporal fused",
        "temporal CV",
        "temporal in-sample",
    ]
    gain = _gain(model, asked)
    table = [[name, f"{100 * g:.1f}"] for name, g in zip(FEATURES, gain, strict=True)]
    if ablate:
        base = cross_validated(asked)
        for i, line in enumerate(table):
            line.append(f"{cross_validated(asked, leave_out=i) - base:+.2f}")
    text = "\n".join(
        [
            "Recall@10 (%), fused order and reranked, LoCoMo dev (CV: trained on every mode of "
            "conversations 0-2, tested on 3-4, and the reverse; in-sample: the shipped model)",
            format_table(header, rows),
            "",
            "Model on every conversation and mode: each feature's share of the score's spread"
            + (", and the change of pooled CV recall@10 without it" if ablate else ""),
            format_table(
                ["feature", "share (%)", *(["without it"] if ablate else [])],
                table,
            ),
        ]
    )
    return text, model


def _gain(model: Reranker, asked: Sequence[Asked]) -> np.ndarray:
    """Each feature's share of the score's change: the mean absolute change of the score when
    the feature is set to its mean, normalised to sum to 1."""
    rows = np.concatenate([a.rows for a in asked if len(a.rows)])
    base = model.scores(rows)
    change = np.zeros(len(FEATURES))
    for i in range(len(FEATURES)):
        flat = rows.copy()
        flat[:, i] = rows[:, i].mean()
        change[i] = float(np.abs(model.scores(flat) - base).mean())
    total = change.sum()
    return change / total if total else change


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--modes", nargs="+", default=["expand", "deep"])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--candidates", type=Path, default=None)
    parser.add_argument("--ablate", action="store_true")
    parser.add_argument(
        "--folds",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write each fold's model (trained without its test conversations) here, for "
        "benchmarks.locomo_retrieval --reranker FILE --conversations ...",
    )
    args = parser.parse_args(argv)
    if args.candidates is not None and args.candidates.exists():
        records = json.loads(args.candidates.read_text(encoding="utf-8"))
    else:
        records = collect(args.data, args.modes)
        if args.candidates is not None:
            args.candidates.write_text(json.dumps(records), encoding="utf-8")
    asked = [a for a in prepare(records) if a.mode in args.modes]
    text, model = report(asked, args.modes, args.ablate)
    print(text)
    if args.folds is not None:
        args.folds.mkdir(parents=True, exist_ok=True)
        for test in FOLDS:
            held_out = fit([a for a in asked if a.conversation not in test])
            held_out.encoder = default_dense_encoder().name
            name = "test-" + "".join(map(str, test)) + ".json"
            (args.folds / name).write_text(json.dumps(held_out.to_json()) + "\n", encoding="utf-8")
    if args.out is not None:
        trained = f"LoCoMo dev ({args.data.name}), modes {', '.join(args.modes)}"
        model.encoder = default_dense_encoder().name  # the encoder collect() searches with
        fields = {**model.to_json(), "trained_on": trained, "depth": RERANK_DEPTH}
        args.out.write_text(json.dumps(fields) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
