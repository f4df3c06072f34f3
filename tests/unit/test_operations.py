"""Every surface of a memory is made from the operations table (``membrain.api.operations``).

One declaration per operation: its request model (parameters, defaults, limits, docs), its
result, its access and how it is exposed. ``Memory``, ``AsyncMemory``, both remote clients, the
HTTP routes, the MCP tools and the ``membrain op`` commands are derived from it, which a toy
operation declared here proves on each of them.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, ClassVar

import fastapi.routing
import httpx
import pytest
import typer.main
from fastapi.testclient import TestClient
from pydantic import Field
from typer.testing import CliRunner

import membrain.cli as cli
from membrain import AsyncMemory, AsyncRemoteMemory, Memory, MemoryLike, RemoteMemory, Scope
from membrain.api.errors import InputError
from membrain.api.operations import OPERATIONS, Access, Operation, operation
from membrain.api.requests import Filters, OperationRequest, ScopeField
from membrain.api.stubs import STUBS, SurfaceStub
from membrain.api.surface import AsyncMemoryLike, signature
from membrain.cli.operation_commands import command_name
from membrain.server.app import API_PREFIX, create_app, route_role
from membrain.server.mcp import build_server
from membrain.testing import HashingEncoder, any_encoder_reranker

OPERATIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "operations.md"
LIFECYCLE = {"close", "from_settings", "execute"}
"""Public methods of Memory that manage the object, not the memory: not operations."""
SCOPE = Scope(dataset="sara", task="toy")


def parameters(function: Any) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) of each parameter: what a caller can pass, and how."""
    found = function if isinstance(function, inspect.Signature) else inspect.signature(function)
    return [(p.name, p.kind, p.default) for p in found.parameters.values()]


def public_methods(cls: type) -> set[str]:
    return {n for n, v in inspect.getmembers(cls) if not n.startswith("_") and callable(v)}


def test_the_table_is_every_operation_of_memory() -> None:
    names = [op.name for op in OPERATIONS]
    assert len(names) == len(set(names))
    assert set(names) == public_methods(Memory) - LIFECYCLE
    assert operation("search").role is Access.READ
    with pytest.raises(KeyError):
        operation("nope")


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_every_surface_has_the_operation_with_its_requests_parameters(op: Operation) -> None:
    expected = parameters(signature(op))
    assert [name for name, _, _ in expected[1:]] == [
        *op.request.positional,
        *(f for f in op.request.model_fields if f not in op.request.positional),
    ]
    for surface in (Memory, RemoteMemory):
        assert parameters(getattr(surface, op.name)) == expected
        assert not inspect.iscoroutinefunction(getattr(surface, op.name))
    for surface in (AsyncMemory, AsyncRemoteMemory):
        assert parameters(getattr(surface, op.name)) == expected
        assert inspect.iscoroutinefunction(getattr(surface, op.name))
    assert op.summary.split(".")[0] in (getattr(Memory, op.name).__doc__ or "")
    assert op.request.__doc__ and op.request.__doc__.strip()


def test_every_memory_implements_every_operation() -> None:
    missing = [op.name for op in OPERATIONS if not hasattr(Memory, f"_run_{op.name}")]
    assert missing == []


@pytest.mark.parametrize("stub", STUBS, ids=lambda stub: stub.path.name)
def test_the_type_stub_is_the_table_as_it_is(stub: SurfaceStub) -> None:
    assert stub.path.read_text(encoding="utf-8") == stub.text(), "run python -m membrain.api.stubs"


def test_nothing_reads_a_stub_at_run_time() -> None:
    core = Path(__file__).resolve().parents[2] / "core" / "membrain"
    readers = [
        p.name
        for p in core.rglob("*.py")
        if p.name != "stubs.py" and re.search(r"\.pyi[\"']", p.read_text(encoding="utf-8"))
    ]
    assert readers == []


def test_every_surface_is_a_memory_like() -> None:
    assert issubclass(Memory, MemoryLike) and issubclass(RemoteMemory, MemoryLike)
    assert issubclass(AsyncMemory, AsyncMemoryLike)
    assert issubclass(AsyncRemoteMemory, AsyncMemoryLike)

    class Wrapper:  # an application's own memory, with every method
        pass

    for op in OPERATIONS:
        setattr(Wrapper, op.name, lambda self: None)
    assert isinstance(Wrapper(), MemoryLike) and not isinstance(object(), MemoryLike)


