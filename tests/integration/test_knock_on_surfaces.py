"""Knock-on review items on every surface: served, async, the command line and the inspector."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import membrain.cli as cli
from integration.served import Served, serving
from membrain import AsyncMemory, FactStatus, Memory, Scope
from membrain.api.audit import ReviewKind
from membrain.api.models import Fact, Trust
from membrain.server import Access, create_app
from membrain.testing import HashingEncoder

BEFORE = [
    {"speaker": "Sara", "text": "I live in Lisbon.", "timestamp": "2024-01-01T10:00:00Z"},
    {
        "speaker": "Sara",
        "text": "I walk to the Lisbon office every day.",
        "timestamp": "2024-02-01T10:00:00Z",
    },
    {"speaker": "Sara", "text": "I have a cat named Miso.", "timestamp": "2024-02-01T10:05:00Z"},
]
MOVED = [{"speaker": "Sara", "text": "I moved to Oslo.", "timestamp": "2024-05-01T10:00:00Z"}]
REASON = "may be outdated: Lisbon → Oslo"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {"sara-writer": (["sara"], Access.WRITE)}
    with serving(tmp_path_factory.mktemp("knock-on-served"), keys) as state:
        yield state


def office_of(facts: list[Fact]) -> str:
    (found,) = [f.id for f in facts if "office" in f.text]
    return found


@pytest.mark.parametrize("accept", [True, False])
def test_the_served_queue_shows_and_resolves_it(served: Served, accept: bool) -> None:
    scope = Scope(dataset="sara", task=f"served-{accept}")
    with served.remote() as remote:
        remote.add(BEFORE, scope=scope)
        remote.add(MOVED, scope=scope)
        (item,) = remote.review_queue(scope=scope)
        office = office_of(remote.facts(scope=scope))
        assert (item.kind, item.reason, item.fact_ids) == (ReviewKind.KNOCK_ON, REASON, (office,))
        remote.resolve(item, accept=accept, note="asked Sara")
        assert remote.review_queue(scope=scope) == []
        after = remote.get(office, scope=scope)
    if accept:
        assert after.status is FactStatus.SUPERSEDED and after.superseded_by == item.new
    else:
        assert (after.status, after.trust) == (FactStatus.ACTIVE, Trust.CONFIRMED)
        (event,) = served.memory.audit(scope=scope, actions=["confirmed"])
        assert event.reason == "still holds after Lisbon → Oslo (asked Sara)"
        assert (event.actor.kind.value, event.actor.name) == ("reviewer", "sara-writer")


async def test_async_memory_resolves_it(tmp_path: Path) -> None:
    scope = Scope(dataset="sara", task="async")
    async with AsyncMemory(path=tmp_path / "store", dense=HashingEncoder(64)) as mem:
        await mem.add(BEFORE, scope=scope)
        await mem.add(MOVED, scope=scope)
        (item,) = await mem.review_queue(scope=scope)
        assert item.reason == REASON
        await mem.resolve(item.id, accept=True, scope=scope)
        (office,) = await mem.facts(scope=scope, ids=list(item.fact_ids), include_inactive=True)
        assert office.status is FactStatus.SUPERSEDED


def test_the_command_line_lists_and_resolves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    path = str(tmp_path / "store")
    with Memory(path=path) as mem:
        mem.add(BEFORE, scope=Scope(dataset="sara", task="cli"))
        mem.add(MOVED, scope=Scope(dataset="sara", task="cli"))
    where = ["-d", "sara", "-t", "cli", "--path", path]
    runner = CliRunner()
    listed = runner.invoke(cli.app, ["op", "review-queue", *where])
    assert listed.exit_code == 0, listed.output
    (item,) = json.loads(listed.stdout)
    assert (item["kind"], item["reason"]) == ("knock_on", REASON)
    done = runner.invoke(cli.app, ["op", "resolve", item["id"], "--no-accept", *where])
    assert done.exit_code == 0, done.output
    with Memory(path=path) as mem:
        (office,) = mem.facts(scope=Scope(dataset="sara", task="cli"), ids=item["fact_ids"])
        assert office.trust is Trust.CONFIRMED


def test_the_inspector_page_shows_it_with_both_buttons(tmp_path: Path) -> None:
    scope = Scope(dataset="sara", task="inspected")
    with Memory(path=tmp_path / "store", dense=HashingEncoder(64)) as mem:
        mem.add(BEFORE, scope=scope)
        mem.add(MOVED, scope=scope)
        (item,) = mem.review_queue(scope=scope)
        app = create_app(mem, keys=None)
        with TestClient(app, base_url="http://localhost") as client:
            query = {"dataset": "sara", "task": "inspected"}
            html = client.get("/ui/review", params=query).text
            assert "Do these facts still hold after the change?" in html
            assert "knock_on" in html and "“may be outdated: Lisbon → Oslo”" in html
            assert 'value="accept"' in html and 'value="reject"' in html
            assert "walks to the Lisbon office" in html and "moved to Oslo" in html
            (csrf,) = set(re.findall(r'name="csrf" value="([^"]+)"', html))
            form = {**query, "item": item.id, "decision": "reject", "csrf": csrf}
            assert client.post("/ui/review", data=form).status_code < 400
        assert mem.review_queue(scope=scope) == []
        (office,) = mem.facts(scope=scope, ids=list(item.fact_ids))
        assert office.trust is Trust.CONFIRMED
