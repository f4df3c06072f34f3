"""The README's "Why does the agent believe that?" example runs and does what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Why does the agent believe that?") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the section has a Python example"
    return found.group(1)


def test_the_example_runs_offline_and_tells_the_story(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens ./.membrain
    exec(compile(_example(), str(README), "exec"), {"__name__": "readme"})  # noqa: S102
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
