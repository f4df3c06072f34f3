"""The server load benchmark (``benchmarks.server_load``): a tiny run and its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import server_load as bench


def test_tiny_run_reports_served_and_embedded_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "load.json"
    argv = [
        "--server",
        "thread",
        "--encoder",
        "hashing",
        "--clients",
        "2",
        "--seconds",
        "3",
        "--generated",
        "--json",
        str(out),
    ]
    assert bench.main(argv, log=False) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    printed = capsys.readouterr().out

    rows = {row["target"]: row for row in report["rows"]}
    assert set(rows) == {"served", "embedded"}
    for name, row in rows.items():
        assert row["error_total"] == 0, (name, row["first_error"])
        assert row["ops_per_s"] > 0
        for kind in bench.KINDS:
            latency = row["latency_ms"][kind]
            assert latency["n"] > 0, (name, kind)
            assert 0 < latency["p50"] <= latency["p95"]
        assert row["ops"] == sum(row["latency_ms"][k]["n"] for k in bench.KINDS)
    ratio = report["ratio_served_to_embedded"]
    assert ratio["ops_per_s"] == pytest.approx(
        rows["served"]["ops_per_s"] / rows["embedded"]["ops_per_s"]
    )
    assert report["data"].startswith("generated")

    lines = printed.splitlines()
    assert any(line.startswith("served ") for line in lines)
    assert any(line.startswith("embedded ") for line in lines)
    assert "served / embedded: throughput" in printed


def test_ops_limit_bounds_the_run(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    argv = ["--server", "thread", "--encoder", "hashing", "--clients", "2", "--ops", "10"]
    argv += ["--rounds", "3"]  # 4 + 3 + 3 operations, alternating served and embedded
    assert bench.main([*argv, "--seconds", "30", "--generated", "--json", str(out)], log=False) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["rounds"] == 3
    assert [row["ops"] for row in report["rows"]] == [10, 10]
    assert all(row["error_total"] == 0 for row in report["rows"])


def test_every_client_replays_the_same_operations() -> None:
    conversation = bench.generated_conversation(messages=6)
    first = bench.client_ops(conversation, seed=3, search_share=0.5, batch=2)
    again = bench.client_ops(conversation, seed=3, search_share=0.5, batch=2)
    ops = [next(first) for _ in range(12)]
    assert ops == [next(again) for _ in range(12)]
    added = [m for op in ops if op.kind == "add" for m in op.messages]
    ids = [m.source_id for m in added]
    assert len(ids) == len(set(ids)), "a replayed conversation must get new message ids"
    assert ops[0].kind == "add"  # nothing to search before the first add


def test_rounds_must_cover_every_client() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--rounds", "0", "--generated"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--clients", "4", "--ops", "6", "--rounds", "2", "--generated"])


def test_hashing_encoder_needs_the_thread_server() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--encoder", "hashing"])
