"""What every memory offers: a method per operation, made from the table, over one ``execute``.

:class:`MemoryLike` is the blocking surface (:class:`~membrain.Memory`,
:class:`~membrain.remote.RemoteMemory`), :class:`AsyncMemoryLike` the awaitable one
(:class:`~membrain.aio.AsyncMemory`, :class:`~membrain.remote.AsyncRemoteMemory`). Each has one
method per operation of :data:`membrain.api.operations.OPERATIONS`, made here from the
operation's request model: the method takes the request's fields as parameters
(:func:`signature`), builds the checked request (:func:`request_of`) and hands it to the
surface's ``execute``, the one method a surface implements. So a parameter, a default or a
limit is written once, on the request, and every surface has it. Type checkers and IDEs read
the methods from ``surface.pyi``, which ``python -m membrain.api.stubs`` writes from the table.

``isinstance(x, MemoryLike)`` holds for any object with every method (a test double, an
application's own wrapper), as it would for a :class:`typing.Protocol`.

Defined below the engine, so a caller of a served memory reads it without loading one.
"""

from __future__ import annotations

import inspect
import warnings
from abc import ABCMeta
from collections.abc import Callable
from functools import cache
from typing import Any, Self

from membrain.api.errors import InputError
from membrain.api.operations import OPERATIONS, Operation
from membrain.api.requests import Accepts, Former, OperationRequest

__all__ = ["AsyncMemoryLike", "MemoryLike", "request_of", "signature"]

_RENAMED = {"question": "query"}
"""Former parameter names still read, with a warning."""


class _Structural(ABCMeta):
    """A surface holds for any class with every operation (blocking or awaitable).

    Only for the surfaces themselves: a subclass (``Memory``) is checked as usual.
    """

    def __subclasscheck__(cls, other: type) -> bool:
        if super().__subclasscheck__(other):
            return True
        awaitable = vars(cls).get("_awaitable")
        if awaitable is None:
            return False
        return all(
            callable(method := getattr(other, op.name, None))
            and inspect.iscoroutinefunction(method) is awaitable
            for op in OPERATIONS
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

    def execute(self, request: OperationRequest) -> Any:
        """Run one checked request (what every method of an operation calls)."""
        raise NotImplementedError

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

    async def execute(self, request: OperationRequest) -> Any:
        """Run one checked request (what every method of an operation awaits)."""
        raise NotImplementedError

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


def signature(op: Operation | str) -> inspect.Signature:
    """The parameters of operation ``op``'s method (``self`` first): its request's fields."""
    return _signature(OPERATIONS.named(op) if isinstance(op, str) else op)


@cache
def _signature(op: Operation) -> inspect.Signature:
    model = op.request
    Parameter = inspect.Parameter  # noqa: N806
    parameters = [Parameter("self", Parameter.POSITIONAL_ONLY)]
    for name, field in model.model_fields.items():
        kind = (
            Parameter.POSITIONAL_OR_KEYWORD if name in model.positional else Parameter.KEYWORD_ONLY
        )
        default = Parameter.empty if field.is_required() else field.default
        accepts = [m.annotation for m in field.metadata if isinstance(m, Accepts)]
        shown = accepts[-1] if accepts else field.annotation
        parameters.append(Parameter(name, kind, default=default, annotation=shown))
    positional = sorted(
        (p for p in parameters[1:] if p.kind is Parameter.POSITIONAL_OR_KEYWORD),
        key=lambda p: model.positional.index(p.name),
    )
    keyword = [p for p in parameters[1:] if p.kind is Parameter.KEYWORD_ONLY]
    return inspect.Signature([parameters[0], *positional, *keyword], return_annotation=op.result)


def request_of(op: Operation, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OperationRequest:
    """The checked request of a call of ``op``'s method with these arguments.

    Raises:
        TypeError: as a call with these arguments would (a missing or unknown one).
        InputError: an argument is malformed or over a limit (or the check's own error).
    """
    for old, new in _RENAMED.items():
        if old in kwargs and new in op.request.model_fields:
            warnings.warn(f"{old}= is deprecated; pass {new}=", DeprecationWarning, stacklevel=3)
            if new in kwargs or (new in op.request.positional and args):
                raise InputError(f"give {new}, or the deprecated {old}, not both")
            kwargs = dict(kwargs)
            kwargs[new] = kwargs.pop(old)
    bound = signature(op).bind(None, *args, **kwargs)
    arguments = dict(list(bound.arguments.items())[1:])  # without ``self``
    for name, value in arguments.items():
        for former in _former(op, name):
            former.warn(value, 4)  # the caller of the method
    return op.request.of(**arguments)


def _former(op: Operation, name: str) -> list[Former]:
    field = op.request.model_fields.get(name)
    return [m for m in field.metadata if isinstance(m, Former)] if field is not None else []


def _describe(op: Operation, run: Callable[..., Any], cls: str) -> Callable[..., Any]:
    run.__name__ = op.name
    run.__qualname__ = f"{cls}.{op.name}"
    run.__doc__ = f"{op.summary}\n\n{inspect.cleandoc(op.request.__doc__ or '')}"
    run.__signature__ = signature(op)  # type: ignore[attr-defined]
    return run


def _blocking(op: Operation) -> Callable[..., Any]:
    def run(self: MemoryLike, /, *args: Any, **kwargs: Any) -> Any:
        return self.execute(request_of(op, args, kwargs))

    return _describe(op, run, "MemoryLike")


def _awaitable(op: Operation) -> Callable[..., Any]:
    async def run(self: AsyncMemoryLike, /, *args: Any, **kwargs: Any) -> Any:
        return await self.execute(request_of(op, args, kwargs))

    return _describe(op, run, "AsyncMemoryLike")


def _install(op: Operation, declared: bool) -> None:
    for surface, make in ((MemoryLike, _blocking), (AsyncMemoryLike, _awaitable)):
        if declared:
            setattr(surface, op.name, make(op))
        elif op.name in vars(surface):
            delattr(surface, op.name)


OPERATIONS.listen(_install)
