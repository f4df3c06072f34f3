"""The write path: pending messages -> extraction -> entities and facts -> processed.

Messages arrive here already stored as pending evidence. Each batch (with the preceding
messages as context) is extracted, its entity refs resolved, its facts built; entities and facts
are written (the record store keeps the derived indexes current), and only then are the messages
marked processed. A batch whose extraction fails stays pending, with the error and the raw output
on its messages.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from membrain.api.audit import AuditAction, Cause, ReviewKind
from membrain.api.errors import ConflictError, ExtractionError, InputError, MembrainError
from membrain.api.expiry import fact_expiry
from membrain.api.listeners import RecordListener
from membrain.api.metadata import merged
from membrain.api.models import (
    Actor,
    ActorKind,
    Fact,
    Message,
    MessageStatus,
    Role,
    Scope,
    StoredMessage,
    Trust,
    now,
)
from membrain.api.results import AddResult
from membrain.extraction.base import ExtractionBatch, Extractor, KnownFact
from membrain.extraction.llm import LLMClient
from membrain.extraction.profile_writer import LLMProfileWriter
from membrain.knowledge.entities import EntityResolver
from membrain.knowledge.facts import build_facts, drafts_for_refs, entity_id, replacements
from membrain.knowledge.ledger import Ledger
from membrain.knowledge.profiles import ProfileBook
from membrain.records import FactFilter, RecordStore
from membrain.temporal import inert

__all__ = ["AddResult", "Ingestor", "message_id"]

log = logging.getLogger("membrain")

_UNFINISHED = (MessageStatus.PENDING, MessageStatus.FAILED)
"""Statuses of messages that adding them again extracts (a dismissed one stays dismissed)."""


def message_id(scope: Scope, message: Message | str) -> str:
    """The stored id of ``message`` in ``scope`` (or of the message with this ``source_id``).

    A caller's message id (``source_id``) is unique within its session, not across the task's
    sessions, so the session is part of the identity.
    """
    identity = Message.identity_of(message) if isinstance(message, str) else message.identity()
    return scope.record_id(scope.session or "", *identity)


_CONTENT_ERRORS = (ValueError, ArithmeticError, LookupError, TypeError)
"""Errors a message's content can raise inside an extractor (a date past the calendar, text
it does not expect): that message fails alone. Anything else propagates, the batch pending."""

MAX_KNOWN = 24
"""Known facts shown to the extractor per batch, at most (the best matches of its messages)."""
KNOWN_PER_MESSAGE = 3
"""Facts looked up per message: by similarity, then among the facts of each entity it names."""
CONTEXT_SPANS = (timedelta(minutes=30), timedelta(days=1))
"""How far back the stored context of an extraction is looked for: the nearest span first,
the next when it held fewer messages than the context window."""
_EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
"""The earliest time a stored context is looked up from (range filters take 4-digit years)."""
MAX_KNOWN_ABOUT = 2000
"""Known facts given to an extractor that looks them up by entity, at most (the latest)."""


def _inert(message: Message) -> Message:
    text, caption = inert(message.text), message.caption and inert(message.caption)
    if text == message.text and caption == message.caption:
        return message
    return message.model_copy(update={"text": text, "caption": caption})


class Ingestor(RecordListener):
    """Extracts stored messages into entities and facts (see the module docstring).

    Before each batch's extraction the scope's active facts closest to its messages (and to
    its speakers) are looked up and given to the extractor as known facts, so a new fact can
    say which ones it replaces; the :class:`~membrain.knowledge.ledger.Ledger` records the
    supersession.

    Args:
        store: Where records live.
        extractor: Turns messages into fact drafts.
        resolver: Maps entity refs to entities.
        llm: The extraction model, for per-call cost accounting (``None`` offline).
        ledger: Applies supersessions and queues disputed facts for review.
        batch_size: Messages per extraction batch.
        context_window: Preceding messages given to the extractor as context.
        profiles: The profiles kept up to date after each flush (``None``: none).
        profile_writer: Proposes the profile's changes with a model (one call per flush);
            ``None``: the single-valued attributes fill their subtopics.
    """

    def __init__(
        self,
        store: RecordStore,
        extractor: Extractor,
        resolver: EntityResolver,
        llm: LLMClient | None,
        *,
        ledger: Ledger,
        batch_size: int,
        context_window: int,
        profiles: ProfileBook | None = None,
        profile_writer: LLMProfileWriter | None = None,
    ) -> None:
        self._store = store
        self._extractor = extractor
        self._resolver = resolver
        self._llm = llm
        self._ledger = ledger
        self._profiles = profiles
        self._profile_writer = profile_writer
        self._batch_size = batch_size
        self._context_window = context_window
        self._participants_cache: dict[str, tuple[str, ...]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def add(
        self,
        scope: Scope,
        incoming: Sequence[Message],
        on_progress: Callable[[int], None] | None,
        *,
        extract: bool,
        by: Actor | None = None,
        expires: Sequence[datetime | None] = (),
    ) -> AddResult:
        """Store the new messages as pending evidence, then extract the unprocessed ones.

        With ``extract=False`` the messages are only stored (for a background writer). ``by``
        is who adds them: an agent's facts are ``derived`` and carry it as their author.
        ``expires``: when each new message expires, position by position (none: never).
        """
        ids = [message_id(scope, m) for m in incoming]
        stored_by = Cause(by or Actor(kind=ActorKind.API))
        # One writer per message id: concurrent adds of the same messages store, count and
        # audit each once (the check and the write happen under the scope's storing lock).
        with self._storing(scope):
            known = {m.id: m for m in self._store.get_messages(scope, ids)}
            _check_reused_ids(ids, incoming, known)
            fresh: dict[str, StoredMessage] = {}
            ends = list(expires) or [None] * len(ids)
            for stored_id, message, end in zip(ids, incoming, ends, strict=True):
                if stored_id not in known and stored_id not in fresh:
                    fresh[stored_id] = StoredMessage(
                        id=stored_id,
                        scope=scope,
                        message=message.model_copy(update={"id": stored_id}),
                        recorded_at=now(),
                        added_by=str(by) if by is not None and by.kind is ActorKind.AGENT else None,
                        expires_at=end,
                    )
            self._store.put_messages(scope, list(fresh.values()), cause=stored_by)
            # A store written before changes were announced may hold a message without its
            # event; only unextracted ones are checked, so re-sending a history costs nothing.
            retried = [m for m in known.values() if m.status in _UNFINISHED]
            unfinished = [m.id for m in retried]
            self._store.audit_missing(scope, AuditAction.STORED, unfinished, cause=stored_by)
        skipped = len(incoming) - len(fresh)  # already stored, or given twice in this call
        if not extract:
            return AddResult(messages_stored=len(fresh), messages_skipped=skipped)
        result = self.extract(scope, [*retried, *fresh.values()], on_progress, by=by)
        return replace(
            result,
            messages_stored=len(fresh),
            messages_skipped=skipped,
            messages_retried=len(retried),
        )

    def extract_pending(self, scope: Scope, on_progress: Callable[[int], None] | None) -> AddResult:
        """Extract every pending message of the scope."""
        pending = list(self._store.iter_messages(scope, status=MessageStatus.PENDING))
        return self.extract(scope, pending, on_progress)

    def retry_failed(self, scope: Scope, on_progress: Callable[[int], None] | None) -> AddResult:
        """Extract again every message of the scope marked failed."""
        failed = list(self._store.iter_messages(scope, status=MessageStatus.FAILED))
        return self.extract(scope, failed, on_progress)

    def extract(
        self,
        scope: Scope,
        todo: list[StoredMessage],
        on_progress: Callable[[int], None] | None,
        *,
        by: Actor | None = None,
        extractor: Extractor | None = None,
    ) -> AddResult:
        """Extract ``todo`` batch by batch; what fails stays pending with its error recorded.

        One extraction per (dataset, task) runs at a time in this process (a server's request
        threads and its background writer share the memory): a message another extraction
        finished while this one waited is not extracted again.
        """
        before = self._llm.usage.snapshot() if self._llm is not None else None
        with self._lock(scope):
            todo = self._unchanged(scope, todo)
            todo.sort(key=lambda m: m.message.timestamp)
            with self._ledger.batch():  # the knock-on reviews of the whole add, together
                result = self._extract_batches(scope, todo, on_progress, by, extractor)
            result = self._update_profile(scope, todo, result)
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

    def _update_profile(
        self, scope: Scope, todo: Sequence[StoredMessage], result: AddResult
    ) -> AddResult:
        """Once per flush, the profile from the new facts about the users.

        A model that gives no usable answer leaves the profile as it was; why is in the
        result's errors (the messages stay extracted).
        """
        if self._profiles is None or not result.fact_ids:
            return result
        users = {m.message.speaker for m in todo if m.message.role is Role.USER}
        facts = self._store.get_facts(scope.without_session(), list(result.fact_ids))
        if self._profile_writer is None:
            self._profiles.from_facts(scope, facts, users)
            return result
        try:
            self._profiles.from_model(scope, self._profile_writer, facts, users)
        except (ExtractionError, InputError) as exc:
            log.warning("profile of %s left unchanged: %s", scope.key, exc)
            error = ExtractionError(f"profile left unchanged: {exc}", retryable=False)
            return replace(result, errors=(*result.errors, error))
        return result

    def _lock(self, scope: Scope) -> threading.Lock:
        """The lock of the scope's (dataset, task): entities and facts are resolved there."""
        key = scope.without_session().key
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def _storing(self, scope: Scope) -> threading.Lock:
        """The lock under which the scope's (dataset, task) messages are checked and stored."""
        key = "\x00store\x00" + scope.without_session().key
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def _unchanged(self, scope: Scope, todo: list[StoredMessage]) -> list[StoredMessage]:
        """The messages of ``todo`` whose status is still the one the caller saw."""
        if not todo:
            return todo
        current = {m.id: m.status for m in self._store.get_messages(scope, [m.id for m in todo])}
        return [m for m in todo if current.get(m.id) is m.status]

    def _extract_batches(
        self,
        scope: Scope,
        todo: Sequence[StoredMessage],
        on_progress: Callable[[int], None] | None,
        by: Actor | None,
        extractor: Extractor | None = None,
    ) -> AddResult:
        entity_scope = scope.without_session()
        chosen = extractor or self._extractor
        run = _Run(
            self.participants(entity_scope), _cause(chosen, by), chosen, _known_facts_by(chosen)
        )
        size, window = self._batch_size, self._context_window
        before = self._said_before(todo, window)
        for start in range(0, len(todo), size):
            batch = list(todo[start : start + size])
            earlier = [*before, *(m.message for m in todo[max(0, start - window) : start])]
            context = earlier[max(0, len(earlier) - window) :]
            self._extract_batch(scope, batch, context, run)
            if on_progress is not None:
                on_progress(len(batch))
        return AddResult(
            fact_ids=tuple(run.fact_ids),
            entity_ids=tuple(run.entity_ids),
            discarded=run.discarded,
            errors=tuple(run.errors),
        )

    def _said_before(self, todo: Sequence[StoredMessage], window: int) -> list[Message]:
        """The last ``window`` messages of the first one's session said before it (stored).

        A chat added one message at a time is extracted with the turns before it as context, as
        the same chat added whole is: an assistant's reply is read as a reply, a user's "we" as
        the partner named a turn before. Looked back over :data:`CONTEXT_SPANS` in turn, the
        nearest first. An agent's own notes (``by`` an agent) are no turns of the chat: none.
        """
        if not todo or window <= 0 or all(m.added_by for m in todo):
            return []
        first = todo[0]
        ids = {m.id for m in todo}
        said = first.message.timestamp
        found: list[StoredMessage] = []
        for span in CONTEXT_SPANS:
            if said - _EARLIEST <= span:
                break  # a time at the calendar's edge: no stored context
            found = [
                m
                for m in self._store.messages_said(first.scope, said - span, said)
                if m.id not in ids
            ]
            if len(found) >= window:
                break
        return [m.message for m in found[-window:]]

    def _extract_batch(
        self,
        scope: Scope,
        batch: list[StoredMessage],
        context: list[Message],
        run: _Run,
    ) -> None:
        """Extract one batch and write what it gives; isolate a failure to its messages.

        A batch that fails for a reason of its own is extracted again message by message, so
        one bad message never holds up the others; a message that fails alone is marked
        ``failed`` with its error. A retryable failure (the model failed, or answered badly
        after every retry) leaves the batch pending, for the next attempt.
        """
        entity_scope = scope.without_session()
        target = [m.message for m in batch]
        batch_ids = [m.id for m in batch]
        # An application's statements (``Memory.update``) are no turns: their speaker is no one
        # of the conversation.
        turns = target if getattr(run.extractor, "speakers_take_part", True) else []
        speakers = list(dict.fromkeys([*run.participants, *(m.speaker for m in turns)]))
        try:
            extracted = self._run_extractor(run, entity_scope, target, context)
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
                extractor=run.extractor.id,
                recorded_at=recorded_at,
                entity_ids=resolution.ids,
            )
        except MembrainError as exc:
            if isinstance(exc, InputError):  # a message the extractor refused: its content
                refused = ExtractionError(f"the extractor refused it: {exc}", retryable=False)
                refused.__cause__ = exc
                exc = refused
            if not isinstance(exc, ExtractionError):
                raise  # the store or the configuration failed, not the messages
            self._failed(scope, batch, context, exc, run)
            return
        except _CONTENT_ERRORS as exc:  # what a message's content can trip in an extractor
            failure = ExtractionError(
                f"the extractor raised {type(exc).__name__}: {exc}", retryable=False
            )
            failure.__cause__ = exc
            self._failed(scope, batch, context, failure, run)
            return
        entities = self._resolver.entities_to_write(
            entity_scope, resolution, mentions, recorded_at=recorded_at
        )
        run.participants = speakers
        self._participants_cache[entity_scope.key] = tuple(speakers)
        facts = _authored(facts, {m.id: m.added_by for m in batch})
        facts = _with_metadata(facts, {m.id: m.message.metadata for m in batch})
        facts = _expiring(facts, {m.id: m.expires_at for m in batch})
        self._store.put_entities(entity_scope, entities, cause=run.cause)
        self._store.put_facts(scope, facts, speakers, cause=run.cause)
        self._record_changes(scope, extracted, facts, run)
        reasons: dict[str, list[tuple[str, str]]] = {}
        for item in extracted.discarded:
            reasons.setdefault(item.message_id, []).append((item.reason, item.text))
        self._store.set_message_status(
            scope, batch_ids, MessageStatus.PROCESSED, discarded=reasons, cause=run.cause
        )
        run.discarded += len(extracted.discarded)
        run.fact_ids.extend(f.id for f in facts)
        run.entity_ids.update(dict.fromkeys(e.id for e in entities))

    def _failed(
        self,
        scope: Scope,
        batch: list[StoredMessage],
        context: list[Message],
        exc: ExtractionError,
        run: _Run,
    ) -> None:
        transient = exc.retryable
        if len(batch) > 1 and not transient:
            log.info("extraction of %d messages failed (%s); one by one now", len(batch), exc)
            for number, message in enumerate(batch):
                before = [*context, *(m.message for m in batch[:number])]
                window = before[max(0, len(before) - self._context_window) :]
                self._extract_batch(scope, [message], window, run)
            return
        batch_ids = [m.id for m in batch]
        exc.message_ids = tuple(batch_ids)
        run.errors.append(exc)
        status = MessageStatus.PENDING if transient else MessageStatus.FAILED
        log.warning("extraction of %d messages failed (%s): %s", len(batch), status.value, exc)
        self._store.set_message_status(
            scope,
            batch_ids,
            status,
            error=str(exc),
            raw_output=exc.raw_output,
            cause=Cause(run.cause.actor, str(exc).split(":", 1)[0], run.cause.details),
        )

    def _run_extractor(
        self, run: _Run, scope: Scope, target: Sequence[Message], context: Sequence[Message]
    ) -> ExtractionBatch:
        # What people typed is data: no bracket in it can pass for an entity ref or a time.
        target, context = [_inert(m) for m in target], [_inert(m) for m in context]
        participants = run.participants
        if run.known_by is None:
            return run.extractor.extract(target, context, participants)
        extract: Callable[..., ExtractionBatch] = run.extractor.extract
        if run.known_by == "entity":
            return extract(
                target, context, participants, known=lambda names: self.facts_about(scope, names)
            )
        if run.known_by == "claim":
            return extract(
                target, context, participants, known=lambda keys: self.facts_claiming(scope, keys)
            )
        return extract(
            target,
            context,
            participants,
            known=lambda names: self.known_facts(scope, target, names),
        )

    def facts_about(self, scope: Scope, names: Sequence[str]) -> list[KnownFact]:
        """The scope's active facts naming any of the entities ``names``, oldest first.

        At most :data:`MAX_KNOWN_ABOUT`, the latest stated.
        """
        ids = tuple(dict.fromkeys(entity_id(scope, n) for n in names if n.strip()))
        if not ids:
            return []
        facts = sorted(
            self._store.iter_facts(scope, FactFilter(entity_ids=ids)),
            key=lambda f: (f.stated_at, f.id),
        )[-MAX_KNOWN_ABOUT:]
        return [KnownFact(id=f.id, text=f.text, stated_at=f.stated_at) for f in facts]

    def facts_claiming(self, scope: Scope, keys: Sequence[str]) -> list[KnownFact]:
        """The scope's active facts stating one of the attributes ``keys``, oldest first.

        ``keys`` are :func:`~membrain.extraction.attributes.claim_key` keys
        (``"maya|residence"``); one indexed lookup, however many facts the scope holds.
        """
        facts = sorted(self._store.facts_claiming(scope, keys), key=lambda f: (f.stated_at, f.id))
        return [KnownFact(id=f.id, text=f.text, stated_at=f.stated_at) for f in facts]

    def known_facts(
        self, scope: Scope, target: Sequence[Message], names: Sequence[str] = ()
    ) -> list[KnownFact]:
        """The scope's active facts a batch may replace (indexed lookups only).

        For each message, the facts closest to it by dense similarity: among all facts, among
        those about its speaker, and among those about each entity of ``names`` it mentions;
        at most :data:`MAX_KNOWN`, the closest first.
        """
        texts = [m.text or m.caption or "" for m in target]
        if not texts:
            return []
        best: dict[str, tuple[float, Fact]] = {}
        vectors = self._store.dense.embed_documents(texts)
        for message, text, vector in zip(target, texts, vectors, strict=True):
            folded = text.casefold()
            about = [message.speaker, *(n for n in names if n.casefold() in folded)]
            wheres = [None, *(FactFilter(entity_ids=(entity_id(scope, n),)) for n in about)]
            for where in dict.fromkeys(wheres):
                found = self._store.query_facts(
                    scope, "dense", vector, limit=KNOWN_PER_MESSAGE, where=where
                )
                for hit in found:
                    if hit.id not in best or best[hit.id][0] < hit.score:
                        best[hit.id] = (hit.score, hit.fact)
        ranked = sorted(best.values(), key=lambda pair: (-pair[0], pair[1].id))[:MAX_KNOWN]
        facts = sorted((f for _, f in ranked), key=lambda f: (f.stated_at, f.id))
        return [KnownFact(id=f.id, text=f.text, stated_at=f.stated_at) for f in facts]

    def _record_changes(
        self, scope: Scope, extracted: ExtractionBatch, facts: Sequence[Fact], run: _Run
    ) -> None:
        """Apply (or queue) the supersessions the extractor found; queue disputed facts.

        A supersession is recorded in the batch's scope, so its session reads it, unless the
        replaced fact is of another session of the (dataset, task): then in the scope without
        a session, which sees both.
        """
        stored = {f.id for f in facts}
        cause, extractor_id = run.cause, run.extractor.id
        found = replacements(scope, extracted.facts, extractor=extractor_id)
        for old, news in found.items():
            news = [n for n in news if n in stored and n != old]
            if not news:
                continue
            reason = "the extraction found that a new fact replaces it"
            where = scope if self._store.get_facts(scope, [old]) else scope.without_session()
            self._ledger.propose_supersession(
                where, old, news, Cause(cause.actor, reason, cause.details)
            )
        perhaps = replacements(scope, extracted.facts, extractor=extractor_id, perhaps=True)
        for old, news in perhaps.items():
            news = [n for n in news if n in stored and n != old and old not in found]
            if not news:
                continue
            reason = "the extraction found that a new fact perhaps replaces it"
            where = scope if self._store.get_facts(scope, [old]) else scope.without_session()
            self._ledger.request_review(
                where,
                ReviewKind.SUPERSESSION,
                [old, *news],
                Cause(cause.actor, reason, cause.details),
                old=old,
                new=news,
            )
        self._ledger.disputed_at_extraction(scope, facts, cause)

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


