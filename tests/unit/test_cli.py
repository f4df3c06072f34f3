from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import membrain.cli as cli
from membrain.testing import HashingEncoder, any_encoder_reranker


@pytest.fixture(autouse=True)
def fast_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    # The packaged trees read the packaged encoder's similarities; these run on any encoder.
    monkeypatch.setattr("membrain.memory.packaged_reranker", any_encoder_reranker)


runner = CliRunner()


def test_ingest_then_search(tmp_path: Path) -> None:
    data = tmp_path / "chat.json"
    data.write_text(
        json.dumps(
            [
                {
                    "speaker": "Sara",
                    "text": "I adopted a cat named Miso.",
                    "timestamp": "2024-03-15T14:01:00Z",
                    "id": "a",
                },
                {
                    "speaker": "Nate",
                    "text": "I bake sourdough bread.",
                    "timestamp": "2024-03-15T14:02:00Z",
                    "id": "b",
                },
            ]
        )
    )
    store = tmp_path / "store"
    result = runner.invoke(
        cli.app, ["ingest", str(data), "-d", "sara", "-t", "chat", "--path", str(store)]
    )
    assert result.exit_code == 0, result.output
    assert "2 messages stored" in result.output
    result = runner.invoke(
        cli.app,
        [
            "search",
            "cat name",
            "-d",
            "sara",
            "-t",
            "chat",
            "--path",
            str(store),
            "--json",
            "-k",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert hits[0]["fact"]["text"] == "[Sara] adopted a cat named [Miso]."
    assert hits[0]["sources"][0]["source_id"] == "a"
    assert hits[0]["rerank"] is not None  # expand, a chat between named people
    shown = runner.invoke(
        cli.app,
        ["search", "cat name", "-d", "sara", "-t", "chat", "--path", str(store), "-k", "1"],
    )
    assert shown.exit_code == 0, shown.output
    assert "reranker " in shown.output and "score " in shown.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ('[{"speaker": "Sara", "text": "hi"}]', "no timestamp"),
        ('{"what": 1}', "unknown format"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (
            '[{"speaker": "Sara", "text": "\\ud800", "timestamp": "2024-03-15T14:01:00Z"}]',
            "Unicode",
        ),
        (
            '[{"conversation": {"speaker_a": "A", "session_1": "hello", '
            '"session_1_date_time": "1:56 pm on 8 May, 2023"}}]',
            "must be a list of turns",
        ),
        (
            '[{"conversation": {"speaker_a": "A", "session_1": ["hello"], '
            '"session_1_date_time": "1:56 pm on 8 May, 2023"}}]',
            "must be a JSON object",
        ),
    ],
)
def test_bad_input_one_line_error(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    result = runner.invoke(
        cli.app, ["ingest", str(path), "-d", "a", "-t", "b", "--path", str(tmp_path / "s")]
    )
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]


@pytest.mark.parametrize("folder", ["none", "empty"])
def test_search_without_store_fails_cleanly(tmp_path: Path, folder: str) -> None:
    (tmp_path / "empty").mkdir()
    result = runner.invoke(
        cli.app, ["search", "q", "-d", "a", "-t", "b", "--path", str(tmp_path / folder)]
    )
    assert result.exit_code == 1
    assert "no store at" in result.stderr
    assert not (tmp_path / "none").exists() and not any((tmp_path / "empty").iterdir())


def test_keys_add_prints_a_key_once_and_serve_refuses_an_open_host(tmp_path: Path) -> None:
    keys = tmp_path / "keys.toml"
    result = runner.invoke(
        cli.app, ["keys", "add", "--keys", str(keys), "-d", "sara", "--role", "write"]
    )
    assert result.exit_code == 0, result.output
    key = result.stdout.strip()
    assert key.startswith("mb_") and key not in keys.read_text()  # only its hash is kept
    result = runner.invoke(cli.app, ["serve", "--host", "0.0.0.0", "--path", str(tmp_path / "s")])
    assert result.exit_code == 1 and "without API keys" in result.stderr
    assert not (tmp_path / "s").exists()  # refused before anything was opened


def _explode(*args: object, **kwargs: object) -> None:
    raise RuntimeError("disk on fire\nsecond line")


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_failure_is_one_line_unless_debugging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, debug: bool
) -> None:
    monkeypatch.setattr(cli.memory_commands, "load_conversations", _explode)
    argv = ["ingest", str(tmp_path / "in.json"), "-d", "a", "-t", "b"]
    result = runner.invoke(cli.app, ["--debug", *argv] if debug else argv)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1] == "error: unexpected RuntimeError: disk on fire" + (
        "" if debug else " (run again with --debug for the traceback)"
    )
    assert ("Traceback" in result.stderr) is debug
    assert len(lines) == 1 or debug


