"""The hierarchical entity tree of the entity_tree path: build, search, incremental updates."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from membrain.api.errors import ConfigurationError
from membrain.api.models import Entity, EntityVersion, Scope
from membrain.backends.edge import open_edge_backend
from membrain.embeddings import Bm25Encoder
from membrain.extraction.llm import LLMClient
from membrain.knowledge.facts import entity_id
from membrain.records import RecordStore, TreeNode
from membrain.retrieval.tree import EntityTree
from membrain.retrieval.tree_cluster import partition
from membrain.testing import HashingEncoder

T0 = datetime(2024, 3, 1, tzinfo=UTC)

TOPICS: dict[str, list[tuple[str, str]]] = {
    "music": [
        (name, f"a musical instrument Sara plays in the orchestra, music practice {extra}")
        for name, extra in [
            ("violin", "string bow"),
            ("cello", "string bow low"),
            ("piano", "keys grand"),
            ("flute", "woodwind silver"),
            ("trumpet", "brass loud"),
            ("harp", "string golden"),
            ("oboe", "woodwind reed"),
            ("viola", "string bow alto"),
            ("clarinet", "woodwind reed"),
            ("drums", "percussion loud"),
        ]
    ],
    "food": [
        (name, f"a dish Sara cooks in the kitchen, recipe with dinner food {extra}")
        for name, extra in [
            ("lasagna", "pasta cheese"),
            ("risotto", "rice cheese"),
            ("paella", "rice seafood"),
            ("ramen", "noodles broth"),
            ("curry", "spicy rice"),
            ("tacos", "tortilla beef"),
            ("goulash", "beef stew"),
            ("pancakes", "breakfast sweet"),
            ("dumplings", "dough steamed"),
            ("lentil soup", "broth lentils"),
        ]
    ],
    "pets": [
        (name, f"a pet animal at home that Sara feeds, cares for at the vet {extra}")
        for name, extra in [
            ("Miso", "cat tabby"),
            ("Rex", "dog shepherd"),
            ("Kiwi", "parrot green"),
            ("Bubbles", "goldfish tank"),
            ("Luna", "cat black"),
            ("Pepper", "dog terrier"),
            ("Hazel", "rabbit hay"),
            ("Sunny", "canary yellow"),
            ("Spike", "hedgehog night"),
            ("Noodle", "hamster wheel"),
        ]
    ],
    "travel": [
        (name, f"a city Sara visited on a trip abroad, travel flight hotel vacation {extra}")
        for name, extra in [
            ("Lisbon", "portugal coast"),
            ("Kyoto", "japan temples"),
            ("Oslo", "norway fjord"),
            ("Cairo", "egypt pyramids"),
            ("Lima", "peru andes"),
            ("Hanoi", "vietnam street"),
            ("Prague", "czech castle"),
            ("Quebec", "canada winter"),
            ("Marrakesh", "morocco market"),
            ("Reykjavik", "iceland geysers"),
        ]
    ],
}
QUESTIONS = {
    "music": "Which musical instrument does she play in the orchestra?",
    "food": "What dish does she cook for dinner in the kitchen?",
    "pets": "Which pet animal does she feed at home?",
    "travel": "Which city did she visit on a trip abroad, a travel vacation?",
}


def make_entity(scope: Scope, name: str, description: str, **kw: object) -> Entity:
    version = EntityVersion(version=1, description=description, recorded_at=T0)
    return Entity.model_validate(
        {
            "id": entity_id(scope, name),
            "scope": scope.without_session(),
            "name": name,
            "versions": (version,),
            "created_at": T0,
            **kw,
        }
    )


def topic_of(scope: Scope) -> dict[str, str]:
    return {entity_id(scope, n): t for t, items in TOPICS.items() for n, _ in items}


def all_entities(scope: Scope) -> list[Entity]:
    found = [make_entity(scope, n, d) for items in TOPICS.values() for n, d in items]
    sara = make_entity(scope, "Sara", "the user, who plays music and cooks", participant=True)
    return [*found, sara]


def open_store(path: Path) -> RecordStore:
    return RecordStore(open_edge_backend(path), HashingEncoder(dim=64), Bm25Encoder())


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordStore]:
    """One store for the module (opening one is the slow part); each test has its own scope."""
    store = open_store(tmp_path_factory.mktemp("tree") / "s")
    yield store
    store.backend.close()


@pytest.fixture
def scope(request: pytest.FixtureRequest) -> Scope:
    return Scope(dataset=re.sub(r"[^\w.-]", "-", request.node.name)[:120], task="tree")


def built(
    store: RecordStore, scope: Scope, *, branching: int = 4, llm: LLMClient | None = None
) -> EntityTree:
    store.put_entities(scope, all_entities(scope))
    tree = EntityTree(store, branching=branching, llm=llm)
    tree.rebuild(scope)
    return tree


def ask(tree: EntityTree, scope: Scope, question: str, **kw: int) -> list[str]:
    vector = tree.store.dense.embed_query(question)
    return [i for i, _ in tree.search(scope, vector, **kw)]


def check_structure(tree: EntityTree, scope: Scope) -> list[TreeNode]:
    """Every stored invariant of the tree; returns the nodes."""
    nodes = tree.nodes(scope)
    by_id = {n.id: n for n in nodes}
    leaves = [n for n in nodes if n.level == 1]
    placed = [m for n in leaves for m in n.children]
    assert len(placed) == len(set(placed)), "an entity sits under two level-1 nodes"
    points = {n.id: n for n in tree.store.tree_nodes(scope) if n.level == 0}
    assert set(placed) == set(points)
    for n in nodes:
        assert n.level > 0 and n.summary
        if n.parent:
            parent = by_id[n.parent]
            assert n.id in parent.children and parent.level == n.level + 1
        kids = n.children
        if n.level == 1:
            assert all(points[k].parent == n.id for k in kids)
            assert sorted(n.members) == sorted(kids)
        else:
            below = [m for k in kids for m in by_id[k].members]
            assert sorted(n.members) == sorted(below)
        assert 1 <= len(kids) <= 2 * tree.branching
    assert len({n.level for n in nodes if not n.parent}) == 1, "the root's nodes differ"
    return nodes


def test_rebuild_builds_levels_and_places_every_entity_once(
    store: RecordStore, scope: Scope
) -> None:
    tree = built(store, scope)
    nodes = check_structure(tree, scope)
    assert {n.level for n in nodes} >= {1, 2}
    top = [n for n in nodes if not n.parent]
    assert 1 <= len(top) <= tree.branching
    assert sum(len(n.members) for n in top) == 40
    # the participant is not in the tree, nor is her name in summaries
    assert entity_id(scope, "Sara") not in {m for n in top for m in n.members}
    assert not any("sara" in n.summary.lower() for n in nodes)
    assert tree.participants(scope) == ["Sara"]


def test_rebuild_is_deterministic_and_replaces_the_old_tree(
    store: RecordStore, scope: Scope
) -> None:
    tree = built(store, scope)
    first = tree.nodes(scope)
    tree.rebuild(scope)
    assert tree.nodes(scope) == first
    assert store.count_tree(scope) == len(first) + 40 + 1  # + the participants' record


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_beam_search_returns_the_topics_entities_first(
    store: RecordStore, scope: Scope, topic: str
) -> None:
    tree = built(store, scope)
    found = ask(tree, scope, QUESTIONS[topic], beam_width=3)
    topics = topic_of(scope)
    assert [topics[i] for i in found[:5]] == [topic] * 5, [topics[i] for i in found[:10]]
    scores = [s for _, s in tree.search(scope, store.dense.embed_query(QUESTIONS[topic]))]
    assert scores == sorted(scores, reverse=True)


def test_depth_and_limit(store: RecordStore, scope: Scope) -> None:
    tree = built(store, scope)
    everything = ask(tree, scope, QUESTIONS["pets"], depth=0)
    assert len(everything) == 40  # depth 0: a flat ranking of every entity
    assert topic_of(scope)[everything[0]] == "pets"
    below_one_top_node = ask(tree, scope, QUESTIONS["pets"], depth=1, beam_width=1)
    narrow = ask(tree, scope, QUESTIONS["pets"], beam_width=1)
    assert 1 <= len(narrow) <= 2 * tree.branching
    assert len(narrow) <= len(below_one_top_node) < 40
    assert set(narrow) <= set(below_one_top_node)
    assert len(ask(tree, scope, QUESTIONS["pets"], limit=3)) == 3


def test_update_adds_an_entity_without_rebuild(store: RecordStore, scope: Scope) -> None:
    tree = built(store, scope)
    before = {n.id for n in tree.nodes(scope)}
    sax = make_entity(scope, "saxophone", "a musical instrument Sara plays in the orchestra, jazz")
    store.put_entities(scope, [sax])
    tree.update(scope, [sax])
    nodes = check_structure(tree, scope)
    assert {n.id for n in nodes} == before  # attached, nothing rebuilt
    assert sax.id in ask(tree, scope, "saxophone jazz musical instrument orchestra")[:3]
    assert sum(len(n.members) for n in nodes if not n.parent) == 41
    tree.update(scope, [sax])  # unchanged: nothing to do
    assert tree.nodes(scope) == nodes


def test_update_splits_a_node_past_twice_branching(store: RecordStore, scope: Scope) -> None:
    tree = built(store, scope)
    words = ["brie", "gouda", "feta", "cheddar", "gruyere", "edam", "camembert", "stilton", "bleu"]
    cheeses = [
        make_entity(scope, f"cheese {w}", f"a dish Sara cooks in the kitchen, dinner food {w}")
        for w in words
    ]
    store.put_entities(scope, cheeses)
    count = len(tree.nodes(scope))
    for cheese in cheeses:  # one at a time, as batches arrive
        tree.update(scope, [cheese])
        check_structure(tree, scope)
    assert len(tree.nodes(scope)) > count  # nodes were split
    found = ask(tree, scope, "a dish she cooks for dinner food with gruyere")
    assert found[0] == entity_id(scope, "cheese gruyere")


def test_update_moves_changed_entities_and_drops_participants(
    store: RecordStore, scope: Scope
) -> None:
    tree = built(store, scope)
    kiwi = make_entity(
        scope, "Kiwi", "a city Sara visited on a trip abroad, travel flight hotel vacation"
    )
    tree.update(scope, [kiwi])
    check_structure(tree, scope)
    assert kiwi.id in ask(tree, scope, QUESTIONS["travel"])
    assert kiwi.id not in ask(tree, scope, QUESTIONS["pets"], beam_width=1)
    rex = make_entity(scope, "Rex", "a dog, now a speaker in the chat", participant=True)
    tree.update(scope, [rex])
    check_structure(tree, scope)
    assert rex.id not in ask(tree, scope, "dog", depth=0)
    assert tree.participants(scope) == ["Rex", "Sara"]


def test_update_on_an_empty_tree_builds_it_then_grows(store: RecordStore, scope: Scope) -> None:
    tree = EntityTree(store, branching=2)
    assert tree.is_empty(scope)
    entities = all_entities(scope)[:40]
    store.put_entities(scope, entities[:6])
    tree.update(scope, entities[:6])
    assert len(ask(tree, scope, "anything", depth=0)) == 6
    depth = max(n.level for n in tree.nodes(scope))
    for start in range(6, 40, 3):  # then grows batch by batch, splitting and adding levels
        batch = entities[start : start + 3]
        store.put_entities(scope, batch)
        tree.update(scope, batch)
        check_structure(tree, scope)
    assert len(ask(tree, scope, "anything", depth=0)) == 40
    assert max(n.level for n in tree.nodes(scope)) > depth
    found = ask(tree, scope, QUESTIONS["travel"])
    assert topic_of(scope)[found[0]] == "travel"


def test_scopes_are_isolated(store: RecordStore, scope: Scope) -> None:
    tree = built(store, scope)
    other = Scope(dataset=scope.dataset, task="other")
    banjo = make_entity(other, "banjo", "a musical instrument Bob plays")
    store.put_entities(other, [banjo])
    assert tree.is_empty(other)
    tree.rebuild(other)
    assert ask(tree, other, QUESTIONS["music"]) == [banjo.id]
    assert banjo.id not in ask(tree, scope, QUESTIONS["music"], depth=0)
    assert len(tree.nodes(other)) == 1
    # a session reads the tree of its (dataset, task)
    session = scope.model_copy(update={"session": "s1"})
    assert ask(tree, session, QUESTIONS["music"]) == ask(tree, scope, QUESTIONS["music"])


def test_tree_persists_across_reopen(tmp_path: Path, scope: Scope) -> None:
    store = open_store(tmp_path / "p")
    tree = built(store, scope)
    nodes = tree.nodes(scope)
    expected = ask(tree, scope, QUESTIONS["food"])
    store.backend.close()
    reopened = open_store(tmp_path / "p")
    try:
        tree = EntityTree(reopened, branching=4)
        assert not tree.is_empty(scope)
        assert tree.nodes(scope) == nodes
        assert ask(tree, scope, QUESTIONS["food"]) == expected
    finally:
        reopened.backend.close()


class Namer:
    """A chat model that names music clusters and fails on the rest."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, system: str, prompt: str) -> str:
        self.prompts.append(prompt)
        if "orchestra" in prompt:
            return "Musical instruments Sara plays in the orchestra"
        raise TimeoutError("model down")


