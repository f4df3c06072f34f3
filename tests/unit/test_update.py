"""Memory.update: a new statement of a fact supersedes it, with the statement kept as evidence."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from store_templates import copy_store

from membrain import (
    AuditAction,
    ConflictError,
    ExtractionError,
    FactStatus,
    InputError,
    Memory,
    NotFoundError,
    Scope,
)
from membrain.backends.base import Collection
from membrain.backends.edge import EdgeBackend
from membrain.extraction.stated import StatedFacts
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


class _Killed(BaseException):
    """The process died: this write and every later one never happen."""


_WRITES = ("_upsert", "_set_payload", "_delete", "_compact")
BERLIN = "Sara lives in Berlin since [March 2024::2024-03]."
UPDATE_WRITES = 13
"""Qdrant writes of the update below: its announced event, then the message's, the fact's, the
message status's and the supersession's writes, each with their audit events."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("built")
    with Memory(path=path, dense=HashingEncoder(64)) as memory:
        memory.add([LISBON], scope=SCOPE)
    return path


@contextmanager
def dies_at_write(monkeypatch: pytest.MonkeyPatch, killed_at: int) -> Iterator[list[str]]:
    """Kill the process at its ``killed_at``-th Qdrant write (from 0): none after it happens."""
    seen: list[str] = []
    originals = {name: getattr(EdgeBackend, name) for name in _WRITES}

    def hooked(name: str) -> Callable[..., Any]:
        def write(self: EdgeBackend, collection: Collection, *args: Any) -> Any:
            if len(seen) >= killed_at:
                raise _Killed
            seen.append(f"{name}:{collection.value}")
            return originals[name](self, collection, *args)

        return write

    for name in _WRITES:
        monkeypatch.setattr(EdgeBackend, name, hooked(name))
    try:
        yield seen
    finally:
        monkeypatch.undo()


def test_the_update_below_makes_the_writes_counted(built: Path, tmp_path: Path) -> None:
    copy_store(built, tmp_path / "store")
    with Memory(path=tmp_path / "store", dense=HashingEncoder(64)) as memory:
        old = lisbon(memory)
        with dies_at_write(pytest.MonkeyPatch(), UPDATE_WRITES + 1) as seen:
            memory.update(old, BERLIN, scope=SCOPE, reason="she moved", by="reviewer:ana")
    assert len(seen) == UPDATE_WRITES


@pytest.mark.parametrize("killed_at", range(UPDATE_WRITES + 1))
def test_an_update_killed_anywhere_is_applied_in_full_or_not_at_all(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, killed_at: int
) -> None:
    store = tmp_path / "store"
    copy_store(built, store)
    memory = Memory(path=store, dense=HashingEncoder(64))
    old = lisbon(memory)
    before = {m.id for m in memory.messages(scope=SCOPE)}
    if killed_at < UPDATE_WRITES:
        with dies_at_write(monkeypatch, killed_at), pytest.raises(_Killed):
            memory.update(old, BERLIN, scope=SCOPE, reason="she moved", by="reviewer:ana")
    else:  # killed after it returned
        memory.update(old, BERLIN, scope=SCOPE, reason="she moved", by="reviewer:ana")
    memory.close()

    with Memory(path=store, dense=HashingEncoder(64)) as reopened:
        facts = {f.id: f for f in reopened.facts(scope=SCOPE, include_inactive=True)}
        events = reopened.audit(scope=SCOPE, actions=["superseded"])
        added = [m for m in reopened.messages(scope=SCOPE) if m.id not in before]
        if facts[old].status is FactStatus.ACTIVE:  # not at all
            assert events == [] and added == [] and list(facts) == [old]
            reopened.update(old, BERLIN, scope=SCOPE, reason="she moved", by="reviewer:ana")
            events = reopened.audit(scope=SCOPE, actions=["superseded"])
            facts = {f.id: f for f in reopened.facts(scope=SCOPE, include_inactive=True)}
            added = [m for m in reopened.messages(scope=SCOPE) if m.id not in before]
        else:  # in full
            with pytest.raises(ConflictError):  # the application's retry learns it is done
                reopened.update(old, BERLIN, scope=SCOPE)
        (evidence,) = added
        (new_id,) = set(facts) - {old}
        assert facts[new_id].text == "[Sara] lives in Berlin since [March 2024::2024-03]."
        assert facts[new_id].status is FactStatus.ACTIVE and facts[new_id].supersedes == (old,)
        assert facts[new_id].sources == (evidence.id,)
        assert facts[old].status is FactStatus.SUPERSEDED
        assert facts[old].superseded_by == (new_id,)
        (event,) = events
        assert event.targets == (old,) and event.reason == "she moved"
        assert str(event.actor) == "reviewer:ana"
        assert evidence.status.value == "processed"
        assert len(reopened.audit(scope=SCOPE, actions=["stored"], targets=[evidence.id])) == 1
        # No later extraction makes a fact of the update's message.
        reopened.extract_pending(scope=SCOPE)
        reopened.retry_failed(scope=SCOPE)
        reopened.add([{**LISBON, "text": "I adopted a cat.", "id": "later"}], scope=SCOPE)
        citing = reopened.facts(scope=SCOPE, include_inactive=True, derived_from=[evidence.id])
        assert [f.id for f in citing] == [new_id]


@pytest.mark.parametrize("retryable", [True, False], ids=["pending", "failed"])
def test_an_update_whose_fact_cannot_be_written_leaves_nothing_to_extract(
    mem: Memory, monkeypatch: pytest.MonkeyPatch, retryable: bool
) -> None:
    old = lisbon(mem)

    def refused(self: StatedFacts, *args: object, **kwargs: object) -> None:
        raise ExtractionError("the model is down", retryable=retryable)

    with mem:
        monkeypatch.setattr(StatedFacts, "extract", refused)
        with pytest.raises(ExtractionError):
            mem.update(old, BERLIN, scope=SCOPE, reason="she moved")
        monkeypatch.undo()
        assert mem.audit(scope=SCOPE, actions=["superseded"]) == []
        mem.extract_pending(scope=SCOPE)
        mem.retry_failed(scope=SCOPE)
        assert [f.id for f in mem.facts(scope=SCOPE, include_inactive=True)] == [old]
        assert mem.get(old, scope=SCOPE).status is FactStatus.ACTIVE
        new = mem.update(old, BERLIN, scope=SCOPE, reason="she moved")  # the retry works
        assert mem.get(old, scope=SCOPE).superseded_by == (new.id,)
