"""The audit log: every action with its targets and actor, its filters, and no content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from accountability_fixtures import (
    SwitchModel,
    Turn,
    fresh_scope,
    open_memory,
    ref_for,
    story_model,
)

from membrain import (
    Actor,
    ActorKind,
    AuditAction,
    AuditEvent,
    ConfigurationError,
    FactStatus,
    Memory,
    MessageStatus,
    Scope,
    Trust,
)
from membrain.api.models import now
from membrain.knowledge.facts import entity_id
from membrain.testing import ScriptedChatModel

EXTRACTOR = Actor(kind=ActorKind.EXTRACTOR, name="llm-membrain-p3")
API = Actor(kind=ActorKind.API)

FIRST = Turn(
    "Sara",
    "Nate and I play chess in the Quixotic Gardens every Sunday.",
    "2024-03-10T10:00:00Z",
    ["Sara", "Nate", "Quixotic Gardens", "yesterday"],  # a time as a name: discarded
    [
        "[Sara] plays chess with [Nate] in the [Quixotic Gardens] every Sunday.",
        "...",
        "[Sara] keeps a lucky pawn.",
    ],
    descriptions={"Nate": "Sara's chess partner."},
)
SECOND = Turn(
    "Sara",
    "Nate opened a bakery called Crumbwhistle near the Quixotic Gardens.",
    "2024-04-10T10:00:00Z",
    ["Sara", "Nate", "Crumbwhistle"],
    lambda prompt: [
        {
            "text": "[Nate] opened the bakery [Crumbwhistle] and stopped playing chess.",
            "replaces": [ref_for(prompt, "chess")],
        },
        "[Nate]'s bakery [Crumbwhistle] is near the [Quixotic Gardens].",
    ],
    descriptions={"Nate": "Owner of the bakery Crumbwhistle."},
)
SECRET_WORDS = ("chess", "Quixotic", "Crumbwhistle", "bakery", "Sunday")


@pytest.fixture(scope="module")
def switch() -> SwitchModel:
    return SwitchModel()


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, switch: SwitchModel) -> Iterator[Memory]:
    with open_memory(tmp_path_factory.mktemp("audit") / "store", switch) as memory:
        yield memory


@pytest.fixture
def scope() -> Scope:
    return fresh_scope()


def only(events: list[AuditEvent], action: AuditAction) -> list[AuditEvent]:
    return [e for e in events if e.action is action]


def message_ids(mem: Memory, scope: Scope) -> list[str]:
    """The scope's message ids, oldest first."""
    return [m.id for m in mem.messages(scope=scope)]


# -- 12. every action, with its targets and actor ------------------------------------------------
def test_the_write_path_is_audited(mem: Memory, switch: SwitchModel, scope: Scope) -> None:
    switch.current = story_model(FIRST, SECOND)
    first = mem.add([FIRST.message()], scope=scope)
    after_first = now()
    second = mem.add([SECOND.message()], scope=scope)
    assert not first.errors and not second.errors
    assert first.discarded == 2  # the time named like an entity, the fact without content
    chess, pawn = first.fact_ids
    moved, near = second.fact_ids
    m1, m2 = message_ids(mem, scope)
    events = mem.audit(scope=scope)
    assert all(e.scope == scope for e in events)

    stored = only(events, AuditAction.STORED)
    assert [(e.targets, e.actor) for e in stored] == [((m1,), API), ((m2,), API)]
    processed = only(events, AuditAction.PROCESSED)
    assert [(e.targets, e.actor) for e in processed] == [((m1,), EXTRACTOR), ((m2,), EXTRACTOR)]
    assert processed[0].details["extractor"] == "llm-membrain-p3"
    assert processed[0].details["prompt_version"] == "3"

    (discarded,) = only(events, AuditAction.DISCARDED)
    assert discarded.targets == (m1,) and discarded.actor == EXTRACTOR
    assert discarded.details["reasons"] == [
        "fact without content",
        "time expression inside an entity name",
    ]
    (stored_m1,) = [m for m in mem.messages(scope=scope) if m.id == m1]
    assert stored_m1.status is MessageStatus.PROCESSED and len(stored_m1.discarded) == 2

    created = only(events, AuditAction.CREATED)
    facts = [e for e in created if e.details["record"] == "fact"]
    assert [e.targets for e in facts] == [(chess,), (pawn,), (moved,), (near,)]
    for event, source in zip(facts, (m1, m1, m2, m2), strict=True):
        assert event.actor == EXTRACTOR
        assert event.details["sources"] == [source]
        assert event.details["extractor"] == "llm-membrain-p3"
        assert "p3" in event.details["extractor"]
        assert event.details["trust"] == "stated"
    entities = {e.targets[0] for e in created if e.details["record"] == "entity"}
    names = ("Sara", "Nate", "Quixotic Gardens", "Crumbwhistle")
    assert entities == {entity_id(scope, n) for n in names}
    assert entity_id(scope, "yesterday") not in entities

    nate = entity_id(scope, "Nate")
    (versioned,) = only(events, AuditAction.DESCRIPTION_VERSIONED)
    assert versioned.targets == (nate,) and versioned.actor == EXTRACTOR
    assert versioned.details["version"] == 2
    assert set(versioned.details["fact_ids"]) == {moved, near}
    (entity,) = [e for e in mem.entities(scope=scope) if e.id == nate]
    assert [v.version for v in entity.versions] == [1, 2]

    (superseded,) = only(events, AuditAction.SUPERSEDED)
    assert superseded.targets == (chess,) and superseded.actor == EXTRACTOR
    assert superseded.details["superseded_by"] == [moved]

    # since, actions and targets filters
    later = mem.audit(scope=scope, since=after_first)
    assert later and all(e.at >= after_first for e in later)
    assert [e.id for e in later] == [e.id for e in events if e.at >= after_first]
    assert not any(m1 in e.targets for e in later if e.action is AuditAction.STORED)
    assert mem.audit(scope=scope, actions=["stored"]) == stored
    assert mem.audit(scope=scope, actions=[AuditAction.SUPERSEDED, "discarded"]) == sorted(
        [superseded, discarded], key=lambda e: (e.at, e.id)
    )
    about = mem.audit(scope=scope, targets=[chess])
    assert about and all(chess in e.targets for e in about)
    assert [e.action for e in about] == [AuditAction.CREATED, AuditAction.SUPERSEDED]
    with pytest.raises(ConfigurationError, match="unknown audit action"):
        mem.audit(scope=scope, actions=["deleted"])
    with pytest.raises(ConfigurationError):
        mem.audit(scope=scope, actions=["stored", "nonsense"])
    assert [e.at for e in events] == sorted(e.at for e in events)
    assert all(a.at < b.at for a, b in zip(events, events[1:], strict=False))


