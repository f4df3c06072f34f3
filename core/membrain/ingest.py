"""The write path: pending messages -> extraction -> entities and facts -> processed.

Messages arrive here already stored as pending evidence. Each batch (with the preceding
messages as context) is extracted, its entity refs resolved, its facts built; entities, the
entity tree and facts are written, and only then are the messages marked processed. A batch
whose extraction fails stays pending, with the error and the raw output on its messages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from membrain.entities import EntityResolver
from membrain.errors import ExtractionError
from membrain.extraction.base import Extractor
from membrain.extraction.llm import LLMClient
from membrain.facts import build_facts, drafts_for_refs
from membrain.models import MessageStatus, Scope, StoredMessage, now
from membrain.retrieval.tree import EntityTree
from membrain.store import RecordStore

__all__ = ["AddResult", "Ingestor"]

log = logging.getLogger("membrain")


@dataclass(frozen=True, slots=True)
class AddResult:
    """What one :meth:`Memory.add` did."""

    messages_stored: int = 0
    messages_skipped: int = 0
    fact_ids: tuple[str, ...] = ()
    entity_ids: tuple[str, ...] = ()
    discarded: int = 0
    errors: tuple[ExtractionError, ...] = ()
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class Ingestor:
    """Extracts stored messages into entities and facts (see the module docstring).

    Args:
        store: Where records live.
        extractor: Turns messages into fact drafts.
        resolver: Maps entity refs to entities.
        tree: The entity tree kept current as entities arrive (path C).
        llm: The extraction model, for per-call cost accounting (``None`` offline).
        batch_size: Messages per extraction batch.
        context_window: Preceding messages given to the extractor as context.
    """

    def __init__(
        self,
        store: RecordStore,
        extractor: Extractor,
        resolver: EntityResolver,
        tree: EntityTree,
        llm: LLMClient | None,
        *,
        batch_size: int,
        context_window: int,
    ) -> None:
        self._store = store
        self._extractor = extractor
        self._resolver = resolver
        self._tree = tree
        self._llm = llm
        self._batch_size = batch_size
        self._context_window = context_window
        self._participants_cache: dict[str, tuple[str, ...]] = {}

    def extract(
        self,
        scope: Scope,
        todo: list[StoredMessage],
        on_progress: Callable[[int], None] | None,
        *,
        stored: int,
        known: Mapping[str, StoredMessage],
    ) -> AddResult:
        """Extract ``todo`` batch by batch; what fails stays pending with its error recorded."""
        todo.sort(key=lambda m: m.message.timestamp)
        fresh_count = stored
        before = self._llm.usage.snapshot() if self._llm is not None else None
        result = self._extract_batches(scope, todo, on_progress)
        calls = input_tokens = output_tokens = 0
        if self._llm is not None and before is not None:
            after = self._llm.usage.snapshot()
            calls = after.calls - before.calls
            input_tokens = after.input_tokens - before.input_tokens
            output_tokens = after.output_tokens - before.output_tokens
            log.info(
                "add: %d messages, %d LLM calls, %d input and %d output tokens",
                len(todo),
                calls,
                input_tokens,
                output_tokens,
            )
        return AddResult(
            messages_stored=fresh_count,
            messages_skipped=len(known) - sum(1 for m in known.values() if m in todo),
            fact_ids=result.fact_ids,
            entity_ids=result.entity_ids,
            discarded=result.discarded,
            errors=result.errors,
            llm_calls=calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )

    def _extract_batches(
        self,
        scope: Scope,
        todo: Sequence[StoredMessage],
        on_progress: Callable[[int], None] | None,
    ) -> AddResult:
        entity_scope = scope.without_session()
        participants = self.participants(entity_scope)
        fact_ids: list[str] = []
        entity_ids: dict[str, None] = {}
        errors: list[ExtractionError] = []
        discarded = 0
        size, window = self._batch_size, self._context_window
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            context = [m.message for m in todo[max(0, start - window) : start]]
            target = [m.message for m in batch]
            batch_ids = [m.id for m in batch]
            speakers = list(dict.fromkeys([*participants, *(m.speaker for m in target)]))
            try:
                extracted = self._extractor.extract(target, context, participants)
                recorded_at = now()
                resolution = self._resolver.resolve(
                    entity_scope,
                    drafts_for_refs(extracted.facts, extracted.entities),
                    speakers,
                    recorded_at=recorded_at,
                )
                facts, mentions = build_facts(
                    scope,
                    extracted.facts,
                    extractor=self._extractor.id,
                    recorded_at=recorded_at,
                    entity_ids=resolution.ids,
                )
            except ExtractionError as exc:
                exc.message_ids = tuple(batch_ids)
                errors.append(exc)
                log.warning("extraction of %d messages failed: %s", len(batch_ids), exc)
                self._store.set_message_status(
                    scope,
                    batch_ids,
                    MessageStatus.PENDING,
                    error=str(exc),
                    raw_output=exc.raw_output,
                )
                if on_progress is not None:
                    on_progress(len(batch))
                continue
            entities = self._resolver.entities_to_write(
                entity_scope, resolution, mentions, recorded_at=recorded_at
            )
            participants = speakers
            self._participants_cache[entity_scope.key] = tuple(participants)
            self._store.put_entities(entity_scope, entities)
            if entities and not self._tree.is_empty(entity_scope):
                self._tree.update(entity_scope, entities)
            self._store.put_facts(scope, facts, participants)
            reasons: dict[str, list[str]] = {}
            for item in extracted.discarded:
                reasons.setdefault(item.message_id, []).append(f"{item.reason}: {item.text}")
            self._store.set_message_status(
                scope, batch_ids, MessageStatus.PROCESSED, discarded=reasons
            )
            discarded += len(extracted.discarded)
            fact_ids.extend(f.id for f in facts)
            entity_ids.update(dict.fromkeys(e.id for e in entities))
            if on_progress is not None:
                on_progress(len(batch))
        return AddResult(
            fact_ids=tuple(fact_ids),
            entity_ids=tuple(entity_ids),
            discarded=discarded,
            errors=tuple(errors),
        )

    def forget(self, scope: Scope) -> None:
        """Drop what is cached of ``scope``'s (dataset, task) after its records were deleted."""
        self._participants_cache.pop(scope.without_session().key, None)

    def participants(self, scope: Scope) -> list[str]:
        """The speakers of the scope's (dataset, task), cached per process."""
        key = scope.without_session().key
        cached = self._participants_cache.get(key)
        if cached is None:
            # Filtered here, not in the engine: Qdrant Edge matches no point on an unindexed
            # boolean payload field.
            entities = self._store.iter_entities(scope.without_session())
            cached = tuple(e.name for e in entities if e.participant)
            self._participants_cache[key] = cached
        return list(cached)
