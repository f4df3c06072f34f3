"""What the reranker reads around a candidate: the message timeline and the turn signals."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from membrain.api.models import Message, Scope, StoredMessage
from membrain.backends.edge import open_edge_backend
from membrain.embeddings import Bm25Encoder
from membrain.extraction.base import FactDraft
from membrain.knowledge.facts import build_facts
from membrain.records import RecordStore
from membrain.retrieval.base import SearchContext
from membrain.retrieval.signals import SIGNALS, turn_signals
from membrain.retrieval.turn_paths import TurnPath
from membrain.retrieval.turns import Timeline
from membrain.testing import HashingEncoder

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
SCOPE = Scope(dataset="signals", task="t")


@pytest.fixture
def store(tmp_path: object) -> Iterator[RecordStore]:
    store = RecordStore(open_edge_backend(f"{tmp_path}/s"), HashingEncoder(64), Bm25Encoder())
    yield store
    store.backend.close()


def _messages(
    store: RecordStore, said: list[tuple[int, str, str]], caption: str | None = None
) -> list[str]:
    """Store ``(minutes after T0, speaker, text)`` messages (the last with ``caption``)."""
    stored = [
        StoredMessage(
            id=SCOPE.record_id("m", str(minute), text),
            scope=SCOPE,
            message=Message(
                speaker=speaker,
                text=text,
                timestamp=T0 + timedelta(minutes=minute),
                caption=caption if i == len(said) - 1 else None,
            ),
            recorded_at=T0,
        )
        for i, (minute, speaker, text) in enumerate(said)
    ]
    store.put_messages(SCOPE, stored)
    return [m.id for m in stored]


def test_the_timeline_links_turns_within_a_session_and_hears_new_messages(
    store: RecordStore,
) -> None:
    first, second, third, later = _messages(
        store,
        [(0, "Maya", "Hi"), (1, "Jon", "Hello"), (2, "Maya", "Bye"), (120, "Jon", "Back")],
    )
    timeline = Timeline(store)
    store.subscribe(timeline)
    turns = timeline.turns(SCOPE, [first, second, third, later])
    assert (turns[first].previous, turns[first].next) == (None, second)
    assert (turns[second].previous, turns[second].next) == (first, third)
    assert turns[third].next is None  # two hours later is another session
    assert turns[later].session == turns[third].session + 1 and turns[later].previous is None
    (reply,) = _messages(store, [(121, "Maya", "Welcome back")])
    assert timeline.turns(SCOPE, [later])[later].next == reply
    assert timeline.turns(SCOPE, ["not-a-message"]) == {}


def test_new_messages_extend_the_kept_timeline_without_reading_the_scope_again(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = [(0, "Maya", "Hi"), (1, "Jon", "Hello"), (2, "Maya", "Bye"), (120, "Jon", "Back")]
    ids = _messages(store, said)
    timeline = Timeline(store)
    store.subscribe(timeline)
    timeline.turns(SCOPE, ids)
    reads = 0
    iter_messages = store.iter_messages

    def counted(scope: Scope) -> Iterator[StoredMessage]:
        nonlocal reads
        reads += 1
        return iter_messages(scope)

    monkeypatch.setattr(store, "iter_messages", counted)
    later = [(121, "Maya", "Welcome back"), (122, "Jon", "Thanks"), (400, "Maya", "Morning")]
    ids += _messages(store, later)
    extended = timeline.turns(SCOPE, ids)
    assert reads == 0  # the conversation went on: the kept timeline was extended
    fresh = Timeline(store).turns(SCOPE, ids)
    assert extended == fresh  # as a full read orders them, sessions included
    assert extended[ids[4]].previous == ids[3] and extended[ids[6]].session == 2

    ids += _messages(store, [(60, "Jon", "An earlier message, stored late")])
    assert timeline.turns(SCOPE, ids) == Timeline(store).turns(SCOPE, ids)
    assert reads == 3  # one stored before the last kept one: the timeline is read again


def test_a_short_reply_is_found_by_the_words_of_the_turn_it_answers(store: RecordStore) -> None:
    asked, replied, other = _messages(
        store,
        [
            (0, "Jon", "Did you visit the lighthouse at Peggy's Cove?"),
            (1, "Maya", "Yes, I really admire it."),
            (300, "Maya", "I adopted a greyhound."),
        ],
    )
    drafts = [
        FactDraft(text="[Maya] admires it.", sources=(replied,), stated_at=T0),
        FactDraft(text="[Maya] adopted a greyhound.", sources=(other,), stated_at=T0),
    ]
    facts, _ = build_facts(SCOPE, drafts, extractor="test", recorded_at=T0)
    store.put_facts(SCOPE, facts, ["Maya", "Jon"])
    ctx = SearchContext(
        question="What about the lighthouse at Peggy's Cove?",
        scope=SCOPE,
        store=store,
        participants=("Maya", "Jon"),
    )
    timeline = Timeline(store)
    reply, unrelated = (
        dict(zip(SIGNALS, row, strict=True)) for row in turn_signals(ctx, facts, timeline)
    )
    assert reply["bm25_prev"] > 0 and unrelated["bm25_prev"] == 0
    assert reply["bm25_turn"] == 0  # the reply itself shares no word with the question
    assert reply["bm25_session"] > 0 and unrelated["bm25_session"] == 0
    assert reply["cos_prev"] > unrelated["cos_prev"] == 0  # the other fact opens its session
    assert turn_signals(ctx, [], timeline) == []


def test_turn_paths_find_a_fact_by_its_turn_and_a_reply_by_the_turn_it_answers(
    store: RecordStore,
) -> None:
    asked, replied, pictured = _messages(
        store,
        [
            (0, "Jon", "Did you visit the lighthouse at Peggy's Cove?"),
            (1, "Maya", "Yes, I really admire it."),
            (2, "Maya", "Here is my new hobby."),
        ],
        caption="a pottery wheel with a clay bowl",
    )
    drafts = [
        FactDraft(text="[Jon] asked whether [Maya] went there?", sources=(asked,), stated_at=T0),
        FactDraft(text="[Maya] admires it.", sources=(replied,), stated_at=T0),
        FactDraft(text="[Maya] shared her new hobby.", sources=(pictured,), stated_at=T0),
    ]
    facts, _ = build_facts(SCOPE, drafts, extractor="test", recorded_at=T0)
    store.put_facts(SCOPE, facts, ["Maya", "Jon"])
    question, reply, hobby = facts
    timeline = Timeline(store)

    def ranked(name: str, text: str) -> list[str]:
        ctx = SearchContext(question=text, scope=SCOPE, store=store, participants=("Maya", "Jon"))
        return [r.id for r in TurnPath(name, lambda _: timeline).run(ctx)]

    assert ranked("turn", "lighthouse Peggy's Cove")[0] == question.id
    assert ranked("reply", "lighthouse Peggy's Cove")[0] == reply.id
    assert ranked("turn", "pottery wheel clay")[0] == hobby.id  # words only in the caption
    with pytest.raises(ValueError, match="unknown turn path"):
        TurnPath("sideways", lambda _: timeline)
