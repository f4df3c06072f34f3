from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrain.api.errors import InputError
from membrain.api.models import EntityView, Fact, Layer, MemoryHit, Message, Precision, Scope
from membrain.api.tokens import count_tokens
from membrain.retrieval.context import assemble_context

SCOPE = Scope(dataset="d", task="t")
STATED = datetime(2023, 5, 8, 10, 30, tzinfo=UTC)

CAROLINE = EntityView(id="e-caroline", name="Caroline", description="Transgender woman, counsels")
MELANIE = EntityView(id="e-melanie", name="Melanie")


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def message(source_id: str | None = None, id: str | None = None) -> Message:
    return Message(speaker="A", text="t", timestamp=STATED, source_id=source_id, id=id)


def hit(
    key: str,
    text: str,
    *,
    entities: Sequence[EntityView] = (),
    sources: Sequence[Message] = (),
    valid_from: datetime | None = None,
    valid_to: datetime | None = None,
    precision: Precision | None = None,
    stated_at: datetime = STATED,
    layer: Layer = Layer.DIALOGUE,
    fact_sources: tuple[str, ...] = ("m-1",),
) -> MemoryHit:
    fact = Fact(
        id=SCOPE.record_id("fact", key),
        scope=SCOPE,
        text=text or "x",
        valid_from=valid_from,
        valid_to=valid_to,
        precision=precision,
        stated_at=stated_at,
        recorded_at=stated_at,
        sources=fact_sources,
        extractor="test",
        layer=layer,
    )
    return MemoryHit(
        fact=fact, score=1.0, text=text, entities=tuple(entities), sources=tuple(sources)
    )


def example_hits() -> list[MemoryHit]:
    return [
        hit(
            "support-group",
            "Caroline attended an LGBTQ support group.",
            entities=[CAROLINE],
            sources=[message("D1:5")],
            valid_from=day(2023, 5, 7),
            valid_to=day(2023, 5, 8),
            precision=Precision.DAY,
        ),
        hit(
            "thought",
            'Melanie privately thought: "I should have said yes."',
            entities=[MELANIE],
            sources=[message("D3:2")],
            layer=Layer.THOUGHT,
        ),
        hit(
            "parade",
            "Caroline went to a pride parade with Melanie.",
            entities=[CAROLINE, MELANIE],
            sources=[message("D1:3"), message(None, "abcdef0123456789")],
            valid_from=day(2023, 5, 1),
            valid_to=day(2023, 5, 8),
            precision=Precision.DAY,
        ),
        hit(
            "painting",
            "Melanie painted a sunrise.",
            entities=[MELANIE],
            sources=[message("D2:4")],
            valid_from=day(2022, 1, 1),
            valid_to=day(2023, 1, 1),
            precision=Precision.YEAR,
        ),
        hit("concert", "The concert was cancelled.", sources=[message("D4:1")]),
    ]


EXPECTED = """\
## Caroline — Transgender woman, counsels
- 2023-05-01..2023-05-07: Caroline went to a pride parade with Melanie. [msg D1:3; abcdef01]
- 2023-05-07: Caroline attended an LGBTQ support group. [msg D1:5]

## Melanie
- 2022: Melanie painted a sunrise. [msg D2:4]
- thought 2023-05-08: Melanie privately thought: "I should have said yes." [msg D3:2]

## Other
- said 2023-05-08: The concert was cancelled. [msg D4:1]"""


def test_renders_the_example_exactly() -> None:
    hits = example_hits()
    ctx = assemble_context("What did Caroline do?", hits, max_tokens=1000)
    assert ctx.text == EXPECTED
    assert ctx.tokens == count_tokens(EXPECTED)
    assert ctx.question == "What did Caroline do?"
    assert ctx.max_tokens == 1000
    assert ctx.profile_tokens == 0
    assert ctx.hits == tuple(hits)
    assert ctx.entities == (CAROLINE, MELANIE)


