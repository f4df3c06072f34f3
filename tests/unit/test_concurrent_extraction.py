"""Concurrent extractions of one scope (a server's request threads and its writer) never
extract a message twice."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from membrain import Memory, MessageStatus, Scope
from membrain.api.models import StoredMessage
from membrain.extraction.offline import OfflineExtractor
from membrain.records import RecordStore
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant", session="s1")


class _SlowCountingExtractor(OfflineExtractor):
    """Counts the messages it is given, and takes its time (as a model does)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self._guard = threading.Lock()

    def extract(self, target, context, participants, known=()):  # type: ignore[no-untyped-def]
        with self._guard:
            self.seen.extend(m.text for m in target)
        time.sleep(0.2)
        return super().extract(target, context, participants, known)


def test_two_threads_extracting_one_scope_extract_each_message_once(tmp_path: Path) -> None:
    extractor = _SlowCountingExtractor()
    with Memory(tmp_path, dense=HashingEncoder(64), extractor=extractor) as mem:
        messages = [
            {
                "speaker": "Sara",
                "text": f"I visited museum number {i} in Porto.",
                "timestamp": f"2024-03-15T14:0{i}:00Z",
                "id": f"m{i}",
            }
            for i in range(4)
        ]
        mem.add(messages, scope=SCOPE, extract=False)
        start = threading.Barrier(3)
        results = []

        def run(call: str) -> None:
            start.wait()
            if call == "pending":
                results.append(mem.extract_pending(scope=SCOPE))
            else:  # adding them again extracts the unfinished ones too
                results.append(mem.add(messages, scope=SCOPE))

        threads = [threading.Thread(target=run, args=(c,)) for c in ("pending", "add", "pending")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

        assert sorted(extractor.seen) == sorted(m["text"] for m in messages)  # once each
        stored = mem.messages(scope=SCOPE)
        assert {m.status for m in stored} == {MessageStatus.PROCESSED}
        produced = [f for result in results for f in result.fact_ids]
        assert len(produced) == len(set(produced)) == len(mem.facts(scope=SCOPE)) == 4


def test_concurrent_adds_of_the_same_messages_store_count_and_audit_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight clients re-send one history at once: each message is stored and audited once."""
    scope = Scope(dataset="sara", task="assistant")
    history = [
        {
            "speaker": "Sara",
            "text": f"Note {i}: I water the plants.",
            "id": f"n{i}",
            "timestamp": f"2024-03-15T10:{i:02d}:00Z",
        }
        for i in range(12)
    ]
    clients = 8
    # Every client reads what is stored before any writes: the race, made certain. Under a
    # per-scope lock only one client reads at a time; the barrier then breaks and all go on.
    together = threading.Barrier(clients, timeout=0.5)
    read = RecordStore.get_messages

    def get_messages(self: RecordStore, scope: Scope, ids: Sequence[str]) -> list[StoredMessage]:
        found = read(self, scope, ids)
        with contextlib.suppress(threading.BrokenBarrierError):
            together.wait()
        return found

    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        monkeypatch.setattr(RecordStore, "get_messages", get_messages)
        results: list[int] = []

        def client() -> None:
            results.append(mem.add(history, scope=scope, extract=False).messages_stored)

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        monkeypatch.undo()
        assert len(results) == clients
        assert sum(results) == len(history)
        stored = [t for e in mem.audit(scope=scope, actions=["stored"]) for t in e.targets]
        assert sorted(stored) == sorted(m.id for m in mem.messages(scope=scope))
        assert len(stored) == len(history)
