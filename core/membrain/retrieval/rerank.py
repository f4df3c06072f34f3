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
dev conversations only; the script prints the cross-validated figures and an ablation. Trees are
checked when loaded (:class:`RerankerFile`, then the node arrays): a malformed file, a node
index out of range, a child that does not come after its parent (so no cycle) or a number that is
not finite is a :class:`~membrain.api.errors.ModelFileError`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Annotated

import numpy as np
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from membrain.api.errors import ModelFileError
from membrain.api.path_names import BM25, BOOLEAN, DENSE, ENTITY_TREE, EVENT, FORMER_NAMES, HYDE
from membrain.extraction.dialogue_acts import GENERIC_ASSISTANTS
from membrain.retrieval.signals import SIGNALS
from membrain.temporal import plain_text

__all__ = [
    "FEATURES",
    "PATH_FEATURES",
    "RERANK_DEPTH",
    "Candidate",
    "Reranker",
    "RerankerFile",
    "applies_to",
    "content_words",
    "features",
]

RERANK_DEPTH = 50
"""Fused candidates the reranker reads and orders; the rest keep their fused order below."""

PATH_FEATURES = (
    BM25,
    DENSE,
    HYDE,
    EVENT,
    ENTITY_TREE,
    BOOLEAN,
    *"time stated when asked turn reply replaced answers".split(),
)
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
    """The fact's text (fact format)."""
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
    words = content_words(question)
    rows = []
    for c in candidates:
        text = plain_text(c.text)
        fact_words = content_words(text)
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


def content_words(text: str) -> set[str]:
    """The stemmed words of ``text`` longer than two letters, stop words left out."""
    return {
        _stem(w.casefold()) for w in _WORD.findall(text) if len(w) > 2 and w.casefold() not in _STOP
    }


