"""The type stubs of the generated classes, written from the classes themselves.

:class:`~membrain.aio.AsyncMemory` gains one coroutine per operation of
:data:`membrain.operations.OPERATIONS` when it is imported, with the signature of the
:class:`~membrain.Memory` method it awaits; :class:`~membrain.remote.AsyncRemoteMemory` one per
served operation, with :class:`~membrain.remote.RemoteMemory`'s. Type checkers and IDEs read
those signatures from ``membrain/aio.pyi`` and ``membrain/remote/aio.pyi``, which this module
writes: run ``python -m membrain.stubs`` after changing an operation's parameters
(``tests/unit/test_operations.py`` fails while a stub is stale).
"""

from __future__ import annotations

import builtins
import inspect
import re
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import membrain.aio
import membrain.memory
import membrain.remote.aio
import membrain.remote.client

__all__ = ["STUBS", "Stub"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEPT_DUNDERS = ("__init__", "__aenter__", "__aexit__")


@dataclass(frozen=True)
class Stub:
    """The stub of one generated class."""

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
        members = [
            (name, inspect.getattr_static(cls, name))
            for name in vars(cls)
            if not name.startswith("_") or name in _KEPT_DUNDERS
        ]
        body: list[str] = []
        used: set[str] = set()
        for name, member in members:
            body += _declaration(name, member, used)
        # The names in scope where the signatures were written.
        modules = [sys.modules[cls.__module__]]
        modules += [sys.modules[c.__module__] for c in self.source.__mro__]
        imports = _imports(used, modules, cls.__name__)
        summary = (cls.__doc__ or "").strip().splitlines()[0]
        return "".join(
            [
                f'"""Type stub of {cls.__module__}: written by `python -m membrain.stubs`, do not '
                'edit."""\n\n',
                "from __future__ import annotations\n\n",
                *imports,
                f'\n__all__ = ["{cls.__name__}"]\n\n',
                f"class {cls.__name__}:\n",
                f'    """{summary}"""\n\n',
                *(f"    {line}\n" for line in body),
            ]
        )


STUBS = (
    Stub(membrain.aio.AsyncMemory, membrain.memory.Memory),
    Stub(membrain.remote.aio.AsyncRemoteMemory, membrain.remote.client.RemoteMemory),
)
"""Every generated class's stub."""


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


def _signature(function: Callable[..., Any], used: set[str]) -> str:
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
            text += " = ..."
        parts.append(text)
        if index == last_positional_only:
            parts.append("/")
    returns = signature.return_annotation
    arrow = "" if returns is signature.empty else f" -> {_annotation(returns, used)}"
    return f"({', '.join(parts)}){arrow}"


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
