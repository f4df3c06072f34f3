"""The MCP server, driven by the SDK's own client over stdio, as an agent host drives it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from store_templates import shared_empty_stores

from integration.served import serving
from membrain import Memory, Scope
from membrain.server import Access
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant")
OTHER = Scope(dataset="okabe", task="assistant")
TOOLS = {"search_memory", "add_memory", "get_context", "forget_memory", "trace_memory"}


def _okabes_memory(store: Path) -> None:
    with Memory(store, dense=HashingEncoder(64)) as memory:
        memory.add(
            [
                {
                    "speaker": "Okabe",
                    "text": "I adopted a cat named Kurisu.",
                    "timestamp": "2024-03-15T14:01:00Z",
                    "id": "okabe-1",
                }
            ],
            scope=OTHER,
        )


@asynccontextmanager
async def served(tmp_path: Path, *, traced: bool = False) -> AsyncIterator[ClientSession]:
    """A client of a server subprocess that owns a store holding another user's memory.

    A context manager, not a fixture: the SDK's client must be entered and exited in one task.
    """
    # Another user's memory, written before the server owns the store: a copy of one made once.
    store = shared_empty_stores().copy(tmp_path / "store", "mcp-okabe", _okabes_memory)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "membrain.server.mcp",
            "--path",
            str(store),
            "--dataset",
            SCOPE.dataset,
            "--task",
            SCOPE.task,
            "--test-encoder",
        ],
        cwd=str(Path(__file__).resolve().parents[2]),
        env={**os.environ, "MEMBRAIN_TRACE_RECALLS": "true"} if traced else None,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


async def call(client: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    structured = result.structured_content
    assert structured is not None
    return structured.get("result", structured)


async def test_tools_listed_with_descriptions(tmp_path: Path) -> None:
    async with served(tmp_path) as session:
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        for tool in listed.tools:
            assert tool.description and len(tool.description) > 80
            names = set(tool.input_schema.get("properties", {}))
            assert not names & {"dataset", "task", "session", "scope"}


async def test_add_search_context_forget(tmp_path: Path) -> None:
    async with served(tmp_path) as session:
        added = await call(
            session, "add_memory", text="I adopted a cat named Miso.", speaker="Sara"
        )
        assert added["stored"] and added["facts"]
        assert any("Miso" in text for text in added["facts"])
        await call(session, "add_memory", text="I work as a nurse in Lyon.", speaker="Sara")

        found = await call(session, "search_memory", query="What is the cat called?")
        miso = [hit for hit in found if "Miso" in hit["text"]]
        assert miso
        assert miso[0]["id"] in added["fact_ids"]
        assert miso[0]["stated_at"] and miso[0]["sources"]

        context = await session.call_tool("get_context", {"query": "Tell me about the cat."})
        assert not context.is_error
        assert "Miso" in json.dumps([c.model_dump() for c in context.content])

        forgotten = await call(
            session, "forget_memory", fact_ids=[miso[0]["id"]], reason="the user asked"
        )
        assert forgotten == [{"id": miso[0]["id"], "status": "forgotten"}]
        again = await call(session, "search_memory", query="What is the cat called?")
        assert all("Miso" not in hit["text"] for hit in again)


async def test_trace_lists_what_the_session_was_told(tmp_path: Path) -> None:
    async with served(tmp_path, traced=True) as session:
        await call(session, "add_memory", text="I adopted a cat named Miso.", speaker="Sara")
        assert await call(session, "trace_memory") == []
        found = await call(session, "search_memory", query="What is the cat called?", limit=2)
        await session.call_tool("get_context", {"query": "Tell me about the cat."})
        told = await call(session, "trace_memory")
        assert [r["query"] for r in told] == ["What is the cat called?", "Tell me about the cat."]
        assert told[0]["fact_ids"] == [hit["id"] for hit in found]
        assert told[0]["facts"] == [hit["text"] for hit in found]
        assert [r["query"] for r in await call(session, "trace_memory", limit=1)] == [
            "Tell me about the cat."
        ]


async def test_question_is_still_accepted_for_query(tmp_path: Path) -> None:
    async with served(tmp_path) as session:
        await call(session, "add_memory", text="I adopted a cat named Miso.", speaker="Sara")
        old = await call(session, "search_memory", question="What is the cat called?")
        new = await call(session, "search_memory", query="What is the cat called?")
        assert old == new and any("Miso" in hit["text"] for hit in new)
        context = await session.call_tool("get_context", {"question": "the cat"})
        assert not context.is_error
        for arguments in ({}, {"query": "the cat", "question": "the dog"}):
            result = await session.call_tool("search_memory", arguments)
            assert result.is_error, arguments


async def test_errors_are_one_line_tool_errors(tmp_path: Path) -> None:
    async with served(tmp_path) as session:
        bad = [
            ("search_memory", {"query": "cat?", "limit": 0}),  # refused by the input schema
            ("search_memory", {"query": "   "}),  # refused by MemBrain (InputError)
            ("forget_memory", {"fact_ids": ["no-such-fact"]}),
        ]
        for tool, arguments in bad:
            result = await session.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert text.strip()
            assert "Traceback" not in text and 'File "' not in text
        forget = await session.call_tool("forget_memory", {"fact_ids": ["no-such-fact"]})
        assert "no-such-fact" in forget.content[0].text  # type: ignore[union-attr]


async def test_another_scope_is_never_returned(tmp_path: Path) -> None:
    async with served(tmp_path) as session:
        await call(session, "add_memory", text="I adopted a cat named Miso.", speaker="Sara")
        for question in ("Kurisu", "Which cat did Okabe adopt?", "cat named Kurisu"):
            found = await call(session, "search_memory", query=question, limit=50)
            assert all("Kurisu" not in hit["text"] for hit in found)
            assert all("okabe-1" not in hit["sources"] for hit in found)
            context = await session.call_tool("get_context", {"query": question})
            assert "Kurisu" not in context.content[0].text  # type: ignore[union-attr]


async def test_the_tools_can_use_a_served_memory(tmp_path: Path) -> None:
    """``--url``: the agent host and the applications share the memory `membrain serve` owns."""
    keys = {"desktop": (["sara"], Access.WRITE)}
    with serving(tmp_path, keys) as memory_server:
        params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "membrain.server.mcp",
                "--url",
                memory_server.url,
                "-d",
                "sara",
                "-t",
                "mcp",
            ],
            env={**os.environ, "MEMBRAIN_API_KEY": memory_server.keys["desktop"]},
            cwd=str(Path(__file__).resolve().parents[2]),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            added = await call(
                session, "add_memory", text="I adopted a cat named Miso.", speaker="Sara"
            )
            found = await call(session, "search_memory", query="What is the cat called?")
            forgotten = await call(session, "forget_memory", fact_ids=added["fact_ids"])
        scope = Scope(dataset="sara", task="mcp")
        assert any("Miso" in text for text in added["facts"])
        assert found and found[0]["id"] in added["fact_ids"]
        assert {f["status"] for f in forgotten} == {"forgotten"}
        # the server's memory holds it, and the audit names the key
        events = memory_server.memory.audit(scope=scope, actions=["forgotten"])
        assert events and {e.actor.name for e in events} == {"desktop"}


def test_a_url_and_a_store_are_not_both_served(tmp_path: Path) -> None:
    from membrain import ConfigurationError
    from membrain.server.mcp import run

    with pytest.raises(ConfigurationError, match="either"):
        run(url="http://127.0.0.1:9574", path=tmp_path, dataset="sara", task="mcp")
    assert not any(tmp_path.iterdir())  # nothing was opened


# -- streamable HTTP asks for no credentials: loopback only --------------------------------------
@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, object]]]:
    """The servers started, recorded instead of served until stopped."""
    from mcp.server.mcpserver import MCPServer

    calls: list[tuple[str, dict[str, object]]] = []

    def record(self: MCPServer[object], transport: str = "stdio", **options: object) -> None:
        calls.append((transport, options))

    monkeypatch.setattr(MCPServer, "run", record)
    return calls


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "memory.example.org"])
def test_http_refuses_a_host_other_machines_can_reach(
    tmp_path: Path, started: list[tuple[str, dict[str, object]]], host: str
) -> None:
    from membrain import ConfigurationError
    from membrain.server.mcp import run

    store = tmp_path / "store"
    with pytest.raises(ConfigurationError, match="refusing to serve MCP"):
        run(path=store, dataset="sara", task="mcp", transport="http", host=host)
    assert not store.exists() and not started  # refused before opening anything


def test_the_commands_refuse_http_on_a_public_host(
    started: list[tuple[str, dict[str, object]]],
) -> None:
    from typer.testing import CliRunner

    from membrain.cli import app
    from membrain.server.mcp import main

    scope = ["--dataset", "sara", "--task", "mcp", "--url", "http://127.0.0.1:9"]
    public = ["--transport", "http", "--host", "0.0.0.0"]
    refused = CliRunner().invoke(app, ["mcp", *scope, *public])
    assert refused.exit_code == 1, refused.output
    assert "refusing to serve MCP" in refused.output
    with pytest.raises(SystemExit) as exited:
        main([*scope, *public])
    assert exited.value.code == 1
    assert not started


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_http_on_a_loopback_host_starts_serving(
    started: list[tuple[str, dict[str, object]]], host: str
) -> None:
    from membrain.server.mcp import run

    # a served memory's url: nothing is opened or called before the tools are
    unused = "http://127.0.0.1:9"
    run(url=unused, api_key="mb_x", dataset="sara", task="mcp", transport="http", host=host, port=0)
    assert started == [("streamable-http", {"host": host, "port": 0})]
