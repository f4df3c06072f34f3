"""Throughput and latency of ``membrain serve`` under concurrent clients, against embedded use.

Usage (from the repository root)::

    python benchmarks/server_load.py [--clients 8] [--seconds 20] [--ops N] \
        [--search-share 0.5] [--batch 2] [--mode fast] [--server process|thread] \
        [--encoder default|hashing] [--data FILE | --generated] [--seed 0] [--rounds 4] \
        [--json OUT]

(``python -m benchmarks.server_load`` works the same.)

What it does:

1. Loads conversations: ``--data`` (default ``../shared/data/locomo/locomo10_dev.json`` next to
   the repository, read with ``membrain.files.loaders.load_conversations``), or, when that file is
   absent or with ``--generated``, one small generated two-person conversation. Nothing is
   copied into the repository.
2. Starts a REAL server on 127.0.0.1 with a keys file holding one write key:

   * ``--server process`` (the default): ``membrain serve --path --host --port --keys`` as a
     subprocess over a fresh temporary store, with the default encoders (the packaged dense
     model and BM25) and the default offline extractor. The clients do not share a
     process (or its interpreter lock) with the server.
   * ``--server thread``: the same application (``create_app`` with a background writer) served
     by uvicorn in a thread of this process (``serve_in_thread``), over a fresh store opened
     with ``--encoder`` (``hashing``, :class:`membrain.testing.HashingEncoder`, is for smoke
     runs only: its figures say nothing about real latency).

3. Runs ``--clients`` threads, each a :class:`membrain.RemoteMemory` with its own scope
   (``dataset=load``, ``task=client<i>``) and its own conversation (client ``i`` takes
   conversation ``i`` modulo their number). Each operation is, at random (``--seed``), a search
   (share ``--search-share``: ``search(question, mode=--mode, k=10)`` where the question is the
   first words of a message the client already added) or an add of the client's next
   ``--batch`` messages with extraction (``extract=True``: stored, embedded, extracted by the
   offline extractor, answered when done). A client that has added its whole conversation
   starts it again under new message ids. The run ends after ``--seconds`` or when every client
   has done its share of ``--ops``, whichever comes first.
4. Runs the SAME workload (same operations in the same order per client) in this process
   against an embedded :class:`membrain.Memory` over another fresh store with the same encoders:
   the same threads call the Memory directly.
5. Alternates the two in ``--rounds`` rounds (each target plays ``--seconds / --rounds`` per
   round, its clients going on where they stopped), so a busy spell of this shared machine
   weighs on both alike; the figures pool every round. A single served-then-embedded run gave
   search p50 ratios from 1.2x to 2.0x on the same code within minutes.

Reported per target (served, embedded): operations done, throughput (ops/s over the wall time
from each round's start barrier to its last client's end, summed), p50 / p95 latency (ms) of
add and search, and errors (an operation that raised; the first error of each kind is kept).
Then the ratio served / embedded of the throughput and of each p50. The first operation of each
client is not timed differently: the targets are warmed with one untimed add and search in a
spare scope.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks.locomo_eval import format_table, percentile
from membrain import Memory, RemoteMemory, Scope
from membrain.api.models import Message
from membrain.background import BackgroundWriter
from membrain.files.loaders import Conversation, load_conversations
from membrain.server import KeyRing, add_key, create_app, serve_in_thread
from membrain.testing import HashingEncoder

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo10_dev.json"
HOST = "127.0.0.1"
DATASET = "load"
K = 10
QUESTION_WORDS = 12
KINDS = ("add", "search")
TARGETS = ("served", "embedded")
SERVER_START_S = 180.0
"""Seconds the server subprocess may take to answer its health check (it loads the model)."""
WARM_SCOPE = Scope(dataset=DATASET, task="warmup")


class Target(Protocol):
    """What the clients call: :class:`Memory` or :class:`RemoteMemory`."""

    def add(self, messages: Any, *, scope: Scope, extract: bool = True) -> Any: ...

    def search(self, question: str, *, scope: Scope, mode: Any = ..., k: int = 10) -> Any: ...


# -- data ----------------------------------------------------------------------------------------
_PLACES = ("Lisbon", "Kyoto", "the lake", "the climbing gym", "the farmers market", "Porto")
_THINGS = ("a red bicycle", "a vintage camera", "a sourdough starter", "a rescue dog", "a tent")
_DOINGS = ("went hiking", "took a pottery class", "ran a half marathon", "painted a sunset")


def generated_conversation(messages: int = 120, seed: int = 0) -> Conversation:
    """A small two-person conversation from templates (when no data file is given)."""
    rng = random.Random(seed)
    start = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    speakers = ("Sara", "Tom")
    out: list[Message] = []
    for n in range(messages):
        speaker = speakers[n % 2]
        template = rng.randrange(3)
        if template == 0:
            text = f"I {rng.choice(_DOINGS)} in {rng.choice(_PLACES)} last weekend."
        elif template == 1:
            text = f"My sister gave me {rng.choice(_THINGS)} for my birthday."
        else:
            text = f"I am planning to visit {rng.choice(_PLACES)} with my friend Maya in June."
        out.append(
            Message(
                speaker=speaker,
                text=text,
                timestamp=start + timedelta(minutes=7 * n),
                source_id=f"g{n}",
                addressee=speakers[(n + 1) % 2],
            )
        )
    return Conversation("generated", out, speakers)


def load_data(data: Path | None, generated: bool) -> tuple[list[Conversation], str]:
    """The conversations to replay and a label saying where they come from."""
    if generated or data is None:
        return [generated_conversation()], "generated (120 messages)"
    conversations = [c for c in load_conversations(data) if c.messages]
    total = sum(len(c.messages) for c in conversations)
    return conversations, f"{data.name} ({len(conversations)} conversations, {total} messages)"


# -- workload ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a client: an add of messages, or a search."""

    kind: str
    messages: tuple[Message, ...] = ()
    question: str = ""