def test_a_failing_model_is_audited_as_extraction_failed(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    switch.current = ScriptedChatModel(entities=["this is not JSON"], facts=["nor is this"])
    result = mem.add([FIRST.message()], scope=scope)
    (error,) = result.errors
    (message,) = mem.messages(scope=scope)
    assert message.status is MessageStatus.PENDING
    events = mem.audit(scope=scope)
    assert [e.action for e in events] == [AuditAction.STORED, AuditAction.EXTRACTION_FAILED]
    failed = events[1]
    assert failed.targets == (message.id,) and failed.actor == EXTRACTOR
    assert failed.reason == "entity extraction failed after 3 attempts"
    assert "not JSON" not in failed.model_dump_json()
    assert mem.facts(scope=scope, include_inactive=True) == []


@pytest.fixture(scope="module")
def life(mem: Memory, switch: SwitchModel) -> dict[str, Any]:
    """A scope where every kind of change happened once (read only by the tests); its ids."""
    scope = fresh_scope()
    switch.current = story_model(FIRST, SECOND)
    chess, pawn = mem.add([FIRST.message()], scope=scope).fact_ids
    moved, near = mem.add([SECOND.message()], scope=scope).fact_ids
    item = mem.dispute([near], scope=scope, reason="unsure", by="ana")
    mem.resolve(item.id, scope=scope, accept=False, by="ana")
    other = mem.dispute([moved], scope=scope, by="ana")
    mem.confirm([moved], scope=scope, by="bob")
    mem.forget([pawn], scope=scope, by="agent:bot", reason="asked")
    purged = mem.purge([near], scope=scope, messages=True, by="ana", reason="privacy")
    return {
        "scope": scope,
        "chess": chess,
        "pawn": pawn,
        "moved": moved,
        "near": near,
        "item": item.id,
        "other": other.id,
        "purged": purged,
    }


def test_belief_changes_are_audited_with_their_actor(mem: Memory, life: dict[str, Any]) -> None:
    ids, scope = life, life["scope"]
    chess, moved, near = ids["chess"], ids["moved"], ids["near"]
    events = mem.audit(scope=scope)
    actions = {e.action for e in events}
    # (failed extractions and their dismissal: tests/unit/test_poisoned_messages.py)
    assert actions == set(AuditAction) - {
        AuditAction.EXTRACTION_FAILED,
        AuditAction.DISMISSED,
        AuditAction.SCOPE_DELETED,  # written in the dataset's erasure log
        AuditAction.PROFILE_SET,  # profile changes: tests/unit/test_profiles.py
        AuditAction.PROFILE_REMOVED,
        AuditAction.ERASURE_RECEIPT,  # the erasure log: tests/unit/test_erasure_receipts.py
        AuditAction.EXPIRED,  # expiry: tests/unit/test_expiry.py
        AuditAction.EXPIRY_SET,
    }

    def one(action: str) -> list[tuple[tuple[str, ...], str]]:
        return [(e.targets, str(e.actor)) for e in events if e.action == action]

    assert one("disputed") == [((near,), "reviewer:ana"), ((moved,), "reviewer:ana")]
    assert one("retracted") == [((near,), "reviewer:ana")]
    assert one("confirmed") == [((moved,), "reviewer:bob")]
    assert one("forgotten") == [((ids["pawn"],), "agent:bot")]
    forgotten = mem.audit(scope=scope, actions=["forgotten"])
    assert [e.id for e in forgotten] == [e.id for e in events if e.action == "forgotten"]
    assert one("review_requested") == [((near,), "reviewer:ana"), ((moved,), "reviewer:ana")]
    assert one("review_resolved") == [
        ((ids["item"], near), "reviewer:ana"),
        ((ids["other"], moved), "reviewer:bob"),
    ]
    purged = [e for e in events if e.action is AuditAction.PURGED]
    by_record = {e.details["record"]: e for e in purged}
    m2 = next(iter(set(ids["purged"].message_ids)))
    assert set(by_record["fact"].targets) == {moved, near} == set(ids["purged"].fact_ids)
    assert by_record["message"].targets == (m2,)
    assert all(str(e.actor) == "api:ana" and e.reason == "privacy" for e in purged)
    assert by_record["fact"].reason == "privacy"
    assert entity_id(scope, "Crumbwhistle") in by_record["entity"].targets
    # The history of a purged fact is its events: ids and actors, no record left.
    history = mem.history(near, scope=scope)
    assert history.facts == () and history.fact is None
    assert [e.action for e in history][-1] is AuditAction.PURGED
    kept = {f.id: f.status for f in mem.facts(scope=scope, include_inactive=True)}
    assert kept == {chess: FactStatus.SUPERSEDED, ids["pawn"]: FactStatus.FORGOTTEN}


def test_events_hold_no_content_and_stay_in_their_scope(
    mem: Memory, switch: SwitchModel, life: dict[str, Any]
) -> None:
    scope = life["scope"]
    events = mem.audit(scope=scope)
    assert len(events) > 20
    for event in events:
        dumped = event.model_dump_json()
        for word in SECRET_WORDS:
            assert word.casefold() not in dumped.casefold(), (event.action, word)
    for fact in mem.facts(scope=scope, include_inactive=True):
        for event in mem.history(fact.id, scope=scope):
            assert fact.text not in json.dumps(event.model_dump(mode="json"))

    other = fresh_scope()
    assert mem.audit(scope=other) == []
    assert mem.review_queue(scope=other) == []
    neighbour = fresh_scope("tom")
    switch.current = story_model(FIRST)
    mem.add([FIRST.message()], scope=neighbour)
    theirs = mem.audit(scope=neighbour)
    assert theirs and all(e.scope == neighbour for e in theirs)
    assert not {e.id for e in theirs} & {e.id for e in events}
    assert [e.id for e in mem.audit(scope=scope)] == [e.id for e in events]


# -- 13. what an agent adds -------------------------------------------------------------------
def test_facts_an_agent_adds_are_derived_and_name_it(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    switch.current = story_model(FIRST)
    result = mem.add([FIRST.message()], scope=scope, by="agent:planner")
    assert len(result.fact_ids) == 2
    for stored in mem.facts(scope=scope):
        assert stored.id in result.fact_ids
        assert stored.trust is Trust.DERIVED and stored.author == "agent:planner"
        assert stored.status is FactStatus.ACTIVE
    context = mem.context("Where does Sara play chess?", scope=scope)
    (line,) = [ln for ln in context.text.splitlines() if "chess" in ln]
    assert "(written by agent:planner)" in line
    planner = Actor(kind=ActorKind.AGENT, name="planner")
    events = mem.audit(scope=scope)
    created = [e for e in events if e.action is AuditAction.CREATED]
    assert created and all(e.actor == planner for e in created)
    fact_events = [e for e in created if e.details["record"] == "fact"]
    assert [e.details["trust"] for e in fact_events] == ["derived", "derived"]
    for action in (AuditAction.STORED, AuditAction.PROCESSED):
        assert [e.actor for e in events if e.action is action] == [planner]
    hit = mem.search("Where does Sara play chess?", scope=scope)[0]
    assert hit.metadata()["author"] == "agent:planner" and hit.metadata()["trust"] == "derived"
