"""Export and import: no file reaches another scope, profiles come along, a crash is resumed."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_templates import copy_store, empty_store

from membrain import Memory, Scope
from membrain.api.errors import InputError, NotFoundError
from membrain.api.profile import ProfileEntry
from membrain.files.transfer import export_scope, header_scope, import_scope
from membrain.ingest import message_id
from membrain.knowledge.facts import entity_id, fact_id_of
from membrain.records import RecordStore
from membrain.testing import HashingEncoder

ALICE = Scope(dataset="alice", task="chat")
MALLORY = Scope(dataset="mallory", task="chat")
COPY = Scope(dataset="auth0|alice-copy", task="notes")


def _open(path: Path) -> Memory:
    """A Memory on ``path``, a copy of an empty store when there is none there yet."""
    return Memory(path=path if path.exists() else empty_store(path), dense=HashingEncoder(dim=64))


def _said(speaker: str, text: str, at: str, source: str | None = None) -> dict[str, str]:
    said = {"speaker": speaker, "text": text, "timestamp": at}
    return {**said, "id": source} if source else said


def _build_alice(mem: Memory) -> None:
    """Two sessions, superseded and forgotten facts, a dispute, profile versions (one removed)."""
    first, second = (Scope(dataset="alice", task="chat", session=s) for s in ("s1", "s2"))
    lisbon, _, bread, _ = mem.add(
        [
            _said("Alice", "I live in Lisbon.", "2023-01-10T10:00Z", "a"),
            _said("Alice", "I adopted a cat named Miso.", "2023-01-10T10:01Z", "b"),
            _said("Nate", "I bake sourdough bread.", "2023-01-10T10:02Z", "c"),
            _said("Alice", "I work as a nurse.", "2023-01-10T10:03Z"),
        ],
        scope=first,
    ).fact_ids
    (berlin,) = mem.add(
        [_said("Alice", "I moved to Berlin.", "2024-05-02T10:00Z", "a")], scope=second
    ).fact_ids
    mem.supersede(lisbon, [berlin], scope=ALICE, by="reviewer:ana", reason="she moved")
    mem.forget([bread], scope=ALICE, reason="asked to")
    mem.dispute([berlin], scope=ALICE, reason="not sure")
    mem.profile_put("lifestyle", "hobbies", "Alice likes cats.", scope=ALICE, reason="said so")
    mem.profile_forget("lifestyle", "hobbies", scope=ALICE, reason="not any more")


def _lines(mem: Memory, scope: Scope) -> list[str]:
    return [json.dumps(r) for r in export_scope(mem, scope)]


def _dump(records: list[Any]) -> list[dict[str, Any]]:
    return sorted((r.model_dump(mode="json") for r in records), key=lambda d: d["id"])


def _keys(mem: Memory, scope: Scope) -> list[tuple[str, str]]:
    events = mem.audit(scope=scope, actions=["profile_set", "profile_removed"])
    return sorted({(str(e.details["topic"]), str(e.details["subtopic"])) for e in events})


def _strings(value: Any) -> set[str]:
    """Every string in a JSON value (keys too)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {s for v in value for s in _strings(v)}
    if isinstance(value, dict):
        return {s for k, v in value.items() for s in {k} | _strings(v)}
    return set()


def _history(mem: Memory, scope: Scope, topic: str, subtopic: str) -> list[dict[str, Any]]:
    try:
        return [
            e.model_dump(mode="json") for e in mem.profile_history(topic, subtopic, scope=scope)
        ]
    except NotFoundError:  # the audit names an entry the profile does not hold
        return []


def _state(mem: Memory, scope: Scope) -> dict[str, Any]:
    """Everything the public API reads of a scope, as JSON."""
    return {
        "messages": _dump(mem.messages(scope=scope)),
        "entities": _dump(mem.entities(scope=scope)),
        "facts": _dump(mem.facts(scope=scope, include_inactive=True)),
        "audit": _dump(mem.audit(scope=scope)),
        "profile": [e.model_dump(mode="json") for e in mem.profile(scope=scope)],
        "history": {f"{t}/{s}": _history(mem, scope, t, s) for t, s in _keys(mem, scope)},
        "reviews": [i.model_dump(mode="json") for i in mem.review_queue(scope=scope)],
    }


