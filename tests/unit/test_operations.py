"""Every surface of a memory follows the operations table (``membrain.operations``)."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import fastapi.routing
import pytest
import typer.main

import membrain.cli as cli
from membrain import AsyncMemory, AsyncRemoteMemory, Memory, MemoryLike, RemoteMemory, Scope
from membrain.mcp_server import build_server
from membrain.operations import OPERATIONS, Access, Operation, operation
from membrain.remote.requests import REQUESTS
from membrain.server.app import API_PREFIX, create_app, route_role
from membrain.stubs import STUBS, Stub, SurfaceStub
from membrain.surface import AsyncMemoryLike, signature

OPERATIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "operations.md"
LIFECYCLE = {"close", "from_settings"}
"""Public methods of Memory that manage the object, not the memory: not operations."""
SERVED = [op for op in OPERATIONS if op.route is not None]


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
def test_async_memory_awaits_every_operation_with_the_same_parameters(op: Operation) -> None:
    method = getattr(AsyncMemory, op.name)
    assert inspect.iscoroutinefunction(method)
    assert parameters(method) == parameters(getattr(Memory, op.name))
    assert op.summary.split(".")[0] in (method.__doc__ or "")


@pytest.mark.parametrize("stub", STUBS, ids=lambda stub: stub.path.name)
def test_the_type_stubs_are_the_classes_as_they_are(stub: Stub | SurfaceStub) -> None:
    assert stub.path.read_text(encoding="utf-8") == stub.text(), "run python -m membrain.stubs"


@pytest.mark.parametrize("op", SERVED, ids=lambda op: op.name)
def test_the_remote_clients_send_every_served_operation(op: Operation) -> None:
    expected = parameters(getattr(Memory, op.name))
    assert parameters(signature(op.name)) == expected  # what the clients bind calls with
    assert parameters(getattr(RemoteMemory, op.name)) == expected
    assert parameters(getattr(AsyncRemoteMemory, op.name)) == expected
    assert inspect.iscoroutinefunction(getattr(AsyncRemoteMemory, op.name))
    assert op.name in REQUESTS


def test_the_requests_are_the_served_operations() -> None:
    assert set(REQUESTS) == {op.name for op in SERVED}


def test_every_surface_is_a_memory_like() -> None:
    assert issubclass(Memory, MemoryLike) and issubclass(RemoteMemory, MemoryLike)
    assert issubclass(AsyncMemory, AsyncMemoryLike)
    assert issubclass(AsyncRemoteMemory, AsyncMemoryLike)

    class Wrapper:  # an application's own memory, with every method
        pass

    for op in SERVED:
        setattr(Wrapper, op.name, lambda self: None)
    assert isinstance(Wrapper(), MemoryLike) and not isinstance(object(), MemoryLike)


def _routes() -> dict[tuple[str, str], Access]:
    app = create_app(Memory.__new__(Memory), keys=None)  # routes are declared, nothing opened
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    routes = contexts(app.routes) if contexts is not None else app.routes
    return {
        (method, route.path.removeprefix(API_PREFIX)): route_role(getattr(route, "route", route))
        for route in routes
        if (route.path or "").startswith(API_PREFIX)
        for method in route.methods or ()
    }


def test_the_server_serves_every_operation_with_a_route_at_its_role() -> None:
    declared = {op.route: op.role for op in SERVED}
    assert _routes() == declared


def test_the_cli_commands_and_mcp_tools_named_by_the_table_exist() -> None:
    commands = {c.name for c in typer.main.get_command(cli.app).commands.values()}  # type: ignore[attr-defined]
    assert {op.cli for op in OPERATIONS if op.cli} <= commands
    server = build_server(Memory.__new__(Memory), scope=Scope(dataset="probe", task="probe"))
    tools = {tool.name for tool in asyncio.run(server.list_tools())}
    assert {op.mcp for op in OPERATIONS if op.mcp} == tools


def test_the_operations_page_generates_its_table() -> None:
    """The page's table is the hook's (``docs/_hooks.py``), never written by hand."""
    text = OPERATIONS_PAGE.read_text(encoding="utf-8")
    assert "<!-- membrain:operations -->" in text
    assert not [line for line in text.splitlines() if re.match(r"\| `", line)]
