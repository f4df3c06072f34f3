"""BackgroundWriter: scheduling never waits, triggers, flush, shutdown, crash recovery."""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

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


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


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


@pytest.fixture(scope="module")
def slow_llm() -> ScriptedChatModel:
    return ScriptedChatModel(entities=[ENTITIES], facts=[FACTS], delay=0.3)


@pytest.fixture(scope="module")
def slow_memory(
    tmp_path_factory: pytest.TempPathFactory, slow_llm: ScriptedChatModel
) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("slow") / "store"
    with Memory(path=path, dense=HashingEncoder(dim=64), llm=slow_llm) as mem:
        yield mem


def test_schedule_returns_at_once_while_a_slow_model_extracts(
    slow_memory: Memory, slow_llm: ScriptedChatModel, scope: Scope
) -> None:
    with BackgroundWriter(slow_memory, idle_seconds=0.01) as writer:
        slow_memory.add(chat(1), scope=scope, extract=False)
        started = time.perf_counter()
        writer.schedule(scope, tokens=10)
        assert time.perf_counter() - started < 0.1
        assert wait_until(lambda: writer.runs > 0)
        time.sleep(0.05)
        # the worker is inside a 0.3 s model call now: a new turn is stored and scheduled at once
        slow_memory.add(chat(1, start=1), scope=scope, extract=False)
        started = time.perf_counter()
        writer.schedule(scope, tokens=10)
        assert time.perf_counter() - started < 0.1
        assert statuses(slow_memory, scope)[MessageStatus.PENDING] >= 1
        assert writer.flush(timeout=20)
    assert statuses(slow_memory, scope) == Counter({MessageStatus.PROCESSED: 2})
    assert len(slow_memory.facts(scope=scope)) >= 1


def test_token_threshold_triggers_extraction(memory: Memory, scope: Scope) -> None:
    with BackgroundWriter(memory, token_threshold=10, idle_seconds=60) as writer:
        memory.add(chat(1), scope=scope, extract=False)
        writer.schedule(scope, tokens=6)
        time.sleep(0.3)
        assert writer.runs == 0
        assert writer.pending() == {scope: 6}
        memory.add(chat(1, start=1), scope=scope, extract=False)
        writer.schedule(scope, tokens=6)
        assert wait_until(lambda: statuses(memory, scope) == Counter({MessageStatus.PROCESSED: 2}))
        assert writer.runs == 1
        assert writer.pending() == {}


def test_idle_interval_triggers_extraction(memory: Memory, scope: Scope) -> None:
    with BackgroundWriter(memory, token_threshold=10**6, idle_seconds=1.0) as writer:
        memory.add(chat(2), scope=scope, extract=False)
        writer.schedule(scope, tokens=5)
        time.sleep(0.6)
        writer.schedule(scope, tokens=5)  # activity re-arms the idle timer
        time.sleep(0.6)  # 1.2 s after the first schedule, 0.6 s after the last
        assert writer.runs == 0
        assert statuses(memory, scope) == Counter({MessageStatus.PENDING: 2})
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


def test_flush_times_out_on_a_slow_model(slow_memory: Memory, scope: Scope) -> None:
    with BackgroundWriter(slow_memory, idle_seconds=60) as writer:
        slow_memory.add(chat(1), scope=scope, extract=False)
        writer.schedule(scope, tokens=5)
        assert writer.flush(timeout=0.05) is False
        assert writer.flush(timeout=20) is True
    assert statuses(slow_memory, scope) == Counter({MessageStatus.PROCESSED: 1})


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
