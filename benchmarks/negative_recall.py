"""Negative recall: what was forgotten, superseded, purged, rejected or deleted never comes back.

Usage (from the repository root)::

    python benchmarks/negative_recall.py --data ../shared/data/locomo/locomo10_dev.json \
        [--conversations N] [--targets 10] [--path DIR] [--json OUT] [--hashing] [--control]

(``python -m benchmarks.negative_recall ...`` runs the same.) Exit code 1 when anything leaked,
when an operation did not have its effect (then nothing was tested), or, with ``--control``, when
a probed cell is blind (see Control).

Build. Each LoCoMo conversation is added to its own scope, ``Scope(dataset="neg-<name>",
task="bench")``, of one store (a fresh temporary folder unless ``--path`` is given; default
encoders, or :class:`membrain.testing.HashingEncoder` with ``--hashing``, for smoke tests), with
the default offline extractor. Per conversation, named target facts are chosen deterministically:
active, undisputed facts of at least five words (times left out) whose plain text is unique in
the scope and no part of another fact's, taken in fact-id order (ids are hashes: spread over the
conversation) while their source messages stay disjoint from every other target's, and dealt in
turn to the operations, ``--targets`` each:

* ``forget``: ``Memory.forget``.
* ``supersede``: a replacement message ("Correction: that is no longer true ...") is added and
  ``Memory.supersede(old, <its facts>)`` is called.
* ``purge``: ``Memory.purge(ids, messages=True)``: the facts, their source messages and every
  fact derived from those messages are named (and must match what the purge reports erased).
* ``reject``: ``Memory.dispute`` then ``Memory.resolve(..., accept=False)``: retracted.
* ``delete``: the targets' source messages are copied into an extra scope (task
  ``bench-deleted``), one fact extracted from each copy is a target, and the whole scope is
  deleted (``Memory.delete_scope``): every fact and message of that scope is named.

Two more groups of ``--targets`` messages, chosen the same way, go to the LangGraph
``MembrainStore`` (namespace ``("neg-<name>", "bench-store")``, its own scope, facts extracted by
a ``BackgroundWriter``): each is put as an item's text, then the item is overwritten (counted
under ``supersede``) or deleted (under ``delete``); the store forgets the facts of the previous
values. Every target message of the five operations is also copied, words in reverse order
(same words, other bytes), into two isolation scopes: another dataset (``neg-<name>-iso``) and
another task of the same dataset (``bench-iso``). Before the operations (after "found before")
each target gets a profile entry citing it (topic ``bench``, its text without times), and each
``reject`` and ``delete`` target is disputed (the ``reject`` operation then rejects that
dispute; the deleted scope's review queue holds the others).

Probes. Each target is probed with queries made from its own text: its plain text and a keyword
variant (its longest content words, participants' names left out). A ``supersede`` target's
queries have their time expressions removed, since a question naming a past time may rightly
get the superseded fact back; ``as_of`` reads, which may show the past, are not probed. Before
the operations the same queries run as a default search (``Memory.search``, mode ``expand``,
k=10): "found before" is the share of targets one of them ranks, a first sign that a 0-leak
result means something (the control, below, checks it on every surface). After the operations,
a leak is a named fact id (or, for ``purge`` and ``delete``, a named message or its text) in
what a surface returns. Every reading operation of :data:`membrain.api.operations.OPERATIONS` has a
probe, by its name (``READ_PROBES``), and its surfaces (``READS``); the report sums them per
reading operation too:

* ``search <mode>``: ``Memory.search`` in every mode, k=50;
* ``path <name>``: ``Memory.search(mode="deep")`` with ``exclude_paths`` leaving that path alone
  (``bm25``, ``dense``, ``hyde``, ``event``, ``boolean``; the time boosts and the answer
  follow-up are excluded too), counted only when the path ran. ``entity_tree`` only for targets
  whose named facts name an entity other than a participant, and ``replaced`` only in the main
  scopes for targets whose named facts replaced others (none, on LoCoMo): those paths return no
  other fact, so elsewhere their 0 would prove nothing. (``replaced`` still runs as a boost in
  the mode searches once supersessions exist.);
* ``context``: ``Memory.context`` (fact ids of its hits; for purge the purged text in its text);
  ``context (profile)``: with a profile block (``profile_ratio`` 0.5 of 16,000 tokens, so that
  it holds every entry; the first query), which
  must not hold the target's profile entry once the target is out of the reads;
* ``search_messages``: only for ``purge`` and ``delete`` (the other operations keep messages by
  design);
* ``facts()``, ``messages()`` (purge and delete: the other operations keep messages),
  ``history``, ``entities()``: listings; ``facts()`` includes inactive facts for purge and
  delete; ``history`` must show a forgotten, superseded or rejected fact with that status, a
  purged one without its record or text (its events stay, ids only), a deleted one not at all;
  ``entities()`` for a deleted scope (none left), and for purge targets with a needle (see
  ``files``) from entity text, the only text it can show;
* ``get()``: ``Memory.get`` of each named fact: a purged or deleted one is not found, the
  others come with their status (a superseded one with what replaced it), never ``active``;
* ``participants()``, ``scopes()`` (delete): a deleted scope has no participant and is not
  listed; ``review_queue()``: a rejected fact's dispute is closed (reject), a deleted scope's
  queue is empty (delete); ``audit()``: a deleted scope's audit is empty (delete). The audit is
  not probed for a purge: its events hold ids and actors, never a record's text, so no probe of
  it could see a purged text (the file scan reads its files);
* ``profile()``, ``profile_history()``: the target's profile entry (every version) is stale
  once the target is forgotten, superseded or rejected, and gone, with its text, once it is
  purged or its scope deleted;
* ``facts() other dataset``, ``messages() other dataset``, ``audit() other dataset`` (and the
  same for the other task): the isolation scopes' listings hold only their own records, and no
  record or event naming the target's;
* ``langchain retriever`` (``MembrainRetriever``: documents' ``fact_id`` and ``sources``),
  ``llamaindex retriever`` (nodes' ids and ``sources``), ``llamaindex memory block``
  (``MembrainMemoryBlock.aget``: a context line holding the target's text and citing its
  message, or the purged text);
* ``langgraph store``: ``store.search`` never returns a deleted item nor an item's previous
  value, and ``Memory.search`` (``expand`` and ``deep``) on the store's scope never returns a
  fact extracted from a previous value;
* ``other dataset`` / ``other task``: ``Memory.search(mode="deep")`` on the isolation scopes
  returns only facts of that scope, never a target;
* ``files`` (purge): after closing the store, every file under the store folder is scanned
  (bytes; holes skipped) for each purge target's distinctive texts ("needles"): substrings of
  12 to 20 letters, digits and spaces of its message, its fact (outside entity brackets), and
  the names of the entities the purge erases with its facts or the description versions they
  taught, that occur, case-insensitively, in no record the purge keeps (messages, facts of any
  status, entities, of every scope, the deleted scope and the store items included); targets
  without one are skipped and counted. A needle is searched as written and lowercased. The
  needles are chosen before the purge, against the records as the purge will leave them
  (``erasures``); a needle still in a kept record after it is reported as a purge without its
  effect. As a control, texts of kept messages (the forget targets') are searched the same way
  and must be found. The needles are also what ``context``, ``search_messages``, the listings
  and the memory block look for.

Control (``--control``). Every probe above also runs with its target's operation not applied yet,
on the same store: the non-purge targets' and the store items' right after the profile entries
and disputes are written, the
purge targets' after the other operations and just before the purge (their needles are chosen
then), with a scan of the open store's files for their needles. Each target is then still as
it was, so each (operation, surface) cell must see leaks; a cell the real run probed that sees
none (or was not probed) in the control is *blind*: its 0 proves nothing. On the isolation
scopes, which never hold a target, the control counts the target's reversed copy, the stand-in
each holds, as what a leak there would look like. Cells that do not apply (``search_messages``
for forget, a path that cannot return the target) are probed in neither run; a path that did not
run in the real run shows '-' there and is not counted.

Reported: tried and leaked per operation and surface (a probe is one call, or one listing, per
target and query), with ``--control`` the control's tried and leaked beside them and the blind
cells marked, the same per reading operation of the table, the found-before share per
operation, the checks that each operation had its
effect (statuses, purge report, needles), and the elapsed time of the build, the operations and
the probes.

The code: this module parses the arguments, runs the stages and reports;
``negative_recall_build`` builds the store, chooses the targets and applies the operations;
``negative_recall_probes`` holds the surfaces, the probes and the file scan;
``negative_recall_targets`` the records and query texts both share.

Figures: ``docs/benchmarks/negative-recall.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from langchain_membrain.langgraph import MembrainStore, scope_for_namespace
from membrain import Memory
from membrain.api.models import Scope
from membrain.background import BackgroundWriter
from membrain.files.loaders import load_conversations
from membrain.testing import HashingEncoder

if __package__ in (None, ""):  # run as a file: import siblings as `python -m` would
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.locomo_retrieval import progress_bar  # noqa: E402
from benchmarks.negative_recall_build import (  # noqa: E402
    apply_operations,
    build,
    check_operations,
    choose_needles,
    erasures,
    kept_corpus,
    name_targets,
    prepare_reads,
    stored_texts,
)
from benchmarks.negative_recall_probes import (  # noqa: E402
    FOUND_K,
    MODES,
    PATHS,
    PROBE_K,
    READ_PROBES,
    READS,
    Prober,
    Tally,
    blind_cells,
    cell_order,
    cited_in,
    found_before,
    needle,
    scan_files,
)
from benchmarks.negative_recall_targets import (  # noqa: E402
    OPERATIONS,
    PROFILE_SCHEMA,
    ConversationSetup,
    Target,
    keywords,
    without_times,
)

__all__ = [
    "MODES",
    "OPERATIONS",
    "PATHS",
    "READS",
    "READ_PROBES",
    "Tally",
    "blind_cells",
    "cited_in",
    "format_report",
    "format_table",
    "keywords",
    "main",
    "needle",
    "parse_args",
    "report",
    "run",
    "scan_files",
    "without_times",
]
"""The entry point's names, with the helpers it re-exports from its sibling modules."""


