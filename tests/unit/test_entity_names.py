"""Entity resolution reads the entities a name may resolve to from indexes, not the scope."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rapidfuzz import fuzz

from membrain import Memory, Scope
from membrain.api.models import Entity, EntityVersion
from membrain.backends.base import Collection, Missing, Point
from membrain.extraction.base import EntityDraft
from membrain.knowledge.entities import EntityResolver
from membrain.knowledge.facts import entity_id
from membrain.records.entity_names import spellings
from membrain.testing import HashingEncoder

AT = datetime(2024, 5, 1, tzinfo=UTC)


def _entity(scope: Scope, name: str, *aliases: str, description: str = "") -> Entity:
    versions = (EntityVersion(version=1, description=description, recorded_at=AT),)
    return Entity(
        id=entity_id(scope, name),
        scope=scope,
        name=name,
        aliases=aliases,
        versions=versions if description else (),
        created_at=AT,
    )


@pytest.fixture
def crowded(memory: Memory, scope: Scope) -> Memory:
    """A scope with 300 unrelated entities besides the ones a test resolves to."""
    memory.store.put_entities(
        scope,
        [
            _entity(scope, "Caroline Ortiz", "Caro"),
            _entity(scope, "Jon Snow"),
            _entity(scope, "Melanie"),
            *(_entity(scope, f"Place {n:03d}") for n in range(300)),
        ],
    )
    return memory


@pytest.fixture
def no_scan(crowded: Memory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Memory]:
    def refuse(*_: object) -> Iterator[Entity]:
        raise AssertionError("entity resolution read every entity of the scope")

    monkeypatch.setattr(crowded.store, "iter_entities", refuse)
    yield crowded


def _resolve(memory: Memory, scope: Scope, *names: str) -> dict[str, str]:
    resolver = EntityResolver(memory.store)
    drafts = [EntityDraft(name=n) for n in names]
    return resolver.resolve(scope, drafts, participants=[], recorded_at=AT).ids


def test_names_resolve_by_key_alias_typo_and_containment_without_a_scan(
    no_scan: Memory, scope: Scope
) -> None:
    assert fuzz.ratio("melanie", "mellanie") >= 92  # within the resolver's typo ratio
    ids = _resolve(no_scan, scope, "caroline ortiz", "Caro", "Mellanie", "Jon")
    assert ids == {
        "caroline ortiz": entity_id(scope, "Caroline Ortiz"),
        "Caro": entity_id(scope, "Caroline Ortiz"),
        "Mellanie": entity_id(scope, "Melanie"),
        "Jon": entity_id(scope, "Jon Snow"),
    }
    fresh = _resolve(no_scan, scope, "Dana")
    assert fresh["Dana"] == entity_id(scope, "Dana")  # a new entity, as before


def test_candidates_are_the_few_a_name_may_resolve_to(crowded: Memory, scope: Scope) -> None:
    found = crowded.store.entity_candidates(scope, ["Melanie", "Jon"])
    assert {e.name for e in found} == {"Melanie", "Jon Snow"}
    assert crowded.store.entity_candidates(scope, ["Zed"]) == []
    assert crowded.store.entity_candidates(scope, ["  "]) == []
    other = Scope(dataset="someone-else", task="assistant")
    assert crowded.store.entity_candidates(other, ["Melanie"]) == []


def test_a_typo_is_one_shared_spelling_away() -> None:
    assert set(spellings("jon")) == {"jon", "on", "jn", "jo"}
    for typo in ("meanie", "mellanie", "melnaie", "melamie"):  # deletion, insertion, swap, change
        assert set(spellings("melanie")) & set(spellings(typo)), typo
    assert not set(spellings("melanie")) & set(spellings("stephanie"))


def test_entities_stored_without_the_name_fields_get_them_on_first_lookup(
    tmp_path: Path, scope: Scope
) -> None:
    with Memory(path=tmp_path / "store", dense=HashingEncoder(dim=64)) as memory:
        entity = _entity(scope, "Melanie", "Mel")
        payload = {  # as an older version stored it: name keys only
            **entity.model_dump(mode="json", exclude={"scope"}),
            "name_key": "melanie",
            "alias_keys": ["mel"],
        }
        vector = memory.store.dense.embed_documents(["Melanie"])[0]
        sparse = memory.store.sparse.embed_documents(["Melanie"])[0]
        memory.store.backend.upsert(
            Collection.ENTITIES, scope, [Point(entity.id, payload, vector, sparse)]
        )
        missing = {"spellings": Missing()}
        assert memory.store.backend.count(Collection.ENTITIES, scope, where=missing) == 1

        assert _resolve(memory, scope, "Mellanie") == {"Mellanie": entity.id}
        assert memory.store.backend.count(Collection.ENTITIES, scope, where=missing) == 0
        (stored,) = memory.store.get_entities(scope, [entity.id])
        assert stored.name == "Melanie" and stored.aliases == ("Mel",)
