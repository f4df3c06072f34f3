from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import tantivy

from membrain.api.errors import BackendError, InputError, ScopeError
from membrain.api.models import Fact, FactStatus, Scope
from membrain.backends.lexical import LexicalIndex, time_keys, validate_query
from membrain.extraction.base import FactDraft
from membrain.knowledge.facts import build_facts
from membrain.temporal import parse_resolved

WHEN = datetime(2023, 6, 1, tzinfo=UTC)
SARA = Scope(dataset="sara", task="assistant")
OTHER = Scope(dataset="tom", task="assistant")


def facts(scope: Scope, *texts: str) -> list[Fact]:
    drafts = [FactDraft(text=t, sources=(f"m{i}",), stated_at=WHEN) for i, t in enumerate(texts)]
    built, _ = build_facts(scope, drafts, extractor="test", recorded_at=WHEN)
    return built


def ids(hits: list[tuple[str, float]]) -> list[str]:
    return [fact_id for fact_id, _ in hits]


@pytest.fixture
def index() -> Iterator[LexicalIndex]:
    with LexicalIndex(None) as idx:
        yield idx


def test_add_search_and_upsert(index: LexicalIndex) -> None:
    shoot, bakery = facts(
        SARA,
        "[Sara] booked the photo shoots in [Lisbon] [in May 2023::2023-05].",
        "[Tom] opened a bakery [last week::2023-05-22/2023-05-28].",
    )
    index.add(SARA, [shoot, bakery])
    assert index.count(SARA) == 2
    hits = index.search(SARA, "shooting", limit=10)  # stemmed: shooting ~ shoots
    assert ids(hits) == [shoot.id]
    assert hits[0][1] > 0
    # The same id again is one document, with the new content.
    changed = shoot.model_copy(update={"text": "[Sara] cancelled the shoot.", "entities": ()})
    index.add(SARA, [changed])
    index.add(SARA, [changed, changed])
    assert index.count(SARA) == 2
    assert index.search(SARA, "lisbon", limit=10) == []
    assert ids(index.search(SARA, "cancelled", limit=10)) == [shoot.id]


def test_phrases_and_fields(index: LexicalIndex) -> None:
    answer, scattered, other_month = facts(
        SARA,
        "[Sara] framed her [Golden Gate Bridge] print [last month::2023-05].",
        "[Sara] painted the golden gate of the garden next to the bridge, a golden bridge.",
        "[Sara] ran a marathon [on 7 June 2023::2023-06-07].",
    )
    index.add(SARA, [answer, scattered, other_month])
    assert ids(index.search(SARA, '"golden gate bridge"', limit=10)) == [answer.id]
    assert ids(index.search(SARA, 'entities:"Golden Gate Bridge"', limit=10)) == [answer.id]
    assert set(ids(index.search(SARA, "entities:Sara", limit=10))) == {
        answer.id,
        scattered.id,
        other_month.id,
    }
    assert ids(index.search(SARA, "month:2023-05", limit=10)) == [answer.id]
    assert ids(index.search(SARA, "day:2023-06-07", limit=10)) == [other_month.id]
    assert set(ids(index.search(SARA, "year:2023", limit=10))) == {answer.id, other_month.id}
    assert ids(index.search(SARA, "month:[2023-06 TO 2023-12]", limit=10)) == [other_month.id]
    # tantivy reads "a AND NOT b" as "a AND (a group of only NOT b)", which matches nothing:
    # the index writes NOT as "-" so it means what it says.
    for query in ("sara AND NOT golden AND year:2023", "sara AND -golden AND year:2023"):
        assert ids(index.search(SARA, query, limit=10)) == [other_month.id], query
    assert validate_query("sara AND (NOT golden)")
    assert validate_query("sara AND NOT golden") == []
    assert len(index.search(SARA, "sara", limit=2)) == 2


def test_scope_isolation_cannot_be_widened(index: LexicalIndex) -> None:
    (mine,) = facts(SARA, "[Sara] keeps the secret recipe in the blue box.")
    (theirs,) = facts(OTHER, "[Tom] keeps the secret recipe in the blue box.")
    index.add(SARA, [mine])
    index.add(OTHER, [theirs])
    assert ids(index.search(SARA, "secret recipe", limit=10)) == [mine.id]
    assert ids(index.search(OTHER, "secret recipe", limit=10)) == [theirs.id]
    for attack in (
        "tenant:tom/assistant",
        "secret OR tenant:tom/assistant",
        "tenant:tom/assistant OR status:active OR *",
        "(tenant:tom/assistant) OR NOT tenant:sara/assistant",
        "*",
    ):
        assert set(ids(index.search(SARA, attack, limit=10))) <= {mine.id}, attack
    assert validate_query("secret OR tenant:tom/assistant") == [
        "field 'tenant' cannot be queried (use text, entities, year, month, day, layer)"
    ]
    with pytest.raises(InputError, match="tenant"):
        index.search(SARA, "secret OR tenant:tom/assistant", limit=10, lenient=False)


def test_sessions_narrow(index: LexicalIndex) -> None:
    one = SARA.model_copy(update={"session": "one"})
    two = SARA.model_copy(update={"session": "two"})
    (first,) = facts(one, "[Sara] adopted a kitten.")
    (second,) = facts(two, "[Sara] adopted a puppy.")
    index.add(one, [first])
    index.add(two, [second])
    assert ids(index.search(one, "adopted", limit=10)) == [first.id]
    assert ids(index.search(two, "adopted", limit=10)) == [second.id]
    assert set(ids(index.search(SARA, "adopted", limit=10))) == {first.id, second.id}
    assert index.count(one) == 1 and index.count(SARA) == 2
    with pytest.raises(ScopeError):
        index.add(one, [second])
    with pytest.raises(ScopeError):
        index.add(OTHER, [first])


