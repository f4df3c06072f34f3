"""The storage backend protocol and the records that cross it.

A backend is a handful of batch operations over named collections. Every operation takes a
:class:`~membrain.models.Scope`; the backend stores the scope's tenant key (and session) on every
point, indexes the tenant key, and adds the scope to every read and delete, so there is no
unscoped access. Conveniences live above this layer, in :mod:`membrain.store`.
"""

from __future__ import annotations

import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar

from membrain.arguments import DENSE, SPARSE, check_scope
from membrain.embeddings import SparseVector
from membrain.errors import BackendError, InputError, MembrainError, ScopeError
from membrain.models import Scope

__all__ = [
    "DENSE",
    "RRF_K",
    "SPARSE",
    "Backend",
    "BaseBackend",
    "Collection",
    "Condition",
    "Filter",
    "Point",
    "ReadGate",
    "ScoredPoint",
    "TimeRange",
    "VectorQuery",
    "Where",
    "check_payload_values",
    "check_condition_value",
    "check_scope",
    "is_point_id",
    "point_uuid",
    "scope_payload",
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
    AUDIT = "audit"
    """The append-only audit log of every mutation (:mod:`membrain.audit`)."""
    PROFILE = "profile"
    """Versions of the user profile's entries (:mod:`membrain.profile`), append-only."""


INDEXED_FIELDS: dict[Collection, tuple[str, ...]] = {
    Collection.MESSAGES: ("status",),
    Collection.FACTS: ("status", "entity_ids", "sources", "precision", "trust"),
    Collection.ENTITIES: ("name_key", "alias_keys"),
    Collection.TREE: ("level", "parent", "children"),
    Collection.AUDIT: ("action", "targets", "state"),
    Collection.PROFILE: ("topic", "subtopic", "fact_ids"),
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
    ),
    Collection.AUDIT: ("at",),
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
    values), ``"range"`` (``value`` is a :class:`TimeRange`) or ``"ids"`` (``value`` is a tuple
    of point UUIDs; ``key`` is empty).
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
                elif isinstance(value, str | int):
                    found.append(Condition("match", key, value))
                else:
                    found.append(Condition("any", key, list(value)))
        if ids is not None:
            found.append(Condition("ids", "", tuple(point_uuid(i) for i in ids)))
        return cls(tuple(found))


class ReadGate:
    """Lets reads run together, and holds them while a compaction swaps storage underneath.

    Writes are serialised by the backend's lock; reads take no lock, except that a read never
    runs while :meth:`BaseBackend.compact` replaces a collection's files.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._swapping = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold a compaction off while the block reads."""
        with self._cond:
            while self._swapping:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def swapping(self) -> Iterator[None]:
        """Wait for the reads under way, and hold new ones off, while the block runs."""
        with self._cond:
            self._swapping = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()


def scored(point: Any) -> ScoredPoint:
    """A :class:`ScoredPoint` from an engine's point (``id``, ``payload``, optional ``score``)."""
    return ScoredPoint(
        id=str(point.id), payload=dict(point.payload or {}), score=float(getattr(point, "score", 0))
    )


