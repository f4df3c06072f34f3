"""The write path: pending messages -> extraction -> entities and facts -> processed.

Messages arrive here already stored as pending evidence. Each batch (with the preceding
messages as context) is extracted, its entity refs resolved, its facts built; entities and facts
are written (the record store keeps the derived indexes current), and only then are the messages
marked processed. A batch whose extraction fails stays pending, with the error and the raw output
on its messages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from membrain.entities import EntityResolver
from membrain.errors import ExtractionError
from membrain.extraction.base import Extractor
from membrain.extraction.llm import LLMClient
from membrain.facts import build_facts, drafts_for_refs
from membrain.listeners import RecordListener
from membrain.models import Message, MessageStatus, Scope, StoredMessage, now
from membrain.store import RecordStore

__all__ = ["AddResult", "Ingestor"]

log = logging.getLogger("membrain")


@dataclass(frozen=True, slots=True)
class AddResult:
    """What one :meth:`Memory.add` did."""

    messages_stored: int = 0
    """Messages given that were new, and stored."""
    messages_skipped: int = 0
    """Messages given that were already stored, so not stored again."""
    messages_retried: int = 0
    """Of those, messages an earlier call left pending, extracted again by this one."""
    fact_ids: tuple[str, ...] = ()
    entity_ids: tuple[str, ...] = ()
    discarded: int = 0
    errors: tuple[ExtractionError, ...] = ()
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class Ingestor(RecordListener):
    """Extracts stored messages into entities and facts (see the module docstring).

    Args:
        store: Where records live.
        extractor: Turns messages into fact drafts.
        resolver: Maps entity refs to entities.
        llm: The extraction model, for per-call cost accounting (``None`` offline).
        batch_size: Messages per extraction batch.
        context_window: Preceding messages given to the extractor as context.
    """

    def __init__(
        self,
        store: RecordStore,
        extractor: Extractor,
        resolver: EntityResolver,
        llm: LLMClient | None,
        *,
        batch_size: int,
        context_window: int,
    ) -> None:
        self._store = store
        self._extractor = extractor
        self._resolver = resolver
        self._llm = llm
        self._batch_size = batch_size
        self._context_window = context_window
        self._participants_cache: dict[str, tuple[str, ...]] = {}

    def add(
        self,
        scope: Scope,
        incoming: Sequence[Message],
        on_progress: Callable[[int], None] | None,
        *,
        extract: bool,
    ) -> AddResult:
        """Store the new messages as pending evidence, then extract the unprocessed ones.

        With ``extract=False`` the messages are only stored (for a background writer).
        """
        # A caller's message id is unique within its session, not across the task's sessions.
        ids = [scope.record_id(scope.session or "", *m.identity()) for m in incoming]
        known = {m.id: m for m in self._store.get_messages(scope, ids)}
        fresh: dict[str, StoredMessage] = {}
        for message_id, message in zip(ids, incoming, strict=True):
            if message_id not in known and message_id not in fresh:
                fresh[message_id] = StoredMessage(
                    id=message_id,
                    scope=scope,
                    message=message.model_copy(update={"id": message_id}),
                    recorded_at=now(),
                )
        self._store.put_messages(scope, list(fresh.values()))
        if not extract:
            return AddResult(messages_stored=len(fresh), messages_skipped=len(known))
        retried = [m for m in known.values() if m.status is not MessageStatus.PROCESSED]
        result = self.extract(scope, [*retried, *fresh.values()], on_progress)
        return replace(
            result,
            messages_stored=len(fresh),
            messages_skipped=len(known),
            messages_retried=len(retried),
        )

    def extract_pending(self, scope: Scope, on_progress: Callable[[int], None] | None) -> AddResult:
        """Extract every pending message of the scope."""
        pending = list(self._store.iter_messages(scope, status=MessageStatus.PENDING))
        return self.extract(scope, pending, on_progress)

    def extract(
        self,
        scope: Scope,
        todo: list[StoredMessage],
        on_progress: Callable[[int], None] | None,
    ) -> AddResult:
        """Extract ``todo`` batch by batch; what fails stays pending with its error recorded."""
        todo.sort(key=lambda m: m.message.timestamp)
        before = self._llm.usage.snapshot() if self._llm is not None else None
        result = self._extract_batches(scope, todo, on_progress)
        if self._llm is None or before is None:
            return result
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
        return replace(
            result, llm_calls=calls, input_tokens=input_tokens, output_tokens=output_tokens
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

    def scope_deleted(self, scope: Scope) -> None:
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
