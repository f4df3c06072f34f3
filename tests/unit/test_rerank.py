"""The learned reranker: its features, its trees, the packaged model, the search switch."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from membrain import Memory, Message, Scope
from membrain.api.errors import ModelFileError
from membrain.retrieval.rerank import (
    FEATURES,
    PATH_FEATURES,
    Candidate,
    Reranker,
    applies_to,
    features,
    packaged_reranker,
)
from membrain.testing import HashingEncoder, any_encoder_reranker

AT = datetime(2024, 5, 1, tzinfo=UTC)


def _row(
    question: str, text: str, paths: dict[str, int], participants: list[str]
) -> dict[str, float]:
    row = features(question, [Candidate("f", text, paths, 0.5, 0)], participants)[0]
    return dict(zip(FEATURES, row, strict=True))


def test_features_read_path_ranks_speakers_questions_and_shared_words() -> None:
    row = _row(
        "What did Caroline paint?",
        "[Caroline] painted a lake at sunrise.",
        {"bm25": 2, "dense": 4},
        ["Caroline", "Melanie"],
    )
    assert row["rr_bm25"] == 0.5 and row["rr_dense"] == 0.25 and row["rr_boolean"] == 0.0
    assert row["paths_found"] == 2.0
    assert row["names_asked"] == 1.0 and row["other_speaker"] == 0.0
    assert row["is_question"] == 0.0 and row["word_overlap"] == 1.0
    other = _row(
        "What did Caroline paint?", "[Melanie] asked what to paint?", {}, ["Caroline", "Melanie"]
    )
    assert other["other_speaker"] == 1.0 and other["is_question"] == 1.0


def _stump(feature: str, threshold: float, low: float, high: float) -> Reranker:
    """One tree: ``low`` when ``feature <= threshold``, else ``high``."""
    return Reranker(
        feature=[[FEATURES.index(feature), -1, -1]],
        threshold=[[threshold, 0.0, 0.0]],
        left=[[1, 0, 0]],
        right=[[2, 0, 0]],
        value=[[0.0, low, high]],
    )


def test_the_order_follows_the_trees_and_ties_keep_the_fused_order() -> None:
    model = _stump("rr_bm25", 0.5, 0.0, 1.0)
    candidates = [
        Candidate("a", "a", {"dense": 1}, 0.9, 0),
        Candidate("b", "b", {"bm25": 1}, 0.5, 1),
        Candidate("c", "c", {"dense": 2}, 0.4, 2),
    ]
    assert model.order("q", candidates) == [(1, 1.0), (0, 0.0), (2, 0.0)]


def test_scores_add_one_leaf_per_tree() -> None:
    first, second = _stump("rr_bm25", 0.5, -1.0, 1.0), _stump("is_question", 0.5, 0.0, -2.0)
    both = Reranker(
        *(
            np.vstack([getattr(first, name), getattr(second, name)])
            for name in ("feature", "threshold", "left", "right", "value")
        )
    )
    rows = np.zeros((2, len(FEATURES)))
    rows[0, FEATURES.index("rr_bm25")] = 1.0
    rows[1, FEATURES.index("is_question")] = 1.0
    assert both.scores(rows).tolist() == [1.0, -3.0]


def test_trees_for_other_features_are_refused() -> None:
    with pytest.raises(ModelFileError, match="features"):
        Reranker([[-1]], [[0.0]], [[0]], [[0]], [[0.0]], names=["rr_bm25"])
    with pytest.raises(ModelFileError, match="features are not"):
        Reranker([[-1]], [[0.0]], [[0]], [[0]], [[0.0]], names=["rr_dense", *FEATURES[1:]])
    with pytest.raises(ModelFileError, match="does not exist"):
        Reranker([[len(FEATURES)]], [[0.0]], [[0]], [[0]], [[0.0]])
    with pytest.raises(ModelFileError, match="trees, nodes"):
        Reranker([[-1, -1]], [[0.0]], [[0]], [[0]], [[0.0]])


def test_a_trained_booster_scores_the_same_in_numpy() -> None:
    import lightgbm  # the train extra, part of the test extra

    from benchmarks.train_reranker import PARAMS, from_booster

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(400, len(FEATURES)))
    labels = (rows[:, 0] + rows[:, 5] * rows[:, 9] > 0.3).astype(float)
    params = {k: v for k, v in PARAMS.items() if k != "num_boost_round"}
    booster = lightgbm.train(params, lightgbm.Dataset(rows, labels), num_boost_round=20)
    model = from_booster(booster.dump_model())
    expected = booster.predict(rows, raw_score=True)
    assert np.allclose(model.scores(rows), expected, atol=1e-9)
    assert np.allclose(Reranker.from_json(model.to_json()).scores(rows), expected, atol=1e-6)


def test_the_packaged_trees_read_most_features() -> None:
    model = packaged_reranker()
    used = set(model.feature[model.feature >= 0].tolist())
    assert len(model.feature) >= 50  # fitted, not a placeholder
    assert len(used) >= len(FEATURES) // 2
    assert len(set(PATH_FEATURES)) == len(PATH_FEATURES)


def test_search_reranks_the_answer_follow_up_unless_asked_not_to(tmp_path: Path) -> None:
    scope = Scope(dataset="chat", task="t")
    texts = [
        "I adopted a greyhound called Bolt.",
        "Bolt loves the beach near our flat.",
        "My sister Ana is a nurse in Porto.",
        "I started pottery classes on Wednesdays.",
    ]
    messages = [
        Message(speaker="Maya", text=t, timestamp=f"2024-05-0{i + 1}T10:00:00Z")
        for i, t in enumerate(texts)
    ]
    question = "What is Maya's dog called?"
    with Memory(path=tmp_path, dense=HashingEncoder(64), reranker=any_encoder_reranker()) as mem:
        mem.add(messages, scope=scope)
        reranked = mem.search(question, scope=scope, mode="expand", k=4)
        kept = mem.search(question, scope=scope, mode="expand", k=4, rerank=False)
        fast = mem.search(question, scope=scope, mode="fast", k=4)
    scores = [h.rerank for h in reranked.hits]
    assert scores and all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert {h.fact.id for h in reranked.hits} == {h.fact.id for h in kept.hits}
    assert all(h.rerank is None for h in kept.hits)
    assert all(h.rerank is None for h in fast.hits)


def test_a_chat_with_an_assistant_keeps_the_fused_order(tmp_path: Path) -> None:
    scope = Scope(dataset="agent", task="t")
    messages = [
        Message(speaker="Maya", text="I adopted a greyhound called Bolt.", timestamp=AT),
        Message(speaker="Assistant", text="Lovely! How old is he?", timestamp=AT),
    ]
    with Memory(path=tmp_path, dense=HashingEncoder(64), reranker=any_encoder_reranker()) as mem:
        mem.add(messages, scope=scope)
        found = mem.search("What is Maya's dog called?", scope=scope, mode="expand")
    assert found.hits and all(h.rerank is None for h in found.hits)
    assert not applies_to(["Maya", "Assistant"]) and applies_to(["Caroline", "Melanie"])


def test_trees_of_another_encoder_keep_the_fused_order(tmp_path: Path) -> None:
    scope = Scope(dataset="chat", task="t")
    said = [Message(speaker="Maya", text="I adopted a greyhound called Bolt.", timestamp=AT)]
    packaged = packaged_reranker()
    assert packaged.encoder and packaged.fits(packaged.encoder) and not packaged.fits("hashing-64")
    with Memory(path=tmp_path, dense=HashingEncoder(64)) as mem:
        mem.add(said, scope=scope)
        found = mem.search("What is Maya's dog called?", scope=scope, mode="expand")
    assert found.hits and all(h.rerank is None for h in found.hits)
