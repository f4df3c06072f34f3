"""The accountability half of :class:`membrain.Memory`: why the agent believes what it does.

History, audit, trust, review, forgetting, supersession, purge and retention, each one call that
checks its scope and names who acts (``by``: ``"agent:planner"``, ``"reviewer:ana"``, or an
:class:`~membrain.models.Actor`). The rules live in :class:`membrain.ledger.Ledger`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from contextlib import suppress
from datetime import datetime, timedelta

from membrain.arguments import as_ids
from membrain.audit import (
    AuditAction,
    AuditEvent,
    Cause,
    FactHistory,
    ReviewItem,
)
from membrain.checks import MAX_MESSAGE_CHARS, MAX_REASON_CHARS, bounded_text
from membrain.errors import ConfigurationError, ConflictError, InputError, NotFoundError
from membrain.extraction.stated import StatedFacts
from membrain.facts import fact_id_of
from membrain.ingest import Ingestor, message_id
from membrain.ledger import Ledger
from membrain.models import (
    Actor,
    ActorKind,
    Fact,
    FactStatus,
    Message,
    MessageStatus,
    Scope,
    StoredMessage,
    now,
    utc,
)
from membrain.results import PurgeResult
from membrain.scope import dataset_part
from membrain.storage.base import Collection, ScoredPoint, check_scope, is_point_id
from membrain.store import RecordStore
from membrain.store.journal import Change
from membrain.store.records import id_prefix
from membrain.temporal import find_annotations

__all__ = ["UPDATE_CHANGE", "AccountableMemory", "PurgeResult"]

log = logging.getLogger("membrain")

UPDATE_CHANGE = "update"
"""The announced change of :meth:`AccountableMemory.update` (its finisher's name)."""


def _one_id(value: object) -> str:
    if not isinstance(value, str):
        raise InputError(f"a fact id must be a string, got {value!r:.80}")
    return value


class AccountableMemory:
    """History, audit, review and erasure of :class:`membrain.Memory` (see the module doc).

    Every fact id may be given whole or as a unique prefix of 8 or more hex digits (as context
    lines and tools show them); a prefix naming several facts is an ``InputError``.
    """

    _store: RecordStore
    _ledger: Ledger
    _ingestor: Ingestor
    keep_messages: timedelta | None

    def _fact_ids(self, scope: Scope, value: object) -> list[str]:
        """Fact ids given as a string or a list, prefixes made whole (see the class doc)."""
        return self._store.full_ids(Collection.FACTS, scope, as_ids(value))

    # -- belief changes ----------------------------------------------------------------------
    def forget(
        self,
        fact_ids: Sequence[str],
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> list[Fact]:
        """Tombstone facts: their status becomes ``forgotten`` (recorded as ``forgotten_at``).

        A forgotten fact is kept, with its sources, for audit, and never returned by a search
        (except ``as_of`` a time before it was forgotten) or by :meth:`facts` (unless
        ``include_inactive``). To erase content, :meth:`purge` it. When the review policy holds
        agents' forget requests, an agent's request is queued instead and the facts are returned
        unchanged.

        Raises:
            InputError: an id names no fact of ``scope``.
        """
        check_scope(scope)
        cause = Cause.of(by, ActorKind.API, reason)
        return self._ledger.forget(scope, self._fact_ids(scope, fact_ids), cause)

    def supersede(
        self,
        old_fact_id: str,
        new_fact_ids: Sequence[str],
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> Fact:
        """Record that ``new_fact_ids`` replace ``old_fact_id``; nothing is overwritten.

        The old fact becomes ``superseded`` (out of current beliefs, still answering questions
        about its own time), records ``superseded_by`` and ``superseded_at``, and its valid time
        is closed where the first new fact's begins; each new fact records ``supersedes``.
        Returns the old fact as updated.

        Raises:
            InputError: an id names no fact of ``scope``, or no new id is given.
        """
        check_scope(scope)
        cause = Cause.of(by, ActorKind.API, reason)
        old_id = self._fact_ids(scope, _one_id(old_fact_id))
        (old,) = self._ledger.supersede(scope, old_id, self._fact_ids(scope, new_fact_ids), cause)
        return old

    def update(
        self,
        fact_id: str,
        text: str,
        *,
        scope: Scope,
        reason: str = "",
        by: Actor | str | None = None,
    ) -> Fact:
        """Replace a fact by a new statement of it; the old one is superseded, not overwritten.

        ``text`` is what is now true, in the fact format (``"[Sara] lives in [Berlin] since
        [March 2024::2024-03]"``), where the names of the old fact's entities written without
        brackets are bracketed. It is stored as a message said by ``by`` (the evidence the new
        fact cites), the new fact is written from it like an extracted one (entities, indexes,
        audit), and the old fact is superseded by it with ``reason``: one audited
        supersession. Returns the new fact.

        It is one change, announced in the audit first: a crash midway leaves it applied in full
        (or, stopped before the message was stored, not at all) once the store opens again, and
        the message is never extracted by anything else.

        Raises:
            NotFoundError: no fact of ``scope`` has that id.
            ConflictError: the fact is not active (superseded, forgotten or retracted).
            InputError: ``text`` is empty, too long or has a malformed time annotation, or
                ``reason`` is too long (nothing is written then).
        """
        check_scope(scope)
        old = self.get(fact_id, scope=scope)
        if old.status is not FactStatus.ACTIVE:
            raise ConflictError(f"only active facts can be updated; {old.id} is {old.status}")
        said = bounded_text(text, "text", MAX_MESSAGE_CHARS).strip()
        if not said:
            raise InputError("the new text of a fact is empty")
        bounded_text(reason, "reason", MAX_REASON_CHARS)  # checked before anything is written
        stated = _bracketed(said, old.entities)
        find_annotations(stated)  # a malformed time is refused before anything is written
        cause = Cause.of(by, ActorKind.API, reason)
        moment = now()
        message = Message(
            speaker=str(cause.actor),
            text=said,
            timestamp=moment,
            source_id=f"update:{old.id}:{moment.isoformat()}",
            metadata=old.metadata,  # the new fact keeps what the old one was filed under
        )
        stored_id = message_id(scope, message)
        agent = cause.actor.kind is ActorKind.AGENT
        evidence = StoredMessage(
            id=stored_id,
            scope=scope,
            message=message.model_copy(update={"id": stored_id}),
            # Stored as extracted already: no extraction but this one ever reads it.
            status=MessageStatus.PROCESSED,
            recorded_at=now(),
            added_by=str(cause.actor) if agent else None,
        )
        new_id = fact_id_of(scope, StatedFacts.id, (stored_id,), stated)
        # One change: announced first (the supersession's event, pending), then the message,
        # the fact and the supersession; settled when the store opens if a crash stops it.
        intent = self._store.announce(
            scope,
            Cause(cause.actor, reason or "updated"),
            Change(
                AuditAction.SUPERSEDED,
                (old.id,),
                {"superseded_by": [new_id]},
                {"change": UPDATE_CHANGE, "message": stored_id, "fact": new_id},
            ),
        )
        try:
            self._store.put_messages(scope, [evidence], cause=Cause(cause.actor))
            self._finish_update(scope, intent)
        except BaseException:
            with suppress(Exception):
                self._abandon_update(scope, intent)
            raise
        return self.get(new_id, scope=scope)

    def _finish_update(self, scope: Scope, intent: ScoredPoint) -> None:
        """Write what an announced update has not written yet, then commit its event.

        Every step is skipped when done already: the message stored, the fact written from it,
        the old fact superseded (a supersession applied again changes nothing).

        Raises:
            MembrainError: a write or the fact's extraction failed (nothing is undone).
        """
        redo = intent.payload["redo"]
        actor = Actor.model_validate(intent.payload["actor"])
        (old_id,) = intent.payload["targets"]
        evidence = self._store.get_messages(scope, [redo["message"]])
        olds = self._store.get_facts(scope, [old_id])
        if not evidence or not olds:  # stopped before the message was stored
            self._store.drop_announced(scope, intent)
            return
        (message,), (old,) = evidence, olds
        new_id = redo["fact"]
        if self._store.get_facts(scope, [new_id]):
            self._store.audit_missing(
                scope, AuditAction.PROCESSED, [message.id], cause=Cause(actor)
            )
        else:
            stated = _bracketed(message.message.text, old.entities)
            result = self._ingestor.extract(
                scope, [message], None, by=actor, extractor=StatedFacts({message.id: stated})
            )
            if result.errors or new_id not in result.fact_ids:
                said = message.message.text
                problem = InputError(f"no fact could be written from {said!r:.80}")
                raise (result.errors or (problem,))[0]
        cause = Cause(actor, str(intent.payload.get("reason") or "updated"))
        self._ledger.supersede(scope, [old.id], [new_id], cause, announced=intent)

    def _abandon_update(self, scope: Scope, intent: ScoredPoint) -> None:
        """Undo an update that wrote no fact: its message is dismissed, never extracted."""
        if self._store.get_facts(scope, [intent.payload["redo"]["fact"]]):
            return  # the fact is written: the update is finished, now or on the next open
        evidence = self._store.get_messages(scope, [intent.payload["redo"]["message"]])
        if evidence and evidence[0].status is not MessageStatus.DISMISSED:
            actor = Actor.model_validate(intent.payload["actor"])
            cause = Cause(actor, "the update it states failed")
            self._store.set_message_status(
                scope, [evidence[0].id], MessageStatus.DISMISSED, cause=cause
            )
        self._store.drop_announced(scope, intent)

    def _recover_update(self, scope: Scope, intent: ScoredPoint) -> None:
        """Settle an update a crash stopped (when the store opens): finish it, or undo it."""
        try:
            self._finish_update(scope, intent)
        except Exception as exc:
            log.warning("an interrupted update in %s could not be finished: %s", scope.key, exc)
            with suppress(Exception):
                self._abandon_update(scope, intent)

    def confirm(
        self, fact_ids: Sequence[str], *, scope: Scope, by: Actor | str | None = None
    ) -> list[Fact]:
        """A person confirms facts: their trust becomes ``confirmed``; open disputes close."""
        check_scope(scope)
        cause = Cause.of(by, ActorKind.REVIEWER)
        return self._ledger.confirm(scope, self._fact_ids(scope, fact_ids), cause)

    def dispute(
        self,
        fact_ids: Sequence[str],
        *,
        scope: Scope,
        reason: str = "",
        by: Actor | str | None = None,
    ) -> ReviewItem:
        """Dispute facts: their trust becomes ``disputed`` and they wait in the review queue."""
        check_scope(scope)
        cause = Cause.of(by, ActorKind.REVIEWER, reason)
        return self._ledger.dispute(scope, self._fact_ids(scope, fact_ids), cause)

    # -- review ------------------------------------------------------------------------------
    def review_queue(self, *, scope: Scope) -> list[ReviewItem]:
        """What a person should look at, oldest first.

        Disputed facts (time contradictions found at extraction included); supersessions by the
        model and agents' forget requests when the review policy holds them.
        """
        check_scope(scope)
        return self._ledger.review_queue(scope)

    def resolve(
        self,
        item: ReviewItem | str,
        *,
        accept: bool = True,
        by: Actor | str | None = None,
        note: str = "",
        scope: Scope | None = None,
    ) -> ReviewItem:
        """Accept or reject a review item; the decision is audited (``review_resolved``).

        Accepting applies the change (confirms a disputed fact, applies a supersession, forgets);
        rejecting a disputed fact retracts it: out of every read, kept for audit. ``item`` is
        a :class:`ReviewItem` or its id; the scope is the item's, or ``scope`` when given (an
        id this process has not seen in :meth:`review_queue` or :meth:`dispute` needs it).

        Raises:
            InputError: no open review item has this id in the scope.
            ScopeError: the item's scope is unknown and ``scope`` is not given.
        """
        item_id = item.id if isinstance(item, ReviewItem) else item
        if scope is None:
            scope = item.scope if isinstance(item, ReviewItem) else self._ledger.scope_of(item_id)
        check_scope(scope)
        cause = Cause.of(by, ActorKind.REVIEWER, note)
        return self._ledger.resolve(scope, item_id, accept, cause)

    # -- explanation -------------------------------------------------------------------------
    def get(self, fact_id: str, *, scope: Scope) -> Fact:
        """One fact by its id (or a unique prefix of it), whatever its status.

        Raises:
            NotFoundError: no fact of ``scope`` has that id.
        """
        check_scope(scope)
        (whole,) = self._fact_ids(scope, _one_id(fact_id))
        (fact,) = self._ledger.facts(scope, [whole])
        return fact

    def history(self, fact_id: str, *, scope: Scope) -> FactHistory:
        """A fact's life, oldest first: the facts it replaced and that replaced it, every event.

        A purged fact's whole id still has its events; a whole id naming nothing has none.

        Raises:
            NotFoundError: an id prefix names no fact of ``scope``.
            InputError: ``fact_id`` is neither an id nor an id prefix.

        Example:
            >>> print(mem.history(berlin.id, scope=scope).text())  # doctest: +SKIP
        """
        check_scope(scope)
        (whole,) = self._fact_ids(scope, _one_id(fact_id))
        if not is_point_id(whole) and id_prefix(whole) is not None:
            raise NotFoundError(f"no fact with id {fact_id} in scope {scope.key!r}")
        return self._ledger.history(scope, whole)

    def audit(
        self,
        *,
        scope: Scope,
        since: datetime | None = None,
        actions: Sequence[AuditAction | str] | None = None,
        targets: Sequence[str] = (),
    ) -> list[AuditEvent]:
        """The scope's audit log, oldest first (from ``since``, of ``actions``, about ``targets``).

        Raises:
            ConfigurationError: an unknown action.
        """
        check_scope(scope)
        try:
            wanted = [AuditAction(a) for a in actions or ()]
        except ValueError:
            known = ", ".join(a.value for a in AuditAction)
            raise ConfigurationError(
                f"unknown audit action in {actions!r}; known: {known}"
            ) from None
        start = utc(since) if since is not None else None
        return self._store.iter_audit(scope, targets=targets, actions=wanted, since=start)

    # -- erasure -----------------------------------------------------------------------------
    def purge(
        self,
        fact_ids: Sequence[str] = (),
        *,
        scope: Scope,
        messages: Sequence[str] | bool = (),
        by: Actor | str | None = None,
        reason: str = "",
    ) -> PurgeResult:
        """Erase content for privacy: it leaves every index and the store's files.

        The named facts lose their text, vectors, lexical and entity-tree entries. ``messages``
        names stored message ids to erase too, or is ``True`` for the named facts' source
        messages; every fact derived from an erased message is erased with it. Entities lose
        the description versions those facts wrote, and an entity no fact names any more is
        erased. The audit keeps a ``purged`` event with the ids and the actor, never content.

        The erasure is announced in the audit before anything is deleted: one interrupted (an
        error, a killed process) is finished by the next purge of the scope or when the store
        opens. A purge is idempotent: ids an earlier purge erased are reported erased again.

        Raises:
            InputError: nothing to purge, or an id names no fact or message of ``scope`` (nor
                one a purge erased).
        """
        check_scope(scope)
        ids = [] if isinstance(messages, bool) else as_ids(messages, "message ids")
        ids = self._store.full_ids(Collection.MESSAGES, scope, ids)
        fact_ids = self._fact_ids(scope, fact_ids)
        if not fact_ids and not ids:
            raise InputError("purge needs fact ids or message ids")
        cause = Cause.of(by, ActorKind.API, reason)
        facts, erased, entities = self._ledger.purge(
            scope, fact_ids, ids, cause, sources=messages is True
        )
        return PurgeResult(tuple(facts), tuple(erased), tuple(entities))

    def delete_scope(self, scope: Scope) -> None:
        """Delete everything stored under ``scope`` (all sessions when it has none).

        That includes its audit log, its derived lexical index entries and its bookkeeping scope
        (:meth:`Scope.bookkeeping`, e.g. a chat history's "cleared" markers). The embedded
        store's files are rewritten so nothing of it stays on disk (as by :meth:`purge`).
        """
        check_scope(scope)
        self._store.delete_scope(scope, scope.bookkeeping())

    def delete_dataset(self, dataset: str) -> list[Scope]:
        """Delete every task of ``dataset`` (a whole user), as :meth:`delete_scope` deletes one.

        Every (dataset, task) holding any record goes, bookkeeping scopes included, in one
        deletion that finishes after a crash. The dataset's erasure log stays: it records that
        the deletion happened. Returns the (dataset, task) scopes deleted, bookkeeping ones
        left out.

        Raises:
            ScopeError: ``dataset`` is not a valid scope part.
        """
        name = dataset_part(dataset)
        every = self._store.scopes(name, every=True)
        if every:
            self._store.delete_scope(*every)
        return [s for s in every if not s.is_bookkeeping]

    def apply_retention(
        self, *, scope: Scope | None = None, at: datetime | None = None
    ) -> PurgeResult:
        """Erase extracted messages older than ``keep_messages`` (the retention setting).

        A message's age is counted from its ``timestamp`` (when it was said) to ``at`` (default
        now). Erased as by :meth:`purge`, from every index and the store's files; the facts
        extracted from them stay, and then cite evidence that no longer exists. Pending
        messages stay until extracted. Without ``scope``, every (dataset, task) of the store.
        Does nothing when messages are kept forever (the default).
        """
        moment = utc(at) if at is not None else now()
        chosen = [check_scope(scope)] if scope is not None else None
        if self.keep_messages is None:
            return PurgeResult()
        try:
            cutoff = moment - self.keep_messages
        except OverflowError:
            raise InputError(f"{moment.isoformat()} minus the retention is before year 1") from None
        scopes = chosen if chosen is not None else self._store.message_tenants()
        cause = Cause(Actor(kind=ActorKind.SYSTEM, name="retention"), "retention policy")
        erased: list[str] = []
        for target in scopes:
            old = [
                m.id
                for m in self._store.iter_messages(target, status=MessageStatus.PROCESSED)
                if m.message.timestamp < cutoff
            ]
            if old:
                self._store.purge(target, messages=old, cause=cause)
                erased.extend(old)
        return PurgeResult(message_ids=tuple(erased))


def _bracketed(text: str, names: Sequence[str]) -> str:
    """``text`` with each whole word of ``names`` outside brackets put in brackets."""
    if not names:
        return text
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    name = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")
    parts = re.split(r"(\[[^\[\]]*\])", text)  # odd parts: a ref or an annotation already
    return "".join(
        part if i % 2 else name.sub(lambda m: f"[{m.group(0)}]", part)
        for i, part in enumerate(parts)
    )
