"""The type stub of the surfaces, written from the operations table: ``membrain/api/surface.pyi``.

:class:`~membrain.api.surface.MemoryLike` and :class:`~membrain.api.surface.AsyncMemoryLike` get
their methods at run time, one per operation of :data:`membrain.api.operations.OPERATIONS`, made
from its request model; type checkers and IDEs read them from this stub. Each parameter is a field
of the request, annotated with what a caller may pass (the field's
:class:`~membrain.api.requests.Accepts`, else its type); the result is the operation's. Nothing
reads the stub at run time. Run ``python -m membrain.api.stubs`` after changing an operation
(``tests/unit/test_operations.py`` fails while the stub is stale).
"""

from __future__ import annotations

import re
import sys
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import membrain.api.requests
import membrain.api.surface
from membrain.api.operations import OPERATIONS, Operation
from membrain.api.requests import Accepts

__all__ = ["STUBS", "SurfaceStub"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BUILTIN = {"str", "int", "float", "bool", "bytes", "object", "None", "tuple", "list", "dict"}


@dataclass(frozen=True)
class SurfaceStub:
    """The stub of :mod:`membrain.api.surface`: every operation, blocking and awaitable."""

    @property
    def path(self) -> Path:
        """``membrain/api/surface.pyi``."""
        return Path(membrain.api.surface.__file__).with_suffix(".pyi")

    def text(self) -> str:
        """The text of the stub, from the operations table as it is now."""
        names: dict[str, str] = {"Any": "typing", "Self": "typing"}
        blocking, awaitable = [], []
        for op in OPERATIONS:
            signature = _signature(op, names)
            blocking.append(f"def {op.name}{signature}: ...")
            awaitable.append(f"async def {op.name}{signature}: ...")
        names["OperationRequest"] = "membrain.api.requests"
        blocking += [
            "def execute(self, request: OperationRequest) -> Any: ...",
            "def close(self) -> None: ...",
            "def __enter__(self) -> Self: ...",
            "def __exit__(self, *exc: object) -> None: ...",
        ]
        awaitable += [
            "async def execute(self, request: OperationRequest) -> Any: ...",
            "async def aclose(self) -> None: ...",
            "async def close(self) -> None: ...",
            "async def __aenter__(self) -> Self: ...",
            "async def __aexit__(self, *exc: object) -> None: ...",
        ]
        names.update(inspect="", Operation="membrain.api.operations")
        classes = []
        for cls, body in (
            (membrain.api.surface.MemoryLike, blocking),
            (membrain.api.surface.AsyncMemoryLike, awaitable),
        ):
            summary = (cls.__doc__ or "").strip().splitlines()[0]
            classes += [f"class {cls.__name__}:\n", f'    """{summary}"""\n\n']
            classes += [f"    {line}\n" for line in body]
            classes.append("\n")
        listed = ", ".join(f'"{name}"' for name in membrain.api.surface.__all__)
        return "".join(
            [
                '"""Type stub of membrain.api.surface: written by `python -m membrain.api.stubs`, '
                'do not edit."""\n\n',
                "from __future__ import annotations\n\n",
                *_imports(names),
                f"\n__all__ = [{listed}]\n\n",
                *classes,
                "def signature(op: Operation | str) -> inspect.Signature: ...\n",
                "def request_of(op: Operation, args: tuple[Any, ...], kwargs: dict[str, Any]) "
                "-> OperationRequest: ...\n",
            ]
        )


STUBS: tuple[SurfaceStub, ...] = (SurfaceStub(),)
"""Every generated stub."""


def _signature(op: Operation, names: dict[str, str]) -> str:
    model = op.request
    positional = [name for name in model.positional]
    keyword = [name for name in model.model_fields if name not in positional]
    parts = ["self"]
    for index, name in enumerate([*positional, *keyword]):
        if index == len(positional) and keyword:
            parts.append("*")
        field = model.model_fields[name]
        accepts = next((m for m in reversed(field.metadata) if isinstance(m, Accepts)), None)
        text = _accepted(accepts.annotation, names) if accepts else _render(field.annotation, names)
        default = "" if field.is_required() else " = ..."
        parts.append(f"{name}: {text}{default}")
    return f"({', '.join(parts)}) -> {_render(op.result, names)}"


def _accepted(text: str, names: dict[str, str]) -> str:
    """An :class:`Accepts` annotation: its names are those of :mod:`membrain.api.requests`."""
    scope = vars(membrain.api.requests)
    for name in _NAME.findall(text):
        if name in _BUILTIN or name in names:
            continue
        found = scope.get(name)
        if found is not None:
            names[name] = getattr(found, "__module__", "typing")
    return text


def _render(kind: Any, names: dict[str, str]) -> str:
    """``kind`` as annotation text, each class it names recorded for an import."""
    if kind is None or kind is type(None):
        return "None"
    if kind is Any:
        return "Any"
    if kind is Ellipsis:
        return "..."
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Union, types.UnionType):
        return " | ".join(_render(a, names) for a in args)
    if origin is not None:
        if origin is typing.Annotated:
            return _render(args[0], names)
        if isinstance(args[0], list) if args else False:  # Callable[[...], R]
            params = ", ".join(_render(a, names) for a in args[0])
            inner = f"[{params}], {_render(args[1], names)}"
        else:
            inner = ", ".join(_render(a, names) for a in args)
        return f"{_render(origin, names)}[{inner}]"
    name = getattr(kind, "__name__", None) or str(kind)
    if name not in _BUILTIN:
        module = getattr(kind, "__module__", "typing")
        names[name] = "collections.abc" if module == "collections.abc" else module
    return str(name)


def _imports(names: dict[str, str]) -> list[str]:
    """``from module import names`` for every name the annotations use."""
    by_module: dict[str, set[str]] = {}
    plain: set[str] = set()
    for name, module in names.items():
        if module == "":
            plain.add(name)
        else:
            by_module.setdefault(module, set()).add(name)
    lines: list[str] = [f"import {module}\n" for module in sorted(plain)]
    lines.append("\n")
    for module, found in sorted(by_module.items(), key=lambda item: _import_order(item[0])):
        if module.startswith("membrain") and not lines[-1].startswith("from membrain"):
            lines.append("\n")
        lines.append(f"from {module} import {', '.join(sorted(found))}\n")
    return lines


def _import_order(module: str) -> tuple[bool, str]:
    return (module.startswith("membrain"), module)


def main(argv: Iterable[str] = ()) -> int:
    """Write the stubs (``--check``: only say whether they are up to date)."""
    stale = 0
    for stub in STUBS:
        text = stub.text()
        if "--check" in argv:
            current = stub.path.read_text(encoding="utf-8") if stub.path.exists() else ""
            if current != text:
                print(f"{stub.path} is stale: run python -m membrain.api.stubs", file=sys.stderr)
                stale += 1
            continue
        stub.path.write_text(text, encoding="utf-8")
        print(f"wrote {stub.path}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