def test_the_script_entry_point_never_prints_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "app", _explode)
    monkeypatch.setitem(cli.common.tracebacks, "on", False)
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().startswith("error: unexpected RuntimeError")


def test_demo_answers_from_the_sample(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["demo", "--path", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    assert "Q: What is the name of Sara's cat?" in result.stdout
    assert "Miso" in result.stdout and "sources: s1-7" in result.stdout


def test_history_and_audit_explain_a_superseded_fact(tmp_path: Path) -> None:
    from membrain import Memory, Scope

    store = tmp_path / "store"
    scope = Scope(dataset="sara", task="chat")
    with Memory(path=store) as mem:
        added = mem.add(
            [
                {"speaker": "Sara", "text": "I live in Lisbon.", "timestamp": "2023-01-10T10:00Z"},
                # Wording no attribute reading takes: the reviewer, not the extractor, supersedes.
                {"speaker": "Sara", "text": "Home is Berlin.", "timestamp": "2024-05-02T10:00Z"},
            ],
            scope=scope,
        )
        old, new = added.fact_ids
        mem.supersede(old, [new], scope=scope, by="reviewer:ana", reason="she moved")
    result = runner.invoke(
        cli.app, ["history", new, "-d", "sara", "-t", "chat", "--path", str(store)]
    )
    assert result.exit_code == 0, result.output
    assert old in result.output and new in result.output
    assert "superseded" in result.output and "reviewer:ana" in result.output
    assert "Lisbon" in result.output and "she moved" in result.output

    as_json = runner.invoke(
        cli.app, ["history", old, "-d", "sara", "-t", "chat", "--path", str(store), "--json"]
    )
    assert as_json.exit_code == 0, as_json.output
    history = json.loads(as_json.stdout)
    assert [f["id"] for f in history["facts"]] == [old, new]
    assert history["facts"][0]["superseded_by"] == [new]

    audit = runner.invoke(
        cli.app,
        ["audit", "-d", "sara", "-t", "chat", "--path", str(store), "-a", "superseded", "--json"],
    )
    assert audit.exit_code == 0, audit.output
    events = [json.loads(line) for line in audit.stdout.splitlines()]
    assert [(e["action"], e["targets"]) for e in events] == [("superseded", [old])]
    assert events[0]["actor"] == {"kind": "reviewer", "name": "ana"}
    everything = runner.invoke(cli.app, ["audit", "-d", "sara", "-t", "chat", "--path", str(store)])
    assert "stored" in everything.output and "created" in everything.output

    missing = scope.record_id("fact", "never written")
    unknown = runner.invoke(
        cli.app, ["history", missing, "-d", "sara", "-t", "chat", "--path", str(store)]
    )
    assert unknown.exit_code == 1 and "no fact" in unknown.output
    malformed = runner.invoke(
        cli.app, ["history", "nope", "-d", "sara", "-t", "chat", "--path", str(store)]
    )
    assert malformed.exit_code == 1 and "UUID" in malformed.output
    bad = runner.invoke(
        cli.app, ["audit", "-d", "sara", "-t", "chat", "--path", str(store), "-a", "bogus"]
    )
    assert bad.exit_code == 1 and "unknown audit action" in bad.output
