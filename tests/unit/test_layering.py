"""The core's layers hold: no upward import, no import cycle (no size cap: split by concept).

Every ``import`` in ``core/membrain`` counts, at module level or inside a function (a lazy import
is still a dependency). Layers, lowest first; a module may import its own layer and lower ones,
except that the groups of one layer may not import each other: storage and extraction are
siblings (neither needs the other), and so are retrieval and ingest (the write path reaches the
derived indexes only through the record store's listeners).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "core" / "membrain"

LAYERS: tuple[tuple[frozenset[str], ...], ...] = (
    (frozenset({"api", "temporal"}),),
    (frozenset({"embeddings"}), frozenset({"extraction"})),
    (frozenset({"backends"}),),
    (frozenset({"records"}),),
    (frozenset({"knowledge"}),),
    (frozenset({"retrieval"}), frozenset({"ingest"})),
    (frozenset({"memory"}),),
    (frozenset({"aio", "background", "binding", "files", "testing", "cli", "server", "remote"}),),
    (frozenset({"__init__", "_former_paths"}),),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(CORE.rglob("*.py"))}


def imports(path: Path, name: str) -> Iterator[tuple[str, int]]:
    """Every membrain module ``path`` imports (with the line), relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    known = modules()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from membrain.retrieval import tree`` imports the submodule when there is one.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for target in targets:
            if target == "membrain" or target.startswith("membrain."):
                yield target, node.lineno


def group_of(module: str) -> tuple[int, int]:
    """(layer, group) of a module, from its first name under ``membrain``."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for layer, groups in enumerate(LAYERS):
        for index, group in enumerate(groups):
            if top in group:
                return layer, index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: {t for t, _ in imports(path, name)} for name, path in found.items()}


def test_every_module_has_a_layer() -> None:
    for name in modules():
        group_of(name)


def test_no_upward_or_sideways_import() -> None:
    problems = []
    for name, path in modules().items():
        mine = group_of(name)
        for target, line in imports(path, name):
            theirs = group_of(target)
            upward = theirs[0] > mine[0]
            sideways = theirs[0] == mine[0] and theirs[1] != mine[1]
            if upward or sideways:
                problems.append(f"{path.relative_to(CORE.parent)}:{line} imports {target}")
    assert not problems, "\n".join(problems)


def test_storage_imports_nothing_above_it() -> None:
    forbidden = ("membrain.retrieval", "membrain.extraction", "membrain.ingest", "membrain.memory")
    forbidden += ("membrain.records", "membrain.knowledge.entities", "membrain.knowledge.facts")
    for name, path in modules().items():
        if name.startswith("membrain.backends"):
            bad = [t for t, _ in imports(path, name) if t.startswith(forbidden) or t == "membrain"]
            assert not bad, f"{name} imports {bad}"


def test_the_remote_client_imports_only_the_ground_floor() -> None:
    """A served memory's client needs records and checks, never the engine."""
    problems = []
    for name, path in modules().items():
        if name.startswith("membrain.remote"):
            for target, line in imports(path, name):
                if not target.startswith("membrain.remote") and group_of(target)[0] > 0:
                    problems.append(f"{path.relative_to(CORE.parent)}:{line} imports {target}")
    assert not problems, "\n".join(problems)


def test_importing_the_remote_client_loads_no_engine() -> None:
    probe = (
        "import sys, membrain.remote\n"
        "heavy = ('qdrant_edge', 'qdrant_client', 'fastembed', 'onnxruntime', 'tantivy')\n"
        "engine = ('membrain.backends', 'membrain.records', 'membrain.retrieval',\n"
        "          'membrain.extraction', 'membrain.ingest', 'membrain.memory')\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in heavy or m.startswith(engine)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
    # and the engine is still one attribute away
    out = subprocess.run(
        [sys.executable, "-c", "import membrain; print(membrain.Memory.__module__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "membrain.memory"


def test_no_import_cycle() -> None:
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in edges:
                continue
            if state.get(target) == 1:
                cycle = stack[stack.index(target) :] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    source = tmp_path / "lexical.py"
    source.write_text("from membrain.retrieval.base import Ranked\nimport membrain.memory\n")
    found = [t for t, _ in imports(source, "membrain.backends.lexical")]
    assert found == ["membrain.retrieval.base", "membrain.memory"]
    assert group_of("membrain.retrieval.base")[0] > group_of("membrain.backends.lexical")[0]
