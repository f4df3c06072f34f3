"""A learned reranker over the first results: boosted trees whose splits ship as data.

The paths already find the evidence: on the LoCoMo dev split it is among the fused candidates
for most questions, but often ranked below ten. The reranker scores each of the first
:data:`RERANK_DEPTH` results (fused, then placed by the answer follow-up) with no model call:
how each path ranked it, its fused score, whether it is a question or an image, its length,
whether it names the person the question names (or only the other speaker), how many of the
question's words it holds, and how well the question matches the fact, its whole turn, the
turns around it and its session (:mod:`.signals`). The score is the sum of one leaf per tree
(log-odds that the candidate is evidence), computed in numpy.

The trees (``membrain/data/reranker.json``) are fitted by ``benchmarks/train_reranker.py`` on
dev conversations only; the script prints the cross-validated figures and an ablation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import numpy as np
from numpy.typing import ArrayLike

from membrain.extraction.dialogue_acts import GENERIC_ASSISTANTS
from membrain.retrieval.signals import SIGNALS
from membrain.temporal import plain_text

__all__ = [
    "FEATURES",
    "PATH_FEATURES",
    "RERANK_DEPTH",
    "Candidate",
    "Reranker",
    "applies_to",
    "features",
]

RERANK_DEPTH = 50
"""Fused candidates the reranker reads and orders; the rest keep their fused order below."""

PATH_FEATURES = tuple("A B B2 B3 C D time stated when asked turn reply replaced answers".split())
"""Paths whose reciprocal rank is a feature (a path that did not find the candidate gives 0)."""

FEATURES = (
    *(f"rr_{p}" for p in PATH_FEATURES),
    "fused_share",
    "fused_rr",
    "paths_found",
    "is_question",
    "is_image",
    "log_words",
    "names_asked",
    "other_speaker",
    "word_overlap",
    *SIGNALS,
)
"""Feature names, in the order of a feature row."""

_WORD = re.compile(r"[A-Za-z][\w'’-]*")
_BRACKET = re.compile(r"\[([^\[\]:]+)\]")
_STOP = frozenset(
    """
    what when where which who whom whose why how does did do is are was were has have had the
    and for with that this from about into their they them there then than your you his her
    its our out been being would could should will can may might also just like some any
    """.split()
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """What the reranker reads of one fused candidate."""

    id: str
    """The fact's id."""
    text: str
    """The fact's text (SPEC format)."""
    paths: Mapping[str, int]
    """Path name -> 1-based rank."""
    score: float
    """Fused score."""
    position: int
    """0-based position in the fused order."""
    signals: Sequence[float] = ()
    """The :data:`~membrain.retrieval.signals.SIGNALS` of the fact (zeros when not given)."""


def features(
    question: str, candidates: Sequence[Candidate], participants: Sequence[str] = ()
) -> np.ndarray:
    """One row of :data:`FEATURES` per candidate."""
    top = max((c.score for c in candidates), default=0.0) or 1.0
    asked = _asked_names(question, participants)
    others = {p.casefold() for p in participants} - asked
    words = _content(question)
    rows = []
    for c in candidates:
        text = plain_text(c.text)
        fact_words = _content(text)
        named = {m.group(1).casefold() for m in _BRACKET.finditer(c.text)}
        first = _first_entity(c.text)
        rows.append(
            [
                *(1.0 / c.paths[p] if p in c.paths else 0.0 for p in PATH_FEATURES),
                c.score / top,
                1.0 / (c.position + 1),
                float(len(c.paths)),
                float(text.rstrip().endswith("?")),
                float("shared an image" in text),
                math.log1p(len(_WORD.findall(text))),
                float(bool(asked & named)),
                float(bool(asked) and first in others),
                len(words & fact_words) / len(words) if words else 0.0,
                *(c.signals or (0.0,) * len(SIGNALS)),
            ]
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))


def applies_to(participants: Sequence[str]) -> bool:
    """Whether the reranker applies to a scope with these participants.

    It was fitted on chats between named people. In a chat with an assistant (a participant
    named Assistant, AI, Bot, Agent or User) questions are not stored as facts and the answer
    follow-up has nothing to place, and it lowered stable@1 of ``benchmarks/agent_memory.py``
    (offline, ``expand``: 92.5 -> 87.5 in-sample, 90.9 -> 86.4 held out), so it is not run there.
    """
    return not any(p.casefold() in GENERIC_ASSISTANTS | {"user"} for p in participants)


def _asked_names(question: str, participants: Sequence[str]) -> set[str]:
    people = {p.casefold() for p in participants}
    said = {w.casefold().removesuffix("'s").removesuffix("’s") for w in _WORD.findall(question)}
    return people & said


def _first_entity(text: str) -> str | None:
    match = _BRACKET.search(text)
    return match.group(1).casefold().removesuffix("'s") if match else None


def _content(text: str) -> set[str]:
    return {
        _stem(w.casefold()) for w in _WORD.findall(text) if len(w) > 2 and w.casefold() not in _STOP
    }


