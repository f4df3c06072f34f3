"""The offline extractor supersedes single-valued attributes through the ledger, as a model does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from membrain import Memory, Message, Role, Scope
from membrain.api.models import FactStatus

START = datetime(2024, 1, 8, 18, 0, tzinfo=UTC)


def _session(mem: Memory, scope: Scope, day: int, *turns: tuple[str, str]) -> None:
    at = START + timedelta(days=day)
    messages = [
        Message(
            speaker=speaker,
            text=text,
            timestamp=at + timedelta(minutes=i),
            role=Role.ASSISTANT if speaker == "Assistant" else Role.USER,
        )
        for i, (speaker, text) in enumerate(turns)
    ]
    mem.add(messages, scope=scope)


def _texts(mem: Memory, scope: Scope, status: FactStatus) -> list[str]:
    return [f.text for f in mem.facts(scope=scope, include_inactive=True) if f.status is status]


def test_a_move_and_a_new_job_supersede_the_old_ones(memory: Memory, scope: Scope) -> None:
    _session(
        memory,
        scope,
        0,
        ("Maya", "Hey! I live in Toronto and I work as a nurse at Mount Sinai."),
        ("Assistant", "That must be demanding. What do you do to relax?"),
        ("Maya", "I have a dog, Biscuit. My sister Ana lives in Ottawa."),
    )
    _session(
        memory,
        scope,
        60,
        ("Maya", "Big news: we just moved to Vancouver! I'm a pharmacist at London Drugs now."),
        ("Assistant", "Wow, congrats on the move!"),
    )
    superseded = _texts(memory, scope, FactStatus.SUPERSEDED)
    assert sorted(superseded) == [
        "[Maya] lives in [Toronto].",
        "[Maya] works as a nurse at [Mount Sinai].",
    ]
    for question, current in (
        ("Where does Maya live?", "Vancouver"),
        ("Where does Maya work?", "London Drugs"),
    ):
        top = memory.search(question, scope=scope, k=3).hits[0].fact
        assert current in top.text and top.status is FactStatus.ACTIVE
    events = memory.audit(scope=scope, actions=["superseded"])
    assert len(events) == 2
    assert all(str(e.actor).startswith("extractor:offline") for e in events)
    ana = [t for t in _texts(memory, scope, FactStatus.ACTIVE) if "Ottawa" in t]
    assert ana, "another person's residence is never superseded"


def test_a_negated_or_hypothetical_statement_supersedes_nothing(
    memory: Memory, scope: Scope
) -> None:
    _session(memory, scope, 0, ("Maya", "I live in Toronto."), ("Assistant", "Nice."))
    _session(
        memory,
        scope,
        30,
        ("Maya", "I might move to Vancouver next year. I don't live in Montreal, by the way."),
        ("Assistant", "Good luck."),
    )
    assert _texts(memory, scope, FactStatus.SUPERSEDED) == []
    assert memory.audit(scope=scope, actions=["superseded"]) == []


def test_an_uncertain_match_is_queued_for_review(memory: Memory, scope: Scope) -> None:
    _session(memory, scope, 0, ("Ravi", "I work at Deloitte."), ("Assistant", "Busy?"))
    _session(memory, scope, 30, ("Ravi", "I work at Deloitte Digital now."), ("Assistant", "Ok."))
    assert _texts(memory, scope, FactStatus.SUPERSEDED) == []
    items = memory.review_queue(scope=scope)
    assert [i.kind.value for i in items] == ["supersession"]
    old = memory.facts(scope=scope, ids=[items[0].old]) if items[0].old else []
    assert [f.text for f in old] == ["[Ravi] works at [Deloitte]."]
    memory.resolve(items[0], accept=True)
    assert _texts(memory, scope, FactStatus.SUPERSEDED) == ["[Ravi] works at [Deloitte]."]
