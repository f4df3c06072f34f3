"""The accountability layer: supersession, trust and review, history and purge, over the store.

Every rule about how a belief changes lives here, once, whatever asks for the change (the
extraction model, application code, an agent's memory tool, a reviewer):

* **Supersession** never overwrites: the old fact becomes ``superseded``, records the facts that
  replaced it and when (record time), and its valid time is closed where the new fact's begins
  (unless it was closed already); each new fact records what it replaced.
* **Trust**: ``confirm`` and ``dispute`` change a fact's trust; a dispute (and, when the
  :class:`~membrain.api.audit.ReviewPolicy` says so, a model's supersession or an agent's request to
  forget) becomes a :class:`~membrain.api.audit.ReviewItem` that a person resolves.
* **Knock-on review**: after a supersession, the active facts that rested on the replaced value
  are queued for review (:mod:`membrain.knowledge.knock_on`).
* **History** is read from the audit log and the supersession links.
* **Purge** erases content for privacy, everything derived from it included.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from membrain.api.audit import (
    AuditAction,
    AuditEvent,
    Cause,
    FactHistory,
    ReviewItem,
    ReviewKind,
    ReviewPolicy,
)
from membrain.api.checks import MAX_REASON_CHARS
from membrain.api.erasure import ErasureReceipt
from membrain.api.errors import ConflictError, InputError, NotFoundError, ScopeError
from membrain.api.models import Actor, ActorKind, Fact, FactStatus, Scope, Trust
from membrain.backends.base import ScoredPoint, is_point_id
from membrain.extraction.llm import LLMClient
from membrain.knowledge.knock_on import Change as KnockOnChange
from membrain.knowledge.knock_on import KnockOn, still_holds
from membrain.records import FactFilter, RecordStore
from membrain.records.journal import Change

__all__ = ["Ledger", "close_validity"]

_HISTORY_DEPTH = 64
"""How many supersession links a history follows at most."""


def close_validity(old: Fact, new: Fact) -> datetime | None:
    """Where ``old``'s valid time ends once ``new`` replaces it.

    At ``new``'s valid start (its stated time when it has none), unless ``old`` already ends by
    then, or the cut would leave ``old`` no valid time at all: then its end is kept.
    """
    cut = new.valid_from or new.stated_at
    if old.valid_to is not None and old.valid_to <= cut:
        return old.valid_to
    if old.valid_from is not None and cut <= old.valid_from:
        return old.valid_to
    return cut


class Ledger:
    """Applies and explains changes of belief (see the module docstring).

    Args:
        store: The record store (every change is written, and audited, through it).
        policy: Which changes wait for a person.
        llm: The model that picks a supersession's knock-on dependants (``None``: the rule).
        max_attempts: Calls to it per batch before the rule's candidates are kept.
    """

    def __init__(
        self,
        store: RecordStore,
        policy: ReviewPolicy | None = None,
        *,
        llm: LLMClient | None = None,
        max_attempts: int = 3,
    ) -> None:
        self.store = store
        self.policy = policy or ReviewPolicy()
        self.knock_on = KnockOn(store, llm, max_attempts=max_attempts)
        self._item_scopes: dict[str, Scope] = {}
        self._pending = threading.local()  # each thread's batch of changes to review

    def scope_of(self, item_id: str) -> Scope:
        """The scope of a review item this ledger queued or listed.

        Raises:
            ScopeError: the item is unknown here (its scope must be given).
        """
        try:
            return self._item_scopes[item_id]
        except KeyError:
            raise ScopeError(
                f"review item {item_id!r} was not listed by this memory; pass scope=..."
            ) from None

    # -- lookups -----------------------------------------------------------------------------
    def facts(self, scope: Scope, fact_ids: Sequence[str]) -> list[Fact]:
        """The facts with these ids, in order.

        Raises:
            InputError: an id names no fact of ``scope``.
        """
        ids = list(dict.fromkeys(fact_ids))
        found = self.store.get_facts(scope, [i for i in ids if is_point_id(i)])
        missing = sorted(set(ids) - {f.id for f in found})
        if missing:
            raise NotFoundError(f"no fact with id {', '.join(missing)} in scope {scope.key!r}")
        return found

    # -- supersession ------------------------------------------------------------------------
    def supersede(
        self,
        scope: Scope,
        old_ids: Sequence[str],
        new_ids: Sequence[str],
        cause: Cause,
        *,
        announced: ScoredPoint | None = None,
        knock_on: bool = True,
    ) -> list[Fact]:
        """Record that the facts ``new_ids`` replace the facts ``old_ids``; the old ones, updated.

        An old fact already superseded keeps its first record time and valid end, and gains the
        new replacements (so the same supersession applied again changes nothing). With
        ``announced``, its event is that pending one (:meth:`RecordStore.announce`). Then, with
        ``knock_on`` and the policy's, the facts that rested on an old fact active until now are
        queued for review (at the end of the batch, within :meth:`batch`).

        Raises:
            InputError: an id names no fact, no new id is given, a fact would replace itself,
                or an old fact was retracted.
        """
        if not new_ids or not old_ids:
            raise InputError("a supersession needs the replaced fact ids and the new fact ids")
        if set(old_ids) & set(new_ids):
            raise InputError("a fact cannot supersede itself")
        olds = self.facts(scope, old_ids)
        news = self.facts(scope, new_ids)
        retracted = [f.id for f in olds if f.status is FactStatus.RETRACTED]
        if retracted:
            raise ConflictError(f"retracted facts cannot be superseded: {', '.join(retracted)}")
        gone = [f.id for f in news if f.status is not FactStatus.ACTIVE]
        if gone:
            raise ConflictError(f"only active facts can replace others, not {', '.join(gone)}")
        at = self.store.now()
        first = min(news, key=lambda f: (f.valid_from or f.stated_at, f.id))
        changed = []
        for old in olds:
            update: dict[str, Any] = {
                "superseded_by": tuple(dict.fromkeys([*old.superseded_by, *new_ids]))
            }
            if old.status is FactStatus.ACTIVE:
                update |= {
                    "status": FactStatus.SUPERSEDED,
                    "superseded_at": at,
                    "valid_to": close_validity(old, first),
                }
            changed.append(old.model_copy(update=update))
        for new in news:
            links = tuple(dict.fromkeys([*new.supersedes, *old_ids]))
            changed.append(new.model_copy(update={"supersedes": links}))
        details = {**cause.details, "superseded_by": list(new_ids)}
        self.store.update_facts(
            scope,
            changed,
            action=AuditAction.SUPERSEDED,
            targets=list(old_ids),
            cause=Cause(cause.actor, cause.reason, details),
            announced=announced,
        )
        if knock_on and self.policy.knock_on:
            was = [f for f in olds if f.status is FactStatus.ACTIVE]
            self._knock_on_changes().extend(KnockOnChange(scope, f, tuple(news)) for f in was)
            if not getattr(self._pending, "depth", 0):
                self._review_knock_on()
        return changed[: len(olds)]

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Review the knock-on effects of the supersessions applied within together, at the end.

        One model call for all of them; batches nest (the outermost one reviews).
        """
        self._pending.depth = getattr(self._pending, "depth", 0) + 1
        try:
            yield
        finally:
            self._pending.depth -= 1
        if not self._pending.depth:  # after a failure, the next review takes them
            self._review_knock_on()

    def _knock_on_changes(self) -> list[KnockOnChange]:
        changes: list[KnockOnChange] | None = getattr(self._pending, "changes", None)
        if changes is None:
            changes = self._pending.changes = []
        return changes

    def _review_knock_on(self) -> None:
        """Queue one ``knock_on`` review item per change with dependants."""
        changes = self._knock_on_changes()
        self._pending.changes = []
        if not changes:
            return
        found, chosen_by = self.knock_on.dependants(changes)
        actor = Actor(kind=ActorKind.SYSTEM, name="knock-on")
        for dependants in found:
            cause = Cause(actor, dependants.reason, {"chosen_by": chosen_by})
            self.request_review(
                dependants.scope,
                ReviewKind.KNOCK_ON,
                [f.id for f in dependants.facts],
                cause,
                old=dependants.change.old.id,
                new=[n.id for n in dependants.change.new],
            )

    def propose_supersession(
        self, scope: Scope, old_id: str, new_ids: Sequence[str], cause: Cause
    ) -> ReviewItem | None:
        """Apply a supersession the model found, or queue it when the policy holds it."""
        if not self.policy.model_supersessions:
            self.supersede(scope, [old_id], new_ids, cause)
            return None
        return self.request_review(
            scope, ReviewKind.SUPERSESSION, [old_id, *new_ids], cause, old=old_id, new=new_ids
        )

    # -- status and trust --------------------------------------------------------------------
    def forget(self, scope: Scope, fact_ids: Sequence[str], cause: Cause) -> list[Fact]:
        """Tombstone facts, or queue the request when the policy holds an agent's forgets.

        Returns the facts as they now are (still active when the request waits for review).
        """
        facts = self.facts(scope, fact_ids)
        if cause.actor.kind is ActorKind.AGENT and self.policy.agent_forgets:
            self.request_review(scope, ReviewKind.FORGET, fact_ids, cause)
            return facts
        return self._forget(scope, facts, cause)

    def _forget(self, scope: Scope, facts: Sequence[Fact], cause: Cause) -> list[Fact]:
        at = self.store.now()
        update = {"status": FactStatus.FORGOTTEN, "forgotten_at": at}
        # A superseded fact still answers questions about the past: it is forgotten too.
        live = (FactStatus.ACTIVE, FactStatus.SUPERSEDED)
        changed = [f.model_copy(update=update) for f in facts if f.status in live]
        self.store.update_facts(scope, changed, action=AuditAction.FORGOTTEN, cause=cause)
        done_before = [f.id for f in facts if f.status is FactStatus.FORGOTTEN]
        self.store.audit_missing(scope, AuditAction.FORGOTTEN, done_before, cause=cause)
        done = {f.id: f for f in changed}
        return [done.get(f.id, f) for f in facts]

    def confirm(self, scope: Scope, fact_ids: Sequence[str], cause: Cause) -> list[Fact]:
        """Mark facts confirmed by a person; open disputes about them are resolved."""
        facts = self.facts(scope, fact_ids)
        changed = [f.model_copy(update={"trust": Trust.CONFIRMED}) for f in facts]
        self.store.update_facts(scope, changed, action=AuditAction.CONFIRMED, cause=cause)
        for item in self.review_queue(scope):
            if item.kind is ReviewKind.DISPUTE and set(item.fact_ids) <= set(fact_ids):
                self._resolved(scope, item, True, cause)
        return changed

    def dispute(self, scope: Scope, fact_ids: Sequence[str], cause: Cause) -> ReviewItem:
        """Mark facts disputed and queue them for review.

        Raises:
            InputError: no id, or an id naming no fact of the scope.
        """
        if not fact_ids:
            raise InputError("dispute needs at least one fact id")
        facts = self.facts(scope, fact_ids)
        changed = [f.model_copy(update={"trust": Trust.DISPUTED}) for f in facts]
        # The item is part of the change, its event first: once the change is announced, a
        # dispute interrupted midway is finished with its item (never an open item whose facts
        # read as undisputed, nor disputed facts no one is asked about).
        request = _review_change(ReviewKind.DISPUTE, fact_ids)
        events = self.store.update_facts(
            scope, changed, action=AuditAction.DISPUTED, cause=cause, noted=[request]
        )
        item = _item(events[0])
        self._item_scopes[item.id] = scope
        return item

    def disputed_at_extraction(self, scope: Scope, facts: Sequence[Fact], cause: Cause) -> None:
        """Queue the facts an extraction flagged disputed (a time contradiction)."""
        for fact in facts:
            if fact.trust is Trust.DISPUTED:
                reason = "its time annotations contradict the message time"
                self.request_review(
                    scope, ReviewKind.DISPUTE, [fact.id], Cause(cause.actor, reason)
                )

    # -- review ------------------------------------------------------------------------------
    def request_review(
        self,
        scope: Scope,
        kind: ReviewKind,
        fact_ids: Sequence[str],
        cause: Cause,
        *,
        old: str | None = None,
        new: Sequence[str] = (),
    ) -> ReviewItem:
        """Queue a review item (an audit event of action ``review_requested``)."""
        request = _review_change(kind, fact_ids, old=old, new=new)
        event = self.store.note(
            scope, request.action, request.targets, cause=cause, details=request.details
        )
        self._item_scopes[event.id] = scope
        return _item(event)

    def review_queue(self, scope: Scope) -> list[ReviewItem]:
        """The open review items of the scope, oldest first."""
        events = self.store.iter_audit(
            scope, actions=[AuditAction.REVIEW_REQUESTED, AuditAction.REVIEW_RESOLVED]
        )
        closed = {e.details.get("item") for e in events if e.action is AuditAction.REVIEW_RESOLVED}
        items = [
            _item(e)
            for e in events
            if e.action is AuditAction.REVIEW_REQUESTED and e.id not in closed
        ]
        self._item_scopes.update((i.id, scope) for i in items)
        return items

    def resolve(self, scope: Scope, item_id: str, accept: bool, cause: Cause) -> ReviewItem:
        """Apply (``accept``) or reject the change a review item proposes; audited.

        A dispute accepted confirms the facts, rejected retracts them (out of every read, kept
        for audit). A supersession accepted is applied. A forget request accepted forgets. A
        knock-on review accepted supersedes its facts by the new ones (with no knock-on review of
        its own), rejected confirms them.

        Raises:
            InputError: no open review item has this id in the scope.
        """
        item = next((i for i in self.review_queue(scope) if i.id == item_id), None)
        if item is None:
            raise NotFoundError(f"no open review item {item_id!r} in scope {scope.key!r}")
        # Facts purged since the request are gone: the decision applies to what is left.
        facts = self.store.get_facts(scope, list(item.fact_ids))
        if accept and item.kind is ReviewKind.SUPERSESSION and item.old is not None:
            if len(facts) == len(item.fact_ids):
                self.supersede(scope, [item.old], item.new, cause)
        elif item.kind is ReviewKind.KNOCK_ON:
            self._resolve_knock_on(scope, item, facts, accept, cause)
        elif accept and item.kind is ReviewKind.FORGET:
            reviewer = Cause(cause.actor, cause.reason or "forget request accepted")
            self._forget(scope, facts, reviewer)
        elif item.kind is ReviewKind.DISPUTE and facts:
            if accept:
                changed = [f.model_copy(update={"trust": Trust.CONFIRMED}) for f in facts]
                action = AuditAction.CONFIRMED
            else:
                at = self.store.now()
                update = {"status": FactStatus.RETRACTED, "retracted_at": at}
                changed = [f.model_copy(update=update) for f in facts]
                action = AuditAction.RETRACTED
            self.store.update_facts(scope, changed, action=action, cause=cause)
        self._resolved(scope, item, accept, cause)
        return item

    def _resolve_knock_on(
        self, scope: Scope, item: ReviewItem, facts: Sequence[Fact], accept: bool, cause: Cause
    ) -> None:
        """Supersede the dependants still active by the new facts, or confirm them."""
        live = [f for f in facts if f.status is FactStatus.ACTIVE]
        if accept:
            news = self.store.get_facts(scope, list(item.new))
            if live and news and all(n.status is FactStatus.ACTIVE for n in news):
                reason = Cause(cause.actor, cause.reason or item.reason, cause.details)
                ids = [f.id for f in live]
                self.supersede(scope, ids, [n.id for n in news], reason, knock_on=False)
        elif live:
            changed = [f.model_copy(update={"trust": Trust.CONFIRMED}) for f in live]
            why = still_holds(item.reason) + (f" ({cause.reason})" if cause.reason else "")
            reason = Cause(cause.actor, why[:MAX_REASON_CHARS], cause.details)
            self.store.update_facts(scope, changed, action=AuditAction.CONFIRMED, cause=reason)

    def _resolved(self, scope: Scope, item: ReviewItem, accept: bool, cause: Cause) -> None:
        self.store.note(
            scope,
            AuditAction.REVIEW_RESOLVED,
            [item.id, *item.fact_ids],
            cause=cause,
            details={"item": item.id, "kind": item.kind.value, "accepted": accept},
        )

    # -- history -----------------------------------------------------------------------------
    def history(self, scope: Scope, fact_id: str) -> FactHistory:
        """The fact's supersession chain and every audit event about it, oldest first.

        A purged fact has no record left: its history is its events (ids and actors only).
        """
        seen: dict[str, Fact] = {}
        frontier = [fact_id]
        ids: list[str] = []
        while frontier and len(ids) < _HISTORY_DEPTH:
            batch = [i for i in dict.fromkeys(frontier) if i not in ids]
            ids.extend(batch)
            found = self.store.get_facts(scope, batch)
            seen.update({f.id: f for f in found})
            frontier = [i for f in found for i in (*f.supersedes, *f.superseded_by)]
        events = self.store.iter_audit(scope, targets=ids) if ids else []
        facts = sorted(seen.values(), key=lambda f: (f.recorded_at, f.stated_at, f.id))
        return FactHistory(fact_id=fact_id, facts=tuple(facts), events=tuple(events))

    # -- purge -------------------------------------------------------------------------------
    def purge(
        self,
        scope: Scope,
        fact_ids: Sequence[str],
        message_ids: Sequence[str],
        cause: Cause,
        *,
        sources: bool = False,
    ) -> tuple[list[str], list[str], list[str], ErasureReceipt | None]:
        """Erase facts and messages; the ids of the facts, messages and entities erased.

        Also the erasure's receipt (None when every id was erased before).

        With ``sources`` the named facts' source messages go too; every fact derived from an
        erased message goes with it. Entities lose the description versions written from
        erased facts, and an entity no remaining fact names (a participant aside) is erased.

        Raises:
            InputError: a fact id names no fact of the scope, or a message id no message.
        """
        # An erasure interrupted earlier is finished first. A purge is idempotent: ids erased
        # already (now, or by an earlier purge the audit records) count as found and erased.
        finished = self.store.finish_erasures(scope)
        wanted = [i for i in dict.fromkeys(fact_ids) if i not in finished]
        facts = self.store.get_facts(scope, [i for i in wanted if is_point_id(i)])
        messages = list(dict.fromkeys(message_ids))
        named = [i for i in messages if is_point_id(i)]  # an unknown prefix names nothing
        known = {m.id for m in self.store.get_messages(scope, named)}
        unknown = [i for i in wanted if i not in {f.id for f in facts}]
        unknown += [i for i in messages if i not in known and i not in finished]
        finished |= self._purged_before(scope, unknown)
        missing = [i for i in wanted if i not in finished and i not in {f.id for f in facts}]
        if missing:
            raise NotFoundError(f"no fact with id {', '.join(missing)} in scope {scope.key!r}")
        missing = sorted(set(messages) - known - finished)
        if missing:
            raise NotFoundError(f"no message with id {', '.join(missing)} in scope {scope.key!r}")
        messages = [m for m in messages if m in known]
        if sources:
            cited = [s for f in facts for s in f.sources if s not in known]
            # Evidence a retention policy or an earlier purge erased is gone already.
            known |= {m.id for m in self.store.get_messages(scope, cited)}
            messages = list(dict.fromkeys([*messages, *(s for s in cited if s in known)]))
        if messages:
            derived = self.store.iter_facts(scope, FactFilter(status=None, sources=tuple(messages)))
            facts.extend(derived)
        erased = list(dict.fromkeys(f.id for f in facts))
        named = list(dict.fromkeys(e for f in facts for e in f.entity_ids))
        dropped = self._entities_dropped(scope, named, set(erased))
        revise = [e for e in named if e not in dropped]
        receipt = self.store.purge(
            scope, facts=erased, messages=messages, entities=dropped, revise=revise, cause=cause
        )
        for item in self.review_queue(scope):
            if set(item.fact_ids) <= set(erased):
                self._resolved(scope, item, False, Cause(cause.actor, "its facts were purged"))
        erased += [i for i in dict.fromkeys(fact_ids) if i in finished and i not in erased]
        messages += [i for i in dict.fromkeys(message_ids) if i in finished and i not in messages]
        return erased, messages, dropped, receipt

    def _purged_before(self, scope: Scope, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` an earlier purge of the scope erased (its audit event names them)."""
        if not ids:
            return set()
        events = self.store.iter_audit(scope, targets=ids, actions=[AuditAction.PURGED])
        return {t for e in events for t in e.targets} & set(ids)

    def _entities_dropped(
        self, scope: Scope, entity_ids: Sequence[str], erased: set[str]
    ) -> list[str]:
        """The entities no fact but erased ones names (participants aside): erased with them."""
        whole = scope.without_session()
        drop = []
        for entity in self.store.get_entities(whole, entity_ids):
            left = self.store.first_facts(
                whole, FactFilter(status=None, entity_ids=(entity.id,)), limit=len(erased) + 1
            )
            if not entity.participant and all(f.id in erased for f in left):
                drop.append(entity.id)
        return drop


def _review_change(
    kind: ReviewKind, fact_ids: Sequence[str], *, old: str | None = None, new: Sequence[str] = ()
) -> Change:
    """The ``review_requested`` event of a review item about ``fact_ids``."""
    details = {"kind": kind.value, "old": old, "new": list(new)}
    return Change(AuditAction.REVIEW_REQUESTED, tuple(dict.fromkeys(fact_ids)), details)


def _item(event: AuditEvent) -> ReviewItem:
    details = event.details
    return ReviewItem(
        id=event.id,
        scope=event.scope,
        kind=ReviewKind(details["kind"]),
        fact_ids=event.targets,
        old=details.get("old"),
        new=tuple(details.get("new") or ()),
        requested_by=event.actor,
        reason=event.reason,
        requested_at=event.at,
    )