# -- run ---------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/negative_recall.py",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--data", required=True, type=Path, help="LoCoMo JSON file")
    parser.add_argument(
        "--conversations", type=int, default=None, metavar="N", help="first N (default: all)"
    )
    parser.add_argument(
        "--targets",
        type=int,
        default=10,
        metavar="N",
        help="named facts per operation per conversation (default 10)",
    )
    parser.add_argument(
        "--path",
        type=Path,
        default=None,
        help="store folder, new or empty (default: a fresh temporary one)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument(
        "--hashing",
        action="store_true",
        help="HashingEncoder(64) instead of the packaged model (smoke tests only)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="also run every probe before the operations: each probed surface must see leaks",
    )
    args = parser.parse_args(argv)
    if args.conversations is not None and args.conversations < 1:
        parser.error("--conversations must be positive")
    if args.targets < 1:
        parser.error("--targets must be positive")
    if args.path is not None and args.path.exists() and any(args.path.iterdir()):
        parser.error(f"--path {args.path} is not empty: the benchmark needs a fresh store")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    err = Console(stderr=True)
    conversations = load_conversations(args.data)[: args.conversations]
    tally = Tally()
    control = Tally() if args.control else None
    timings: dict[str, float] = {}
    with ExitStack() as stack:
        if args.path is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="negrecall-")))
        else:
            folder = args.path
        mem = Memory(
            path=folder,
            dense=HashingEncoder(64) if args.hashing else None,
            profile_schema=PROFILE_SCHEMA,
        )
        encoder = mem.store.dense.name
        writer = BackgroundWriter(mem, idle_seconds=3600)
        store = MembrainStore(
            memory=mem,
            path=folder / "langgraph-store.sqlite",
            writer=writer,
            namespace_to_scope=scope_for_namespace,  # items in ("neg-<name>", "bench-store")
        )
        prober = Prober(mem, store, tally)
        try:
            # load the encoders before anything is timed
            mem.search_messages("warm up", scope=Scope(dataset="neg-warmup", task="bench"), k=1)
            started = time.perf_counter()
            setups, ingest = build(mem, store, writer, conversations, args.targets, err)
            timings["build_s"] = time.perf_counter() - started

            started = time.perf_counter()
            found_before(mem, store, setups, err)
            timings["probes_before_s"] = time.perf_counter() - started

            for setup in setups:
                name_targets(mem, setup)
                prepare_reads(mem, setup)
            prober.plan(setups)
            deleted_texts = [t for s in setups for t in stored_texts(mem, s.deleted)]
            targets = [t for s in setups for t in s.targets]
            purged = [t for t in targets if t.operation == "purge"]
            timings["operations_s"] = 0.0
            if control is not None:
                timings["control_probes_s"] = 0.0
                prober.tally, prober.control = control, True
                started = time.perf_counter()
                run_probes(prober, setups, err, "control probes", purge=False)
                timings["control_probes_s"] += time.perf_counter() - started

            # every operation but the purge; a purged text's needle is chosen before the purge
            started = time.perf_counter()
            problems: list[str] = []
            first = [op for op in OPERATIONS if op != "purge"]
            for setup in setups:
                problems += apply_operations(mem, store, writer, setup, first)
            timings["operations_s"] += time.perf_counter() - started

            erased = erasures(mem, purged)
            kept = kept_corpus(mem, setups, deleted_texts, erased)
            prober.in_entities = choose_needles(mem, purged, erased, kept)
            needle_skips = sum(1 for t in purged if not t.needles)
            if control is not None:
                started = time.perf_counter()
                run_probes(prober, setups, err, "control probes (purge)", purge=True)
                # the store is open: what it wrote is in its files, as after closing
                found_in, _, _ = scan_files(folder, [n for t in purged for n in t.needles])
                record_files(control, purged, found_in)
                timings["control_probes_s"] += time.perf_counter() - started
                prober.tally, prober.control = tally, False

            started = time.perf_counter()
            for setup in setups:
                problems += apply_operations(mem, store, writer, setup, ["purge"])
            for setup in setups:
                problems += check_operations(mem, setup)
            timings["operations_s"] += time.perf_counter() - started
            kept = kept_corpus(mem, setups, deleted_texts)
            problems += [
                f"{t.conversation}: purge target {t.fact_id}: {n!r} is still in a kept record"
                for t in purged
                for n in t.needles
                if n.lower() in kept
            ]

            started = time.perf_counter()
            run_probes(prober, setups, err, "probes")
            timings["probes_s"] = time.perf_counter() - started
        finally:
            prober.close()
            writer.shutdown()
            store.close()
            mem.close()

        started = time.perf_counter()
        controls = [n for s in setups for text in s.controls if (n := needle(text, "")) is not None]
        needles = [n for t in purged for n in t.needles]
        found_in, files, size = scan_files(folder, [*needles, *controls])
        record_files(tally, purged, found_in)
        timings["files_s"] = time.perf_counter() - started

    files_report = {
        "scanned": files,
        "bytes": size,
        "purge_targets": len(purged),
        "with_distinctive_text": len(purged) - needle_skips,
        "skipped_no_distinctive_text": needle_skips,
        "control_found": sum(1 for n in controls if found_in[n]),
        "control_tried": len(controls),
    }
    return report(
        args,
        setups,
        tally,
        timings,
        ingest,
        problems,
        encoder,
        files=files_report,
        control=control,
    )


