"""RemoteMemory and AsyncRemoteMemory against a real server: the same records as the memory."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from integration.served import CONVERSATION, Served, serving
from langchain_membrain import MembrainRetriever
from membrain import (
    BackendError,
    ConfigurationError,
    ConflictError,
    FactStatus,
    InputError,
    Memory,
    NotFoundError,
    RetrievalMode,
    Scope,
    ScopeError,
)
from membrain.files.transfer import export_scope, import_scope
from membrain.remote import AsyncRemoteMemory, MemoryLike, RemoteAccessError, RemoteMemory
from membrain.server import Access
from membrain.testing import HashingEncoder

SARA = Scope(dataset="sara", task="assistant")
STANDARD = Scope(dataset="sara", task="standard")
MORE = [
    {
        "id": "m3",
        "speaker": "Nate",
        "text": "My sister Ana moved to Lisbon last week.",
        "timestamp": "2024-03-15T14:05:00Z",
    },
    {
        "id": "m4",
        "speaker": "Nate",
        "text": "I play the cello in a jazz band on Fridays.",
        "timestamp": "2024-03-15T14:06:00Z",
    },
]
CAT = "What is the cat called?"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {
        "sara-writer": (["sara"], Access.WRITE),
        "sara-admin": (["sara"], Access.ADMIN),
        "tom-writer": (["tom"], Access.WRITE),
        "kim-admin": (["kim"], Access.ADMIN),
        "auth0-writer": (["auth0|64b7f1"], Access.WRITE),
    }
    with serving(tmp_path_factory.mktemp("remote"), keys) as state:
        with state.remote() as remote:
            remote.add(CONVERSATION, scope=SARA)
        yield state


def seeded(served: Served, task: str) -> tuple[Scope, list[str]]:
    scope = Scope(dataset="sara", task=task)
    with served.remote() as remote:
        result = remote.add(CONVERSATION, scope=scope)
    return scope, list(result.fact_ids)


# -- the same records as the memory ------------------------------------------------------------
def test_both_satisfy_the_protocol(served: Served) -> None:
    with served.remote() as remote:
        embedded: MemoryLike = served.memory
        over_http: MemoryLike = remote
        assert isinstance(embedded, MemoryLike) and isinstance(over_http, MemoryLike)


def test_add_reports_the_facts_the_memory_stored(served: Served) -> None:
    scope = Scope(dataset="sara", task="adding")
    with served.remote() as remote:
        result = remote.add(CONVERSATION, scope=scope)
        again = remote.add(CONVERSATION, scope=scope)
    assert result.messages_stored == 2 and result.errors == ()
    assert set(result.fact_ids) == {f.id for f in served.memory.facts(scope=scope)}
    assert again.messages_skipped == 2 and again.fact_ids == ()


@pytest.mark.parametrize("mode", ["fast", "expand", "auto"])
def test_search_returns_what_the_memory_returns(served: Served, mode: str) -> None:
    with served.remote() as remote:
        found = remote.search(CAT, scope=SARA, mode=mode, k=3)
    expected = served.memory.search(CAT, scope=SARA, mode=mode, k=3)
    assert found == expected
    assert found.question == CAT and found.requested is RetrievalMode(mode)
    assert found[0].fact.text.startswith("[Sara] adopted a cat")
    assert found[0].source_ids == ("m1",)


def test_search_can_keep_the_fused_order(served: Served) -> None:
    with served.remote() as remote:
        kept = remote.search(CAT, scope=SARA, mode="expand", k=3, rerank=False)
        ranked = remote.search(CAT, scope=SARA, mode="expand", k=3)
    assert kept == served.memory.search(CAT, scope=SARA, mode="expand", k=3, rerank=False)
    assert all(h.rerank is None for h in kept) and all(h.rerank is not None for h in ranked)


def test_search_without_a_path_matches_the_memory(served: Served) -> None:
    with served.remote() as remote:
        full = remote.search(CAT, scope=SARA, mode="fast", k=3)
        skipped = full.paths[0]
        found = remote.search(CAT, scope=SARA, mode="fast", k=3, exclude_paths=[skipped])
    assert found == served.memory.search(CAT, scope=SARA, mode="fast", k=3, exclude_paths=[skipped])
    assert skipped not in found.paths and set(found.paths) < set(full.paths)


def test_a_path_letter_warns_the_caller_and_is_sent_as_its_name(served: Served) -> None:
    with served.remote() as remote:
        named = remote.search(CAT, scope=SARA, mode="expand", k=3, exclude_paths=["hyde"])
        with pytest.warns(DeprecationWarning, match="'B2' is now 'hyde'") as caught:
            lettered = remote.search(CAT, scope=SARA, mode="expand", k=3, exclude_paths=["B2"])
    assert lettered == named and "hyde" not in lettered.paths and "bm25" in lettered.paths
    assert [w.filename for w in caught] == [__file__]


def test_context_facts_and_messages_match_the_memory(served: Served) -> None:
    with served.remote() as remote:
        context = remote.context(CAT, scope=SARA, max_tokens=300, mode="fast")
        facts = remote.facts(scope=SARA)
        messages = remote.messages(scope=SARA)
    memory = served.memory
    assert context == memory.context(CAT, scope=SARA, max_tokens=300, mode="fast")
    with served.remote() as remote:
        reserved = remote.context(CAT, scope=SARA, max_tokens=300, mode="fast", profile_tokens=250)
        with pytest.raises(InputError, match="profile_tokens"):
            remote.context(CAT, scope=SARA, max_tokens=300, profile_tokens=301)
    assert reserved == memory.context(
        CAT, scope=SARA, max_tokens=300, mode="fast", profile_tokens=250
    )
    assert reserved.profile_tokens == 250 and reserved.tokens <= 50
    assert "Miso" in context.text and context.tokens <= 300
    assert facts == memory.facts(scope=SARA) and len(facts) == 2
    assert messages == memory.messages(scope=SARA)
    assert [m.message.source_id for m in messages] == ["m1", "m2"]


def test_forget_takes_the_fact_out_of_search(served: Served) -> None:
    scope, _ = seeded(served, "forgetting")
    with served.remote() as remote:
        cat = remote.search(CAT, scope=scope, mode="fast", k=1)[0].fact
        (forgotten,) = remote.forget([cat.id], scope=scope, reason="wrong")
        after = remote.search(CAT, scope=scope, mode="fast")
        everything = remote.facts(scope=scope, include_inactive=True)
    assert forgotten.id == cat.id and forgotten.status is FactStatus.FORGOTTEN
    assert cat.id not in {hit.fact.id for hit in after}
    assert cat.id not in {f.id for f in served.memory.facts(scope=scope)}
    assert cat.id in {f.id for f in everything}


def test_get_reads_one_fact_whatever_its_status(served: Served) -> None:
    scope, (cat, bakery) = seeded(served, "getting")
    with served.remote() as remote:
        got = remote.get(cat, scope=scope)
        by_prefix = remote.get(cat[:8], scope=scope)
        remote.forget([bakery], scope=scope)
        forgotten = remote.get(bakery, scope=scope)
        with pytest.raises(NotFoundError):
            remote.get("0" * 32, scope=scope)
        with pytest.raises(NotFoundError):  # another task's fact is not this scope's
            remote.get(cat, scope=Scope(dataset="sara", task="elsewhere"))
    assert got == by_prefix == served.memory.get(cat, scope=scope)
    assert got.id == cat and got.status is FactStatus.ACTIVE
    assert forgotten.status is FactStatus.FORGOTTEN
    with pytest.raises(NotFoundError):
        served.memory.get("0" * 32, scope=scope)


def test_update_supersedes_by_the_new_statement_naming_the_key(served: Served) -> None:
    scope, (first, _) = seeded(served, "updating")
    with served.remote() as remote:
        new = remote.update(first, "[Sara] now keeps two cats.", scope=scope, reason="news")
        old = remote.get(first, scope=scope)
        with pytest.raises(ConflictError):
            remote.update(first, "[Sara] keeps three cats.", scope=scope)
        with pytest.raises(ConfigurationError):
            remote.update(new.id, "[Sara] keeps three cats.", scope=scope, by="agent:x")
    assert new == served.memory.get(new.id, scope=scope) and new.supersedes == (first,)
    assert old.status is FactStatus.SUPERSEDED and old.superseded_by == (new.id,)
    (event,) = served.memory.audit(scope=scope, actions=["superseded"], targets=[first])
    assert event.reason == "news" and "sara-writer" in str(event.actor)


def test_entities_and_participants_match_the_memory(served: Served) -> None:
    with served.remote() as remote:
        entities = remote.entities(scope=SARA)
        participants = remote.participants(scope=SARA)
    assert entities == served.memory.entities(scope=SARA) and entities
    assert participants == served.memory.participants(scope=SARA) and participants


def test_metadata_is_carried_and_filters_match_the_memory(served: Served) -> None:
    scope = Scope(dataset="sara", task="filed")
    chat = [
        {**turn, "metadata": {"project": "apollo" if i % 2 else "zeus"}}
        for i, turn in enumerate(CONVERSATION)
    ]
    with served.remote() as remote:
        remote.add(chat, scope=scope)
        found = remote.search(CAT, scope=scope, mode="fast", filters={"project": "apollo"})
        listed = remote.facts(scope=scope, filters={"project": {"in": ["zeus"]}})
        briefing = remote.context(CAT, scope=scope, filters={"project": "apollo"})
        with pytest.raises(InputError):
            remote.search(CAT, scope=scope, filters={"project": True})
    memory = served.memory
    assert found.hits and all(h.fact.metadata == {"project": "apollo"} for h in found.hits)
    expected = memory.search(CAT, scope=scope, mode="fast", filters={"project": "apollo"})
    assert [h.fact.id for h in found.hits] == [h.fact.id for h in expected.hits]
    assert listed == memory.facts(scope=scope, filters={"project": "zeus"}) and listed
    assert briefing.text == memory.context(CAT, scope=scope, filters={"project": "apollo"}).text


def test_the_former_question_field_is_still_read(served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.keys['sara-writer']}"}
    body = {"dataset": "sara", "task": "assistant", "question": CAT, "mode": "fast"}
    answered = httpx.post(f"{served.url}/api/memory/search", json=body, headers=headers)
    assert answered.status_code == 200, answered.text
    with served.remote() as remote, pytest.warns(DeprecationWarning):
        hits = remote.search(question=CAT, scope=SARA, mode="fast")  # type: ignore[call-arg]
    assert [h["fact"]["id"] for h in answered.json()["hits"]] == [h.fact.id for h in hits]


def test_scopes_lists_only_the_datasets_of_the_key(served: Served) -> None:
    tom = Scope(dataset="tom", task="listed")
    with served.remote("tom-writer") as remote:
        remote.add(CONVERSATION, scope=tom)
        seen_by_tom = remote.scopes()
        with pytest.raises(RemoteAccessError):
            remote.scopes("sara")
    with served.remote() as remote:
        seen_by_sara = remote.scopes()
        one = remote.scopes("sara")
    assert seen_by_tom == [tom]
    assert SARA in seen_by_sara and tom not in seen_by_sara
    assert one == seen_by_sara == [s for s in served.memory.scopes() if s.dataset == "sara"]


def test_a_raw_user_id_names_one_memory_on_every_surface(served: Served) -> None:
    scope = Scope(dataset="auth0|64b7f1", task="assistant")  # a key lists the raw id too
    with served.remote("auth0-writer") as remote:
        added = remote.add(CONVERSATION, scope=scope)
        assert remote.scopes() == [scope] and remote.scopes("auth0|64b7f1") == [scope]
        hits = remote.search(CAT, scope=scope, mode="fast")
    assert added.fact_ids and hits.hits[0].fact.scope.dataset == scope.dataset
    assert [f.id for f in served.memory.facts(scope=scope)] == list(added.fact_ids)
    with served.remote("sara-writer") as remote, pytest.raises(RemoteAccessError):
        remote.search(CAT, scope=scope)


def test_the_profile_is_served_with_the_memorys_checks(served: Served) -> None:
    scope, fact_ids = seeded(served, "profiled")
    with served.remote() as remote:
        entry = remote.profile_put(
            "preferences",
            "communication",
            "Sara wants short answers.",
            scope=scope,
            facts=[fact_ids[0]],
        )
        assert entry.author.startswith("api:") and remote.profile(scope=scope) == [entry]
        with pytest.raises(InputError, match="no preferences/salary"):
            remote.profile_put("preferences", "salary", "x", scope=scope)
        with pytest.raises(ConfigurationError):
            remote.profile_put("preferences", "interests", "x", scope=scope, by="agent:x")
        context = remote.context(CAT, scope=scope, max_tokens=500, profile_ratio=0.3)
        removed = remote.profile_forget("preferences", "communication", scope=scope)
        history = remote.profile_history("preferences", "communication", scope=scope)
        with pytest.raises(NotFoundError):
            remote.profile_history("work", "nothing", scope=scope)
    assert context.text.startswith("## Profile\n- preferences/communication: Sara wants short")
    assert context.profile == (entry,) and context.tokens <= 500
    assert removed.removed and history == [entry, removed]
    assert served.memory.profile(scope=scope) == []
    with served.remote("tom-writer") as remote, pytest.raises(RemoteAccessError):
        remote.profile(scope=scope)


def test_a_served_export_is_copied_under_another_user_with_its_audit(
    served: Served, tmp_path: Path
) -> None:
    scope, (old, new) = seeded(served, "exported")
    with served.remote() as remote:
        remote.supersede(old, [new], scope=scope, reason="moved")
        lines = [json.dumps(record) for record in export_scope(remote, scope)]
    copy = Scope(dataset="auth0|sara-copy", task="exported")
    with Memory(path=tmp_path / "local", dense=HashingEncoder(dim=64)) as local:
        counts = import_scope(local, copy, lines)
        facts = {f.text: f for f in local.facts(scope=copy, include_inactive=True)}
        events = local.audit(scope=copy)
    assert counts["fact"] == len(facts) and not {f.id for f in facts.values()} & {old, new}
    superseded = [e for e in events if e.action.value == "superseded" and e.details.get("imported")]
    assert superseded and superseded[0].reason == "moved"
    assert str(superseded[0].actor).startswith("api:")  # the server named the key, kept
    assert any(f.status is FactStatus.SUPERSEDED for f in facts.values())


def test_delete_dataset_needs_an_admin_key_of_it(served: Served) -> None:
    gone = Scope(dataset="tom", task="leaving")
    with served.remote("tom-writer") as remote:
        remote.add(CONVERSATION, scope=gone)
        with pytest.raises(RemoteAccessError):
            remote.delete_dataset("tom")  # a writer may not
    with served.remote("sara-admin") as remote, pytest.raises(RemoteAccessError):
        remote.delete_dataset("tom")  # an admin of another dataset may not
    assert gone in served.memory.scopes("tom")
    deleted = served.memory.delete_dataset("tom")
    assert gone in deleted and served.memory.scopes("tom") == []


async def test_an_admin_deletes_its_dataset_over_http(served: Served) -> None:
    tasks = [Scope(dataset="kim", task=t) for t in ("a", "b")]
    with served.remote("kim-admin") as remote:
        for scope in tasks:
            remote.add(CONVERSATION, scope=scope)
        assert remote.scopes() == tasks
        deleted = remote.delete_dataset("kim")
        left = remote.scopes()
    assert deleted == tasks and left == []
    assert all(served.memory.facts(scope=s, include_inactive=True) == [] for s in tasks)
    async with AsyncRemoteMemory(served.url, served.keys["kim-admin"]) as remote:
        assert await remote.delete_dataset("kim") == []


async def test_failed_messages_are_retried_or_dismissed_on_request(served: Served) -> None:
    scope, _ = seeded(served, "failures")
    with served.remote() as remote:
        retried = remote.retry_failed(scope=scope)
        dismissed = remote.dismiss_failed(scope=scope, reason="not worth it")
        with pytest.raises(ConfigurationError):
            remote.dismiss_failed(scope=scope, by="agent:x")
    async with AsyncRemoteMemory(served.url, served.keys["sara-writer"]) as remote:
        again = await remote.retry_failed(scope=scope)
        with pytest.raises(InputError, match="no failed message"):  # as the memory says
            await remote.dismiss_failed(["nope"], scope=scope)
    assert retried.fact_ids == () and dismissed == [] and again.fact_ids == ()


def test_supersede_returns_the_old_fact(served: Served) -> None:
    scope, (old, new) = seeded(served, "superseding")
    with served.remote() as remote:
        updated = remote.supersede(old, [new], scope=scope, reason="moved")
        with pytest.raises(NotFoundError):
            remote.supersede("0" * 32, [new], scope=scope)
        remote.forget([new], scope=scope)
        with pytest.raises(ConflictError, match="only active facts"):
            remote.supersede(old, [new], scope=scope)
    assert updated.id == old and updated.status is FactStatus.SUPERSEDED
    assert updated.superseded_by == (new,)


def test_review_round_trip_names_the_key_as_reviewer(served: Served) -> None:
    scope, (cat, bakery) = seeded(served, "reviewing")
    with served.remote() as remote:
        (confirmed,) = remote.confirm([bakery], scope=scope)
        item = remote.dispute([cat], scope=scope, reason="it is a dog")
        queue = remote.review_queue(scope=scope)
        with pytest.raises(ScopeError):
            remote.resolve(item.id)  # an id alone does not name the scope
        with pytest.raises(NotFoundError):
            remote.resolve("no-such-item", scope=scope)
        decided = remote.resolve(item, accept=False, note="checked the photos")
        after = remote.review_queue(scope=scope)
        facts = {f.id: f for f in remote.facts(scope=scope, include_inactive=True)}
    assert confirmed.trust.value == "confirmed"
    assert queue == [item] and item.fact_ids == (cat,) and after == []
    assert decided.id == item.id
    assert facts[cat].status is FactStatus.RETRACTED  # a rejected dispute retracts
    events = served.memory.audit(scope=scope, actions=["confirmed", "review_resolved"])
    assert {(e.actor.kind.value, e.actor.name) for e in events} == {("reviewer", "sara-writer")}


def test_purge_needs_an_admin_key_and_erases(served: Served) -> None:
    scope, (cat, _) = seeded(served, "purging")
    with served.remote() as writer, pytest.raises(RemoteAccessError):
        writer.purge([cat], scope=scope)
    with served.remote("sara-admin") as admin:
        result = admin.purge([cat], scope=scope, messages=True, reason="asked to")
        remaining = admin.messages(scope=scope)
    assert result.fact_ids == (cat,) and len(result.message_ids) == 1
    assert [m.message.source_id for m in remaining] == ["m2"]
    everything = served.memory.facts(scope=scope, include_inactive=True)
    assert cat not in {f.id for f in everything} and len(everything) == 1
    purged = served.memory.audit(scope=scope, actions=["purged"])
    assert purged and {e.actor.name for e in purged} == {"sara-admin"}
    assert cat in {t for e in purged for t in e.targets}


def test_a_reused_message_id_is_a_conflict(served: Served) -> None:
    scope = Scope(dataset="sara", task="reused")
    with served.remote() as remote:
        remote.add(CONVERSATION, scope=scope)
        changed = [{**CONVERSATION[0], "text": "I adopted a dog named Rex."}]
        with pytest.raises(ConflictError, match="m1"):
            remote.add(changed, scope=scope)
        messages = remote.messages(scope=scope)
    assert [m.message.text for m in messages] == [m["text"] for m in CONVERSATION]


def test_an_admin_key_deletes_a_scope_a_writer_cannot(served: Served) -> None:
    scope, _ = seeded(served, "deleting")
    with served.remote() as writer, pytest.raises(RemoteAccessError) as refused:
        writer.delete_scope(scope)
    assert refused.value.status == 403
    with served.remote("sara-admin") as admin:
        admin.delete_scope(scope)
        assert admin.facts(scope=scope) == [] and admin.messages(scope=scope) == []


async def test_the_async_client_adds_and_searches(served: Served) -> None:
    scope = Scope(dataset="sara", task="async")
    async with AsyncRemoteMemory(served.url, served.keys["sara-writer"]) as remote:
        result = await remote.add(CONVERSATION, scope=scope)
        found = await remote.search(CAT, scope=scope, mode="fast", k=2)
        facts = await remote.facts(scope=scope)
        with pytest.raises(RemoteAccessError):
            await remote.delete_scope(scope)
    assert set(result.fact_ids) == {f.id for f in facts}
    assert found == served.memory.search(CAT, scope=scope, mode="fast", k=2)


async def test_the_async_client_warns_of_a_path_letter_too(served: Served) -> None:
    async with AsyncRemoteMemory(served.url, served.keys["sara-writer"]) as remote:
        with pytest.warns(DeprecationWarning, match="'C' is now 'entity_tree'") as caught:
            found = await remote.search(CAT, scope=SARA, mode="deep", k=2, exclude_paths="C")
    assert "entity_tree" not in found.paths and "boolean" in found.paths
    assert [w.filename for w in caught] == [__file__]


async def test_the_async_client_has_the_evidence_and_accountability_calls(
    served: Served,
) -> None:
    scope = Scope(dataset="sara", task="async-more")
    async with AsyncRemoteMemory(served.url, served.keys["sara-writer"]) as remote:
        await remote.add(CONVERSATION, scope=scope, extract=False)
        extracted = await remote.extract_pending(scope=scope)
        evidence = await remote.search_messages("Miso", scope=scope, k=1, paths=["sparse"])
        derived = await remote.facts(scope=scope, derived_from=["m1"])
        picked = await remote.messages(scope=scope, ids=["m1"])
        history = await remote.history(derived[0].id, scope=scope)
        one = await remote.get(derived[0].id, scope=scope)
        speakers = await remote.participants(scope=scope)
        named = await remote.entities(scope=scope)
        events = await remote.audit(scope=scope, actions=["created"])
    memory = served.memory
    assert len(extracted.fact_ids) == 2
    assert [hit.message.source_id for hit in evidence] == ["m1"]
    assert derived == memory.facts(scope=scope, derived_from=["m1"]) and len(derived) == 1
    assert picked == memory.messages(scope=scope, ids=["m1"])
    assert history == memory.history(derived[0].id, scope=scope)
    assert one == derived[0]
    assert speakers == memory.participants(scope=scope) and named == memory.entities(scope=scope)
    assert events == memory.audit(scope=scope, actions=["created"]) and events
    async with AsyncRemoteMemory(served.url, served.keys["sara-writer"]) as remote:
        updated = await remote.update(derived[0].id, "[Sara] has a cat.", scope=scope)
    assert updated.supersedes == (derived[0].id,)


def test_the_langchain_retriever_runs_on_a_remote_memory(served: Served) -> None:
    with served.remote() as remote:
        retriever = MembrainRetriever(memory=remote, scope=SARA, k=1, mode="fast")
        (doc,) = retriever.invoke(CAT)
    assert doc.id == served.memory.search(CAT, scope=SARA, mode="fast", k=1)[0].fact.id
    assert doc.metadata["sources"] == ["m1"]


# -- errors --------------------------------------------------------------------------------------
def test_a_bad_key_and_another_datasets_key_are_refused(served: Served) -> None:
    with RemoteMemory(served.url, "mbk_not-a-key") as remote, pytest.raises(RemoteAccessError) as e:
        remote.search(CAT, scope=SARA)
    assert e.value.status == 401
    with served.remote(None) as remote, pytest.raises(RemoteAccessError) as e:
        remote.facts(scope=SARA)
    assert e.value.status == 401
    with served.remote("tom-writer") as remote, pytest.raises(RemoteAccessError) as e:
        remote.add(CONVERSATION, scope=SARA)
    assert e.value.status == 403 and "/api/memory/add" in str(e.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.search("  ", scope=SARA),
        lambda m: m.search(CAT, scope=SARA, k=0),
        lambda m: m.context(CAT, scope=SARA, max_tokens=0),
        lambda m: m.forget(["no-such-fact"], scope=SARA),
        lambda m: m.supersede("no-such-fact", ["other"], scope=SARA),
        lambda m: m.add([{"speaker": "Sara"}], scope=SARA),
    ],
)
def test_bad_input_is_an_input_error(served: Served, call: Any) -> None:
    with served.remote() as remote, pytest.raises(InputError):
        call(remote)


def test_a_missing_scope_is_a_scope_error(served: Served) -> None:
    with served.remote() as remote, pytest.raises(ScopeError):
        remote.facts(scope="sara")  # type: ignore[arg-type]


def test_pending_messages_are_extracted_on_request(served: Served) -> None:
    scope = Scope(dataset="sara", task="pending")
    with served.remote() as remote:
        stored = remote.add(CONVERSATION, scope=scope, extract=False)
        pending = remote.messages(scope=scope)
        extracted = remote.extract_pending(scope=scope)
        again = remote.extract_pending(scope=scope)
        done = remote.messages(scope=scope, ids=["m2", "unknown"])
    assert stored.fact_ids == () and {m.status.value for m in pending} == {"pending"}
    assert set(extracted.fact_ids) == {f.id for f in served.memory.facts(scope=scope)}
    assert len(extracted.fact_ids) == 2 and again.fact_ids == ()
    assert [(m.message.source_id, m.status.value) for m in done] == [("m2", "processed")]
    assert done == served.memory.messages(scope=scope, ids=["m2"])


def test_evidence_search_and_derived_facts_match_the_memory(served: Served) -> None:
    with served.remote() as remote:
        for paths in (("sparse",), ("dense",), ("sparse", "dense")):
            found = remote.search_messages("bakery in Porto", scope=SARA, k=2, paths=paths)
            assert found == served.memory.search_messages(
                "bakery in Porto", scope=SARA, k=2, paths=paths
            )
        derived = remote.facts(scope=SARA, derived_from=["m2"])
        none = remote.messages(scope=SARA, ids=[])
        by_id = remote.facts(scope=SARA, ids=[derived[0].id, "not-an-id", "0" * 32])
        no_facts = remote.facts(scope=SARA, ids=[])
        both = remote.facts(scope=SARA, ids=[derived[0].id], derived_from=["m1"])
    assert found[0].message.source_id == "m2"
    assert len(derived) == 1 and "bakery" in derived[0].text
    assert derived == served.memory.facts(scope=SARA, derived_from=["m2"])
    assert none == [] and no_facts == [] and both == []  # m2's fact does not cite m1
    assert by_id == derived == served.memory.facts(scope=SARA, ids=[derived[0].id])


def test_history_and_audit_match_the_memory(served: Served) -> None:
    scope, (old, new) = seeded(served, "accounting")
    with served.remote() as remote:
        remote.supersede(old, [new], scope=scope, reason="moved")
        history = remote.history(old, scope=scope)
        events = remote.audit(scope=scope)
        about_old = remote.audit(scope=scope, targets=[old], actions=["superseded"])
        with pytest.raises(InputError, match="no fact"):
            remote.history("1" * 32, scope=scope)
    memory = served.memory
    assert history == memory.history(old, scope=scope)
    assert events == memory.audit(scope=scope) and events
    assert about_old == memory.audit(scope=scope, targets=[old], actions=["superseded"])
    assert [e.action.value for e in about_old] == ["superseded"]
    assert about_old[0].actor.name == "sara-writer"  # the key is the actor


async def test_short_ids_name_messages_and_facts_over_http(served: Served) -> None:
    scope, (fact, _) = seeded(served, "short-ids")
    stored = served.memory.messages(scope=scope, ids=["m1"])
    short = stored[0].id[:8]
    unknown = next(p for p in ("00000000", "ffffffff") if not stored[0].id.startswith(p))
    with served.remote() as remote:
        assert remote.messages(scope=scope, ids=[short.upper()]) == stored
        assert remote.messages(scope=scope, ids=[unknown]) == []
        assert remote.facts(scope=scope, derived_from=[short]) == served.memory.facts(
            scope=scope, derived_from=["m1"]
        )
        with pytest.raises(NotFoundError, match="no fact"):
            remote.history(unknown, scope=scope)
    async with AsyncRemoteMemory(served.url, served.keys["sara-writer"]) as remote:
        assert await remote.messages(scope=scope, ids=[short]) == stored
        assert (await remote.history(fact[:8], scope=scope)).fact_id == fact


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda m: m.add("hi", scope=SARA, by="agent:x"), "by"),
        (lambda m: m.add("hi", scope=SARA, on_progress=print), "on_progress"),
        (lambda m: m.extract_pending(scope=SARA, on_progress=print), "on_progress"),
        (lambda m: m.search_messages(CAT, scope=SARA, paths=["C"]), "paths"),
        (lambda m: m.audit(scope=SARA, actions=["renamed"]), "renamed"),
        (lambda m: m.forget(["x"], scope=SARA, by="reviewer:ana"), "by"),
        (lambda m: m.supersede("x", ["y"], scope=SARA, by="reviewer:ana"), "by"),
        (lambda m: m.search(CAT, scope=SARA, mode="sideways"), "sideways"),
    ],
)
def test_what_the_server_cannot_do_is_refused(served: Served, call: Any, named: str) -> None:
    with served.remote() as remote, pytest.raises(ConfigurationError, match=named):
        call(remote)


def test_a_server_that_is_down_is_a_backend_error() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with RemoteMemory(url, "mbk_x", timeout=5.0) as remote, pytest.raises(BackendError) as e:
        remote.search(CAT, scope=SARA)
    assert url in str(e.value) and not isinstance(e.value, httpx.HTTPError)


def test_a_bad_url_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="http"):
        RemoteMemory("127.0.0.1:9574")


def answering(status: int, content: bytes) -> RemoteMemory:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content)

    return RemoteMemory("http://membrain.test", "mbk_x", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("status", "content", "error"),
    [
        (503, b'{"error": "the store failed", "type": "BackendError"}', BackendError),
        (500, b'{"error": "internal server error", "type": "InternalError"}', BackendError),
        (502, b"<html>bad gateway</html>", BackendError),
        (200, b"not json", BackendError),
        (200, b'{"hits": "nope"}', BackendError),
        (422, b'{"error": "no scope", "type": "ScopeError"}', ScopeError),
        (422, b'{"error": "k: too big", "type": "ValidationError"}', InputError),
        (404, b'{"error": "no fact with id x", "type": "FactNotFound"}', NotFoundError),
        (409, b'{"error": "id m1 names another", "type": "ConflictError"}', ConflictError),
    ],
)
def test_answers_map_to_the_librarys_errors(
    status: int, content: bytes, error: type[Exception]
) -> None:
    with answering(status, content) as remote, pytest.raises(error) as e:
        remote.search(CAT, scope=SARA)
    assert type(e.value) is error and "membrain.test/api/memory/search" in str(e.value)


def scripted(*answers: Any) -> tuple[list[str], httpx.MockTransport]:
    """A transport answering each request with the next of ``answers`` (raised if an error)."""
    calls: list[str] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, content = answer
        return httpx.Response(status, content=content)

    return calls, httpx.MockTransport(handler)


def test_no_answer_and_an_unavailable_server_are_asked_again() -> None:
    calls, transport = scripted(
        httpx.ConnectError("refused"),
        (503, b'{"error": "x", "type": "BackendError"}'),
        (200, b"[]"),
    )
    with RemoteMemory("http://membrain.test", transport=transport) as remote:
        assert remote.facts(scope=SARA) == []
    assert len(calls) == 3
    calls, transport = scripted(*[(502, b"bad gateway")] * 3)
    with (
        RemoteMemory("http://membrain.test", transport=transport) as remote,
        pytest.raises(BackendError, match="502"),
    ):
        remote.facts(scope=SARA)
    assert len(calls) == 3  # one try and two retries, then the last answer's error


def test_a_read_timeout_and_a_refusal_are_not_asked_again() -> None:
    calls, transport = scripted(httpx.ReadTimeout("slow"), (200, b"[]"))
    with (
        RemoteMemory("http://membrain.test", transport=transport) as remote,
        pytest.raises(BackendError, match="slow"),
    ):
        remote.facts(scope=SARA)
    assert len(calls) == 1  # the server may still be working on it
    calls, transport = scripted((403, b'{"error": "no", "type": "Forbidden"}'), (200, b"[]"))
    with (
        RemoteMemory("http://membrain.test", transport=transport) as remote,
        pytest.raises(RemoteAccessError),
    ):
        remote.facts(scope=SARA)
    assert len(calls) == 1
    calls, transport = scripted(httpx.ConnectError("refused"), (200, b"[]"))
    with (
        RemoteMemory("http://membrain.test", transport=transport, retries=0) as remote,
        pytest.raises(BackendError, match="refused"),
    ):
        remote.facts(scope=SARA)
    assert len(calls) == 1


async def test_the_async_client_asks_again_too() -> None:
    calls: list[str] = []
    answers: list[Any] = [httpx.ConnectError("refused"), (200, b"[]")]

    async def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer[0], content=answer[1])

    transport = httpx.MockTransport(handler)
    async with AsyncRemoteMemory("http://membrain.test", transport=transport) as remote:
        assert await remote.messages(scope=SARA) == []
    assert len(calls) == 2


def test_the_client_needs_no_server_packages() -> None:
    code = (
        "import sys, membrain.remote; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'uvicorn', 'starlette') or m.startswith('membrain.server')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


class TestRemoteRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's own retriever contract, on a served memory."""

    remote: RemoteMemory

    @pytest.fixture(autouse=True)
    def _bind_remote(self, served: Served) -> Iterator[None]:
        with served.remote() as remote:
            remote.add([*CONVERSATION, *MORE], scope=STANDARD)  # idempotent: ids are given
            self.remote = remote
            yield

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return MembrainRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self.remote, "scope": STANDARD, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return CAT