def _stem(word: str) -> str:
    for suffix in ("'s", "’s", "ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


class Reranker:
    """Boosted regression trees over :func:`features`; a row's score is the sum of its leaves.

    Each tree is stored as arrays over its nodes: the feature a node splits on (``-1`` at a
    leaf), the threshold (a row goes left when its feature is ``<=`` it), the left and right
    child, and the leaf value. Trees are padded to the same number of nodes. ``encoder`` names
    the dense encoder whose similarities the trees were trained on (``None``: any).
    """

    def __init__(
        self,
        feature: ArrayLike,
        threshold: ArrayLike,
        left: ArrayLike,
        right: ArrayLike,
        value: ArrayLike,
        names: Sequence[str] = FEATURES,
        encoder: str | None = None,
    ) -> None:
        if tuple(names) != FEATURES:
            raise ValueError(f"reranker features {list(names)} are not {list(FEATURES)}")
        self.feature = np.asarray(feature, dtype=np.int64)
        self.threshold = np.asarray(threshold, dtype=np.float64)
        self.left = np.asarray(left, dtype=np.int64)
        self.right = np.asarray(right, dtype=np.int64)
        self.value = np.asarray(value, dtype=np.float64)
        shapes = {a.shape for a in (self.feature, self.threshold, self.left, self.right)}
        if len(shapes | {self.value.shape}) != 1 or self.feature.ndim != 2:
            raise ValueError("reranker trees: every node array must be (trees, nodes)")
        if self.feature.max(initial=-1) >= len(FEATURES):
            raise ValueError("reranker trees split on a feature that does not exist")
        self._depth = _depth(self.feature, self.left, self.right)
        self.encoder = encoder
        # For inference, the trees as one flat node array: children as flat indices, and a
        # leaf its own child, so every row walks the same number of steps.
        trees, nodes = self.feature.shape
        offset = (np.arange(trees) * nodes)[:, None]
        here = np.arange(trees * nodes).reshape(trees, nodes)
        leaf = self.feature < 0
        self._roots = offset.ravel()
        self._split = np.where(leaf, 0, self.feature).ravel()
        self._cut = self.threshold.ravel()
        self._left = np.where(leaf, here, self.left + offset).ravel()
        self._right = np.where(leaf, here, self.right + offset).ravel()
        self._value = self.value.ravel()

    def fits(self, encoder: str) -> bool:
        """Whether the trees read similarities of this dense encoder (by name).

        Thresholds on cosine similarities mean nothing on another model's scale: trees trained
        with one encoder order nothing for a memory searching with another.
        """
        return self.encoder is None or self.encoder == encoder

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Reranker:
        """A reranker from the fields ``benchmarks/train_reranker.py`` writes."""
        trees = data["trees"]
        if not isinstance(trees, Mapping):
            raise ValueError("reranker: 'trees' must map node fields to arrays")
        return cls(
            feature=trees["feature"],
            threshold=trees["threshold"],
            left=trees["left"],
            right=trees["right"],
            value=trees["value"],
            names=data["features"],  # type: ignore[arg-type]
            encoder=data.get("encoder"),  # type: ignore[arg-type]
        )

    def to_json(self) -> dict[str, object]:
        """The fields :meth:`from_json` reads."""
        return {
            "features": list(FEATURES),
            "encoder": self.encoder,
            "trees": {
                "feature": self.feature.tolist(),
                "threshold": self.threshold.tolist(),
                "left": self.left.tolist(),
                "right": self.right.tolist(),
                "value": self.value.round(8).tolist(),
            },
        }

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """The model's log-odds per row."""
        if not len(rows) or not len(self.feature):
            return np.zeros(len(rows))
        node = np.broadcast_to(self._roots, (len(rows), len(self._roots)))
        picks = np.arange(len(rows))[:, None]
        for _ in range(self._depth):
            goes_left = rows[picks, self._split[node]] <= self._cut[node]
            node = np.where(goes_left, self._left[node], self._right[node])
        return np.asarray(self._value[node].sum(axis=1), dtype=np.float64)

    def order(
        self, question: str, candidates: Sequence[Candidate], participants: Sequence[str] = ()
    ) -> list[tuple[int, float]]:
        """(index into ``candidates``, score), best first; ties keep the fused order."""
        scores = self.scores(features(question, candidates, participants))
        return sorted(((i, float(s)) for i, s in enumerate(scores)), key=lambda p: (-p[1], p[0]))


def _depth(feature: np.ndarray, left: np.ndarray, right: np.ndarray) -> int:
    """The most splits from a root to a leaf, over all trees."""
    deepest = 0
    for tree in range(len(feature)):
        stack = [(0, 0)]
        while stack:
            node, depth = stack.pop()
            if feature[tree, node] < 0:
                deepest = max(deepest, depth)
            else:
                stack += [(left[tree, node], depth + 1), (right[tree, node], depth + 1)]
    return deepest


@cache
def packaged_reranker() -> Reranker:
    """The reranker shipped with the package (``membrain/data/reranker.json``)."""
    text = (files("membrain") / "data" / "reranker.json").read_text(encoding="utf-8")
    return Reranker.from_json(json.loads(text))
