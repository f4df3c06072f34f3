"""The names of the retrieval paths, and the letters that named them before (deprecated).

Results say which paths found a fact by these names (``MemoryHit.paths``, ``SearchResult.paths``),
and the inputs that name paths (``exclude_paths``, a searcher's weights and extra paths) read
them. The letters are still read, as aliases of the names: a call that gives one is warned
(``DeprecationWarning``, once per call) and runs as if it had given the name.

===============  ======  =========================================================
Name             Letter  Path
===============  ======  =========================================================
``bm25``         A       BM25 (the sparse vector) with the question or its keywords
``dense``        B       dense similarity with the question
``hyde``         B2      dense similarity with a hypothetical answer (HyDE)
``event``        B3      dense similarity with the event the question is about
``entity_tree``  C       beam search of the entity tree, then the entities' facts
``boolean``      D       a structured BM25 query on the tantivy index
===============  ======  =========================================================

The other names (``time``, ``stated``, ``when``, ``asked``, ``turn``, ``reply``, ``replaced``,
``answers``) never had a letter. A name no path has is not an error: it names nothing to leave
out.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TypeVar

__all__ = [
    "BM25",
    "BOOLEAN",
    "DENSE",
    "ENTITY_TREE",
    "EVENT",
    "FORMER_NAMES",
    "HYDE",
    "current_keys",
    "current_name",
    "current_names",
]

BM25 = "bm25"
DENSE = "dense"
HYDE = "hyde"
EVENT = "event"
ENTITY_TREE = "entity_tree"
BOOLEAN = "boolean"

FORMER_NAMES: Mapping[str, str] = MappingProxyType(
    {"A": BM25, "B": DENSE, "B2": HYDE, "B3": EVENT, "C": ENTITY_TREE, "D": BOOLEAN}
)
"""The letter each path was named by before -> its name now."""

V = TypeVar("V")


def current_name(name: str) -> str:
    """The path name ``name`` stands for: the name of a former letter, else ``name`` itself."""
    return FORMER_NAMES.get(name, name)


def current_names(
    names: str | Iterable[str], *, warn: bool = True, stacklevel: int = 2
) -> tuple[str, ...]:
    """``names`` (one name, or several) with every former letter replaced by its name.

    Order is kept and names no path has pass through unchanged. With ``warn``, letters among
    them give one ``DeprecationWarning`` naming the names to use instead, attributed as by
    :func:`warnings.warn` called with ``stacklevel`` where this function is called (``2``: that
    function's caller).
    """
    given = (names,) if isinstance(names, str) else tuple(names)
    if warn:
        _warn_former(given, stacklevel + 2)
    return tuple(current_name(n) for n in given)


def current_keys(
    by_name: Mapping[str, V], *, warn: bool = True, stacklevel: int = 2
) -> dict[str, V]:
    """``by_name`` keyed by path names, former letters replaced (see :func:`current_names`).

    Order is kept; a letter given beside its own name yields to the name.
    """
    if warn:
        _warn_former(by_name, stacklevel + 2)
    return {
        current_name(n): v
        for n, v in by_name.items()
        if n not in FORMER_NAMES or FORMER_NAMES[n] not in by_name
    }


def _warn_former(names: Iterable[str], stacklevel: int) -> None:
    former = list(dict.fromkeys(n for n in names if n in FORMER_NAMES))
    if former:
        renamed = ", ".join(f"{n!r} is now {FORMER_NAMES[n]!r}" for n in former)
        message = f"path letters are deprecated: {renamed}"
        warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)
