"""The example of "Why does the agent believe that?" runs and does what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "accountability.md"


def _example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert text.startswith("# Why does the agent believe that?\n")
    found = re.search(r"```python\n(.*?)```", text, re.S)
    assert found, "the page opens with a Python example"
    return found.group(1)


def test_the_example_runs_offline_and_tells_the_story(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens ./.membrain
    exec(compile(_example(), str(PAGE), "exec"), {"__name__": "docs"})  # noqa: S102
    lines = capsys.readouterr().out.splitlines()
    now, then, believed = lines[:3]
    assert "Berlin" in now and "Lisbon" not in now
    assert "Lisbon" in then
    assert "Lisbon" in believed
    history = "\n".join(lines[3:-1])
    assert "superseded" in history and "reviewer:ana" in history and "Sara moved" in history
    actions = lines[-1]
    for action in ("superseded", "disputed", "review_requested", "confirmed", "review_resolved"):
        assert f"'{action}'" in actions
