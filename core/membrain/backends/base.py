"""The storage backend protocol (the records that cross it: :mod:`membrain.backends.points`).

A backend is a handful of batch operations over named collections. Every operation takes a
:class:`~membrain.api.models.Scope`; the backend stores the scope's tenant key (and session) on
every point, indexes the tenant key, and adds the scope to every read and delete, so there is no
unscoped access. Conveniences live above this layer, in :mod:`membrain.records`.
"""

from __future__ import annotations

import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from membrain.api.arguments import DENSE, SPARSE, check_scope
from membrain.api.errors import BackendError, InputError, MembrainError
from membrain.api.models import Scope
from membrain.backends.points import (
    RRF_K,
    Collection,
    Condition,
    Filter,
    Missing,
    Point,
    ScoredPoint,
    TimeRange,
    VectorQuery,
    Where,
    check_condition_value,
    check_payload_values,
    is_point_id,
    point_uuid,
    scope_conditions,
    scope_payload,
)

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
    "Missing",
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


class BaseBackend(ABC):
    """The :class:`Backend` contract written once over a few engine primitives.

    This class checks every scope, binds written points to their scope, refuses scope fields in
    payload updates, skips empty calls, returns reads in the order asked, turns engine failures
    into :class:`~membrain.api.errors.BackendError` and serialises writes. An engine implements the
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

    def _query_batch(
        self,
        collection: Collection,
        lookups: Sequence[tuple[VectorQuery, Filter]],
        payload: bool | Sequence[str],
    ) -> list[list[ScoredPoint]]:
        """One ranked list per lookup (its ``limit`` points by similarity, its filter applied).

        This default runs the lookups one by one; engines that plan a batch override it.
        """
        return [
            self._query(collection, own, [(q, own)], q.limit, RRF_K, payload) for q, own in lookups
        ]

    def _fetch(self, collection: Collection, ids: Sequence[uuid.UUID]) -> list[ScoredPoint]:
        """The points with these ids, whatever their scope (the caller keeps its scope's).

        This default scrolls a filter on the ids; engines with a lookup by id override it.
        """
        where = Filter((Condition("ids", "", tuple(ids)),))
        return self._scroll(collection, where, len(ids), None)[0]

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
            scopes.append(Scope.stored(dataset, task))
        return scopes

    def retrieve(
        self, collection: Collection, scope: Scope, ids: Sequence[str]
    ) -> list[ScoredPoint]:
        """Points of ``scope`` by id, in the order asked; missing ids are skipped."""
        check_scope(scope)
        if not ids:
            return []
        wanted = [point_uuid(i) for i in ids]
        with self._gate.reading(), self._errors(f"read {collection.value}"):
            records = self._fetch(collection, list(dict.fromkeys(wanted)))
        bound = scope_conditions(scope).items()
        found = {p.id: p for p in records if all(p.payload.get(k) == v for k, v in bound)}
        return [found[i] for i in (str(u) for u in wanted) if i in found]

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

    def query_batch(
        self,
        collection: Collection,
        scope: Scope,
        queries: Sequence[VectorQuery],
        *,
        where: Where | None = None,
        ids: Sequence[str] | None = None,
        payload: bool | Sequence[str] = False,
    ) -> list[list[ScoredPoint]]:
        """One ranked list of ``scope``'s points per query, in one call to the engine.

        Each list holds the query's ``limit`` best points by similarity, under ``where`` and the
        query's own ``where`` (and among ``ids`` when given). ``payload`` as in :meth:`query`
        (none by default).
        """
        check_scope(scope)
        if not queries:
            return []
        if ids is not None and not ids:
            return [[] for _ in queries]
        lookups = [(q, Filter.of(scope, where, q.where, ids=ids)) for q in queries]
        with self._gate.reading(), self._errors(f"query {collection.value}"):
            return self._query_batch(collection, lookups, payload)

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
