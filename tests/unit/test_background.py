"""BackgroundWriter: scheduling never waits, triggers, flush, shutdown, crash recovery."""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
from writer_clock import HANG_GUARD, WorkerClock, wait_until

from membrain import MembrainError, Memory, Message, MessageStatus, Scope
from membrain.background import BackgroundWriter
from membrain.extraction import ExtractionBatch, OfflineExtractor
from membrain.testing import HashingEncoder, ScriptedChatModel

SCOPE = Scope(dataset="sara", task="assistant")
ENTITIES = json.dumps(
    {"entities": ["Sara", "Miso"], "descriptions": {"Sara": "A person.", "Miso": "Sara's cat."}}
)
FACTS = json.dumps(
    {
        "facts": [
            # a fact_ts after every message points at the batch's latest message
            {"text": "[Sara] adopted a grey cat named [Miso].", "fact_ts": "2100-01-01T00:00:00Z"}
        ]
    }
)
ROOT = Path(__file__).resolve().parents[2]

"""Seconds a test waits for something that must happen before it calls the code broken."""


def chat(n: int, start: int = 0) -> list[dict[str, str]]:
    sentences = [
        "I adopted a grey cat named Miso.",
        "My sister Lina lives in Lisbon.",
        "I bake croissants every Tuesday.",
        "My brother Tom plays the cello.",
        "I visited Porto with my friend Ana.",
        "My neighbour Rui repairs bicycles.",
        "I started a pottery class with Eva.",
        "My cousin Leo moved to Berlin.",
    ]
    return [
        {
            "speaker": "Sara",
            "text": sentences[i % len(sentences)],
            "timestamp": f"2024-03-15T14:{i:02d}:00Z",
            "id": f"m{i}",
        }
        for i in range(start, start + n)
    ]


def statuses(memory: Memory, scope: Scope = SCOPE) -> Counter[MessageStatus]:
    return Counter(m.status for m in memory.messages(scope=scope))


_counter = itertools.count()


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("background") / "store"
    with Memory(path=path, dense=HashingEncoder(dim=64), batch_size=2) as mem:
        yield mem


@pytest.fixture
def memory(shared_memory: Memory) -> Memory:
    """One store for the module (opening one costs a second); each test has its own scope."""
    return shared_memory


@pytest.fixture
def scope() -> Scope:
    return Scope(dataset="sara", task=f"assistant-{next(_counter)}")


class Gate:
    """Model replies that hold extraction inside the model call while the gate is closed."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        """Set when a reply was asked for since the gate was closed."""
        self.held_too_long = False
        """A reply gave up waiting: something waited for the model instead of moving on."""
        self._open = threading.Event()
        self._open.set()

    def close(self) -> None:
        self.reached.clear()
        self.held_too_long = False
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def reply(self, text: str) -> Callable[[str, str], str]:
        def answer(system: str, prompt: str) -> str:
            self.reached.set()
            if self.held_too_long or not self._open.wait(HANG_GUARD):  # give up once, at most
                self.held_too_long = True
                raise TimeoutError("the model was held and never released")
            return text

        return answer


@pytest.fixture(scope="module")
def gate() -> Gate:
    return Gate()


@pytest.fixture
def closed_gate(gate: Gate) -> Iterator[Gate]:
    """The gate of ``gated_memory``'s model, closed for one test."""
    gate.close()
    try:
        yield gate
    finally:
        gate.open()


@pytest.fixture(scope="module")
def gated_memory(tmp_path_factory: pytest.TempPathFactory, gate: Gate) -> Iterator[Memory]:
    """A memory whose model answers only while ``gate`` is open."""
    llm = ScriptedChatModel(entities=[gate.reply(ENTITIES)], facts=[FACTS])
    path = tmp_path_factory.mktemp("gated") / "store"
    with Memory(path=path, dense=HashingEncoder(dim=64), llm=llm) as mem:
        yield mem


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> WorkerClock:
    """A clock that stands still unless the test moves it, for the writers of one test."""
    fake = WorkerClock()
    monkeypatch.setattr("membrain.background.time", SimpleNamespace(monotonic=fake.monotonic))
    return fake


