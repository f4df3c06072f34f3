"""Ranked reads that build no record: ids and scores of messages and facts for a vector.

Part of :class:`membrain.records.RecordStore`. A search ranks far more candidates than it returns;
these reads give it ids and scores (or the one payload field it places them by), and it reads
the records of those it returns once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from membrain.api.scope import Scope
from membrain.backends.base import Backend, Collection, ScoredPoint, VectorQuery, Where
from membrain.embeddings import SparseVector
from membrain.records.backfill import Backfill
from membrain.records.filters import EXPIRES, LATEST, FactFilter, iso

__all__ = ["FactLookup", "RankedReads", "Vector"]

Vector = Sequence[float] | SparseVector
FactLookup = tuple[str, Vector, FactFilter | None]
"""One ranked lookup over facts: the vector's name (``"dense"``/``"sparse"``), its value, which
facts (``None``: the active ones)."""


class RankedReads:
    """The ranked reads of the record store (see :class:`membrain.records.RecordStore`)."""

    backend: Backend
    _backfill: Backfill

    def fact_condition(self, scope: Scope, where: FactFilter | None) -> Where:
        """The backend condition of ``where`` (default: the active facts, unexpired now).

        A condition on the expiry first gives the derived ``expires`` field to the facts
        stored before it existed (once per scope and process).
        """
        where = where or FactFilter()
        if where.alive_moment() is not None:
            self._backfill.ensure(Collection.FACTS, scope, EXPIRES, _expires_of)
        return where.where()

    def message_similarity(
        self,
        scope: Scope,
        using: str,
        vector: Vector,
        *,
        ids: Sequence[str] | None = None,
        limit: int = 0,
    ) -> dict[str, float]:
        """The similarity of ``vector`` to messages' ``using`` vector, by message id.

        With ``ids``, of these messages (one missing from the answer shares nothing with a
        sparse ``vector``, or is not stored); otherwise of the ``limit`` most similar.
        """
        return self._similarity(Collection.MESSAGES, scope, using, vector, ids, limit)

    def similar_messages(
        self,
        scope: Scope,
        lookups: Sequence[tuple[str, Vector]],
        *,
        ids: Sequence[str] | None = None,
        limit: int = 0,
    ) -> list[dict[str, float]]:
        """:meth:`message_similarity` of each ``(using, vector)``, in one call to the engine."""
        unique = None if ids is None else list(dict.fromkeys(ids))
        size = limit if unique is None else len(unique)
        if size < 1:
            return [{} for _ in lookups]
        queries = [VectorQuery(using, vector, limit=size) for using, vector in lookups]
        found = self.backend.query_batch(Collection.MESSAGES, scope, queries, ids=unique)
        return [{p.id: p.score for p in points} for points in found]

    def fact_similarity(
        self, scope: Scope, using: str, vector: Vector, *, ids: Sequence[str]
    ) -> dict[str, float]:
        """The similarity of ``vector`` to each of these facts' ``using`` vector, by fact id."""
        return self._similarity(Collection.FACTS, scope, using, vector, ids, 0)

    def _similarity(
        self,
        collection: Collection,
        scope: Scope,
        using: str,
        vector: Vector,
        ids: Sequence[str] | None,
        limit: int,
    ) -> dict[str, float]:
        unique = None if ids is None else list(dict.fromkeys(ids))
        size = limit if unique is None else len(unique)
        if size < 1:
            return {}
        query = VectorQuery(using, vector, limit=size)
        points = self.backend.query(
            collection, scope, [query], limit=size, ids=unique, payload=False
        )
        return {p.id: p.score for p in points}

    def rank_facts(
        self,
        scope: Scope,
        using: str,
        vector: Vector,
        *,
        limit: int,
        where: FactFilter | None = None,
    ) -> list[tuple[str, float]]:
        """Fact ids ranked as :meth:`query_facts` ranks them, with their scores.

        No payload is read: a search ranks far more candidates than it returns, and reads the
        records of those it returns (:meth:`get_facts`) once, however many paths found them.
        """
        points = self._ranked(scope, using, vector, limit, where, payload=False)
        return [(p.id, p.score) for p in points]

    def rank_facts_batch(
        self, scope: Scope, lookups: Sequence[FactLookup], *, limit: int
    ) -> list[list[tuple[str, float]]]:
        """:meth:`rank_facts` for each lookup, in one call to the engine (one list each)."""
        queries = [
            VectorQuery(using, vector, limit=limit, where=self.fact_condition(scope, where))
            for using, vector, where in lookups
        ]
        found = self.backend.query_batch(Collection.FACTS, scope, queries)
        return [[(p.id, p.score) for p in points] for points in found]

    def _ranked(
        self,
        scope: Scope,
        using: str,
        vector: Vector,
        limit: int,
        where: FactFilter | None,
        *,
        payload: bool,
    ) -> list[ScoredPoint]:
        query = VectorQuery(using, vector, limit=limit)
        condition = self.fact_condition(scope, where)
        return self.backend.query(
            Collection.FACTS, scope, [query], limit=limit, where=condition, payload=payload
        )

    def cited_messages(
        self, scope: Scope, using: str, vector: Vector, *, limit: int, where: FactFilter
    ) -> list[tuple[str, float, tuple[str, ...]]]:
        """Facts ranked as :meth:`query_facts` ranks them, as (id, score, cited message ids).

        No fact is built: for paths that only place facts by the messages they cite.
        """
        query = VectorQuery(using, vector, limit=limit)
        points = self.backend.query(
            Collection.FACTS,
            scope,
            [query],
            limit=limit,
            where=self.fact_condition(scope, where),
            payload=["sources"],
        )
        return [(p.id, p.score, tuple(p.payload.get("sources") or ())) for p in points]


def _expires_of(point: ScoredPoint) -> dict[str, Any]:
    expires = point.payload.get("expires_at")
    return {EXPIRES: expires or iso(LATEST)}
