"""Probes of the negative-recall benchmark: every surface a target could come back through.

``found_before`` runs the default search before the operations; :class:`Prober` probes each
target on every surface and tallies tried and leaked in a :class:`Tally` (after the operations,
and with ``control`` before them: then every surface must see its targets); ``blind_cells``
compares the two tallies; ``scan_files`` searches the store's files for purged texts. The
surfaces are described in ``benchmarks.negative_recall``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatMessage  # noqa: TID251 (not the core)
from rich.console import Console

from benchmarks.locomo_retrieval import progress_bar
from benchmarks.negative_recall_targets import (
    OPERATIONS,
    PROFILE_TOPIC,
    ConversationSetup,
    StoreTarget,
    Target,
    collapse,
)
from langchain_membrain import MembrainRetriever as LangChainRetriever
from langchain_membrain.langgraph import MembrainStore
from llama_index_membrain import MembrainMemoryBlock
from llama_index_membrain import MembrainRetriever as LlamaIndexRetriever
from membrain import Memory
from membrain.api.erasure import ErasureReceipt
from membrain.api.errors import NotFoundError
from membrain.api.models import FactStatus, MemoryHit, Scope
from membrain.api.path_names import BM25, BOOLEAN, DENSE, ENTITY_TREE, EVENT, HYDE
from membrain.api.profile import ProfileEntry
from membrain.api.recalls import Recall
from membrain.ingest import message_id
from membrain.temporal import plain_text
from membrain.testing import file_extents

MODES = ("fast", "expand", "deep", "auto")
PATHS = (BM25, DENSE, HYDE, EVENT, ENTITY_TREE, BOOLEAN)
REPLACED = "replaced"
_NOT_A_PATH = ("asked", "time", "stated", "when", "answers")
"""Boosts, the replies to asked questions and the answer follow-up: excluded when one path runs
alone."""

ISOLATION = ("other dataset", "other task")
"""The isolation scopes: another dataset, another task of the same dataset."""
READS: dict[str, tuple[str, ...]] = {
    "search": (
        *(f"search {m}" for m in MODES),
        *(f"path {p}" for p in (*PATHS, REPLACED)),
        "langchain retriever",
        "llamaindex retriever",
        "langgraph store",
        *ISOLATION,
    ),
    "context": ("context", "context (profile)", "llamaindex memory block"),
    "search_messages": ("search_messages",),
    "facts": ("facts()", *(f"facts() {i}" for i in ISOLATION)),
    "get": ("get()",),
    "messages": ("messages()", *(f"messages() {i}" for i in ISOLATION)),
    "entities": ("entities()",),
    "participants": ("participants()",),
    "scopes": ("scopes()",),
    "review_queue": ("review_queue()",),
    "history": ("history",),
    "audit": ("audit()", *(f"audit() {i}" for i in ISOLATION)),
    "profile": ("profile()",),
    "profile_history": ("profile_history()",),
    "receipts": ("receipts()",),
    "verify_erasure": ("verify_erasure()",),
    "trace": ("trace()",),
    "recalls": ("recalls()",),
}
"""The surfaces of each reading operation of :data:`membrain.api.operations.OPERATIONS`, by its
name there (the retrievers and the LangGraph store read through ``search``, the memory block
through ``context``)."""
SURFACES = (*(s for surfaces in READS.values() for s in surfaces), "files")
"""Every surface, in report order: those of each read, then the scan of the store's files."""

ERASING = ("purge", "delete")
"""Operations that erase their records (the others keep them, out of the reads)."""
RETIRED = {
    "forget": FactStatus.FORGOTTEN,
    "supersede": FactStatus.SUPERSEDED,
    "reject": FactStatus.RETRACTED,
}
"""The status a fact has once the other operations took it out of the reads."""
PROFILE_RATIO = 0.5
"""The profile's share of a ``context`` probed with its profile block."""
PROFILE_TOKENS = 16_000
"""The budget of that ``context``: its profile block holds every entry of a scope (one per
target, 40 in a main scope with 10 targets per operation), which 2,000 tokens do not."""

