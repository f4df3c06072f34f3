"""Item filters of :class:`~langchain_membrain.langgraph.store.MembrainStore`.

InMemoryStore's semantics: equality, nested mappings, lists compared element-wise, and the
``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` operators; comparisons with missing
values are false. A dotted key (``"user.level"``) names a nested field, as LangGraph's SQL
stores read it (a key present as written wins). A filter is checked whole before it is used
(:func:`check_filter`): an unknown operator is an :class:`~membrain.InputError` even when no
item reaches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from membrain import InputError
from membrain.api.checks import check_json

__all__ = ["OPERATORS", "check_filter", "matches"]

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
"""The operators a filter may use."""


def check_filter(filter_: Mapping[str, Any] | None) -> None:
    """Refuse a filter that :func:`matches` cannot apply.

    Raises:
        InputError: the filter is not a mapping with string keys, uses an unknown operator, or
            nests deeper than :data:`membrain.api.checks.MAX_JSON_DEPTH`.
    """
    if filter_ is None:
        return
    if not isinstance(filter_, Mapping) or not all(isinstance(k, str) for k in filter_):
        raise InputError(f"a filter is a mapping of field names, got {filter_!r:.80}")
    check_json(filter_, "a filter", any_integer=True)
    for wanted in filter_.values():
        _check_wanted(wanted)


def _check_wanted(wanted: Any) -> None:
    if isinstance(wanted, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            unknown = [k for k in wanted if k not in OPERATORS]
            if unknown:
                raise InputError(f"Unsupported operator: {unknown[0]!r:.40}")
            return
        check_filter(wanted)
    elif isinstance(wanted, list | tuple):
        for item in wanted:
            _check_wanted(item)


def matches(value: Mapping[str, Any], filter_: Mapping[str, Any] | None) -> bool:
    """Whether an item value passes a LangGraph filter."""
    if not filter_:
        return True
    return all(_compare(_lookup(value, key), wanted) for key, wanted in filter_.items())


def _lookup(value: Mapping[str, Any], key: str) -> Any:
    """The field ``key`` names: the key itself, else a dotted path into nested mappings."""
    if key in value or "." not in key:
        return value.get(key)
    found: Any = value
    for part in key.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return None
        found = found[part]
    return found


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
    if operator not in OPERATORS:
        raise InputError(f"Unsupported operator: {operator!r:.40}")
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
