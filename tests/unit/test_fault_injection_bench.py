"""The crash-recovery benchmark (``benchmarks.fault_injection``): a short run and its checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import fault_injection as bench
from benchmarks.fault_injection_ops import (
    DAMAGES,
    MAIN,
    OPERATIONS,
    KillSwitch,
    StoreState,
    Verdict,
    compare,
    kill_category,
    kill_points,
    probe_for,
    served_inactive,
)
from membrain import Memory, Scope
from membrain.storage.edge import EdgeBackend
from membrain.storage.lexical import LexicalIndex

TRIALS = 2
NOON = "2024-03-15T12:00:00Z"


def test_killed_operations_recover_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "faults.json"
    argv = ["--trials", str(TRIALS), "--seed", "0", "--json", str(out)]
    assert bench.main(argv, log=False) == 0
    report = json.loads(out.read_text(encoding="utf-8"))

    rows = {row["operation"]: row for row in report["rows"]}
    assert list(rows) == [*OPERATIONS, *DAMAGES]
    assert all(rows[op]["trials"] == TRIALS for op in OPERATIONS)
    for row in [*rows.values(), report["total"]]:
        assert row["resurrected_facts"] == 0, row
        assert row["lost_messages"] == 0, row
        assert row["duplicates"] == 0, row
        assert row["recovered_exactly"] == row["trials"], row
    assert report["total"]["trials"] == len(OPERATIONS) * TRIALS + len(DAMAGES)
    assert report["failures"] == []
    assert report["unsound_probes"] == []
    found, probed = report["probe_power"]
    assert found == probed > 0  # the probes find their fact while it is active
    assert report["damage_probes"]["found_by_d"] > 0

    printed = capsys.readouterr().out
    assert "recovered exactly" in printed and "resurrected facts" in printed
    total = next(line.split() for line in printed.splitlines() if line.startswith("total "))
    trials, exact, resurrected, lost, duplicates = (int(x) for x in total[1:6])
    assert (resurrected, lost, duplicates) == (0, 0, 0)
    assert exact == trials == report["total"]["trials"]


def test_compare_counts_lost_duplicated_and_changed_records() -> None:
    def message(source: str) -> tuple[str, str, str]:
        return (MAIN.key, source, "processed")

    def fact(status: str) -> tuple[object, ...]:
        return (MAIN.key, status, "[Sara] adopted [Rex].", ("a",), (), (), "")

    reference = StoreState(
        messages={"a": message("m1"), "b": message("m2")},
        facts={"f": fact("forgotten")},
        entities={},
        audited=frozenset({("forgotten", "f")}),
    )
    recovered = StoreState(
        messages={"a": message("m1"), "c": message("m1")},  # m2 lost, m1 stored twice
        facts={"f": fact("active")},
        entities={},
        audited=frozenset(),
    )
    verdict = Verdict()
    compare(reference, recovered, verdict)
    assert (verdict.lost_messages, verdict.duplicates) == (1, 1)
    assert verdict.unaudited == ["forgotten"]
    assert any(d.startswith("fact f") for d in verdict.differences)
    assert not verdict.exact

    verdict = Verdict()
    compare(reference, reference, verdict)
    assert verdict.exact and verdict.unaudited == []


def test_kill_points_count_every_write_and_probes_see_served_facts(memory: Memory) -> None:
    said = [("Sara", "I adopted a beagle named Rex."), ("Tom", "I moved to Lisbon in May 2023.")]
    messages = [{"speaker": s, "text": t, "timestamp": NOON, "id": s} for s, t in said]
    memory.add(messages, scope=MAIN)
    facts = {f.text: f.id for f in memory.facts(scope=MAIN)}
    probes = {text.split()[0]: probe_for(MAIN, i, text) for text, i in facts.items()}
    assert probes["[Tom]"].question == "Tom moved to Lisbon."  # no time: no past beliefs
    probe = probes["[Sara]"]
    rex = probe.fact_id

    # An active fact is found by its probe: served while "not allowed" is what the check counts.
    assert rex in served_inactive(memory, [probe], lambda scope: set(), listing=False)

    upsert, commit = EdgeBackend._upsert, LexicalIndex._commit
    with kill_points(KillSwitch()) as switch:
        memory.forget([rex], scope=MAIN)
    assert switch.labels == ["Qdrant set_payload facts", "Qdrant upsert audit", "tantivy commit"]
    assert EdgeBackend._upsert is upsert and LexicalIndex._commit is commit  # hooks removed

    def others(scope: Scope) -> set[str]:
        return set(facts.values()) - {rex} if scope == MAIN else set()

    assert served_inactive(memory, [probe], others, listing=True) == set()


@pytest.mark.parametrize(
    ("after", "before", "category"),
    [
        (None, "Qdrant upsert messages", "before the first write"),
        ("Qdrant set_payload facts", "Qdrant upsert audit", "between two Qdrant writes"),
        ("Qdrant upsert audit", "tantivy commit", "after a Qdrant write, before the tantivy write"),
        ("compaction copy", "compaction swap facts", "during a compaction / erase"),
        ("tantivy commit", None, "after the last write"),
    ],
)
def test_kill_categories(after: str | None, before: str | None, category: str) -> None:
    assert kill_category(after, before) == category