class BaseBackend(ABC):
    """The :class:`Backend` contract written once over a few engine primitives.

    This class checks every scope, binds written points to their scope, refuses scope fields in
    payload updates, skips empty calls, returns reads in the order asked, turns engine failures
    into :class:`~membrain.errors.BackendError` and serialises writes. An engine implements the
    primitives (the ``_``-prefixed abstract methods), each given an engine-neutral
    :class:`Filter` that already holds the scope.

    Example:
        >>> class MyEngine(BaseBackend):  # doctest: +SKIP
        ...     engine = "MyEngine"
        ...     def _upsert(self, collection, points): ...
    """

    engine: ClassVar[str] = "the engine"
    """The engine's name, for error messages."""

    exclusive: ClassVar[bool] = False
    """Whether this process alone writes the store (an embedded one it holds the lock of)."""

    @abstractmethod
    def optimize(self) -> None:
        """Build indexes for recently written data (a no-op where the engine does it itself)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the engine."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._gate = ReadGate()
        self._indexed: set[tuple[Collection, str]] = set()

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except MembrainError:  # already ours: a refused configuration, scope or input
            raise
        except Exception as exc:  # engines raise their own transport and API errors
            raise BackendError(f"{self.engine} failed to {action}: {exc}") from exc

    @property
    def location(self) -> str:
        """Where the records live, for error messages (a folder, a server)."""
        return "the store"

    # -- the primitives an engine implements --------------------------------------------------
    @abstractmethod
    def _ensure(self, dense_dim: int, dense_model: str, sparse_model: str) -> None:
        """Create the collections if missing; refuse ones built with other models."""

    @abstractmethod
    def _upsert(self, collection: Collection, points: Sequence[Point]) -> None:
        """Write points whose payloads already carry their scope fields."""

    @abstractmethod
    def _set_payload(self, collection: Collection, where: Filter, values: dict[str, Any]) -> None:
        """Set payload fields on the points ``where`` selects."""

    @abstractmethod
    def _delete(self, collection: Collection, where: Filter) -> None:
        """Delete the points ``where`` selects."""

    @abstractmethod
    def _scroll(
        self, collection: Collection, where: Filter, limit: int, offset: uuid.UUID | None
    ) -> tuple[list[ScoredPoint], str | None]:
        """One page of the points ``where`` selects, by id, and the next page's offset."""

    @abstractmethod
    def _count(self, collection: Collection, where: Filter) -> int:
        """Exact count of the points ``where`` selects."""

    def _tenants(self, collection: Collection, where: Filter) -> list[str]:
        """Every distinct ``tenant`` payload value of the points ``where`` selects.

        This default pages through every point; engines with facets override it.
        """
        keys: set[str] = set()
        offset: uuid.UUID | None = None
        while True:
            page, following = self._scroll(collection, where, 1024, offset)
            keys.update(str(p.payload.get("tenant")) for p in page if p.payload.get("tenant"))
            if following is None:
                return sorted(keys)
            offset = point_uuid(following)

    @abstractmethod
    def _query(
        self,
        collection: Collection,
        where: Filter,
        queries: Sequence[tuple[VectorQuery, Filter]],
        limit: int,
        rrf_k: int,
        payload: bool | Sequence[str] = True,
    ) -> list[ScoredPoint]:
        """Ranked points: one query by similarity, several fused by weighted RRF.

        Each query comes with its own filter (``where`` and the query's own ``where``).
        ``payload``: the whole payload, none, or only these top-level fields.
        """

    def _compact(self, collection: Collection) -> None:
        """Drop what deleted points left on disk (payloads, vectors, log) in ``collection``.

        Not abstract: the default does nothing, for engines where erasure is the engine's job
        (a server vacuums on its own schedule). Say in the override's docstring what remains.
        """
        return None

    # -- the Backend contract -----------------------------------------------------------------
    def ensure_collections(self, *, dense_dim: int, dense_model: str, sparse_model: str) -> None:
        """Create the collections if missing; check they match the models if present.

        Raises:
            ConfigurationError: the stored collections were built with other models.
        """
        with self._lock, self._errors(f"open the collections of {self.location}"):
            self._ensure(dense_dim, dense_model, sparse_model)

    def upsert(self, collection: Collection, scope: Scope, points: Sequence[Point]) -> None:
        """Insert or replace points, binding each to ``scope``.

        Raises:
            InputError: a point id is not a UUID string.
        """
        check_scope(scope)
        if not points:
            return
        bound = [
            Point(str(point_uuid(p.id)), {**p.payload, **scope_payload(scope)}, p.dense, p.sparse)
            for p in points
        ]
        with self._lock, self._errors(f"write to {collection.value}"):
            self._upsert(collection, bound)

    def set_payload(
        self, collection: Collection, scope: Scope, ids: Sequence[str], values: Mapping[str, Any]
    ) -> None:
        """Set payload fields on the scope's points with these ids, keeping their vectors.

        Raises:
            ScopeError: ``values`` sets ``tenant`` or ``session``, which only the scope sets.
        """
        check_scope(scope)
        checked = check_payload_values(values)
        if not ids:
            return
        where = Filter.of(scope, ids=ids)
        with self._lock, self._errors(f"update {collection.value}"):
            self._set_payload(collection, where, checked)

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> None:
        """Delete the scope's points with these ids."""
        check_scope(scope)
        if not ids:
            return
        where = Filter.of(scope, ids=ids)
        with self._lock, self._errors(f"delete from {collection.value}"):
            self._delete(collection, where)

    def delete_scope(self, scope: Scope) -> None:
        """Delete everything stored under ``scope``."""
        check_scope(scope)
        with self._lock, self._errors("delete a scope"):
            for collection in Collection:
                self._delete(collection, Filter.of(scope))

    def index_field(self, collection: Collection, field: str, kind: str) -> None:
        """Index payload ``field``, a ``"keyword"`` or ``"integer"`` one named at run time, once.

        (A fact's ``metadata.<key>``; fixed fields are indexed at opening.) Raises InputError
        for another kind.
        """
        if kind not in ("keyword", "integer"):
            raise InputError(f"a payload index is keyword or integer, not {kind!r}")
        if (collection, field) in self._indexed:
            return
        with self._lock, self._errors(f"index {collection.value}.{field}"):
            self._index_field(collection, field, kind)
            self._indexed.add((collection, field))

    @abstractmethod
    def _index_field(self, collection: Collection, field: str, kind: str) -> None:
        """Create the index unless the collection has one on ``field`` already."""

    def compact(self, collections: Sequence[Collection]) -> None:
        """Rewrite collections so deleted points leave nothing on disk (payloads, vectors, log).

        A delete only hides points: engines keep their bytes until they rewrite the storage. Call
        this after a privacy purge; it costs a rewrite of each collection. What an engine cannot
        erase is in its ``_compact`` docstring.
        """
        with self._lock, self._gate.swapping():
            for collection in dict.fromkeys(collections):
                with self._errors(f"compact {collection.value}"):
                    self._compact(collection)

    def tenants(self, collection: Collection, *, where: Where | None = None) -> list[Scope]:
        """The (dataset, task) scopes that hold points of ``collection`` (``where`` admits).

        For maintenance jobs; the only call not bound to one scope: it returns scopes, never
        records.
        """
        condition = Filter.of(None, where)
        with self._gate.reading(), self._errors(f"list the tenants of {collection.value}"):
            keys = self._tenants(collection, condition)
        scopes = []
        for key in sorted(set(keys)):
            dataset, _, task = key.partition("/")
            scopes.append(Scope(dataset=dataset, task=task))
        return scopes

    def retrieve(
        self, collection: Collection, scope: Scope, ids: Sequence[str]
    ) -> list[ScoredPoint]:
        """Points of ``scope`` by id, in the order asked; missing ids are skipped."""
        check_scope(scope)
        if not ids:
            return []
        where = Filter.of(scope, ids=ids)
        with self._gate.reading(), self._errors(f"read {collection.value}"):
            records, _ = self._scroll(collection, where, len(ids), None)
        found = {p.id: p for p in records}
        wanted = [str(point_uuid(i)) for i in ids]
        return [found[i] for i in wanted if i in found]

    def scroll(
        self,
        collection: Collection,
        scope: Scope,
        *,
        where: Where | None = None,
        limit: int = 256,
        offset: str | None = None,
    ) -> tuple[list[ScoredPoint], str | None]:
        """One page of the scope's points, ordered by id."""
        check_scope(scope)
        start = point_uuid(offset) if offset else None
        condition = Filter.of(scope, where)
        with self._gate.reading(), self._errors(f"scroll {collection.value}"):
            return self._scroll(collection, condition, limit, start)

    def count(self, collection: Collection, scope: Scope, *, where: Where | None = None) -> int:
        """Exact count of the scope's matching points."""
        check_scope(scope)
        condition = Filter.of(scope, where)
        with self._gate.reading(), self._errors(f"count {collection.value}"):
            return self._count(collection, condition)

    def query(
        self,
        collection: Collection,
        scope: Scope,
        queries: Sequence[VectorQuery],
        *,
        limit: int,
        where: Where | None = None,
        rrf_k: int = RRF_K,
        ids: Sequence[str] | None = None,
        payload: bool | Sequence[str] = True,
    ) -> list[ScoredPoint]:
        """Ranked points of ``scope``.

        One query ranks by similarity; several are fused by the engine's reciprocal rank fusion,
        weighted by each query's ``weight``. ``where`` and each query's own ``where`` all apply
        (a per-query ``where`` narrows its lookup, it never widens the call's ``where``).
        ``ids`` ranks only these points (scoring known candidates). ``payload``: the points'
        whole payloads, none (``False``: ids and scores only) or only these top-level fields.
        """
        check_scope(scope)
        if not queries or (ids is not None and not ids):
            return []
        condition = Filter.of(scope, where, ids=ids)
        lookups = [(q, Filter.of(scope, where, q.where, ids=ids)) for q in queries]
        with self._gate.reading(), self._errors(f"query {collection.value}"):
            return self._query(collection, condition, lookups, limit, rrf_k, payload)


Backend = BaseBackend
"""What MemBrain needs from a vector store: a :class:`BaseBackend` (thread-safe)."""