def test_a_thought_is_never_labelled_as_said() -> None:
    thought = hit(
        "t", 'Okabe privately thought: "She is right."', layer=Layer.THOUGHT, sources=[message("a")]
    )
    said = hit("s", "Okabe said she is right.", sources=[message("b")])
    text = assemble_context("q", [thought, said], max_tokens=200).text
    assert '- thought 2023-05-08: Okabe privately thought: "She is right." [msg a]' in text
    assert "- said 2023-05-08: Okabe said she is right. [msg b]" in text
    assert "said 2023-05-08: Okabe privately" not in text


@pytest.mark.parametrize(
    ("valid_from", "valid_to", "precision", "label"),
    [
        (day(2023, 5, 7), day(2023, 5, 8), Precision.DAY, "2023-05-07"),
        (day(2023, 5, 1), day(2023, 6, 1), Precision.MONTH, "2023-05"),
        (day(2023, 1, 1), day(2024, 1, 1), Precision.YEAR, "2023"),
        (day(2023, 3, 1), day(2023, 6, 1), Precision.MONTH, "2023-03..2023-05"),
        (day(2020, 1, 1), None, Precision.YEAR, "2020.."),
        (None, day(2023, 6, 1), Precision.MONTH, "..2023-05"),
        (
            datetime(2023, 5, 8, 21, 30, tzinfo=UTC),
            datetime(2023, 5, 8, 21, 31, tzinfo=UTC),
            Precision.DATETIME,
            "2023-05-08T21:30Z",
        ),
        (
            datetime(2023, 5, 8, 21, 30, tzinfo=UTC),
            datetime(2023, 5, 8, 23, 0, tzinfo=UTC),
            Precision.DATETIME,
            "2023-05-08T21:30Z..2023-05-08T22:59Z",
        ),
        (
            datetime(2023, 5, 8, 21, 30, 15, tzinfo=UTC),
            datetime(2023, 5, 8, 21, 30, 16, tzinfo=UTC),
            Precision.DATETIME,
            "2023-05-08T21:30:15Z",
        ),
        (day(2023, 5, 7), day(2023, 5, 8), None, "2023-05-07"),
    ],
)
def test_time_labels(
    valid_from: datetime | None, valid_to: datetime | None, precision: Precision | None, label: str
) -> None:
    h = hit(
        "k", "Something happened.", valid_from=valid_from, valid_to=valid_to, precision=precision
    )
    text = assemble_context("q", [h], max_tokens=200).text
    assert text.splitlines()[1] == f"- {label}: Something happened. [msg m-1]"


def test_groups_follow_best_rank_and_facts_follow_time() -> None:
    late = hit(
        "late", "Melanie moved.", entities=[MELANIE], valid_from=day(2023, 6, 1),
        valid_to=day(2023, 6, 2), precision=Precision.DAY,
    )  # fmt: skip
    early_caroline = hit("c", "Caroline swam.", entities=[CAROLINE, MELANIE])
    stated_only = hit("stated", "Melanie laughed.", entities=[MELANIE], stated_at=day(2023, 5, 15))
    earliest = hit(
        "earliest", "Melanie was born.", entities=[MELANIE], valid_from=day(1990, 1, 1),
        valid_to=day(1991, 1, 1), precision=Precision.YEAR,
    )  # fmt: skip
    before = hit(
        "before", "Melanie lived in Oslo.", entities=[MELANIE], valid_to=day(2000, 1, 1),
        precision=Precision.YEAR,
    )  # fmt: skip
    ctx = assemble_context(
        "q", [late, early_caroline, stated_only, earliest, before], max_tokens=1000
    )
    lines = ctx.text.splitlines()
    assert lines == [
        "## Melanie",
        "- 1990: Melanie was born. [msg m-1]",
        "- ..1999: Melanie lived in Oslo. [msg m-1]",
        "- said 2023-05-15: Melanie laughed. [msg m-1]",
        "- 2023-06-01: Melanie moved. [msg m-1]",
        "",
        "## Caroline — Transgender woman, counsels",
        "- said 2023-05-08: Caroline swam. [msg m-1]",
    ]
    assert ctx.entities == (MELANIE, CAROLINE)
    assert ctx.hits == (late, early_caroline, stated_only, earliest, before)