def test_llm_summaries_with_extractive_fallback(store: RecordStore, scope: Scope) -> None:
    namer = Namer()
    tree = built(store, scope, llm=LLMClient(namer))
    nodes = check_structure(tree, scope)
    assert len(namer.prompts) == len(nodes)
    by = {"llm" if n.by_llm else "extract" for n in nodes}
    assert by == {"llm", "extract"}
    named = [n for n in nodes if n.by_llm]
    assert all(n.summary == "Musical instruments Sara plays in the orchestra" for n in named)
    assert all(":" in n.summary for n in nodes if not n.by_llm)
    found = ask(tree, scope, QUESTIONS["music"])
    assert topic_of(scope)[found[0]] == "music"


def test_an_emptied_node_is_removed(store: RecordStore, scope: Scope) -> None:
    tree = built(store, scope)
    leaf = next(n for n in tree.nodes(scope) if n.level == 1)
    by_id = {e.id: e for e in all_entities(scope)}
    speakers = [by_id[i].model_copy(update={"participant": True}) for i in leaf.children]
    tree.update(scope, speakers)
    nodes = check_structure(tree, scope)
    assert leaf.id not in {n.id for n in nodes}
    assert sum(len(n.members) for n in nodes if not n.parent) == 40 - len(speakers)


def test_partition_bounds_groups_even_for_identical_vectors() -> None:
    same = np.ones((9, 4)) / 2.0
    groups = partition(same, 2, 3)
    assert sorted(i for g in groups for i in g) == list(range(9))
    assert all(1 <= len(g) <= 3 for g in groups)


