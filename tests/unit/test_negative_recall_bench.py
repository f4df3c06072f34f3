"""The negative-recall benchmark (``benchmarks.negative_recall``) on one LoCoMo conversation."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import negative_recall as bench

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo10_dev.json"

TARGETS = 5
"""Targets per operation (a few of them name an entity other than a speaker: entity_tree's)."""
ENCODER_BOUND = {"path entity_tree"}
"""The entity_tree path finds entities by the dense encoder alone: with the hashing one it may miss
the one or two targets an operation has for it, so there the control may leave it blind."""

_ISOLATED = {
    f"{read}{where}"
    for read in ("", "facts() ", "messages() ", "audit() ")
    for where in ("other dataset", "other task")
}
_QUERIED = {
    *(f"search {m}" for m in bench.MODES),
    *(f"path {p}" for p in bench.PATHS if p != "entity_tree"),
    *_ISOLATED,
    "context",
    "context (profile)",
    "facts()",
    "get()",
    "history",
    "profile()",
    "profile_history()",
    "langchain retriever",
    "llamaindex retriever",
    "llamaindex memory block",
}
_ERASED = {"search_messages", "messages()", "receipts()", "verify_erasure()"}
EXPECTED = {
    "forget": _QUERIED,
    "supersede": _QUERIED | {"langgraph store"},
    "purge": _QUERIED | _ERASED | {"files"},
    "reject": _QUERIED | {"review_queue()"},
    "delete": _QUERIED
    | _ERASED
    | {"langgraph store", "entities()", "participants()", "scopes()", "review_queue()", "audit()"},
}
"""Every surface each operation must be probed on."""
WHERE_THEY_APPLY = {"path entity_tree", "path replaced", "entities()", "trace()", "recalls()"}
"""Probed only for targets they can show: paths alone, the entities a purge erases, the recall
trace of a target a traced search found."""


@pytest.fixture(scope="module")
def one_conversation(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], str]:
    """One run with the control on one conversation: exit code, JSON report, printed report."""
    if not DATA.exists():
        pytest.skip(f"the LoCoMo dev split is not at {DATA}")
    folder = tmp_path_factory.mktemp("negative")
    out = folder / "negative.json"
    argv = ["--data", str(DATA), "--conversations", "1", "--targets", str(TARGETS), "--hashing"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = bench.main([*argv, "--control", "--path", str(folder / "store"), "--json", str(out)])
    return code, json.loads(out.read_text(encoding="utf-8")), printed.getvalue()


def test_one_conversation_leaks_nothing_and_the_probes_can_see(
    one_conversation: tuple[int, dict[str, Any], str],
) -> None:
    code, report, printed = one_conversation
    assert report["leaks"] == [] and report["operation_problems"] == []
    assert code == (1 if report["control"]["blind"] else 0)

    rows = {(r["operation"], r["surface"]): r for r in report["rows"]}
    required = {(op, s) for op, surfaces in EXPECTED.items() for s in surfaces}
    assert required <= set(rows)
    assert {s for _, s in set(rows) - required} <= WHERE_THEY_APPLY
    assert ("delete", "path entity_tree") in rows  # the deleted scope's targets name other entities
    for key, row in rows.items():
        assert set(row) == {"operation", "surface", "tried", "leaked"}
        assert row["tried"] > 0, key
        assert row["leaked"] == 0, key
    assert report["total"] == {"tried": sum(r["tried"] for r in rows.values()), "leaked": 0}
    # every reading operation of the table is probed, on the surfaces it serves
    reads = {r["read"]: r for r in report["reads"]}
    assert list(reads) == list(bench.READ_PROBES) == list(bench.READS)
    for read, row in reads.items():
        assert row["cells"] > 0 and row["tried"] > 0 and row["leaked"] == 0, read
        assert row["control_leaked"] > 0, read
    surfaces = {s for r in bench.READS.values() for s in r}
    assert {s for _, s in rows} - surfaces == {"files"}

    # a 0-leak result means something only if the same probes found the targets before
    for op in bench.OPERATIONS:
        figures = report["operations"][op]
        assert figures["targets"] == TARGETS, op
        assert figures["found_before"] / figures["targets"] >= 0.5, op
    for op in ("supersede", "delete"):
        figures = report["operations"][op]
        assert figures["store_items"] == TARGETS
        assert figures["store_items_found_before"] >= TARGETS - 1
    targets = report["targets"]
    assert len(targets) == TARGETS * len(bench.OPERATIONS)
    assert all(isinstance(t["found_before"], bool) and t["queries"] for t in targets)
    purged = [t for t in targets if t["operation"] == "purge"]
    assert all(t["named_facts"] >= 1 and t["named_messages"] >= 1 for t in purged)
    assert all(t["named_facts"] >= 1 for t in targets if t["operation"] == "delete")

    files = report["files"]
    assert files["scanned"] > 0 and files["purge_targets"] == TARGETS
    assert files["with_distinctive_text"] == rows[("purge", "files")]["tried"]
    assert files["control_tried"] > 0 and files["control_found"] == files["control_tried"]
    assert report["conversations"] == ["conv-26"]
    assert report["encoder"] == "hashing-64"
    assert set(report["timings_s"]) == {
        "build_s",
        "probes_before_s",
        "control_probes_s",
        "operations_s",
        "probes_s",
        "files_s",
    }

    assert "operation  surface" in printed
    assert any(
        line.split()[:3] == ["total", str(report["total"]["tried"]), "0"]
        for line in printed.splitlines()
    )
    assert "found before" in printed and "elapsed: build" in printed
    assert "by reading operation" in printed and "\nprofile_history " in printed


def test_the_control_sees_every_probed_cell(
    one_conversation: tuple[int, dict[str, Any], str],
) -> None:
    """With the operations skipped, the same probes see the targets on every surface."""
    code, report, printed = one_conversation
    control = report["control"]
    real = {(r["operation"], r["surface"]): r for r in report["rows"]}
    seen = {(r["operation"], r["surface"]): r for r in control["rows"]}
    assert set(real) <= set(seen)
    blind = {(b["operation"], b["surface"]) for b in control["blind"]}
    assert blind == {key for key in real if seen[key]["leaked"] == 0}
    for key in real:
        assert seen[key]["leaked"] >= 1 or key[1] in ENCODER_BOUND, key
    # the entity_tree path itself can see: the deleted scope's few entities are always found
    assert seen[("delete", "path entity_tree")]["leaked"] >= 1
    assert report["total"]["leaked"] == 0
    assert code == (1 if blind else 0)
    assert "control leaked" in printed
    assert f"{len(real) - len(blind)} of {len(real)} probed cells saw their targets" in printed
    assert all(f"BLIND {op} / {surface}" in printed for op, surface in blind)


def test_blind_cells_and_their_mark() -> None:
    real, control = bench.Tally(), bench.Tally()
    for surface in ("search fast", "path entity_tree", "facts()", "files"):
        real.record("purge", surface, False, target="f1")
    control.record("purge", "search fast", True, target="f1")
    control.record("purge", "path entity_tree", False, target="f1")  # probed, saw nothing
    control.record("purge", "facts()", True, target="f1")
    control.record("purge", "path event", True, target="f1")  # not probed by the real run
    assert bench.blind_cells(real, control) == [("purge", "path entity_tree"), ("purge", "files")]


def test_helpers() -> None:
    assert bench.without_times("Sara went hiking last week with Tom") == "Sara went hiking with Tom"
    words = bench.keywords("We've come so far! Caroline's drive to help is awesome.", ["Caroline"])
    assert words == "come drive help awesome"
    kept = "the support group met again\n"
    found = bench.needle("Caroline went to the support group yesterday", kept)
    assert found is not None and len(found) >= 12 and found.lower() not in kept
    assert found in "Caroline went to the support group yesterday"
    assert bench.needle("the support group met again", kept) is None
    fact = "[Caroline Smith] went to the local [support group] [yesterday::2023-05-07]."
    inside = bench.needle(fact, "", outside_brackets=True)
    assert inside is not None and inside in " went to the local " and "Smith" not in inside
    assert bench.cited_in("- said 2023-05-08: Sara went hiking. [D1:3; D2:4]") == {"D1:3", "D2:4"}
    line = "- said 2023-05-08: Sara went [hiking]. [msg D1:3; D2:4]"
    assert bench.cited_in(line) == {"D1:3", "D2:4"}


def test_scan_files_skips_holes_and_finds_text(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.bin"
    with sparse.open("wb") as f:
        f.seek(8 << 20)
        f.write(b"xx the secret zebra text xx")
        f.seek(16 << 20)
        f.write(b"end")
    (tmp_path / "plain.txt").write_bytes(b"The Secret Zebra Text, capitalised")
    found, files, _ = bench.scan_files(tmp_path, ["the secret zebra", "absent needle here"])
    assert files == 2
    assert found == {"the secret zebra": ["sparse.bin"], "absent needle here": []}
    found, _, _ = bench.scan_files(tmp_path, ["The Secret Zebra"])
    assert found == {"The Secret Zebra": ["plain.txt", "sparse.bin"]}  # lowercased too


def test_arguments(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "file").write_text("x")
    for bad in (["--targets", "0"], ["--conversations", "0"], ["--path", str(tmp_path / "old")]):
        with pytest.raises(SystemExit):
            bench.parse_args(["--data", "x.json", *bad])
    args = bench.parse_args(["--data", "x.json"])
    assert (args.targets, args.conversations, args.path) == (10, None, None)
    assert (args.hashing, args.control) == (False, False)


@pytest.mark.parametrize(
    "command",
    [["benchmarks/negative_recall.py"], ["-m", "benchmarks.negative_recall"]],
    ids=["script", "module"],
)
def test_runs_as_script_and_as_module(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, *command, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--targets" in done.stdout and "--hashing" in done.stdout
    assert "--control" in done.stdout
