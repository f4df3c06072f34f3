"""Every Python block of the documentation runs as written, and the site builds.

The documentation is ``README.md``, ``CONTRIBUTING.md`` and every page of ``docs/``. Where a
block names something the reader brings (a chat model, a graph node), this test supplies a
stand-in, and says so here:

* ``langchain_openai.ChatOpenAI`` is a scripted chat model
  (:class:`membrain.testing.ScriptedChatModel`) that extracts the quickstart's fact;
* ``llm`` is LlamaIndex's ``MockLLM``;
* ``call_model`` is a LangGraph node that answers with a fixed message.

Each block runs in a fresh folder (its ``./.membrain``), and the memories it opens are closed.
A block that is not meant to run is fenced as ``bash``, ``text`` or ``json``.
"""

from __future__ import annotations

import ast
import html
import json
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from membrain import Memory
from membrain.api.operations import OPERATIONS
from membrain.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<info>[^\n`]*)\n(?P<code>.*?)^(?P=indent)```", re.S | re.M
)
LANGUAGES = {"python", "bash", "text", "json", "toml", "mermaid"}
"""What a fence may name: ``python`` blocks run, the others are shown."""
README_MAX_LINES = 250


def fences(page: Path) -> list[tuple[str, str]]:
    """(info, code) of every fenced block of ``page``, the code dedented."""
    text = page.read_text(encoding="utf-8")
    return [(m["info"].strip(), textwrap.dedent(m["code"])) for m in FENCE.finditer(text)]


BLOCKS = [
    pytest.param(page, code, id=f"{page.relative_to(ROOT)}:{number}")
    for page in PAGES
    for number, code in enumerate(code for info, code in fences(page) if info == "python")
]


def _chat_openai(**_: Any) -> ScriptedChatModel:
    fact = {
        "text": "[Sara] adopted a cat named [Miso] [yesterday::2024-03-14].",
        "fact_ts": "2024-03-15T14:01:00Z",
    }
    return ScriptedChatModel(
        entities=[json.dumps({"entities": ["Sara", "Miso"]})],
        facts=[json.dumps({"facts": [fact]})],
    )


def _call_model(state: dict[str, Any]) -> dict[str, Any]:
    from langchain_core.messages import AIMessage  # noqa: TID251 - a stand-in, not the core

    return {"messages": [AIMessage("Noted.")]}


def _stand_ins() -> dict[str, Any]:
    from llama_index.core.llms import MockLLM  # noqa: TID251 - a stand-in, not the core

    return {"llm": MockLLM(), "call_model": _call_model}


def test_the_documentation_has_blocks() -> None:
    assert len(BLOCKS) >= 16
    readme = [info for info, _ in fences(README) if info == "python"]
    assert len(readme) >= 4  # the quickstart and one snippet per framework


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_names_a_language_the_test_knows(page: Path) -> None:
    """A Python block fenced another way (``py``, none) would never run: none is."""
    unknown = [info for info, _ in fences(page) if info not in LANGUAGES]
    assert unknown == [], f"fence as one of {sorted(LANGUAGES)}"


@pytest.mark.parametrize(("page", "code"), BLOCKS)
def test_block_runs(page: Path, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    fake = types.ModuleType("langchain_openai")
    fake.ChatOpenAI = _chat_openai  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain_openai", fake)
    namespace: dict[str, Any] = {"__name__": "docs_block", **_stand_ins()}
    try:
        exec(compile(code, str(page), "exec"), namespace)  # noqa: S102
    finally:
        for value in namespace.values():
            if isinstance(value, Memory):
                value.close()


def test_the_readme_fits_a_screen() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, "move the detail to a page of docs/"


def test_the_readme_links_only_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {m.split("#")[0] for m in re.findall(r"\]\(([^)\s]+)\)", text)}
    local = {t for t in targets if t and "://" not in t}
    assert local and all((ROOT / t).exists() for t in local), sorted(local)


def _layer_modules() -> set[str]:
    source = (ROOT / "tests" / "unit" / "test_layering.py").read_text(encoding="utf-8")
    layers = next(
        n.value
        for n in ast.parse(source).body
        if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "LAYERS" and n.value
    )
    return {str(c.value) for c in ast.walk(layers) if isinstance(c, ast.Constant)}


def _text(page: Path) -> str:
    """The words of a built page, tags dropped."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


@pytest.mark.docs
def test_the_site_builds_strictly_with_its_generated_tables(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    operations = _text(site / "guides" / "operations" / "index.html")
    for op in OPERATIONS:
        assert op.summary in operations
        if op.route is not None:
            assert f"{op.route[0]} /api/memory{op.route[1]}" in operations
    architecture = _text(site / "architecture" / "index.html")
    for module in _layer_modules() - {"__init__"}:
        assert f"membrain.{module}" in architecture
    assert "Add a storage backend" in _text(site / "contributing" / "index.html")
    assert (site / "inspector.png").exists()
    reference = _text(site / "reference" / "memory" / "index.html")
    assert "membrain.aio.AsyncMemory" in reference and "execute" in reference
    requests = _text(site / "reference" / "requests" / "index.html")
    for op in OPERATIONS:  # each operation's parameters are documented on its request
        assert op.request.__name__ in requests and op.request.__name__ in operations
