"""Memory.update: a new statement of a fact supersedes it, with the statement kept as evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrain import (
    AuditAction,
    ConflictError,
    FactStatus,
    InputError,
    Memory,
    NotFoundError,
    Scope,
)
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant")
LISBON = {"speaker": "Sara", "text": "I live in Lisbon.", "timestamp": "2024-03-01T10:00:00Z"}


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    memory = Memory(path=tmp_path, dense=HashingEncoder(64))
    memory.add([LISBON], scope=SCOPE)
    return memory


def lisbon(mem: Memory) -> str:
    (fact,) = [f for f in mem.facts(scope=SCOPE) if "Lisbon" in f.text]
    return fact.id


def test_update_supersedes_the_fact_with_one_audited_change(mem: Memory) -> None:
    old = lisbon(mem)
    with mem:
        new = mem.update(
            old,
            "Sara lives in Berlin since [March 2024::2024-03].",
            scope=SCOPE,
            reason="she moved",
            by="reviewer:ana",
        )
        before = mem.get(old, scope=SCOPE)
        (evidence,) = mem.messages(scope=SCOPE, ids=list(new.sources))
        events = mem.audit(scope=SCOPE, targets=[old, new.id])
        hits = mem.search("Where does Sara live?", scope=SCOPE, k=1, mode="fast")
        participants = mem.participants(scope=SCOPE)
    assert new.text == "[Sara] lives in Berlin since [March 2024::2024-03]."
    assert new.status is FactStatus.ACTIVE and new.supersedes == (old,)
    assert new.valid_from is not None and new.valid_from.year == 2024
    assert new.entity_ids == before.entity_ids[:1]  # the same Sara
    assert before.status is FactStatus.SUPERSEDED and before.superseded_by == (new.id,)
    assert evidence.message.text == "Sara lives in Berlin since [March 2024::2024-03]."
    assert evidence.message.speaker == "reviewer:ana"
    superseded = [e for e in events if e.action is AuditAction.SUPERSEDED]
    assert len(superseded) == 1 and superseded[0].reason == "she moved"
    assert str(superseded[0].actor) == "reviewer:ana"
    assert hits[0].fact.id == new.id
    assert participants == ["Sara"]  # the application is no one in the conversation


def test_bad_updates_write_nothing(mem: Memory) -> None:
    old = lisbon(mem)
    with mem:
        counts = (len(mem.messages(scope=SCOPE)), len(mem.facts(scope=SCOPE)))
        with pytest.raises(InputError):
            mem.update(old, "   ", scope=SCOPE)
        with pytest.raises(InputError):
            mem.update(old, "[Sara] moved [in spring::2024-13].", scope=SCOPE)
        with pytest.raises(InputError):
            mem.update(old, "[Sara] lives in Porto.", scope=SCOPE, reason="x" * 100_000)
        with pytest.raises(NotFoundError):
            mem.update("0" * 32, "[Sara] lives in Porto.", scope=SCOPE)
        with pytest.raises(NotFoundError):
            mem.update(old, "[Sara] lives in Porto.", scope=Scope(dataset="sara", task="other"))
        assert (len(mem.messages(scope=SCOPE)), len(mem.facts(scope=SCOPE))) == counts
        mem.forget([old], scope=SCOPE)
        with pytest.raises(ConflictError, match="only active facts"):
            mem.update(old, "[Sara] lives in Porto.", scope=SCOPE)
