from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membrain.api.models import Fact, Scope, TimeSpan
from membrain.backends.lexical import LexicalIndex, validate_query
from membrain.extraction.base import FactDraft
from membrain.extraction.llm import LLMClient
from membrain.knowledge.facts import build_facts
from membrain.retrieval.base import SearchContext
from membrain.retrieval.boolean import BooleanPath, deterministic_query, llm_query
from membrain.temporal import find_times, parse_resolved

NOW = datetime(2023, 6, 10, tzinfo=UTC)
SCOPE = Scope(dataset="sara", task="assistant")

MARATHON = "[Sara] ran her first marathon [last month::2023-05]."
BRIDGE = "[Tom] framed the [Golden Gate Bridge] picture that [Sara] took."
FACTS = (
    MARATHON,
    BRIDGE,
    "[Sara] said she may visit [Lisbon] [next year::2024].",
    "[Sara] loves the flowers of May and the first warm days of May.",
    "[Sara] ran errands all day [in 2022::2022].",
    "[Sara] painted the golden gate of her garden and a golden bridge over the golden pond.",
    "[Sara]'s picture shows a golden bridge and a golden gate.",
)


def make_facts(scope: Scope, texts: Sequence[str]) -> list[Fact]:
    drafts = [FactDraft(text=t, sources=(f"m{i}",), stated_at=NOW) for i, t in enumerate(texts)]
    built, _ = build_facts(scope, drafts, extractor="test", recorded_at=NOW)
    return built


@pytest.fixture
def index() -> Iterator[LexicalIndex]:
    with LexicalIndex(None) as idx:
        idx.add(SCOPE, make_facts(SCOPE, FACTS))
        yield idx


def fact_id(text: str) -> str:
    return make_facts(SCOPE, FACTS)[FACTS.index(text)].id


def times_of(question: str) -> list[TimeSpan]:
    return [m.span for m in find_times(question, NOW)]


def context(question: str, *, llm: LLMClient | None = None, scope: Scope = SCOPE) -> SearchContext:
    return SearchContext(
        question=question,
        scope=scope,
        store=cast(Any, None),  # the boolean path reads only the lexical index
        limit=5,
        llm=llm,
        reference=NOW,
        times=times_of(question),
    )