def client_ops(
    conversation: Conversation, *, seed: int, search_share: float, batch: int
) -> Iterator[Op]:
    """The endless operation sequence of one client (the same for every target)."""
    rng = random.Random(seed)
    added: list[Message] = []
    position = 0
    rounds = 0
    source = conversation.messages
    while True:
        if added and rng.random() < search_share:
            words = rng.choice(added).text.split()[:QUESTION_WORDS]
            yield Op("search", question=" ".join(words) or "hello")
            continue
        chunk = source[position : position + batch]
        if rounds:
            chunk = [
                m.model_copy(update={"source_id": f"{m.source_id or i}#r{rounds}"})
                for i, m in enumerate(chunk, position)
            ]
        position += batch
        if position >= len(source):
            position, rounds = 0, rounds + 1
        added.extend(chunk)
        yield Op("add", messages=tuple(chunk))


@dataclass
class ClientResult:
    """What one client measured."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    first_error: dict[str, str] = field(default_factory=dict)


def _client(
    target: Target,
    scope: Scope,
    ops: Iterator[Op],
    *,
    mode: str,
    limit: int | None,
    barrier: threading.Barrier,
    seconds: float,
    result: ClientResult,
) -> None:
    barrier.wait()
    deadline = time.perf_counter() + seconds
    done = 0
    while time.perf_counter() < deadline and (limit is None or done < limit):
        op = next(ops)
        started = time.perf_counter()
        try:
            if op.kind == "add":
                target.add(list(op.messages), scope=scope, extract=True)
            else:
                target.search(op.question, scope=scope, mode=mode, k=K)
        except Exception as exc:  # counted and reported, the run goes on
            result.errors[op.kind] += 1
            result.first_error.setdefault(op.kind, f"{type(exc).__name__}: {exc}"[:300])
        else:
            result.latencies[op.kind].append((time.perf_counter() - started) * 1000)
        done += 1


class Workload:
    """The clients of one target: their operation streams, and what they measured so far.

    :meth:`play` runs every client for a while (or a number of operations); called again, each
    client goes on where its stream stopped, so the rounds of a run add up to one workload.
    """

    def __init__(
        self,
        make_target: Callable[[int], Target],
        conversations: Sequence[Conversation],
        *,
        clients: int,
        search_share: float,
        batch: int,
        mode: str,
        seed: int,
    ) -> None:
        self.targets = [make_target(i) for i in range(clients)]
        self.mode = mode
        for warm in self.targets[:1]:
            first = conversations[0].messages[:batch]
            warm.add(list(first), scope=WARM_SCOPE, extract=True)
            warm.search(first[0].text, scope=WARM_SCOPE, mode=mode, k=K)
        self.streams = [
            client_ops(
                conversations[i % len(conversations)],
                seed=seed + i,
                search_share=search_share,
                batch=batch,
            )
            for i in range(clients)
        ]
        self.results = [ClientResult() for _ in range(clients)]
        self.wall = 0.0

    def play(self, seconds: float, ops: int | None) -> None:
        """Run every client at once for ``seconds``, or until ``ops`` are done in all."""
        clients = len(self.targets)
        barrier = threading.Barrier(clients + 1)
        limits = [
            None if ops is None else ops // clients + (i < ops % clients) for i in range(clients)
        ]
        threads = [
            threading.Thread(
                target=_client,
                args=(self.targets[i], Scope(dataset=DATASET, task=f"client{i}"), self.streams[i]),
                kwargs={
                    "mode": self.mode,
                    "limit": limits[i],
                    "barrier": barrier,
                    "seconds": seconds,
                    "result": self.results[i],
                },
                name=f"load-client-{i}",
                daemon=True,
            )
            for i in range(clients)
        ]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        self.wall += time.perf_counter() - started

    def summary(self) -> dict[str, Any]:
        """The figures of one row, over every round played."""
        latency: dict[str, dict[str, float | int]] = {}
        errors: dict[str, int] = {}
        first_error: dict[str, str] = {}
        for kind in KINDS:
            times = [t for r in self.results for t in r.latencies[kind]]
            latency[kind] = {
                "n": len(times),
                "p50": percentile(times, 50),
                "p95": percentile(times, 95),
                "mean": sum(times) / len(times) if times else float("nan"),
            }
            errors[kind] = sum(r.errors[kind] for r in self.results)
            for r in self.results:
                if kind in r.first_error:
                    first_error.setdefault(kind, r.first_error[kind])
        done = sum(int(latency[k]["n"]) for k in KINDS)
        wall = self.wall
        return {
            "ops": done,
            "wall_s": wall,
            "ops_per_s": done / wall if wall > 0 else float("nan"),
            "latency_ms": latency,
            "errors": errors,
            "error_total": sum(errors.values()),
            "first_error": first_error,
        }


def run_workload(
    make_target: Callable[[int], Target],
    conversations: Sequence[Conversation],
    *,
    clients: int,
    seconds: float,
    ops: int | None,
    search_share: float,
    batch: int,
    mode: str,
    seed: int,
) -> dict[str, Any]:
    """Run the clients against targets from ``make_target(i)`` in one round; one row's figures."""
    workload = Workload(
        make_target,
        conversations,
        clients=clients,
        search_share=search_share,
        batch=batch,
        mode=mode,
        seed=seed,
    )
    workload.play(seconds, ops)
    return workload.summary()


