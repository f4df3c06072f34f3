"""Derived payload fields given to the points stored before the fields existed.

A store written by an older version lacks an indexed field a newer one derives at write time
(the facts' ``claims``, the entities' name keys). The lookup that needs the field first gives it
to every point of the scope missing it (one filtered read per page, one write per distinct
value), then trusts the index: :class:`Backfill` does it once per scope, field and process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from membrain.api.scope import Scope
from membrain.backends.base import Backend, Collection, Missing, ScoredPoint

__all__ = ["Backfill", "fill_missing"]

_PAGE = 1_000


def fill_missing(
    backend: Backend,
    collection: Collection,
    scope: Scope,
    field: str,
    derive: Callable[[ScoredPoint], dict[str, Any]],
) -> int:
    """Set ``derive(point)`` on each point of ``scope`` without ``field``; how many.

    ``derive`` must set ``field`` to a non-empty value (an empty list reads as missing).
    """
    done: set[str] = set()
    while True:
        page, _ = backend.scroll(collection, scope, where={field: Missing()}, limit=_PAGE)
        if not page or done.issuperset(p.id for p in page):
            return len(done)  # a point the engine would not update is not read forever
        done.update(p.id for p in page)
        alike: dict[str, tuple[dict[str, Any], list[str]]] = {}
        for point in page:
            values = derive(point)
            key = json.dumps(values, sort_keys=True)
            alike.setdefault(key, (values, []))[1].append(point.id)
        for values, ids in alike.values():
            backend.set_payload(collection, scope, ids, values)


class Backfill:
    """Runs :func:`fill_missing` once per collection, field and scope in this process."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._done: set[tuple[Collection, str, str, str | None]] = set()

    def ensure(
        self,
        collection: Collection,
        scope: Scope,
        field: str,
        derive: Callable[[ScoredPoint], dict[str, Any]],
    ) -> None:
        """Give ``field`` to the scope's points without it, unless done here already."""
        key = (collection, field, scope.key, scope.session)
        if key not in self._done:
            fill_missing(self._backend, collection, scope, field, derive)
            self._done.add(key)
