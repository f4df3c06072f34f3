"""The search latency benchmark (``benchmarks.search_latency``) on a tiny store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import search_latency as bench
from membrain.extraction.base import entity_refs
from membrain.knowledge.facts import build_facts
from membrain.temporal import find_annotations


def test_generated_facts_are_distinct_annotated_and_buildable() -> None:
    corpus = bench.generate_facts(300, seed=3)
    texts = [d.text for d in corpus.drafts]
    assert len(texts) == len(set(texts)) == 300
    assert all(entity_refs(t) for t in texts)
    timed = [t for t in texts if find_annotations(t)]
    assert 0.15 * len(texts) < len(timed) < 0.6 * len(texts)
    facts, _ = build_facts(
        bench.SCOPE, corpus.drafts, extractor=bench.EXTRACTOR, recorded_at=bench.REFERENCE
    )
    assert len(facts) == 300
    assert bench.generate_facts(300, seed=3).drafts == corpus.drafts


def test_questions_include_when_and_named_times() -> None:
    corpus = bench.generate_facts(300)
    questions = bench.generate_questions(corpus.events, 100)
    assert len(questions) == 100
    assert any(q.startswith("When did") for q in questions)
    assert any(re.search(r" in [A-Z][a-z]+ 20\d\d\?$", q) for q in questions)
    kinds = {bench.question_kind(q) for q in questions}
    assert kinds == set(bench.KINDS)


def test_tiny_run_reports_every_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "latency.json"
    argv = ["--facts", "300", "--queries", "12", "--warmup", "2", "--hashing-encoder"]
    assert bench.main([*argv, "--modes", "fast", "expand", "deep", "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))

    assert report["facts"] == 300
    assert report["queries"] == 12
    assert report["modes"] == ["fast", "expand", "deep"]
    for key in ("build_s", "optimize_s", "paths_ran", "target", "errors", "dense_encoder"):
        assert key in report
    assert report["errors"] == {}
    for mode in report["modes"]:
        lat = report["latency_ms"][mode]
        assert lat["p99"] >= lat["p95"] >= lat["p50"] > 0
        assert all(lat[r] > 0 for r in bench.RATIOS)
        floor = (
            report["baseline_ms"]["embed_query"]["p50"]
            + report["baseline_ms"]["raw_dense_query"]["p50"]
        )
        assert lat["ratio_p50_to_floor"] == pytest.approx(lat["p50"] / floor)
        assert {"bm25", "dense"} <= set(report["paths_ran"][mode])
    assert {"hyde", "event"} <= set(report["paths_ran"]["expand"])
    spent = report["in_encoder_ms"]
    assert spent["fast"]["texts"] >= 1 and spent["expand"]["texts"] > spent["fast"]["texts"]
    for mode in report["modes"]:
        assert 0 < spent[mode]["p50"] < report["latency_ms"][mode]["p50"]
    for mode, target in report["floor_targets"].items():
        ratio = report["latency_ms"][mode]["ratio_p50_to_floor"]
        assert target["holds"] is (ratio <= bench.FLOOR_TARGETS[mode])
    assert set(report["floor_targets"]) == {"fast", "expand"}
    for key in ("raw_dense_query", "embed_query", "minimal_search"):
        base = report["baseline_ms"][key]
        assert base["p95"] >= base["p50"] > 0
    for mode in report["modes"]:
        by_kind = report["latency_ms_by_kind"][mode]
        assert set(by_kind) <= set(bench.KINDS) and by_kind
        assert all(v["p95"] >= v["p50"] > 0 for v in by_kind.values())
    assert sum(report["questions_per_kind"].values()) == 12
    assert report["target"]["applicable"] is False
    assert isinstance(report["target"]["holds"], bool)

    printed = capsys.readouterr().out
    assert "p50 ms" in printed and "raw dense query" in printed
    assert "fast-mode p95 < 50 ms" in printed
    assert "target expand p50 <= 2.5x the floor" in printed and "embed, then raw query" in printed


def test_parse_args_rejects_unknown_mode() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--modes", "warp"])
