"""Entity identity: which known entity a ref names, aliases, and versioned descriptions.

A ref is resolved within the scope's (dataset, task), in this order:

1. its normalised name or a known alias (``Sara`` = ``sara``);
2. a near-identical spelling (``Carolin`` ~ ``Caroline``: rapidfuzz ratio >= ``typo_ratio``);
3. a candidate that is *plausibly* the same: one name's words contained in the other's
   (``Sara`` / ``Sara Lee``), or a dense similarity of name and description above
   ``dense_threshold``. With an LLM configured these ambiguous pairs go to the model in one call;
   without one, a token-contained name is accepted when it is the only candidate and a dense
   match is not.

A new entity gets the ref as canonical name and the description as version 1. New information
about a known entity becomes a new version that extends the previous description; versions are
never rewritten, and each records when and from which facts it came.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from rapidfuzz import fuzz

from membrain.api.entity_refs import normalize_name
from membrain.api.indexing import entity_text
from membrain.api.models import Entity, EntityVersion, Scope
from membrain.extraction.base import EntityDraft
from membrain.extraction.jsonout import MalformedOutput, parse_json_object
from membrain.extraction.llm import LLMCallError, LLMClient
from membrain.knowledge.facts import PARTICIPANT_DESCRIPTION, entity_id
from membrain.records import RecordStore

__all__ = ["EntityResolver", "Resolution"]

log = logging.getLogger("membrain.knowledge.entities")

SAME_ENTITY_SYSTEM = (
    "You decide whether two names in a conversation refer to the same real-world entity. "
    "Answer with one JSON object and nothing else."
)
SAME_ENTITY_PROMPT = """\
For each numbered pair, answer true when both refer to the same entity, false otherwise.

{pairs}

