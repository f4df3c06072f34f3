"""Unit tests of the pure helpers of the LoCoMo benchmark (``benchmarks.locomo_retrieval``)."""

from __future__ import annotations

import math

import pytest

from benchmarks import locomo_eval as ev
from benchmarks import locomo_retrieval


# -- evidence parsing ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D1:3", "D1:3"),
        ("  D12:40 ", "D12:40"),
        ("D10:05", "D10:5"),
        ("D:11:26", "D11:26"),
        ("D", None),
        ("D1", None),
        ("S1:2", None),
        ("D1:2:3", None),
        ("d1:2", None),
        ("", None),
    ],
)
def test_normalize_dia_id(raw: str, expected: str | None) -> None:
    assert ev.normalize_dia_id(raw) == expected


def test_parse_evidence_splits_semicolons_and_drops_malformed() -> None:
    valid, dropped = ev.parse_evidence(["D8:6; D9:17", "D", "D1:20", "D:11:26"])
    assert valid == ["D8:6", "D9:17", "D1:20", "D11:26"]
    assert dropped == ["D"]


def test_parse_evidence_deduplicates_after_normalising() -> None:
    valid, dropped = ev.parse_evidence(["D2:7", "D2:07", "D2:7,D3:1", "xx"])
    assert valid == ["D2:7", "D3:1"]
    assert dropped == ["xx"]


def test_parse_evidence_odd_containers() -> None:
    assert ev.parse_evidence([]) == ([], [])
    assert ev.parse_evidence(None) == ([], [])
    assert ev.parse_evidence("D4:4 D4:5") == (["D4:4", "D4:5"], [])
    assert ev.parse_evidence(["D1:1", 7]) == (["D1:1"], ["7"])
    assert ev.parse_evidence(12) == ([], ["12"])


# -- recall -------------------------------------------------------------------------------------
def test_recall_counts_each_evidence_id_once() -> None:
    assert ev.recall(["D1:1", "D1:2", "D1:3"], ["D1:2", "D1:2", "D9:9"]) == pytest.approx(1 / 3)
    assert ev.recall(["D1:1"], []) == 0.0
    with pytest.raises(ValueError):
        ev.recall([], ["D1:1"])


def test_recall_at_k_uses_every_citation_of_the_top_items() -> None:
    ranked = [("D1:1",), ("D5:5", "D1:2"), (), ("D1:3",)]
    evidence = ["D1:1", "D1:2", "D1:3", "D1:4"]
    assert ev.recall_at_k(evidence, ranked, 1) == 0.25
    assert ev.recall_at_k(evidence, ranked, 2) == 0.5
    assert ev.recall_at_k(evidence, ranked, 3) == 0.5
    assert ev.recall_at_k(evidence, ranked, 4) == 0.75
    assert ev.recall_at_k(evidence, ranked, 50) == 0.75
    with pytest.raises(ValueError):
        ev.recall_at_k(evidence, ranked, 0)


# -- budget packing -----------------------------------------------------------------------------
def test_pack_budget_stops_at_first_item_that_does_not_fit() -> None:
    assert ev.pack_budget([10, 20, 30], 60) == 3
    assert ev.pack_budget([10, 20, 30], 59) == 2
    # the 5-token item after the one that overflows is not used to fill the gap
    assert ev.pack_budget([10, 50, 5], 30) == 1
    assert ev.pack_budget([40, 1], 30) == 0
    assert ev.pack_budget([], 30) == 0
    assert ev.pack_budget([0, 0, 7], 7) == 3
    with pytest.raises(ValueError):
        ev.pack_budget([-1], 10)


def test_recall_within_budget() -> None:
    ranked = [("D1:1",), ("D1:2", "D1:3"), ("D1:4",)]
    evidence = ["D1:2", "D1:4"]
    assert ev.recall_within_budget(evidence, ranked, [5, 10, 5], 14) == (0.0, False)
    assert ev.recall_within_budget(evidence, ranked, [5, 10, 5], 15) == (0.5, False)
    assert ev.recall_within_budget(evidence, ranked, [5, 10, 5], 20) == (1.0, True)
    assert ev.recall_within_budget(evidence, ranked, [50, 1, 1], 20) == (0.0, False)
    with pytest.raises(ValueError):
        ev.recall_within_budget(evidence, ranked, [5, 10], 20)


# -- rendering ----------------------------------------------------------------------------------
def test_render_lines() -> None:
    assert ev.citation_tag([]) == ""
    assert ev.citation_tag(["D1:3", "D2:4"]) == " [D1:3; D2:4]"
    assert ev.render_fact_line("[Sara] adopted a cat.", ["D1:3"], str.upper) == (
        "[SARA] ADOPTED A CAT. [D1:3]"
    )
    assert ev.render_turn_line("Sara", "Look!", "a cat on a sofa", ["D2:1"]) == (
        "Sara: Look! [image: a cat on a sofa] [D2:1]"
    )
    assert ev.render_turn_line("Sara", "Hi", None, ["D1:1"]) == "Sara: Hi [D1:1]"


# -- aggregation --------------------------------------------------------------------------------
def test_percentile_interpolates() -> None:
    assert ev.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert ev.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert ev.percentile([7.0], 95) == 7.0
    assert ev.percentile([1.0, 9.0], 0) == 1.0
    assert ev.percentile([1.0, 9.0], 100) == 9.0
    assert math.isnan(ev.percentile([], 50))


def test_recall_table_overall_is_mean_over_questions_not_categories() -> None:
    table = ev.RecallTable()
    table.add("10", "4", 1.0)
    table.add("10", "4", 1.0)
    table.add("10", "4", 1.0)
    table.add("10", "1", 0.0)
    table.add("10", "10", 0.5)
    table.add("1000", "2", 0.25)
    summary = table.summary()
    assert summary["10"]["overall"] == pytest.approx(3.5 / 5)
    assert list(summary["10"]) == ["overall", "1", "4", "10"]
    assert summary["10"]["4"] == 1.0
    assert summary["1000"] == {"overall": 0.25, "2": 0.25}


def test_category_counts_in_numeric_order() -> None:
    assert dict(ev.category_counts(["4", "1", "4", "10", "2"])) == {"1": 1, "2": 1, "4": 2, "10": 1}


def test_ablation_groups_cover_every_path_seen_and_the_follow_up() -> None:
    seen = {"bm25": 9, "dense": 9, "hyde": 4, "when": 1, "answers": 3}
    groups, skipped = locomo_retrieval.ablation_groups("expand", seen)
    assert groups == [
        ("bm25", ("bm25",)),
        ("dense", ("dense",)),
        ("hyde", ("hyde",)),
        ("time boosts", ("time", "stated", "when")),
        ("answers", ("answers",)),
    ]
    assert skipped == ["event"]
    groups, skipped = locomo_retrieval.ablation_groups("fast", {"bm25": 9, "dense": 9})
    assert [label for label, _ in groups] == ["bm25", "dense"] and skipped == ["time boosts"]
