"""What every memory offers: the served operations, as base classes of every surface.

:class:`MemoryLike` is the blocking surface (:class:`~membrain.Memory`,
:class:`~membrain.remote.RemoteMemory`), :class:`AsyncMemoryLike` the awaitable one
(:class:`~membrain.aio.AsyncMemory`, :class:`~membrain.remote.AsyncRemoteMemory`). Their
methods are the operations of :data:`membrain.operations.OPERATIONS` that a server serves,
with the parameters of :class:`~membrain.Memory`'s method of the same name: type checkers and
IDEs read them from ``surface.pyi``, which ``python -m membrain.stubs`` writes from
:class:`~membrain.Memory`, and the remote clients bind their arguments with them
(:func:`signature`). So each operation's parameters are written once, on
:class:`~membrain.Memory`, and a type checker holds :class:`~membrain.Memory` to them.

``isinstance(x, MemoryLike)`` holds for any object with every method (a test double, an
application's own wrapper), as it would for a :class:`typing.Protocol`.

Defined below the engine, so a caller of a served memory reads it without loading one.
"""

from __future__ import annotations

import ast
import inspect
from abc import ABCMeta
from functools import cache
from pathlib import Path
from typing import Self

from membrain.operations import OPERATIONS

__all__ = ["AsyncMemoryLike", "MemoryLike", "signature"]

_STUB = Path(__file__).with_suffix(".pyi")


class _Structural(ABCMeta):
    """A surface holds for any class with every served operation (blocking or awaitable).

    Only for the surfaces themselves: a subclass (``Memory``) is checked as usual.
    """

    def __subclasscheck__(cls, other: type) -> bool:
        if super().__subclasscheck__(other):
            return True
        awaitable = vars(cls).get("_awaitable")
        if awaitable is None:
            return False
        names = [op.name for op in OPERATIONS if op.route is not None]
        return all(
            callable(method := getattr(other, name, None))
            and inspect.iscoroutinefunction(method) is awaitable
            for name in names
        )

    def __instancecheck__(cls, instance: object) -> bool:
        return cls.__subclasscheck__(type(instance))


class MemoryLike(metaclass=_Structural):
    """A memory with blocking methods: an embedded :class:`~membrain.Memory` or a server's.

    The framework adapters take one, so they run on either. One difference is deliberate:
    ``add(..., extract=False)`` leaves an embedded memory's messages pending until something
    extracts them (a :class:`~membrain.background.BackgroundWriter`, or ``extract_pending``),
    while a server hands them to its own background writer.
    """

    __slots__ = ()
    _awaitable = False

    def close(self) -> None:
        """Release the memory (or the connection to it)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemoryLike(metaclass=_Structural):
    """A memory with awaitable methods: :class:`~membrain.aio.AsyncMemory` or a server's."""

    __slots__ = ()
    _awaitable = True

    async def aclose(self) -> None:
        """Release the memory (or the connection to it)."""
        raise NotImplementedError

    async def close(self) -> None:
        """The same as :meth:`aclose`."""
        await self.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@cache
def _declared() -> dict[str, inspect.Signature]:
    tree = ast.parse(_STUB.read_text(encoding="utf-8"))
    (surface,) = (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MemoryLike")
    return {
        node.name: _signature(node.args)
        for node in surface.body
        if isinstance(node, ast.FunctionDef)
    }


def _signature(args: ast.arguments) -> inspect.Signature:
    Parameter = inspect.Parameter  # noqa: N806
    positional = [*args.posonlyargs, *args.args]
    defaults = [Parameter.empty] * (len(positional) - len(args.defaults))
    defaults += [ast.literal_eval(d) for d in args.defaults]
    parameters = [
        Parameter(
            arg.arg,
            Parameter.POSITIONAL_ONLY
            if i < len(args.posonlyargs)
            else Parameter.POSITIONAL_OR_KEYWORD,
            default=default,
            annotation=ast.unparse(arg.annotation) if arg.annotation else Parameter.empty,
        )
        for i, (arg, default) in enumerate(zip(positional, defaults, strict=True))
    ]
    parameters += [
        Parameter(
            arg.arg,
            Parameter.KEYWORD_ONLY,
            default=Parameter.empty if default is None else ast.literal_eval(default),
            annotation=ast.unparse(arg.annotation) if arg.annotation else Parameter.empty,
        )
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    return inspect.Signature(parameters)


_STALE = inspect.Signature(
    [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
        inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
    ]
)
"""The parameters of an operation the stub does not declare yet (``python -m membrain.stubs``
writes it; the surface tests fail until then)."""


def signature(name: str) -> inspect.Signature:
    """The parameters of served operation ``name`` (``self`` first), as :class:`Memory` has them."""
    return _declared().get(name, _STALE)
