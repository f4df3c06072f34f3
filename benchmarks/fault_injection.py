"""Crash recovery of the embedded store: SIGKILL a process mid-operation, reopen, compare.

Usage (from the repository root)::

    python -m benchmarks.fault_injection [--trials 50] [--seed 0] [--data FILE] \
        [--messages 36] [--ops purge,delete] [--json OUT] [--tmp DIR] [--replay OP:N] \
        [--keep DIR]
    python benchmarks/fault_injection.py --trials 50

What it does, for each operation (``--ops`` picks some of them, ``damage`` the damaged-file
rows) and ``--trials`` seeded trials of each. The rows are named after the operations of
:data:`membrain.api.operations.OPERATIONS`: one per operation that changes the store (every role
but ``read``), then ``import``, which is no operation of a memory; ``add`` is shown as
``ingest`` and ``delete_scope`` as ``delete``, and ``--ops`` takes those names too.

1. A base store is built once: a two-speaker conversation (generated, or the first
   ``--messages`` of ``--data``'s first conversation) stored and extracted in two scopes, then
   searched in deep mode so the lexical index of the boolean path holds a reconciliation mark.
   Each scope also holds a few messages of its own (generated: 6 and 4 statements with long
   unusual words; with ``--data``: the 4 and 4 messages after those taken), so that what a purge
   or a deleted scope erases has words no other record holds.
2. The trial's parameters are drawn from ``random.Random(f"{seed}:{row}:{trial}")`` (the row as
   shown): ``add`` adds 3 or more new messages (and re-sends up to 2 stored ones) in
   extraction batches of 3; ``extract_pending`` extracts 3 or more new messages stored without
   extraction; ``retry_failed`` extracts again 2-6 new messages whose extraction failed (added
   with an extractor that fails on every message) and ``dismiss_failed`` gives up 1 or more of
   them; ``forget`` forgets 1-4 facts; ``supersede`` supersedes 1-3 disjoint pairs of facts;
   ``update`` updates one active fact to a new statement with a time and a reason; ``confirm``
   confirms 1-4 facts, 0-2 of them disputed (the confirmation closes their review items);
   ``dispute`` disputes 1-3 facts (one review item); ``resolve`` accepts or rejects each of 1-2
   open disputes of 1-2 facts (rejected facts are retracted); ``profile_put`` sets 1-3 profile
   entries citing 0-2 active facts; ``profile_forget`` removes 1-2 of the three entries the
   base holds in the main scope; ``purge`` runs ``purge(ids, messages=True)`` on 1-3 active
   facts drawn from those of the main scope's own messages (their source messages and every
   fact derived from them go too); ``apply_retention`` erases, messages being kept one day, the
   extracted messages said before a time that 2 or more of them (of one scope, or of both) and
   not all precede; ``delete_scope`` deletes one of the two scopes (the other must stay
   intact); ``delete_dataset`` deletes one of the two datasets (the other must stay intact);
   ``expire`` (row ``expiry-sweep``: a kill during the expiry sweep) marks ``expired`` 2-8
   facts given an expiry in the past first (on a copy of the base); ``extend_expiry`` moves the
   expiry of 2-8 facts given one in the future first;
   ``optimize`` builds the indexes; ``import`` exports one of the two scopes
   (``transfer.export_scope``) and imports the lines into a third, empty one (a copy: every id
   derived anew), run again after the kill to complete it; ``purge_receipt`` is a ``purge``
   whose erasure receipts are checked as well: before resuming, every receipt of the dataset
   verifies (``verify_erasure``) and names no fact still stored (never a receipt of an
   unfinished erasure); after it, exactly one names the purged facts (a problem makes the
   trial inconsistent). The pending or failed messages and the disputes a trial starts from
   are written first, on a copy of the base.
3. Reference: the same operation runs without a kill on a copy of the base, in this process.
   It also counts the operation's kill points: every Qdrant write (upsert, set_payload,
   delete), every compaction step (copy, swap), every tantivy commit or erase and every
   ``optimize`` of the Qdrant store.
4. A child process (this module, ``--child``) opens another copy and runs the operation. In
   three trials of four it SIGKILLs itself at a kill point drawn from the seed: first a kind
   of moment (before the first write, between two Qdrant writes, after a Qdrant write and
   before the tantivy one, after a tantivy write, during a compaction, after the operation
   returned with the store not closed, or 0-10 ms into a tantivy commit or erase, or into an
   optimize), then one point of that kind. Killed inside a tantivy call or an optimize, the
   child is ended by the kernel on a timer it set (SIGALRM's default action, which runs no
   handler, as SIGKILL; tantivy holds the interpreter while it commits). Otherwise this process
   SIGKILLs it after a random delay, which lands anywhere, also inside a write of Qdrant or
   tantivy. The second table counts the trials of each kind.
5. Once the child is dead, this process reopens the store and checks that no read serves a
   fact the store does not hold as active (searches in fast and expand mode and a deep-mode
   context block, for questions made of each probed fact's words); then resumes as an
   application would (the same call again; ``extract_pending`` after an add or an update; a
   purge run again that raises ``NotFoundError`` while none of its facts is left, an update
   that raises ``ConflictError`` while its fact is superseded, and a profile entry removed
   already count as done; a dispute whose review item is open, a review item closed and a
   message no longer failed are not disputed, resolved or dismissed again) and compares with
   the reference. An erasing trial (purge, apply_retention, delete_scope, delete_dataset) then
   closes the store and scans its files.

Per trial:

* resurrected facts: facts served by a search, a context block or ``facts()`` while not active
  (before resuming: in the store; after: in the reference). Probed: the forgotten, superseded,
  purged and rejected facts, up to 3 facts of a deleted scope, up to 3 facts an add or an
  extraction creates.
* lost messages: reference messages (scope, caller id) missing after recovery.
* duplicates: stored messages or facts (scope, text, sources) beyond the reference's count (a
  record the operation erases and recovery kept is a difference, not a duplicate).
* recovered exactly: the same message ids and statuses, fact ids, statuses, trust, texts,
  sources, supersession links and valid ends, entity ids, names, aliases and description
  versions, profile entry versions (text, cited facts, removed) and open review items (kind,
  facts) as the reference (after an import also its own creation events, each once, and the
  carried events of the export), no resurrection, and the boolean path's tantivy index agreeing
  with the store after a deep search (document counts, no inactive fact found); a deleted scope
  keeps no audit event. An update's message and fact are named by the time the update ran: they are
  compared by their order instead (see :func:`~benchmarks.fault_injection_ops.snapshot`).
* inconsistent after recovery: trials whose store opened but did not recover exactly.
* store does not open: trials whose reopen raised (every message then counts as lost).
* text left on disk (the erasing rows; ``-`` elsewhere): trials where a file of the closed,
  recovered store still holds a probe word. Probe words: the words (5 or more ASCII letters) of
  the erased messages and facts that no remaining record holds (messages, facts of any status,
  entity names, aliases and descriptions, of both scopes) and that the base store's files held
  (and a store without them does not: its field names, statuses, the extractor's reasons).
  Each is looked for as text (ASCII case ignored) in every file, and in tantivy's ``.term``
  files (which keep no word as text) as term chains (:func:`fst_chain`): 4-letter runs of its
  ``en_stem`` and ``default`` terms that no remaining text or term holds, kept when the base's
  term dictionaries held them. The clean run's files are scanned too: a word found there is a
  warning and fails the run.
* unaudited changes: changes of the reference missing from the recovered store's audit, one
  each: a fact created, forgotten, superseded, retracted, confirmed, disputed or purged, a
  message stored, extracted, dismissed or purged, a review item opened or resolved (one per
  fact), a profile version set or removed (by action and target id); an import needs its own
  event for each message stored and each fact and entity created (the carried events, the
  exported store's, do not count); a deleted scope's audit goes with it, so there the other
  scope's audit must be the base's, event for event.
* audit gaps (informational, listed below the tables): audit events of the reference (of the
  actions above, by target) missing after recovery.

Damaged-file rows: a base with forgotten and superseded facts is closed, then one file of its
lexical index is damaged (``meta.json`` truncated, a ``.term`` file deleted, a ``.store`` file
zeroed; or the whole folder deleted). The store must open, with a ``RuntimeWarning`` (except for
the deleted folder), deep search must find active facts through the boolean path again and nothing
forgotten or superseded may come back. ``max(1, trials // 10)`` trials per damage.

Stores live under ``--tmp`` (default ``/dev/shm`` when it exists): a SIGKILL loses only what
the process had not handed to the kernel yet, whatever the file system, so a RAM file system
reaches the same states and makes trials about 2.5 times faster; but its ``fsync`` costs
nothing, so the moments inside a tantivy commit between two of its files are shorter there and
kills land in them less often (``--tmp`` on a disk reaches them more often). A power loss (page
cache not on disk) is not simulated. ``--replay OP:N`` runs one trial again (the printed failures
give the command) and ``--keep DIR`` keeps its stores for inspection.

The exit status is 1 when any resurrected fact, lost message, duplicate, text left on disk
(also by a clean run), unaudited change, inconsistent trial or store that does not open is
counted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fault_injection_ops import (  # noqa: E402
    ALIASES,
    CATEGORIES,
    DAMAGES,
    ERASURES,
    KILL_LINE,
    LABELS,
    MAIN,
    OPERATIONS,
    OTHER,
    PREPARED,
    PROBES,
    RUNS,
    SCOPES,
    TIMED_AFTER,
    TIMED_MID,
    WITHIN_S,
    Base,
    DiskProbe,
    KillSwitch,
    Plan,
    Probe,
    StoreState,
    Verdict,
    Workload,
    audited_changes,
    build_base,
    compare,
    copy_store,
    damage,
    deleted_dataset,
    describe_point,
    disk_probes,
    found_by_boolean,
    generate_workload,
    inside_category,
    kill_category,
    kill_points,
    lexical_problems,
    load_workload,
    make_plan,
    open_memory,
    own_facts,
    plan_key,
    point_label,
    points_by_category,
    prepare,
    receipt_problems,
    recorded_warnings,
    resume_operation,
    run_child,
    run_operation,
    select_probes,
    served_inactive,
    snapshot,
    text_left,
    unaudited_changes,
)
from benchmarks.locomo_eval import format_table  # noqa: E402
from membrain import Memory  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT_S = 300.0
TIMED_SHARE = 0.25
"""Share of trials killed by this process after a random delay instead of at a kill point."""
MOVED = "kill point moved"
"""The child passed other writes than the reference run: its kill point is not the planned one."""


@dataclass(frozen=True, slots=True)
class Reference:
    """The clean run of one plan: final state, kill points passed, probes, and their control."""

    state: StoreState
    labels: list[str]
    seconds: float
    probes: list[Probe]
    control: set[str]
    """Facts the clean store serves while inactive: non-empty means the probes are unsound."""
    changes: list[str]
    """What the operation changed, as the audit events it needs (:func:`audited_changes`)."""
    unaudited: list[str]
    """Changes the clean run itself leaves without an audit event."""
    disk: list[DiskProbe]
    """Words an erasure removes (:func:`disk_probes`); empty for other operations."""
    leaks: list[str]
    """Of those, the words the clean run's files still hold once it is closed."""
    before: StoreState | None = None
    """The store the operation starts from: the base's, or the prepared one's (:data:`PREPARED`)."""