def test_empty_scope_and_bad_branching(store: RecordStore, scope: Scope) -> None:
    tree = EntityTree(store)
    assert tree.search(scope, [1.0] + [0.0] * 63) == []
    tree.rebuild(scope)  # nothing to build: only the meta point is written
    assert tree.nodes(scope) == [] and not tree.is_empty(scope)
    assert tree.search(scope, [1.0] + [0.0] * 63) == []
    miso = make_entity(scope, "Miso", "a cat")
    tree.update(scope, [miso])  # the first entity of a built tree gets a node of its own
    check_structure(tree, scope)
    assert ask(tree, scope, "cat") == [miso.id]
    with pytest.raises(ConfigurationError):
        EntityTree(store, branching=1)


def test_two_trees_over_one_store_update_it_concurrently(
    store: RecordStore, scope: Scope, tmp_path: Path
) -> None:
    # Two writers on one store (two Memory objects on one folder) share one write lock ...
    first, second = EntityTree(store, branching=2), EntityTree(store, branching=2)
    assert first._lock is second._lock
    other = open_store(tmp_path / "other")
    try:
        assert EntityTree(other)._lock is not first._lock
    finally:
        other.backend.close()
    entities = all_entities(scope)[:40]
    store.put_entities(scope, entities)
    first.update(scope, entities[:4])
    # ... so their batches, racing, still leave one consistent tree holding every entity.
    batches = [entities[i : i + 3] for i in range(4, 40, 3)]
    writers = [(first, second)[i % 2] for i in range(len(batches))]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda tree, batch: tree.update(scope, batch), writers, batches))
    check_structure(first, scope)
    assert len(ask(first, scope, "anything", depth=0)) == 40