PROBE_K = 50
"""Results asked of every probing search and retriever (a leak at any rank counts)."""
FOUND_K = 10
"""Results of the default search that decides "found before"."""
_NEEDLE = 20
_MIN_NEEDLE = 12
_NEEDLE_RUN = re.compile(rf"[A-Za-z0-9 ]{{{_MIN_NEEDLE},}}")
_BRACKETED = re.compile(r"\[[^\[\]]*\]")
_CITATION = re.compile(r"\[(?:msg )?([^\[\]]*)\]\s*$")


# -- tally -------------------------------------------------------------------------------------
@dataclass
class Tally:
    """Tried and leaked per (operation, surface), and every leak."""

    counts: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    leaks: list[dict[str, Any]] = field(default_factory=list)

    def record(
        self, operation: str, surface: str, leaked: bool, *, target: str, query: str = ""
    ) -> None:
        cell = self.counts.setdefault((operation, surface), [0, 0])
        cell[0] += 1
        if leaked:
            cell[1] += 1
            self.leaks.append(
                {"operation": operation, "surface": surface, "target": target, "query": query}
            )

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"operation": op, "surface": s, "tried": tried, "leaked": leaked}
            for op, s in cell_order(self.counts)
            for tried, leaked in [self.counts[(op, s)]]
        ]


