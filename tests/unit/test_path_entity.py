"""The entity_tree path: entity-tree beam search finds facts that keyword and fact search miss."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from membrain.api.models import Entity, EntityVersion, Fact, FactStatus, Scope
from membrain.backends.base import DENSE, SPARSE
from membrain.backends.edge import open_edge_backend
from membrain.embeddings import Bm25Encoder
from membrain.extraction.base import FactDraft
from membrain.knowledge.facts import build_facts, entity_id
from membrain.records import RecordStore
from membrain.retrieval.base import SearchContext
from membrain.retrieval.entity_path import EntityTreePath
from membrain.retrieval.tree import EntityTree
from membrain.testing import HashingEncoder

T0 = datetime(2024, 3, 1, tzinfo=UTC)
QUESTION = "Which instruments does Sara play?"
PARTICIPANTS = ("Sara",)

ENTITIES = {
    "Sara": "the user",
    "violin": "one of the instruments Sara plays, a string instrument with a bow",
    "cello": "one of the instruments Sara plays, a large string instrument",
    "piano": "one of the instruments Sara plays, a keyboard instrument at home",
    "tennis": "a racket sport with a yellow ball",
    "Hamlet": "a tragedy by Shakespeare staged at the city theatre",
    "Rex": "a dog, a border collie who loves the park",
    "lasagna": "an oven-baked pasta dish with cheese",
    "Tom": "a coworker at the office",
}
# The instrument facts never say "instrument" or "play"; the distractors say "play".
ANSWERS = {
    "[Sara] practised the [violin] for two hours before the recital.",
    "[Sara] bought new strings for her [cello] on Tuesday.",
    "[Sara] tuned the [piano] in the living room.",
}
DISTRACTORS = [
    "[Sara] plays [tennis] with [Tom] every Sunday.",
    "[Sara] saw a play, [Hamlet], at the theatre.",
    "[Sara]'s dog [Rex] likes to play fetch.",
    "[Sara] cooked [lasagna] for dinner.",
    "[Tom] asked [Sara] about the meeting.",
]


def make_entity(scope: Scope, name: str, description: str) -> Entity:
    version = EntityVersion(version=1, description=description, recorded_at=T0)
    return Entity(
        id=entity_id(scope, name),
        scope=scope.without_session(),
        name=name,
        versions=(version,),
        participant=name in PARTICIPANTS,
        created_at=T0,
    )


def make_facts(scope: Scope, texts: list[str], source: str) -> list[Fact]:
    drafts = [
        FactDraft(text=t, sources=(f"{source}-{i}",), stated_at=T0) for i, t in enumerate(texts)
    ]
    facts, _ = build_facts(scope, drafts, extractor="test", recorded_at=T0)
    return facts


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordStore]:
    store = RecordStore(
        open_edge_backend(tmp_path_factory.mktemp("pathc") / "s"),
        HashingEncoder(dim=64),
        Bm25Encoder(),
    )
    yield store
    store.backend.close()


@pytest.fixture
def scope(request: pytest.FixtureRequest) -> Scope:
    return Scope(dataset=re.sub(r"[^\w.-]", "-", request.node.name)[:120], task="pathc")


def fill(store: RecordStore, scope: Scope) -> dict[str, Fact]:
    store.put_entities(scope, [make_entity(scope, n, d) for n, d in ENTITIES.items()])
    facts = make_facts(scope, [*sorted(ANSWERS), *DISTRACTORS], "m")
    store.put_facts(scope, facts, PARTICIPANTS)
    return {f.text: f for f in facts}


def context(store: RecordStore, scope: Scope, question: str = QUESTION) -> SearchContext:
    return SearchContext(
        question=question,
        scope=scope,
        store=store,
        participants=PARTICIPANTS,
        limit=10,
    )


def path(store: RecordStore) -> EntityTreePath:
    return EntityTreePath(EntityTree(store, branching=2), entities_per_search=3)


def test_only_path_c_finds_the_instruments(store: RecordStore, scope: Scope) -> None:
    facts = fill(store, scope)
    answers = {facts[t].id for t in ANSWERS}
    ctx = context(store, scope)
    # BM25 over facts: the distractors say "play"; the answers share only the speaker's name.
    bm25 = store.query_facts(scope, SPARSE, store.sparse.embed_query(QUESTION), limit=10)
    assert not answers & {r.id for r in bm25[:3]}
    neutral = store.sparse.embed_query("Which instruments does play?")  # without the name
    bm25_content = store.query_facts(scope, SPARSE, neutral, limit=10)
    assert bm25_content and not answers & {r.id for r in bm25_content}
    # Dense over facts (the dense path's query) ranks the "play" distractors first too.
    vector = store.dense.embed_query("Which instruments does they play?")
    dense = store.query_facts(scope, DENSE, vector, limit=3)
    assert not answers & {r.id for r in dense}
    # The entity_tree path reaches the instruments through their descriptions.
    c = path(store)
    assert c.name == "entity_tree"
    found = c.run(ctx)
    assert {r.id for r in found[:3]} == answers
    assert [r.score for r in found] == sorted((r.score for r in found), reverse=True)
    best = {i for i, _ in c.entities(ctx)}
    assert best == {entity_id(scope, n) for n in ("violin", "cello", "piano")}


def test_builds_the_tree_lazily_and_leaves_participants_out(
    store: RecordStore, scope: Scope
) -> None:
    fill(store, scope)
    c = path(store)
    assert c.tree.is_empty(scope)
    assert c.run(context(store, scope))
    assert not c.tree.is_empty(scope)
    members = {m for n in c.tree.nodes(scope) if not n.parent for m in n.members}
    assert entity_id(scope, "Sara") not in members
    assert len(members) == len(ENTITIES) - 1
    # only facts of the entities found, never every fact naming the speaker
    ctx = context(store, scope, "What does Sara like?")
    best = {i for i, _ in c.entities(ctx)}
    found = store.get_facts(scope, [r.id for r in c.run(ctx)])
    assert found and all(best & set(f.entity_ids) for f in found)
    assert len(found) < len(ANSWERS) + len(DISTRACTORS)


def test_keeps_to_the_scope_and_active_facts(store: RecordStore, scope: Scope) -> None:
    facts = fill(store, scope)
    violin = facts["[Sara] practised the [violin] for two hours before the recital."]
    store.put_facts(
        scope, [violin.model_copy(update={"status": FactStatus.SUPERSEDED})], PARTICIPANTS
    )
    # another session of the same (dataset, task) shares the entities, not the facts
    session = scope.model_copy(update={"session": "s2"})
    later = make_facts(session, ["[Sara] polished the [violin] case."], "s2")
    store.put_facts(session, later, PARTICIPANTS)
    # another tenant with the same entity names
    other = Scope(dataset=scope.dataset, task="elsewhere")
    store.put_entities(other, [make_entity(other, "violin", ENTITIES["violin"])])
    store.put_facts(other, make_facts(other, ["[Sara] sold the [violin]."], "o"), PARTICIPANTS)
    c = path(store)
    found = {r.id for r in c.run(context(store, scope))}
    assert violin.id not in found  # superseded
    assert later[0].id in found  # the (dataset, task) scope sees every session
    assert len(found) == len(ANSWERS)  # cello, piano, and the violin case; nothing of `other`
    in_session = {r.id for r in c.run(context(store, session))}
    assert in_session == {later[0].id}
    sold = {r.id for r in c.run(context(store, other))}
    assert len(sold) == 1 and not sold & found


def test_no_entities_no_results(store: RecordStore, scope: Scope) -> None:
    assert path(store).run(context(store, scope)) == []
