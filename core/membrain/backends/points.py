"""The records that cross a storage backend: points, ranked lookups, filters and their ids.

Engine-neutral values only; :mod:`membrain.backends.base` defines the backend over them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from membrain.api.errors import InputError, ScopeError
from membrain.api.models import Scope
from membrain.embeddings import SparseVector

__all__ = [
    "DATETIME_FIELDS",
    "INDEXED_FIELDS",
    "RRF_K",
    "SCOPE_FIELDS",
    "Collection",
    "Condition",
    "Filter",
    "Missing",
    "Point",
    "ScoredPoint",
    "TimeRange",
    "VectorQuery",
    "Where",
    "check_condition_value",
    "check_payload_values",
    "is_point_id",
    "point_uuid",
    "scope_conditions",
    "scope_payload",
    "scored",
]


RRF_K = 2
"""The reciprocal rank fusion constant of every fusion, in the engines and in retrieval.

Qdrant's default. On the LoCoMo dev split (3 conversations) k=2 gave recall@10 0.730 against
0.677 for the textbook k=60, which flattens the ranks.
"""


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A datetime range condition on a payload field holding an ISO 8601 time."""

    gte: datetime | None = None
    lt: datetime | None = None
    gt: datetime | None = None
    lte: datetime | None = None

    def iso(self) -> dict[str, str]:
        """The set bounds as RFC 3339 strings, by operator."""
        bounds = {"gte": self.gte, "lt": self.lt, "gt": self.gt, "lte": self.lte}
        return {
            k: v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") for k, v in bounds.items() if v
        }


@dataclass(frozen=True, slots=True)
class Missing:
    """A condition that a payload field is absent, null or an empty list."""


Where = Mapping[str, "str | int | Sequence[str] | TimeRange | Missing"]
"""Payload filter: field -> value (equality), list of accepted values, a :class:`TimeRange`, or
:class:`Missing`.

No boolean values: Qdrant Edge matches no point on an unindexed boolean field, so a boolean
condition would silently return nothing; backends raise :class:`~membrain.api.errors.InputError`.
"""


def check_condition_value(key: str, value: object) -> None:
    """Refuse a boolean filter value (see :data:`Where`)."""
    if isinstance(value, bool):
        raise InputError(
            f"filter on {key!r} uses a boolean; store and filter a keyword value instead"
        )


class Collection(StrEnum):
    """The collections MemBrain keeps."""

    MESSAGES = "messages"
    FACTS = "facts"
    ENTITIES = "entities"
    TREE = "tree"
    """Nodes of the hierarchical entity tree (the ``entity_tree`` retrieval path)."""
    AUDIT = "audit"
    """The append-only audit log of every mutation (:mod:`membrain.api.audit`)."""
    PROFILE = "profile"
    """Versions of the user profile's entries (:mod:`membrain.api.profile`), append-only."""
    RECALLS = "recalls"
    """What reads gave agents (:mod:`membrain.api.recalls`), when a memory traces them."""


INDEXED_FIELDS: dict[Collection, tuple[str, ...]] = {
    Collection.MESSAGES: ("status",),
    Collection.FACTS: ("status", "entity_ids", "sources", "precision", "trust", "claims"),
    Collection.ENTITIES: ("name_key", "alias_keys", "first_words", "spellings"),
    Collection.TREE: ("level", "parent", "children"),
    Collection.AUDIT: ("action", "targets", "state"),
    Collection.PROFILE: ("topic", "subtopic", "fact_ids"),
    Collection.RECALLS: ("run", "fact_ids"),
}
"""Keyword payload fields indexed per collection, besides ``tenant`` and ``session``."""

DATETIME_FIELDS: dict[Collection, tuple[str, ...]] = {
    Collection.FACTS: (
        "valid_from",
        "valid_to",
        "stated_at",
        "recorded_at",
        "believed_until",
        "valid_start",
        "valid_end",
        "revised_at",
        "expires",
    ),
    Collection.AUDIT: ("at",),
    Collection.RECALLS: ("at",),
}
"""Datetime payload fields indexed per collection (time-aware search filters on them)."""


