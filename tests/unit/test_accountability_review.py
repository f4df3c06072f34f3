"""Trust and review: disputes, confirmations, the review queue and what a resolution does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from accountability_fixtures import (
    MODES,
    SwitchModel,
    Turn,
    fresh_scope,
    open_memory,
    ref_for,
    steps,
    story_model,
)

from langchain_membrain.tools import create_memory_tools
from membrain import (
    Actor,
    ActorKind,
    AuditAction,
    FactStatus,
    InputError,
    Memory,
    ReviewKind,
    ReviewPolicy,
    Scope,
    ScopeError,
    TimeCheck,
    Trust,
)
from membrain.api.models import now

PEANUTS = "[Sara] is allergic to peanuts."
CHESS = "[Sara] plays chess with [Nate] on Sundays."
HABITS = Turn(
    "Sara",
    "I'm allergic to peanuts. I play chess with Nate on Sundays.",
    "2024-03-15T14:00:00Z",
    ["Sara", "Nate"],
    [PEANUTS, CHESS],
)
LISBON = Turn(
    "Sara",
    "I live in Lisbon with my partner Joao.",
    "2023-01-10T10:00:00Z",
    ["Sara", "Lisbon", "Joao"],
    ["[Sara] lives in [Lisbon] with her partner [Joao]."],
)
BERLIN = Turn(
    "Sara",
    "Big news: I moved to Berlin last month, new job at Zalando.",
    "2024-05-02T09:00:00Z",
    ["Sara", "Berlin", "Zalando"],
    lambda prompt: [
        {
            "text": "[Sara] moved to [Berlin] [last month::2024-04] and lives there now.",
            "replaces": [ref_for(prompt, "[Lisbon]")],
        }
    ],
)
ARM = Turn(
    "Sara",
    "I broke my arm yesterday.",
    "2024-05-02T09:00:00Z",
    ["Sara"],
    ["[Sara] broke her arm [yesterday::2020-01-01]."],  # the resolver says 2024-05-01
)


@pytest.fixture(scope="module")
def switch() -> SwitchModel:
    return SwitchModel()


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, switch: SwitchModel) -> Iterator[Memory]:
    """One store for the module, holding models' supersessions and agents' forgets for review."""
    policy = ReviewPolicy(model_supersessions=True, agent_forgets=True)
    path = tmp_path_factory.mktemp("review") / "store"
    with open_memory(path, switch, review=policy) as memory:
        yield memory


@pytest.fixture
def scope() -> Scope:
    return fresh_scope()


@pytest.fixture
def habits(mem: Memory, switch: SwitchModel, scope: Scope) -> tuple[str, str]:
    switch.current = story_model(HABITS)
    peanuts, chess = mem.add([HABITS.message()], scope=scope).fact_ids
    return peanuts, chess


def fact(mem: Memory, scope: Scope, fact_id: str) -> Any:
    (found,) = mem.store.get_facts(scope, [fact_id])
    return found


def found_anywhere(mem: Memory, scope: Scope, question: str, fact_id: str) -> list[str]:
    """Where a fact still shows: each search mode, facts(), the context."""
    where = [
        m
        for m in MODES
        if fact_id in [h.fact.id for h in mem.search(question, scope=scope, mode=m)]
    ]
    if fact_id in [f.id for f in mem.facts(scope=scope)]:
        where.append("facts")
    if fact_id in [h.fact.id for h in mem.context(question, scope=scope).hits]:
        where.append("context")
    return where


def line_of(mem: Memory, scope: Scope, question: str, word: str) -> str:
    (line,) = [ln for ln in mem.context(question, scope=scope).text.splitlines() if word in ln]
    return line


# -- 7. dispute, reject, accept, confirm -------------------------------------------------------
def test_a_rejected_dispute_retracts_the_fact(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, chess = habits
    question = "What is Sara allergic to?"
    assert found_anywhere(mem, scope, question, peanuts) == [*MODES, "facts", "context"]
    before = now()

    item = mem.dispute([peanuts], scope=scope, reason="she said shellfish", by="ana")
    assert item.kind is ReviewKind.DISPUTE and item.fact_ids == (peanuts,)
    assert item.requested_by == Actor(kind=ActorKind.REVIEWER, name="ana")
    assert item.reason == "she said shellfish" and item.old is None and item.new == ()
    assert mem.review_queue(scope=scope) == [item]
    assert fact(mem, scope, peanuts).trust is Trust.DISPUTED
    assert fact(mem, scope, chess).trust is Trust.STATED
    assert "(disputed)" in line_of(mem, scope, question, "peanuts")
    assert found_anywhere(mem, scope, question, peanuts) == [*MODES, "facts", "context"]

    resolved = mem.resolve(item.id, scope=scope, accept=False, by="ana", note="wrong allergy")
    assert resolved.id == item.id
    retracted = fact(mem, scope, peanuts)
    assert retracted.status is FactStatus.RETRACTED
    assert retracted.retracted_at is not None and retracted.retracted_at >= before
    assert retracted.believed_until == retracted.retracted_at
    assert found_anywhere(mem, scope, question, peanuts) == []
    assert "peanuts" not in mem.context(question, scope=scope).text
    # Kept for audit, and never part of a past belief either.
    assert peanuts in [f.id for f in mem.facts(scope=scope, include_inactive=True)]
    past = mem.search(question, scope=scope, as_of=before)
    assert peanuts not in [h.fact.id for h in past]
    assert chess in [h.fact.id for h in past]
    assert mem.review_queue(scope=scope) == []

    (event,) = mem.audit(scope=scope, actions=["retracted"])
    assert event.targets == (peanuts,) and str(event.actor) == "reviewer:ana"
    assert event.reason == "wrong allergy"
    (done,) = mem.audit(scope=scope, actions=["review_resolved"])
    assert done.targets == (item.id, peanuts)
    assert done.details["accepted"] is False and done.details["kind"] == "dispute"
    assert done.details["item"] == item.id
    (requested,) = mem.audit(scope=scope, actions=["review_requested"])
    assert requested.id == item.id
    history = mem.history(peanuts, scope=scope)
    assert [e.action for e in history] == [
        AuditAction.CREATED,
        AuditAction.REVIEW_REQUESTED,  # queued first: an interrupted dispute still waits
        AuditAction.DISPUTED,
        AuditAction.RETRACTED,
        AuditAction.REVIEW_RESOLVED,
    ]
    assert f"retracted {retracted.retracted_at:%Y-%m-%d}" in history.text()


def test_an_accepted_dispute_confirms_the_fact(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, _ = habits
    item = mem.dispute([peanuts], scope=scope, reason="really?")
    assert item.requested_by == Actor(kind=ActorKind.REVIEWER)
    mem.resolve(item.id, scope=scope, accept=True, by="reviewer:ana")
    confirmed = fact(mem, scope, peanuts)
    assert confirmed.trust is Trust.CONFIRMED and confirmed.status is FactStatus.ACTIVE
    assert mem.review_queue(scope=scope) == []
    assert "disputed" not in line_of(mem, scope, "What is Sara allergic to?", "peanuts")
    (event,) = mem.audit(scope=scope, actions=["confirmed"])
    assert event.targets == (peanuts,) and str(event.actor) == "reviewer:ana"
    (done,) = mem.audit(scope=scope, actions=["review_resolved"])
    assert done.details["accepted"] is True


def test_confirm_closes_an_open_dispute_about_the_same_facts(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, chess = habits
    about_peanuts = mem.dispute([peanuts], scope=scope, by="ana")
    about_chess = mem.dispute([chess], scope=scope, by="ana")
    assert mem.review_queue(scope=scope) == [about_peanuts, about_chess]

    (changed,) = mem.confirm([peanuts], scope=scope, by="bob")
    assert changed.trust is Trust.CONFIRMED
    assert fact(mem, scope, peanuts).trust is Trust.CONFIRMED
    assert mem.review_queue(scope=scope) == [about_chess]  # only the dispute about peanuts
    (done,) = mem.audit(scope=scope, actions=["review_resolved"])
    assert done.details["item"] == about_peanuts.id and done.details["accepted"] is True
    assert str(done.actor) == "reviewer:bob"
    with pytest.raises(InputError):
        mem.resolve(about_peanuts.id, scope=scope)
    assert fact(mem, scope, chess).trust is Trust.DISPUTED


# -- 8. a time contradiction found at extraction -----------------------------------------------
def test_a_time_contradiction_is_kept_disputed_and_queued(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    model = switch.current = story_model(ARM)
    result = mem.add([ARM.message()], scope=scope)
    assert steps(model) == ["entities", "facts", "facts", "facts", "profile"]
    assert not result.errors
    (arm,) = result.fact_ids
    stored = fact(mem, scope, arm)
    assert stored.trust is Trust.DISPUTED and stored.time_check is TimeCheck.CONTRADICTS
    assert stored.status is FactStatus.ACTIVE
    (item,) = mem.review_queue(scope=scope)
    assert item.kind is ReviewKind.DISPUTE and item.fact_ids == (arm,)
    assert item.requested_by == Actor(kind=ActorKind.EXTRACTOR, name="llm-membrain-p3")
    assert "contradict" in item.reason
    assert "(disputed)" in line_of(mem, scope, "When did Sara break her arm?", "arm")
    mem.resolve(item.id, scope=scope, accept=False)
    assert fact(mem, scope, arm).status is FactStatus.RETRACTED
    assert mem.review_queue(scope=scope) == []


# -- 9. the model's supersessions, held for review ----------------------------------------------
def _moved(mem: Memory, switch: SwitchModel, scope: Scope) -> tuple[str, str]:
    switch.current = story_model(LISBON, BERLIN)
    (lisbon,) = mem.add([LISBON.message()], scope=scope).fact_ids
    (berlin,) = mem.add([BERLIN.message()], scope=scope).fact_ids
    return lisbon, berlin


def test_a_held_supersession_is_applied_when_accepted(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    lisbon, berlin = _moved(mem, switch, scope)
    assert fact(mem, scope, lisbon).status is FactStatus.ACTIVE
    assert fact(mem, scope, berlin).supersedes == ()
    assert mem.audit(scope=scope, actions=["superseded"]) == []
    (item,) = mem.review_queue(scope=scope)
    assert item.kind is ReviewKind.SUPERSESSION
    assert item.old == lisbon and item.new == (berlin,)
    assert item.fact_ids == (lisbon, berlin)
    assert item.requested_by.kind is ActorKind.EXTRACTOR
    hits = [h.fact.id for h in mem.search("Where does Sara live?", scope=scope)]
    assert lisbon in hits and berlin in hits

    mem.resolve(item.id, scope=scope, accept=True, by="ana")
    old = fact(mem, scope, lisbon)
    assert old.status is FactStatus.SUPERSEDED and old.superseded_by == (berlin,)
    assert old.valid_to == datetime(2024, 4, 1, tzinfo=UTC)
    assert fact(mem, scope, berlin).supersedes == (lisbon,)
    assert mem.review_queue(scope=scope) == []
    (event,) = mem.audit(scope=scope, actions=["superseded"])
    assert str(event.actor) == "reviewer:ana" and event.targets == (lisbon,)
    for mode in MODES:
        hits = [h.fact.id for h in mem.search("Where does Sara live?", scope=scope, mode=mode)]
        assert hits[0] == berlin and lisbon not in hits, mode


def test_a_held_supersession_rejected_changes_nothing(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    lisbon, berlin = _moved(mem, switch, scope)
    (item,) = mem.review_queue(scope=scope)
    mem.resolve(item.id, scope=scope, accept=False, by="ana")
    assert mem.review_queue(scope=scope) == []
    old = fact(mem, scope, lisbon)
    assert old.status is FactStatus.ACTIVE and old.superseded_by == ()
    assert old.superseded_at is None and old.valid_to is None
    assert fact(mem, scope, berlin).supersedes == ()
    assert fact(mem, scope, berlin).status is FactStatus.ACTIVE
    assert mem.audit(scope=scope, actions=["superseded"]) == []
    (done,) = mem.audit(scope=scope, actions=["review_resolved"])
    assert done.details == {"item": item.id, "kind": "supersession", "accepted": False}
    assert lisbon in [h.fact.id for h in mem.search("Where does Sara live?", scope=scope)]


# -- 10. agents' forgets, held for review --------------------------------------------------------
def test_an_agents_forget_waits_for_a_person(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, chess = habits
    (same,) = mem.forget([peanuts], scope=scope, by="agent:bot", reason="user asked")
    assert same.status is FactStatus.ACTIVE and same.forgotten_at is None
    assert fact(mem, scope, peanuts).status is FactStatus.ACTIVE
    (item,) = mem.review_queue(scope=scope)
    assert item.kind is ReviewKind.FORGET and item.fact_ids == (peanuts,)
    assert item.requested_by == Actor(kind=ActorKind.AGENT, name="bot")
    assert item.reason == "user asked"
    assert mem.audit(scope=scope, actions=["forgotten"]) == []
    question = "What is Sara allergic to?"
    assert found_anywhere(mem, scope, question, peanuts) == [*MODES, "facts", "context"]

    # The application (no ``by``) is not held.
    (gone,) = mem.forget([chess], scope=scope)
    assert gone.status is FactStatus.FORGOTTEN and gone.forgotten_at is not None
    assert mem.review_queue(scope=scope) == [item]

    mem.resolve(item.id, scope=scope, accept=True, by="ana")
    forgotten = fact(mem, scope, peanuts)
    assert forgotten.status is FactStatus.FORGOTTEN and forgotten.forgotten_at is not None
    assert found_anywhere(mem, scope, question, peanuts) == []
    assert mem.review_queue(scope=scope) == []
    events = mem.audit(scope=scope, actions=["forgotten"])
    assert [(e.targets, str(e.actor)) for e in events] == [
        ((chess,), "api"),
        ((peanuts,), "reviewer:ana"),
    ]


def test_an_agents_forget_rejected_keeps_the_fact(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, _ = habits
    mem.forget([peanuts], scope=scope, by=Actor(kind=ActorKind.AGENT, name="bot"))
    (item,) = mem.review_queue(scope=scope)
    mem.resolve(item.id, scope=scope, accept=False)
    assert fact(mem, scope, peanuts).status is FactStatus.ACTIVE
    assert fact(mem, scope, peanuts).trust is Trust.STATED
    assert mem.review_queue(scope=scope) == []
    assert mem.audit(scope=scope, actions=["forgotten"]) == []


def test_the_memory_tool_delete_is_queued_for_review(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, _ = habits
    tools = {t.name: t for t in create_memory_tools(memory=mem, scope=scope)}
    answer = tools["manage_memory"].invoke({"action": "delete", "id": peanuts})
    assert "a person will review" in answer
    assert fact(mem, scope, peanuts).status is FactStatus.ACTIVE
    (item,) = mem.review_queue(scope=scope)
    assert item.kind is ReviewKind.FORGET and item.fact_ids == (peanuts,)
    assert item.requested_by.kind is ActorKind.AGENT
    found = tools["search_memory"].invoke({"query": "What is Sara allergic to?"})
    assert f"[{peanuts[:8]}]" in found  # the tools show 8-digit ids


# -- 11. resolving what is not open ----------------------------------------------------------
def test_resolve_of_unknown_or_closed_items_raises(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, _ = habits
    with pytest.raises(InputError, match="no open review item"):
        mem.resolve("no-such-item", scope=scope)
    item = mem.dispute([peanuts], scope=scope)
    with pytest.raises(InputError):  # an item of another scope
        mem.resolve(item.id, scope=fresh_scope())
    assert mem.review_queue(scope=scope) == [item]
    mem.resolve(item.id, scope=scope, accept=True)
    for accept in (True, False):
        with pytest.raises(InputError, match="no open review item"):
            mem.resolve(item.id, scope=scope, accept=accept)
    assert fact(mem, scope, peanuts).trust is Trust.CONFIRMED
    assert fact(mem, scope, peanuts).status is FactStatus.ACTIVE
    assert len(mem.audit(scope=scope, actions=["review_resolved"])) == 1
    with pytest.raises(InputError):
        mem.dispute(["no-such-fact"], scope=scope)
    assert mem.review_queue(scope=scope) == []


def test_an_open_dispute_about_a_purged_fact_can_still_be_closed(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, _ = habits
    item = mem.dispute([peanuts], scope=scope, reason="check with Sara")
    mem.purge([peanuts], scope=scope, reason="Sara asked to erase it")
    # The item is still listed as open; closing it must be possible (resolve documents only
    # "no open review item" as an error), else the queue keeps it for ever.
    open_items = mem.review_queue(scope=scope)
    if open_items:
        assert open_items == [item]
        mem.resolve(item.id, scope=scope, accept=False, note="fact erased")
    assert mem.review_queue(scope=scope) == []


# -- sessions ----------------------------------------------------------------------------------
def test_a_session_sees_the_review_items_of_its_own_batch(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    session = scope.model_copy(update={"session": "s1"})
    lisbon, berlin = _moved(mem, switch, session)
    assert {f.id for f in mem.facts(scope=session)} == {lisbon, berlin}
    everything = mem.review_queue(scope=scope)
    assert [i.kind for i in everything] == [ReviewKind.SUPERSESSION]
    # Both facts live in the session, so does the batch that proposed the change.
    in_session = mem.review_queue(scope=session)
    assert [(i.old, i.new) for i in in_session] == [(lisbon, (berlin,))], everything
    mem.resolve(in_session[0].id, scope=session, accept=True)
    assert fact(mem, session, lisbon).status is FactStatus.SUPERSEDED


def test_resolve_finds_the_items_scope_or_asks_for_it(
    mem: Memory, scope: Scope, habits: tuple[str, str]
) -> None:
    peanuts, chess = habits
    first = mem.dispute([peanuts], scope=scope, reason="unsure", by="ana")
    assert mem.resolve(first, accept=True, by="ana").id == first.id  # the item carries its scope
    second = mem.dispute([chess], scope=scope, reason="unsure", by="ana")
    listed = {i.id for i in mem.review_queue(scope=scope)}
    assert second.id in listed
    mem.resolve(second.id, accept=False, by="ana")  # an id this memory listed
    assert fact(mem, scope, chess).status is FactStatus.RETRACTED
    with pytest.raises(ScopeError, match="pass scope"):
        mem.resolve("0d8a856d-9c8f-5bbd-932d-d077b2c2ea8a", accept=True)
    with pytest.raises(InputError, match="no open review item"):
        mem.resolve("0d8a856d-9c8f-5bbd-932d-d077b2c2ea8a", accept=True, scope=scope)