@pytest.fixture(scope="module")
def alice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """A closed store holding alice's memory, and its export lines."""
    path = tmp_path_factory.mktemp("alice") / "store"
    with _open(path) as mem:
        _build_alice(mem)
        lines = _lines(mem, ALICE)
    yield path, lines


def _copy_store(path: Path, tmp_path: Path) -> Path:
    target = tmp_path / "store"
    return copy_store(path, target)


def _crafted(lines: list[str]) -> list[str]:
    """Alice's export, its header saying it is mallory's: every id in it is alice's."""
    header = {**json.loads(lines[0]), "dataset": MALLORY.dataset}
    return [json.dumps(header), *lines[1:]]


def test_a_file_naming_the_importers_scope_cannot_touch_another_users_records(
    alice: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, lines = alice
    with _open(_copy_store(path, tmp_path)) as mem:
        before = _state(mem, ALICE)
        theirs = {
            r["id"] for kind in ("messages", "entities", "facts", "audit") for r in before[kind]
        }
        counts = import_scope(mem, MALLORY, _crafted(lines))
        assert _state(mem, ALICE) == before  # alice's records, audit and profile as they were
        copied = _state(mem, MALLORY)
        messages = mem.messages(scope=MALLORY)
        facts = mem.facts(scope=MALLORY, include_inactive=True)
        entities = mem.entities(scope=MALLORY)
        profile = mem.profile(scope=MALLORY)
        found = [h.fact.id for h in mem.search("Where does Alice live?", scope=MALLORY)]

    assert counts["message"] == len(messages) == len(before["messages"])
    assert counts["fact"] == len(facts) == len(before["facts"])
    assert counts["entity"] == len(entities) == len(before["entities"])
    assert copied["profile"] and len(copied["history"]) == len(before["history"])
    # mallory's records are mallory's: ids derived for her scope, links among her own records
    for m in messages:
        assert m.id == message_id(m.scope, m.message)
    for e in entities:
        assert e.id == entity_id(MALLORY, e.name)
    for f in facts:
        assert f.id == fact_id_of(f.scope, f.extractor, f.sources, f.text)
    mine = {m.id for m in messages} | {f.id for f in facts} | {e.id for e in entities}
    assert not mine & theirs and not {e["id"] for e in copied["audit"]} & theirs
    assert all(set(f.sources) <= {m.id for m in messages} for f in facts)
    assert all(set(f.entity_ids) <= {e.id for e in entities} for f in facts)
    assert all(set(f.supersedes) | set(f.superseded_by) <= mine for f in facts)
    for entry in profile:
        assert set(entry.fact_ids) <= mine
        assert entry.id == ProfileEntry.id_for(MALLORY, entry.topic, entry.subtopic, entry.version)
    for event in copied["audit"]:
        assert not set(event["targets"]) & theirs, event
        # only the record of what the file said names an exported id
        details = {k: v for k, v in event["details"].items() if not k.startswith("original_")}
        assert not _strings(details) & theirs, event
    assert found and set(found) <= mine


def test_profiles_survive_a_delete_and_import_into_the_same_scope(
    alice: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, _ = alice
    with _open(_copy_store(path, tmp_path)) as mem:
        before = _state(mem, ALICE)
        lines = _lines(mem, ALICE)
        assert "profile" in {json.loads(line)["kind"] for line in lines}
        mem.delete_dataset(ALICE.dataset)
        assert mem.profile(scope=ALICE) == []
        counts = import_scope(mem, ALICE, lines)
        after = _state(mem, ALICE)
        own = [e for e in mem.audit(scope=ALICE) if not e.details.get("imported")]

    assert counts["profile"] == sum(len(v) for v in before["history"].values()) > 2
    assert after["profile"] == before["profile"] and after["profile"]
    assert after["history"] == before["history"]
    assert any(v[-1]["removed"] for v in after["history"].values())
    for kind in ("messages", "entities", "facts"):  # every record id kept
        assert after[kind] == before[kind]
    assert [i["fact_ids"] for i in after["reviews"]] == [i["fact_ids"] for i in before["reviews"]]
    originals = {
        e["details"]["original_id"] for e in after["audit"] if e["details"].get("imported")
    }
    assert originals == {e["id"] for e in before["audit"]}
    assert own and all("imported_from" not in e.details for e in own)  # no id changed


def test_profiles_follow_a_copy_into_another_scope(
    alice: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, lines = alice
    with _open(tmp_path / "other") as mem:
        import_scope(mem, COPY, lines)
        copied = _state(mem, COPY)
        mapping: dict[str, str] = {}
        for event in mem.audit(scope=COPY):
            mapping.update(event.details.get("original_ids") or {})
    with _open(path) as source:
        original = _state(source, ALICE)

    def moved(entry: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in entry.items() if k not in ("id", "scope", "fact_ids")}

    assert [moved(e) for e in copied["profile"]] == [moved(e) for e in original["profile"]]
    assert copied["history"].keys() == original["history"].keys()
    for key, versions in copied["history"].items():
        assert [moved(e) for e in versions] == [moved(e) for e in original["history"][key]]
        for new, old in zip(versions, original["history"][key], strict=True):
            assert [mapping[i] for i in new["fact_ids"]] == old["fact_ids"]
            assert mapping[new["id"]] == old["id"]


def test_a_version_1_file_is_still_read(alice: tuple[Path, list[str]], tmp_path: Path) -> None:
    _, lines = alice
    header = {**json.loads(lines[0]), "version": 1}
    old = [json.dumps(header), *(x for x in lines[1:] if json.loads(x)["kind"] != "profile")]
    profile = next(x for x in lines if json.loads(x)["kind"] == "profile")
    with _open(tmp_path / "b") as mem:
        counts = import_scope(mem, ALICE, old)
        assert counts["profile"] == 0
        assert counts["fact"] == len(mem.facts(scope=ALICE, include_inactive=True)) == 5
        with pytest.raises(InputError, match="line 2: unknown record kind 'profile'"):
            import_scope(mem, MALLORY, [json.dumps(header), profile])


def _edit(lines: list[str], kind: str, change: Any) -> list[str]:
    """``lines`` with the first record of ``kind`` changed by ``change`` (a dict → a dict)."""
    number = next(i for i, x in enumerate(lines) if json.loads(x)["kind"] == kind)
    return [*lines[:number], json.dumps(change(json.loads(lines[number]))), *lines[number + 1 :]]


def _again(lines: list[str], kind: str) -> list[str]:
    return [*lines, next(x for x in lines if json.loads(x)["kind"] == kind)]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda ls: _again(ls, "message"), r"line \d+: the id .* line \d+ too"),
        (lambda ls: _again(ls, "event"), r"line \d+: the id .* line \d+ too"),
        (lambda ls: _edit(ls, "profile", lambda d: {**d, "version": 0}), "invalid profile"),
        (lambda ls: _edit(ls, "profile", lambda d: {**d, "session": "s1"}), "invalid profile"),
        (lambda ls: _edit(ls, "event", lambda d: {**d, "reason": "\ud800"}), "not valid Unicode"),
        (lambda ls: [*ls, '{"kind": "entity", "id": "x"}'], "invalid entity"),
    ],
)
def test_a_malformed_line_is_named_and_nothing_is_written(
    alice: tuple[Path, list[str]], tmp_path: Path, edit: Any, message: str
) -> None:
    bad = edit(alice[1])
    with _open(tmp_path / "b") as mem:
        with pytest.raises(InputError, match=message):
            import_scope(mem, COPY, bad)
        assert mem.messages(scope=COPY) == [] and mem.entities(scope=COPY) == []
        assert mem.audit(scope=COPY) == [] and mem.facts(scope=COPY, include_inactive=True) == []
        assert mem.scopes() == []