References = dict[str, Reference]
"""Reference runs by :func:`plan_key`: trials with the same plan share one."""


@dataclass(slots=True)
class Trial:
    row: str
    index: int
    kill: str
    category: str
    verdict: Verdict = field(default_factory=Verdict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


def make_reference(base: Base, op: str, plan: Plan, folder: Path, start: Path) -> Reference:
    """The clean run of ``plan`` on a copy of ``start``: the base, or a copy of it prepared for
    the operation (:func:`prepared_start`)."""
    before = base.state
    if start != base.path:
        with recorded_warnings(), open_memory(start) as mem:
            before = snapshot(mem)
    path = folder / "reference"
    copy_store(start, path)
    with recorded_warnings(), open_memory(path) as mem:
        with kill_points(KillSwitch()) as switch:
            started = time.perf_counter()
            run_operation(mem, op, plan)
            seconds = time.perf_counter() - started
        state = snapshot(mem)
        probes = select_probes(op, plan, before, state)
        control = served_inactive(mem, probes, state.active, listing=True)
    changes = audited_changes(op, plan, before, state)
    unaudited = unaudited_changes(changes, before, state)
    disk = disk_probes(before, state, base) if op in ERASURES else []
    leaks = text_left(path, disk)
    shutil.rmtree(path)
    return Reference(
        state,
        switch.labels,
        seconds,
        probes,
        control,
        changes,
        unaudited,
        disk,
        leaks,
        before,
    )


def prepared_start(base: Base, op: str, plan: Plan, folder: Path) -> Path:
    """The closed store a trial of ``op`` starts from: the base, or a copy of it in ``folder``
    where the pending or failed messages and the disputes of ``plan`` are written
    (:data:`PREPARED`). Trials of one plan each prepare their own: the same records (review
    items aside, whose ids differ and are compared by their facts)."""
    if op not in PREPARED:
        return base.path
    start = folder / "start"
    copy_store(base.path, start)
    prepare(start, op, plan)
    return start


def kill_child(spec: dict[str, Any], folder: Path, delay: float | None) -> tuple[str, str, str]:
    """Run the child until it dies; (where, kill category, problem or "")."""
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    command = [sys.executable, "-m", "benchmarks.fault_injection", "--child", str(spec_path)]
    paths = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    err_path = folder / "child.err"
    hung = threading.Event()
    with (
        err_path.open("wb") as err,
        subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        ) as proc,
    ):

        def stop() -> None:
            hung.set()
            proc.kill()

        watchdog = threading.Timer(CHILD_TIMEOUT_S, stop)
        watchdog.start()
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if delay is not None and first.strip() == "ready":
            time.sleep(delay)
            proc.kill()
        rest, _ = proc.communicate()
        watchdog.cancel()
    lines = (first + rest).splitlines()
    problem = f"the child hung for {CHILD_TIMEOUT_S:.0f} s" if hung.is_set() else ""
    # Killed by SIGALRM when armed to die inside a call (see ``KillSwitch``): as by SIGKILL.
    armed = spec.get("within") is not None
    killed = (-signal.SIGKILL, -signal.SIGALRM) if armed else (-signal.SIGKILL,)
    if proc.returncode not in killed:
        tail = err_path.read_text(encoding="utf-8", errors="replace").strip()[-400:]
        problem = f"the child exited with status {proc.returncode}, not killed: {tail}"
    if delay is not None:
        category = TIMED_AFTER if "done" in lines else TIMED_MID
        return f"SIGKILL after {delay * 1000:.0f} ms", category, problem
    for line in lines:
        if line.startswith(KILL_LINE + " "):
            point = json.loads(line[len(KILL_LINE) + 1 :])
            after, before, within = point["after"], point["before"], point.get("within")
            inside = inside_category(before) if within is not None else None
            category = inside or kill_category(after, before)
            return describe_point(after, before, within), category, problem
    return "no kill point reached", "none", problem or "the child never reached its kill point"


