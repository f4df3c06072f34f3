"""A running server's keys follow its keys file: added keys work, removed keys stop working,
and a change that does not load leaves the previous keys in force."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from membrain import ConfigurationError
from membrain.server import Access, KeyRing, add_key, revoke_key
from membrain.server.keys import Unauthenticated, hash_key


def _touch_later(path: Path) -> None:
    """Move the file's modification time forward (coarse file system clocks)."""
    status = path.stat()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 1_000_000_000))


def test_a_key_added_while_running_counts_from_the_next_request(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    first = add_key(path, ["sara"], Access.READ, name="first")
    ring = KeyRing.load(path)
    with pytest.raises(Unauthenticated):
        ring.authenticate("mb_not-yet")
    second = add_key(path, ["tom"], Access.WRITE, name="second")
    _touch_later(path)
    assert ring.authorize(second, "tom", Access.WRITE).name == "second"
    assert ring.authorize(first, "sara", Access.READ).name == "first"
    assert len(ring) == 2


def test_a_removed_key_stops_working(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    keep = add_key(path, ["sara"], Access.READ, name="keep")
    gone = add_key(path, ["sara"], Access.READ, name="gone")
    ring = KeyRing.load(path)
    assert ring.authenticate(gone).name == "gone"
    text = path.read_text()
    start = text.index('name = "gone"')
    path.write_text(text[: text.rindex("[[key]]", 0, start)])
    _touch_later(path)
    with pytest.raises(Unauthenticated):
        ring.authenticate(gone)
    assert ring.authenticate(keep).name == "keep"


def test_a_change_that_does_not_load_keeps_the_previous_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.toml"
    key = add_key(path, ["sara"], Access.READ, name="sara")
    ring = KeyRing.load(path)
    path.write_text(path.read_text() + "\n[[key]\nbroken")
    _touch_later(path)
    with caplog.at_level(logging.ERROR, logger="membrain.server"):
        assert ring.authenticate(key).name == "sara"
        assert ring.authenticate(key).name == "sara"
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1  # once
    assert "does not load" in caplog.text
    path.unlink()  # a vanished file also keeps the keys
    assert ring.authenticate(key).name == "sara"


def test_a_ring_made_in_code_does_not_read_any_file() -> None:
    ring = KeyRing()
    assert len(ring) == 0
    with pytest.raises(Unauthenticated):
        ring.authenticate("mb_x")


def test_revoke_removes_only_that_key_and_keeps_the_rest_as_written(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    path.write_text("# keys of the bakery app\n")
    keep = add_key(path, ["sara"], Access.READ, name="keep")
    gone = add_key(path, ["sara", "tom"], Access.WRITE, name="gone")
    last = add_key(path, ["*"], Access.ADMIN, name="last")
    ring = KeyRing.load(path)
    assert [(g.name, g.role) for g in ring.grants] == [
        ("keep", Access.READ),
        ("gone", Access.WRITE),
        ("last", Access.ADMIN),
    ]
    assert revoke_key(path, "gone") == 1
    _touch_later(path)
    assert path.read_text().startswith("# keys of the bakery app\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(Unauthenticated):
        ring.authenticate(gone)  # the running ring follows the file
    assert ring.authenticate(keep).name == "keep" and ring.authenticate(last).name == "last"
    with pytest.raises(ConfigurationError, match="no key named 'gone'"):
        revoke_key(path, "gone")
    assert [p.name for p in tmp_path.iterdir()] == ["keys.toml"]  # no staged file left


def test_the_cli_lists_and_revokes_keys(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from membrain.cli import app

    path = tmp_path / "keys.toml"
    runner = CliRunner()
    made = runner.invoke(app, ["keys", "add", "--keys", str(path), "-d", "sara", "--name", "app"])
    key = made.output.strip()
    listed = runner.invoke(app, ["keys", "list", "--keys", str(path), "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output) == {"name": "app", "role": "read", "datasets": ["sara"]}
    assert key not in listed.output and hash_key(key) not in listed.output
    revoked = runner.invoke(app, ["keys", "revoke", "app", "--keys", str(path)])
    assert revoked.exit_code == 0 and "removed 1 key" in revoked.output
    empty = runner.invoke(app, ["keys", "list", "--keys", str(path)])
    assert "(no keys)" in empty.output
    missing = runner.invoke(app, ["keys", "revoke", "app", "--keys", str(path)])
    assert missing.exit_code == 1 and "no key named 'app'" in missing.output
