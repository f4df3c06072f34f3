"""Checks of the arguments every surface of the memory takes: a scope, ids, vector names.

Defined below the engine, so the remote client checks a call before sending it with the same
rules, and the same errors, as the embedded memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from membrain.api.errors import InputError, ScopeError
from membrain.api.models import Scope

__all__ = ["DENSE", "SPARSE", "as_ids", "check_scope"]

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
