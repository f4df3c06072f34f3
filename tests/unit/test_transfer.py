from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from store_templates import copy_store, empty_store

from membrain import Memory, Scope
from membrain.api.errors import InputError
from membrain.api.models import FactStatus
from membrain.files.transfer import export_scope, header_scope, import_scope
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="chat")
QUESTIONS = ["What is Sara's cat called?", "Where does Sara live?", "What does Nate bake?"]


@pytest.fixture(autouse=True)
def fast_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))


def _message(speaker: str, text: str, at: str, source: str) -> dict[str, str]:
    return {"speaker": speaker, "text": text, "timestamp": at, "id": source}


def _source(path: Path) -> tuple[list[str], dict[str, str]]:
    """A store with two sessions, a superseded and a forgotten fact; its export lines."""
    with Memory(path=path) as mem:
        first = Scope(dataset="sara", task="chat", session="s1")
        second = Scope(dataset="sara", task="chat", session="s2")
        lisbon, cat, bread = mem.add(
            [
                _message("Sara", "I live in Lisbon.", "2023-01-10T10:00Z", "a"),
                _message("Sara", "I adopted a cat named Miso.", "2023-01-10T10:01Z", "b"),
                _message("Nate", "I bake sourdough bread.", "2023-01-10T10:02Z", "c"),
            ],
            scope=first,
        ).fact_ids
        (berlin,) = mem.add(
            [_message("Sara", "I moved to Berlin.", "2024-05-02T10:00Z", "a")], scope=second
        ).fact_ids
        mem.supersede(lisbon, [berlin], scope=SCOPE, by="reviewer:ana", reason="she moved")
        mem.forget([bread], scope=SCOPE, reason="asked to")
        lines = [json.dumps(r) for r in export_scope(mem, SCOPE)]
    return lines, {"lisbon": lisbon, "berlin": berlin, "cat": cat, "bread": bread}


Source = tuple[Path, list[str], dict[str, str]]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    """One source store (built once: stores are slow to open): its folder, export lines, ids."""
    path = tmp_path_factory.mktemp("source") / "store"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
        lines, ids = _source(path)
    return path, lines, ids


@pytest.fixture(scope="module")
def exported(source: Source) -> tuple[list[str], dict[str, str]]:
    """The export lines of the source store, and its fact ids."""
    return source[1], source[2]


