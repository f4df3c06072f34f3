"""The notebooks run end to end, offline, and show what they claim to show.

Each notebook is executed with nbclient in a fresh kernel, in a temporary working directory.
The kernel is the test's own interpreter, through a kernel spec written to a temporary folder,
so nothing needs ``ipykernel install`` and no kernel of the user's Jupyter setup is picked up.
A run fails on any error output, on anything written to stderr (warnings included), and when
an expected text (a fact, a cited source id, a recalled context) is missing from the outputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNEL = "membrain-test"
CELL_TIMEOUT = 120

EXPECTED: dict[str, list[str]] = {
    "accountable_memory.ipynb": [
        # Lisbon -> Berlin: the move supersedes the old belief
        "active      Sara moved to Berlin last month.",
        "superseded  Sara lives in Lisbon with Sara's partner Joao.",
        'replaced: ["Sara lives in Lisbon with Sara\'s partner Joao."]',
        "superseded  by extractor:offline-1",
        # the dispute and its review
        "dispute ['Sara adopted a cat named Miso.']",
        "open items: 0",
        "status: retracted",
        "Miso in search: False",
        # the purge: content gone, ids and actor kept
        "facts erased: 1 messages erased: 1",
        "still stored: False",
        "purged fact by reviewer:ana (Sara asked)",
        "the fact's id is kept: True",
        # the timeline's rows, then the audit trail
        "superseded 2023-01 -> 2024-04  Sara lives in Lisbon with Sara's partner Joao.",
        "active     2024-04 -> 2024-05  Sara moved to Berlin last month.",
        "<IPython.core.display.Image object>",  # the timeline drawn (a PNG output)
        "retracted        reviewer:ana         the shelter has no record",
        "review_resolved  reviewer:ana         the shelter has no record",
    ],
    "langchain_chat_memory.ipynb": [
        # the chat loop and the transcript read back from MemBrain
        "Assistant: Congratulations!",
        "HumanMessage sara-1       I adopted a grey cat named Miso yesterday.",
        # the assistant's reaction is discarded, with the reason recorded
        "(discarded: the assistant's own words, not something the user stated: Congratulations!)",
        # extracted facts, annotated
        "[Sara] adopted a grey cat named [Miso] [yesterday::",
        "[Sara's brother] [Nate] runs a bakery in [Lisbon]",
        # retriever documents cite their source messages
        "  - Sara adopted a grey cat named Miso yesterday.  (sources: ['sara-1'])",
        "  - Sara is training for the Berlin half marathon in April.  (sources: ['sara-2'])",
        "entities    ['Sara', 'Miso']",
        "sources     ['sara-1']",
        # a new thread: empty transcript, memory still found
        "thread-2 transcript: []",
        "cited: ['sara-3'] in thread-1",
    ],
    "langgraph_background_memory.ipynb": [
        "__start__ -> recall -> model -> write -> __end__",
        # the writer node did not wait: the turn is pending until the flush
        "pending   Sara       I adopted a grey cat named Miso yesterday.",
        "processed I adopted a grey cat named Miso yesterday.",
        "[Sara] adopted a grey cat named [Miso] [yesterday::",
        # the recall node's context in the new thread
        "[recalled]\n## Sara — A participant in the conversation.",
        "Sara adopted a grey cat named Miso yesterday. [",
        "[Assistant] Your cat is Miso, the grey cat you adopted.",
        # MembrainStore put / search / get
        "diet ",
        "{'text': 'Sara is vegetarian and loves spicy Thai food.'}",
        "work ",
        "{'text': \"Sara works as a nurse at the children's hospital.\"}",
        "[('profile', 'sara')]",
    ],
    "llamaindex_rag_over_memory.ipynb": [
        "4 messages stored, 4 facts extracted",
        "Nate's bakery in Lisbon sells croissants on Tuesdays.  sources=['m2']",
        # MockLLM echoes the prompt: the retrieved facts reached the LLM
        "Context information is below.",
        "Sara adopted a grey cat named Miso.",
        "Query: What is Sara's cat called?",
        "cites ['m1']",
        # the memory block: flushed turns became cited facts in the system message
        "processed Sara      I adopted a grey cat named Miso.",
        "<membrain>",
        "- said ",
        "Sara adopted a grey cat named Miso. [msg chat-1]",
        "Sara's brother Nate runs a bakery in Lisbon. [msg chat-2]",
    ],
}


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory: pytest.TempPathFactory) -> KernelSpecManager:
    """A kernel spec that runs ipykernel on this interpreter (the venv's python)."""
    kernels = tmp_path_factory.mktemp("kernels")
    spec = kernels / KERNEL
    spec.mkdir()
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "membrain notebook tests",
                "language": "python",
            }
        )
    )
    return KernelSpecManager(kernel_dirs=[str(kernels)])


def _outputs(nb: object) -> tuple[str, list[str], list[str]]:
    """All text output of the notebook, its error outputs and its stderr output."""
    texts: list[str] = []
    errors: list[str] = []
    stderr: list[str] = []
    for cell in nb.cells:  # type: ignore[attr-defined]
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            if output.output_type == "error":
                errors.append(f"{output.ename}: {output.evalue}\n" + "\n".join(output.traceback))
            elif output.output_type == "stream":
                (stderr if output.name == "stderr" else texts).append(output.text)
            elif "data" in output:
                texts.append(str(output.data.get("text/plain", "")))
    return "".join(texts), errors, stderr


def test_every_notebook_is_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_and_shows_its_results(
    name: str, kernel_specs: KernelSpecManager, tmp_path: Path
) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    manager = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=kernel_specs)
    client = nbclient.NotebookClient(
        nb,
        km=manager,
        timeout=CELL_TIMEOUT,
        startup_timeout=60,
        allow_errors=True,  # collect every error output below instead of stopping at the first
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute(cleanup_kc=True)  # shut the kernel down and close its channels

    text, errors, stderr = _outputs(nb)
    assert not errors, f"{name} raised:\n" + "\n\n".join(errors)
    assert not stderr, f"{name} wrote to stderr:\n" + "".join(stderr)
    missing = [expected for expected in EXPECTED[name] if expected not in text]
    assert not missing, f"{name}: expected output missing: {missing}\n--- output ---\n{text}"
    assert list(tmp_path.iterdir()) == [], "the notebook left files in its working directory"