def check_recovery(
    path: Path, op: str, plan: Plan, ref: Reference, trial: Trial, base: StoreState
) -> None:
    """Reopen, probe, resume, probe and compare with the reference (into ``trial.verdict``).

    Then, the store closed, scan its files for the words an erasure removes. ``op`` is the
    operation the trial's row runs; a ``purge_receipt`` row also checks the erasure receipts
    before and after resuming (:func:`receipt_problems`).
    """
    verdict = trial.verdict
    receipts = trial.row == "purge_receipt"
    with recorded_warnings() as caught:
        try:
            mem = open_memory(path)
        except Exception as exc:
            verdict.differences.append(f"the store does not open: {exc!r}")
            verdict.lost_messages += len(ref.state.messages)
            verdict.opened = False
            mem = None
        if mem is not None:
            try:
                if receipts:
                    verdict.differences += receipt_problems(mem, plan, finished=False)
                _check_open(mem, op, plan, ref, verdict, base)
                if receipts:
                    verdict.differences += receipt_problems(mem, plan, finished=True)
            except Exception as exc:
                verdict.differences.append(f"checking failed: {exc!r}")
            finally:
                mem.close()
    trial.warnings += [f"{w.category.__name__}: {w.message}" for w in caught]
    if op in ERASURES:
        verdict.text_left = text_left(path, ref.disk)


