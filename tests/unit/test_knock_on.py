"""Knock-on review: a supersession questions the active facts that rested on the old value."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from membrain import Memory, ReviewPolicy, Scope
from membrain.api.audit import AuditAction, ReviewItem, ReviewKind
from membrain.api.models import FactStatus, Trust
from membrain.extraction.offline import OfflineExtractor
from membrain.testing import HashingEncoder, ScriptedChatModel

_numbers = itertools.count()

BEFORE = [
    ("I live in Lisbon.", "2024-01-01T10:00:00Z"),
    ("I work at Galp.", "2024-01-01T10:01:00Z"),
    ("I walk to the Lisbon office every day.", "2024-02-01T10:00:00Z"),
    ("I have lunch with my Galp colleagues on Fridays.", "2024-02-01T10:02:00Z"),
    ("I have a cat named Miso.", "2024-02-01T10:05:00Z"),
]
MOVED = ("I moved to Oslo last week.", "2024-05-01T10:00:00Z")
NEW_JOB = ("I started working at Equinor.", "2024-05-01T10:01:00Z")


class SwitchModel:
    """A chat model whose script a test swaps (the module's memories are opened once)."""

    def __init__(self) -> None:
        self.current = ScriptedChatModel()

    def generate(self, system: str, prompt: str) -> str:
        return self.current.generate(system, prompt)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("knock-on")


@pytest.fixture(scope="module")
def mem(folder: Path) -> Iterator[Memory]:
    with Memory(path=folder / "rule", dense=HashingEncoder(64)) as memory:
        yield memory


@pytest.fixture(scope="module")
def model() -> SwitchModel:
    return SwitchModel()


@pytest.fixture(scope="module")
def llm_mem(folder: Path, model: SwitchModel) -> Iterator[Memory]:
    with Memory(
        path=folder / "llm", dense=HashingEncoder(64), llm=model, extractor=OfflineExtractor()
    ) as memory:
        yield memory


def scope() -> Scope:
    return Scope(dataset=f"sara{next(_numbers)}", task="assistant")


def say(mem: Memory, where: Scope, *turns: tuple[str, str]) -> None:
    said = [{"speaker": "Sara", "text": text, "timestamp": ts} for text, ts in turns]
    assert not mem.add(said, scope=where).errors


def fact(mem: Memory, where: Scope, words: str) -> str:
    (found,) = [f for f in mem.facts(scope=where, include_inactive=True) if words in f.text]
    return found.id


def knock_ons(mem: Memory, where: Scope) -> list[ReviewItem]:
    return [i for i in mem.review_queue(scope=where) if i.kind is ReviewKind.KNOCK_ON]


def test_a_move_queues_the_office_fact_with_its_reason(mem: Memory) -> None:
    where = scope()
    say(mem, where, *BEFORE)
    say(mem, where, MOVED)
    (item,) = knock_ons(mem, where)
    assert item.reason == "may be outdated: Lisbon → Oslo"
    assert item.fact_ids == (fact(mem, where, "Lisbon] office"),)
    assert item.old == fact(mem, where, "lives in")
    assert item.new == (fact(mem, where, "Oslo"),)
    # The cat and the job do not rest on where Sara lives.
    assert mem.get(fact(mem, where, "Miso"), scope=where).status is FactStatus.ACTIVE


def test_accepting_supersedes_the_dependants_and_history_shows_it(mem: Memory) -> None:
    where = scope()
    say(mem, where, *BEFORE)
    say(mem, where, MOVED)
    (item,) = knock_ons(mem, where)
    mem.resolve(item.id, accept=True, scope=where)
    office = mem.get(item.fact_ids[0], scope=where)
    assert office.status is FactStatus.SUPERSEDED
    assert office.superseded_by == item.new
    history = mem.history(office.id, scope=where)
    actions = [e.action for e in history.events]
    assert AuditAction.SUPERSEDED in actions and AuditAction.REVIEW_RESOLVED in actions
    assert item.new[0] in {f.id for f in history.facts}
    assert not knock_ons(mem, where)  # accepting queues no knock-on of its own


def test_rejecting_confirms_the_dependants_with_the_reason(mem: Memory) -> None:
    where = scope()
    say(mem, where, *BEFORE)
    say(mem, where, MOVED)
    (item,) = knock_ons(mem, where)
    mem.resolve(item.id, accept=False, scope=where)
    office = mem.get(item.fact_ids[0], scope=where)
    assert (office.status, office.trust) == (FactStatus.ACTIVE, Trust.CONFIRMED)
    (confirmed,) = mem.audit(scope=where, actions=["confirmed"])
    assert confirmed.targets == (office.id,)
    assert confirmed.reason == "still holds after Lisbon → Oslo"
    assert not knock_ons(mem, where)


def test_every_kind_of_supersession_is_followed(mem: Memory) -> None:
    where = scope()
    say(mem, where, *BEFORE[:3])
    mem.update(fact(mem, where, "lives in"), "Sara lives in Bergen.", scope=where)
    (item,) = knock_ons(mem, where)
    assert item.reason == "may be outdated: Lisbon → Bergen"
    assert item.fact_ids == (fact(mem, where, "Lisbon] office"),)

    other = scope()  # a manual supersession
    say(mem, other, *BEFORE[:3])
    say(mem, other, ("Sara bought a flat in Porto.", "2024-05-01T10:00:00Z"))
    mem.supersede(fact(mem, other, "lives in"), [fact(mem, other, "Porto")], scope=other)
    (item,) = knock_ons(mem, other)
    assert item.fact_ids == (fact(mem, other, "Lisbon] office"),)
    assert item.reason.startswith("may be outdated: Lisbon → ")


def test_an_accepted_supersession_review_is_followed(folder: Path) -> None:
    policy = ReviewPolicy(model_supersessions=True)
    with Memory(path=folder / "held", dense=HashingEncoder(64), review=policy) as held:
        where = scope()
        say(held, where, *BEFORE)
        say(held, where, MOVED)
        (proposed,) = held.review_queue(scope=where)
        assert proposed.kind is ReviewKind.SUPERSESSION and not knock_ons(held, where)
        held.resolve(proposed.id, accept=True, scope=where)
        (item,) = knock_ons(held, where)
        assert item.fact_ids == (fact(held, where, "Lisbon] office"),)


def test_a_fact_stated_in_the_light_of_the_old_one_is_queued(mem: Memory) -> None:
    # Said minutes after "I live in Lisbon" in the same session, about the flat.
    where = scope().model_copy(update={"session": "chat-1"})
    say(
        mem,
        where,
        ("I live in Lisbon.", "2024-01-01T10:00:00Z"),
        ("My flat has a view of the river.", "2024-01-01T10:02:00Z"),
        ("My sister Ana plays the cello.", "2024-01-01T10:03:00Z"),
    )
    say(mem, where, MOVED)
    (item,) = knock_ons(mem, where)
    assert item.fact_ids == (fact(mem, where, "flat"),)


def test_no_dependants_no_item(mem: Memory) -> None:
    where = scope()
    say(mem, where, BEFORE[0], BEFORE[4])
    say(mem, where, MOVED)
    assert mem.get(fact(mem, where, "lives in"), scope=where).status is FactStatus.SUPERSEDED
    assert not knock_ons(mem, where)


def test_turned_off_no_item(folder: Path) -> None:
    policy = ReviewPolicy(knock_on=False)
    with Memory(path=folder / "off", dense=HashingEncoder(64), review=policy) as off:
        where = scope()
        say(off, where, *BEFORE)
        say(off, where, MOVED)
        assert off.get(fact(off, where, "lives in"), scope=where).status is FactStatus.SUPERSEDED
        assert not knock_ons(off, where)


def _knock_on_calls(model: ScriptedChatModel) -> list[str]:
    return [prompt for step, _, prompt in model.calls if step == "knock_on"]


def test_the_model_filters_every_change_of_a_batch_in_one_call(
    llm_mem: Memory, model: SwitchModel
) -> None:
    where = scope()
    say(llm_mem, where, *BEFORE)

    def only_colleagues(system: str, prompt: str) -> str:
        lines = prompt.splitlines()
        (ref,) = [line.split(":")[0].strip() for line in lines if "colleagues" in line]
        return json.dumps({"dependent": [ref]})

    model.current = ScriptedChatModel(knock_on=[only_colleagues])
    say(llm_mem, where, MOVED, NEW_JOB)
    (prompt,) = _knock_on_calls(model.current)
    assert "Lisbon -> Oslo" in prompt and "Galp -> Equinor" in prompt
    (item,) = knock_ons(llm_mem, where)
    assert item.reason == "may be outdated: Galp → Equinor"
    assert item.fact_ids == (fact(llm_mem, where, "colleagues"),)
    (event,) = llm_mem.audit(scope=where, actions=["review_requested"])
    assert event.details["chosen_by"].startswith("llm-knock-on:")


def test_malformed_model_output_falls_back_to_the_rule(llm_mem: Memory, model: SwitchModel) -> None:
    where = scope()
    say(llm_mem, where, *BEFORE)
    model.current = ScriptedChatModel(
        knock_on=["not json at all", '{"dependent": ["D9"]}', '{"dependent": "D1"']
    )
    say(llm_mem, where, MOVED, NEW_JOB)
    assert len(_knock_on_calls(model.current)) == 3
    items = knock_ons(llm_mem, where)
    assert sorted(i.reason for i in items) == [
        "may be outdated: Galp → Equinor",
        "may be outdated: Lisbon → Oslo",
    ]
    events = llm_mem.audit(scope=where, actions=["review_requested"])
    assert {e.details["chosen_by"] for e in events} == {"rule"}


def test_a_repaired_answer_is_used(llm_mem: Memory, model: SwitchModel) -> None:
    where = scope()
    say(llm_mem, where, *BEFORE)
    model.current = ScriptedChatModel(knock_on=['```json\n{"dependent": ["D1",]}\n```'])
    say(llm_mem, where, MOVED)
    (item,) = knock_ons(llm_mem, where)
    assert item.fact_ids == (fact(llm_mem, where, "Lisbon] office"),)


def test_an_end_of_a_value_questions_what_named_it(mem: Memory) -> None:
    where = scope()
    said = [
        ("I'm dating Nina.", "2024-01-01T10:00:00Z"),
        ("Nina and I live in a tiny flat in Munich.", "2024-02-01T10:00:00Z"),
        ("I play the trumpet.", "2024-02-01T10:05:00Z"),
    ]
    turns = [{"speaker": "Jonas", "text": text, "timestamp": ts} for text, ts in said]
    mem.add(turns, scope=where)
    split = "Nina and I split up."
    mem.add([{"speaker": "Jonas", "text": split, "timestamp": "2024-07-01T10:00:00Z"}], scope=where)
    assert mem.get(fact(mem, where, "dating"), scope=where).status is FactStatus.SUPERSEDED
    (item,) = knock_ons(mem, where)
    assert item.fact_ids == (fact(mem, where, "flat"),)
    assert item.reason.startswith("may be outdated: Nina → ")
