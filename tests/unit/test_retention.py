"""The retention policy: every scope of a store, by message age, from settings too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membrain import ConfigurationError, MembrainSettings, Memory, Scope
from membrain.testing import HashingEncoder, files_holding

OLD = "2020-01-10T10:00:00Z"


def _message(text: str, timestamp: str) -> dict[str, str]:
    return {"speaker": "Sara", "text": text, "timestamp": timestamp}


def test_without_a_scope_retention_covers_every_scope_of_the_store(tmp_path: Path) -> None:
    scopes = [Scope(dataset="sara", task="a"), Scope(dataset="nate", task="b", session="s1")]
    recent = datetime.now(UTC).isoformat()
    with Memory(tmp_path, dense=HashingEncoder(64), keep_messages=timedelta(days=30)) as mem:
        for number, scope in enumerate(scopes):
            mem.add(
                [
                    _message(f"I keep a Quendarian diary number {number}.", OLD),
                    _message(f"I planted a fig tree number {number}.", recent),
                ],
                scope=scope,
            )
        result = mem.apply_retention()
        assert len(result.message_ids) == 2  # the old message of each scope
        for scope in scopes:
            left = [m.message.text for m in mem.messages(scope=scope)]
            assert len(left) == 1 and "fig" in left[0]
            assert any("Quendarian" in f.text for f in mem.facts(scope=scope))  # facts stay
    # The facts keep their text; the messages collection holds none of it any more.
    holding = [p.relative_to(tmp_path).parts[0] for p in files_holding(tmp_path, "Quendarian")]
    assert "facts" in holding and "messages" not in holding


def test_kept_forever_by_default_and_set_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(tmp_path / "a", dense=HashingEncoder(64)) as mem:
        mem.add([_message("I keep a diary.", OLD)], scope=Scope(dataset="d", task="t"))
        assert mem.keep_messages is None
        assert mem.apply_retention().message_ids == ()
        assert len(mem.messages(scope=Scope(dataset="d", task="t"))) == 1
    monkeypatch.setenv("MEMBRAIN_KEEP_MESSAGES", "P30D")
    monkeypatch.setenv("MEMBRAIN_PATH", str(tmp_path / "b"))
    assert MembrainSettings().keep_messages == timedelta(days=30)
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(64))
    with Memory.from_settings() as mem:
        assert mem.keep_messages == timedelta(days=30)
    with pytest.raises(ConfigurationError, match="keep_messages"):
        Memory(tmp_path / "c", dense=HashingEncoder(64), keep_messages=timedelta(0))