def cell_order(cells: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(operation, surface) cells in report order."""
    order = {s: i for i, s in enumerate(SURFACES)}
    return sorted(set(cells), key=lambda k: (OPERATIONS.index(k[0]), order.get(k[1], 99), k[1]))


def blind_cells(real: Tally, control: Tally) -> list[tuple[str, str]]:
    """Cells the real run probed that saw no leak in the control (or were not probed there).

    A 0 in such a cell proves nothing: the same probes did not see the targets while the
    operations were skipped. Cells the real run did not probe are not counted.
    """
    return [
        cell
        for cell in cell_order(real.counts)
        if real.counts[cell][0] > 0 and control.counts.get(cell, [0, 0])[1] == 0
    ]


# -- leak checks -------------------------------------------------------------------------------
def needle(text: str, kept: str, *, outside_brackets: bool = False) -> str | None:
    """A substring of ``text`` (12-20 letters, digits, spaces) that ``kept`` lacks, or None.

    ``kept`` is lowercase; the comparison ignores case.
    """
    if outside_brackets:
        text = _BRACKETED.sub("\x00", text)
    for run in _NEEDLE_RUN.finditer(text):
        chunk = run.group()
        size = min(_NEEDLE, len(chunk))
        for start in range(0, len(chunk) - size + 1, 2):
            piece = chunk[start : start + size].strip()
            if len(piece) >= _MIN_NEEDLE and piece.lower() not in kept:
                return piece
    return None


def cited_in(line: str) -> set[str]:
    """The ids a context line cites at its end (``[msg D1:3; D2:4]``, or without ``msg``)."""
    found = _CITATION.search(line)
    return {c.strip() for c in found.group(1).split(";")} if found else set()


def text_leaks(text: str, target: Target) -> bool:
    """A context text shows the target: its line citing its message, or a purged text."""
    if target.operation == "delete":
        return bool(text.strip())  # the scope is gone: anything at all came from it
    if any(n in text for n in target.needles):
        return True
    for line in text.splitlines():
        shown = target.rendered and target.rendered in collapse(line)
        if shown and cited_in(line) & set(target.cited):
            return True
    return False


def hit_leaks(hit: MemoryHit, target: Target) -> bool:
    if hit.fact.id in target.fact_ids or set(hit.fact.sources) & target.message_ids:
        return True
    return any(m.source_id in target.source_ids for m in hit.sources if m.source_id)


def metadata_leaks(identifier: str | None, metadata: dict[str, Any], target: Target) -> bool:
    if identifier in target.fact_ids or metadata.get("fact_id") in target.fact_ids:
        return True
    return bool(set(metadata.get("sources") or ()) & target.source_ids)


def entry_leaks(entry: ProfileEntry, target: Target) -> bool:
    """A profile entry (or version) shows the target: cites it while not stale, or, once the
    target is erased, cites it at all or holds its text."""
    cites = bool(set(entry.fact_ids) & target.fact_ids)
    if target.operation in ERASING:
        return cites or any(n in entry.text for n in target.needles)
    return cites and not entry.stale


# -- files -------------------------------------------------------------------------------------
def scan_files(root: Path, needles: Sequence[str]) -> tuple[dict[str, list[str]], int, int]:
    """Which files under ``root`` hold each needle (as written or lowercased); files, bytes."""
    variants = {n: {n.encode(), n.lower().encode()} for n in needles}
    every = sorted({v for vs in variants.values() for v in vs}, key=len, reverse=True)
    found: dict[str, list[str]] = {n: [] for n in needles}
    if not every:
        return found, 0, 0
    pattern = re.compile(b"|".join(re.escape(v) for v in every))
    overlap = max(len(v) for v in every)
    files = size = 0
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        files += 1
        tail, tail_end = b"", -1
        hits: set[str] = set()
        for offset, chunk in file_extents(path):
            size += len(chunk)
            data = (tail if offset == tail_end else b"") + chunk
            if pattern.search(data):
                hits.update(n for n, vs in variants.items() if any(v in data for v in vs))
            tail, tail_end = data[-overlap:], offset + len(chunk)
        for n in hits:
            found[n].append(str(path.relative_to(root)))
    return found, files, size


# -- found before ------------------------------------------------------------------------------
def found_before(
    mem: Memory, store: MembrainStore, setups: Sequence[ConversationSetup], err: Console
) -> None:
    """Run the default search with each target's queries; record what it finds."""
    every = [t for s in setups for t in s.targets]
    items = [t for s in setups for t in s.store_targets]
    with progress_bar(err) as progress:
        task = progress.add_task("probes before", total=len(every) + len(items))
        for target in every:
            for query in target.queries:
                for hit in mem.search(query, scope=target.scope, k=FOUND_K):
                    if hit.fact.id == target.fact_id:
                        target.found_before = True
                        target.rendered = target.rendered or collapse(hit.text)
            if not target.rendered:
                target.rendered = collapse(plain_text(target.text))
            progress.advance(task)
        for item in items:
            for query in item.queries:
                found = store.search(item.namespace, query=query, limit=FOUND_K)
                item.found_before |= any(h.key == item.key for h in found)
            progress.advance(task)


# -- probes ------------------------------------------------------------------------------------
Adapters = tuple[LangChainRetriever, LlamaIndexRetriever, MembrainMemoryBlock]


class Prober:
    """Runs every surface's probes for a target and tallies them.

    With ``control`` (the operations not applied yet) the isolation scopes count the target's
    reversed copy, the stand-in they hold, as what a leak there would look like.
    """

    def __init__(self, mem: Memory, store: MembrainStore, tally: Tally) -> None:
        self.mem = mem
        self.store = store
        self.tally = tally
        self.control = False
        self.paths: dict[tuple[str, str], tuple[str, ...]] = {}
        """The paths each target (scope key, fact id) is probed on alone: see ``plan``."""
        self.in_entities: set[tuple[str, str]] = set()
        """Purge targets (scope key, fact id) whose needles include entity text: the only ones
        the entities listing is probed for (``choose_needles``)."""
        self.primed: set[tuple[str, str]] = set()
        """Targets (scope key, fact id) a traced search gave to their run (``plan``)."""
        self._loop = asyncio.new_event_loop()
        self._adapters: dict[Scope, Adapters] = {}

    def close(self) -> None:
        self._loop.run_until_complete(self._loop.shutdown_default_executor())
        self._loop.close()

    def adapters(self, scope: Scope) -> Adapters:
        if scope not in self._adapters:
            self._adapters[scope] = (
                LangChainRetriever(memory=self.mem, scope=scope, k=PROBE_K),
                LlamaIndexRetriever(memory=self.mem, scope=scope, k=PROBE_K),
                # A probe only reads: its question is not conversation to remember.
                MembrainMemoryBlock(memory=self.mem, scope=scope, record_reads=False),
            )
        return self._adapters[scope]

    def plan(self, setups: Sequence[ConversationSetup]) -> None:
        """Choose, before the operations, the paths each target is probed on alone.

        A path alone is probed only where it can return one of the target's named facts:
        ``entity_tree`` returns only facts naming an entity other than a participant,
        ``replaced`` (in the main scopes) only facts that replaced others. Elsewhere its 0 would
        prove nothing.
        """
        for setup in setups:
            for scope in dict.fromkeys(t.scope for t in setup.targets):
                facts = {f.id: f for f in self.mem.facts(scope=scope, include_inactive=True)}
                others = {e.id for e in self.mem.entities(scope=scope) if not e.participant}
                for target in (t for t in setup.targets if t.scope == scope):
                    named = [facts[i] for i in target.fact_ids if i in facts]
                    entity = any(set(f.entity_ids) & others for f in named)
                    paths = [p for p in PATHS if p != ENTITY_TREE or entity]
                    if scope == setup.main and any(f.supersedes for f in named):
                        paths.append(REPLACED)
                    self.paths[(scope.key, target.fact_id)] = tuple(paths)
        self._prime_traces(setups)

    def _prime_traces(self, setups: Sequence[ConversationSetup]) -> None:
        """Traced searches, before the operations, that give each target to a run of its own.

        Only a query that finds the target is traced (a purge erases the question of a recall
        that gave a purged fact, not of one that did not); a target no query finds is not
        probed on the trace.
        """
        for target in (t for s in setups for t in s.targets):
            for query in target.queries:
                hits = self.mem.search(query, scope=target.scope, k=PROBE_K)
                if any(h.fact.id == target.fact_id for h in hits):
                    self.mem.trace_recalls = True  # the run is given what the query finds
                    try:
                        run = _trace_run(target)
                        self.mem.search(query, scope=target.scope, k=PROBE_K, run=run)
                    finally:
                        self.mem.trace_recalls = False
                    self.primed.add((target.scope.key, target.fact_id))
                    break

    def probe(self, target: Target, setup: ConversationSetup) -> None:
        """Every read of the table that could serve the target (:data:`READ_PROBES`)."""
        if target.skipped is None:
            for read in READ_PROBES.values():
                read(self, target, setup)

    def _recorder(self, target: Target) -> Callable[..., None]:
        def record(surface: str, leaked: bool, query: str = "") -> None:
            self.tally.record(target.operation, surface, leaked, target=target.fact_id, query=query)

        return record

    def _copies(self, target: Target) -> set[str]:
        """In the control, the caller ids of the target's reversed copies on the isolation
        scopes: what a leak there would look like (none otherwise)."""
        return {f"iso-{c}" for c in target.cited} if self.control else set()

    # -- one probe per reading operation (:data:`READ_PROBES`) ------------------------------
    def probe_search(self, target: Target, setup: ConversationSetup) -> None:
        """``search`` in every mode and with each path alone, the retrievers built on it, and
        on the isolation scopes (another dataset, another task of the same dataset)."""
        mem, scope, record = self.mem, target.scope, self._recorder(target)
        copies = self._copies(target)
        for query in target.queries:
            for mode in MODES:
                found = mem.search(query, scope=scope, mode=mode, k=PROBE_K)
                record(f"search {mode}", any(hit_leaks(h, target) for h in found), query)
            for path in self.paths[(scope.key, target.fact_id)]:
                skip = [p for p in (*PATHS, REPLACED, *_NOT_A_PATH) if p != path]
                found = mem.search(query, scope=scope, mode="deep", k=PROBE_K, exclude_paths=skip)
                if path in found.paths:
                    record(f"path {path}", any(hit_leaks(h, target) for h in found), query)
            chain, index, _ = self.adapters(scope)
            docs = chain.invoke(query)
            record(
                "langchain retriever",
                any(metadata_leaks(d.id, d.metadata, target) for d in docs),
                query,
            )
            nodes = index.retrieve(query)
            record(
                "llamaindex retriever",
                any(metadata_leaks(n.node.node_id, n.node.metadata, target) for n in nodes),
                query,
            )
            for surface, other in _isolated(setup):
                found = mem.search(query, scope=other, mode="deep", k=PROBE_K)
                record(
                    surface,
                    any(
                        h.fact.scope.key != other.key
                        or hit_leaks(h, target)
                        or any(m.source_id in copies for m in h.sources)
                        for h in found
                    ),
                    query,
                )

    def probe_context(self, target: Target, setup: ConversationSetup) -> None:
        """``context`` (its hits and text), with the profile block (an entry citing the target
        is left out once the target is inactive), and the LlamaIndex memory block on it."""
        mem, scope, record = self.mem, target.scope, self._recorder(target)
        for i, query in enumerate(target.queries):
            context = mem.context(query, scope=scope, k=PROBE_K)
            leaked = any(hit_leaks(h, target) for h in context.hits)
            record("context", leaked or text_leaks(context.text, target), query)
            if i == 0:  # the profile block is the same for every query
                briefed = mem.context(
                    query,
                    scope=scope,
                    k=PROBE_K,
                    max_tokens=PROFILE_TOKENS,
                    profile_ratio=PROFILE_RATIO,
                )
                record(
                    "context (profile)",
                    any(set(e.fact_ids) & target.fact_ids for e in briefed.profile)
                    or any(n in briefed.text for n in target.needles),
                    query,
                )
            _, _, block = self.adapters(scope)
            text = self._loop.run_until_complete(
                block.aget([ChatMessage(role="user", content=query)])
            )
            record("llamaindex memory block", text_leaks(text, target), query)

    def probe_search_messages(self, target: Target, setup: ConversationSetup) -> None:
        """``search_messages``, for the operations that erase messages (the others keep them)."""
        if target.operation not in ERASING:
            return
        record = self._recorder(target)
        for query in target.queries:
            evidence = self.mem.search_messages(query, scope=target.scope, k=PROBE_K)
            record(
                "search_messages",
                any(
                    e.message.source_id in target.source_ids
                    or e.message.id in target.message_ids
                    or any(n in e.message.text for n in target.needles)
                    for e in evidence
                ),
                query,
            )

    def probe_facts(self, target: Target, setup: ConversationSetup) -> None:
        """``facts()`` of the scope (inactive ones too after an erasure), and of each isolation
        scope: only its own facts, never the target's."""
        mem, record = self.mem, self._recorder(target)
        facts = mem.facts(scope=target.scope, include_inactive=target.operation in ERASING)
        record("facts()", any(f.id in target.fact_ids for f in facts))
        for surface, other in _isolated(setup):
            cited = target.message_ids | {message_id(other, c) for c in self._copies(target)}
            listed = mem.facts(scope=other, include_inactive=True)
            record(
                f"facts() {surface}",
                any(
                    f.scope.key != other.key or f.id in target.fact_ids or set(f.sources) & cited
                    for f in listed
                ),
            )

    def probe_get(self, target: Target, setup: ConversationSetup) -> None:
        """``get`` by id, whatever the status: an erased fact is not found, a retired one is
        never served as active (a superseded one says what replaced it)."""
        mem, record = self.mem, self._recorder(target)
        for fact_id in sorted(target.fact_ids):
            try:
                fact = mem.get(fact_id, scope=target.scope)
            except NotFoundError:
                record("get()", False)
                continue
            if target.operation in ERASING:
                record("get()", True, fact_id)
                continue
            retired = fact.status is RETIRED[target.operation]
            if target.operation == "supersede":
                retired = retired and bool(fact.superseded_by)
            record("get()", not retired, fact_id)

    def probe_messages(self, target: Target, setup: ConversationSetup) -> None:
        """``messages()`` after an erasure (the other operations keep the evidence), and of
        each isolation scope: only its own messages, never the target's."""
        mem, record = self.mem, self._recorder(target)
        if target.operation in ERASING:
            messages = mem.messages(scope=target.scope)
            record(
                "messages()",
                any(
                    m.id in target.message_ids
                    or (m.message.source_id or "") in target.source_ids
                    or any(n in m.message.text for n in target.needles)
                    for m in messages
                ),
            )
        copies = self._copies(target)
        for surface, other in _isolated(setup):
            listed = mem.messages(scope=other)
            record(
                f"messages() {surface}",
                any(
                    m.scope.key != other.key
                    or m.id in target.message_ids
                    or (m.message.source_id or "") in target.source_ids | copies
                    for m in listed
                ),
            )

    def probe_entities(self, target: Target, setup: ConversationSetup) -> None:
        """``entities()``: none of a deleted scope; no name or description a purge erased
        (probed for the purge targets whose needles come from entity text)."""
        mem, scope, record = self.mem, target.scope, self._recorder(target)
        if target.operation == "delete":
            record("entities()", bool(mem.entities(scope=scope)))
        elif (scope.key, target.fact_id) in self.in_entities:
            listed = [e.model_dump(mode="json") for e in mem.entities(scope=scope)]
            record("entities()", any(n in json.dumps(listed) for n in target.needles))

    def probe_participants(self, target: Target, setup: ConversationSetup) -> None:
        """``participants()`` of a deleted scope: nobody (they are its entities)."""
        if target.operation == "delete":
            record = self._recorder(target)
            record("participants()", bool(self.mem.participants(scope=target.scope)))

    def probe_scopes(self, target: Target, setup: ConversationSetup) -> None:
        """``scopes()`` never lists a deleted scope."""
        if target.operation == "delete":
            record = self._recorder(target)
            listed = self.mem.scopes(target.scope.dataset)
            record("scopes()", any(s.key == target.scope.key for s in listed))

    def probe_review_queue(self, target: Target, setup: ConversationSetup) -> None:
        """``review_queue()``: a rejected fact's dispute is closed; a deleted scope's queue is
        empty (each of its targets was disputed before the operations)."""
        record = self._recorder(target)
        if target.operation == "reject":
            queue = self.mem.review_queue(scope=target.scope)
            record("review_queue()", any(target.fact_id in i.fact_ids for i in queue))
        elif target.operation == "delete":
            record("review_queue()", bool(self.mem.review_queue(scope=target.scope)))

    def probe_history(self, target: Target, setup: ConversationSetup) -> None:
        """``history``: a retired fact is never in it as active; of a purged fact only its
        events remain (ids, no text); a deleted scope's facts have none."""
        mem, record = self.mem, self._recorder(target)
        history = mem.history(target.fact_id, scope=target.scope)
        if target.operation == "purge":
            record(
                "history",
                any(f.id in target.fact_ids for f in history.facts)
                or any(n in history.text() for n in target.needles),
            )
        elif target.operation == "delete":
            record("history", bool(history.facts or history.events))
        else:
            shown = [f for f in history.facts if f.id == target.fact_id]
            record("history", any(f.status is not RETIRED[target.operation] for f in shown))

    def probe_audit(self, target: Target, setup: ConversationSetup) -> None:
        """``audit()``: a deleted scope's audit goes with it; an isolation scope's holds no
        event about the target's records. (Events hold ids and actors, never a record's text:
        no probe of a purge's could see one, the file scan reads its files.)"""
        mem, record = self.mem, self._recorder(target)
        if target.operation == "delete":
            record("audit()", bool(mem.audit(scope=target.scope)))
        named = target.fact_ids | target.message_ids | {target.fact_id, *target.sources}
        for surface, other in _isolated(setup):
            copies = {message_id(other, c) for c in self._copies(target)}
            events = mem.audit(scope=other)
            record(
                f"audit() {surface}",
                any(e.scope.key != other.key or set(e.targets) & (named | copies) for e in events),
            )

    def probe_profile(self, target: Target, setup: ConversationSetup) -> None:
        """``profile()``: the entry citing the target (written before the operations) is
        stale once it is retired, gone once it is purged (with its text) or deleted."""
        if not target.profile:
            return
        record = self._recorder(target)
        entries = self.mem.profile(scope=target.scope)
        record("profile()", any(entry_leaks(e, target) for e in entries))

    def probe_profile_history(self, target: Target, setup: ConversationSetup) -> None:
        """``profile_history()`` of that entry: every version stale once the target is
        retired; none left once it is purged or its scope deleted."""
        if not target.profile:
            return
        record = self._recorder(target)
        try:
            versions = self.mem.profile_history(PROFILE_TOPIC, target.profile, scope=target.scope)
        except NotFoundError:
            record("profile_history()", False)
            return
        record("profile_history()", any(entry_leaks(e, target) for e in versions))

    def _receipts_of(self, target: Target) -> list[ErasureReceipt]:
        """The receipts of the target's dataset that name it (its facts, or its scope)."""
        return [
            r
            for r in self.mem.receipts(target.scope.dataset)
            if target.fact_id in r.facts
            or any(
                (s.dataset, s.task) == (target.scope.dataset, target.scope.task) for s in r.scopes
            )
        ]

    def probe_receipts(self, target: Target, setup: ConversationSetup) -> None:
        """``receipts()``: an erased target has a receipt, which holds none of its text."""
        if target.operation in ERASING:
            record = self._recorder(target)
            found = self._receipts_of(target)
            text = " ".join(r.model_dump_json() for r in found).lower()
            record("receipts()", not found or any(n.lower() in text for n in target.needles))

    def probe_verify_erasure(self, target: Target, setup: ConversationSetup) -> None:
        """``verify_erasure()``: every receipt of an erased target verifies (and one exists)."""
        if target.operation in ERASING:
            found = self._receipts_of(target)
            left = not found or not all(self.mem.verify_erasure(r).ok for r in found)
            self._recorder(target)("verify_erasure()", left)

    def _given(self, target: Target, recalls: Sequence[Recall]) -> bool:
        """Whether ``recalls`` serve what an operation took away: of an erased target, any
        of its facts or texts; of a retired one, one of its facts shown as still active."""
        given = [g for r in recalls for g in r.facts if g.fact_id in target.fact_ids]
        if target.operation == "delete":
            return bool(recalls)
        if target.operation == "purge":
            texts = " ".join(g.fact.text for r in recalls for g in r.facts if g.fact)
            return bool(given) or any(n in texts for n in target.needles)
        return any(g.fact is not None and g.fact.status is FactStatus.ACTIVE for g in given)

    def probe_trace(self, target: Target, setup: ConversationSetup) -> None:
        """``trace()``: what the target's run was told keeps no erased fact, and shows a
        retired one as retired."""
        if (target.scope.key, target.fact_id) in self.primed:
            recalls = self.mem.trace(_trace_run(target), scope=target.scope)
            self._recorder(target)("trace()", self._given(target, recalls))

    def probe_recalls(self, target: Target, setup: ConversationSetup) -> None:
        """``recalls()``: an erased fact was given to no run; a retired one shows retired."""
        if (target.scope.key, target.fact_id) in self.primed:
            recalls = self.mem.recalls(target.fact_id, scope=target.scope)
            self._recorder(target)("recalls()", self._given(target, recalls))

    def probe_store(self, item: StoreTarget) -> None:
        mem = self.mem
        for query in item.queries:
            found = self.store.search(item.namespace, query=query, limit=PROBE_K)
            leaked = any(
                (h.key == item.key and item.new_text is None)
                or h.value.get("text") == item.old_text
                for h in found
            )
            for mode in ("expand", "deep"):
                hits = mem.search(query, scope=item.scope, mode=mode, k=PROBE_K)
                leaked |= any(
                    h.fact.id in item.fact_ids
                    or any(m.source_id == item.source_id for m in h.sources)
                    for h in hits
                )
            self.tally.record(
                item.operation, "langgraph store", leaked, target=item.key, query=query
            )


def _trace_run(target: Target) -> str:
    return f"probe-{target.operation}-{target.fact_id}"


def _isolated(setup: ConversationSetup) -> tuple[tuple[str, Scope], ...]:
    return (("other dataset", setup.other_dataset), ("other task", setup.other_task))


ReadProbe = Callable[[Prober, Target, ConversationSetup], None]
READ_PROBES: dict[str, ReadProbe] = {
    "search": Prober.probe_search,
    "context": Prober.probe_context,
    "search_messages": Prober.probe_search_messages,
    "facts": Prober.probe_facts,
    "get": Prober.probe_get,
    "messages": Prober.probe_messages,
    "entities": Prober.probe_entities,
    "participants": Prober.probe_participants,
    "scopes": Prober.probe_scopes,
    "review_queue": Prober.probe_review_queue,
    "history": Prober.probe_history,
    "audit": Prober.probe_audit,
    "profile": Prober.probe_profile,
    "profile_history": Prober.probe_profile_history,
    "receipts": Prober.probe_receipts,
    "verify_erasure": Prober.probe_verify_erasure,
    "trace": Prober.probe_trace,
    "recalls": Prober.probe_recalls,
}
"""The leak probe of each reading operation of :data:`membrain.api.operations.OPERATIONS`, by its
name there: each probes a target on the surfaces :data:`READS` lists for it (the LangGraph
store's items are probed by :meth:`Prober.probe_store`, under ``search``)."""