def test_schedule_never_waits_for_an_extraction_under_way(
    gated_memory: Memory, closed_gate: Gate, scope: Scope
) -> None:
    with BackgroundWriter(gated_memory, idle_seconds=0.01) as writer:
        gated_memory.add(chat(1), scope=scope, extract=False)
        writer.schedule(scope, tokens=10)
        assert closed_gate.reached.wait(HANG_GUARD)  # the worker is inside the model call
        assert writer.runs == 1
        # a new turn is stored and scheduled while the model is held
        gated_memory.add(chat(1, start=1), scope=scope, extract=False)
        writer.schedule(scope, tokens=10)
        assert not closed_gate.held_too_long  # neither schedule waited for the model
        assert statuses(gated_memory, scope) == Counter({MessageStatus.PENDING: 2})
        closed_gate.open()
        assert writer.flush(timeout=HANG_GUARD)
    assert statuses(gated_memory, scope) == Counter({MessageStatus.PROCESSED: 2})
    assert len(gated_memory.facts(scope=scope)) >= 1


def test_token_threshold_triggers_extraction(
    memory: Memory, scope: Scope, clock: WorkerClock
) -> None:
    with BackgroundWriter(memory, token_threshold=10, idle_seconds=0.5) as writer:
        memory.add(chat(1), scope=scope, extract=False)
        writer.schedule(scope, tokens=6)
        clock.move_to(0.1)  # never as far as the idle deadline: only tokens can trigger
        assert clock.worker_decided()
        assert writer.pending() == {scope: 6}  # 6 of 10 tokens: not due
        assert writer.runs == 0
        memory.add(chat(1, start=1), scope=scope, extract=False)
        writer.schedule(scope, tokens=6)
        assert wait_until(lambda: statuses(memory, scope) == Counter({MessageStatus.PROCESSED: 2}))
        assert writer.runs == 1
        assert writer.pending() == {}


def test_idle_interval_triggers_extraction(
    memory: Memory, scope: Scope, clock: WorkerClock
) -> None:
    with BackgroundWriter(memory, token_threshold=10**6, idle_seconds=0.5) as writer:
        memory.add(chat(2), scope=scope, extract=False)
        writer.schedule(scope, tokens=5)  # idle at 0.5
        clock.move_to(0.3)
        writer.schedule(scope, tokens=5)  # activity re-arms the idle timer: idle at 0.8
        clock.move_to(0.6)  # 0.6 after the first schedule, 0.3 after the last
        assert clock.worker_decided()
        assert writer.pending() == {scope: 10}
        assert writer.runs == 0
        assert statuses(memory, scope) == Counter({MessageStatus.PENDING: 2})
        clock.move_to(0.9)
        assert wait_until(lambda: statuses(memory, scope) == Counter({MessageStatus.PROCESSED: 2}))
        assert writer.runs == 1


def test_flush_extracts_now_and_waits(memory: Memory, scope: Scope) -> None:
    other = Scope(dataset="nate", task=scope.task, session="t1")
    backlog = Scope(dataset="ana", task=scope.task)
    with BackgroundWriter(memory, token_threshold=10**6, idle_seconds=60) as writer:
        memory.add(chat(2), scope=scope, extract=False)
        memory.add(chat(1, start=2), scope=other, extract=False)
        writer.schedule(scope, tokens=5)
        writer.schedule(other, tokens=5)
        assert writer.flush(other)
        assert statuses(memory, other) == Counter({MessageStatus.PROCESSED: 1})
        assert statuses(memory, scope) == Counter({MessageStatus.PENDING: 2})
        assert writer.flush()
        assert statuses(memory, scope) == Counter({MessageStatus.PROCESSED: 2})
        # a scope never scheduled in this process: flush(scope) still extracts its backlog
        memory.add(chat(1, start=5), scope=backlog, extract=False)
        assert writer.flush(backlog)
        assert statuses(memory, backlog)[MessageStatus.PROCESSED] == 1


def test_flush_times_out_while_the_model_is_held(
    gated_memory: Memory, closed_gate: Gate, scope: Scope
) -> None:
    with BackgroundWriter(gated_memory, idle_seconds=60) as writer:
        gated_memory.add(chat(1), scope=scope, extract=False)
        writer.schedule(scope, tokens=5)
        assert writer.flush(timeout=0.05) is False  # the model is held: it cannot finish
        assert closed_gate.reached.wait(HANG_GUARD)  # the flush did start the extraction
        closed_gate.open()
        assert writer.flush(timeout=HANG_GUARD) is True
    assert statuses(gated_memory, scope) == Counter({MessageStatus.PROCESSED: 1})


