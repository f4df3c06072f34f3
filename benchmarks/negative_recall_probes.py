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
from membrain.api.models import MemoryHit, Scope
from membrain.api.path_names import BM25, BOOLEAN, DENSE, ENTITY_TREE, EVENT, HYDE
from membrain.temporal import plain_text
from membrain.testing import file_extents

MODES = ("fast", "expand", "deep", "auto")
PATHS = (BM25, DENSE, HYDE, EVENT, ENTITY_TREE, BOOLEAN)
REPLACED = "replaced"
_NOT_A_PATH = ("asked", "time", "stated", "when", "answers")
"""Boosts, the replies to asked questions and the answer follow-up: excluded when one path runs
alone."""

SURFACES = (
    *(f"search {m}" for m in MODES),
    *(f"path {p}" for p in (*PATHS, REPLACED)),
    "context",
    "search_messages",
    "facts()",
    "messages()",
    "history",
    "entities()",
    "langchain retriever",
    "llamaindex retriever",
    "llamaindex memory block",
    "langgraph store",
    "other dataset",
    "other task",
    "files",
)
"""Every surface, in report order."""

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

    def probe(self, target: Target, setup: ConversationSetup) -> None:
        if target.skipped is not None:
            return
        op, mem, scope = target.operation, self.mem, target.scope

        def record(surface: str, leaked: bool, query: str = "") -> None:
            self.tally.record(op, surface, leaked, target=target.fact_id, query=query)

        copies = {f"iso-{c}" for c in target.cited} if self.control else set()
        for query in target.queries:
            for mode in MODES:
                found = mem.search(query, scope=scope, mode=mode, k=PROBE_K)
                record(f"search {mode}", any(hit_leaks(h, target) for h in found), query)
            for path in self.paths[(scope.key, target.fact_id)]:
                skip = [p for p in (*PATHS, REPLACED, *_NOT_A_PATH) if p != path]
                found = mem.search(query, scope=scope, mode="deep", k=PROBE_K, exclude_paths=skip)
                if path in found.paths:
                    record(f"path {path}", any(hit_leaks(h, target) for h in found), query)
            context = mem.context(query, scope=scope, k=PROBE_K)
            leaked = any(hit_leaks(h, target) for h in context.hits)
            record("context", leaked or text_leaks(context.text, target), query)
            if op in ("purge", "delete"):
                evidence = mem.search_messages(query, scope=scope, k=PROBE_K)
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
            chain, index, block = self.adapters(scope)
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
            text = self._loop.run_until_complete(
                block.aget([ChatMessage(role="user", content=query)])
            )
            record("llamaindex memory block", text_leaks(text, target), query)
            for surface, other in (
                ("other dataset", setup.other_dataset),
                ("other task", setup.other_task),
            ):
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
        self._listings(target, record)

    def _listings(self, target: Target, record: Callable[..., None]) -> None:
        mem, scope, op = self.mem, target.scope, target.operation
        erased = op in ("purge", "delete")
        facts = mem.facts(scope=scope, include_inactive=erased)
        record("facts()", any(f.id in target.fact_ids for f in facts))
        if not erased:
            return
        messages = mem.messages(scope=scope)
        record(
            "messages()",
            any(
                m.id in target.message_ids
                or (m.message.source_id or "") in target.source_ids
                or any(n in m.message.text for n in target.needles)
                for m in messages
            ),
        )
        if op != "purge":
            return
        history = mem.history(target.fact_id, scope=scope)
        record(
            "history",
            any(f.id in target.fact_ids for f in history.facts)
            or any(n in history.text() for n in target.needles),
        )
        if (scope.key, target.fact_id) in self.in_entities:
            listed = [e.model_dump(mode="json") for e in mem.entities(scope=scope)]
            record("entities()", any(n in json.dumps(listed) for n in target.needles))

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
