"""Purge and retention: erased content leaves every read, every index and the store's files."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from accountability_fixtures import (
    MODES,
    SwitchModel,
    Turn,
    fresh_scope,
    open_memory,
    ref_for,
    story_model,
)

from langchain_membrain import MembrainRetriever as LangChainRetriever
from llama_index_membrain import MembrainRetriever as LlamaIndexRetriever
from membrain import (
    Actor,
    ActorKind,
    AuditAction,
    FactStatus,
    InputError,
    Memory,
    MessageStatus,
    PurgeResult,
    Scope,
)
from membrain.api.models import now
from membrain.knowledge.facts import entity_id
from membrain.testing import files_holding_text

SECRET = "Zorblaxian"
CONTROL = "quokkaberry"
QUESTION = "Where does Sara keep her Zorblaxian diary?"
# Every path a search may run, so that excluding all others leaves one alone.
ALL_PATHS = (
    "bm25",
    "dense",
    "hyde",
    "event",
    "entity_tree",
    "boolean",
    "replaced",
    "asked",
    "turn",
    "reply",
    "time",
    "stated",
    "when",
    "answers",
)
SEARCH_PATHS = ("bm25", "dense", "hyde", "event", "entity_tree", "boolean", "turn")

DIARY = Turn(
    "Sara",
    "I keep my Zorblaxian diary under the loose floorboard in my bedroom.",
    "2024-01-05T10:00:00Z",
    ["Sara", "Zorblaxian diary"],
    [
        "[Sara] keeps her [Zorblaxian diary] under the loose floorboard.",
        "[Sara]'s bedroom has a loose floorboard.",
        "[Sara] writes in it every night.",
    ],
    descriptions={"Zorblaxian diary": "Sara's secret Zorblaxian diary."},
)
BERRY = Turn(
    "Sara",
    "I grow quokkaberry bushes on my balcony.",
    "2024-01-06T10:00:00Z",
    ["Sara"],
    ["[Sara] grows quokkaberry bushes on her balcony."],
)


@pytest.fixture(scope="module")
def switch() -> SwitchModel:
    return SwitchModel()


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, switch: SwitchModel) -> Iterator[Memory]:
    """One store for the module (raw messages kept 30 days); every test has its own scope."""
    path = tmp_path_factory.mktemp("purge") / "store"
    with open_memory(path, switch, keep_messages=timedelta(days=30)) as memory:
        yield memory


@pytest.fixture
def scope() -> Scope:
    return fresh_scope()


def hit_ids(result: Any) -> list[str]:
    return [hit.fact.id for hit in result]


def finders(mem: Memory, scope: Scope, question: str, fact_id: str) -> list[str]:
    """Which modes, and which paths alone, return ``fact_id`` for ``question``."""
    found = [m for m in MODES if fact_id in hit_ids(mem.search(question, scope=scope, mode=m))]
    for path in SEARCH_PATHS:
        others = [p for p in ALL_PATHS if p != path]
        result = mem.search(question, scope=scope, mode="deep", exclude_paths=others)
        assert result.paths == (path,)
        if fact_id in hit_ids(result):
            found.append(path)
    return found


# -- 14. and 15. purging facts -----------------------------------------------------------------
def test_purged_facts_and_messages_leave_every_read_and_every_file(tmp_path: Path) -> None:
    path = tmp_path / "store"
    switch = SwitchModel()
    switch.current = story_model(DIARY, BERRY)
    scope = fresh_scope()
    diary_entity, sara = entity_id(scope, "Zorblaxian diary"), entity_id(scope, "Sara")
    with open_memory(path, switch) as mem:
        secret, floorboard, nightly = mem.add([DIARY.message()], scope=scope).fact_ids
        (berry,) = mem.add([BERRY.message()], scope=scope).fact_ids
        (message,) = [m for m in mem.messages(scope=scope) if SECRET in m.message.text]
        # Without a retention setting, retention erases nothing.
        far = mem.apply_retention(scope=scope, at=datetime(2100, 1, 1, tzinfo=UTC))
        assert (far.fact_ids, far.message_ids, far.entity_ids) == ((), (), ())
        # Positive control: every mode and every path alone finds the fact before the purge
        # (the deep searches build the lexical index and the entity tree), and it is on disk.
        assert finders(mem, scope, QUESTION, secret) == [*MODES, *SEARCH_PATHS]
        assert files_holding_text(path, SECRET)

        # The fact alone.
        result = mem.purge([secret], scope=scope, by="ana", reason="asked to")
        # At once, before any later search could rebuild it: the boolean path's index holds no
        # term of it (its .term files keep words compressed, which the probe reads).
        assert files_holding_text(path / "lexical", SECRET) == []
        assert result.fact_ids == (secret,)
        assert result.message_ids == ()
        assert result.entity_ids == (diary_entity,)
        assert finders(mem, scope, QUESTION, secret) == []
        assert SECRET not in mem.context(QUESTION, scope=scope).text
        assert secret not in [f.id for f in mem.facts(scope=scope, include_inactive=True)]
        assert mem.store.get_facts(scope, [secret]) == []
        assert secret not in [f.id for f in mem.store.iter_facts(scope)]
        assert mem.store.count_facts(scope) == 3
        # The rest of the message stays: its other facts, the message itself.
        assert {f.id for f in mem.facts(scope=scope)} == {floorboard, nightly, berry}
        assert message.id in [m.id for m in mem.messages(scope=scope)]
        # 15. The entity only the purged fact named is erased; the participant stays.
        entities = {e.id: e for e in mem.entities(scope=scope)}
        assert diary_entity not in entities and sara in entities
        assert mem.store.get_entities(scope, [diary_entity]) == []
        for hit in mem.search("Sara diary", scope=scope, mode="deep"):
            assert diary_entity not in [e.id for e in hit.entities]
            assert SECRET not in hit.text
        history = mem.history(secret, scope=scope)
        assert history.facts == () and history.fact is None
        actions = [e.action for e in history]
        assert actions[0] is AuditAction.CREATED and actions[-1] is AuditAction.PURGED
        purged = history.events[-1]
        assert purged.targets == (secret,) and purged.details["record"] == "fact"
        assert purged.actor == Actor(kind=ActorKind.API, name="ana")
        assert purged.reason == "asked to"
        assert SECRET not in history.text() and SECRET not in purged.model_dump_json()
        (gone,) = mem.audit(scope=scope, actions=["purged"], targets=[diary_entity])
        assert gone.details["record"] == "entity"

        # Then its source message, with every other fact derived from it.
        hits = mem.search_messages(QUESTION, scope=scope)
        assert message.id in [h.message.id for h in hits]  # positive control
        result = mem.purge([floorboard], scope=scope, messages=True)
        assert set(result.fact_ids) == {floorboard, nightly}
        assert result.message_ids == (message.id,)
        assert [m.message.text for m in mem.messages(scope=scope)] == [BERRY.text]
        assert mem.store.get_messages(scope, [message.id]) == []
        for paths in (("sparse",), ("dense",), ("sparse", "dense")):
            hits = mem.search_messages(f"{QUESTION} loose floorboard", scope=scope, paths=paths)
            assert all(SECRET not in h.message.text for h in hits), paths
            assert message.id not in [h.message.id for h in hits]
        assert [f.id for f in mem.facts(scope=scope, include_inactive=True)] == [berry]
        for question in (QUESTION, "Does Sara's bedroom have a loose floorboard?"):
            for mode in MODES:
                found = mem.search(question, scope=scope, mode=mode)
                assert hit_ids(found) == [berry], (question, mode)
        records = {
            (e.details["record"], e.targets) for e in mem.audit(scope=scope, actions=["purged"])
        }
        assert ("message", (message.id,)) in records
        assert ("fact", tuple(result.fact_ids)) in records

    # Nothing of the purged text is left in any file of the store.
    assert files_holding_text(path, SECRET) == []
    assert files_holding_text(path, CONTROL)  # the probe finds what was kept
    with open_memory(path) as reopened:
        assert [f.id for f in reopened.facts(scope=scope, include_inactive=True)] == [berry]
        for mode in MODES:
            found = reopened.search("What does Sara grow? quokkaberry", scope=scope, mode=mode)
            assert hit_ids(found)[:1] == [berry], mode
            assert all(SECRET not in h.text for h in found)
        hits = reopened.search_messages(f"{CONTROL} {SECRET} diary", scope=scope)
        assert [h.message.text for h in hits] == [BERRY.text]
        assert [e.id for e in reopened.entities(scope=scope)] == [sara]
        assert len(reopened.history(secret, scope=scope)) == 2  # created, purged
    assert files_holding_text(path, SECRET) == []


def test_purge_refuses_nothing_and_unknown_ids_and_changes_nothing(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    switch.current = story_model(DIARY, BERRY)
    secret, _, _ = mem.add([DIARY.message()], scope=scope).fact_ids
    (berry,) = mem.add([BERRY.message()], scope=scope).fact_ids

    def snapshot() -> tuple[Any, ...]:
        return (
            sorted(f.id for f in mem.facts(scope=scope, include_inactive=True)),
            sorted(m.id for m in mem.messages(scope=scope)),
            sorted(e.id for e in mem.entities(scope=scope)),
            len(mem.audit(scope=scope)),
        )

    before = snapshot()
    with pytest.raises(InputError):
        mem.purge([], scope=scope)
    with pytest.raises(InputError):
        mem.purge(scope=scope, messages=True)
    with pytest.raises(InputError, match="no-such-fact"):
        mem.purge([secret, "no-such-fact"], scope=scope)
    with pytest.raises(InputError, match="no-such-message"):
        mem.purge([berry], scope=scope, messages=["no-such-message"])
    with pytest.raises(InputError):  # a fact of another scope
        mem.purge([secret], scope=fresh_scope())
    assert snapshot() == before


def test_a_purge_erases_descriptions_learnt_from_the_purged_message(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    # The first message describes Sara (a participant, who stays) with the secret.
    described = Turn(
        DIARY.speaker,
        DIARY.text,
        DIARY.ts,
        DIARY.entities,
        DIARY.facts,
        descriptions={**DIARY.descriptions, "Sara": "Keeps a Zorblaxian diary at home."},
    )
    switch.current = story_model(described, BERRY)
    secret, _, _ = mem.add([described.message()], scope=scope).fact_ids
    mem.add([BERRY.message()], scope=scope)
    sara = entity_id(scope, "Sara")
    (before,) = [e for e in mem.entities(scope=scope) if e.id == sara]
    assert SECRET in before.description  # positive control

    mem.purge([secret], scope=scope, messages=True)
    (after,) = [e for e in mem.entities(scope=scope) if e.id == sara]
    assert after.participant
    context = mem.context("What does Sara grow?", scope=scope)
    assert CONTROL in context.text
    assert SECRET not in context.text, context.text
    assert all(SECRET not in v.description for v in after.versions), after.versions


# -- 16. retention -----------------------------------------------------------------------------
def test_retention_erases_old_processed_messages_only(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    assert mem.keep_messages == timedelta(days=30)
    switch.current = story_model(DIARY, BERRY)
    later = {"speaker": "Sara", "text": "Remind me to water the fig.", "timestamp": BERRY.ts}
    added = mem.add([DIARY.message(), BERRY.message()], scope=scope)
    pending = mem.add([later], scope=scope, extract=False)
    assert pending.messages_stored == 1
    facts = {f.id: f for f in mem.facts(scope=scope)}
    assert set(facts) == set(added.fact_ids)
    old = {m.id for m in mem.messages(scope=scope) if m.status is MessageStatus.PROCESSED}
    assert len(old) == 2

    # A message is as old as its timestamp (when it was said): nothing is 30 days old yet.
    said = sorted(m.message.timestamp for m in mem.messages(scope=scope))
    assert mem.apply_retention(scope=scope, at=said[0] + timedelta(days=29)).message_ids == ()
    assert len(mem.messages(scope=scope)) == 3

    result = mem.apply_retention(scope=scope, at=said[-1] + timedelta(days=31))
    assert set(result.message_ids) == old and result.fact_ids == ()
    (left,) = mem.messages(scope=scope)
    assert left.status is MessageStatus.PENDING and left.message.text == later["text"]
    for text in (DIARY.text, BERRY.text):
        hits = mem.search_messages(text, scope=scope)
        assert all(h.message.text == later["text"] for h in hits)
    # Facts stay, citing evidence that no longer exists.
    kept = {f.id: f for f in mem.facts(scope=scope)}
    assert kept == facts
    assert {s for f in kept.values() for s in f.sources} == old
    hit = mem.search("What does Sara grow?", scope=scope)[0]
    assert CONTROL in hit.fact.text and hit.sources == ()
    (event,) = mem.audit(scope=scope, actions=["purged"])
    assert set(event.targets) == old and event.details["record"] == "message"
    assert event.actor == Actor(kind=ActorKind.SYSTEM, name="retention")
    # Once more: nothing left to erase; another scope was never touched.
    assert mem.apply_retention(scope=scope, at=now() + timedelta(days=31)).message_ids == ()
    assert mem.apply_retention(scope=fresh_scope(), at=now() + timedelta(days=31)) == PurgeResult()


# -- 17. negative recall -----------------------------------------------------------------------
FORGET = Turn(
    "Sara",
    "My locker code is Mandolinquist.",
    "2024-02-01T10:00:00Z",
    ["Sara"],
    ["[Sara]'s locker code is Mandolinquist."],
)
OLD_CAR = Turn(
    "Sara",
    "I drive a Trabantino.",
    "2024-02-02T10:00:00Z",
    ["Sara", "Trabantino"],
    ["[Sara] drives a [Trabantino] car."],
)
NEW_CAR = Turn(
    "Sara",
    "Sold my old car, I drive a Fiat now.",
    "2024-02-20T10:00:00Z",
    ["Sara", "Fiat"],
    lambda prompt: [
        {
            "text": "[Sara] sold her old car and drives a [Fiat] now.",
            "replaces": [ref_for(prompt, "Trabantino")],
        }
    ],
)
WRONG = Turn(
    "Sara",
    "I was born in Quetzalburg.",
    "2024-02-03T10:00:00Z",
    ["Sara", "Quetzalburg"],
    ["[Sara] was born in [Quetzalburg]."],
)
PURGED = Turn(
    "Sara",
    "My Zorblaxian diary is under the floorboard.",
    "2024-02-04T10:00:00Z",
    ["Sara"],
    ["[Sara] hides a Zorblaxian diary under the floorboard."],
)
NAMED = {
    "Mandolinquist": "What is Sara's locker code? Mandolinquist",
    "Trabantino": "What car does Sara drive? Trabantino",
    "Quetzalburg": "Where was Sara born? Quetzalburg",
    SECRET: QUESTION,
}


def _shows(mem: Memory, scope: Scope, word: str, question: str) -> list[str]:
    """Every read that still returns ``word`` for ``question``."""
    where = []
    for mode in MODES:
        for hit in mem.search(question, scope=scope, mode=mode):
            if word in hit.fact.text or word in hit.text:
                where.append(mode)
    if word in mem.context(question, scope=scope).text:
        where.append("context")
    for doc in LangChainRetriever(memory=mem, scope=scope).invoke(question):
        if word in doc.page_content or word in doc.metadata["text"]:
            where.append("langchain")
    for node in LlamaIndexRetriever(memory=mem, scope=scope).retrieve(question):
        if word in node.node.get_content() or word in node.node.metadata["text"]:
            where.append("llama_index")
    return where


def test_nothing_named_comes_back_after_forget_supersede_purge_or_reject(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    switch.current = story_model(FORGET, OLD_CAR, NEW_CAR, WRONG, PURGED)
    ids = {}
    for turn in (FORGET, OLD_CAR, WRONG, PURGED):
        (ids[turn.text],) = mem.add([turn.message()], scope=scope).fact_ids
    for word, question in NAMED.items():  # positive control
        assert _shows(mem, scope, word, question), word
    (ids[NEW_CAR.text],) = mem.add([NEW_CAR.message()], scope=scope).fact_ids
    neighbour = fresh_scope("tom")
    switch.current = story_model(FORGET, WRONG, PURGED)
    for turn in (FORGET, WRONG, PURGED):
        mem.add([turn.message()], scope=neighbour)
    assert fact_status(mem, scope, ids[OLD_CAR.text]) is FactStatus.SUPERSEDED

    mem.forget([ids[FORGET.text]], scope=scope)
    item = mem.dispute([ids[WRONG.text]], scope=scope)
    mem.resolve(item.id, scope=scope, accept=False)
    (message,) = [m for m in mem.messages(scope=scope) if SECRET in m.message.text]
    erased = mem.purge(scope=scope, messages=[message.id])
    assert erased.fact_ids == (ids[PURGED.text],)

    for word, question in NAMED.items():
        assert _shows(mem, scope, word, question) == [], word
    hits = mem.search_messages(QUESTION, scope=scope)
    assert all(SECRET not in h.message.text for h in hits)
    # The neighbour keeps its own copies, and no read crosses into the other scope.
    for word, question in NAMED.items():
        found = _shows(mem, neighbour, word, question)
        assert found == (
            [] if word == "Trabantino" else [*MODES, "context", "langchain", "llama_index"]
        )
        for mode in MODES:
            theirs = hit_ids(mem.search(question, scope=neighbour, mode=mode))
            assert not set(theirs) & set(ids.values())
    untouched = fresh_scope()
    for word, question in NAMED.items():
        assert _shows(mem, untouched, word, question) == []


def fact_status(mem: Memory, scope: Scope, fact_id: str) -> FactStatus:
    (found,) = mem.store.get_facts(scope, [fact_id])
    return found.status


def test_a_forgotten_superseded_fact_leaves_the_past_reads_too(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    switch.current = story_model(OLD_CAR, NEW_CAR)
    (old,) = mem.add([OLD_CAR.message()], scope=scope).fact_ids
    (new,) = mem.add([NEW_CAR.message()], scope=scope).fact_ids
    past = "What car did Sara drive in February 2024? Trabantino"
    assert old in hit_ids(mem.search(past, scope=scope))  # positive control

    (forgotten,) = mem.forget([old], scope=scope, reason="do not keep my old car")
    # Memory.forget: "never returned by a search (except as_of a time before it was forgotten)".
    february = datetime(2024, 2, 10, tzinfo=UTC)
    shown = {
        "past question": old in hit_ids(mem.search(past, scope=scope)),
        "valid_at": old in hit_ids(mem.search(past, scope=scope, valid_at=february)),
        "context": "Trabantino" in mem.context(past, scope=scope).text,
    }
    assert shown == {"past question": False, "valid_at": False, "context": False}
    assert forgotten.status is FactStatus.FORGOTTEN
    assert forgotten.forgotten_at is not None
    assert mem.audit(scope=scope, actions=["forgotten"], targets=[old])
    assert new in hit_ids(mem.search("What car does Sara drive?", scope=scope))