def _check_open(
    mem: Memory, op: str, plan: Plan, ref: Reference, verdict: Verdict, base: StoreState
) -> None:
    stored = snapshot(mem)
    verdict.resurrected |= served_inactive(mem, ref.probes, stored.active, listing=False)
    try:
        note = resume_operation(mem, op, plan)
        verdict.notes += [note] if note else []
    except Exception as exc:
        verdict.differences.append(f"resuming failed: {exc!r}")
    recovered = snapshot(mem)
    erased = frozenset(base.messages.keys() - ref.state.messages.keys())
    erased |= base.facts.keys() - ref.state.facts.keys()
    compare(ref.state, recovered, verdict, erased)
    verdict.unaudited_changes += unaudited_changes(ref.changes, base, recovered)
    dataset = deleted_dataset(op, plan)
    if dataset is not None and recovered.audit_ids.get(_scope_key(dataset)):
        verdict.differences.append(f"the audit of the deleted scope {dataset} is left")
    verdict.resurrected |= served_inactive(mem, ref.probes, ref.state.active, listing=True)
    verdict.differences += lexical_problems(mem, ref.probes, ref.state)


def _scope_key(dataset: str) -> str:
    return next(s.key for s in SCOPES if s.dataset == dataset)


def run_kill_trial(
    base: Base, workload: Workload, op: str, index: int, seed: int, folder: Path, refs: References
) -> Trial:
    # Seeded by the row's label: the rows renamed after the operations draw what they drew.
    rng = random.Random(f"{seed}:{LABELS.get(op, op)}:{index}")
    row, op = op, RUNS.get(op, op)
    own = own_facts(base.state, workload)
    plan = make_plan(op, rng, sorted(base.state.active(MAIN)), workload, own)
    key = plan_key(op, plan)
    start = prepared_start(base, op, plan, folder)
    if key not in refs:
        refs[key] = make_reference(base, op, plan, folder, start)
    ref = refs[key]
    delay, kill_at, within = None, None, None
    if rng.random() < TIMED_SHARE:
        delay = rng.uniform(0.0, 1.2 * ref.seconds)
    else:  # a kind of moment first, so that rare ones (before a tantivy write) get trials too
        points = points_by_category(ref.labels)
        weights = [0.5 if len(p) == 1 else 1.0 for p in points.values()]
        kind = rng.choices(list(points), weights)[0]
        kill_at = rng.choice(points[kind])
        inside = kind == inside_category(point_label(ref.labels, kill_at)[1])
        within = rng.uniform(0.0, WITHIN_S) if inside else None
    store = folder / "store"
    copy_store(start, store)
    spec = {"store": str(store), "op": op, "plan": plan, "kill_at": kill_at, "within": within}
    where, category, problem = kill_child(spec, folder, delay)
    trial = Trial(row, index, where, category)
    if problem:
        trial.verdict.differences.append(problem)
    planned = where
    if kill_at is not None:
        planned = describe_point(*point_label(ref.labels, kill_at), within)
    if where != planned:
        trial.warnings.append(f"{MOVED}: planned {planned}")
    check_recovery(store, op, plan, ref, trial, ref.before or base.state)
    return trial


