"""The inspection, governance and transfer commands of ``membrain`` and its options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from store_templates import copy_store
from typer.testing import CliRunner, Result

import membrain
import membrain.cli as cli
from membrain.api.models import RetrievalMode
from membrain.testing import HashingEncoder

runner = CliRunner()
CHAT = [
    {"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-15T14:01Z"},
    {"speaker": "Nate", "text": "I bake sourdough bread.", "timestamp": "2024-03-15T14:02Z"},
    {"speaker": "Sara", "text": "I live in Lisbon.", "timestamp": "2024-03-15T14:03Z"},
]
QUESTIONS = ["cat name", "Where does Sara live?", "bread"]


def _fast_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    monkeypatch.delenv("MEMBRAIN_PATH", raising=False)
    monkeypatch.delenv("MEMBRAIN_QDRANT_URL", raising=False)


@pytest.fixture(autouse=True)
def fast_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    _fast_encoder(monkeypatch)


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(cli.app, list(args), env=env)


def ok(*args: str, env: dict[str, str] | None = None) -> Result:
    result = run(*args, env=env)
    assert result.exit_code == 0, result.output
    return result


def one_line_error(result: Result, needle: str) -> None:
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store the ``ingest`` command filled with ``CHAT``, made once for the module."""
    folder = tmp_path_factory.mktemp("ingested")
    data = folder / "chat.json"
    data.write_text(json.dumps([{**m, "id": f"m{i}"} for i, m in enumerate(CHAT)]))
    path = folder / "store"
    with pytest.MonkeyPatch.context() as patch:
        _fast_encoder(patch)
        ok("ingest", str(data), "-d", "sara", "-t", "chat", "--path", str(path))
    return path


@pytest.fixture
def store(ingested: Path, tmp_path: Path) -> Path:
    """A copy of the ingested store, for one test."""
    return copy_store(ingested, tmp_path / "store")


def facts_json(
    path: Path, *extra: str, where: tuple[str, ...] = ("-d", "sara", "-t", "chat")
) -> list[dict[str, Any]]:
    result = ok("facts", *where, "--path", str(path), "--json", *extra)
    return [json.loads(line) for line in result.stdout.splitlines()]


def search_ids(path: Path) -> list[list[tuple[str, str]]]:
    found = []
    for question in QUESTIONS:
        result = ok("search", question, "-d", "sara", "-t", "chat", "--path", str(path), "--json")
        found.append([(h["fact"]["id"], h["text"]) for h in json.loads(result.stdout)])
    return found


def test_version() -> None:
    result = ok("--version")
    assert result.stdout.strip() == f"membrain {membrain.__version__}"


def test_help_has_no_rst_markup() -> None:
    names = [c.name or c.callback.__name__ for c in cli.app.registered_commands]  # type: ignore[union-attr]
    assert {"facts", "show", "forget", "scopes", "export", "import"} <= set(names)
    for args in ([], *([name] for name in names)):
        text = ok(*args, "--help").output
        for markup in ("``", ":meth:", ":class:", ":func:", ":attr:"):
            assert markup not in text, (args, markup)
        assert "<bool>" not in text, args  # a flag takes no value, and says so


def test_membrain_path_env_is_honoured(tmp_path: Path) -> None:
    data = tmp_path / "chat.json"
    data.write_text(json.dumps(CHAT))
    env = {"MEMBRAIN_PATH": str(tmp_path / "env-store")}
    ok("ingest", str(data), "-d", "sara", "-t", "chat", env=env)
    assert (tmp_path / "env-store").is_dir()
    listed = ok("facts", "-d", "sara", "-t", "chat", env=env)
    assert "adopted a cat named" in listed.stdout
    assert ok("scopes", env=env).stdout == "sara\tchat\n"
    one_line_error(run("facts", "-d", "sara", "-t", "chat"), "no store at .membrain")


