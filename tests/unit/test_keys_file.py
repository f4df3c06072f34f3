"""The keys file stays private on every write, and its dataset names match scopes' names."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

import membrain.server
import membrain.server.keys
from membrain import Scope, operations
from membrain.cli import app
from membrain.server import Access, KeyRing, add_key, revoke_key
from membrain.server.keys import Forbidden, Grant

DECOMPOSED = "jose\u0301"  # "e" followed by a combining acute accent
COMPOSED = "jos\u00e9"  # the precomposed "é"

runner = CliRunner()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _public_keys_file(tmp_path: Path) -> Path:
    """A keys file holding one key, left readable by everyone (as an editor or `cp` may)."""
    path = tmp_path / "keys.toml"
    add_key(path, ["sara"], Access.READ, name="first")
    path.chmod(0o644)
    assert _mode(path) == 0o644
    return path


def test_adding_a_key_makes_an_existing_public_keys_file_private(tmp_path: Path) -> None:
    path = _public_keys_file(tmp_path)
    add_key(path, ["tom"], Access.WRITE, name="second")
    assert _mode(path) == 0o600
    assert [g.name for g in KeyRing.load(path).grants] == ["first", "second"]


def test_the_cli_add_makes_an_existing_public_keys_file_private(tmp_path: Path) -> None:
    path = _public_keys_file(tmp_path)
    made = runner.invoke(app, ["keys", "add", "--keys", str(path), "-d", "tom", "--name", "tom"])
    assert made.exit_code == 0, made.output
    assert _mode(path) == 0o600
    key = made.output.strip()
    assert KeyRing.load(path).authorize(key, "tom", Access.READ).name == "tom"


def test_a_new_keys_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    made = runner.invoke(app, ["keys", "add", "--keys", str(path), "-d", "sara"])
    assert made.exit_code == 0, made.output
    assert _mode(path) == 0o600


def test_revoking_a_key_leaves_the_keys_file_private(tmp_path: Path) -> None:
    path = _public_keys_file(tmp_path)
    add_key(path, ["tom"], Access.READ, name="gone")
    path.chmod(0o644)
    revoked = runner.invoke(app, ["keys", "revoke", "gone", "--keys", str(path)])
    assert revoked.exit_code == 0, revoked.output
    assert _mode(path) == 0o600
    path.chmod(0o644)
    assert revoke_key(path, "first") == 1
    assert _mode(path) == 0o600


def test_a_key_for_a_decomposed_dataset_name_authorizes_that_scope_only(tmp_path: Path) -> None:
    composed, decomposed = (Scope(dataset=n, task="t").dataset for n in (COMPOSED, DECOMPOSED))
    assert composed == COMPOSED and decomposed not in (COMPOSED, DECOMPOSED)  # two ids, two parts
    path = tmp_path / "keys.toml"
    key = add_key(path, [DECOMPOSED], Access.WRITE, name="jose")
    assert DECOMPOSED not in path.read_text(encoding="utf-8")  # stored as scopes name it
    ring = KeyRing.load(path)
    assert ring.authorize(key, decomposed, Access.WRITE).name == "jose"
    for other in (composed, "jose"):
        with pytest.raises(Forbidden):
            ring.authorize(key, other, Access.READ)


def test_a_hand_written_dataset_name_is_a_stored_part_or_a_user_id(tmp_path: Path) -> None:
    auth0 = Scope(dataset="auth0|64b7f1").dataset
    path = tmp_path / "keys.toml"
    key = add_key(path, ["placeholder"], Access.READ, name="jose")
    names = f'"{DECOMPOSED}", "auth0|64b7f1", "{auth0}", "{COMPOSED}"'
    text = path.read_text(encoding="utf-8").replace('"placeholder"', names)
    path.write_text(text, encoding="utf-8")
    (grant,) = KeyRing.load(path).grants
    assert grant.datasets == {Scope(dataset=DECOMPOSED).dataset, auth0, COMPOSED}
    assert KeyRing.load(path).authorize(key, auth0, Access.READ).name == "jose"


def test_a_grant_made_in_code_names_its_datasets_as_scopes_store_them() -> None:
    grant = Grant(name="jose", role=Access.READ, datasets=frozenset({DECOMPOSED}))
    assert grant.datasets == frozenset({Scope(dataset=DECOMPOSED).dataset})
    assert grant.covers(Scope(dataset=DECOMPOSED).dataset) and not grant.covers(COMPOSED)
    grant.check(Scope(dataset=DECOMPOSED).dataset, Access.READ)


def test_the_former_name_of_a_keys_access_warns() -> None:
    with pytest.warns(DeprecationWarning, match="Access"):
        assert membrain.server.Role is Access
    with pytest.warns(DeprecationWarning, match="Access"):
        assert membrain.server.keys.Role is Access
    assert Access is operations.Access
