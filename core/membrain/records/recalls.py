"""The recall trace's records over a backend: what each traced read gave, kept apart from facts.

Part of :class:`membrain.records.RecordStore`. A recall holds ids, ranks and the question, never
a fact's text. It is a record of reads, not a change of belief, so writing one is not audited;
a purge takes the purged facts out of every recall citing them, and those recalls' questions
(which may quote them) with them (:meth:`RecallRecords._unrecall`),
and the retention of recalls deletes old ones (:meth:`RecallRecords.drop_recalls`), both erased
from disk with the rest.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from membrain.api.recalls import Recall
from membrain.api.scope import Scope
from membrain.backends.base import Backend, Collection, Point, ScoredPoint, TimeRange, Where
from membrain.records.journal import record_scope

__all__ = ["RecallRecords"]

_STORED_APART = ("tenant", "session", "fact_ids")


class RecallRecords:
    """The recall trace's part of the record store (see :class:`membrain.records.RecordStore`)."""

    backend: Backend
    # From the other parts of the record store (declared, not defined: they come first).
    _scroll: Callable[[Collection, Scope, Where | None], Iterator[ScoredPoint]]

    def put_recalls(self, recalls: Sequence[Recall]) -> None:
        """Write recalls, one batch per scope."""
        by_scope: dict[Scope, list[Point]] = defaultdict(list)
        for recall in recalls:
            by_scope[recall.scope].append(Point(recall.id, _payload(recall)))
        for scope, points in by_scope.items():
            self.backend.upsert(Collection.RECALLS, scope, points)

    def recalls_of(
        self, scope: Scope, *, run: str | None = None, fact_id: str | None = None
    ) -> list[Recall]:
        """The scope's recalls of one run or citing one fact, oldest first."""
        where: dict[str, Any] = {}
        if run is not None:
            where["run"] = run
        if fact_id is not None:
            where["fact_ids"] = [fact_id]
        found = [_recall(scope, p) for p in self._scroll(Collection.RECALLS, scope, where or None)]
        return sorted(found, key=lambda r: (r.at, r.id))

    def _unrecall(self, scope: Scope, fact_ids: Sequence[str]) -> bool:
        """Take ``fact_ids`` out of the recalls citing them; whether any recall changed."""
        if not fact_ids:
            return False
        gone = set(fact_ids)
        base = scope.without_session()
        changed: dict[Scope, list[Point]] = defaultdict(list)
        for point in self._scroll(Collection.RECALLS, base, {"fact_ids": list(fact_ids)}):
            recall = _recall(base, point)
            kept = tuple(f for f in recall.facts if f.fact_id not in gone)
            ranked = tuple(f.model_copy(update={"rank": i}) for i, f in enumerate(kept, 1))
            # the question that found an erased fact may quote it: it goes too
            rewritten = recall.model_copy(update={"facts": ranked, "query": ""})
            changed[recall.scope].append(Point(recall.id, _payload(rewritten)))
        for owner, points in changed.items():
            self.backend.upsert(Collection.RECALLS, owner, points)
        return bool(changed)

    def drop_recalls(self, scopes: Sequence[Scope], before: datetime) -> int:
        """Delete the recalls of ``scopes`` made before ``before``; how many."""
        dropped = 0
        for scope in scopes:
            old = [
                p.id for p in self._scroll(Collection.RECALLS, scope, {"at": TimeRange(lt=before)})
            ]
            if old:
                self.backend.delete(Collection.RECALLS, scope, old)
                dropped += len(old)
        return dropped

    def erase_recalls(self) -> None:
        """Erase deleted recalls from the store's files."""
        self.backend.compact([Collection.RECALLS])

    def recall_tenants(self) -> list[Scope]:
        """The (dataset, task) scopes that hold recalls."""
        return self.backend.tenants(Collection.RECALLS)


def _payload(recall: Recall) -> dict[str, Any]:
    payload = recall.model_dump(mode="json", exclude={"id", "scope"})
    payload["facts"] = [
        {"fact_id": f.fact_id, "rank": f.rank, "relevance": f.relevance} for f in recall.facts
    ]
    payload["fact_ids"] = list(recall.fact_ids)
    return payload


def _recall(scope: Scope, point: ScoredPoint) -> Recall:
    fields = {k: v for k, v in point.payload.items() if k not in _STORED_APART}
    owner = record_scope(scope, point.payload)
    return Recall.model_validate({**fields, "id": point.id, "scope": owner})
