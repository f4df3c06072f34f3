"""Current beliefs first: a later statement ranks above the earlier one it updates, for now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from membrain import Scope
from membrain.api.models import Fact
from membrain.retrieval.current import asked_attributes, asks_now, current_first, disagree

SCOPE = Scope(dataset="maya", task="assistant")
T0 = datetime(2024, 1, 8, tzinfo=UTC)


def _fact(text: str, day: int) -> Fact:
    at = T0 + timedelta(days=day)
    return Fact(
        id=f"f{day}",
        scope=SCOPE,
        text=text,
        stated_at=at,
        recorded_at=at,
        sources=(f"m{day}",),
        extractor="test",
    )


def _order(facts: list[Fact], question: str = "") -> list[str]:
    return [f.text for f in current_first(facts, lambda f: f, ["Maya"], question)]


@pytest.mark.parametrize(
    ("earlier", "later", "question"),
    [
        (
            "[Maya] lives in [Toronto].",
            "[Maya] and others moved to [Vancouver].",
            "Where does Maya live?",
        ),
        (
            "[Maya] is planning a trip to [Japan] in May.",
            "The [Japan] trip is pushed to October.",
            "When is the trip to Japan?",
        ),
        (
            "[Sofia] has a solo recital [in March::2024-03].",
            "[Sofia] hurt her wrist, the recital is postponed.",
            "When is Sofia's recital?",
        ),
        ("[Kenji] has been doing keto.", "[Kenji] quit keto.", "What diet is Kenji on?"),
        (
            "[Fatima] is planning a trip to [Marrakech] [in June::2024-06].",
            "[Fatima] pushed the [Marrakech] trip to [next year::2025].",
            "When is Fatima's trip to Marrakech?",
        ),
        (
            "[Maya] and friends are driving to [Jasper] in February.",
            "The [Jasper] trip's off, the car died.",
            "Is Maya going to Jasper?",
        ),
        (
            "[Maya]'s check-in is booked in [Oslo] for August.",
            "[Maya]'s check-in is moved to October in [Bergen].",
            "When does Maya check in?",
        ),
        (
            "[Maya] rides an old [Honda] Activa to work.",
            "[Maya] upgraded to a [Yamaha] Fascino.",
            "What scooter does Maya ride?",
        ),
    ],
)
def test_a_later_update_moves_above_what_it_updates(
    earlier: str, later: str, question: str
) -> None:
    old, new = _fact(earlier, 0), _fact(later, 30)
    assert disagree(old, new, ["Maya"])
    beagle = "[Maya] has a beagle."
    assert _order([old, _fact(beagle, 1), new], question) == [later, earlier, beagle]


def test_only_a_disagreement_the_question_is_about_moves_a_fact() -> None:
    plan = _fact("[Marcus] is planning a trip to [New Orleans] [in April::2024-04].", 0)
    off = _fact("[Marcus] called off the [New Orleans] trip.", 30)
    single = _fact("[Marcus] is single.", 1)
    dating = _fact("[Marcus] has got a girlfriend now, [Dana].", 31)
    facts = [plan, single, off, dating]
    unmoved = [f.text for f in facts]
    assert _order(facts, "What is Marcus allergic to?") == unmoved
    assert _order(facts, "Which city does Marcus live in?") == unmoved
    assert _order(facts, "Is Marcus still going to New Orleans?")[0] == off.text
    assert _order(facts, "Who is Marcus dating?")[0] == dating.text


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("[Maya] lives in [Toronto].", "[Maya]'s sister [Ana] moved to [Vancouver]."),
        ("[Maya] has a beagle named [Pepper].", "[Maya] moved the meeting to Friday."),
        ("[Maya] lives in [Toronto].", "[Maya] lives in [Toronto] with her dog."),
    ],
)
def test_unrelated_or_agreeing_statements_keep_their_order(earlier: str, later: str) -> None:
    old, new = _fact(earlier, 0), _fact(later, 30)
    assert not disagree(old, new, ["Maya"])
    assert _order([old, new]) == [earlier, later]


def test_an_earlier_statement_never_moves_above_a_later_one() -> None:
    new, old = _fact("[Maya] lives in [Toronto].", 30), _fact("[Maya] moved to [Vancouver].", 0)
    assert _order([new, old]) == [new.text, old.text]


def test_the_latest_fact_stating_the_asked_attribute_of_the_asked_person_comes_first() -> None:
    facts = [
        _fact("[Maya] has a beagle named [Pepper].", 0),
        _fact("[Maya's sister] [Ana] works as a nurse.", 40),
        _fact("[Maya] works as a pharmacist.", 10),
        _fact("[Maya] works as a teacher.", 30),
    ]
    order = _order(facts, "What does Maya do for work?")
    assert order[0] == "[Maya] works as a teacher."


@pytest.mark.parametrize(
    ("question", "now"),
    [
        ("Where does Maya live?", True),
        ("What car does Lucia drive?", True),
        ("Where did Maya live before?", False),
        ("What was Maya's first job?", False),
        ("Where did Maya live in 2022?", False),
    ],
)
def test_only_questions_about_now(question: str, now: bool) -> None:
    assert asks_now(question) is now


@pytest.mark.parametrize(
    ("question", "attribute"),
    [
        ("Where does Maya live?", "residence"),
        ("Who does Fatima work for?", "employer"),
        ("What is Sofia's job?", "occupation"),
        ("Who is Jonas dating?", "partner"),
        ("What diet is Kenji on?", "diet"),
        ("What car does Lucia drive?", "car"),
        ("What phone does Priya have?", "phone"),
        ("What is the name of Maya's dog?", None),
    ],
)
def test_the_attribute_a_question_asks_for(question: str, attribute: str | None) -> None:
    asked = asked_attributes(question)
    assert (asked[0] if asked else None) == attribute


def test_the_attributes_words_stand_in_for_a_claim_the_patterns_do_not_read() -> None:
    facts = [
        _fact("[Ethan] is a barista at [Fernhill Coffee].", 0),
        _fact("[Ethan]'s sister [Mia] loves her new job at [Google].", 40),
        _fact("[Ethan] is loving the new job at [Cascade Robotics], no more early shifts.", 30),
        _fact("[Ethan] might take a job in [Seattle] one day.", 50),
    ]
    assert _order(facts, "Where does Ethan work?")[0] == facts[2].text
