"""How relevant each hit is, on one scale for every search: a probability in [0, 1].

The fused score ranks (the top hit is 1.0 however weak) and the reranker's log-odds are
relative to the other candidates (its features are mostly ranks), so neither says whether a
memory holds anything about a question. A hit's relevance is the product of two calibrated
probabilities, each a logistic model over absolute evidence:

* ``topic``: that the memory holds the question's topic at all, from the best signals of the
  returned list: ``best_cos``, the highest dense cosine of the question (participants' names
  neutral, as facts are written) and a fact, with the memory's own encoder; ``best_overlap``,
  the highest share of the question's content words (stemmed, stop words out) a fact holds; and
  ``best_margin``, the reranker's highest log-odds where it ordered the list;
* ``rest``: given the topic, that evidence is at this hit or below it, from the hit's ``rank``
  (``log(1 + position)``) and the best cosine and overlap of the hits from it on (``rest_cos``,
  ``rest_overlap``).

The reranker's log-odds enter the topic only: they fall steeply after the first few hits, and a
``rest`` model reading them cut evidence further down (``benchmarks/calibrate_relevance.py``).
Each kind of list has its pair of models: ``reranked`` (the packaged reranker ordered it) and
``plain`` (``fast``, a chat with an assistant, a reranker of your own). The weights ship as data
(``membrain/data/relevance.json``), fitted by ``benchmarks/calibrate_relevance.py`` on the LoCoMo
dev questions (a hit citing an evidence turn is evidence) and on off-topic questions asked of the
same conversations (no topic). They are keyed by the dense encoder's name, since a cosine means
nothing on another model's scale: for an encoder the file does not name (a custom one, the tests'
``HashingEncoder``) the :data:`LEXICAL` models are used, which read no cosine.

Monotone by construction: hits are returned in their ranked order and each hit's relevance is
capped by the relevance of the hit above it (:func:`capped`, a running minimum), so relevance
never rises down the list and a floor (``min_relevance``) drops a tail, never a hit from the
middle. The ``rest`` signals read the hits returned, so a hit's relevance depends a little on how
many were asked for (``k``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from membrain.api.errors import ModelFileError
from membrain.api.indexing import question_dense_text
from membrain.api.models import Fact
from membrain.api.requests import CONTEXT_MIN_RELEVANCE
from membrain.backends.base import DENSE
from membrain.retrieval.base import SearchContext
from membrain.retrieval.rerank import content_words
from membrain.temporal import plain_text

__all__ = [
    "CONTEXT_MIN_RELEVANCE",
    "LEXICAL",
    "RELEVANCE_FEATURES",
    "Calibration",
    "Evidence",
    "Logistic",
    "Pair",
    "RelevanceFile",
    "RelevanceModel",
    "capped",
    "evidence",
    "list_features",
    "packaged_relevance",
]

LEXICAL = "lexical"
"""The calibration used for a dense encoder the relevance file does not name."""

RELEVANCE_FEATURES = (
    "rank",
    "rest_cos",
    "rest_overlap",
    "rest_margin",
    "best_cos",
    "best_overlap",
    "best_margin",
)
"""What a logistic model may read of a hit in a list (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the relevance of one hit is computed from (its own signals)."""

    cos: float
    overlap: float
    margin: float | None = None


_NO_MARGIN = -10.0
"""The margin read for a hit the reranker did not score (below every log-odds it gives)."""


def list_features(hits: Sequence[Evidence]) -> list[dict[str, float]]:
    """The :data:`RELEVANCE_FEATURES` of each hit of a returned list, in order."""
    if not hits:
        return []
    margins = [_NO_MARGIN if e.margin is None else e.margin for e in hits]
    best = {
        "best_cos": max(e.cos for e in hits),
        "best_overlap": max(e.overlap for e in hits),
        "best_margin": max(margins),
    }
    rows: list[dict[str, float]] = []
    rest = {"rest_cos": -1.0, "rest_overlap": 0.0, "rest_margin": _NO_MARGIN}
    for position in range(len(hits) - 1, -1, -1):
        e = hits[position]
        rest = {
            "rest_cos": max(rest["rest_cos"], e.cos),
            "rest_overlap": max(rest["rest_overlap"], e.overlap),
            "rest_margin": max(rest["rest_margin"], margins[position]),
        }
        rows.append({"rank": math.log1p(position), **rest, **best})
    return rows[::-1]


_Finite = Annotated[float, Field(strict=False, allow_inf_nan=False)]


class Logistic(BaseModel):
    """``sigmoid(intercept + sum(coef * feature))`` over the named features."""

    model_config = ConfigDict(frozen=True)

    features: tuple[str, ...]
    coef: tuple[_Finite, ...]
    intercept: _Finite

    def probability(self, row: Mapping[str, float]) -> float:
        """The model's probability for one row of features."""
        z = self.intercept + sum(c * row[f] for f, c in zip(self.features, self.coef, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


class Pair(BaseModel):
    """The two models of one kind of list: the topic's presence and the rest's evidence."""

    model_config = ConfigDict(frozen=True)

    topic: Logistic
    """P(the memory holds the question's topic), from the list's best signals."""
    rest: Logistic
    """P(evidence at this rank or below | the topic is held), from the hit's rank and the best
    signals of the hits from it on."""


class Calibration(BaseModel):
    """One encoder's models: for lists the reranker ordered, and for the others."""

    model_config = ConfigDict(frozen=True)

    reranked: Pair
    plain: Pair


class RelevanceFile(BaseModel):
    """The fields of ``membrain/data/relevance.json``: calibrations by encoder name."""

    model_config = ConfigDict(frozen=True)

    encoders: dict[str, Calibration]
    trained_on: str = ""


class RelevanceModel:
    """Calibrated relevance per encoder; :data:`LEXICAL` for encoders without a calibration.

    Raises:
        ModelFileError: a model names a feature that is not in :data:`RELEVANCE_FEATURES`, has
            not one weight per feature, the lexical models read a cosine, or there is no
            :data:`LEXICAL` calibration.
    """

    def __init__(self, calibrations: Mapping[str, Calibration]) -> None:
        if LEXICAL not in calibrations:
            raise ModelFileError(f"relevance file: no {LEXICAL!r} calibration")
        for name, calibration in calibrations.items():
            for pair in (calibration.reranked, calibration.plain):
                for model in (pair.topic, pair.rest):
                    unknown = set(model.features) - set(RELEVANCE_FEATURES)
                    if unknown or len(model.coef) != len(model.features):
                        raise ModelFileError(f"relevance file: malformed model for {name!r}")
                    if name == LEXICAL and any(f.endswith("_cos") for f in model.features):
                        raise ModelFileError("relevance file: the lexical models read no cosine")
        self._calibrations = dict(calibrations)

    @classmethod
    def from_json(cls, data: object) -> RelevanceModel:
        """A model from parsed JSON (:class:`RelevanceFile`).

        Raises:
            ModelFileError: the fields are not those of :class:`RelevanceFile`, or see above.
        """
        try:
            file = RelevanceFile.model_validate(data)
        except ValidationError as exc:
            raise ModelFileError(f"relevance file: {exc.error_count()} problems") from None
        return cls(file.encoders)

    def calibrated(self, encoder: str) -> bool:
        """Whether this encoder has a calibration of its own (else :data:`LEXICAL` is used)."""
        return encoder in self._calibrations and encoder != LEXICAL

    def probabilities(self, encoder: str, hits: Sequence[Evidence]) -> list[float]:
        """Each hit's ``P(topic) * P(evidence from it on | topic)``, before :func:`capped`."""
        calibration = self._calibrations.get(encoder, self._calibrations[LEXICAL])
        pair = (
            calibration.reranked if any(e.margin is not None for e in hits) else calibration.plain
        )
        rows = list_features(hits)
        if not rows:
            return []
        topic = pair.topic.probability(rows[0])
        return [topic * pair.rest.probability(row) for row in rows]

    def relevance(
        self, ctx: SearchContext, facts: Sequence[Fact], margins: Mapping[str, float]
    ) -> list[float]:
        """The relevance of each fact, in the given (returned) order, capped to be monotone."""
        encoder = ctx.store.dense.name
        rows = evidence(ctx, facts, margins, dense=self.calibrated(encoder))
        return capped(self.probabilities(encoder, rows))


def evidence(
    ctx: SearchContext, facts: Sequence[Fact], margins: Mapping[str, float], *, dense: bool = True
) -> list[Evidence]:
    """The :class:`Evidence` of each fact (one similarity lookup when ``dense``)."""
    if not facts:
        return []
    cos: Mapping[str, float] = {}
    if dense:
        vector = ctx.dense_vector(question_dense_text(ctx.question, ctx.participants))
        cos = ctx.store.fact_similarity(ctx.scope, DENSE, vector, ids=[f.id for f in facts])
    words = content_words(ctx.question)
    overlap = [
        len(words & content_words(plain_text(f.text))) / len(words) if words else 0.0 for f in facts
    ]
    return [
        Evidence(cos.get(f.id, 0.0), o, margins.get(f.id))
        for f, o in zip(facts, overlap, strict=True)
    ]


def capped(values: Sequence[float]) -> list[float]:
    """``values`` each capped by the one before (a running minimum), rounded, within [0, 1]."""
    out: list[float] = []
    ceiling = 1.0
    for value in values:
        ceiling = min(ceiling, max(0.0, float(value)))
        out.append(round(ceiling, 4))
    return out


@cache
def packaged_relevance() -> RelevanceModel:
    """The calibration shipped with the package (``membrain/data/relevance.json``)."""
    text = (files("membrain") / "data" / "relevance.json").read_text(encoding="utf-8")
    return RelevanceModel.from_json(json.loads(text))