# -- servers -------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _open_memory(path: Path, encoder: str) -> Memory:
    return Memory(path, dense=HashingEncoder(dim=64) if encoder == "hashing" else None)


@contextmanager
def served_in_process(root: Path, keys_file: Path) -> Iterator[str]:
    """``membrain serve`` as a subprocess over ``root / "served"``; yields its base URL."""
    port = _free_port()
    command = [
        sys.executable,
        "-c",
        "import sys; from membrain.cli import main; sys.argv[0] = 'membrain'; main()",
        "serve",
        "--path",
        str(root / "served"),
        "--host",
        HOST,
        "--port",
        str(port),
        "--keys",
        str(keys_file),
        "--log-level",
        "warning",
    ]
    log_path = root / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
                raise RuntimeError(f"membrain serve did not start:\n{tail}")
            try:
                if httpx.get(f"{url}/api/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        yield url
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def served_in_thread(root: Path, keys_file: Path, encoder: str) -> Iterator[str]:
    """The same application served by uvicorn in a thread of this process."""
    memory = _open_memory(root / "served", encoder)
    writer = BackgroundWriter.for_memory(memory)
    app = create_app(memory, keys=KeyRing.load(keys_file), writer=writer, close_memory=True)
    with serve_in_thread(app, host=HOST) as url:
        yield url


# -- run -----------------------------------------------------------------------------------------
def run(
    *,
    conversations: Sequence[Conversation],
    data_label: str,
    clients: int = 8,
    seconds: float = 20.0,
    ops: int | None = None,
    search_share: float = 0.5,
    batch: int = 2,
    mode: str = "fast",
    server: str = "process",
    encoder: str = "default",
    seed: int = 0,
    rounds: int = 4,
    log: bool = True,
) -> dict[str, Any]:
    """Run the workload on the server and embedded, in alternate rounds; every figure."""

    def say(text: str) -> None:
        if log:
            print(text, file=sys.stderr, flush=True)

    shape: dict[str, Any] = {
        "clients": clients,
        "search_share": search_share,
        "batch": batch,
        "mode": mode,
        "seed": seed,
    }
    share_s = seconds / rounds
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="membrain-load-") as tmp:
        root = Path(tmp)
        keys_file = root / "keys.toml"
        key = add_key(keys_file, [DATASET], "write", name="load")
        serving = (
            served_in_process(root, keys_file)
            if server == "process"
            else served_in_thread(root, keys_file, encoder)
        )
        say(f"starting the server ({server}) ...")
        remotes: list[RemoteMemory] = []
        with serving as url, _open_memory(root / "embedded", encoder) as memory:

            def remote(_: int) -> Target:
                client = RemoteMemory(url, api_key=key, timeout=120.0)
                remotes.append(client)
                return client

            try:
                on_server = Workload(remote, conversations, **shape)
                in_process = Workload(lambda _: memory, conversations, **shape)
                for number in range(rounds):
                    share = None if ops is None else ops // rounds + (number < ops % rounds)
                    say(f"round {number + 1}/{rounds}: served ({clients} clients on {url}) ...")
                    on_server.play(share_s, share)
                    say(f"round {number + 1}/{rounds}: embedded ({clients} threads, one Memory)")
                    in_process.play(share_s, share)
            finally:
                for client in remotes:
                    client.close()
            rows = {"served": on_server.summary(), "embedded": in_process.summary()}

    served, embedded = rows["served"], rows["embedded"]
    ratio: dict[str, float] = {
        "ops_per_s": served["ops_per_s"] / embedded["ops_per_s"]
        if embedded["ops_per_s"]
        else float("nan")
    }
    for kind in KINDS:
        base = embedded["latency_ms"][kind]["p50"]
        ratio[f"{kind}_p50"] = served["latency_ms"][kind]["p50"] / base if base else float("nan")
    return {
        "rows": [{"target": name, **rows[name]} for name in TARGETS],
        "ratio_served_to_embedded": ratio,
        "server": server,
        "encoder": "default" if server == "process" else encoder,
        "data": data_label,
        "clients": clients,
        "seconds": seconds,
        "rounds": rounds,
        "ops_limit": ops,
        "search_share": search_share,
        "batch": batch,
        "mode": mode,
        "k": K,
        "seed": seed,
        "cpus": os.cpu_count(),
    }


