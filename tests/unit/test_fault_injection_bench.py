"""The crash-recovery benchmark (``benchmarks.fault_injection``): a short run and its checks."""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import fault_injection as bench
from benchmarks.fault_injection_ops import (
    DAMAGES,
    INSIDE_TANTIVY,
    MAIN,
    OTHER,
    DiskProbe,
    KillSwitch,
    StoreState,
    Verdict,
    audited_changes,
    build_base,
    compare,
    copy_store,
    describe_point,
    disk_probes,
    generate_workload,
    kill_category,
    kill_points,
    make_plan,
    open_memory,
    own_facts,
    points_by_category,
    probe_for,
    recorded_warnings,
    run_operation,
    select_probes,
    served_inactive,
    snapshot,
    text_left,
    unaudited_changes,
)
from membrain import Memory, Scope
from membrain.backends.edge import EdgeBackend
from membrain.backends.lexical import LexicalIndex

TRIALS = 2
NOON = "2024-03-15T12:00:00Z"
KILLED = ("add", "forget", "supersede", "delete_scope")
"""The operations of the main run; the purge has its own (shorter) one."""


def test_killed_operations_recover_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "faults.json"
    ops = ",".join(["ingest", "forget", "supersede", "delete", bench.DAMAGE])  # the old names
    argv = ["--trials", str(TRIALS), "--seed", "0", "--ops", ops, "--json", str(out)]
    assert bench.main(argv, log=False) == 0
    report = json.loads(out.read_text(encoding="utf-8"))

    rows = {row["operation"]: row for row in report["rows"]}
    assert list(rows) == [*KILLED, *DAMAGES]
    assert rows["add"]["label"] == "ingest" and rows["delete_scope"]["label"] == "delete"
    assert all(rows[op]["trials"] == TRIALS for op in KILLED)
    for row in [*rows.values(), report["total"]]:
        assert row["resurrected_facts"] == 0, row
        assert row["lost_messages"] == 0, row
        assert row["duplicates"] == 0, row
        assert row["recovered_exactly"] == row["trials"], row
        assert row["unaudited_changes"] in (0, None), row
    assert rows["delete_scope"]["text_left_on_disk"] == 0
    assert rows["forget"]["text_left_on_disk"] is None  # not scanned: nothing is erased
    assert report["disk_probes"]["delete_scope"]["references_without_words"] == 0
    assert report["disk_probes"]["delete_scope"]["reference_leaks"] == []
    assert report["total"]["trials"] == len(KILLED) * TRIALS + len(DAMAGES)
    assert report["failures"] == []
    assert report["unsound_probes"] == []
    found, probed = report["probe_power"]
    assert found == probed > 0  # the probes find their fact while it is active
    assert report["damage_probes"]["found_by_boolean"] > 0

    printed = capsys.readouterr().out
    assert "recovered exactly" in printed and "resurrected facts" in printed
    assert "\ningest " in printed and "\ndelete " in printed  # shown by their labels
    assert "text left on disk" in printed and "unaudited changes" in printed
    total = next(line.split() for line in printed.splitlines() if line.startswith("total "))
    trials, exact, resurrected, lost, duplicates, left, unaudited = (int(x) for x in total[1:8])
    assert (resurrected, lost, duplicates, left, unaudited) == (0, 0, 0, 0, 0)
    assert exact == trials == report["total"]["trials"]


def test_a_killed_purge_recovers_and_leaves_no_text(tmp_path: Path) -> None:
    out = tmp_path / "purge.json"
    argv = ["--trials", "1", "--seed", "0", "--ops", "purge", "--json", str(out)]
    status = bench.main(argv, log=False)
    report = json.loads(out.read_text(encoding="utf-8"))
    (row,) = report["rows"]
    assert row["operation"] == "purge" and row["trials"] == 1
    probes = report["disk_probes"]["purge"]
    assert probes["words"][0] > 0 and probes["with_tantivy_term"][0] > 0
    assert probes["reference_leaks"] == []  # an uninterrupted purge leaves nothing
    assert report["unaudited_by_reference"] == []
    assert report["failures"] == [], report["failures"]
    assert row["text_left_on_disk"] == row["unaudited_changes"] == 0, row
    assert row["recovered_exactly"] == 1 and status == 0