def test_same_time_keeps_rank_order_and_text_is_one_line() -> None:
    first = hit("a", "Second\nline   spaced.", entities=[CAROLINE])
    second = hit("b", "Alpha.", entities=[CAROLINE])
    lines = assemble_context("q", [first, second], max_tokens=200).text.splitlines()
    assert lines[1:] == [
        "- said 2023-05-08: Second line spaced. [msg m-1]",
        "- said 2023-05-08: Alpha. [msg m-1]",
    ]


def test_citations_fall_back_to_ids() -> None:
    no_messages = hit("a", "A.", fact_sources=("0123456789abcdef", "fedcba9876543210"))
    repeated = hit("b", "B.", sources=[message("D1:1"), message("D1:1"), message("D1:2")])
    empty_text = hit("c", "", fact_sources=("m-2",))
    text = assemble_context("q", [no_messages, repeated, empty_text], max_tokens=200).text
    assert "- said 2023-05-08: A. [msg 01234567; fedcba98]" in text
    assert "- said 2023-05-08: B. [msg D1:1; D1:2]" in text
    assert "- said 2023-05-08: x [msg m-2]" in text  # empty hit.text: the fact's plain text


def test_a_fact_that_does_not_fit_is_skipped_and_smaller_ones_still_tried() -> None:
    big = hit("big", "word " * 300, entities=[CAROLINE])
    small = hit("small", "Melanie ran.", entities=[MELANIE])
    smaller = hit("smaller", "Caroline sang.", entities=[CAROLINE])
    ctx = assemble_context("q", [big, small, smaller], max_tokens=60)
    assert ctx.hits == (small, smaller)
    assert ctx.entities == (MELANIE, CAROLINE)
    assert "word" not in ctx.text
    assert ctx.tokens == count_tokens(ctx.text) <= 60


def test_a_group_is_only_opened_with_a_fact() -> None:
    only = hit("a", "Caroline sang.", entities=[CAROLINE])
    line_only = count_tokens("- said 2023-05-08: Caroline sang. [msg m-1]")
    ctx = assemble_context("q", [only], max_tokens=line_only)  # no room for the header
    assert (ctx.text, ctx.tokens, ctx.hits, ctx.entities) == ("", 0, (), ())


def test_tiny_budget_gives_an_empty_valid_context() -> None:
    ctx = assemble_context("q", example_hits(), max_tokens=1)
    assert (ctx.text, ctx.tokens, ctx.hits, ctx.entities) == ("", 0, (), ())
    assert assemble_context("q", [], max_tokens=10).text == ""


def test_profile_reserve_shrinks_what_fits() -> None:
    hits = example_hits()
    full = assemble_context("q", hits, max_tokens=1000)
    exact = assemble_context("q", hits, max_tokens=full.tokens)
    assert exact.hits == full.hits
    reserved = assemble_context("q", hits, max_tokens=full.tokens, profile_tokens=30)
    assert reserved.profile_tokens == 30
    assert reserved.max_tokens == full.tokens
    assert 0 < len(reserved.hits) < len(hits)
    assert reserved.tokens <= full.tokens - 30
    everything_reserved = assemble_context("q", hits, max_tokens=500, profile_tokens=500)
    assert (everything_reserved.text, everything_reserved.tokens) == ("", 0)


def test_final_count_is_exact_even_when_the_estimate_is_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import membrain.retrieval.context as module

    def undercount(text: str) -> int:  # pieces (ending in a newline) look free
        return 0 if text.endswith("\n") else count_tokens(text)

    monkeypatch.setattr(module, "count_tokens", undercount)
    hits = example_hits()
    ctx = assemble_context("q", hits, max_tokens=40)
    assert ctx.tokens == count_tokens(ctx.text) <= 40
    assert ctx.hits == tuple(hits[: len(ctx.hits)])  # the lowest-ranked facts were dropped
    assert 0 < len(ctx.hits) < len(hits)


def test_repeated_fact_is_included_once() -> None:
    h = hit("a", "Caroline sang.", entities=[CAROLINE])
    ctx = assemble_context("q", [h, h], max_tokens=200)
    assert ctx.hits == (h,)
    assert ctx.text.count("Caroline sang.") == 1


