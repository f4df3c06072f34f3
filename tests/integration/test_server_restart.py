"""The server as a separate process: a graceful stop flushes the writer, a kill loses nothing.

The server runs in a subprocess over an embedded store with the test ``HashingEncoder`` (the
same application ``membrain serve`` builds: ``create_app`` with a background writer and
``close_memory=True``, served by ``uvicorn.run``), so that it can be stopped by signals.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from membrain import Memory, Scope
from membrain.api.models import MessageStatus
from membrain.server import add_key
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="restart", task="ingest")
BODY_SCOPE = {"dataset": SCOPE.dataset, "task": SCOPE.task}
START_S = 60.0

SERVER = """
import sys

import uvicorn

from membrain import Memory
from membrain.background import BackgroundWriter
from membrain.server import KeyRing, create_app
from membrain.testing import HashingEncoder

path, keys_file, port, idle = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
memory = Memory(path, dense=HashingEncoder(dim=64))
writer = BackgroundWriter.for_memory(memory, token_threshold=10**9, idle_seconds=idle)
app = create_app(memory, keys=KeyRing.load(keys_file), writer=writer, close_memory=True)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", ws="none")
"""

_PLACES = ("Lisbon", "Kyoto", "the lake", "the climbing gym", "Porto", "the farmers market")


def conversation(count: int) -> list[dict[str, str]]:
    """``count`` messages with ids ``m0``, ``m1``, ... that the offline extractor keeps."""
    start = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    return [
        {
            "id": f"m{n}",
            "speaker": ("Sara", "Tom")[n % 2],
            "text": f"I went hiking near {_PLACES[n % len(_PLACES)]} with my cousin number {n}.",
            "timestamp": (start + timedelta(minutes=n)).isoformat(),
        }
        for n in range(count)
    ]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]


@dataclass
class Setup:
    root: Path
    store: Path
    keys_file: Path
    key: str
    servers: list[Server] = field(default_factory=list)

    def start(self, *, idle_seconds: float = 300.0) -> Server:
        """A server over ``store``, answering its health check."""
        port = _free_port()
        log = self.root / f"server-{len(self.servers)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    SERVER,
                    str(self.store),
                    str(self.keys_file),
                    str(port),
                    str(idle_seconds),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = Server(process, f"http://127.0.0.1:{port}", log)
        self.servers.append(server)
        deadline = time.monotonic() + START_S
        while True:
            assert process.poll() is None, f"the server exited:\n{server.output()}"
            assert time.monotonic() < deadline, f"the server did not start:\n{server.output()}"
            try:
                if httpx.get(f"{server.url}/api/health", timeout=1.0).status_code == 200:
                    return server
            except httpx.HTTPError:
                pass
            time.sleep(0.05)

    def client(self, server: Server) -> httpx.Client:
        return httpx.Client(
            base_url=f"{server.url}/api/memory",
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=60.0,
        )


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    keys_file = tmp_path / "keys.toml"
    key = add_key(keys_file, [SCOPE.dataset], "write", name="restart")
    state = Setup(root=tmp_path, store=tmp_path / "store", keys_file=keys_file, key=key)
    yield state
    for server in state.servers:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(timeout=30)


def _stored(client: httpx.Client) -> list[dict[str, object]]:
    response = client.get("/messages", params=BODY_SCOPE)
    assert response.status_code == 200, response.text
    messages: list[dict[str, object]] = response.json()
    return messages


def _source_id(stored: dict[str, object]) -> str:
    message = stored["message"]
    assert isinstance(message, dict)
    source = message["source_id"]
    assert isinstance(source, str)
    return source


def test_sigterm_flushes_the_background_writer_before_exit(setup: Setup) -> None:
    messages = conversation(12)
    server = setup.start(idle_seconds=300.0)  # the writer never extracts on its own here
    with setup.client(server) as client:
        for start in range(0, len(messages), 3):
            body = {**BODY_SCOPE, "messages": messages[start : start + 3], "extract": False}
            response = client.post("/add", json=body)
            assert response.status_code == 200, response.text
            assert response.json()["scheduled"] is True
            assert response.json()["messages_stored"] == 3
        held = _stored(client)
    assert len(held) == len(messages)
    assert {m["status"] for m in held} == {MessageStatus.PENDING.value}, "extracted too early"

    server.process.send_signal(signal.SIGTERM)
    try:
        code = server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server did not exit within 30 s of SIGTERM:\n{server.output()}")
    # uvicorn re-raises the SIGTERM it caught once its graceful shutdown (lifespan included)
    # is over, so a clean stop ends with that signal; any other status is a crash
    assert code in (0, -signal.SIGTERM), server.output()
    assert "Traceback" not in server.output()

    with Memory(setup.store, dense=HashingEncoder(dim=64)) as memory:
        stored = memory.messages(scope=SCOPE)
        facts = memory.facts(scope=SCOPE)
    assert sorted(m.message.source_id or "" for m in stored) == sorted(m["id"] for m in messages)
    assert [m.message.source_id for m in stored if m.status != MessageStatus.PROCESSED] == []
    assert facts, "the flushed extraction stored no fact"


@dataclass
class Sender:
    """Adds batches from several threads; remembers which batches were acknowledged."""

    setup: Setup
    server: Server
    batches: list[list[dict[str, str]]]
    acknowledged: set[int] = field(default_factory=set)
    failed: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, lane: int, lanes: int) -> None:
        with self.setup.client(self.server) as client:
            for index in range(lane, len(self.batches), lanes):
                body = {**BODY_SCOPE, "messages": self.batches[index], "extract": True}
                try:
                    ok = client.post("/add", json=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                with self.lock:
                    (self.acknowledged if ok else self.failed).add(index)


def test_sigkill_mid_ingest_then_replay_loses_and_duplicates_nothing(setup: Setup) -> None:
    messages = conversation(240)
    batches = [messages[i : i + 2] for i in range(0, len(messages), 2)]
    server = setup.start()
    sender = Sender(setup, server, batches)
    lanes = 4
    threads = [threading.Thread(target=sender.run, args=(n, lanes)) for n in range(lanes)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(sender.acknowledged) < 12 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=30)
    for thread in threads:
        thread.join(timeout=60)
    acknowledged = {m["id"] for i in sender.acknowledged for m in batches[i]}
    assert len(acknowledged) >= 24, server.output()
    assert sender.failed, "the kill came after every add: nothing was in flight"

    restarted = setup.start()
    with setup.client(restarted) as client:
        after_kill = {_source_id(m): m for m in _stored(client)}
        lost = sorted(acknowledged - set(after_kill))
        assert lost == [], f"acknowledged messages lost by the kill: {lost}"
        unprocessed = sorted(
            i for i in acknowledged if after_kill[i]["status"] != MessageStatus.PROCESSED.value
        )
        assert unprocessed == [], f"acknowledged (extracted) adds left unprocessed: {unprocessed}"

        for batch in batches:  # the client retries everything, with the same message ids
            body = {**BODY_SCOPE, "messages": batch, "extract": True}
            response = client.post("/add", json=body)
            assert response.status_code == 200, response.text
            assert response.json()["errors"] == []

        stored = _stored(client)
        sources = Counter(_source_id(m) for m in stored)
        assert [s for s, n in sources.items() if n > 1] == [], "duplicate messages"
        assert set(sources) == {m["id"] for m in messages}
        assert {m["status"] for m in stored} == {MessageStatus.PROCESSED.value}

        response = client.get("/facts", params=BODY_SCOPE)
        assert response.status_code == 200, response.text
        facts = response.json()
    assert facts, "no fact was extracted"
    keys = Counter((f["text"], tuple(sorted(f["sources"]))) for f in facts)
    assert [k for k, n in keys.items() if n > 1] == [], "duplicate facts"
