"""No change without its audit event: announced first, settled after an error or a crash.

A "crash" here makes every later write of the process fail (it is dead), then the store is
opened again by a new Memory, as after a SIGKILL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from store_templates import copy_store

from membrain import InputError, Memory, NotFoundError, Scope
from membrain.backends.base import Collection
from membrain.backends.edge import EdgeBackend
from membrain.testing import HashingEncoder, files_holding_text

SCOPE = Scope(dataset="sara", task="assistant")
SECRET = "Zorblaxian"
SAID = [
    {"speaker": "Sara", "text": "I adopted a cat named Miso.", "id": "m1"},
    {"speaker": "Sara", "text": f"My doctor is {SECRET} Quimby in Lisbon.", "id": "m2"},
    {"speaker": "Sara", "text": "I moved to Berlin for work.", "id": "m3"},
]


class _Killed(BaseException):
    """The process died: this write and every later one never happen."""


def open_memory(path: Path) -> Memory:
    return Memory(path, dense=HashingEncoder(64))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("built")
    with open_memory(path) as mem:
        mem.add(
            [{**m, "timestamp": f"2024-03-1{i}T10:00:00Z"} for i, m in enumerate(SAID)],
            scope=SCOPE,
        )
    return path


@pytest.fixture
def store(built: Path, tmp_path: Path) -> Path:
    """A copy of the three-message store, for one test."""
    return copy_store(built, tmp_path / "store")


_WRITES = ("_upsert", "_set_payload", "_delete", "_compact")


@contextmanager
def dies_at(
    monkeypatch: pytest.MonkeyPatch, chosen: Callable[[str, Collection, int], bool]
) -> Iterator[list[str]]:
    """Kill the process at the first write ``chosen(kind, collection, n)`` picks (n from 0)."""
    seen: list[str] = []
    dead = [False]
    originals = {name: getattr(EdgeBackend, name) for name in _WRITES}

    def hooked(name: str) -> Callable[..., Any]:
        def write(self: EdgeBackend, collection: Collection, *args: Any) -> Any:
            if dead[0] or chosen(name, collection, len(seen)):
                dead[0] = True
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


def fact_about(mem: Memory, word: str) -> str:
    (fact,) = [f for f in mem.facts(scope=SCOPE) if word in f.text]
    return fact.id


def statuses(mem: Memory) -> dict[str, str]:
    return {f.id: f.status.value for f in mem.facts(scope=SCOPE, include_inactive=True)}


def audited(mem: Memory, action: str) -> list[tuple[str, ...]]:
    return [e.targets for e in mem.audit(scope=SCOPE, actions=[action])]


@pytest.mark.parametrize(
    "call",
    [
        lambda m, f: m.forget([f], scope=SCOPE, reason="x\ud800"),
        lambda m, f: m.dispute([f], scope=SCOPE, reason="x\ud800"),
        lambda m, f: m.confirm([f], scope=SCOPE, by="reviewer:x\ud800"),
        lambda m, f: m.purge([f], scope=SCOPE, reason="x\ud800", messages=True),
        lambda m, f: m.forget([f], scope=SCOPE, reason="x" * 5000),
        lambda m, f: m.supersede(f, [fact_about(m, "Berlin")], scope=SCOPE, reason="\udfff"),
    ],
    ids=["forget", "dispute", "confirm", "purge", "long-reason", "supersede"],
)
def test_a_change_whose_event_cannot_be_written_changes_nothing(
    store: Path, call: Callable[[Memory, str], object]
) -> None:
    with open_memory(store) as mem:
        cat = fact_about(mem, "Miso")
        before, events = statuses(mem), mem.audit(scope=SCOPE)
        with pytest.raises(InputError):
            call(mem, cat)
        assert statuses(mem) == before
        assert mem.audit(scope=SCOPE) == events
        assert mem.review_queue(scope=SCOPE) == []
        assert {f.trust.value for f in mem.facts(scope=SCOPE)} == {"stated"}


def test_an_audit_write_that_fails_leaves_the_change_unapplied(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_memory(store) as mem:
        cat = fact_about(mem, "Miso")
        with dies_at(monkeypatch, lambda kind, c, n: c is Collection.AUDIT), pytest.raises(_Killed):
            mem.forget([cat], scope=SCOPE)
    with open_memory(store) as mem:
        assert statuses(mem)[cat] == "active"
        assert audited(mem, "forgotten") == []
        mem.forget([cat], scope=SCOPE)  # the call again, as an application would
        assert audited(mem, "forgotten") == [(cat,)]


@pytest.mark.parametrize("killed_after", [1, 2, 3], ids=["announced", "one-fact", "applied"])
def test_a_supersession_killed_midway_is_finished_with_its_event(
    store: Path, monkeypatch: pytest.MonkeyPatch, killed_after: int
) -> None:
    """Writes: the pending event, the old fact, the new fact, the commit."""
    with open_memory(store) as mem:
        lisbon, berlin = fact_about(mem, "Lisbon"), fact_about(mem, "Berlin")
        with (
            dies_at(monkeypatch, lambda kind, c, n: n == killed_after),
            pytest.raises(_Killed),
        ):
            mem.supersede(lisbon, [berlin], scope=SCOPE, by="reviewer:ana")
    with open_memory(store) as mem:
        facts = {f.id: f for f in mem.facts(scope=SCOPE, include_inactive=True)}
        assert facts[lisbon].status.value == "superseded"
        assert facts[lisbon].superseded_by == (berlin,)
        assert facts[berlin].supersedes == (lisbon,)
        (event,) = mem.audit(scope=SCOPE, actions=["superseded"])
        assert event.targets == (lisbon,) and str(event.actor) == "reviewer:ana"


@pytest.mark.parametrize("killed_at", [1, 2], ids=["announced", "applied"])
def test_a_dispute_killed_midway_opens_its_review_item_with_the_facts_disputed(
    store: Path, monkeypatch: pytest.MonkeyPatch, killed_at: int
) -> None:
    """The item and the facts' trust come together, or neither: never an open dispute whose
    facts read as undisputed (nor disputed facts no reviewer is asked about). Writes: the
    events (the item's and the facts' change), the facts, the commit."""
    with open_memory(store) as mem:
        cat = fact_about(mem, "Miso")
        killed = dies_at(monkeypatch, lambda kind, c, n: n == killed_at)
        with killed as seen, pytest.raises(_Killed):
            mem.dispute([cat], scope=SCOPE, reason="not my cat", by="reviewer:ana")
    with open_memory(store) as mem:
        queued = [i.fact_ids for i in mem.review_queue(scope=SCOPE)]
        (fact,) = mem.facts(scope=SCOPE, ids=[cat])
        assert queued in ([], [(cat,)]), seen
        assert (queued == [(cat,)]) == (fact.trust.value == "disputed"), (seen, fact.trust)
        if not queued:  # never applied: the call again, as an application would
            mem.dispute([cat], scope=SCOPE, reason="not my cat", by="reviewer:ana")
        assert [i.fact_ids for i in mem.review_queue(scope=SCOPE)] == [(cat,)]
        assert audited(mem, "review_requested") == audited(mem, "disputed") == [(cat,)]


def test_messages_killed_before_their_write_are_not_audited_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_memory(tmp_path) as mem:
        first = dies_at(monkeypatch, lambda kind, c, n: c is Collection.MESSAGES)
        with first, pytest.raises(_Killed):
            mem.add([{**SAID[0], "timestamp": "2024-03-15T10:00:00Z"}], scope=SCOPE)
    with open_memory(tmp_path) as mem:
        assert mem.messages(scope=SCOPE) == []
        assert audited(mem, "stored") == []  # the announced event was undone
        mem.add([{**SAID[0], "timestamp": "2024-03-15T10:00:00Z"}], scope=SCOPE)
        (stored,) = mem.messages(scope=SCOPE)
        assert audited(mem, "stored") == [(stored.id,)]


def test_messages_killed_after_their_write_keep_their_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_memory(tmp_path) as mem:
        after_write = dies_at(monkeypatch, lambda kind, c, n: n == 2)  # event, messages, commit
        with after_write, pytest.raises(_Killed):
            mem.add([{**SAID[0], "timestamp": "2024-03-15T10:00:00Z"}], scope=SCOPE)
    with open_memory(tmp_path) as mem:
        (stored,) = mem.messages(scope=SCOPE)
        (event,) = mem.audit(scope=SCOPE, actions=["stored"])
        assert event.targets == (stored.id,) and not event.details.get("recovered")
        mem.add([{**SAID[0], "timestamp": "2024-03-15T10:00:00Z"}], scope=SCOPE)
        assert len(audited(mem, "stored")) == 1


def test_an_error_inside_a_change_settles_it_in_the_same_process(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine error (not a crash) after the event: the change is finished, the event kept."""
    with open_memory(store) as mem:
        cat = fact_about(mem, "Miso")
        calls = [0]
        set_payload = EdgeBackend._set_payload

        def flaky(self: EdgeBackend, collection: Collection, *args: Any) -> None:
            if collection is Collection.FACTS and calls[0] == 0:
                calls[0] += 1
                raise RuntimeError("disk hiccup")
            set_payload(self, collection, *args)

        monkeypatch.setattr(EdgeBackend, "_set_payload", flaky)
        with pytest.raises(Exception, match="disk hiccup"):
            mem.forget([cat], scope=SCOPE)
        monkeypatch.undo()
        assert statuses(mem)[cat] == "forgotten"
        assert audited(mem, "forgotten") == [(cat,)]