@pytest.mark.parametrize(
    ("max_tokens", "profile_tokens"),
    [(0, 0), (-5, 0), (10, -1), (10, 11), (True, 0), (10.0, 0), (10, None)],
)
def test_invalid_budgets_raise(max_tokens: object, profile_tokens: object) -> None:
    with pytest.raises(InputError):
        assemble_context("q", [], max_tokens=max_tokens, profile_tokens=profile_tokens)  # type: ignore[arg-type]


# --- properties -----------------------------------------------------------------------------

ALPHABET = st.characters(categories=("L", "N", "P", "Zs"), include_characters="\n\t—中é")
POOL = [
    CAROLINE,
    MELANIE,
    EntityView(id="e-3", name="Okabe Rintarou", description="Mad scientist;\nlab founder"),
    EntityView(id="e-4", name="Other", description=""),
]
TIMES: list[tuple[datetime | None, datetime | None, Precision | None]] = [
    (None, None, None),
    (day(2023, 5, 7), day(2023, 5, 8), Precision.DAY),
    (day(2023, 3, 1), day(2023, 6, 1), Precision.MONTH),
    (None, day(2021, 1, 1), Precision.YEAR),
    (day(2019, 1, 1), None, Precision.YEAR),
]


@st.composite
def hit_lists(draw: st.DrawFn) -> list[MemoryHit]:
    count = draw(st.integers(min_value=0, max_value=25))
    hits = []
    for index in range(count):
        text = draw(st.text(alphabet=ALPHABET, min_size=0, max_size=300))
        entities = draw(st.lists(st.sampled_from(POOL), max_size=3, unique_by=lambda e: e.id))
        valid_from, valid_to, precision = draw(st.sampled_from(TIMES))
        ids = draw(st.lists(st.sampled_from(["D1:1", "D2:10", None]), max_size=3))
        hits.append(
            hit(
                str(index),
                text,
                entities=entities,
                sources=[message(s, f"{index:016d}") for s in ids],
                valid_from=valid_from,
                valid_to=valid_to,
                precision=precision,
                stated_at=STATED + timedelta(days=draw(st.integers(0, 30))),
                layer=draw(st.sampled_from(list(Layer))),
            )
        )
    return hits


@st.composite
def budgets(draw: st.DrawFn) -> tuple[int, int]:
    max_tokens = draw(st.integers(min_value=1, max_value=2000))
    profile = draw(st.one_of(st.just(0), st.integers(min_value=0, max_value=max_tokens)))
    return max_tokens, profile


def is_rank_subsequence(chosen: Sequence[MemoryHit], hits: Sequence[MemoryHit]) -> bool:
    positions = [next(i for i, h in enumerate(hits) if h is c) for c in chosen]
    return positions == sorted(set(positions))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hits=hit_lists(), budget=budgets())
def test_budget_is_respected(hits: list[MemoryHit], budget: tuple[int, int]) -> None:
    max_tokens, profile = budget
    ctx = assemble_context("q", hits, max_tokens=max_tokens, profile_tokens=profile)
    assert ctx.tokens == count_tokens(ctx.text) <= max_tokens - profile <= max_tokens
    assert is_rank_subsequence(ctx.hits, hits)
    assert (ctx.text == "") == (ctx.hits == ())
    first_views = list({h.entities[0].id: h.entities[0] for h in ctx.hits if h.entities}.values())
    assert list(ctx.entities) == first_views
    for included in ctx.hits:
        if included.text.strip():
            assert " ".join(included.text.split()) in ctx.text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hits=hit_lists(), slack=st.integers(min_value=0, max_value=50))
def test_everything_is_included_when_it_fits(hits: list[MemoryHit], slack: int) -> None:
    full = assemble_context("q", hits, max_tokens=10**7)
    assert full.hits == tuple(hits)
    tight = assemble_context("q", hits, max_tokens=max(full.tokens, 1) + slack)
    assert tight.hits == full.hits
    assert tight.text == full.text