def _stem(word: str) -> str:
    for suffix in ("'s", "’s", "ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


_Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
_Feature = Annotated[StrictInt, Field(ge=-1, lt=len(FEATURES))]
_Node = Annotated[StrictInt, Field(ge=0)]


class _Trees(BaseModel):
    model_config = ConfigDict(frozen=True)

    feature: list[list[_Feature]]
    threshold: list[list[_Finite]]
    left: list[list[_Node]]
    right: list[list[_Node]]
    value: list[list[_Finite]]


class RerankerFile(BaseModel):
    """The fields of a reranker file, as ``benchmarks/train_reranker.py`` writes them.

    Node arrays are (trees, nodes): ``feature`` an index into :data:`FEATURES` (``-1`` at a
    leaf), ``left``/``right`` node indexes, ``threshold``/``value`` finite numbers. More fields
    (``trained_on``, ``depth``) are kept by the file and ignored here.
    """

    model_config = ConfigDict(frozen=True)

    features: list[StrictStr]
    encoder: StrictStr | None = None
    trees: _Trees


class Reranker:
    """Boosted regression trees over :func:`features`; a row's score is the sum of its leaves.

    Each tree is stored as arrays over its nodes: the feature a node splits on (``-1`` at a
    leaf), the threshold (a row goes left when its feature is ``<=`` it), the left and right
    child, and the leaf value. Trees are padded to the same number of nodes. ``encoder`` names
    the dense encoder whose similarities the trees were trained on (``None``: any). Trees
    written before the paths had names read their former letters as the names (``rr_B2`` is
    ``rr_hyde``, :data:`~membrain.api.path_names.FORMER_NAMES`): the same features, the same scores.

    Raises:
        ModelFileError: the arrays are not (trees, nodes) of one shape, a feature or node index
            is out of range, a split's child does not come after it, or a threshold or value is
            not finite.
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
        names = [_current_feature(n) for n in names]
        if tuple(names) != FEATURES:
            raise ModelFileError(_other_features(names))
        try:
            self.feature = np.asarray(feature, dtype=np.int64)
            self.threshold = np.asarray(threshold, dtype=np.float64)
            self.left = np.asarray(left, dtype=np.int64)
            self.right = np.asarray(right, dtype=np.int64)
            self.value = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ModelFileError(
                f"reranker trees: node arrays of numbers expected ({exc})"
            ) from None
        _check_trees(self.feature, self.threshold, self.left, self.right, self.value)
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
    def from_json(cls, data: object) -> Reranker:
        """A reranker from the fields ``benchmarks/train_reranker.py`` writes (parsed JSON).

        Raises:
            ModelFileError: ``data`` is not such fields (:class:`RerankerFile`), or its trees
                are not trees (see :class:`Reranker`).
        """
        try:
            file = RerankerFile.model_validate(data)
        except ValidationError as exc:
            raise ModelFileError(f"reranker file: {_problems(exc)}") from None
        trees = file.trees
        return cls(
            feature=trees.feature,
            threshold=trees.threshold,
            left=trees.left,
            right=trees.right,
            value=trees.value,
            names=file.features,
            encoder=file.encoder,
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


def _current_feature(name: str) -> str:
    """``name`` as this version calls it: ``rr_B2`` (a path's former letter) is ``rr_hyde``."""
    path = name.removeprefix("rr_")
    return f"rr_{FORMER_NAMES[path]}" if name != path and path in FORMER_NAMES else name


def _other_features(names: Sequence[str]) -> str:
    at = next((i for i, (a, b) in enumerate(zip(names, FEATURES, strict=False)) if a != b), None)
    if at is None:
        return f"reranker features: {len(names)} given, this version computes {len(FEATURES)}"
    return f"reranker features are not this version's: {names[at]!r:.40} where {FEATURES[at]!r} is"


def _problems(exc: ValidationError) -> str:
    """The first problems of a validation, on one line (without the values)."""
    errors = exc.errors(include_url=False, include_input=False)
    shown = [f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}" for e in errors[:3]]
    more = len(errors) - len(shown)
    return "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _check_trees(
    feature: np.ndarray,
    threshold: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    value: np.ndarray,
) -> None:
    """Refuse node arrays that are not trees the inference can walk.

    Raises:
        ModelFileError: see :class:`Reranker`.
    """
    shapes = {a.shape for a in (feature, threshold, left, right, value)}
    if len(shapes) != 1 or feature.ndim != 2 or feature.shape[1] == 0:
        raise ModelFileError("reranker trees: every node array must be (trees, nodes)")
    if feature.max(initial=-1) >= len(FEATURES) or feature.min(initial=-1) < -1:
        raise ModelFileError("reranker trees split on a feature that does not exist")
    nodes = feature.shape[1]
    if (
        min(left.min(initial=0), right.min(initial=0)) < 0
        or max(left.max(initial=0), right.max(initial=0)) >= nodes
    ):
        raise ModelFileError(f"reranker trees: a child index is not a node (0 to {nodes - 1})")
    here = np.arange(nodes)[None, :]
    split = feature >= 0
    if np.any(split & ((left <= here) | (right <= here))):
        raise ModelFileError("reranker trees: a split's children must come after it")
    if not (np.isfinite(threshold).all() and np.isfinite(value).all()):
        raise ModelFileError("reranker trees: thresholds and values must be finite")
    with np.errstate(over="ignore"):
        largest = np.abs(value).max(axis=1, initial=0.0).sum()
    if not np.isfinite(largest):
        raise ModelFileError("reranker trees: the leaf values add up past a float's range")


def _depth(feature: np.ndarray, left: np.ndarray, right: np.ndarray) -> int:
    """The most splits from a root to a leaf, over all trees (children come after parents)."""
    trees, nodes = feature.shape
    rows = np.arange(trees)
    depth = np.zeros((trees, nodes), dtype=np.int64)
    for node in range(nodes - 1, -1, -1):
        below = np.maximum(depth[rows, left[:, node]], depth[rows, right[:, node]])
        depth[:, node] = np.where(feature[:, node] >= 0, below + 1, 0)
    return int(depth[:, 0].max(initial=0))


@cache
def packaged_reranker() -> Reranker:
    """The reranker shipped with the package (``membrain/data/reranker.json``)."""
    text = (files("membrain") / "data" / "reranker.json").read_text(encoding="utf-8")
    return Reranker.from_json(json.loads(text))
