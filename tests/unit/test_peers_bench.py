"""The peer comparison benchmark (``benchmarks.peers``) on a tiny hand-written LoCoMo file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from benchmarks import peers as bench
from benchmarks import peers_systems as systems
from benchmarks.locomo_retrieval import progress_bar
from membrain.files.loaders import locomo_conversations
from membrain.testing import HashingEncoder, any_encoder_reranker

SESSION_1 = [
    ("Sara", "I adopted a grey cat named Miso last week."),
    ("Tom", "Congratulations! I went hiking in Yosemite with my brother."),
    ("Sara", "My sister is moving to Lisbon in June."),
    ("Tom", "I started a pottery class on Tuesday evenings."),
]
SESSION_2 = [
    ("Tom", "The pottery teacher praised my first bowl."),
    ("Sara", "Miso knocked my coffee off the table this morning."),
    ("Tom", "I booked a camping trip to Lake Tahoe for August."),
]
EXACT = "I booked a camping trip to Lake Tahoe for August."


def _conversation(name: str) -> dict[str, Any]:
    sessions: dict[str, Any] = {"speaker_a": "Sara", "speaker_b": "Tom"}
    for number, (when, turns) in enumerate(
        (("1:56 pm on 8 May, 2023", SESSION_1), ("10:00 am on 20 May, 2023", SESSION_2)), start=1
    ):
        sessions[f"session_{number}_date_time"] = when
        sessions[f"session_{number}"] = [
            {"speaker": speaker, "dia_id": f"D{number}:{index}", "text": text}
            for index, (speaker, text) in enumerate(turns, start=1)
        ]
    return {
        "sample_id": name,
        "conversation": sessions,
        "qa": [
            {"question": EXACT, "answer": "Lake Tahoe", "evidence": ["D2:3"], "category": 4},
            {
                "question": "What is the name of Sara's cat?",
                "answer": "Miso",
                "evidence": ["D1:1", "D2:2"],
                "category": 1,
            },
            {"question": "Where did Tom hike?", "evidence": ["D1:2"], "category": 5},
            {"question": "Unscorable", "answer": "-", "evidence": ["D"], "category": 2},
        ],
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    payload = [_conversation("conv-a"), _conversation("conv-b")]
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def _rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["row"]: row for row in report["rows"]}


def test_membrain_and_llamaindex_rows(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "peers.json"
    argv = ["--data", str(data), "--systems", "membrain", "llamaindex", "--hashing-encoder"]
    assert bench.main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    rows = _rows(report)

    assert list(rows) == ["membrain-fast", "membrain-expand", "llamaindex"]
    assert report["reference"] == "membrain-fast"
    assert report["conversations"] == ["conv-a", "conv-b"]
    assert report["turns"] == 14
    assert report["questions"]["evaluated"] == 6  # the "D" evidence is dropped: skipped
    assert report["questions"]["skipped_no_evidence"] == 2
    assert set(report["questions"]["evaluated_per_category"]) == {"1", "4", "5"}
    for row in rows.values():
        assert row["status"] == "ok", row
        assert set(row["recall_at_k"]) == {"5", "10", "25"}
        # Seven turns per conversation: the top 25 holds every one of them.
        assert row["recall_at_k"]["25"]["overall"] == 1.0
        assert row["ingest"]["turns"] == 14 and row["ingest"]["turns_per_s"] > 0
        assert row["latency_ms"]["n"] == 6
        assert 0 < row["latency_ms"]["p50"] <= row["latency_ms"]["p95"]
    reference = rows["membrain-fast"]["to_reference"]
    assert reference["ingest_turns_per_s_ratio"] == 1.0
    assert reference["recall_delta"] == {"5": 0.0, "10": 0.0, "25": 0.0}
    llamaindex = rows["llamaindex"]
    versus = llamaindex["to_reference"]
    assert versus["search_p50_ratio"] == pytest.approx(
        llamaindex["latency_ms"]["p50"] / rows["membrain-fast"]["latency_ms"]["p50"]
    )
    assert versus["recall_delta"]["10"] == pytest.approx(
        llamaindex["recall_at_k"]["10"]["overall"]
        - rows["membrain-fast"]["recall_at_k"]["10"]["overall"]
    )
    assert rows["membrain-fast"]["ingest"]["finish_s"] > 0  # optimize() ran

    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.startswith("system "))
    for column in ("R@5", "R@10", "R@25", "turns/s", "p50 ms", "p95 ms", "ingest x", "p50 x"):
        assert column in header
    assert "dR@10" in header
    for label in rows:
        assert any(line.startswith(f"{label} ") for line in printed.splitlines())


def test_a_question_whose_evidence_is_one_turn_is_found(data: Path, tmp_path: Path) -> None:
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = locomo_conversations(raw)
    questions, _ = bench.select_questions(raw, conversations, limit=None)
    exact = [q for q in questions if q.text == EXACT]
    assert len(exact) == 2 and all(q.evidence == ("D2:3",) for q in exact)
    with progress_bar(Console(stderr=True)) as progress:
        for name in ("membrain", "llamaindex"):
            rows = bench.run_system(
                name,
                conversations,
                exact,
                dense=HashingEncoder(dim=64),
                folder=tmp_path / name,
                membrain_modes=("fast",),
                progress=progress,
            )
            for row in rows:
                recall = row["recall_at_k"]
                assert recall["25"]["overall"] == 1.0, row["row"]
    # The turn itself is the nearest document to its own text.
    assert rows[0]["recall_at_k"]["5"]["overall"] == 1.0


def test_max_questions_keeps_the_first_of_each_conversation(data: Path) -> None:
    raw = json.loads(data.read_text(encoding="utf-8"))
    questions, skipped = bench.select_questions(raw, locomo_conversations(raw), limit=1)
    assert [(q.conversation, q.text) for q in questions] == [("conv-a", EXACT), ("conv-b", EXACT)]
    assert skipped == 2


def test_missing_peer_gets_a_row_and_require_all_fails(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(systems.PEER_MODULES, "mem0", ("membrain_absent_peer_module",))
    out = tmp_path / "peers.json"
    argv = ["--data", str(data), "--systems", "llamaindex", "mem0", "--hashing-encoder"]
    assert bench.main([*argv, "--json", str(out)]) == 0
    rows = _rows(json.loads(out.read_text(encoding="utf-8")))
    assert rows["mem0"]["status"] == "not installed (pip install '.[bench]')"
    assert rows["mem0"]["missing"] == ["membrain_absent_peer_module"]
    assert rows["llamaindex"]["status"] == "ok"
    assert "to_reference" not in rows["llamaindex"]  # no MemBrain row to compare with
    printed = capsys.readouterr().out
    assert any(
        line.startswith("mem0") and "not installed (pip install '.[bench]')" in line
        for line in printed.splitlines()
    )

    with pytest.raises(SystemExit, match="not installed: mem0"):
        bench.main([*argv, "--require-all"])


def test_a_failing_peer_is_reported_and_fails_require_all(
    data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kwargs: object) -> systems.MemorySystem:
        raise RuntimeError("store unavailable")

    monkeypatch.setattr(bench, "open_system", broken)
    argv = ["--data", str(data), "--systems", "llamaindex", "--hashing-encoder"]
    assert bench.main(argv) == 0
    assert "failed: RuntimeError: store unavailable" in capsys.readouterr().out
    assert bench.main([*argv, "--require-all"]) == 1


@pytest.mark.parametrize("name", ["langchain-qdrant", "mem0"])
def test_installed_peers_run_offline(
    name: str, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if systems.missing_modules(name):
        pytest.skip(f"{name} is not installed (the bench extra)")
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0-home"))
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = locomo_conversations(raw)
    questions, _ = bench.select_questions(raw, conversations, limit=None)
    with progress_bar(Console(stderr=True)) as progress:
        (row,) = bench.run_system(
            name,
            conversations,
            questions,
            dense=HashingEncoder(dim=64),
            folder=tmp_path / name,
            fastembed_sparse=False,
            progress=progress,
        )
    assert row["status"] == "ok"
    assert row["recall_at_k"]["25"]["overall"] == 1.0
    assert row["latency_ms"]["n"] == len(questions)


def test_reranker_file_replaces_the_packaged_one(data: Path, tmp_path: Path) -> None:
    trees = tmp_path / "trees.json"
    trees.write_text(json.dumps(any_encoder_reranker().to_json()), encoding="utf-8")
    out = tmp_path / "peers.json"
    argv = ["--data", str(data), "--systems", "membrain", "--membrain-modes", "expand"]
    argv += ["--reranker", str(trees), "--max-questions", "1", "--hashing-encoder"]
    assert bench.main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["reranker"] == str(trees)
    (row,) = report["rows"]
    assert row["row"] == "membrain-expand" and row["status"] == "ok"
    assert row["recall_at_k"]["5"]["overall"] == 1.0


def test_unknown_conversation_and_system_are_refused(data: Path) -> None:
    with pytest.raises(SystemExit, match="no conversation at"):
        bench.main(["--data", str(data), "--conversations", "7", "--hashing-encoder"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--data", str(data), "--systems", "letta"])