def test_a_killed_import_is_completed_by_running_it_again(tmp_path: Path) -> None:
    out = tmp_path / "import.json"
    argv = ["--trials", str(TRIALS), "--seed", "0", "--ops", "import", "--json", str(out)]
    status = bench.main(argv, log=False)
    report = json.loads(out.read_text(encoding="utf-8"))
    (row,) = report["rows"]
    assert row["operation"] == "import" and row["trials"] == TRIALS
    assert report["failures"] == [], report["failures"]
    assert row["recovered_exactly"] == TRIALS and row["unaudited_changes"] == 0, row
    assert row["text_left_on_disk"] is None  # nothing is erased
    assert report["kill_points_per_reference"]["import"][0] > 10  # every step is a kill point
    assert report["unaudited_by_reference"] == [] and status == 0


NEW_OPS = ("update", "profile_put", "profile_forget", "delete_dataset")  # the table's order


def test_killed_updates_dataset_deletions_and_profile_changes_recover_exactly(
    tmp_path: Path,
) -> None:
    out = tmp_path / "more.json"
    argv = ["--trials", "1", "--seed", "0", "--ops", ",".join(NEW_OPS), "--json", str(out)]
    status = bench.main(argv, log=False)
    report = json.loads(out.read_text(encoding="utf-8"))
    rows = {row["operation"]: row for row in report["rows"]}
    assert list(rows) == list(NEW_OPS)
    assert all(rows[op]["trials"] == 1 for op in NEW_OPS)
    assert report["failures"] == [], report["failures"]
    for row in [*rows.values(), report["total"]]:
        assert row["recovered_exactly"] == row["trials"], row
        assert row["inconsistent_after_recovery"] == row["store_does_not_open"] == 0, row
        assert row["unaudited_changes"] == 0, row
    assert rows["delete_dataset"]["text_left_on_disk"] == 0
    assert report["disk_probes"]["delete_dataset"]["references_without_words"] == 0
    assert report["unsound_probes"] == [] and status == 0


PREPARED_OPS = ("retry_failed", "dispute", "resolve")
"""Rows whose trials start from failed messages or open disputes (written before the kill)."""


def test_killed_extractions_and_reviews_recover_exactly(tmp_path: Path) -> None:
    out = tmp_path / "reviews.json"
    argv = ["--trials", "1", "--seed", "0", "--ops", ",".join(PREPARED_OPS), "--json", str(out)]
    status = bench.main(argv, log=False)
    report = json.loads(out.read_text(encoding="utf-8"))
    rows = {row["operation"]: row for row in report["rows"]}
    assert list(rows) == list(PREPARED_OPS)
    assert report["failures"] == [], report["failures"]
    for row in [*rows.values(), report["total"]]:
        assert row["trials"] >= 1 and row["recovered_exactly"] == row["trials"], row
        assert row["unaudited_changes"] == row["store_does_not_open"] == 0, row
    assert all(report["kill_points_per_reference"][op][0] >= 3 for op in PREPARED_OPS)
    assert report["unaudited_by_reference"] == [] and report["unsound_probes"] == []
    assert status == 0


def test_trials_that_do_not_open_or_recover_are_counted_apart() -> None:
    unopened = bench.Trial("update", 0, "x", "none", Verdict(opened=False, lost_messages=3))
    different = bench.Trial("update", 1, "x", "none", Verdict(differences=["fact f: ..."]))
    exact = bench.Trial("update", 2, "x", "none")
    row = bench._row("update", [unopened, different, exact])
    assert (row["store_does_not_open"], row["inconsistent_after_recovery"]) == (1, 1)
    assert row["recovered_exactly"] == 1


def test_an_update_run_again_is_compared_by_its_order(memory: Memory) -> None:
    said = {"speaker": "Sara", "text": "I live in Lisbon.", "timestamp": NOON, "id": "m1"}
    memory.add([said], scope=MAIN)
    (old,) = [f.id for f in memory.facts(scope=MAIN)]
    first = snapshot(memory)
    new = memory.update(old, "Sara moved to Oslo [in May 2024::2024-05].", scope=MAIN)
    state = snapshot(memory)
    name = f"update#0-fact0:{old[:8]}"
    assert set(state.facts) - set(first.facts) == {name}
    assert state.facts[old][5] == (name,)  # superseded by it, by that name
    assert state.facts[name][3] == (f"update#0:{old[:8]}",)
    assert ("superseded", old) in state.audited
    assert new.id not in state.facts
    assert served_inactive(memory, [state.probe(MAIN, old)], state.active, listing=True) == set()


@pytest.fixture
def ram_path() -> Iterator[Path]:
    """A temporary folder where the benchmark builds its stores (``/dev/shm`` when there is one)."""
    with tempfile.TemporaryDirectory(dir=bench.default_tmp()) as folder:
        yield Path(folder)