BAD = "x\ud800"  # a lone surrogate: no UTF-8 encoding exists
UNENCODABLE = [
    (lambda m: m.search(BAD, scope=SARA), "query"),
    (lambda m: m.context(BAD, scope=SARA), "query"),
    (lambda m: m.search_messages(BAD, scope=SARA), "query"),
    (lambda m: m.forget(["f"], scope=SARA, reason=BAD), "reason"),
    (lambda m: m.supersede("f", ["g"], scope=SARA, reason=BAD), "reason"),
    (lambda m: m.dispute(["f"], scope=SARA, reason=BAD), "reason"),
    (lambda m: m.resolve("i", accept=True, scope=SARA, note=BAD), "note"),
    (lambda m: m.purge(["f"], scope=SARA, reason=BAD), "reason"),
    (lambda m: m.forget([BAD], scope=SARA), "fact_ids.0"),
    (lambda m: m.facts(scope=SARA, ids=["a", BAD]), "ids"),
    (lambda m: m.history(BAD, scope=SARA), "fact_id"),
    (lambda m: m.add([{"speaker": "Sara", "text": BAD, "timestamp": 0}], scope=SARA), "text"),
]


@pytest.mark.parametrize(("call", "named"), UNENCODABLE)
def test_text_that_cannot_be_encoded_is_an_input_error(call: Any, named: str) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    transport = httpx.MockTransport(handler)
    with (
        RemoteMemory("http://membrain.test", transport=transport) as remote,
        pytest.raises(InputError, match="not valid Unicode") as raised,
    ):
        call(remote)
    assert named in str(raised.value) and sent == []  # nothing was sent


@pytest.mark.parametrize(("call", "named"), UNENCODABLE[:4] + UNENCODABLE[-3:])
async def test_the_async_client_refuses_it_too(call: Any, named: str) -> None:
    sent: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    transport = httpx.MockTransport(handler)
    async with AsyncRemoteMemory("http://membrain.test", transport=transport) as remote:
        with pytest.raises(InputError, match="not valid Unicode") as raised:
            await call(remote)
    assert named in str(raised.value) and sent == []
