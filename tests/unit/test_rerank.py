"""The learned reranker: its features, its ordering, the packaged weights, the search switch."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from membrain import Memory, Message, Scope
from membrain.retrieval.rerank import (
    FEATURES,
    PATH_FEATURES,
    Candidate,
    Reranker,
    applies_to,
    features,
    packaged_reranker,
)
from membrain.testing import HashingEncoder

AT = datetime(2024, 5, 1, tzinfo=UTC)


def _row(
    question: str, text: str, paths: dict[str, int], participants: list[str]
) -> dict[str, float]:
    row = features(question, [Candidate(text, paths, 0.5, 0)], participants)[0]
    return dict(zip(FEATURES, row, strict=True))


def test_features_read_path_ranks_speakers_questions_and_shared_words() -> None:
    row = _row(
        "What did Caroline paint?",
        "[Caroline] painted a lake at sunrise.",
        {"A": 2, "B": 4},
        ["Caroline", "Melanie"],
    )
    assert row["rr_A"] == 0.5 and row["rr_B"] == 0.25 and row["rr_D"] == 0.0
    assert row["paths_found"] == 2.0
    assert row["names_asked"] == 1.0 and row["other_speaker"] == 0.0
    assert row["is_question"] == 0.0 and row["word_overlap"] == 1.0
    other = _row(
        "What did Caroline paint?", "[Melanie] asked what to paint?", {}, ["Caroline", "Melanie"]
    )
    assert other["other_speaker"] == 1.0 and other["is_question"] == 1.0


def test_the_order_follows_the_scores_and_ties_keep_the_fused_order() -> None:
    names = FEATURES
    weights = [1.0 if n == "rr_A" else 0.0 for n in names]
    model = Reranker(weights, 0.0, [0.0] * len(names), [1.0] * len(names))
    candidates = [
        Candidate("a", {"B": 1}, 0.9, 0),
        Candidate("b", {"A": 1}, 0.5, 1),
        Candidate("c", {"B": 2}, 0.4, 2),
    ]
    assert [i for i, _ in model.order("q", candidates)] == [1, 0, 2]


def test_weights_for_other_features_are_refused() -> None:
    with pytest.raises(ValueError, match="features"):
        Reranker([0.0], 0.0, [0.0], [1.0], names=["rr_A"])


def test_the_packaged_weights_cover_every_feature() -> None:
    model = packaged_reranker()
    assert model.weights.shape == (len(FEATURES),)
    assert np.all(model.scale > 0)
    assert np.count_nonzero(model.weights) >= len(FEATURES) // 2  # fitted, not a placeholder
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
    with Memory(path=tmp_path, dense=HashingEncoder(64)) as mem:
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
    with Memory(path=tmp_path, dense=HashingEncoder(64)) as mem:
        mem.add(messages, scope=scope)
        found = mem.search("What is Maya's dog called?", scope=scope, mode="expand")
    assert found.hits and all(h.rerank is None for h in found.hits)
    assert not applies_to(["Maya", "Assistant"]) and applies_to(["Caroline", "Melanie"])