@dataclass(frozen=True, slots=True)
class Point:
    """A record to store: id, JSON payload and its vectors.

    ``id`` is a UUID string (derive it with :meth:`Scope.record_id`). Ids are global to a
    collection: the same id written under two scopes is one point, owned by the last writer.
    The ``tenant`` and ``session`` payload fields are always set from the scope.
    """

    id: str
    payload: Mapping[str, Any]
    dense: Sequence[float] | None = None
    sparse: SparseVector | None = None


@dataclass(frozen=True, slots=True)
class ScoredPoint:
    """A stored record returned by a read, with its score for ranked reads."""

    id: str
    payload: dict[str, Any]
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class VectorQuery:
    """One ranked lookup: a vector against one named vector of a collection."""

    using: str
    vector: Sequence[float] | SparseVector
    limit: int = 50
    weight: float = 1.0
    where: Where = field(default_factory=dict)


SCOPE_FIELDS = ("tenant", "session")
"""Payload fields the backend owns: written from the scope, never from caller values."""


def check_payload_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``values`` as a dict, refusing the scope fields (they would move points out of scope).

    Raises:
        ScopeError: ``values`` sets ``tenant`` or ``session``.
    """
    clash = sorted(set(values) & set(SCOPE_FIELDS))
    if clash:
        raise ScopeError(
            f"payload fields {clash} bind a point to its scope and cannot be set; "
            "write the point again under the other scope instead"
        )
    return dict(values)


def is_point_id(text: str) -> bool:
    """Whether ``text`` is a UUID string, the form every point id takes."""
    try:
        uuid.UUID(text)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def point_uuid(point_id: str) -> uuid.UUID:
    """The UUID a point id stands for (every backend stores UUID ids).

    Raises:
        InputError: ``point_id`` is not a UUID string.
    """
    try:
        return uuid.UUID(point_id)
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError(
            f"point ids are UUID strings (see Scope.record_id), got {point_id!r}"
        ) from exc


def scope_payload(scope: Scope) -> dict[str, Any]:
    """The payload fields that bind a point to its scope."""
    return {"tenant": scope.key, "session": scope.session or ""}


def scope_conditions(scope: Scope) -> dict[str, str]:
    """Equality conditions every read of ``scope`` must carry."""
    conditions = {"tenant": scope.key}
    if scope.session:
        conditions["session"] = scope.session
    return conditions


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition of a :class:`Filter`, engine-neutral.

    ``kind`` is ``"match"`` (``value`` equals), ``"any"`` (``value`` is a list of accepted
    values), ``"range"`` (``value`` is a :class:`TimeRange`), ``"empty"`` (the field is
    :class:`Missing`; ``value`` is ``None``) or ``"ids"`` (``value`` is a tuple of point UUIDs;
    ``key`` is empty).
    """

    kind: str
    key: str
    value: Any


@dataclass(frozen=True, slots=True)
class Filter:
    """A conjunction of conditions: the scope's, then every ``where``'s, then ids."""

    conditions: tuple[Condition, ...]

    @classmethod
    def of(
        cls, scope: Scope | None, *wheres: Where | None, ids: Sequence[str] | None = None
    ) -> Filter:
        """The filter of ``scope`` AND every condition of every ``where`` (AND the ids).

        ``scope`` is ``None`` only for :meth:`BaseBackend.tenants`, which reads no record.

        Raises:
            InputError: A condition uses a boolean value, or an id is not a UUID string.
        """
        bound = scope_conditions(scope) if scope is not None else {}
        found = [Condition("match", key, value) for key, value in bound.items()]
        for where in wheres:
            for key, value in (where or {}).items():
                check_condition_value(key, value)
                if isinstance(value, TimeRange):
                    found.append(Condition("range", key, value))
                elif isinstance(value, Missing):
                    found.append(Condition("empty", key, None))
                elif isinstance(value, str | int):
                    found.append(Condition("match", key, value))
                else:
                    found.append(Condition("any", key, list(value)))
        if ids is not None:
            found.append(Condition("ids", "", tuple(point_uuid(i) for i in ids)))
        return cls(tuple(found))


def scored(point: Any) -> ScoredPoint:
    """A :class:`ScoredPoint` from an engine's point (``id``, ``payload``, optional ``score``)."""
    return ScoredPoint(
        id=str(point.id), payload=dict(point.payload or {}), score=float(getattr(point, "score", 0))
    )