class CannedQueries:
    """A chat model that writes the queued queries (an exception is raised instead)."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def generate(self, system: str, prompt: str) -> str:
        assert "year:" in system and "entities:" in system
        self.prompts.append(prompt)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply


# -- deterministic query -----------------------------------------------------------------------
def test_month_named_in_question_finds_fact_written_relatively(index: LexicalIndex) -> None:
    question = "What did Sara do in May 2023?"
    query = deterministic_query(question, times_of(question))
    assert "month:2023-05^2" in query and "year:2023^1" in query
    # Plain BM25 over the fact text (what the keyword path sees) ranks the "May" facts first:
    # the answer says "last month", only its annotation holds 2023-05.
    keywords = index.search(SCOPE, "text:sara OR text:may OR text:2023", limit=5)
    assert keywords[0][0] != fact_id(MARATHON)
    hits = BooleanPath(index).run(ctx := context(question))
    assert hits[0].id == fact_id(MARATHON)
    assert ctx.extra == {"boolean.query": query, "boolean.by_llm": False}


def test_quoted_multi_word_name_outranks_scattered_words(index: LexicalIndex) -> None:
    question = "Who has the picture of the Golden Gate Bridge?"
    query = deterministic_query(question)
    assert query.startswith('entities:"Golden Gate Bridge"^3 OR text:"Golden Gate Bridge"^2')
    bag = index.search(SCOPE, "text:golden OR text:gate OR text:bridge OR text:picture", limit=5)
    assert bag[0][0] != fact_id(BRIDGE)
    assert BooleanPath(index).run(context(question))[0].id == fact_id(BRIDGE)


def test_time_clauses_for_days_ranges_and_open_spans() -> None:
    day = deterministic_query("What did Sara eat on 7 May 2023?", times_of("on 7 May 2023"))
    assert "day:2023-05-07^3 OR month:2023-05^2 OR year:2023^1" in day
    spring = deterministic_query("trips", [parse_resolved("2023-03/2023-05")])
    assert spring == "trips OR month:[2023-03 TO 2023-05]^2 OR year:2023^1"
    since = deterministic_query("jobs", [parse_resolved("2019-05/")])
    assert since == "jobs OR month:[2019-05 TO *]^2 OR year:[2019 TO *]^1"
    before = deterministic_query("jobs", [parse_resolved("/2020")])
    assert before == "jobs OR year:[* TO 2020]^1"
    for query in (day, spring, since, before):
        assert validate_query(query) == []


def test_stopwords_question_words_and_possessives_are_dropped() -> None:
    query = deterministic_query("What's Okabe's preferred drink while he is debugging?")
    assert query == "okabe OR preferred OR drink OR debugging"


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_deterministic_query_always_parses(question: str) -> None:
    assert validate_query(deterministic_query(question)) == []


def test_scope_is_kept(index: LexicalIndex) -> None:
    other = Scope(dataset="tom", task="assistant")
    assert BooleanPath(index).run(context("Who ran a marathon?", scope=other)) == []


# -- model-written query -----------------------------------------------------------------------
def test_llm_query_is_used(index: LexicalIndex) -> None:
    model = CannedQueries('```\nQuery: entities:"Golden Gate Bridge" AND (picture OR photo)\n```')
    ctx = context("Who has the photo of the Golden Gate Bridge?", llm=LLMClient(model))
    hits = BooleanPath(index).run(ctx)
    assert [h.id for h in hits] == [fact_id(BRIDGE)]
    assert ctx.extra == {
        "boolean.query": 'entities:"Golden Gate Bridge" AND (picture OR photo)',
        "boolean.by_llm": True,
    }
    assert len(model.prompts) == 1
    assert model.prompts[0].startswith("Question: Who has the photo")


def test_invalid_llm_query_is_retried_with_the_errors(index: LexicalIndex) -> None:
    model = CannedQueries("colour:golden AND (bridge", '{"query": "marathon OR month:2023-05"}')
    ctx = context("What did Sara do in May 2023?", llm=LLMClient(model))
    hits = BooleanPath(index).run(ctx)
    assert hits[0].id == fact_id(MARATHON)
    assert ctx.extra["boolean.by_llm"] is True
    assert len(model.prompts) == 2
    assert "month:2023-05^2" in model.prompts[0]  # the question's times, resolved
    assert "colour:golden AND (bridge" in model.prompts[1]
    assert "Field does not exist: 'colour'" in model.prompts[1]


@pytest.mark.parametrize(
    "replies",
    [
        ("tenant:tom/assistant", "sara AND (NOT marathon)"),  # invalid twice
        (TimeoutError("model timed out"),),  # the model fails
        ("",),  # says nothing
    ],
)
def test_failing_model_falls_back_to_the_deterministic_query(
    index: LexicalIndex, replies: tuple[str | Exception, ...]
) -> None:
    model = CannedQueries(*replies)
    client = LLMClient(model)
    question = "What did Sara do in May 2023?"
    assert llm_query(client, question, times_of(question), validate=index.validate) is None
    ctx = context(question, llm=client)
    hits = BooleanPath(index).run(ctx)
    assert hits[0].id == fact_id(MARATHON)
    assert ctx.extra == {
        "boolean.query": deterministic_query(question, ctx.times),
        "boolean.by_llm": False,
    }
    assert len(model.prompts) == 2 * (1 if isinstance(replies[0], Exception) else 2)


def test_llm_query_finding_nothing_falls_back(index: LexicalIndex) -> None:
    model = CannedQueries("unicorn AND rainbow")
    ctx = context("What did Sara do in May 2023?", llm=LLMClient(model))
    hits = BooleanPath(index).run(ctx)
    assert hits[0].id == fact_id(MARATHON)
    assert ctx.extra["boolean.by_llm"] is False
