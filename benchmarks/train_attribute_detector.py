"""Fit the attribute detector on the labelled user statements; print its precision and recall.

Usage (from the repository root)::

    python -m benchmarks.train_attribute_detector [--corpus benchmarks/data/attribute_statements]
        [--test-writers we wf] [--out core/membrain/data/attribute_detector.npz] [--json OUT]

Data: one JSON Lines file per writer; each record is a clause a user says to an assistant, with
whom it is about, the single-valued attribute it states or ends and the value (an exact span), or
its kind when it states none (plan, negation, question, past, passing, other_fact, advice,
chatter). The writers of ``--test-writers`` are held apart: nothing is fitted on them.

Each clause is first read by the offline extractor as a user's turn in a chat with an assistant,
so the detector learns from the fact texts it reads at run time (``[Tunde] resumed at
[Flutterwave]``). Then:

1. leave-one-writer-out over the fitting writers: fit on the others, detect on the one left out;
2. fit on every fitting writer: in-sample figures, and the figures on the held-apart writers;
3. the same figures for the patterns of :mod:`membrain.extraction.attributes` alone and for the
   two together (what :func:`~membrain.extraction.attributes.claims` reads).

A detection is right when its attribute and polarity (states / ends) are the record's, and, for
"full", its subject is the record's and its value shares a word with the record's. Printed per
attribute: precision and recall; and the passing-state class. The shipped file is the fit on
every fitting writer (``--out``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix  # type: ignore[import-untyped]
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

from membrain.api.models import Message, Role
from membrain.extraction import attributes
from membrain.extraction.detector import (
    ATTRIBUTES,
    ENDS,
    NONE,
    PASSING,
    AttributeDetector,
    Detection,
    Token,
    sentence_features,
    span_features,
    spans,
    tokens,
)
from membrain.extraction.offline import OfflineExtractor

CORPUS = Path(__file__).resolve().parent / "data" / "attribute_statements"
TEST_WRITERS = ("we", "wf")
BUCKETS = 1 << 15
SPAN_BUCKETS = 1 << 15
C_SENTENCE = 16.0
"""Inverse regularisation of the sentence model (chosen by the writer cross-validation)."""
C_SPAN = 1.0
_WHEN = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_WORD = re.compile(r"[\w'’-]+")
_RULE_ATTRIBUTES = {"car": "car", "phone": "phone"}


@dataclass(frozen=True, slots=True)
class Record:
    """One labelled clause, and the fact texts the offline extractor writes from it."""

    id: str
    writer: str
    speaker: str
    text: str
    about: str | None
    subject: str | None
    attribute: str | None
    value: str | None
    kind: str
    facts: tuple[str, ...]

    @property
    def label(self) -> str:
        if self.kind == "states" and self.attribute:
            return self.attribute
        if self.kind == "ends" and self.attribute:
            return self.attribute + ENDS
        return PASSING if self.kind == "passing" else NONE

    def subject_key(self) -> str | None:
        """What a right subject holds: the speaker's name, else the subject's name or word."""
        if self.about == "speaker":
            return self.speaker.casefold()
        if not self.subject:
            return None
        words: list[str] = _WORD.findall(self.subject)
        names = [w for w in words if w[:1].isupper()]
        return (names[-1] if names else words[-1]).casefold()


def load(corpus: Path) -> list[Record]:
    """Every record of the corpus, read by the offline extractor."""
    extractor = OfflineExtractor()
    extractor.passing_states_discarded = False  # the detector learns them from these
    records = []
    for path in sorted(corpus.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            raw = json.loads(line)
            user = Message(
                id="u", speaker=raw["speaker"], text=raw["text"], timestamp=_WHEN, role=Role.USER
            )
            batch = extractor.extract([user], [], [raw["speaker"], "Assistant"])
            records.append(
                Record(
                    id=raw["id"],
                    writer=raw["writer"],
                    speaker=raw["speaker"],
                    text=raw["text"],
                    about=raw.get("about") or None,
                    subject=raw.get("subject"),
                    attribute=raw.get("attribute"),
                    value=raw.get("value"),
                    kind=raw["kind"],
                    facts=tuple(f.text for f in batch.facts),
                )
            )
    return records


# -- examples -----------------------------------------------------------------------------------
def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def sentences(record: Record) -> list[tuple[list[Token], str]]:
    """The record's fact sentences, each with its label (the record's on the sentence holding
    the value, no attribute on the others)."""
    out = []
    value = set(_words(record.value or "")) - {"a", "an", "the"}
    for fact in record.facts:
        for sentence in _SENTENCE.split(fact.strip()):
            words = tokens(sentence)
            if not words:
                continue
            label = record.label
            if value and label not in (NONE, PASSING):
                held = {w for t in words for w in _words(t.text)}
                if not value <= held:
                    label = NONE
            out.append((words, label))
    return out


def gold_span(words: Sequence[Token], value: str) -> tuple[int, int] | None:
    """The candidate span whose words are the value's (articles aside)."""
    target = [w for w in _words(value) if w not in ("a", "an", "the")]
    for start, end in spans(words):
        got = [w for t in words[start:end] for w in _words(t.text) if w not in ("a", "an", "the")]
        if got == target:
            return start, end
    return None