Answer with exactly this JSON shape: {{"same": [true, false, ...]}} (one value per pair, in order)
"""


@dataclass
class Resolution:
    """Refs mapped to entity ids, and the entities to write (new or changed)."""

    ids: dict[str, str] = field(default_factory=dict)
    new: dict[str, Entity] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    descriptions: dict[str, list[str]] = field(default_factory=dict)
    participants: set[str] = field(default_factory=set)


class EntityResolver:
    """Resolves refs to the entities of a scope.

    Args:
        store: Where entities live.
        client: A model for the ambiguous cases, or ``None``.
        typo_ratio: rapidfuzz ratio above which two names are one spelling.
        dense_threshold: Cosine similarity of name+description above which a pair is ambiguous.
    """

    def __init__(
        self,
        store: RecordStore,
        client: LLMClient | None = None,
        *,
        typo_ratio: float = 92.0,
        dense_threshold: float = 0.86,
    ) -> None:
        self._store = store
        self._client = client
        self._typo_ratio = typo_ratio
        self._dense_threshold = dense_threshold

    def resolve(
        self,
        scope: Scope,
        drafts: Sequence[EntityDraft],
        participants: Iterable[str],
        *,
        recorded_at: datetime,
    ) -> Resolution:
        """Map every draft's name to an entity id, creating entities where none matches.

        Reads only the entities the drafts' names may resolve to (indexed lookups by key, first
        word and spelling: :meth:`RecordStore.entity_candidates`), however many the scope has.
        """
        known = self._store.entity_candidates(scope, [d.name for d in drafts])
        by_key: dict[str, Entity] = {}
        for entity in known:
            for name in (entity.name, *entity.aliases):
                by_key.setdefault(normalize_name(name), entity)
        speakers = {normalize_name(p) for p in participants}
        result = Resolution()
        ambiguous: list[tuple[EntityDraft, Entity]] = []
        for draft in _merge_drafts(drafts):
            key = normalize_name(draft.name)
            match = by_key.get(key) or self._typo_match(key, known)
            if match is None:
                candidate = self._plausible(scope, draft, known)
                if candidate is not None and self._client is not None:
                    ambiguous.append((draft, candidate))
                    continue
                if candidate is not None and _contained(key, candidate):
                    match = candidate
            if match is None:
                match = self._new(scope, draft, key in speakers, recorded_at, result)
                by_key[key] = match
                known.append(match)
            self._link(draft, match, key in speakers, result)
        for draft, candidate, same in self._ask(ambiguous):
            key = normalize_name(draft.name)
            match = candidate if same else by_key.get(key)
            if match is None:
                match = self._new(scope, draft, key in speakers, recorded_at, result)
                by_key[key] = match
            self._link(draft, match, key in speakers, result)
        for draft in drafts:  # spellings merged above map to the same entity
            if draft.name not in result.ids:
                twin = next(
                    n for n in result.ids if normalize_name(n) == normalize_name(draft.name)
                )
                result.ids[draft.name] = result.ids[twin]
                created = result.new.get(result.ids[twin])
                if created is None or created.name != draft.name:
                    result.aliases.setdefault(result.ids[twin], []).append(draft.name)
        return result

    def entities_to_write(
        self,
        scope: Scope,
        resolution: Resolution,
        fact_ids: Mapping[str, Sequence[str]],
        *,
        recorded_at: datetime,
    ) -> list[Entity]:
        """The new and changed entities, with versions citing the facts they came from."""
        changed: dict[str, Entity] = {
            i: _cite_first_version(e, fact_ids.get(i, ())) for i, e in resolution.new.items()
        }
        touched = set(resolution.aliases) | set(resolution.descriptions) | resolution.participants
        existing = {
            e.id: e for e in self._store.get_entities(scope, sorted(touched - set(changed)))
        }
        for entity_id_ in touched:
            entity = changed.get(entity_id_) or existing.get(entity_id_)
            if entity is None:
                continue
            aliases = [a for a in resolution.aliases.get(entity_id_, []) if a != entity.name]
            new_aliases = tuple(a for a in dict.fromkeys(aliases) if a not in entity.aliases)
            versions = entity.versions
            for description in resolution.descriptions.get(entity_id_, []):
                latest = versions[-1].description if versions else ""
                if latest and fuzz.partial_ratio(description.casefold(), latest.casefold()) >= 90:
                    continue
                versions = (
                    *versions,
                    EntityVersion(
                        version=len(versions) + 1,
                        description=f"{latest} {description}".strip(),
                        recorded_at=recorded_at,
                        fact_ids=tuple(fact_ids.get(entity_id_, ())),
                    ),
                )
            participant = entity.participant or entity_id_ in resolution.participants
            if new_aliases or versions != entity.versions or participant != entity.participant:
                changed[entity_id_] = entity.model_copy(
                    update={
                        "aliases": entity.aliases + new_aliases,
                        "versions": versions,
                        "participant": participant,
                    }
                )
        return list(changed.values())

    # -- matching ----------------------------------------------------------------------------
    def _typo_match(self, key: str, known: Sequence[Entity]) -> Entity | None:
        if len(key) < 5:
            return None
        hits = [
            e
            for e in known
            if fuzz.ratio(key, normalize_name(e.name)) >= self._typo_ratio
            and key.split()[0][:1] == normalize_name(e.name)[:1]
        ]
        return hits[0] if len(hits) == 1 else None

    def _plausible(
        self, scope: Scope, draft: EntityDraft, known: Sequence[Entity]
    ) -> Entity | None:
        key = normalize_name(draft.name)
        contained = [e for e in known if _contained(key, e)]
        if len(contained) == 1:
            return contained[0]
        if contained or not (known or self._store.has_entities(scope)):
            return None
        vector = self._store.dense.embed_query(entity_text(draft.name, draft.description))
        found = self._store.query_entities(scope, vector, limit=2)
        if found and found[0][1] >= self._dense_threshold:
            if len(found) > 1 and found[1][1] >= self._dense_threshold:
                return None
            return found[0][0]
        return None

    def _ask(
        self, pairs: Sequence[tuple[EntityDraft, Entity]]
    ) -> list[tuple[EntityDraft, Entity, bool]]:
        if not pairs or self._client is None:
            return [(d, e, False) for d, e in pairs]
        listing = "\n".join(
            f"{i}. {json.dumps(d.name)} ({d.description or 'no description'}) and "
            f"{json.dumps(e.name)} ({e.description or 'no description'})"
            for i, (d, e) in enumerate(pairs, 1)
        )
        try:
            reply = self._client.call(SAME_ENTITY_SYSTEM, SAME_ENTITY_PROMPT.format(pairs=listing))
            answers = parse_json_object(reply.text, required_key="same").get("same")
        except (LLMCallError, MalformedOutput) as exc:
            log.warning("entity disambiguation failed (%s); keeping the entities apart", exc)
            answers = None
        if not isinstance(answers, list) or len(answers) != len(pairs):
            answers = [False] * len(pairs)
        return [(d, e, answer is True) for (d, e), answer in zip(pairs, answers, strict=True)]

    # -- bookkeeping -------------------------------------------------------------------------
    def _new(
        self,
        scope: Scope,
        draft: EntityDraft,
        participant: bool,
        recorded_at: datetime,
        result: Resolution,
    ) -> Entity:
        description = draft.description or (PARTICIPANT_DESCRIPTION if participant else "")
        versions = (
            (EntityVersion(version=1, description=description, recorded_at=recorded_at),)
            if description
            else ()
        )
        entity = Entity(
            id=entity_id(scope, draft.name),
            scope=scope,
            name=draft.name,
            versions=versions,
            participant=participant,
            created_at=recorded_at,
        )
        result.new[entity.id] = entity
        return entity

    @staticmethod
    def _link(draft: EntityDraft, entity: Entity, participant: bool, result: Resolution) -> None:
        result.ids[draft.name] = entity.id
        if draft.name != entity.name:
            result.aliases.setdefault(entity.id, []).append(draft.name)
        new_version = entity.id in result.new and entity.versions
        if draft.description and not new_version:
            result.descriptions.setdefault(entity.id, []).append(draft.description)
        if participant:
            result.participants.add(entity.id)


def _cite_first_version(entity: Entity, fact_ids: Sequence[str]) -> Entity:
    """A new entity whose first description came from the batch cites the batch's facts.

    So a purge of those facts finds the description learnt with them.
    """
    if not entity.versions or entity.versions[0].description == PARTICIPANT_DESCRIPTION:
        return entity
    first = entity.versions[0].model_copy(update={"fact_ids": tuple(fact_ids)})
    return entity.model_copy(update={"versions": (first, *entity.versions[1:])})


def _contained(key: str, entity: Entity) -> bool:
    """One name's words are a proper subset of the other's, starting with the same word."""
    mine = key.split()
    for name in (entity.name, *entity.aliases):
        theirs = normalize_name(name).split()
        if mine[:1] != theirs[:1] or mine == theirs:
            continue
        if set(mine) < set(theirs) or set(theirs) < set(mine):
            return True
    return False


def _merge_drafts(drafts: Sequence[EntityDraft]) -> list[EntityDraft]:
    merged: dict[str, EntityDraft] = {}
    for draft in drafts:
        key = normalize_name(draft.name)
        if key not in merged or (draft.description and not merged[key].description):
            merged[key] = draft
    return list(merged.values())
