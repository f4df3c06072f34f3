"""Item filters of :class:`~langchain_membrain.langgraph.store.MembrainStore`.

InMemoryStore's semantics: equality, nested mappings, lists compared element-wise, and the
``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` operators; comparisons with missing
values are false.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["matches"]


def matches(value: Mapping[str, Any], filter_: Mapping[str, Any] | None) -> bool:
    """Whether an item value passes a LangGraph filter."""
    if not filter_:
        return True
    return all(_compare(value.get(key), wanted) for key, wanted in filter_.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(actual, op, operand) for op, operand in wanted.items())
        if not isinstance(actual, dict):
            return False
        return all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _operator(actual: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$ne":
        return bool(actual != operand)
    if operator not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"Unsupported operator: {operator}")
    try:
        left, right = float(actual), float(operand)
    except (TypeError, ValueError):
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right
