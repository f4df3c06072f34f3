"""The storage backend protocol and the records that cross it.

A backend is a handful of batch operations over named collections. Every operation takes a
:class:`~membrain.models.Scope`; the backend stores the scope's tenant key (and session) on every
point, indexes the tenant key, and adds the scope to every read and delete, so there is no
unscoped access. Conveniences live above this layer, in :mod:`membrain.store`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from membrain.embeddings import SparseVector
from membrain.errors import InputError, ScopeError
from membrain.models import Scope

__all__ = [
    "DENSE",
    "SPARSE",
    "Backend",
    "Collection",
    "Point",
    "ScoredPoint",
    "TimeRange",
    "VectorQuery",
    "Where",
    "check_payload_values",
    "check_condition_value",
    "check_scope",
    "point_uuid",
    "scope_payload",
]

DENSE = "dense"
SPARSE = "sparse"


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A datetime range condition on a payload field holding an ISO 8601 time."""

    gte: datetime | None = None
    lt: datetime | None = None
    gt: datetime | None = None

    def iso(self) -> dict[str, str]:
        """The set bounds as RFC 3339 strings, by operator."""
        bounds = {"gte": self.gte, "lt": self.lt, "gt": self.gt}
        return {k: v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for k, v in bounds.items() if v}


Where = Mapping[str, "str | int | Sequence[str] | TimeRange"]
"""Payload filter: field -> value (equality), list of accepted values, or a :class:`TimeRange`.

No boolean values: Qdrant Edge matches no point on an unindexed boolean field, so a boolean
condition would silently return nothing; backends raise :class:`~membrain.errors.InputError`.
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
    """Nodes of the hierarchical entity tree (retrieval path C)."""


INDEXED_FIELDS: dict[Collection, tuple[str, ...]] = {
    Collection.MESSAGES: ("status",),
    Collection.FACTS: ("status", "entity_ids", "sources", "precision"),
    Collection.ENTITIES: ("name_key", "alias_keys"),
    Collection.TREE: ("level", "parent", "children"),
}
"""Keyword payload fields indexed per collection, besides ``tenant`` and ``session``."""

DATETIME_FIELDS: dict[Collection, tuple[str, ...]] = {
    Collection.FACTS: ("valid_from", "valid_to", "stated_at"),
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


class Backend(Protocol):
    """What MemBrain needs from a vector store. Implementations must be thread-safe."""

    def ensure_collections(self, *, dense_dim: int, dense_model: str, sparse_model: str) -> None:
        """Create the collections if missing; check they match the models if present.

        Raises:
            ConfigurationError: the stored collections were built with other models.
        """
        ...

    def upsert(self, collection: Collection, scope: Scope, points: Sequence[Point]) -> None:
        """Insert or replace points of ``scope``.

        Raises:
            InputError: a point id is not a UUID string.
        """
        ...

    def retrieve(
        self, collection: Collection, scope: Scope, ids: Sequence[str]
    ) -> list[ScoredPoint]:
        """The points of ``scope`` with these ids, in the order given; missing ids are skipped."""
        ...

    def scroll(
        self,
        collection: Collection,
        scope: Scope,
        *,
        where: Where | None = None,
        limit: int = 256,
        offset: str | None = None,
    ) -> tuple[list[ScoredPoint], str | None]:
        """One page of the scope's points and the offset of the next page (``None`` at the end)."""
        ...

    def count(self, collection: Collection, scope: Scope, *, where: Where | None = None) -> int:
        """How many points of ``scope`` match ``where``."""
        ...

    def query(
        self,
        collection: Collection,
        scope: Scope,
        queries: Sequence[VectorQuery],
        *,
        limit: int,
        where: Where | None = None,
        rrf_k: int = 60,
    ) -> list[ScoredPoint]:
        """Ranked points of ``scope``.

        One query ranks by similarity; several are fused by the engine's reciprocal rank fusion,
        weighted by each query's ``weight``. ``where`` and each query's own ``where`` all apply
        (a per-query ``where`` narrows its lookup, it never widens the call's ``where``).
        """
        ...

    def set_payload(
        self, collection: Collection, scope: Scope, ids: Sequence[str], values: Mapping[str, Any]
    ) -> None:
        """Set payload fields on the scope's points with these ids, keeping their vectors.

        Raises:
            ScopeError: ``values`` sets ``tenant`` or ``session``, which only the scope sets.
        """
        ...

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> None:
        """Delete points of ``scope`` by id (ids of other scopes are left untouched)."""
        ...

    def delete_scope(self, scope: Scope) -> None:
        """Delete every point of ``scope`` in every collection."""
        ...

    def optimize(self) -> None:
        """Build indexes for recently written data (a no-op where the engine does it itself)."""
        ...

    def close(self) -> None:
        """Flush and release the engine."""
        ...


def check_scope(scope: object) -> Scope:
    """Return ``scope`` if it is a :class:`Scope`, else raise :class:`ScopeError`."""
    if not isinstance(scope, Scope):
        raise ScopeError(
            f"a Scope is required for every storage call, got {type(scope).__name__}; "
            "pass scope=Scope(dataset=..., task=...)"
        )
    return scope


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