def _ms(value: float | int) -> str:
    return "-" if value != value else f"{value:.1f}"  # NaN: no such operation ran


def format_report(report: dict[str, Any]) -> str:
    """The printed table of a :func:`run` report."""
    header = [
        "target",
        "ops",
        "ops/s",
        "add n",
        "add p50 ms",
        "add p95 ms",
        "search n",
        "search p50 ms",
        "search p95 ms",
        "errors",
    ]
    rows = []
    for row in report["rows"]:
        lat = row["latency_ms"]
        rows.append(
            [
                row["target"],
                str(row["ops"]),
                f"{row['ops_per_s']:.1f}",
                str(lat["add"]["n"]),
                _ms(lat["add"]["p50"]),
                _ms(lat["add"]["p95"]),
                str(lat["search"]["n"]),
                _ms(lat["search"]["p50"]),
                _ms(lat["search"]["p95"]),
                str(row["error_total"]),
            ]
        )
    ratio = report["ratio_served_to_embedded"]
    lines = [
        f"membrain serve ({report['server']}, encoder {report['encoder']}) vs embedded Memory: "
        f"{report['clients']} clients, {report['seconds']:g} s"
        + (f" or {report['ops_limit']} ops" if report["ops_limit"] is not None else "")
        + f", {report['search_share']:.0%} searches (mode {report['mode']}, k={report['k']}), "
        f"adds of {report['batch']} messages with extraction; data {report['data']}",
        format_table(header, rows),
        "",
        f"served / embedded: throughput {ratio['ops_per_s']:.2f}x, add p50 "
        f"{ratio['add_p50']:.2f}x, search p50 {ratio['search_p50']:.2f}x ({report['cpus']} CPUs)",
    ]
    for row in report["rows"]:
        for kind, text in row["first_error"].items():
            lines.append(f"{row['target']} {kind} error: {text}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.server_load",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent client threads")
    parser.add_argument("--seconds", type=float, default=20.0, help="time limit per target")
    parser.add_argument("--ops", type=int, default=None, help="operation limit per target")
    parser.add_argument(
        "--search-share", type=float, default=0.5, help="share of operations that search"
    )
    parser.add_argument("--batch", type=int, default=2, help="messages per add")
    parser.add_argument("--mode", default="fast", help="retrieval mode of the searches")
    parser.add_argument(
        "--server",
        choices=["process", "thread"],
        default="process",
        help="membrain serve as a subprocess, or the app in a thread of this process",
    )
    parser.add_argument(
        "--encoder",
        choices=["default", "hashing"],
        default="default",
        help="dense encoder (hashing: smoke runs only; needs --server thread)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", type=Path, default=None, help="conversations to replay")
    source.add_argument(
        "--generated", action="store_true", help="replay a small generated conversation"
    )
    parser.add_argument("--seed", type=int, default=0, help="workload seed")
    parser.add_argument(
        "--rounds", type=int, default=4, help="alternate served and embedded this many times"
    )
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0 or args.batch < 1:
        parser.error("--clients and --batch must be positive, --seconds above 0")
    if args.rounds < 1:
        parser.error("--rounds must be positive")
    if args.ops is not None and args.ops < args.clients * args.rounds:
        parser.error("--ops must be at least --clients times --rounds")
    if args.ops is not None and args.ops < args.clients:
        parser.error("--ops must be at least --clients")
    if not 0 <= args.search_share < 1:
        parser.error("--search-share must be within [0, 1)")
    if args.encoder == "hashing" and args.server == "process":
        parser.error("--encoder hashing needs --server thread (membrain serve uses the default)")
    if args.data is not None and not args.data.is_file():
        parser.error(f"--data {args.data} is not a file")
    if args.data is None and not args.generated and DEFAULT_DATA.is_file():
        args.data = DEFAULT_DATA
    return args


def main(argv: Sequence[str] | None = None, *, log: bool = True) -> int:
    args = parse_args(argv)
    conversations, label = load_data(args.data, args.generated)
    report = run(
        conversations=conversations,
        data_label=label,
        clients=args.clients,
        seconds=args.seconds,
        ops=args.ops,
        search_share=args.search_share,
        batch=args.batch,
        mode=args.mode,
        server=args.server,
        encoder=args.encoder,
        seed=args.seed,
        rounds=args.rounds,
        log=log,
    )
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
