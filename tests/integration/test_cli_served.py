"""The command line on a served memory: --url (or MEMBRAIN_URL) and MEMBRAIN_API_KEY."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import membrain.cli as cli
from integration.served import CONVERSATION, Served, serving
from membrain import Scope
from membrain.server.keys import Access

runner = CliRunner()
WHERE = ("-d", "sara", "-t", "cli")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {"sara-writer": (["sara"], Access.WRITE), "tom-reader": (["tom"], Access.READ)}
    with serving(tmp_path_factory.mktemp("cli-served"), keys) as state:
        yield state


def run(served: Served, *args: str, key: str = "sara-writer", env_url: bool = False) -> Result:
    env = {"MEMBRAIN_API_KEY": served.keys[key]}
    if env_url:
        env["MEMBRAIN_URL"] = served.url
        return runner.invoke(cli.app, list(args), env=env)
    return runner.invoke(cli.app, ["--url", served.url, *args], env=env)


def test_ingest_search_facts_history_and_audit_reach_the_served_memory(
    served: Served, tmp_path: Path
) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CONVERSATION))
    ingested = run(served, "ingest", str(chat), *WHERE)
    assert ingested.exit_code == 0, ingested.output
    scope = Scope(dataset="sara", task="cli")
    stored = served.memory.facts(scope=scope)
    assert stored and "2 messages stored" in ingested.output

    found = run(served, "search", "cat", *WHERE, "--json", env_url=True)
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)[0]["fact"]["id"] in {f.id for f in stored}

    listed = run(served, "facts", *WHERE, "--json")
    assert {json.loads(line)["id"] for line in listed.stdout.splitlines()} == {f.id for f in stored}
    fact = stored[0]
    shown = run(served, "show", fact.id, *WHERE, "--json")
    assert json.loads(shown.stdout)["fact"]["id"] == fact.id
    assert json.loads(shown.stdout)["sources"]
    assert run(served, "history", fact.id, *WHERE).exit_code == 0
    assert "created" in run(served, "audit", *WHERE).stdout
    assert run(served, "scopes").stdout.splitlines() == ["sara\tcli"]

    forgotten = run(served, "forget", fact.id, *WHERE, "--reason", "asked to")
    assert forgotten.exit_code == 0, forgotten.output
    assert served.memory.get(fact.id, scope=scope).status.value == "forgotten"
    exported = run(served, "export", *WHERE)
    kinds = {json.loads(line)["kind"] for line in exported.stdout.splitlines()}
    assert {"membrain-export", "message", "fact", "event"} <= kinds


def test_the_key_decides_and_what_needs_a_store_says_so(served: Served, tmp_path: Path) -> None:
    refused = run(served, "facts", *WHERE, key="tom-reader")
    assert refused.exit_code == 1 and "tom-reader" in refused.stderr
    assert run(served, "scopes", key="tom-reader").stdout == ""
    export = tmp_path / "x.jsonl"
    export.write_text('{"kind": "membrain-export", "version": 1, "dataset": "a", "task": "b"}\n')
    imported = run(served, "import", str(export))
    assert imported.exit_code == 1 and "writes a store directly" in imported.stderr
    both = run(served, "facts", *WHERE, "--path", str(tmp_path))
    assert both.exit_code == 1 and "not both" in both.stderr
