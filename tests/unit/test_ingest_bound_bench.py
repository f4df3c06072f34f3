"""The ingest-against-encoder benchmark (``benchmarks.ingest_bound``) on a tiny conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_locomo import write_tiny_locomo

from benchmarks import ingest_bound as bench
from membrain.testing import HashingEncoder

_TURNS = [
    ("Caroline", "Hey Mel! I went to a support group yesterday and it was so powerful."),
    ("Melanie", "That's great, Caroline! I took the kids to Lake Tahoe last week."),
    ("Caroline", "I plan to apply to the counseling program next month."),
    ("Melanie", "My book club is reading Little Women."),
]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    return write_tiny_locomo(tmp_path / "tiny.json", _TURNS)


def test_the_recorder_sees_every_document_and_the_bound_follows(
    locomo_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    argv = ["--data", str(locomo_file), "--repeats", "2", "--hashing-encoder", "--json", str(out)]
    report = bench.main(argv)

    assert json.loads(out.read_text(encoding="utf-8")) == report
    (runs,) = report["runs"].values()
    assert len(runs) == 2
    for run in runs:
        assert run["turns"] == len(_TURNS)
        # Every message is embedded, and the facts extracted from them.
        assert run["texts"] > len(_TURNS) and run["distinct_texts"] <= run["texts"]
        assert run["ratio"] == pytest.approx(run["encoder_alone_s"] / run["ingest_s"])
        assert run["bound_turns_per_s"] == pytest.approx(run["turns"] / run["encoder_alone_s"])
        assert 0 < run["encoder_share"] < 1
    printed = capsys.readouterr().out
    assert "ingest / bound" in printed and "tiny" in printed


def test_the_recording_encoder_keeps_the_inner_encoders_name_and_vectors() -> None:
    inner = HashingEncoder(dim=16)
    recording = bench.RecordingEncoder(inner)
    vectors = recording.embed_documents(["a cat", "a dog"])
    assert vectors == inner.embed_documents(["a cat", "a dog"])
    assert recording.embed_query("a cat") == inner.embed_query("a cat")
    assert recording.texts == ["a cat", "a dog"]
    assert recording.name == inner.name and recording.dim == 16


def test_repeats_must_be_positive() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--repeats", "0"])