def _copy_of_source(source: Source, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """A copy of the source store at ``tmp_path / "a"``; its export lines and fact ids."""
    path, lines, ids = source
    copy_store(path, tmp_path / "a")
    return lines, ids


def _snapshot(mem: Memory) -> dict[str, Any]:
    def dump(records: list) -> list:  # type: ignore[type-arg]
        return sorted((r.model_dump(mode="json") for r in records), key=lambda d: d["id"])

    return {
        "facts": dump(mem.facts(scope=SCOPE, include_inactive=True)),
        "messages": dump(mem.messages(scope=SCOPE)),
        "entities": dump(mem.entities(scope=SCOPE)),
        "search": [
            [(h.fact.id, h.text) for h in mem.search(q, scope=SCOPE, k=3)] for q in QUESTIONS
        ],
    }


def test_round_trip_into_another_store_keeps_everything(tmp_path: Path, source: Source) -> None:
    lines, ids = _copy_of_source(source, tmp_path)
    header = json.loads(lines[0])
    assert header == {"kind": "membrain-export", "version": 2, "dataset": "sara", "task": "chat"}
    kinds = [json.loads(line)["kind"] for line in lines[1:]]
    assert kinds.count("message") == 4 and kinds.count("fact") == 4 and "entity" in kinds
    assert all("scope" not in json.loads(line) for line in lines)

    with Memory(path=empty_store(tmp_path / "b")) as target:
        counts = import_scope(target, SCOPE, lines)
        assert counts == {
            "message": 4,
            "entity": kinds.count("entity"),
            "fact": 4,
            "profile": kinds.count("profile"),
            "event": kinds.count("event"),
        }
        imported = _snapshot(target)
        events = target.audit(scope=SCOPE)
        by_id = {f.id: f for f in target.facts(scope=SCOPE, include_inactive=True)}
        sessions = {m.message.source_id: m.scope.session for m in target.messages(scope=SCOPE)}
        only_s2 = target.facts(scope=Scope(dataset="sara", task="chat", session="s2"))
        imported_history = target.history(ids["bread"], scope=SCOPE)
    with Memory(path=tmp_path / "a") as source:
        original = _snapshot(source)
        source_events = source.audit(scope=SCOPE)

    assert imported == original
    assert all(hits for hits in imported["search"])
    assert by_id[ids["bread"]].status is FactStatus.FORGOTTEN
    assert by_id[ids["lisbon"]].status is FactStatus.SUPERSEDED
    assert by_id[ids["lisbon"]].superseded_by == (ids["berlin"],)
    found = [i for hits in imported["search"] for i, _ in hits]
    assert ids["bread"] not in found and ids["lisbon"] not in found
    assert sorted({str(s) for s in sessions.values()}) == ["s1", "s2"]
    assert [f.id for f in only_s2] == [ids["berlin"]]
    # the import is audited, and the source's log comes along: who did what, when, why
    assert {str(e.actor) for e in events if not e.details.get("imported")} == {"api:import"}
    carried = [e for e in events if e.details.get("imported")]
    # an event's id is derived for the scope from the one it had where it was written
    assert {e.details["original_id"] for e in carried} == {e.id for e in source_events}
    assert not {e.id for e in carried} & {e.id for e in source_events}
    forgotten = [e for e in carried if e.action.value == "forgotten"]
    assert forgotten and forgotten[0].targets == (ids["bread"],)
    (written,) = [e for e in source_events if e.id == forgotten[0].details["original_id"]]
    assert (forgotten[0].actor, forgotten[0].at, forgotten[0].reason) == (
        written.actor,
        written.at,
        written.reason,
    )
    history = [e.action.value for e in imported_history.events]
    assert "forgotten" in history


def test_import_refuses_a_non_empty_scope(tmp_path: Path, source: Source) -> None:
    lines, _ = _copy_of_source(source, tmp_path)
    with Memory(path=tmp_path / "a") as same:
        before = len(same.audit(scope=SCOPE))
        with pytest.raises(InputError, match="not empty"):
            import_scope(same, SCOPE, lines)
        assert len(same.audit(scope=SCOPE)) == before


def test_a_copy_under_another_user_gets_its_own_ids_and_records_the_mapping(
    tmp_path: Path, source: Source
) -> None:
    lines, ids = _copy_of_source(source, tmp_path)
    copy = Scope(dataset="auth0|sara-copy", task="notes")
    with Memory(path=tmp_path / "a") as mem:
        original = {f.id: f for f in mem.facts(scope=SCOPE, include_inactive=True)}
        counts = import_scope(mem, copy, lines)
        copied = {f.id: f for f in mem.facts(scope=copy, include_inactive=True)}
        messages = {m.id: m for m in mem.messages(scope=copy)}
        events = mem.audit(scope=copy)
        answers = [[h.text for h in mem.search(q, scope=copy, k=3)] for q in QUESTIONS]
        originals = [[h.text for h in mem.search(q, scope=SCOPE, k=3)] for q in QUESTIONS]
        untouched = {f.id: f for f in mem.facts(scope=SCOPE, include_inactive=True)}
        again = mem.add(  # the copy recognises its messages: re-adding one stores nothing
            [_message("Sara", "I moved to Berlin.", "2024-05-02T10:00Z", "a")],
            scope=Scope(dataset=copy.dataset, task="notes", session="s2"),
        )
        entities = {e.id for e in mem.entities(scope=copy)}
    assert untouched == original  # the original is left as it was
    assert counts["fact"] == len(copied) == 4 and not set(copied) & set(original)
    assert not set(messages) & {s for f in original.values() for s in f.sources}
    assert answers == originals  # same texts, found the same way
    mapping: dict[str, str] = {}
    for event in events:
        if event.action.value == "created" and not event.details.get("imported"):
            assert event.details["imported_from"] == SCOPE.key
            mapping.update(event.details["original_ids"])
    back = {old: new for new, old in mapping.items()}
    berlin, lisbon, bread = back[ids["berlin"]], back[ids["lisbon"]], back[ids["bread"]]
    assert copied[lisbon].status is FactStatus.SUPERSEDED
    assert copied[lisbon].superseded_by == (berlin,) and copied[berlin].supersedes == (lisbon,)
    assert copied[bread].status is FactStatus.FORGOTTEN
    assert all(set(f.sources) <= set(messages) for f in copied.values())
    assert all(set(f.entity_ids) <= entities for f in copied.values())
    carried = [e for e in events if e.details.get("imported")]
    forgot = next(e for e in carried if e.action.value == "forgotten")
    assert forgot.targets == (bread,) and forgot.details["original_id"]
    assert all(t not in original for e in carried for t in e.targets)
    assert again.messages_stored == 0 and again.fact_ids == ()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda ls: [*ls[:3], "{not json", *ls[3:]], "line 4: not valid JSON"),
        (lambda ls: [*ls[:3], '{"a":' * 5_000 + "1" + "}" * 5_000, *ls[3:]], "line 4: nested"),
        (lambda ls: [*ls[:3], '{"kind": "message", "x": ' + "[" * 40 + "]" * 40 + "}"], "nested"),
        (lambda ls: [*ls[:2], '{"kind": "gadget"}', *ls[2:]], "line 3: unknown record kind"),
        (lambda ls: [*ls, '{"kind": "fact", "id": "x"}'], "invalid fact record"),
        (lambda ls: ['{"kind": "membrain-export", "version": 9}', *ls[1:]], "version 9"),
        (lambda ls: ls[1:], "line 1: not a MemBrain export"),
        (lambda ls: [], "empty export"),
    ],
)
def test_malformed_export_writes_nothing(
    tmp_path: Path, exported: tuple[list[str], dict[str, str]], edit: object, message: str
) -> None:
    bad = edit(exported[0])  # type: ignore[operator]
    with Memory(path=empty_store(tmp_path / "b")) as target:
        with pytest.raises(InputError, match=message):
            import_scope(target, SCOPE, bad)
        assert target.messages(scope=SCOPE) == []
        assert target.facts(scope=SCOPE, include_inactive=True) == []
        assert target.entities(scope=SCOPE) == []


def test_header_scope_names_the_exported_scope(
    exported: tuple[list[str], dict[str, str]],
) -> None:
    assert header_scope(["", *exported[0]]) == SCOPE
    with pytest.raises(InputError, match="line 1"):
        header_scope(["[]"])
