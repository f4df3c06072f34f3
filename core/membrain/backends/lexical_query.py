"""Queries of the ``boolean`` path's lexical index: the fields they name, what is wrong with them.

A query is tantivy syntax over :data:`QUERY_FIELDS`; the index adds the scope and status itself,
so those fields cannot be queried. :func:`query_problems` lists what tantivy reports and the
mistakes it accepts silently (a group of only excluded clauses, which matches nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import tantivy

__all__ = ["DEFAULT_FIELDS", "FIELD_BOOSTS", "QUERY_FIELDS", "normalize_query", "query_problems"]

QUERY_FIELDS = ("text", "entities", "year", "month", "day", "layer")
"""Fields a query may name; the others (tenant, session, status, id) are set by the index."""
DEFAULT_FIELDS = ["text", "entities"]
"""Fields searched by words that name no field."""
FIELD_BOOSTS = {"entities": 2.0}
_RESERVED = frozenset({"id", "tenant", "session", "status"})
_NOT = re.compile(r"(?<![^\s(])NOT(?:\s+|(?=\())")


def _nodes(ast: Any, depth: int = 0) -> Iterator[tuple[dict[str, Any], int]]:
    """Every node of a parsed query AST (a dict), with its depth (the root is 0)."""
    children: Iterable[Any] = ()
    if isinstance(ast, dict):
        yield ast, depth
        children = ast.values()
    elif isinstance(ast, list | tuple):
        children = ast
    for child in children:
        yield from _nodes(child, depth + 1)


def normalize_query(query: str) -> str:
    """``NOT x`` (outside quotes) written as ``-x``.

    tantivy reads ``a AND NOT b`` as "a, and a group holding only NOT b", and such a group
    matches nothing, so the whole conjunction finds nothing; ``a AND -b`` is what was meant.

    Example:
        >>> normalize_query('sara AND NOT "NOT this" AND NOT(golden)')
        'sara AND -"NOT this" AND -(golden)'
    """
    parts = query.split('"')
    for i in range(0, len(parts), 2):
        parts[i] = _NOT.sub("-", parts[i])
    return '"'.join(parts)


def query_problems(index: tantivy.Index, query: str) -> list[str]:
    """Syntax errors, reserved fields and empty exclusions of ``query``, parsed by ``index``."""
    query = normalize_query(query)
    _, errors = index.parse_query_lenient(query, DEFAULT_FIELDS, FIELD_BOOSTS)
    problems = [str(e) for e in errors]
    nodes = list(_nodes(tantivy.parse_query_lenient(query)[0]))
    # Literals name their field in "field_name", ranges and sets in "field".
    named = {node.get("field_name") or node.get("field") for node, _ in nodes}
    for field in sorted(_RESERVED & named):
        problems.append(f"field {field!r} cannot be queried (use {', '.join(QUERY_FIELDS)})")
    if any(
        depth
        and node.get("type") == "bool"
        and node.get("clauses")
        and all(clause[0] == "must_not" for clause in node["clauses"])
        for node, depth in nodes
    ):
        problems.append(
            "a group of only excluded (NOT/-) clauses matches nothing: attach the exclusion to "
            "a positive clause, as in (a OR b) -c"
        )
    return problems