# -- damaged files ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DamageBase:
    """The base with forgotten and superseded facts, and the probes of a damage trial."""

    base: Base
    forbidden: list[Probe]
    findable: list[Probe]
    """Active facts deep search finds through the boolean path on the undamaged store."""


def build_damage_base(base: Base, folder: Path, seed: int) -> DamageBase:
    path = folder / "damage-base"
    copy_store(base.path, path)
    a, b, c, d = random.Random(f"{seed}:damage").sample(sorted(base.state.active(MAIN)), 4)
    with recorded_warnings(), open_memory(path) as mem:
        mem.forget([a, b], scope=MAIN)
        mem.supersede(c, [d], scope=MAIN)
        state = snapshot(mem)
        forbidden = [state.probe(MAIN, i) for i in (a, b, c)]
        candidates = [state.probe(MAIN, i) for i in sorted(state.active(MAIN))]
        findable = [p for p in candidates if found_by_boolean(mem, p)][: 2 * PROBES]
    return DamageBase(Base(path, state), forbidden, findable)


def run_damage_trial(dbase: DamageBase, kind: str, index: int, seed: int, folder: Path) -> Trial:
    """Damage a copy, reopen it: no resurrection, the boolean path finds again, same records."""
    trial = Trial(kind, index, kind, kind)
    verdict, ref = trial.verdict, dbase.base.state
    store = folder / "store"
    copy_store(dbase.base.path, store)
    damage(store / "lexical", kind, random.Random(f"{seed}:{kind}:{index}"))
    with recorded_warnings() as caught:
        try:
            mem = open_memory(store)
        except Exception as exc:
            verdict.differences.append(f"the store does not open: {exc!r}")
            verdict.opened = False
            return trial
        try:
            verdict.resurrected |= served_inactive(mem, dbase.forbidden, ref.active, listing=True)
            for probe in dbase.findable:
                if not found_by_boolean(mem, probe):
                    verdict.differences.append(f"the boolean path does not find {probe.question!r}")
            compare(ref, snapshot(mem), verdict)
            verdict.differences += lexical_problems(mem, dbase.forbidden, ref)
        except Exception as exc:
            verdict.differences.append(f"checking failed: {exc!r}")
        finally:
            mem.close()
    trial.warnings += [f"{w.category.__name__}: {w.message}" for w in caught]
    warned = any(issubclass(w.category, RuntimeWarning) for w in caught)
    if warned != (kind != "missing lexical folder"):
        verdict.differences.append(f"RuntimeWarning {'raised' if warned else 'missing'}")
    return trial


# -- the run ----------------------------------------------------------------------------------
def default_tmp() -> Path | None:
    """``/dev/shm`` when it is a writable folder (a RAM file system), else the system's default."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


@contextmanager
def workspace(keep: Path | None, tmp: Path | None) -> Iterator[Path]:
    """A temporary folder under ``tmp`` for the stores, or ``keep`` (then nothing is deleted)."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="fault-injection-", dir=tmp) as folder:
        yield Path(folder)


DAMAGE = "damage"
"""The name ``--ops`` gives the damaged-file rows."""