def test_a_purge_killed_before_its_erasure_finishes_is_finished_on_open(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_memory(store) as mem:
        doctor = fact_about(mem, "Lisbon")
        mem.search(f"{SECRET} doctor", scope=SCOPE, mode="deep")  # the boolean path indexes it
        compacting = dies_at(monkeypatch, lambda kind, c, n: kind == "_compact")
        with compacting, pytest.raises(_Killed):
            mem.purge([doctor], scope=SCOPE, messages=True, by="reviewer:ana")
    assert files_holding_text(store, SECRET)  # the control: the kill left it on disk
    with open_memory(store) as mem:
        assert doctor not in statuses(mem)
        kinds = {e.details["record"] for e in mem.audit(scope=SCOPE, actions=["purged"])}
        assert kinds >= {"fact", "message"}
        assert all(SECRET not in h.text for h in mem.search(SECRET, scope=SCOPE, mode="deep"))
    assert files_holding_text(store, SECRET) == []


def test_purging_again_what_an_interrupted_purge_deleted_finishes_it(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In one process: the compaction failed, the ids are gone, the same call finishes it."""
    with open_memory(store) as mem:
        doctor = fact_about(mem, "Lisbon")
        compact = EdgeBackend._compact

        def broken(self: EdgeBackend, collection: Collection) -> None:
            raise OSError("no space left on device")

        monkeypatch.setattr(EdgeBackend, "_compact", broken)
        with pytest.raises(Exception, match="no space left"):
            mem.purge([doctor], scope=SCOPE, messages=True)
        monkeypatch.setattr(EdgeBackend, "_compact", compact)
        assert doctor not in statuses(mem)
        done = mem.purge([doctor], scope=SCOPE, messages=True)
        assert doctor in done.fact_ids
        again = mem.purge([doctor], scope=SCOPE)  # a purge is idempotent: a retry succeeds
        assert again.fact_ids == (doctor,)
        assert len(mem.audit(scope=SCOPE, actions=["purged"], targets=[doctor])) == 1
        with pytest.raises(NotFoundError):  # an id no purge erased still names nothing
            mem.purge([doctor.replace(doctor[:8], "00000000")], scope=SCOPE)
    assert files_holding_text(store, SECRET) == []


def test_a_scope_deletion_killed_midway_is_finished_on_open(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = Scope(dataset="tom", task="assistant")
    with open_memory(store) as mem:
        mem.add("I play chess on Sundays.", scope=other)
        compacting = dies_at(monkeypatch, lambda kind, c, n: kind == "_compact")
        with compacting, pytest.raises(_Killed):
            mem.delete_scope(SCOPE)
    assert files_holding_text(store, SECRET)
    with open_memory(store) as mem:
        assert mem.facts(scope=SCOPE, include_inactive=True) == []
        assert mem.messages(scope=SCOPE) == []
        assert [f.text for f in mem.facts(scope=other)] != []
        (logged,) = mem.audit(
            scope=Scope(dataset="sara", task="membrain.transcript:erasures"),
            actions=["scope_deleted"],
        )
        assert {"dataset": "sara", "task": "assistant", "session": None} in logged.details["scopes"]
    assert files_holding_text(store, SECRET) == []