def test_shutdown_flushes_and_stops(memory: Memory, scope: Scope) -> None:
    writer = BackgroundWriter.for_memory(memory, token_threshold=10**6, idle_seconds=60)
    assert BackgroundWriter.for_memory(memory) is writer
    memory.add(chat(3), scope=scope, extract=False)
    writer.schedule(scope, tokens=5)
    assert writer.shutdown(timeout=20)
    assert not writer.alive
    assert statuses(memory, scope) == Counter({MessageStatus.PROCESSED: 3})
    assert writer.shutdown() is True  # idempotent
    with pytest.raises(MembrainError, match="shut down"):
        writer.schedule(scope, tokens=1)
    with pytest.raises(MembrainError, match="shut down"):
        writer.flush()
    replacement = BackgroundWriter.for_memory(memory)
    assert replacement is not writer and replacement.alive
    replacement.shutdown()


def test_extraction_errors_are_logged_and_messages_stay_pending(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    llm = ScriptedChatModel(entities=[TimeoutError("model down"), ENTITIES], facts=[FACTS])
    with (
        Memory(path=tmp_path / "s", dense=HashingEncoder(dim=64), llm=llm, max_attempts=1) as mem,
        BackgroundWriter(mem, idle_seconds=60) as writer,
    ):
        mem.add(chat(1), scope=SCOPE, extract=False)
        writer.schedule(SCOPE, tokens=5)
        with caplog.at_level(logging.WARNING, logger="membrain"):
            assert writer.flush(timeout=20)
        assert writer.failures == 1
        assert "left 1 batch(es) pending" in caplog.text
        [stored] = mem.messages(scope=SCOPE)
        assert stored.status is MessageStatus.PENDING
        assert stored.error and "model down" in stored.error
        assert writer.alive
        assert writer.flush(SCOPE, timeout=20)  # the next extraction of the scope retries
        assert statuses(mem) == Counter({MessageStatus.PROCESSED: 1})


class _CrashingExtractor:
    """The offline extractor, except that its ``crash_on``-th call dies mid-batch."""

    def __init__(self, crash_on: int) -> None:
        self._inner = OfflineExtractor()
        self._crash_on = crash_on
        self.calls = 0

    @property
    def id(self) -> str:
        return self._inner.id

    def extract(
        self, target: Sequence[Message], context: Sequence[Message], participants: Sequence[str]
    ) -> ExtractionBatch:
        self.calls += 1
        if self.calls == self._crash_on:
            raise RuntimeError("worker killed mid-batch")
        return self._inner.extract(target, context, participants)


def reference_facts(memory: Memory, messages: list[dict[str, str]]) -> Counter[str]:
    """The facts of one uninterrupted extraction of ``messages`` (same batch size)."""
    scope = Scope(dataset="sara", task=f"reference-{next(_counter)}")
    memory.add(messages, scope=scope)
    return Counter(f.text for f in memory.facts(scope=scope))


def assert_extracted_once(mem: Memory, expected: Counter[str], n: int) -> None:
    assert statuses(mem) == Counter({MessageStatus.PROCESSED: n})
    facts = mem.facts(scope=SCOPE, include_inactive=True)
    assert len({f.id for f in facts}) == len(facts)
    assert Counter(f.text for f in facts) == expected


def test_crash_mid_batch_then_restart_extracts_everything_once(
    tmp_path: Path, shared_memory: Memory
) -> None:
    messages = chat(6)
    expected = reference_facts(shared_memory, chat(7))
    path = tmp_path / "store"
    crashing = _CrashingExtractor(crash_on=2)
    with Memory(path=path, dense=HashingEncoder(dim=64), extractor=crashing, batch_size=2) as mem:
        writer = BackgroundWriter(mem, idle_seconds=60)
        mem.add(messages, scope=SCOPE, extract=False)
        writer.schedule(SCOPE, tokens=50)
        assert writer.flush(timeout=20)
        assert writer.failures == 1  # the exception was logged, the worker survived
        assert writer.alive
        assert statuses(mem) == Counter({MessageStatus.PROCESSED: 2, MessageStatus.PENDING: 4})
        writer.shutdown()
    # a new process (here: a new Memory and writer on the same path) finishes the backlog
    with Memory(path=path, dense=HashingEncoder(dim=64), batch_size=2) as mem:
        with BackgroundWriter(mem, idle_seconds=60) as writer:
            mem.add(chat(1, start=6), scope=SCOPE, extract=False)
            writer.schedule(SCOPE, tokens=5)
            assert writer.flush(timeout=20)
            assert writer.flush(SCOPE, timeout=20)  # again: nothing is extracted twice
        assert_extracted_once(mem, expected, 7)


CHILD = textwrap.dedent(
    """
    import sys, time
    from membrain import Memory, Scope
    from membrain.background import BackgroundWriter
    from membrain.extraction import OfflineExtractor
    from membrain.testing import HashingEncoder

    path, mode = sys.argv[1], sys.argv[2]
    messages = [
        {"speaker": "Sara", "text": t, "timestamp": f"2024-03-15T14:{i:02d}:00Z", "id": f"m{i}"}
        for i, t in enumerate(sys.argv[3:])
    ]

    class Slow:
        id = OfflineExtractor().id
        calls = 0
        def extract(self, target, context, participants):
            Slow.calls += 1
            if Slow.calls == 2:
                print("in-second-batch", flush=True)
                time.sleep(60)  # killed here
            return OfflineExtractor().extract(target, context, participants)

    extractor = Slow() if mode == "kill" else OfflineExtractor()
    mem = Memory(path=path, dense=HashingEncoder(dim=64), extractor=extractor, batch_size=2)
    writer = BackgroundWriter.for_memory(mem, idle_seconds=60)
    mem.add(messages, scope=Scope(dataset="sara", task="assistant"), extract=False)
    writer.schedule(Scope(dataset="sara", task="assistant"), tokens=50)
    if mode == "kill":
        writer.flush(timeout=0.01)
        time.sleep(60)
    print("exiting", flush=True)  # normal exit: the atexit hook flushes the buffer
    """
)


def run_child(path: Path, mode: str, texts: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), mode, *texts],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def test_killed_process_leaves_messages_pending_for_the_next_one(
    tmp_path: Path, shared_memory: Memory
) -> None:
    messages = chat(6)
    expected = reference_facts(shared_memory, messages)
    path = tmp_path / "store"
    child = run_child(path, "kill", [m["text"] for m in messages])
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "in-second-batch"
        child.kill()  # SIGKILL: no atexit, no flush, mid-batch
    finally:
        child.wait(timeout=20)
        if child.stdout is not None:
            child.stdout.close()
    with Memory(path=path, dense=HashingEncoder(dim=64), batch_size=2) as mem:
        assert statuses(mem) == Counter({MessageStatus.PROCESSED: 2, MessageStatus.PENDING: 4})
        with BackgroundWriter(mem, idle_seconds=60) as writer:
            assert writer.flush(SCOPE, timeout=20)
        assert_extracted_once(mem, expected, 6)


def test_atexit_flushes_the_buffer(tmp_path: Path) -> None:
    path = tmp_path / "store"
    child = run_child(path, "exit", ["I adopted a grey cat named Miso."])
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0, out
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        assert statuses(mem) == Counter({MessageStatus.PROCESSED: 1})


def test_for_memory_is_one_writer_per_memory(memory: Memory) -> None:
    writer = BackgroundWriter.for_memory(memory)
    try:
        assert BackgroundWriter.for_memory(memory) is writer
        results: list[BackgroundWriter] = []
        threads = [
            threading.Thread(target=lambda: results.append(BackgroundWriter.for_memory(memory)))
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(r is writer for r in results)
    finally:
        writer.shutdown()


def test_rejects_bad_settings(memory: Memory) -> None:
    from membrain import ConfigurationError

    with pytest.raises(ConfigurationError):
        BackgroundWriter(memory, token_threshold=0)
    with pytest.raises(ConfigurationError):
        BackgroundWriter(memory, idle_seconds=0)