def run(
    *,
    trials: int,
    seed: int = 0,
    data: Path | None = None,
    messages: int = 36,
    replay: tuple[str, int] | None = None,
    keep: Path | None = None,
    tmp: Path | None = None,
    ops: Sequence[str] = (*OPERATIONS, DAMAGE),
    log: bool = True,
) -> dict[str, Any]:
    """Every trial of ``ops`` (operations, and ``"damage"`` for the damaged files); the report
    as a JSON-able dict."""

    def say(text: str) -> None:
        if log:
            print(text, file=sys.stderr, flush=True)

    started = time.perf_counter()
    workload = load_workload(data, messages) if data else generate_workload()
    results: list[Trial] = []
    refs: References = {}
    kills = [(op, i) for op in OPERATIONS if op in ops for i in range(trials)]
    damages = [(kind, i) for kind in DAMAGES for i in range(max(1, trials // 10))]
    damages = damages if DAMAGE in ops else []
    if replay is not None:
        kills, damages = ([replay], []) if replay[0] in OPERATIONS else ([], [replay])
    with workspace(keep, tmp) as work:
        stored = len(workload.stored(MAIN)) + len(workload.stored(OTHER))
        say(f"building the base store ({stored} messages in {len(SCOPES)} scopes) ...")
        erasing = any(RUNS.get(op, op) in ERASURES for op, _ in kills)
        base = build_base(work / "base", workload, disk=erasing)
        for op, index in kills:
            folder = work / f"{op}-{index}"
            folder.mkdir()
            begun = time.perf_counter()
            trial = run_kill_trial(base, workload, op, index, seed, folder, refs)
            trial.seconds = time.perf_counter() - begun
            verdict = "ok" if trial.verdict.ok else "FAILED"
            say(f"  {LABELS.get(op, op)} #{index}: {trial.kill} -> {verdict}")
            results.append(trial)
            if keep is None:
                shutil.rmtree(folder)
        dbase = build_damage_base(base, work, seed) if damages else None
        for kind, index in damages:
            assert dbase is not None
            folder = work / f"damage-{DAMAGES.index(kind)}-{index}"
            folder.mkdir()
            begun = time.perf_counter()
            trial = run_damage_trial(dbase, kind, index, seed, folder)
            trial.seconds = time.perf_counter() - begun
            say(f"  {kind} #{index}: {'ok' if trial.verdict.ok else 'FAILED'}")
            results.append(trial)
            if keep is None:
                shutil.rmtree(folder)
    rep = report(results, refs, trials, seed, data, time.perf_counter() - started)
    rep["replay"] = f"replay of {replay[0]}:{replay[1]}" if replay else None
    rep["probe_power"] = base.probe_power
    rep["damage_probes"] = {"forbidden": 3, "found_by_boolean": len(dbase.findable) if dbase else 0}
    return rep


def _row(name: str, group: Sequence[Trial]) -> dict[str, Any]:
    scanned = [t.verdict.text_left for t in group if t.verdict.text_left is not None]
    changed = [t for t in group if t.row in OPERATIONS]
    return {
        "operation": name,
        "label": LABELS.get(name, name),
        "trials": len(group),
        "recovered_exactly": sum(t.verdict.exact for t in group),
        "resurrected_facts": sum(len(t.verdict.resurrected) for t in group),
        "lost_messages": sum(t.verdict.lost_messages for t in group),
        "duplicates": sum(t.verdict.duplicates for t in group),
        "text_left_on_disk": sum(bool(words) for words in scanned) if scanned else None,
        "unaudited_changes": (
            sum(len(t.verdict.unaudited_changes) for t in changed) if changed else None
        ),
        "audit_gaps": sum(len(t.verdict.unaudited) for t in group),
        "inconsistent_after_recovery": sum(t.verdict.opened and not t.verdict.exact for t in group),
        "store_does_not_open": sum(not t.verdict.opened for t in group),
        "seconds": sum(t.seconds for t in group),
    }


def _disk_probes(results: Sequence[Trial], refs: References) -> dict[str, Any]:
    """Per erasing operation: probe words per reference run (min, max), those also probed as
    tantivy terms, runs without a word, and the words a clean run left on disk."""
    summary: dict[str, Any] = {}
    for op in ERASURES:
        runs = [r for k, r in refs.items() if k.startswith(op + "{")]
        if not runs:
            continue
        words = [len(r.disk) for r in runs]
        terms = [sum(bool(p.terms) for p in r.disk) for r in runs]
        summary[op] = {
            "words": [min(words), max(words)],
            "with_tantivy_term": [min(terms), max(terms)],
            "references_without_words": words.count(0),
            "scanned_trials": sum(t.verdict.text_left is not None for t in results if t.row == op),
            "reference_leaks": sorted({w for r in runs for w in r.leaks}),
        }
    return summary


def report(
    results: Sequence[Trial],
    refs: References,
    trials: int,
    seed: int,
    data: Path | None,
    wall_s: float,
) -> dict[str, Any]:
    names = [*OPERATIONS, *DAMAGES]
    rows = [_row(n, [t for t in results if t.row == n]) for n in names]
    ops = [op for op in OPERATIONS if any(t.row == op for t in results)]
    coverage = {
        c: {op: sum(t.category == c for t in results if t.row == op) for op in ops}
        for c in CATEGORIES
    }
    exact_by_category = {
        c: sum(t.verdict.exact for t in results if t.category == c) for c in CATEGORIES
    }
    failures = [
        {
            "operation": t.row,
            "trial": t.index,
            "kill": t.kill,
            "resurrected": sorted(t.verdict.resurrected),
            "lost_messages": t.verdict.lost_messages,
            "duplicates": t.verdict.duplicates,
            "text_left_on_disk": t.verdict.text_left or [],
            "unaudited_changes": t.verdict.unaudited_changes,
            "differences": t.verdict.differences[:8],
            "notes": t.verdict.notes,
            "warnings": t.warnings[:4],
            "replay": f"python -m benchmarks.fault_injection --seed {seed} --replay "
            f"'{t.row}:{t.index}'" + (f" --data {data}" if data else ""),
        }
        for t in results
        if not t.verdict.ok
    ]
    gaps = [
        {"operation": t.row, "trial": t.index, "kill": t.kill, "missing": t.verdict.unaudited}
        for t in results
        if t.verdict.unaudited
    ]
    return {
        "rows": [r for r in rows if r["trials"]],
        "total": _row("total", results),
        "operations": ops,
        "coverage": coverage,
        "recovered_exactly_by_kill": exact_by_category,
        "failures": failures,
        "audit_gaps": gaps,
        "unsound_probes": sorted({i for r in refs.values() for i in r.control}),
        "unaudited_by_reference": sorted({c for r in refs.values() for c in r.unaudited}),
        "disk_probes": _disk_probes(results, refs),
        "kill_points_per_reference": {
            op: sorted({len(r.labels) for k, r in refs.items() if k.startswith(op + "{")})
            for op in ops
        },
        "kill_points_moved": sum(any(w.startswith(MOVED) for w in t.warnings) for t in results),
        "resume_notes": dict(Counter(n for t in results for n in t.verdict.notes)),
        "warnings": sorted({w[:200] for t in results for w in t.warnings}),
        "trials_per_operation": trials,
        "seed": seed,
        "data": str(data) if data else "generated",
        "wall_s": wall_s,
    }


COLUMNS = (
    ("trials", "trials"),
    ("recovered_exactly", "recovered exactly"),
    ("resurrected_facts", "resurrected facts"),
    ("lost_messages", "lost messages"),
    ("duplicates", "duplicates"),
    ("text_left_on_disk", "text left on disk"),
    ("unaudited_changes", "unaudited changes"),
    ("inconsistent_after_recovery", "inconsistent after recovery"),
    ("store_does_not_open", "store does not open"),
)


_UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f-]{27}\b")


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def format_report(rep: dict[str, Any]) -> str:
    header = ["operation", *(title for _, title in COLUMNS)]
    table = [[r["label"], *(_cell(r[k]) for k, _ in COLUMNS)] for r in rep["rows"]]
    table.append(["total", *(_cell(rep["total"][k]) for k, _ in COLUMNS)])
    ops = rep["operations"]
    cover_rows = [
        [c, *(n[op] for op in ops), rep["recovered_exactly_by_kill"][c]]
        for c, n in rep["coverage"].items()
        if any(n.values())
    ]
    runs = f"{rep['trials_per_operation']} SIGKILL trials per operation"
    lines = [
        f"Crash recovery: {rep['replay'] or runs}, seed {rep['seed']}, data {rep['data']}",
        format_table(header, table),
    ]
    if ops:
        lines += ["", "kill points"]
        lines.append(
            format_table(
                ["kill point", *(LABELS.get(op, op) for op in ops), "recovered exactly"],
                [[str(x) for x in row] for row in cover_rows],
            )
        )
    if rep["kill_points_moved"]:
        lines.append(f"{rep['kill_points_moved']} trials died elsewhere than planned ({MOVED})")
    if rep["unsound_probes"]:
        lines.append(f"WARNING: the clean reference serves inactive {rep['unsound_probes']}")
    if rep["unaudited_by_reference"]:
        lines.append(
            f"WARNING: the clean reference leaves {rep['unaudited_by_reference']} unaudited"
        )
    for failure in rep["failures"]:
        name = LABELS.get(failure["operation"], failure["operation"])
        lines += ["", f"FAILED {name} #{failure['trial']}: {failure['kill']}"]
        lines += [f"  {d}" for d in failure["differences"]]
        if failure["resurrected"]:
            lines.append(f"  resurrected: {failure['resurrected']}")
        if failure["text_left_on_disk"]:
            lines.append(f"  text left on disk: {', '.join(failure['text_left_on_disk'])}")
        if failure["unaudited_changes"]:
            shown = [_UUID.sub(r"\1", c) for c in failure["unaudited_changes"][:6]]
            lines.append(f"  unaudited: {', '.join(shown)}")
        lines += [f"  ({n})" for n in failure["notes"]]
        lines.append(f"  replay: {failure['replay']}")
    if rep["audit_gaps"]:
        lines += ["", "audit events missing after recovery (informational; counted above only"]
        lines += ["when they record a change the reference made)"]
    for op in OPERATIONS:
        gaps = [g for g in rep["audit_gaps"] if g["operation"] == op]
        missing = Counter(a for g in gaps for a in g["missing"])
        if gaps:
            what = ", ".join(f"{n} {action}" for action, n in sorted(missing.items()))
            name = LABELS.get(op, op)
            lines.append(f"  {name}: {len(gaps)} trials, missing {what}; e.g. {gaps[0]['kill']}")
    found, probed = rep["probe_power"]
    lines += ["", f"probes find their fact while active: {found}/{probed} (fast, expand, deep)"]
    for op, probes in rep["disk_probes"].items():
        words, terms = probes["words"], probes["with_tantivy_term"]
        lines.append(
            f"disk probes of {LABELS.get(op, op)}: {words[0]}-{words[1]} words per trial, "
            f"{terms[0]}-{terms[1]} "
            f"of them also as tantivy terms; {probes['references_without_words']} without a word"
        )
        if probes["reference_leaks"]:
            lines.append(f"  WARNING: the clean run leaves {probes['reference_leaks']} on disk")
    for note, n in rep["resume_notes"].items():
        lines.append(f"resumed: {note} ({n} trials)")
    lines += [f"wall time {rep['wall_s']:.0f} s"]
    return "\n".join(lines)


def failed(rep: dict[str, Any]) -> bool:
    """Any resurrected fact, lost message, duplicate, text left on disk, unaudited change,
    inconsistent trial or store that does not open."""
    total = rep["total"]
    counted = (
        "resurrected_facts",
        "lost_messages",
        "duplicates",
        "text_left_on_disk",
        "unaudited_changes",
        "inconsistent_after_recovery",
        "store_does_not_open",
    )
    leaks = any(p["reference_leaks"] for p in rep["disk_probes"].values())
    return leaks or any(total[k] for k in counted)


def _replay(text: str) -> tuple[str, int]:
    name, _, index = text.rpartition(":")
    name = ALIASES.get(name, name)
    if name not in (*OPERATIONS, *DAMAGES) or not index.isdigit():
        raise argparse.ArgumentTypeError(f"expected OPERATION:N, got {text!r}")
    return name, int(index)


def _ops(text: str) -> tuple[str, ...]:
    names = tuple(ALIASES.get(n.strip(), n.strip()) for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in (*OPERATIONS, DAMAGE)]
    if unknown or not names:
        known = ", ".join((*OPERATIONS, DAMAGE))
        raise argparse.ArgumentTypeError(f"unknown operations {unknown}; known: {known}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fault_injection",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--trials", type=int, default=50, help="kill trials per operation")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    parser.add_argument("--data", type=Path, default=None, help="conversation file (LoCoMo...)")
    parser.add_argument("--messages", type=int, default=36, help="messages taken from --data")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument(
        "--ops",
        type=_ops,
        default=(*OPERATIONS, DAMAGE),
        help=f"comma-separated, of {','.join((*OPERATIONS, DAMAGE))} (default: all; "
        + ", ".join(f"{label} is {name}" for label, name in ALIASES.items())
        + ")",
    )
    parser.add_argument("--replay", type=_replay, default=None, help="run only OPERATION:N")
    parser.add_argument("--keep", type=Path, default=None, help="keep the stores under DIR")
    parser.add_argument(
        "--tmp", type=Path, default=default_tmp(), help="where stores are built (/dev/shm)"
    )
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.trials < 1 or args.messages < 6:
        parser.error("--trials must be positive and --messages at least 6")
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep} is not empty")
    return args


def main(argv: Sequence[str] | None = None, *, log: bool = True) -> int:
    args = parse_args(argv)
    if args.child is not None:
        run_child(json.loads(args.child.read_text(encoding="utf-8")))
        return 0
    rep = run(
        trials=args.trials,
        seed=args.seed,
        data=args.data,
        messages=args.messages,
        replay=args.replay,
        keep=args.keep,
        tmp=args.tmp,
        ops=args.ops,
        log=log,
    )
    print(format_report(rep))
    if args.json is not None:
        args.json.write_text(json.dumps(rep, indent=2) + "\n", encoding="utf-8")
    return 1 if failed(rep) else 0


if __name__ == "__main__":
    raise SystemExit(main())
