"""Message metadata: carried to facts, returned, filterable in search, context and listings."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_templates import copy_store

from membrain import InputError, Memory, Message, Scope
from membrain.api.metadata import check_metadata, matches, metadata_filter
from membrain.backends.base import Collection
from membrain.records.filters import metadata_indexes
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant")
CHAT = [
    {
        "speaker": "Sara",
        "text": "I adopted a cat named Miso.",
        "timestamp": "2024-03-01T10:00:00Z",
        "metadata": {"project": "apollo", "channel": "web"},
    },
    {
        "speaker": "Sara",
        "text": "I adopted a dog named Rex.",
        "timestamp": "2024-03-01T10:01:00Z",
        "metadata": {"project": "zeus", "priority": 2},
    },
    {
        "speaker": "Sara",
        "text": "I adopted a parrot named Kiwi.",
        "timestamp": "2024-03-01T10:02:00Z",
    },
]


@pytest.fixture(scope="module")
def chat_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store holding ``CHAT``, made once for the module."""
    path = tmp_path_factory.mktemp("chat") / "store"
    with Memory(path=path, dense=HashingEncoder(64)) as memory:
        memory.add(CHAT, scope=SCOPE)
    return path


@pytest.fixture
def mem(chat_store: Path, tmp_path: Path) -> Memory:
    """A Memory holding ``CHAT`` (a copy of the module's store); the test closes it."""
    return Memory(path=copy_store(chat_store, tmp_path / "store"), dense=HashingEncoder(64))


def pets(facts: object) -> set[str]:
    names = {"Miso", "Rex", "Kiwi"}
    return {n for f in facts for n in names if n in f.text}  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["fast", "expand", "deep"])
def test_search_and_context_read_only_the_facts_filed_under_the_filter(
    mem: Memory, mode: str
) -> None:
    with mem:
        apollo = mem.search(
            "Which pet did Sara adopt?", scope=SCOPE, mode=mode, k=5, filters={"project": "apollo"}
        )
        either = mem.search(
            "Which pet did Sara adopt?",
            scope=SCOPE,
            mode=mode,
            k=5,
            filters={"project": {"in": ["apollo", "zeus"]}},
        )
        briefing = mem.context(
            "pets", scope=SCOPE, mode=mode, filters={"priority": 2}, min_relevance=0
        )
        unfiltered = mem.search("Which pet did Sara adopt?", scope=SCOPE, mode=mode, k=5)
    assert pets(h.fact for h in apollo) == {"Miso"}
    assert apollo.hits[0].fact.metadata == {"project": "apollo", "channel": "web"}
    assert pets(h.fact for h in either) == {"Miso", "Rex"}
    assert "Rex" in briefing.text and "Miso" not in briefing.text and "Kiwi" not in briefing.text
    assert pets(h.fact for h in unfiltered) == {"Miso", "Rex", "Kiwi"}


def test_facts_listing_filters_and_update_keeps_the_metadata(mem: Memory) -> None:
    with mem:
        assert pets(mem.facts(scope=SCOPE, filters={"channel": "web"})) == {"Miso"}
        assert pets(mem.facts(scope=SCOPE, filters={"project": "nope"})) == set()
        (miso,) = mem.facts(scope=SCOPE, filters={"project": "apollo"})
        mem.update(miso.id, "Sara adopted a cat named Mochi.", scope=SCOPE)
        (mochi,) = mem.facts(scope=SCOPE, filters={"project": "apollo"})
        everything = mem.facts(scope=SCOPE, include_inactive=True, filters={"project": "apollo"})
    assert "Mochi" in mochi.text and mochi.metadata == miso.metadata
    assert {f.id for f in everything} == {miso.id, mochi.id}


@pytest.mark.parametrize(
    "bad",
    [{"a.b": 1}, {"": 1}, {"k": float("nan")}, {"k": object()}, ["not", "an", "object"]],
)
def test_bad_metadata_is_refused_before_anything_is_stored(mem: Memory, bad: object) -> None:
    said = {**CHAT[0], "text": "Another message.", "metadata": bad}
    with mem:
        before = len(mem.messages(scope=SCOPE))
        with pytest.raises(InputError):
            mem.add([said], scope=SCOPE)
        assert len(mem.messages(scope=SCOPE)) == before


@pytest.mark.parametrize(
    "bad", [{"k": True}, {"k": 1.5}, {"k": {"in": []}}, {"k": {"in": "ab"}}, {"k": {"eq": 1}}]
)
def test_bad_filters_are_input_errors(mem: Memory, bad: dict[str, object]) -> None:
    with mem, pytest.raises(InputError):
        mem.search("pets", scope=SCOPE, filters=bad)


def test_the_rules() -> None:
    assert check_metadata(None) == {}
    with pytest.raises(InputError):
        check_metadata({"k": "x" * 20_000})
    conditions = metadata_filter({"b": {"in": ["x", 2]}, "a": "y"})
    assert conditions == (("a", "y"), ("b", ("x", 2)))
    assert matches({"a": "y", "b": 2}, conditions)
    assert not matches({"a": "y"}, conditions) and not matches({"a": "y", "b": True}, conditions)
    message = Message(speaker="A", text="hi", timestamp="2024-01-01", metadata={"k": [1, "2"]})
    assert message.metadata == {"k": [1, "2"]} and hash(message)


def test_metadata_keys_are_indexed_by_the_type_of_their_values(tmp_path: Path) -> None:
    with Memory(path=tmp_path / "m", dense=HashingEncoder(64)) as memory:
        memory.add(CHAT, scope=SCOPE)
        shard = memory.store.backend._shard(Collection.FACTS)  # type: ignore[attr-defined]
        indexed = {k for k in shard.info().payload_schema if k.startswith("metadata.")}
        fact = memory.facts(scope=SCOPE)[0]
    assert indexed == {"metadata.project", "metadata.channel", "metadata.priority"}
    odd = {"a": "x", "b": 3, "c": [1], "d": 1.5, "e": True, "f": {"g": 1}}
    assert metadata_indexes([fact.model_copy(update={"metadata": odd})]) == {
        "metadata.a": "keyword",
        "metadata.b": "integer",
        "metadata.c": "integer",
    }