def fit(records: Sequence[Record], c_sentence: float = C_SENTENCE) -> AttributeDetector:
    """Both models, fitted on ``records``."""
    classes = [NONE, PASSING, *ATTRIBUTES, *(a + ENDS for a in ATTRIBUTES)]
    rows: list[list[int]] = []
    labels: list[int] = []
    span_rows: list[list[int]] = []
    span_labels: list[int] = []
    for record in records:
        for words, label in sentences(record):
            rows.append(sentence_features(words, BUCKETS))
            labels.append(classes.index(label))
            if label in (NONE, PASSING) or not record.value:
                continue
            gold = gold_span(words, record.value)
            if gold is None:
                continue
            for candidate in spans(words):
                span_rows.append(span_features(words, *candidate, label, SPAN_BUCKETS))
                span_labels.append(int(candidate == gold))
    present = sorted(set(labels))
    sentence_model = LogisticRegression(C=c_sentence, max_iter=2000)
    sentence_model.fit(_matrix(rows, BUCKETS), np.array(labels))
    weights = np.zeros((BUCKETS, len(classes)), dtype=np.float32)
    bias = np.full(len(classes), -30.0, dtype=np.float32)
    for column, index in enumerate(present):
        weights[:, index] = sentence_model.coef_[column]
        bias[index] = sentence_model.intercept_[column]
    span_model = LogisticRegression(C=C_SPAN, max_iter=2000)
    span_model.fit(_matrix(span_rows, SPAN_BUCKETS), np.array(span_labels))
    return AttributeDetector(
        classes, weights, bias, span_model.coef_[0], float(span_model.intercept_[0])
    )


def _matrix(rows: Sequence[Sequence[int]], width: int) -> csr_matrix:
    indptr = np.cumsum([0, *(len(r) for r in rows)])
    indices = np.array([i for r in rows for i in r], dtype=np.int64)
    data = np.ones(len(indices), dtype=np.float32)
    return csr_matrix((data, indices, indptr), shape=(len(rows), width))


# -- scoring ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Said:
    """What a reader found in one record: (attribute, ends, subject, value, confidence)."""

    attribute: str
    ends: bool
    subject: str
    value: str
    confidence: float = 1.0


def detected(detector: AttributeDetector, record: Record) -> list[Said]:
    found: list[Detection] = [d for f in record.facts for d in detector.detect(f)]
    return [Said(d.attribute, d.ends, d.subject, d.value, d.confidence) for d in found]


def ruled(record: Record) -> list[Said]:
    return [
        Said(c.attribute, c.ends, c.subject, c.value)
        for f in record.facts
        for c in attributes.pattern_claims(f)
    ]


def passing_read(detector: AttributeDetector, record: Record) -> bool:
    """Whether the extractor would keep ``record`` as evidence only (a passing state)."""
    sentences = [s for f in record.facts for s in _SENTENCE.split(f)]
    return bool(sentences) and all(detector.passing_state(s, record.speaker) for s in sentences)


def score(
    records: Sequence[Record], found: dict[str, list[Said]], floor: float = 0.0
) -> dict[str, dict[str, float]]:
    """Precision / recall per attribute (attribute level and full), over ``records``."""
    tp: Counter[str] = Counter()
    full: Counter[str] = Counter()
    predicted: Counter[str] = Counter()
    gold: Counter[str] = Counter()
    for record in records:
        said = [s for s in found.get(record.id, []) if s.confidence >= floor]
        truth = (
            (record.attribute, record.kind == "ends") if record.kind in ("states", "ends") else None
        )
        if truth is not None:
            gold[truth[0] or ""] += 1
        seen: set[str] = set()
        for s in said:
            if s.attribute in seen:
                continue
            seen.add(s.attribute)
            predicted[s.attribute] += 1
            if truth is not None and (s.attribute, s.ends) == truth:
                tp[s.attribute] += 1
                subject = record.subject_key()
                value = set(_words(record.value or "")) - {"a", "an", "the"}
                right_subject = subject is not None and subject in s.subject
                right_value = not value or bool(value & set(_words(s.value)))
                if right_subject and right_value:
                    full[s.attribute] += 1
    table: dict[str, dict[str, float]] = {}
    for attribute in [*ATTRIBUTES, "all"]:
        if attribute == "all":
            t, f, p, g = (sum(c.values()) for c in (tp, full, predicted, gold))
        else:
            t, f, p, g = tp[attribute], full[attribute], predicted[attribute], gold[attribute]
        table[attribute] = {
            "precision": t / p if p else 0.0,
            "recall": t / g if g else 0.0,
            "full_precision": f / p if p else 0.0,
            "full_recall": f / g if g else 0.0,
            "gold": g,
        }
    return table