def _routes(app: fastapi.FastAPI) -> dict[tuple[str, str], Access]:
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    routes = contexts(app.routes) if contexts is not None else app.routes
    return {
        (method, route.path.removeprefix(API_PREFIX)): route_role(getattr(route, "route", route))
        for route in routes
        if (route.path or "").startswith(API_PREFIX)
        for method in route.methods or ()
    }


def test_the_server_serves_every_operation_at_its_route_with_its_access() -> None:
    app = create_app(Memory.__new__(Memory), keys=None)  # routes are declared, nothing opened
    assert _routes(app) == {op.route: op.role for op in OPERATIONS}


def test_the_commands_and_mcp_tools_follow_the_table() -> None:
    group = typer.main.get_command(cli.app)
    commands = set(group.commands)  # type: ignore[attr-defined]
    assert {op.cli for op in OPERATIONS if op.cli} <= commands
    generated = set(group.commands["op"].commands)  # type: ignore[attr-defined]
    assert generated == {command_name(op) for op in OPERATIONS}
    server = build_server(Memory.__new__(Memory), scope=Scope(dataset="probe", task="probe"))
    tools = {tool.name for tool in asyncio.run(server.list_tools())}
    assert {op.mcp for op in OPERATIONS if op.mcp} == tools


def test_the_operations_page_generates_its_table() -> None:
    """The page's table is the hook's (``docs/_hooks.py``), never written by hand."""
    text = OPERATIONS_PAGE.read_text(encoding="utf-8")
    assert "<!-- membrain:operations -->" in text
    assert not [line for line in text.splitlines() if re.match(r"\| `", line)]


# -- a toy operation, declared here once, on every surface ---------------------------------
class EchoRequest(OperationRequest):
    """Say a short word back, as many times as asked, with the number of facts of the scope."""

    positional: ClassVar[tuple[str, ...]] = ("word",)
    word: str = Field(max_length=8, description="At most 8 characters.")
    scope: ScopeField
    times: int = Field(1, ge=1, le=3, description="1 to 3.")
    filters: Filters = None


ECHO = Operation(
    "echo",
    "Say a word back.",
    EchoRequest,
    list[str],
    Access.READ,
    ("POST", "/echo"),
    mcp="echo_word",
)


def _run_echo(self: Memory, request: EchoRequest) -> list[str]:
    return [request.word] * request.times + [str(len(self.facts(scope=request.scope)))]


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> Iterator[Operation]:
    monkeypatch.setattr(Memory, "_run_echo", _run_echo, raising=False)
    with OPERATIONS.declared(ECHO) as op:
        yield op
    assert (
        not hasattr(Memory, "echo")
        and "echo" not in typer.main.get_command(cli.app).commands["op"].commands
    )  # type: ignore[attr-defined]


@pytest.fixture
def toy_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # the command line opens the store with the default encoder: the hashing one here
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    monkeypatch.setattr("membrain.memory.packaged_reranker", any_encoder_reranker)
    store = tmp_path / "store"
    with Memory(store, dense=HashingEncoder(64)) as memory:
        memory.add(
            [{"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-15"}],
            scope=SCOPE,
        )
    return store


class _Counting(httpx.BaseTransport):
    """A transport into a test client, counting what reaches the server."""

    def __init__(self, client: TestClient) -> None:
        self.client, self.sent = client, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        url = str(request.url).removeprefix("http://127.0.0.1")
        answer = self.client.request(
            request.method, url, content=request.content, headers=dict(request.headers)
        )
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)


DEEP: Any = {"a": {"eq": 1}}
for _ in range(63):
    DEEP = {"and": [DEEP]}


