"""The names of entities as indexed keys: resolving a name reads its candidates, not the scope.

Part of :class:`membrain.records.RecordStore`. Entity resolution
(:class:`membrain.knowledge.entities.EntityResolver`) matches a new name to a known entity by its
key, by a near spelling (one typo) or by containment (``Jon`` and ``Jon Snow``). Each entity point
holds indexed keyword fields that answer those three questions with lookups:

* ``name_key`` and ``alias_keys``: the normalised name and aliases (an exact match);
* ``first_words``: the first word of the name and of each alias (containment starts there);
* ``spellings``: the name's key and every form of it with one character deleted. Two keys one
  insertion, deletion, substitution or swap of adjacent letters apart share one of these. That
  is every pair the resolver's typo ratio (92) accepts between names of 12 letters or fewer; two
  longer names further apart (two deletions, or three edits past 19 letters) are missed.

An entity written before these fields existed gets them on the scope's first lookup (derived
fields, like the facts' ``claims``: not audited).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from membrain.api.entity_refs import normalize_name
from membrain.api.models import Entity
from membrain.api.scope import Scope
from membrain.backends.base import Backend, Collection, ScoredPoint, Where
from membrain.records.backfill import Backfill

__all__ = ["ENTITY_NAME_FIELDS", "EntityNameReads", "name_fields", "spellings"]

ENTITY_NAME_FIELDS = ("name_key", "alias_keys", "first_words", "spellings")
"""Payload fields derived from an entity's names (dropped when the entity is read)."""


def spellings(key: str) -> list[str]:
    """``key`` and each form of it with one character deleted."""
    return list(dict.fromkeys([key, *(key[:i] + key[i + 1 :] for i in range(len(key)))]))


def name_fields(name: str, aliases: Sequence[str]) -> dict[str, Any]:
    """The indexed name fields of an entity called ``name`` (and ``aliases``)."""
    keys = [normalize_name(n) for n in (name, *aliases)]
    return {
        "name_key": keys[0],
        "alias_keys": keys[1:],
        "first_words": list(dict.fromkeys(k.split()[0] for k in keys if k)),
        "spellings": spellings(keys[0]),
    }


class EntityNameReads:
    """Entity lookups by name (see :class:`membrain.records.RecordStore`)."""

    backend: Backend
    _backfill: Backfill
    # the record store's own
    _entity: Callable[[Scope, ScoredPoint], Entity]
    _scroll: Callable[[Collection, Scope, Where | None], Iterator[ScoredPoint]]

    def entity_candidates(self, scope: Scope, names: Iterable[str]) -> list[Entity]:
        """Every entity of the scope that one of ``names`` may resolve to, by its indexes.

        Those whose name or an alias has the key of one of ``names``, or shares its first
        word, and those whose name is within one typo of it (see the module).
        """
        keys = [k for k in dict.fromkeys(normalize_name(n) for n in names) if k]
        if not keys:
            return []
        self._backfill.ensure(Collection.ENTITIES, scope, "spellings", _names_of)
        wheres: list[dict[str, Any]] = [
            {"name_key": keys},
            {"alias_keys": keys},
            {"first_words": list(dict.fromkeys(k.split()[0] for k in keys))},
            {"spellings": list(dict.fromkeys(s for k in keys for s in spellings(k)))},
        ]
        found: dict[str, Entity] = {}
        for where in wheres:
            for point in self._scroll(Collection.ENTITIES, scope, where):
                if point.id not in found:
                    found[point.id] = self._entity(scope, point)
        return list(found.values())

    def has_entities(self, scope: Scope) -> bool:
        """Whether the scope holds any entity (one point read)."""
        page, _ = self.backend.scroll(Collection.ENTITIES, scope, limit=1)
        return bool(page)


def _names_of(point: ScoredPoint) -> dict[str, Any]:
    return name_fields(str(point.payload["name"]), list(point.payload.get("aliases") or ()))