def test_an_import_into_a_bookkeeping_scope_is_refused(
    alice: tuple[Path, list[str]], tmp_path: Path
) -> None:
    with _open(tmp_path / "b") as mem, pytest.raises(InputError, match="bookkeeping"):
        import_scope(mem, ALICE.bookkeeping(), alice[1])


def _interrupt(monkeypatch: pytest.MonkeyPatch, method: str, after: int) -> None:
    """Make ``RecordStore.<method>`` fail on its call number ``after`` (from 0), once."""
    original = getattr(RecordStore, method)
    calls = Counter[str]()

    def failing(self: RecordStore, *args: Any, **kwargs: Any) -> Any:
        calls[method] += 1
        if calls[method] == after + 1:
            raise OSError("killed")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RecordStore, method, failing)


def _own(mem: Memory, scope: Scope) -> Counter[tuple[str, str]]:
    """(action, target) of the import's own events, each counted."""
    return Counter(
        (e.action.value, t)
        for e in mem.audit(scope=scope)
        if not e.details.get("imported")
        for t in e.targets
    )


@pytest.mark.parametrize(
    ("method", "after"), [("put_facts", 1), ("put_profile", 1), ("import_events", 0)]
)
def test_an_interrupted_import_is_completed_by_running_it_again(
    alice: tuple[Path, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    after: int,
) -> None:
    _, lines = alice
    with _open(tmp_path / "clean") as mem:
        counts = import_scope(mem, COPY, lines)
        clean, clean_own = _state(mem, COPY), _own(mem, COPY)
    with monkeypatch.context() as patch:
        _interrupt(patch, method, after)
        with _open(tmp_path / "store") as mem, pytest.raises(OSError, match="killed"):
            import_scope(mem, COPY, lines)
    with _open(tmp_path / "store") as mem:
        partial = _state(mem, COPY)
        assert partial != clean  # something is missing
        assert import_scope(mem, COPY, lines) == counts
        resumed, resumed_own = _state(mem, COPY), _own(mem, COPY)
        assert import_scope(mem, COPY, lines) == counts  # done: nothing more is written
        assert _state(mem, COPY) == resumed

    def records(state: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in state.items() if k not in ("audit", "reviews")}

    assert records(resumed) == records(clean)
    assert resumed_own == clean_own  # every record has its one creation event, none twice
    carried = [
        {k: v for k, v in e.items() if k != "scope"}
        for e in resumed["audit"]
        if e["details"].get("imported")
    ]
    assert carried == [
        {k: v for k, v in e.items() if k != "scope"}
        for e in clean["audit"]
        if e["details"].get("imported")
    ]
    assert [i["fact_ids"] for i in resumed["reviews"]] == [i["fact_ids"] for i in clean["reviews"]]


def test_a_partial_import_changed_since_is_refused(
    alice: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, lines = alice
    with monkeypatch.context() as patch:
        _interrupt(patch, "put_facts", 0)
        with _open(tmp_path / "store") as mem, pytest.raises(OSError, match="killed"):
            import_scope(mem, COPY, lines)
    with _open(tmp_path / "store") as mem:
        other = _edit(lines, "message", lambda d: {**d, "status": "failed"})  # another export
        with pytest.raises(InputError, match="not empty"):
            import_scope(mem, COPY, other)
        mem.add([_said("Alice", "I like tea.", "2024-06-01T10:00Z")], scope=COPY)
        before = _state(mem, COPY)
        with pytest.raises(InputError, match="not empty"):
            import_scope(mem, COPY, lines)
        assert _state(mem, COPY) == before


def test_an_export_of_a_user_id_scope_is_restored_into_the_same_scope(tmp_path: Path) -> None:
    """The header and sessions hold stored parts: read back as such, never encoded again."""
    scope = Scope(dataset="auth0|64b7f1", task="chat", session="thread|1")
    said = {"speaker": "Alice", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-15"}
    with Memory(empty_store(tmp_path / "a"), dense=HashingEncoder(64)) as source:
        source.add([said], scope=scope)
        lines = [json.dumps(r) for r in export_scope(source, scope)]
    assert header_scope(lines) == scope.without_session()
    with Memory(empty_store(tmp_path / "b"), dense=HashingEncoder(64)) as target:
        import_scope(target, header_scope(lines), lines)
        (message,) = target.messages(scope=scope)
        assert message.scope == scope
        (fact,) = target.facts(scope=scope)
        assert fact.text == "[Alice] adopted a cat named [Miso]."