def _check_reused_ids(
    ids: Sequence[str], incoming: Sequence[Message], known: dict[str, StoredMessage]
) -> None:
    """Refuse a caller's message id that already names another text (nothing is stored then).

    Raises:
        ConflictError: the id is stored with another text, or given twice with two texts.
    """
    seen = {i: (m.message.speaker, m.message.text) for i, m in known.items()}
    for stored_id, message in zip(ids, incoming, strict=True):
        said = (message.speaker, message.text)
        if seen.setdefault(stored_id, said) != said:
            raise ConflictError(
                f"message id {message.source_id!r} already names another message "
                f"({seen[stored_id][0]}: {seen[stored_id][1][:60]!r}); give the new one its own id"
            )


@dataclass
class _Run:
    """What one extraction run carries from batch to batch."""

    participants: list[str]
    cause: Cause
    extractor: Extractor
    known_by: str | None
    """How the extractor is given known facts (``None``: it is given none)."""
    fact_ids: list[str] = field(default_factory=list)
    entity_ids: dict[str, None] = field(default_factory=dict)
    errors: list[ExtractionError] = field(default_factory=list)
    discarded: int = 0


def _known_facts_by(extractor: Extractor) -> str | None:
    """How the extractor wants known facts (``"claim"``, ``"entity"``, ``"similarity"``), if."""
    takes_known = "known" in inspect.signature(extractor.extract).parameters
    if not takes_known or not getattr(extractor, "wants_known_facts", True):
        return None
    return str(getattr(extractor, "known_facts_by", "similarity"))