def test_status_filter(index: LexicalIndex) -> None:
    old, new = facts(SARA, "[Sara] lives in [Porto].", "[Sara] lives in [Lisbon].")
    index.add(SARA, [old, new])
    index.add(SARA, [old.model_copy(update={"status": FactStatus.SUPERSEDED})])
    assert ids(index.search(SARA, "lives", limit=10)) == [new.id]
    assert index.count(SARA) == 2  # superseded facts stay indexed, never found


def test_lenient_and_strict_parsing(index: LexicalIndex) -> None:
    (fact,) = facts(SARA, "[Sara] booked the photo shoot.")
    index.add(SARA, [fact])
    broken = "photo AND ("
    assert validate_query(broken)
    assert index.validate(broken) == validate_query(broken)
    assert ids(index.search(SARA, broken, limit=10)) == [fact.id]
    with pytest.raises(InputError, match="invalid lexical query"):
        index.search(SARA, broken, limit=10, lenient=False)
    with pytest.raises(InputError, match="colour"):
        index.search(SARA, "colour:red", limit=10, lenient=False)
    assert index.search(SARA, "colour:red", limit=10) == []
    assert validate_query("entities:Sara AND (month:2023-05 OR year:[2019 TO *])") == []
    assert ids(index.search(SARA, "photo", limit=10, lenient=False)) == [fact.id]
    assert index.search(SARA, "", limit=10) == []
    assert index.search(SARA, "photo", limit=0) == []


def test_reopen_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "lexical"
    built = facts(SARA, *(f"[Sara] noted item number {i} in [May::2023-05]." for i in range(30)))
    with LexicalIndex(path, batch_size=7) as idx:
        assert idx.created
        idx.add(SARA, built)
        # One writer per directory: a second owner is refused with a BackendError.
        with pytest.raises(BackendError):
            LexicalIndex(path)
    with LexicalIndex(path) as idx:
        assert not idx.created
        assert idx.count(SARA) == 30
        assert len(idx.search(SARA, "month:2023-05", limit=100)) == 30
        assert ids(idx.search(SARA, '"number 17"', limit=5)) == [built[17].id]
    idx.close()  # closing twice is fine
    with pytest.raises(BackendError, match="closed"):
        idx.search(SARA, "item", limit=5)


def test_rebuild_and_delete_scope(index: LexicalIndex) -> None:
    stale = facts(SARA, "[Sara] liked jazz.", "[Sara] liked opera.")
    (theirs,) = facts(OTHER, "[Tom] liked jazz.")
    index.add(SARA, stale)
    index.add(OTHER, [theirs])
    fresh = facts(SARA, "[Sara] liked jazz.", "[Sara] liked techno.", "[Sara] liked folk.")
    index.rebuild(SARA, iter(fresh))
    assert index.count(SARA) == 3
    assert index.search(SARA, "opera", limit=10) == []
    assert index.count(OTHER) == 1
    index.delete_scope(SARA)
    assert index.count(SARA) == 0
    assert ids(index.search(OTHER, "jazz", limit=10)) == [theirs.id]


def test_concurrent_adds(index: LexicalIndex) -> None:
    batches = [facts(SARA, *(f"[Sara] batch {b} line {i}." for i in range(20))) for b in range(4)]
    threads = [threading.Thread(target=index.add, args=(SARA, batch)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert index.count(SARA) == 80


def test_time_keys() -> None:
    assert time_keys(parse_resolved("2023-05-07")).days == ("2023-05-07",)
    week = time_keys(parse_resolved("2023-05-29/2023-06-04"))
    assert week.months == ("2023-05", "2023-06") and len(week.days) == 7
    year = time_keys(parse_resolved("2023"))
    assert year.years == ("2023",) and len(year.months) == 12 and year.days == ()
    decade = time_keys(parse_resolved("2010/2019"))
    assert len(decade.years) == 10 and decade.months == ()
    ages = time_keys(parse_resolved("1500/1999"))
    assert ages.years == ("1500", "1999")
    assert time_keys(parse_resolved("2019-05/")).months == ("2019-05",)
    assert time_keys(parse_resolved("/2020")).years == ("2020",)  # up to the end of 2020


def test_failed_add_leaves_nothing_behind(index: LexicalIndex) -> None:
    (mine,) = facts(SARA, "[Sara] plays the cello.")
    (theirs,) = facts(OTHER, "[Tom] plays the drums.")
    with pytest.raises(ScopeError):
        index.add(SARA, [mine, theirs])
    index.add(SARA, facts(SARA, "[Sara] sings."))
    assert index.count(SARA) == 1
    assert index.search(SARA, "cello", limit=5) == []


def test_index_of_another_schema_is_replaced(tmp_path: Path) -> None:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("title", stored=True)
    old = tantivy.Index(builder.build(), path=str(tmp_path))
    writer = old.writer(15_000_000, 1)
    writer.add_document(tantivy.Document(title="stale"))
    writer.commit()
    writer.wait_merging_threads()
    (tmp_path / "notes.txt").write_text("not ours")
    with LexicalIndex(tmp_path) as idx:
        assert idx.created  # empty: the owner rebuilds it from the store
        idx.add(SARA, facts(SARA, "[Sara] sings."))
        assert idx.count(SARA) == 1
    assert (tmp_path / "notes.txt").read_text() == "not ours"
