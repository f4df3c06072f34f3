"""The type stubs of the generated surfaces, written from :class:`~membrain.Memory` itself.

``membrain/surface.pyi`` declares the served operations of
:data:`membrain.operations.OPERATIONS` on :class:`~membrain.surface.MemoryLike` (blocking) and
:class:`~membrain.surface.AsyncMemoryLike` (awaitable), with the parameters of
:class:`~membrain.Memory`'s methods (defaults written as literals, which the remote clients
read back to bind their arguments). ``membrain/aio.pyi`` declares what
:class:`~membrain.aio.AsyncMemory` adds: the operations only an embedded memory has, and its
own lifecycle. Run ``python -m membrain.stubs`` after changing an operation's parameters
(``tests/unit/test_operations.py`` fails while a stub is stale).
"""

from __future__ import annotations

import ast
import builtins
import enum
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import membrain.aio
import membrain.memory
import membrain.surface
from membrain.operations import OPERATIONS

__all__ = ["STUBS", "Stub", "SurfaceStub"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEPT_DUNDERS = ("__init__", "__aenter__", "__aexit__")


SERVED = tuple(op.name for op in OPERATIONS if op.route is not None)
"""The operations of the surfaces: those a server serves."""


def _header(module: str, imports: list[str], names: Iterable[str]) -> list[str]:
    listed = ", ".join(f'"{name}"' for name in names)
    return [
        f'"""Type stub of {module}: written by `python -m membrain.stubs`, do not edit."""\n\n',
        "from __future__ import annotations\n\n",
        *imports,
        f"\n__all__ = [{listed}]\n\n",
    ]


@dataclass(frozen=True)
class Stub:
    """The stub of one class with generated methods: what it adds to its surface."""

    cls: type
    """The class, as imported (its generated methods added)."""
    source: type
    """The class whose signatures the generated methods take."""

    @property
    def path(self) -> Path:
        """Where the stub is written, beside the class's module."""
        return Path(sys.modules[self.cls.__module__].__file__ or "").with_suffix(".pyi")

    def text(self) -> str:
        """The text of the stub for the class as it is now."""
        cls = self.cls
        base = cls.__bases__[0]
        members = [
            (name, inspect.getattr_static(cls, name))
            for name in vars(cls)
            if (not name.startswith("_") or name in _KEPT_DUNDERS) and name not in SERVED
        ]
        body: list[str] = []
        used: set[str] = {base.__name__}
        for name, member in members:
            body += _declaration(name, member, used)
        # The names in scope where the signatures were written.
        modules = [sys.modules[cls.__module__]]
        modules += [sys.modules[c.__module__] for c in self.source.__mro__]
        imports = _imports(used, modules, cls.__name__)
        summary = (cls.__doc__ or "").strip().splitlines()[0]
        return "".join(
            [
                *_header(cls.__module__, imports, [cls.__name__]),
                f"class {cls.__name__}({base.__name__}):\n",
                f'    """{summary}"""\n\n',
                *(f"    {line}\n" for line in body),
            ]
        )


@dataclass(frozen=True)
class SurfaceStub:
    """The stub of :mod:`membrain.surface`: every served operation, blocking and awaitable."""

    source: type[membrain.memory.Memory] = membrain.memory.Memory

    @property
    def path(self) -> Path:
        """``membrain/surface.pyi``."""
        return Path(membrain.surface.__file__).with_suffix(".pyi")

    def text(self) -> str:
        """The text of the stub, from :attr:`source`'s methods as they are now."""
        used: set[str] = set()
        blocking, awaitable = [], []
        for name in SERVED:
            method = getattr(self.source, name)
            blocking.append(f"def {name}{_signature(method, used, literal=True)}: ...")
            awaitable.append(f"async def {name}{_signature(method, used, literal=True)}: ...")
        blocking += [
            "def close(self) -> None: ...",
            "def __enter__(self) -> Self: ...",
            "def __exit__(self, *exc: object) -> None: ...",
        ]
        awaitable += [
            "async def aclose(self) -> None: ...",
            "async def close(self) -> None: ...",
            "async def __aenter__(self) -> Self: ...",
            "async def __aexit__(self, *exc: object) -> None: ...",
        ]
        used.add("Self")
        modules = [sys.modules[c.__module__] for c in self.source.__mro__]
        imports = ["import inspect\n\n", *_imports(used, [*modules, typing], "")]
        classes = []
        for cls, body in (
            (membrain.surface.MemoryLike, blocking),
            (membrain.surface.AsyncMemoryLike, awaitable),
        ):
            summary = (cls.__doc__ or "").strip().splitlines()[0]
            classes += [f"class {cls.__name__}:\n", f'    """{summary}"""\n\n']
            classes += [f"    {line}\n" for line in body]
            classes.append("\n")
        return "".join(
            [
                *_header("membrain.surface", imports, membrain.surface.__all__),
                *classes,
                "def signature(name: str) -> inspect.Signature: ...\n",
            ]
        )


STUBS: tuple[Stub | SurfaceStub, ...] = (
    SurfaceStub(),
    Stub(membrain.aio.AsyncMemory, membrain.memory.Memory),
)
"""Every generated stub."""


def _declaration(name: str, member: Any, used: set[str]) -> list[str]:
    if isinstance(member, property):
        assert member.fget is not None
        return ["@property", f"def {name}{_signature(member.fget, used)}: ..."]
    if isinstance(member, classmethod):
        return ["@classmethod", f"def {name}{_signature(member.__func__, used)}: ..."]
    if not callable(member):
        return []
    prefix = "async def" if inspect.iscoroutinefunction(member) else "def"
    return [f"{prefix} {name}{_signature(member, used)}: ..."]


def _signature(function: Callable[..., Any], used: set[str], *, literal: bool = False) -> str:
    signature = inspect.signature(function)
    parts: list[str] = []
    keyword_only = False
    last_positional_only = max(
        (i for i, p in enumerate(signature.parameters.values()) if p.kind is p.POSITIONAL_ONLY),
        default=-1,
    )
    for index, parameter in enumerate(signature.parameters.values()):
        if parameter.kind is parameter.KEYWORD_ONLY and not keyword_only:
            parts.append("*")
            keyword_only = True
        text = parameter.name
        if parameter.kind is parameter.VAR_POSITIONAL:
            text, keyword_only = f"*{text}", True
        elif parameter.kind is parameter.VAR_KEYWORD:
            text = f"**{text}"
        if parameter.annotation is not parameter.empty:
            text += f": {_annotation(parameter.annotation, used)}"
        if parameter.default is not parameter.empty:
            text += f" = {_literal(parameter.default)}" if literal else " = ..."
        parts.append(text)
        if index == last_positional_only:
            parts.append("/")
    returns = signature.return_annotation
    arrow = "" if returns is signature.empty else f" -> {_annotation(returns, used)}"
    return f"({', '.join(parts)}){arrow}"


def _literal(value: object) -> str:
    """``value`` as Python text a stub can hold and ``ast.literal_eval`` reads back."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, tuple | list):
        value = tuple(v.value if isinstance(v, enum.Enum) else v for v in value)
    text = repr(value)
    if ast.literal_eval(text) != value:
        raise TypeError(f"a default of a served operation must be a literal, got {value!r}")
    return text


def _annotation(value: object, used: set[str]) -> str:
    text = value if isinstance(value, str) else inspect.formatannotation(value)
    used.update(_NAME.findall(text))
    return text


def _imports(used: Iterable[str], modules: Iterable[types.ModuleType], own: str) -> list[str]:
    """``from module import names`` for every name the annotations use."""
    scopes = [vars(module) for module in modules]
    by_module: dict[str, set[str]] = {}
    plain: set[str] = set()
    for name in sorted(set(used)):
        if name in (own, "None") or hasattr(builtins, name):
            continue
        found = next((scope[name] for scope in scopes if name in scope), None)
        if found is None:
            continue
        if isinstance(found, types.ModuleType):  # ``httpx.AsyncBaseTransport``
            plain.add(found.__name__)
            continue
        # TracebackType says it lives in builtins; it is imported from types.
        module = "types" if getattr(types, name, None) is found else found.__module__
        by_module.setdefault(module, set()).add(name)
    lines: list[str] = [f"import {module}\n" for module in sorted(plain)]
    if lines:
        lines.append("\n")
    for module, names in sorted(by_module.items(), key=lambda item: _import_order(item[0])):
        if module.startswith("membrain") and lines and not lines[-1].startswith("from membrain"):
            lines.append("\n")
        lines.append(f"from {module} import {', '.join(sorted(names))}\n")
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
                print(f"{stub.path} is stale: run python -m membrain.stubs", file=sys.stderr)
                stale += 1
            continue
        stub.path.write_text(text, encoding="utf-8")
        print(f"wrote {stub.path}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
