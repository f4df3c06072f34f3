"""A memory and its background writers: closing drains them, settings reach a running writer."""

from __future__ import annotations

import gc
import itertools
import json
import logging
import threading
import weakref
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from writer_clock import HANG_GUARD, WorkerClock, wait_until

from membrain import ConfigurationError, MembrainError, Memory, MessageStatus, Scope
from membrain.api.config import MembrainSettings
from membrain.background import DEFAULT_IDLE_SECONDS, BackgroundWriter, flush_scope
from membrain.testing import HashingEncoder, ScriptedChatModel

ENTITIES = json.dumps({"entities": ["Sara", "Miso"]})
FACT = {"text": "[Sara] adopted a grey cat named [Miso].", "fact_ts": "2100-01-01T00:00:00Z"}
FACTS = json.dumps({"facts": [FACT]})

"""Seconds a test waits for something that must happen before it calls the code broken."""

_counter = itertools.count()


def chat(n: int, start: int = 0) -> list[dict[str, str]]:
    return [
        {
            "speaker": "Sara",
            "text": "I adopted a grey cat named Miso.",
            "timestamp": f"2024-03-15T14:{i:02d}:00Z",
            "id": f"m{i}",
        }
        for i in range(start, start + n)
    ]


def statuses(memory: Memory, scope: Scope) -> Counter[MessageStatus]:
    return Counter(m.status for m in memory.messages(scope=scope))