def _cause(extractor: Extractor, by: Actor | None) -> Cause:
    """Who extracts: ``by``, or the extractor (its id and prompt version in the details)."""
    details: dict[str, object] = {"extractor": extractor.id}
    version = getattr(extractor, "prompt_version", None)
    if version is not None:
        details["prompt_version"] = version
    actor = by if by is not None else Actor(kind=ActorKind.EXTRACTOR, name=extractor.id)
    return Cause(actor, "", details)


def _with_metadata(facts: list[Fact], metadata: dict[str, dict[str, Any]]) -> list[Fact]:
    """Facts carrying the metadata of the messages they cite (the first cited wins a clash)."""
    out = []
    for fact in facts:
        carried = merged(metadata.get(s) or {} for s in fact.sources)
        out.append(fact.model_copy(update={"metadata": carried}) if carried else fact)
    return out


def _expiring(facts: list[Fact], expires: dict[str, datetime | None]) -> list[Fact]:
    """Facts expiring with the messages they cite (the latest, when every one expires)."""
    out = []
    for fact in facts:
        end = fact_expiry(expires.get(s) for s in fact.sources)
        out.append(fact.model_copy(update={"expires_at": end}) if end is not None else fact)
    return out


def _authored(facts: list[Fact], added_by: dict[str, str | None]) -> list[Fact]:
    """Facts from what an agent added are ``derived`` (unless disputed) and name it as author."""
    out = []
    for fact in facts:
        author = next((added_by[s] for s in fact.sources if added_by.get(s)), None)
        if author is None:
            out.append(fact)
            continue
        trust = fact.trust if fact.trust is Trust.DISPUTED else Trust.DERIVED
        out.append(fact.model_copy(update={"author": author, "trust": trust}))
    return out
