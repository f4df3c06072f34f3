from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from store_templates import empty_store

from membrain import (
    ConfigurationError,
    ExtractionError,
    InputError,
    Memory,
    Message,
    MessageStatus,
    RecordListener,
    Scope,
    ScopeError,
)
from membrain.extraction import ExtractionBatch, OfflineExtractor
from membrain.testing import HashingEncoder

CHAT = [
    {"speaker": "Sara", "text": "Hey Nate!", "timestamp": "2024-03-15T14:00:00Z", "id": "m0"},
    {
        "speaker": "Sara",
        "text": "I adopted a grey cat named Miso.",
        "timestamp": "2024-03-15T14:01:00Z",
        "source_id": "m1",
    },
    {
        "speaker": "Nate",
        "text": "I bake croissants at my bakery every Tuesday.",
        "timestamp": "2024-03-15T14:02:00Z",
        "source_id": "m2",
    },
    {
        "speaker": "Sara",
        "text": "My sister Lina lives in Lisbon.",
        "timestamp": "2024-03-15T14:03:00Z",
        "source_id": "m3",
        "caption": "a photo of a yellow tram on a hill",
    },
]


def test_add_stores_evidence_and_cited_facts(memory: Memory, scope: Scope) -> None:
    result = memory.add(CHAT, scope=scope)
    assert result.messages_stored == 4
    assert result.discarded >= 1  # the greeting
    stored = memory.messages(scope=scope)
    assert [m.message.text for m in stored][0] == "Hey Nate!"
    assert all(m.status is MessageStatus.PROCESSED for m in stored)
    facts = memory.facts(scope=scope)
    assert len(facts) == len(result.fact_ids) == 3
    ids = {m.id for m in stored}
    for fact in facts:
        assert set(fact.sources) <= ids
        assert fact.extractor == "offline-1"
    miso = next(f for f in facts if "Miso" in f.text)
    assert miso.text == "[Sara] adopted a grey cat named [Miso]."
    assert "Sara" in miso.entities and "Miso" in miso.entities


