"""MkDocs hooks: the pages' tables that are generated from the code.

A page holds a marker where a generated part goes:

* ``<!-- membrain:operations -->``: the operations table, from
  :data:`membrain.api.operations.OPERATIONS`;
* ``<!-- membrain:layers -->``: the core's layers and their modules, from ``LAYERS`` in
  ``tests/unit/test_layering.py`` (the test that holds them) and each module's docstring;
* ``<!-- membrain:include FILE -->...<!-- /membrain:include -->``: a file of the repository
  root (``CONTRIBUTING.md``) in place of what is between (a link to it, for readers of the
  Markdown), its links into ``docs/`` made relative to the site.

It also holds the Griffe extension mkdocstrings loads (:class:`DocstringMarkdown`): the
docstrings are Google style with Sphinx roles (``:class:`~membrain.Memory```) and ``Example:``
sections; for the site a role becomes a code span of the name it shows, and ``Example:`` is read
as an examples section (Griffe reads only the plural so), so doctest lines render as code.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core" / "membrain"
LAYERING_TEST = ROOT / "tests" / "unit" / "test_layering.py"
OPERATIONS_MARKER = "<!-- membrain:operations -->"
LAYERS_MARKER = "<!-- membrain:layers -->"
_INCLUDE = re.compile(
    r"<!-- membrain:include (?P<file>[\w.-]+) -->.*?<!-- /membrain:include -->", re.S
)
_ROLE = re.compile(r":(?:py:)?[a-z]+:`(?P<body>[^`]+)`")
_EXAMPLE = re.compile(r"^(?P<indent>\s*)Example:\s*$", re.M)

if str(ROOT / "core") not in sys.path:  # the site documents this checkout, installed or not
    sys.path.insert(0, str(ROOT / "core"))


def _shown(body: str) -> str:
    """What a Sphinx role displays: its title, or its target (the last part with ``~``)."""
    titled = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^>]+)>", body)
    if titled:
        return titled["title"]
    if body.startswith("~"):
        return body[1:].rsplit(".", 1)[-1]
    return body


def markdown(text: str) -> str:
    """``text`` with its Sphinx roles as code spans and ``Example:`` as ``Examples:``."""
    text = _ROLE.sub(lambda m: f"`{_shown(m['body'])}`", text)
    return _EXAMPLE.sub(lambda m: f"{m['indent']}Examples:", text)


class DocstringMarkdown(griffe.Extension):
    """Rewrites every docstring once the object tree is built."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **_: Any) -> None:
        """Rewrite the object's own docstring (an alias has none of its own)."""
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)


def operations_rows() -> list[str]:
    """The rows of the operations table, one per operation, in the table's order."""
    from membrain.api.operations import OPERATIONS
    from membrain.remote.common import API_PREFIX

    rows = []
    for op in OPERATIONS:
        anchor = f"{op.request.__module__}.{op.request.__name__}"
        request = f"[`{op.request.__name__}`](../reference/requests.md#{anchor})"
        http = f"`{op.route[0]} {API_PREFIX}{op.route[1]}`"
        command = f"`membrain op {op.name.replace('_', '-')}`"
        cli = f"{command}, `membrain {op.cli}`" if op.cli else command
        mcp = f"`{op.mcp}`" if op.mcp else "–"
        rows.append(
            f"| `{op.name}` | {op.summary} | {request} | {http} | {cli} | {mcp} | {op.role.value} |"
        )
    return rows


def operations_table() -> str:
    """The operations table, as Markdown."""
    head = [
        "| operation | what it does | request | HTTP | CLI | MCP | access |",
        "|---|---|---|---|---|---|---|",
    ]
    return "\n".join([*head, *operations_rows()])


def layers() -> list[list[list[str]]]:
    """``LAYERS`` of the layering test, lowest first: each layer's groups of module names."""
    tree = ast.parse(LAYERING_TEST.read_text(encoding="utf-8"))
    for node in tree.body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.value, ast.Tuple):
            continue
        if isinstance(node.target, ast.Name) and node.target.id == "LAYERS":
            return [
                [
                    sorted(str(c.value) for c in ast.walk(group) if isinstance(c, ast.Constant))
                    for group in layer.elts
                ]
                for layer in node.value.elts
                if isinstance(layer, ast.Tuple)
            ]
    raise LookupError(f"no LAYERS in {LAYERING_TEST}")


def summary(module: str) -> str:
    """The first line of a module's docstring (a package's ``__init__``)."""
    path = CORE / module / "__init__.py"
    if not path.exists():
        path = CORE / f"{module}.py"
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = markdown(doc.split("\n\n", 1)[0]).replace("\n", " ")
    if path.name == "__init__.py" and module != "__init__":  # a package: its modules too
        inside = sorted(p.stem for p in path.parent.glob("*.py") if p.stem != "__init__")
        first += " Modules: " + ", ".join(f"`{name}`" for name in inside) + "."
    return first.replace("``", "`").replace("|", "\\|")


def layers_table() -> str:
    """The layers, highest first (as a diagram reads), one row per module."""
    rows = ["| layer | module | what it holds |", "|---|---|---|"]
    found = layers()
    for number in reversed(range(len(found))):
        for index, group in enumerate(found[number]):
            label = f"{number}" if len(found[number]) == 1 else f"{number}{'abcdefgh'[index]}"
            for module in group:
                name = "membrain" if module == "__init__" else f"membrain.{module}"
                rows.append(f"| {label} | `{name}` | {summary(module)} |")
    return "\n".join(rows)


def included(name: str) -> str:
    """A root file's text, its ``docs/`` links made relative to the site's root."""
    text = (ROOT / name).read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/", "](", text)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Put the generated parts in place of their markers."""
    if OPERATIONS_MARKER in markdown:
        markdown = markdown.replace(OPERATIONS_MARKER, operations_table())
    if LAYERS_MARKER in markdown:
        markdown = markdown.replace(LAYERS_MARKER, layers_table())
    return _INCLUDE.sub(lambda m: included(m["file"]), markdown)