def problems(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for the module (creating one costs seconds, reopening it far less)."""
    path = tmp_path_factory.mktemp("lifecycle") / "store"
    Memory(path=path, dense=HashingEncoder(dim=64)).close()
    return path


def open_memory(path: Path, **options: object) -> Memory:
    return Memory(path=path, dense=HashingEncoder(dim=64), **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def shared(store: Path) -> Iterator[Memory]:
    with open_memory(store) as mem:
        yield mem


@pytest.fixture
def scope() -> Scope:
    return Scope(dataset="sara", task=f"lifecycle-{next(_counter)}")


def test_closing_the_memory_drains_its_writer(
    store: Path, scope: Scope, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="membrain"):
        with open_memory(store) as mem:
            writer = BackgroundWriter.for_memory(mem, idle_seconds=60)
            mem.add(chat(2), scope=scope, extract=False)
            writer.schedule(scope, tokens=5)  # not due for a minute
        assert not writer.alive
        assert writer.shutdown(timeout=HANG_GUARD)  # its thread has ended
        with pytest.raises(MembrainError, match="shut down"):
            writer.schedule(scope, tokens=5)
    assert problems(caplog) == []
    with open_memory(store) as mem:
        assert statuses(mem, scope) == Counter({MessageStatus.PROCESSED: 2})


def test_a_drain_cut_short_leaves_the_rest_pending_with_one_warning(
    store: Path, scope: Scope, caplog: pytest.LogCaptureFixture
) -> None:
    reached, release = threading.Event(), threading.Event()

    def held(system: str, prompt: str) -> str:
        """The model's entity reply, held until the test releases it."""
        reached.set()
        if not release.wait(HANG_GUARD):
            raise TimeoutError("the model was held and never released")
        return ENTITIES

    other = Scope(dataset="nate", task=scope.task)
    mem = open_memory(store, llm=ScriptedChatModel(entities=[held], facts=[FACTS]))
    closed = False
    try:
        writer = BackgroundWriter(mem, idle_seconds=60)
        mem.add(chat(1), scope=scope, extract=False)
        mem.add(chat(1, start=1), scope=other, extract=False)
        writer.schedule(scope, tokens=5)
        writer.schedule(other, tokens=5)
        assert writer.flush(scope, timeout=0) is False  # starts the extraction of ``scope``
        assert reached.wait(HANG_GUARD)  # the worker is inside the model call, held there
        # a reader's flush waits for the extraction under way, as long as it may
        assert flush_scope(mem, scope.without_session(), timeout=0.01) is False
        with caplog.at_level(logging.DEBUG, logger="membrain"):
            mem.close(drain_timeout=0.01)  # the held run cannot finish in time
            closed = True
            release.set()  # the run goes on against a closed store
            assert writer.shutdown(timeout=HANG_GUARD)  # and the worker stops
    finally:
        release.set()
        if not closed:
            mem.close()
    [warning] = problems(caplog)
    assert warning.levelno == logging.WARNING
    assert "2 scope(s) not extracted" in warning.getMessage()
    assert writer.runs == 1  # ``other`` was never started once the memory closed
    assert writer.failures == 0
    with open_memory(store) as mem:
        assert statuses(mem, scope) == Counter({MessageStatus.PENDING: 1})
        assert statuses(mem, other) == Counter({MessageStatus.PENDING: 1})
        mem.extract_pending(scope=scope)  # the next extraction of the scope takes them
        assert statuses(mem, scope) == Counter({MessageStatus.PROCESSED: 1})


def test_the_memory_holds_its_writers_weakly(store: Path) -> None:
    mem = open_memory(store)
    writer = BackgroundWriter.for_memory(mem)
    assert BackgroundWriter.of(mem) == [writer]
    memory_ref, writer_ref = weakref.ref(mem), weakref.ref(writer)
    mem.close()
    assert not writer.alive
    with pytest.raises(MembrainError, match="closed"):
        BackgroundWriter.for_memory(mem)  # a closed memory gets no new writer
    del mem, writer
    gc.collect()
    assert writer_ref() is None
    assert memory_ref() is None


def test_flush_scope_extracts_only_the_scope_read(shared: Memory, scope: Scope) -> None:
    first = Scope(dataset="sara", task=scope.task, session="t1")
    second = Scope(dataset="sara", task=scope.task, session="t2")
    nate = Scope(dataset="nate", task=scope.task, session="t1")
    with BackgroundWriter(shared, idle_seconds=60) as writer:
        for n, target in enumerate((first, second, nate)):
            shared.add(chat(1, start=n), scope=target, extract=False)
            writer.schedule(target, tokens=5)
        assert flush_scope(shared, first, timeout=HANG_GUARD)  # one session
        assert set(writer.pending()) == {second, nate}
        assert flush_scope(shared, scope.without_session(), timeout=HANG_GUARD)  # every session
        assert writer.pending() == {nate: 5}
        assert statuses(shared, scope) == Counter({MessageStatus.PROCESSED: 2})
        assert statuses(shared, nate) == Counter({MessageStatus.PENDING: 1})
        assert flush_scope(object(), nate, timeout=0)  # a served memory: its server extracts


def test_a_running_writer_takes_a_shorter_idle_delay(
    shared: Memory, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = WorkerClock()
    monkeypatch.setattr("membrain.background.time", SimpleNamespace(monotonic=clock.monotonic))
    writer = BackgroundWriter.for_memory(shared, idle_seconds=60)
    try:
        shared.add(chat(1), scope=scope, extract=False)
        writer.schedule(scope, tokens=5)  # due at 60
        clock.move_to(3.0)  # a follow-up question 3 s later
        assert clock.worker_decided()
        assert writer.pending() == {scope: 5}  # not extracted yet
        assert BackgroundWriter.for_memory(shared, idle_seconds=2.0) is writer  # due at 2
        assert wait_until(lambda: statuses(shared, scope)[MessageStatus.PROCESSED] == 1)
        assert BackgroundWriter.for_memory(shared).idle_seconds == 2.0  # None keeps it
    finally:
        writer.shutdown()


def test_the_idle_delay_setting(shared: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMBRAIN_WRITER_IDLE_SECONDS", raising=False)
    assert MembrainSettings().writer_idle_seconds == DEFAULT_IDLE_SECONDS
    monkeypatch.setenv("MEMBRAIN_WRITER_IDLE_SECONDS", "1.5")
    writer = BackgroundWriter.from_settings(shared)
    try:
        assert writer.idle_seconds == 1.5
        with pytest.raises(ConfigurationError):
            BackgroundWriter.for_memory(shared, idle_seconds=0)
        with pytest.raises(ConfigurationError):
            writer.configure(token_threshold=0)
        assert (writer.idle_seconds, writer.token_threshold) == (1.5, 2000)
        monkeypatch.setenv("MEMBRAIN_WRITER_IDLE_SECONDS", "0")
        with pytest.raises(ConfigurationError, match="MEMBRAIN_"):
            BackgroundWriter.from_settings(shared)
    finally:
        writer.shutdown()