def test_the_disk_scan_sees_a_purge_whose_erasure_is_skipped(
    ram_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = generate_workload()
    base = build_base(ram_path / "base", workload)
    active, own = sorted(base.state.active(MAIN)), own_facts(base.state, workload)
    plan = make_plan("purge", random.Random("control"), active, workload, own)

    # The purge runs, but neither the store's compaction nor the lexical index's erase does.
    monkeypatch.setattr(EdgeBackend, "_compact", lambda self, collection: None)
    monkeypatch.setattr(LexicalIndex, "erase", lambda self: None)
    store = ram_path / "store"
    copy_store(base.path, store)
    with recorded_warnings(), open_memory(store) as mem:
        run_operation(mem, "purge", plan)
        purged = snapshot(mem)
    disk = disk_probes(base.state, purged, base)
    term_probes = [p for p in disk if p.terms]
    assert term_probes  # some purged words are probed in tantivy's term dictionaries too
    lexical = store / "lexical"
    # tantivy keeps no word as text: only the term chains find the words it still holds.
    assert text_left(lexical, [DiskProbe(p.word) for p in term_probes]) == []
    assert text_left(lexical, term_probes)

    changes = audited_changes("purge", plan, base.state, purged)
    probes = select_probes("purge", plan, base.state, purged)
    ref = bench.Reference(purged, [], 0.0, probes, set(), changes, [], disk, [])
    trial = bench.Trial("purge", 0, "erasure skipped", "none")
    bench.check_recovery(store, "purge", plan, ref, trial, base.state)
    assert trial.verdict.text_left
    assert bench._row("purge", [trial])["text_left_on_disk"] == 1
    assert not trial.verdict.ok


def test_compare_counts_lost_duplicated_and_changed_records() -> None:
    def message(source: str) -> tuple[str, str, str]:
        return (MAIN.key, source, "processed")

    def fact(status: str) -> tuple[object, ...]:
        return (MAIN.key, status, "[Sara] adopted [Rex].", ("a",), (), (), "", "stated")

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

    # A record the operation erases and recovery kept is a difference, not a duplicate.
    verdict = Verdict()
    compare(reference, recovered, verdict, erased=frozenset({"c"}))
    assert (verdict.lost_messages, verdict.duplicates) == (1, 0)
    assert any(d.startswith("message c") for d in verdict.differences)


def test_changes_without_an_audit_event_are_counted() -> None:
    def state(
        facts: dict[str, str], audited: set[tuple[str, str]], **audit: set[str]
    ) -> StoreState:
        rows = {i: (MAIN.key, status, "t", (), (), (), "", "stated") for i, status in facts.items()}
        ids = {s.key: frozenset(audit.get(s.dataset, set())) for s in (MAIN, OTHER)}
        return StoreState({}, rows, {}, frozenset(audited), ids)

    before = state({"a": "active", "b": "active", "c": "active"}, set(), u1={"e1"}, u2={"e2"})
    after = state({"a": "forgotten", "b": "active"}, {("forgotten", "a")}, u2={"e2"})
    changes = audited_changes("purge", {}, before, after)
    assert changes == ["forgotten a", "purged c"]
    assert unaudited_changes(changes, before, after) == ["purged c"]

    deleted = audited_changes("delete_scope", {"scope": "u1"}, before, after)
    assert unaudited_changes(deleted, before, after) == []  # u2's audit is as it was
    touched = state({}, set(), u2={"e2", "e3"})
    assert unaudited_changes(deleted, before, touched) == [
        "scope deleted u1 (the audit of u2/bench changed)"
    ]


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
    # The fact's write, its audit event's (one or more: pending, then done), then the index's.
    assert "Qdrant set_payload facts" in switch.labels
    assert any(label.startswith("Qdrant ") and label.endswith(" audit") for label in switch.labels)
    assert switch.labels[-1] == "tantivy commit"
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


def test_points_before_a_tantivy_call_are_also_killed_inside_it() -> None:
    labels = ["Qdrant upsert audit", "tantivy commit", "Qdrant set_payload audit", "tantivy erase"]
    points = points_by_category(labels)
    assert points[INSIDE_TANTIVY] == [1, 3]
    assert points["after a Qdrant write, before the tantivy write"] == [1]
    assert describe_point("Qdrant upsert audit", "tantivy commit", 0.004) == (
        "4 ms into tantivy commit, after Qdrant upsert audit"
    )