def test_facts_show_forget(store: Path) -> None:
    where = ("-d", "sara", "-t", "chat", "--path", str(store))
    listed = facts_json(store)
    assert len(listed) == 3 and {f["status"] for f in listed} == {"active"}
    cat = next(f for f in listed if "cat" in f["text"])
    text = ok("facts", *where).stdout.splitlines()
    assert any(
        line.startswith(cat["id"]) and "active" in line and "stated" in line for line in text
    )
    assert any("said 2024-03-15" in line and "[Miso]" in line for line in text)

    shown = json.loads(ok("show", cat["id"], *where, "--json").stdout)
    assert shown["fact"]["id"] == cat["id"] and shown["fact"]["sources"] == cat["sources"]
    assert [s["message"]["source_id"] for s in shown["sources"]] == ["m0"]
    assert {e["name"] for e in shown["entities"]} >= {"Sara", "Miso"}
    plain = ok("show", cat["id"], *where).stdout
    assert "Sara (2024-03-15 14:01, m0): I adopted a cat named Miso." in plain
    assert "trust: stated" in plain and "entities:" in plain

    missing = cat["id"][:-4] + "0000"
    one_line_error(run("show", missing, *where), f"no fact {missing!r}")

    forgotten = ok("forget", cat["id"], *where, "--reason", "asked to", "--by", "reviewer:ana")
    assert forgotten.stdout.startswith(f"forgotten: {cat['id']}")
    assert cat["id"] not in {f["id"] for f in facts_json(store)}
    everything = {f["id"]: f["status"] for f in facts_json(store, "--all")}
    assert everything[cat["id"]] == "forgotten" and len(everything) == 3
    audit = ok("audit", *where, "-a", "forgotten", "--json").stdout.splitlines()
    event = json.loads(audit[0])
    assert event["reason"] == "asked to" and event["actor"] == {"kind": "reviewer", "name": "ana"}
    one_line_error(run("forget", missing, *where), missing)


def test_scopes(store: Path, tmp_path: Path) -> None:
    data = tmp_path / "other.json"
    data.write_text(json.dumps(CHAT[:1]))
    ok("ingest", str(data), "-d", "nate", "-t", "planner", "--path", str(store))
    assert ok("scopes", "--path", str(store)).stdout == "nate\tplanner\nsara\tchat\n"
    lines = ok("scopes", "--path", str(store), "--json").stdout.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"dataset": "nate", "task": "planner"},
        {"dataset": "sara", "task": "chat"},
    ]


def test_search_defaults_to_the_library_mode(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    original = membrain.Memory.search

    def spy(self: membrain.Memory, question: str, **kwargs: Any) -> Any:
        seen.append(kwargs["mode"])
        return original(self, question, **kwargs)

    monkeypatch.setattr(membrain.Memory, "search", spy)
    ok("search", "cat", "-d", "sara", "-t", "chat", "--path", str(store))
    ok("search", "cat", "-d", "sara", "-t", "chat", "--path", str(store), "--mode", "fast")
    assert seen == [RetrievalMode.EXPAND, RetrievalMode.FAST]


def test_export_import_between_stores(store: Path, tmp_path: Path) -> None:
    where = ("-d", "sara", "-t", "chat")
    bread = next(f for f in facts_json(store) if "bread" in f["text"])
    ok("forget", bread["id"], *where, "--path", str(store))
    dump = tmp_path / "sara.jsonl"
    ok("export", *where, "--path", str(store), "--output", str(dump))
    stdout = ok("export", *where, "--path", str(store)).stdout
    assert stdout == dump.read_text()
    assert json.loads(stdout.splitlines()[0])["kind"] == "membrain-export"

    fresh = tmp_path / "fresh"
    imported = ok("import", str(dump), "--path", str(fresh))
    assert "3 messages" in imported.stdout and "3 facts" in imported.stdout
    before = search_ids(store)
    assert all(before) and before == search_ids(fresh)
    assert bread["id"] not in {i for hits in before for i, _ in hits}
    assert facts_json(fresh, "--all") == facts_json(store, "--all")
    status = {f["id"]: f["status"] for f in facts_json(fresh, "--all")}
    assert status[bread["id"]] == "forgotten"

    again = ok("import", str(dump), "--path", str(fresh))  # done already: nothing written
    assert again.stdout == imported.stdout and facts_json(fresh, "--all") == facts_json(
        store, "--all"
    )
    one_line_error(run("import", str(dump), "--path", str(store)), "not empty")
    copied = ok("import", str(dump), "-d", "x", "--path", str(fresh))
    assert "3 facts" in copied.stdout
    copies = facts_json(fresh, "--all", where=("-d", "x", "-t", "chat"))
    assert sorted(f["text"] for f in copies) == sorted(
        f["text"] for f in facts_json(store, "--all")
    )
    assert not {f["id"] for f in copies} & {f["id"] for f in facts_json(store, "--all")}
    broken = tmp_path / "broken.jsonl"
    broken.write_text(dump.read_text() + "{oops\n")
    one_line_error(run("import", str(broken), "--path", str(tmp_path / "f2")), "not valid JSON")
    one_line_error(run("import", str(tmp_path / "none.jsonl"), "--path", str(fresh)), "cannot read")


def test_facts_of_an_unknown_scope_say_so(store: Path) -> None:
    one_line_error(
        run("facts", "-d", "nobody", "-t", "chat", "--path", str(store)),
        "no dataset 'nobody' in this memory",
    )
    one_line_error(
        run("facts", "-d", "sara", "-t", "nope", "--path", str(store)),
        "no task 'nope' in dataset 'sara' (its tasks: 'chat')",
    )
