"""Checks of the arguments every surface of the memory takes: a scope, ids, vector names.

Defined below the engine, so the remote client checks a call before sending it with the same
rules, and the same errors, as the embedded memory.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from membrain.api.errors import InputError, ScopeError
from membrain.api.models import Scope

__all__ = ["DENSE", "SPARSE", "as_ids", "check_scope", "renamed"]

F = TypeVar("F", bound=Callable[..., Any])

DENSE = "dense"
"""The dense vector of every record (and the dense message search)."""
SPARSE = "sparse"
"""The sparse BM25 vector of every record (and the BM25 message search)."""


def check_scope(scope: object) -> Scope:
    """Return ``scope`` if it is a :class:`Scope`, else raise :class:`ScopeError`."""
    if not isinstance(scope, Scope):
        raise ScopeError(
            f"a Scope is required for every storage call, got {type(scope).__name__}; "
            "pass scope=Scope(dataset=..., task=...)"
        )
    return scope


def as_ids(value: object, what: str = "fact ids") -> list[str]:
    """Ids given as one string or a sequence of strings.

    Raises:
        InputError: anything else.
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence | set | frozenset) and all(isinstance(i, str) for i in value):
        return list(value)
    raise InputError(f"{what} must be a string or a list of strings, got {value!r:.80}")


def renamed(old: str, new: str) -> Callable[[F], F]:
    """Accept the keyword ``old`` for the parameter now called ``new``, with a warning.

    The decorated function keeps its signature (``inspect.signature`` shows ``new``); a call
    passing ``old=`` warns (``DeprecationWarning``) and is passed on as ``new=``. For methods:
    ``new`` given by position (after ``self``) counts as given.

    Raises:
        InputError: both ``old`` and ``new`` were given.
    """

    def moved(kwargs: dict[str, Any], given: int) -> dict[str, Any]:
        if old not in kwargs:
            return kwargs
        warnings.warn(f"{old}= is deprecated; pass {new}=", DeprecationWarning, stacklevel=3)
        if new in kwargs or given > 1:
            raise InputError(f"give {new}, or the deprecated {old}, not both")
        kwargs = dict(kwargs)
        kwargs[new] = kwargs.pop(old)
        return kwargs

    def decorate(function: F) -> F:
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                return await function(*args, **moved(kwargs, len(args)))

            return run_async  # type: ignore[return-value]

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            return function(*args, **moved(kwargs, len(args)))

        return run  # type: ignore[return-value]

    return decorate
