"""Every Python block of the README runs as written.

Where a block names something the reader brings (a chat model, a graph node), this test supplies
a stand-in, and says so here:

* ``langchain_openai.ChatOpenAI`` is a scripted chat model
  (:class:`membrain.testing.ScriptedChatModel`) that extracts the quickstart's fact;
* ``llm`` is LlamaIndex's ``MockLLM``;
* ``call_model`` is a LangGraph node that answers with a fixed message.

Each block runs in a fresh folder (its ``./.membrain``), and the memories it opens are closed.
"""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from membrain import Memory
from membrain.testing import ScriptedChatModel

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = [m.group(1) for m in re.finditer(r"```python\n(.*?)```", README.read_text(), re.S)]


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


def test_the_readme_has_blocks() -> None:
    assert len(BLOCKS) >= 7


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_block_runs(number: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    fake = types.ModuleType("langchain_openai")
    fake.ChatOpenAI = _chat_openai  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain_openai", fake)
    namespace: dict[str, Any] = {"__name__": f"readme_block_{number}", **_stand_ins()}
    try:
        exec(compile(BLOCKS[number], f"{README}:block {number}", "exec"), namespace)  # noqa: S102
    finally:
        for value in namespace.values():
            if isinstance(value, Memory):
                value.close()