def test_a_toy_operation_is_on_every_surface_from_its_declaration(
    echo: Operation, toy_store: Path
) -> None:
    with Memory(toy_store, dense=HashingEncoder(64)) as memory:
        assert memory.echo("miso", scope=SCOPE, times=2) == ["miso", "miso", "1"]  # type: ignore[attr-defined]
        amemory = AsyncMemory.from_memory(memory)
        assert asyncio.run(amemory.echo("miso", scope=SCOPE)) == ["miso", "1"]  # type: ignore[attr-defined]

        app = create_app(memory, keys=None)
        assert ("POST", "/echo") in _routes(app)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            raw = client.post(
                API_PREFIX + "/echo", json={"word": "a", "dataset": "sara", "task": "toy"}
            )
            assert raw.status_code == 200 and raw.json() == ["a", "1"]
            assert "echo" in json.dumps(app.openapi()["paths"][API_PREFIX + "/echo"])
            remote = RemoteMemory("http://127.0.0.1", transport=_Counting(client))
            assert remote.echo("b", scope=SCOPE, times=3) == ["b"] * 3 + ["1"]  # type: ignore[attr-defined]

        async def served_async() -> list[str]:
            transport = httpx.ASGITransport(app=app)
            async with AsyncRemoteMemory("http://127.0.0.1", transport=transport) as aremote:
                return await aremote.echo("c", scope=SCOPE)  # type: ignore[attr-defined,no-any-return]

        assert asyncio.run(served_async()) == ["c", "1"]

        server = build_server(memory, scope=SCOPE)
        tools = {tool.name: tool for tool in asyncio.run(server.list_tools())}
        assert set(tools["echo_word"].input_schema["properties"]) == {"word", "times", "filters"}
        called = asyncio.run(server.call_tool("echo_word", {"word": "d", "times": 1}))
        assert "d" in json.dumps(called.model_dump(mode="json"))

    result = CliRunner().invoke(
        cli.app,
        ["op", "echo", "e", "-d", "sara", "-t", "toy", "--times", "2", "--path", str(toy_store)],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == ["e", "e", "1"]


@pytest.mark.parametrize(
    "arguments, refused",
    [
        ({"word": "far too long"}, "at most 8 characters"),
        ({"word": "ok", "times": 4}, "less than or equal to 3"),
        ({"word": "ok", "filters": DEEP}, "nested"),
    ],
    ids=["length", "range", "depth"],
)
def test_a_declared_limit_is_refused_alike_on_every_surface_before_anything_runs(
    echo: Operation, toy_store: Path, arguments: dict[str, Any], refused: str
) -> None:
    ran: list[str] = []
    with Memory(toy_store, dense=HashingEncoder(64)) as memory:
        memory.__dict__["_run_echo"] = lambda request: ran.append("ran") or []  # type: ignore[func-returns-value]
        word = arguments.pop("word")
        for call in (
            lambda: memory.echo(word, scope=SCOPE, **arguments),  # type: ignore[attr-defined]
            lambda: asyncio.run(
                AsyncMemory.from_memory(memory).echo(word, scope=SCOPE, **arguments)
            ),  # type: ignore[attr-defined]
        ):
            with pytest.raises(InputError, match=refused):
                call()
        app = create_app(memory, keys=None)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            transport = _Counting(client)
            remote = RemoteMemory("http://127.0.0.1", transport=transport)
            with pytest.raises(InputError, match=refused):
                remote.echo(word, scope=SCOPE, **arguments)  # type: ignore[attr-defined]

            async def served_async() -> None:
                async with AsyncRemoteMemory(
                    "http://127.0.0.1", transport=httpx.ASGITransport(app=app)
                ) as aremote:
                    await aremote.echo(word, scope=SCOPE, **arguments)  # type: ignore[attr-defined]

            with pytest.raises(InputError, match=refused):
                asyncio.run(served_async())
            assert transport.sent == 0  # refused before anything was sent
            body = {"word": word, "dataset": "sara", "task": "toy", **arguments}
            raw = client.post(API_PREFIX + "/echo", json=body)
            assert raw.status_code == 422 and raw.json()["type"] == "InputError"
            assert re.search(refused, raw.json()["error"])
        server = build_server(memory, scope=SCOPE)
        with pytest.raises(Exception, match=refused):
            asyncio.run(server.call_tool("echo_word", {"word": word, **arguments}))
    options = [f"--{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in arguments.items()]
    result = CliRunner().invoke(
        cli.app, ["op", "echo", word, "-d", "sara", "-t", "toy", *options, "--path", str(toy_store)]
    )
    assert result.exit_code == 1 and re.search(refused, result.output)
    assert ran == []


_ = Annotated  # the request's annotations