def run_probes(
    prober: Prober,
    setups: Sequence[ConversationSetup],
    err: Console,
    label: str,
    *,
    purge: bool | None = None,
) -> None:
    """Probe every target (only purge targets, or all but them) and every store item."""
    targets = [
        (t, s)
        for s in setups
        for t in s.targets
        if purge is None or (t.operation == "purge") == purge
    ]
    items = [i for s in setups for i in s.store_targets] if not purge else []
    with progress_bar(err) as progress:
        task = progress.add_task(label, total=len(targets) + len(items))
        for target, setup in targets:
            prober.probe(target, setup)
            progress.advance(task)
        for item in items:
            prober.probe_store(item)
            progress.advance(task)


def record_files(tally: Tally, purged: Sequence[Target], found_in: dict[str, list[str]]) -> None:
    """A ``files`` probe per purge target with needles: did a file hold one of them."""
    for target in purged:
        if target.needles and target.skipped is None:
            where = sorted({f for n in target.needles for f in found_in[n]})
            tally.record("purge", "files", bool(where), target=target.fact_id, query=str(where))


def report(
    args: argparse.Namespace,
    setups: Sequence[ConversationSetup],
    tally: Tally,
    timings: dict[str, float],
    ingest: dict[str, Any],
    problems: list[str],
    encoder: str,
    *,
    files: dict[str, Any],
    control: Tally | None = None,
) -> dict[str, Any]:
    rows = tally.rows()
    targets = [t for s in setups for t in s.targets]
    items = [t for s in setups for t in s.store_targets]
    operations: dict[str, Any] = {}
    for op in OPERATIONS:
        mine = [t for t in targets if t.operation == op and t.skipped is None]
        found = sum(t.found_before for t in mine)
        store_items = [i for i in items if i.operation == op]
        operations[op] = {
            "targets": len(mine),
            "found_before": found,
            "found_before_share": found / len(mine) if mine else float("nan"),
            "skipped": sum(1 for t in targets if t.operation == op and t.skipped is not None),
            "store_items": len(store_items),
            "store_items_found_before": sum(i.found_before for i in store_items),
        }
    return {
        "rows": rows,
        "reads": read_rows(tally, control),
        "total": {
            "tried": sum(r["tried"] for r in rows),
            "leaked": sum(r["leaked"] for r in rows),
        },
        "operations": operations,
        "operation_problems": problems,
        "files": files,
        "control": None
        if control is None
        else {
            "rows": control.rows(),
            "total": {
                "tried": sum(c[0] for c in control.counts.values()),
                "leaked": sum(c[1] for c in control.counts.values()),
            },
            "blind": [{"operation": op, "surface": s} for op, s in blind_cells(tally, control)],
        },
        "leaks": tally.leaks,
        "targets": [
            {
                "operation": t.operation,
                "conversation": t.conversation,
                "scope": t.scope.key,
                "fact_id": t.fact_id,
                "queries": list(t.queries),
                "found_before": t.found_before,
                "named_facts": len(t.fact_ids),
                "named_messages": len(t.message_ids),
                "needles": list(t.needles),
                "skipped": t.skipped,
            }
            for t in targets
        ],
        "store_items": [
            {
                "operation": i.operation,
                "conversation": i.conversation,
                "key": i.key,
                "queries": list(i.queries),
                "found_before": i.found_before,
                "previous_value_facts": len(i.fact_ids),
            }
            for i in items
        ],
        "ingest": ingest,
        "timings_s": timings,
        "conversations": [s.name for s in setups],
        "targets_per_operation": args.targets,
        "probe_k": PROBE_K,
        "found_k": FOUND_K,
        "encoder": encoder,
        "data": str(args.data),
    }