def test_search_returns_the_fact_with_its_sources(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    hits = memory.search("Where does Lina live?", scope=scope, k=2)
    assert "Lisbon" in hits[0].fact.text
    assert [m.source_id for m in hits[0].sources] == ["m3"]
    assert hits[0].sources[0].caption == "a photo of a yellow tram on a hill"
    assert hits[0].score >= hits[1].score
    caption_hit = memory.search("yellow tram", scope=scope, k=1)[0]
    assert "tram" in caption_hit.fact.text


def test_readding_writes_nothing_twice(memory: Memory, scope: Scope) -> None:
    first = memory.add(CHAT, scope=scope)
    facts = {f.id: f for f in memory.facts(scope=scope)}
    again = memory.add(CHAT, scope=scope)
    assert again.messages_stored == 0
    assert again.messages_skipped == 4
    assert again.fact_ids == ()
    assert {f.id: f for f in memory.facts(scope=scope)} == facts
    assert len(memory.messages(scope=scope)) == 4
    assert len(first.fact_ids) == len(facts)


def test_reopen_after_restart_finds_everything(tmp_path: Path, scope: Scope) -> None:
    path = empty_store(tmp_path / "store")
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        mem.add(CHAT, scope=scope)
        before = mem.search("croissants", scope=scope, k=1)[0].fact
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        after = mem.search("croissants", scope=scope, k=1)[0].fact
        assert after == before
        assert len(mem.messages(scope=scope)) == 4


def test_store_refuses_other_models(tmp_path: Path, scope: Scope) -> None:
    path = empty_store(tmp_path / "store")
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        mem.add(CHAT[:2], scope=scope)
    with pytest.raises(ConfigurationError, match="built with"):
        Memory(path=path, dense=HashingEncoder(dim=32))


def test_entities_and_participants(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    entities = {e.name: e for e in memory.entities(scope=scope)}
    assert entities["Sara"].participant and entities["Nate"].participant
    assert not entities["Miso"].participant
    assert entities["Sara"].description == "A participant in the conversation."
    assert "Sara's sister" in entities or "Lina" in entities


class _Failing:
    id = "failing-1"

    def extract(
        self, target: Sequence[Message], context: Sequence[Message], participants: Sequence[str]
    ) -> ExtractionBatch:
        raise ExtractionError("model returned garbage", raw_output="{not json")


def test_failed_extraction_leaves_messages_pending_then_recovers(
    tmp_path: Path, scope: Scope
) -> None:
    path = empty_store(tmp_path / "store")
    with Memory(path=path, dense=HashingEncoder(dim=64), extractor=_Failing()) as mem:
        result = mem.add(CHAT, scope=scope)
        assert len(result.errors) == 1
        assert result.errors[0].raw_output == "{not json"
        assert len(result.errors[0].message_ids) == 4
        stored = mem.messages(scope=scope)
        assert all(m.status is MessageStatus.PENDING for m in stored)
        assert all(m.error == "model returned garbage" for m in stored)
        assert mem.facts(scope=scope) == []
    with Memory(path=path, dense=HashingEncoder(dim=64), extractor=OfflineExtractor()) as mem:
        retry = mem.add(CHAT, scope=scope)
        assert retry.messages_stored == 0
        assert len(retry.fact_ids) == 3
        assert all(m.status is MessageStatus.PROCESSED for m in mem.messages(scope=scope))


def test_bad_input_is_typed_and_stores_nothing(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT[:2], scope=scope)
    with pytest.raises(InputError):
        memory.add([CHAT[2], {"speaker": "Nate", "text": "no time"}], scope=scope)
    with pytest.raises(InputError):
        memory.add([42], scope=scope)  # type: ignore[list-item]
    assert len(memory.messages(scope=scope)) == 2
    with pytest.raises(ScopeError):
        memory.add(CHAT, scope=None)  # type: ignore[arg-type]
    with pytest.raises(ScopeError):
        memory.search("x", scope="sara/assistant")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        memory.search("  ", scope=scope)
    with pytest.raises(InputError):
        memory.search("cat", scope=scope, k=0)
    with pytest.raises(ConfigurationError, match="unknown retrieval mode"):
        memory.search("cat", scope=scope, mode="psychic")


def test_search_messages_over_raw_evidence(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    for paths in (("sparse",), ("dense",), ("sparse", "dense")):
        found = memory.search_messages("croissants bakery", scope=scope, k=1, paths=paths)
        assert found[0].message.source_id == "m2"
    with pytest.raises(ConfigurationError):
        memory.search_messages("x", scope=scope, paths=("telepathy",))


def test_from_settings_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scope: Scope
) -> None:
    monkeypatch.setenv("MEMBRAIN_PATH", str(tmp_path / "env-store"))
    monkeypatch.setenv("MEMBRAIN_BATCH_SIZE", "2")
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    with Memory.from_settings() as mem:
        assert mem.batch_size == 2
        mem.add(CHAT[:2], scope=scope)
    assert (tmp_path / "env-store" / "facts").is_dir()
    monkeypatch.setenv("MEMBRAIN_BATCH_SIZE", "0")
    with pytest.raises(ConfigurationError, match="MEMBRAIN_"):
        Memory.from_settings()


def test_store_now_extract_later(memory: Memory, scope: Scope) -> None:
    stored = memory.add(CHAT, scope=scope, extract=False)
    assert stored.messages_stored == 4 and stored.fact_ids == ()
    assert {m.status for m in memory.messages(scope=scope)} == {MessageStatus.PENDING}
    assert memory.facts(scope=scope) == []
    done = memory.extract_pending(scope=scope)
    assert len(done.fact_ids) == 3
    assert {m.status for m in memory.messages(scope=scope)} == {MessageStatus.PROCESSED}
    assert memory.extract_pending(scope=scope).fact_ids == ()  # never twice


def test_participants_survive_a_restart(tmp_path: Path, scope: Scope) -> None:
    path = empty_store(tmp_path / "store")
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        mem.add(CHAT, scope=scope)
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        assert set(mem.participants(scope=scope)) == {"Sara", "Nate"}


def test_forget_and_supersede_keep_the_record(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    facts = {f.text: f for f in memory.facts(scope=scope)}
    cat = facts["[Sara] adopted a grey cat named [Miso]."]
    (gone,) = memory.forget([cat.id], scope=scope)
    assert gone.status.value == "forgotten"
    assert cat.id not in {f.id for f in memory.facts(scope=scope)}
    assert cat.id in {f.id for f in memory.facts(scope=scope, include_inactive=True)}
    for mode in ("fast", "deep"):
        assert cat.id not in {
            h.fact.id for h in memory.search("grey cat Miso", scope=scope, mode=mode)
        }
    bakery = next(f for t, f in facts.items() if "croissants" in t)
    sister = next(f for t, f in facts.items() if "Lisbon" in t)
    old = memory.supersede(bakery.id, [sister.id], scope=scope)
    assert old.status.value == "superseded"
    assert {f.id: f for f in memory.facts(scope=scope)}[sister.id].supersedes == (bakery.id,)
    with pytest.raises(InputError, match="no fact with id"):
        memory.forget([scope.record_id("no such fact")], scope=scope)
    with pytest.raises(InputError):
        memory.forget(["nope"], scope=scope)
    with pytest.raises(InputError):
        memory.forget([sister.id], scope=Scope(dataset="other", task="assistant"))


ALL_BUT_BOOLEAN = ("bm25", "dense", "hyde", "event", "entity_tree", "asked")
ALL_BUT_BOOLEAN += ("time", "stated", "when", "answers")


class Deletions(RecordListener):
    def __init__(self) -> None:
        self.scopes: list[Scope] = []

    def scope_deleted(self, scope: Scope) -> None:
        self.scopes.append(scope)


def test_delete_scope_leaves_no_derived_trace(memory: Memory, scope: Scope) -> None:
    other = Scope(dataset=scope.dataset, task="kept")
    memory.add(CHAT, scope=scope)
    memory.add(CHAT, scope=other)
    question = "Which cat did Sara adopt?"
    assert memory.search(question, scope=scope, mode="deep", exclude_paths=ALL_BUT_BOOLEAN, k=3)
    assert "Sara" in memory.participants(scope=scope)
    heard = Deletions()
    memory.store.subscribe(heard)
    memory.delete_scope(scope)
    assert heard.scopes == [scope, scope.bookkeeping()]  # every derived index is told
    assert memory.facts(scope=scope) == [] and memory.messages(scope=scope) == []
    assert memory.participants(scope=scope) == []
    assert not memory.search(question, scope=scope, mode="deep", k=3)
    assert not memory.search(question, scope=scope, mode="deep", exclude_paths=ALL_BUT_BOOLEAN, k=3)
    kept = memory.search(question, scope=other, mode="deep", k=3)
    assert "Miso" in kept[0].text
    assert memory.search(question, scope=other, mode="deep", exclude_paths=ALL_BUT_BOOLEAN, k=3)
    # the scope can be filled again, and every path sees the new records
    memory.add(CHAT[:2], scope=scope)
    again = memory.search("Which cat did Sara adopt?", scope=scope, mode="deep", k=3)
    assert "Miso" in again[0].text and "boolean" in again[0].paths


def test_scopes_lists_the_scopes_that_hold_records(tmp_path: Path) -> None:
    sara, nate = Scope(dataset="sara", task="chat"), Scope(dataset="nate", task="planner")
    said = {"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-15"}
    with Memory(path=empty_store(tmp_path, dim=32), dense=HashingEncoder(32)) as mem:
        assert mem.scopes() == []
        mem.add([said], scope=sara)
        mem.add([said], scope=nate.model_copy(update={"session": "s1"}))
        assert mem.scopes() == [nate, sara]
        assert mem.scopes("sara") == [sara]
        assert mem.scopes("nobody") == []
        assert mem.scopes("auth0|nate") == []
        raw_id = Scope(dataset="auth0|nate", task="planner")
        mem.add([said], scope=raw_id)
        assert mem.scopes("auth0|nate") == [raw_id]  # a raw user id names its encoded dataset
        with pytest.raises(ScopeError):
            mem.scopes("")
        mem.delete_scope(nate)
        mem.delete_scope(raw_id)
        assert mem.scopes() == [sara]


def test_delete_dataset_deletes_every_task_of_one_user(tmp_path: Path) -> None:
    said = {"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-15"}
    chat, planner = Scope(dataset="sara", task="chat"), Scope(dataset="sara", task="planner")
    nate = Scope(dataset="nate", task="chat")
    with Memory(path=empty_store(tmp_path, dim=32), dense=HashingEncoder(32)) as mem:
        for scope in (chat, planner, nate):
            mem.add([said], scope=scope)
        (fact,) = mem.facts(scope=chat)
        mem.forget([fact.id], scope=chat)  # an audited change, so the audit log holds records
        assert mem.delete_dataset("sara") == [chat, planner]
        assert mem.scopes() == [nate]
        for gone in (chat, planner):
            assert mem.facts(scope=gone, include_inactive=True) == []
            assert mem.messages(scope=gone) == [] and mem.audit(scope=gone) == []
            assert not mem.search("cat", scope=gone).hits
        assert len(mem.facts(scope=nate)) == 1
        assert mem.delete_dataset("nobody") == []
        with pytest.raises(ScopeError):
            mem.delete_dataset("")


def test_question_is_still_accepted_for_query_with_a_warning(tmp_path: Path) -> None:
    scope = Scope(dataset="sara")
    said = {"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-15"}
    with Memory(path=empty_store(tmp_path, dim=32), dense=HashingEncoder(32)) as mem:
        mem.add([said], scope=scope)
        new = mem.search(query="cat", scope=scope, mode="fast")
        with pytest.warns(DeprecationWarning, match="question= is deprecated"):
            old = mem.search(question="cat", scope=scope, mode="fast")  # type: ignore[call-arg]
        with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="not both"):
            mem.context("cat", question="dog", scope=scope)  # type: ignore[call-arg]
        with pytest.warns(DeprecationWarning):
            evidence = mem.search_messages(question="cat", scope=scope)  # type: ignore[call-arg]
    assert [h.fact.id for h in old] == [h.fact.id for h in new] and new.hits
    assert evidence and "Miso" in evidence[0].message.text
