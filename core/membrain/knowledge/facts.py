"""From extractor drafts to stored records: facts with parsed times, and the entities they name.

Pure functions: no I/O, so the same planning serves every facade and backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from membrain.api.entity_refs import entity_refs, normalize_name
from membrain.api.errors import AnnotationError, ExtractionError
from membrain.api.models import Fact, Precision, Scope, TimeCheck, TimeSpan, Trust
from membrain.extraction.base import EntityDraft, FactDraft, draft_index
from membrain.temporal import check_times, find_annotations

__all__ = [
    "build_facts",
    "drafts_for_refs",
    "entity_id",
    "fact_id",
    "fact_id_of",
    "replacements",
    "validity",
]

_PRECISION_ORDER = {p: i for i, p in enumerate(Precision)}
PARTICIPANT_DESCRIPTION = "A participant in the conversation."


def entity_id(scope: Scope, name: str) -> str:
    """The stable id of the entity called ``name`` in the scope's (dataset, task)."""
    return scope.without_session().record_id("entity", normalize_name(name))


def fact_id(scope: Scope, extractor: str, draft: FactDraft) -> str:
    """The deterministic id of the fact ``extractor`` drafted (same draft, same id)."""
    return fact_id_of(scope, extractor, draft.sources, draft.text)


def fact_id_of(scope: Scope, extractor: str, sources: Sequence[str], text: str) -> str:
    """The id of a fact of ``scope`` by ``extractor`` citing ``sources`` (stored message ids)."""
    return scope.record_id("fact", extractor, "|".join(sources), text.strip())


def replacements(
    scope: Scope, drafts: Iterable[FactDraft], *, extractor: str, perhaps: bool = False
) -> dict[str, list[str]]:
    """Replaced fact id -> ids of the new facts that replace it, from the drafts' ``replaces``.

    With ``perhaps``, from their ``may_replace`` instead. A
    :func:`~membrain.extraction.base.draft_ref` names the fact of another draft of ``drafts``.
    """
    found: dict[str, list[str]] = {}
    batch = list(drafts)
    for draft in batch:
        if not draft.text.strip():
            continue
        new = fact_id(scope, extractor, draft)
        for named in draft.may_replace if perhaps else draft.replaces:
            index = draft_index(named)
            if index is not None and not 0 <= index < len(batch):
                continue
            old = named if index is None else fact_id(scope, extractor, batch[index])
            if new not in found.setdefault(old, []):
                found[old].append(new)
    return found


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
    scope: Scope,
    drafts: Iterable[FactDraft],
    *,
    extractor: str,
    recorded_at: datetime,
    entity_ids: Mapping[str, str] | None = None,
) -> tuple[list[Fact], dict[str, list[str]]]:
    """Facts for ``drafts`` (deduplicated by id), and entity id -> ids of the facts naming it.

    ``entity_ids`` maps refs to resolved entity ids; a ref missing from it gets the id of the
    entity of that name. A draft without a ``time_check`` is checked against the resolver at
    its message time (:func:`~membrain.temporal.check_times`); a contradiction disputes it.

    Raises:
        ExtractionError: a draft has a malformed time annotation.
    """
    resolved = entity_ids or {}
    facts: dict[str, Fact] = {}
    mentions: dict[str, list[str]] = {}
    for draft in drafts:
        text = draft.text.strip()
        if not text:
            continue
        try:
            annotations = find_annotations(text)
        except AnnotationError as exc:
            raise ExtractionError(
                f"fact has a malformed time annotation: {exc}",
                raw_output=text,
                message_ids=draft.sources,
                retryable=False,
            ) from exc
        times = tuple(a.span for a in annotations)
        check = draft.time_check
        if check is None:  # every stored time is checked, whoever wrote it
            check = check_times(annotations, draft.stated_at)[0]
        new_id = fact_id(scope, extractor, draft)
        refs = tuple(entity_refs(text))
        ids = tuple(resolved.get(ref) or entity_id(scope, ref) for ref in refs)
        valid_from, valid_to, precision = validity(times)
        disputed = check is TimeCheck.CONTRADICTS
        facts[new_id] = Fact(
            id=new_id,
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
            trust=Trust.DISPUTED if disputed else Trust.STATED,
            layer=draft.layer,
            time_check=check,
        )
        for ref_id in dict.fromkeys(ids):
            mentions.setdefault(ref_id, []).append(new_id)
    return list(facts.values()), mentions


def drafts_for_refs(drafts: Iterable[FactDraft], named: Iterable[EntityDraft]) -> list[EntityDraft]:
    """Every entity a batch names: the extractor's list, then refs found only in fact texts."""
    found: dict[str, EntityDraft] = {}
    for entity in named:
        found.setdefault(entity.name, entity)
    for draft in drafts:
        for ref in entity_refs(draft.text):
            found.setdefault(ref, EntityDraft(ref))
    return list(found.values())
