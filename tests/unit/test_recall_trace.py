"""The recall trace: what each read gave an agent, under which run, and what erasure does to it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from membrain import (
    ConfigurationError,
    InputError,
    MembrainSettings,
    Memory,
    NotFoundError,
    RecalledFact,
    Scope,
)
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant")
_SAID = [
    "I adopted a cat named Miso.",
    "I work at Stripe in Dublin.",
    "My brother Tom plays the cello.",
]
TURNS = [
    {"id": f"m{i}", "speaker": "Sara", "text": text, "timestamp": f"2024-03-15T14:0{i}:00Z"}
    for i, text in enumerate(_SAID, 1)
]


@pytest.fixture
def traced(tmp_path: Path, empty_stores: object) -> Iterator[Memory]:
    store = empty_stores.memory(tmp_path / "store", dim=64)  # type: ignore[attr-defined]
    with Memory(path=store, dense=HashingEncoder(dim=64), trace_recalls=True) as mem:
        mem.add(TURNS, scope=SCOPE)
        yield mem


def test_off_by_default_nothing_is_recorded(memory: Memory) -> None:
    memory.add(TURNS, scope=SCOPE)
    memory.search("Where does Sara work?", scope=SCOPE, run="r1")
    assert memory.trace("r1", scope=SCOPE) == []


def test_a_search_is_recorded_in_the_order_it_gave(traced: Memory) -> None:
    found = traced.search("Where does Sara work?", scope=SCOPE, run="r1", run_tags=["step:1"])
    (recall,) = traced.trace("r1", scope=SCOPE)
    assert recall.operation == "search"
    assert recall.query == "Where does Sara work?"
    assert recall.tags == ("step:1",)
    assert recall.fact_ids == tuple(h.fact.id for h in found)
    assert [f.rank for f in recall.facts] == list(range(1, len(found) + 1))
    assert [f.relevance for f in recall.facts] == [h.relevance for h in found]
    for given, hit in zip(recall.facts, found, strict=True):
        assert given.fact == hit.fact
        assert [m.source_id for m in given.sources] == [m.source_id for m in hit.sources]


def test_a_context_records_what_it_holds_not_every_candidate(traced: Memory) -> None:
    context = traced.context("Where does Sara work?", scope=SCOPE, max_tokens=40, run="r2")
    searched = traced.search("Where does Sara work?", scope=SCOPE, k=50)
    assert 0 < len(context.hits) < len(searched)  # the budget left candidates out
    (recall,) = traced.trace("r2", scope=SCOPE)
    assert recall.operation == "context"
    assert recall.fact_ids == tuple(h.fact.id for h in context.hits)


def test_runs_are_apart_and_reads_without_a_run_are_kept_under_none(traced: Memory) -> None:
    traced.search("cat", scope=SCOPE, run="a")
    traced.search("cello", scope=SCOPE, run="b")
    traced.search("Dublin", scope=SCOPE, run="a")
    traced.search("Stripe", scope=SCOPE)
    assert [r.query for r in traced.trace("a", scope=SCOPE)] == ["cat", "Dublin"]
    assert [r.query for r in traced.trace("b", scope=SCOPE)] == ["cello"]


def test_recalls_of_a_fact_name_the_runs_that_used_it(traced: Memory) -> None:
    hits = traced.search("Where does Sara work?", scope=SCOPE, k=1, run="work")
    traced.search("What is the cat called?", scope=SCOPE, k=1, run="cat")
    fact_id = hits[0].fact.id
    found = traced.recalls(fact_id[:8], scope=SCOPE)
    assert [r.run for r in found] == ["work"]
    assert found[0].facts[0].fact_id == fact_id
    with pytest.raises(NotFoundError):
        traced.recalls("deadbeef", scope=SCOPE)


def test_no_read_crosses_scopes(traced: Memory) -> None:
    traced.search("cat", scope=SCOPE, run="shared-name")
    other = Scope(dataset="kim", task="assistant")
    assert traced.trace("shared-name", scope=other) == []
    assert traced.trace("shared-name", scope=Scope(dataset="sara", task="other")) == []


def test_purging_a_fact_takes_it_out_of_every_trace(traced: Memory) -> None:
    first = traced.search("Where does Sara work?", scope=SCOPE, run="r")
    traced.context("Where does Sara work?", scope=SCOPE, run="r")
    gone = first[0].fact.id
    traced.purge(gone, scope=SCOPE, messages=True)
    for recall in traced.trace("r", scope=SCOPE):
        assert gone not in recall.fact_ids
        assert [f.rank for f in recall.facts] == list(range(1, len(recall.facts) + 1))
        assert recall.query == ""  # the question that found it may quote it
    assert traced.recalls(gone, scope=SCOPE) == []


def test_a_receipt_checks_the_trace_too(traced: Memory) -> None:
    hits = traced.search("Where does Sara work?", scope=SCOPE, k=1, run="r")
    receipt = traced.purge(hits[0].fact.id, scope=SCOPE).receipt
    assert receipt is not None
    check = traced.verify_erasure(receipt)
    assert check.ok and "recalls" in check.checked, check.findings
    (left,) = traced.trace("r", scope=SCOPE)  # a recall put back citing the erased fact
    given = RecalledFact(fact_id=hits[0].fact.id, rank=1)
    traced.store.put_recalls([left.model_copy(update={"facts": (given,)})])
    failed = traced.verify_erasure(receipt)
    assert not failed.ok
    assert [(f.where, f.record) for f in failed.findings] == [("recalls", hits[0].fact.id)]


def test_retention_erases_old_recalls_only(tmp_path: Path, empty_stores: object) -> None:
    store = empty_stores.memory(tmp_path / "store", dim=64)  # type: ignore[attr-defined]
    keep = timedelta(days=30)
    with Memory(
        path=store, dense=HashingEncoder(dim=64), trace_recalls=True, keep_recalls=keep
    ) as mem:
        mem.add(TURNS, scope=SCOPE)
        mem.search("cat", scope=SCOPE, run="r")
        (recall,) = mem.trace("r", scope=SCOPE)
        mem.apply_retention(at=recall.at + timedelta(days=29))
        assert len(mem.trace("r", scope=SCOPE)) == 1
        mem.apply_retention(at=recall.at + timedelta(days=31))
        assert mem.trace("r", scope=SCOPE) == []


def test_recalls_are_written_before_close_and_read_after_reopening(
    tmp_path: Path, empty_stores: object
) -> None:
    store = empty_stores.memory(tmp_path / "store", dim=64)  # type: ignore[attr-defined]
    with Memory(path=store, dense=HashingEncoder(dim=64), trace_recalls=True) as mem:
        mem.add(TURNS, scope=SCOPE)
        for i in range(40):  # more than one batch may hold within the writer's linger
            mem.search("cat", scope=SCOPE, k=1, run=f"r{i % 3}")
    with Memory(path=store, dense=HashingEncoder(dim=64)) as reopened:
        assert sum(len(reopened.trace(f"r{i}", scope=SCOPE)) for i in range(3)) == 40


def test_bad_run_names_and_settings_are_refused(traced: Memory) -> None:
    with pytest.raises(InputError):
        traced.search("cat", scope=SCOPE, run="x" * 257)
    with pytest.raises(InputError):
        traced.search("cat", scope=SCOPE, run="")
    with pytest.raises(InputError):
        traced.search("cat", scope=SCOPE, run_tags=[f"t{i}" for i in range(33)])
    with pytest.raises(InputError):
        traced.trace("", scope=SCOPE)
    with pytest.raises(ConfigurationError):
        Memory(path="/nonexistent/never", keep_recalls=timedelta(0))


def test_settings_turn_the_trace_on(tmp_path: Path, empty_stores: object) -> None:
    store = empty_stores.memory(tmp_path / "store", dim=64)  # type: ignore[attr-defined]
    settings = MembrainSettings(path=store, trace_recalls=True, keep_recalls="P7D")
    with Memory.from_settings(settings, dense=HashingEncoder(dim=64)) as mem:
        assert mem.trace_recalls
        assert mem.keep_recalls == timedelta(days=7)


def test_deleting_a_dataset_deletes_its_recalls(traced: Memory) -> None:
    other = Scope(dataset="kim", task="assistant")
    traced.add(TURNS, scope=other)
    traced.search("cat", scope=SCOPE, run="r")
    traced.search("cat", scope=other, run="r")
    traced.delete_dataset("sara")
    assert traced.trace("r", scope=SCOPE) == []
    assert len(traced.trace("r", scope=other)) == 1
