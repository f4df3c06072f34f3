"""The scale benchmark (``benchmarks.scale``) on two tiny levels of a tiny LoCoMo-shaped file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_locomo import write_tiny_locomo

from benchmarks import scale as bench

_TURNS = [
    ("Caroline", "I went to a support group yesterday and it was so powerful."),
    ("Melanie", "I took the kids to Lake Tahoe last week, they loved the water."),
    ("Caroline", "I plan to apply to the counseling program next month."),
    ("Melanie", "My book club is reading Little Women this spring."),
    ("Caroline", "My grandmother gave me a necklace from Sweden."),
    ("Melanie", "Pottery class on Friday was relaxing, I made a blue bowl."),
]


QUESTIONS = [
    {"question": "What did Caroline plan to apply to?", "evidence": ["D1:3"]},
    {"question": "What is Melanie's book club reading?", "evidence": ["D1:4"]},
]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    return write_tiny_locomo(tmp_path / "tiny.json", _TURNS, QUESTIONS)


def test_two_levels_grow_one_store_and_report_each(
    locomo_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(bench, "PROGRESS", 40)
    out = tmp_path / "scale.json"
    argv = ["--data", str(locomo_file), "--levels", "60", "120", "--tenants", "10"]
    assert bench.main([*argv, "--queries", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))

    first, second = report["levels"]
    assert (first["facts"], second["facts"]) == (60, 120)
    # Half the facts in the large tenant, the rest spread over the small ones.
    assert (first["large_tenant_facts"], first["small_tenant_facts"]) == (30, 3)
    assert (second["large_tenant_facts"], second["small_tenant_facts"]) == (60, 6)
    for level in (first, second):
        assert level["disk_mb"] > 0 and level["peak_rss_mb"] > 0
        assert level["add_one_large_ms"] > 0 and level["add_one_small_ms"] > 0
        for key in ("search_large", "search_small"):
            searched = level[key]
            assert searched["floor"]["p50"] > 0
            for mode in bench.MODES:
                assert searched[mode]["ratio"] == pytest.approx(
                    searched[mode]["p50"] / searched["floor"]["p50"]
                )
    assert second["disk_mb"] >= first["disk_mb"] * 0.5
    printed = capsys.readouterr()
    assert "facts written" in printed.err  # progress lines while a level builds
    assert "Search latency (ms) per tenant" in printed.out


def test_each_level_needs_two_facts_per_small_tenant() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--levels", "10", "--tenants", "10"])