def passing_score(detector: AttributeDetector, records: Sequence[Record]) -> dict[str, float]:
    said = [passing_read(detector, r) for r in records]
    truth = [r.kind == "passing" for r in records]
    tp = sum(s and t for s, t in zip(said, truth, strict=True))
    return {
        "precision": tp / max(1, sum(said)),
        "recall": tp / max(1, sum(truth)),
        "gold": float(sum(truth)),
    }


# -- report -------------------------------------------------------------------------------------
def _row(name: str, table: dict[str, dict[str, float]], key: str = "") -> str:
    cells = [
        f"{100 * table[a][key + 'precision']:.0f} / {100 * table[a][key + 'recall']:.0f}"
        for a in [*ATTRIBUTES, "all"]
    ]
    return f"| {name} | " + " | ".join(cells) + " |"


def report(
    tables: dict[str, dict[str, dict[str, float]]], passing: dict[str, dict[str, float]]
) -> str:
    head = "| reader, set | " + " | ".join([*ATTRIBUTES, "all"]) + " |"
    lines = [
        "Precision / recall (%) per attribute, attribute and polarity right:",
        "",
        head,
        "|---" * (len(ATTRIBUTES) + 2) + "|",
    ]
    lines.extend(_row(name, table) for name, table in tables.items())
    lines += [
        "",
        "Full (subject and value right too):",
        "",
        head,
        "|---" * (len(ATTRIBUTES) + 2) + "|",
    ]
    lines.extend(_row(name, table, "full_") for name, table in tables.items())
    lines += ["", "| passing states | precision | recall | records |", "|---|---:|---:|---:|"]
    lines.extend(
        f"| {name} | {100 * p['precision']:.0f} | {100 * p['recall']:.0f} | {p['gold']:.0f} |"
        for name, p in passing.items()
    )
    return "\n".join(lines)


def _above(said: Sequence[Said], floor: float) -> list[Said]:
    return [s for s in said if s.confidence >= floor]


def merged(*sources: Iterable[Said]) -> list[Said]:
    out: dict[tuple[str, str], Said] = {}
    for source in sources:
        for said in source:
            out.setdefault((said.subject, said.attribute), said)
    return list(out.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--test-writers", nargs="+", default=list(TEST_WRITERS))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--detected", type=float, default=attributes.DETECTED, help="detector confidence"
    )
    parser.add_argument("--c", type=float, default=C_SENTENCE)
    parser.add_argument("--sweep", type=float, nargs="*", default=[0.3, 0.4, 0.6, 0.7, 0.85])
    args = parser.parse_args(argv)
    records = load(args.corpus)
    writers = sorted({r.writer for r in records} - set(args.test_writers))
    fitting = [r for r in records if r.writer in writers]
    held = [r for r in records if r.writer in args.test_writers]
    print(
        f"{len(records)} records: fitting {len(fitting)} ({', '.join(writers)}), "
        f"held apart {len(held)} ({', '.join(args.test_writers)})",
        file=sys.stderr,
    )
    cross: dict[str, list[Said]] = {}
    cross_passing: list[bool] = []
    for writer in writers:
        model = AttributeDetector.from_bytes(
            fit([r for r in fitting if r.writer != writer], args.c).to_bytes()
        )
        for record in (r for r in fitting if r.writer == writer):
            cross[record.id] = detected(model, record)
            cross_passing.append(passing_read(model, record))
        print(f"  cross-validated: {writer} done", file=sys.stderr)
    final = AttributeDetector.from_bytes(fit(fitting, args.c).to_bytes())  # as shipped
    inside = {r.id: detected(final, r) for r in fitting}
    outside = {r.id: detected(final, r) for r in held}
    rules = {r.id: ruled(r) for r in records}
    floor = args.detected
    both = {
        r.id: merged(rules[r.id], _above(outside.get(r.id, inside.get(r.id, [])), floor))
        for r in records
    }
    both_cross = {r.id: merged(rules[r.id], _above(cross[r.id], floor)) for r in fitting}
    tables = {
        "detector, in-sample": score(fitting, inside, floor),
        "detector, cross-validated by writer": score(fitting, cross, floor),
        "detector, held-apart writers": score(held, outside, floor),
        "patterns, fitting writers": score(fitting, rules),
        "patterns, held-apart writers": score(held, rules),
        "both, cross-validated by writer": score(fitting, both_cross),
        "both, held-apart writers": score(held, both),
    }
    for sweep in args.sweep:
        tables[f"detector at {sweep:.2f}, cross-validated"] = score(fitting, cross, sweep)
    truth = [r.kind == "passing" for r in fitting]
    tp = sum(s and t for s, t in zip(cross_passing, truth, strict=True))
    passing = {
        "in-sample": passing_score(final, fitting),
        "cross-validated by writer": {
            "precision": tp / max(1, sum(cross_passing)),
            "recall": tp / max(1, sum(truth)),
            "gold": float(sum(truth)),
        },
        "held-apart writers": passing_score(final, held),
    }
    print(report(tables, passing))
    if args.json:
        args.json.write_text(json.dumps({"tables": tables, "passing": passing}, indent=1))
    if args.out:
        args.out.write_bytes(final.to_bytes())
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
