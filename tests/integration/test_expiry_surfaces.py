"""Expiry on every surface: a served memory (RemoteMemory), AsyncMemory, the command line, the
inspector and the MCP add tool."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from typer.testing import CliRunner

import membrain.cli as cli
from integration.served import Served, serving
from membrain import AsyncMemory, FactStatus, InputError, Memory, Scope
from membrain.remote import RemoteAccessError
from membrain.server import create_app
from membrain.server.keys import Access
from membrain.testing import HashingEncoder

NOW = datetime.now(UTC).replace(microsecond=0)
PAST = NOW - timedelta(minutes=5)
runner = CliRunner()


def _said(text: str) -> dict[str, str]:
    return {"speaker": "Sara", "text": text, "timestamp": (NOW - timedelta(hours=1)).isoformat()}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys: dict[str, tuple[Sequence[str], Access]] = {
        "sara-writer": (["sara"], Access.WRITE),
        "tom-writer": (["tom"], Access.WRITE),
    }
    with serving(tmp_path_factory.mktemp("expiry-served"), keys) as state:
        yield state


def test_a_served_memory_takes_expiries_reads_and_sweeps_them(served: Served) -> None:
    scope = Scope(dataset="sara", task="remote")
    with served.remote() as remote:
        with pytest.raises(InputError, match="positive"):
            remote.add([_said("My door code is 4417.")], scope=scope, ttl=0)
        with pytest.raises(InputError, match="timezone-aware"):
            remote.add(
                [_said("My door code is 4417.")], scope=scope, expires_at=PAST.replace(tzinfo=None)
            )
        assert remote.messages(scope=scope) == []
        remote.add([_said("My door code is 4417.")], scope=scope, expires_at=PAST)
        remote.add([_said("I live in Porto.")], scope=scope, ttl=3600)
        facts = remote.facts(scope=scope, include_inactive=True)
        code = next(f for f in facts if "4417" in f.text)
        home = next(f for f in facts if "Porto" in f.text)
        assert code.expires_at == PAST
        assert home.expires_at is not None and home.expires_at > NOW + timedelta(minutes=50)
        assert [f.id for f in remote.facts(scope=scope)] == [home.id]
        assert not any("4417" in h.fact.text for h in remote.search("door code", scope=scope))
        assert remote.expire(scope=scope) == [code.id]
        assert remote.get(code.id, scope=scope).status is FactStatus.EXPIRED
        (event,) = remote.audit(scope=scope, actions=["expired"])
        assert str(event.actor) == "system:expiry"
        later = NOW + timedelta(days=2)
        assert remote.extend_expiry(later, fact_ids=[home.id], scope=scope) == [home.id]
        assert remote.get(home.id, scope=scope).expires_at == later
    with served.remote("tom-writer") as tom:
        with pytest.raises(RemoteAccessError) as refused:
            tom.expire(scope=scope)  # another dataset's facts
        assert refused.value.status == 403


async def test_async_memory_takes_expiries_and_sweeps(tmp_path: Path) -> None:
    scope = Scope(dataset="sara", task="async")
    async with AsyncMemory(tmp_path / "store", dense=HashingEncoder(dim=64)) as mem:
        with pytest.raises(InputError, match="not both"):
            await mem.add([_said("My door code is 4417.")], scope=scope, ttl=60, expires_at=PAST)
        await mem.add([_said("My door code is 4417.")], scope=scope, expires_at=PAST)
        await mem.add([_said("I live in Porto.")], scope=scope)
        assert [f.text for f in await mem.facts(scope=scope)] == ["[Sara] lives in [Porto]."]
        (marked,) = await mem.expire(scope=scope)
        assert (await mem.get(marked, scope=scope)).status is FactStatus.EXPIRED
        gone = await mem.apply_retention(scope=scope, at=NOW + timedelta(days=8))
        assert gone.fact_ids == (marked,) and len(gone.message_ids) == 1


def test_the_command_line_adds_with_a_ttl_and_sweeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    monkeypatch.delenv("MEMBRAIN_PATH", raising=False)
    monkeypatch.delenv("MEMBRAIN_QDRANT_URL", raising=False)
    path = tmp_path / "cli"
    scope = Scope(dataset="sara", task="cli")
    with Memory(path, dense=HashingEncoder(dim=64)) as mem:
        mem.add([_said("My door code is 4417.")], scope=scope, expires_at=PAST)
    messages = json.dumps([_said("I live in Porto.")])
    env: dict[str, str] = {}
    where = ["-d", "sara", "-t", "cli", "--path", str(path)]
    bad = runner.invoke(cli.app, ["op", "add", messages, *where, "--ttl", "0"], env=env)
    assert bad.exit_code == 1 and "positive" in bad.output
    added = runner.invoke(cli.app, ["op", "add", messages, *where, "--ttl", "3600"], env=env)
    assert added.exit_code == 0, added.output
    swept = runner.invoke(cli.app, ["expire", *where, "--json"], env=env)
    assert swept.exit_code == 0, swept.output
    (marked,) = json.loads(swept.stdout)["expired"]
    with Memory(path, dense=HashingEncoder(dim=64)) as mem:
        assert mem.get(marked, scope=scope).status is FactStatus.EXPIRED
        (home,) = mem.facts(scope=scope)
        assert home.expires_at is not None and home.expires_at > NOW + timedelta(minutes=50)
    again = runner.invoke(cli.app, ["expire", "--path", str(path)], env=env)
    assert again.exit_code == 0 and "0 facts expired" in again.output


def test_the_inspector_shows_expiries_and_marks_expired_facts(tmp_path: Path) -> None:
    scope = Scope(dataset="sara", task="inspector")
    with Memory(tmp_path / "ui", dense=HashingEncoder(dim=64)) as mem:
        mem.add([_said("My door code is 4417.")], scope=scope, expires_at=PAST)
        mem.add([_said("I live in Porto.")], scope=scope, ttl=3600)
        facts = mem.facts(scope=scope, include_inactive=True)
        code = next(f for f in facts if "4417" in f.text)
        home = next(f for f in facts if "Porto" in f.text)
        where = {"dataset": "sara", "task": "inspector"}
        with TestClient(create_app(mem, keys=None), base_url="http://localhost") as client:
            gone = client.get("/ui/fact", params={**where, "id": code.id}).text
            live = client.get("/ui/fact", params={**where, "id": home.id}).text
            listed = client.get("/ui/scope", params=where).text
            mem.expire(scope=scope)
            swept = client.get("/ui/scope", params=where).text
    assert "expired at" in gone and "expires at" not in gone
    assert "expires at" in live and "expired at" not in live
    assert 'class="badge status-expired"' in listed  # active, past its expiry: marked
    assert "fact-row status-expired" in swept  # marked expired by the sweep


async def test_the_mcp_add_tool_takes_an_expiry(tmp_path: Path) -> None:
    scope = Scope(dataset="sara", task="mcp")
    store = tmp_path / "store"
    Memory(store, dense=HashingEncoder(dim=64)).close()
    where = ["--dataset", scope.dataset, "--task", scope.task, "--test-encoder"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "membrain.server.mcp", "--path", str(store), *where],
        env=dict(os.environ),  # this checkout's code (PYTHONPATH) in the server too
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        refused = await session.call_tool(
            "add_memory", {"text": "My door code is 4417.", "expires_in_seconds": 0}
        )
        assert refused.is_error
        arguments = {"text": "My door code is 4417.", "speaker": "Sara", "expires_in_seconds": 3600}
        answered = await session.call_tool("add_memory", arguments)
        assert not answered.is_error and answered.structured_content is not None
        added = answered.structured_content
        assert added["fact_ids"]
    with Memory(store, dense=HashingEncoder(dim=64)) as mem:
        assert len(mem.messages(scope=scope)) == 1  # the refused call wrote nothing
        (fact,) = mem.facts(scope=scope, ids=added["fact_ids"])
        assert fact.expires_at is not None
        assert NOW + timedelta(minutes=50) < fact.expires_at < NOW + timedelta(hours=2)
