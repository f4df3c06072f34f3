"""From extractor drafts to stored records: facts with parsed times, and the entities they name.

Pure functions: no I/O, so the same planning serves every facade and backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from membrain.errors import AnnotationError, ExtractionError
from membrain.extraction.base import FactDraft, entity_refs, normalize_name
from membrain.models import Entity, EntityVersion, Fact, Precision, Scope, TimeSpan
from membrain.temporal import find_annotations

__all__ = ["Mention", "build_facts", "merge_entities", "validity"]

_PRECISION_ORDER = {p: i for i, p in enumerate(Precision)}
PARTICIPANT_DESCRIPTION = "A participant in the conversation."


@dataclass
class Mention:
    """How one entity was referred to by a batch of facts."""

    entity_id: str
    names: dict[str, None] = field(default_factory=dict)
    fact_ids: dict[str, None] = field(default_factory=dict)


def entity_id(scope: Scope, name: str) -> str:
    """The stable id of the entity called ``name`` in the scope's (dataset, task)."""
    return scope.without_session().record_id("entity", normalize_name(name))


def validity(
    times: Sequence[TimeSpan],
) -> tuple[datetime | None, datetime | None, Precision | None]:
    """``(valid_from, valid_to, precision)`` spanning every time of a fact.

    An open endpoint on any time leaves that side open; the precision is the finest grain.
    """
    if not times:
        return None, None, None
    starts = [t.start for t in times]
    ends = [t.end for t in times]
    valid_from = None if any(s is None for s in starts) else min(s for s in starts if s)
    valid_to = None if any(e is None for e in ends) else max(e for e in ends if e)
    precision = max((t.precision for t in times), key=_PRECISION_ORDER.__getitem__)
    return valid_from, valid_to, precision


def build_facts(
    scope: Scope, drafts: Iterable[FactDraft], *, extractor: str, recorded_at: datetime
) -> tuple[list[Fact], dict[str, Mention]]:
    """Facts for ``drafts`` (deduplicated by id) and the entity mentions they carry.

    Raises:
        ExtractionError: a draft has a malformed time annotation.
    """
    facts: dict[str, Fact] = {}
    mentions: dict[str, Mention] = {}
    for draft in drafts:
        text = draft.text.strip()
        if not text:
            continue
        try:
            times = tuple(a.span for a in find_annotations(text))
        except AnnotationError as exc:
            raise ExtractionError(
                f"fact has a malformed time annotation: {exc}",
                raw_output=text,
                message_ids=draft.sources,
            ) from exc
        fact_id = scope.record_id("fact", extractor, "|".join(draft.sources), text)
        refs = tuple(entity_refs(text))
        ids = tuple(entity_id(scope, ref) for ref in refs)
        valid_from, valid_to, precision = validity(times)
        facts[fact_id] = Fact(
            id=fact_id,
            scope=scope,
            text=text,
            entities=refs,
            entity_ids=ids,
            times=times,
            valid_from=valid_from,
            valid_to=valid_to,
            precision=precision,
            stated_at=draft.stated_at,
            recorded_at=recorded_at,
            sources=draft.sources,
            extractor=extractor,
        )
        for ref, ref_id in zip(refs, ids, strict=True):
            mention = mentions.setdefault(ref_id, Mention(ref_id))
            mention.names.setdefault(ref, None)
            mention.fact_ids.setdefault(fact_id, None)
    return list(facts.values()), mentions


def merge_entities(
    scope: Scope,
    existing: Sequence[Entity],
    mentions: dict[str, Mention],
    *,
    participants: Iterable[str],
    recorded_at: datetime,
) -> list[Entity]:
    """New entities, and known ones that gained an alias or became participants.

    Nothing is overwritten: a known entity keeps its name, aliases and description versions.
    """
    speaker_keys = {normalize_name(p) for p in participants}
    known = {e.id: e for e in existing}
    changed: list[Entity] = []
    for mention in mentions.values():
        names = list(mention.names)
        is_participant = any(normalize_name(n) in speaker_keys for n in names)
        entity = known.get(mention.entity_id)
        if entity is None:
            versions: tuple[EntityVersion, ...] = ()
            if is_participant:
                versions = (
                    EntityVersion(
                        version=1,
                        description=PARTICIPANT_DESCRIPTION,
                        recorded_at=recorded_at,
                        fact_ids=tuple(mention.fact_ids),
                    ),
                )
            changed.append(
                Entity(
                    id=mention.entity_id,
                    scope=scope,
                    name=names[0],
                    aliases=tuple(n for n in names[1:]),
                    versions=versions,
                    participant=is_participant,
                    created_at=recorded_at,
                )
            )
            continue
        aliases = tuple(n for n in names if n != entity.name and n not in entity.aliases)
        if aliases or (is_participant and not entity.participant):
            changed.append(
                entity.model_copy(
                    update={
                        "aliases": entity.aliases + aliases,
                        "participant": entity.participant or is_participant,
                    }
                )
            )
    return changed