def read_rows(tally: Tally, control: Tally | None) -> list[dict[str, Any]]:
    """Per reading operation of the table (:data:`READS`): its cells probed, tried and leaked,
    and with the control its tried, leaked and blind cells."""
    blind = set(blind_cells(tally, control)) if control is not None else set()
    out = []
    for read, surfaces in READS.items():
        cells = [c for c in tally.counts if c[1] in surfaces]
        row: dict[str, Any] = {
            "read": read,
            "cells": len(cells),
            "tried": sum(tally.counts[c][0] for c in cells),
            "leaked": sum(tally.counts[c][1] for c in cells),
        }
        if control is not None:
            seen = [c for c in control.counts if c[1] in surfaces]
            row["control_tried"] = sum(control.counts[c][0] for c in seen)
            row["control_leaked"] = sum(control.counts[c][1] for c in seen)
            row["blind"] = sum(1 for c in cells if c in blind)
        out.append(row)
    return out


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 2) -> str:
    """Aligned plain-text table: the first ``left`` columns left, the rest right-aligned."""
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = []
    for n, row in enumerate((header, *rows)):
        cells = [
            cell.ljust(w) if i < left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0 or n == len(rows) - 1:
            lines.append("  ".join("-" * w for w in widths).rstrip())
    return "\n".join(lines)


def format_report(report: dict[str, Any]) -> str:
    control = report["control"]
    real = {(r["operation"], r["surface"]): r for r in report["rows"]}
    checked: dict[tuple[str, str], dict[str, Any]] = {}
    blind: set[tuple[str, str]] = set()
    if control is not None:
        checked = {(r["operation"], r["surface"]): r for r in control["rows"]}
        blind = {(b["operation"], b["surface"]) for b in control["blind"]}
    header = ["operation", "surface", "tried", "leaked"]
    mark = [""] if blind else []  # a column for the BLIND mark when there is one
    if control is not None:
        header += ["control tried", "control leaked", *mark]
    rows = []
    for cell in cell_order([*real, *checked]):
        row = [*cell, *_counts(real.get(cell))]
        if control is not None:
            row += [*_counts(checked.get(cell)), *(["BLIND" if cell in blind else ""] * len(mark))]
        rows.append(row)
    total = ["total", "", str(report["total"]["tried"]), str(report["total"]["leaked"])]
    if control is not None:
        total += [str(control["total"]["tried"]), str(control["total"]["leaked"]), *mark]
    rows.append(total)
    found = ", ".join(
        f"{op} {v['found_before']}/{v['targets']}"
        + (f" (store items {v['store_items_found_before']}/{v['store_items']})"
           if v["store_items"] else "")
        for op, v in report["operations"].items()
    )  # fmt: skip
    skipped = {op: v["skipped"] for op, v in report["operations"].items() if v["skipped"]}
    files = report["files"]
    t = report["timings_s"]
    reads = report["reads"]
    read_header = ["read", "cells", "tried", "leaked"]
    if control is not None:
        read_header += ["control tried", "control leaked", "blind"]
    keys = ["cells", "tried", "leaked"]
    keys += ["control_tried", "control_leaked", "blind"] if control is not None else []
    read_table = [[r["read"], *(str(r[k]) for k in keys)] for r in reads]
    read_table.append(["total", *(str(sum(r[k] for r in reads)) for k in keys)])
    lines = [
        f"Negative recall: {len(report['conversations'])} conversation(s), "
        f"{report['targets_per_operation']} targets per operation and conversation, "
        f"encoder {report['encoder']}, probes k={report['probe_k']}"
        + (", control: the same probes with the operations skipped" if control else ""),
        format_table(header, rows),
        "",
        "by reading operation of the table (the scan of the files aside)",
        format_table(read_header, read_table, left=1),
        "",
        f"found before (default search, k={report['found_k']}): {found}",
        f"files: {files['scanned']} scanned ({files['bytes'] / 1e6:.1f} MB of data); purge "
        f"targets with a distinctive text {files['with_distinctive_text']} of "
        f"{files['purge_targets']}; control: kept texts found {files['control_found']} of "
        f"{files['control_tried']}",
        f"elapsed: build {t['build_s']:.1f} s, probes before {t['probes_before_s']:.1f} s, "
        + (f"control probes {t['control_probes_s']:.1f} s, " if control else "")
        + f"operations {t['operations_s']:.1f} s, probes {t['probes_s']:.1f} s, "
        f"files {t['files_s']:.1f} s",
    ]
    if control is not None:
        probed = sum(1 for r in report["rows"] if r["tried"])
        lines.append(
            f"control: {probed - len(blind)} of {probed} probed cells saw their targets with "
            "the operations skipped"
            + (f"; BLIND (their 0 proves nothing): {len(blind)}" if blind else "")
        )
        lines += [f"  BLIND {op} / {surface}" for op, surface in cell_order(blind)]
    if skipped:
        lines.append("skipped targets: " + ", ".join(f"{k} {v}" for k, v in skipped.items()))
    if report["operation_problems"]:
        lines.append("operations without their effect:")
        lines += [f"  {p}" for p in report["operation_problems"]]
    if report["leaks"]:
        lines.append(f"LEAKS ({len(report['leaks'])}), first 20:")
        lines += [
            f"  {x['operation']} / {x['surface']}: {x['target']} <- {x['query'][:80]!r}"
            for x in report["leaks"][:20]
        ]
    return "\n".join(lines)


def _counts(row: dict[str, Any] | None) -> list[str]:
    """Tried and leaked of a cell, or '-' twice when it was not probed."""
    return ["-", "-"] if row is None else [str(row["tried"]), str(row["leaked"])]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(format_report(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    failed = result["total"]["leaked"] > 0 or bool(result["operation_problems"])
    if result["control"] is not None:
        failed |= bool(result["control"]["blind"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
