"""Single-valued attributes read from fact texts, and which known facts a new one replaces."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membrain.extraction.attributes import ANY, SINGLE_VALUED, claims, replaced

EARLIER = datetime(2024, 1, 1, tzinfo=UTC)
LATER = datetime(2024, 6, 1, tzinfo=UTC)


def _read(text: str) -> set[tuple[str, str, str, bool]]:
    return {(c.subject, c.attribute, c.value, c.ends) for c in claims(text)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[Maya] lives in [Toronto].", ("maya", "residence", "toronto", False)),
        (
            "Big news: [Maya] and others just moved to [Vancouver]!",
            ("maya", "residence", "vancouver", False),
        ),
        (
            "[Jonas] and others live in a tiny flat in [Munich].",
            ("jonas", "residence", "munich", False),
        ),
        ("[Ravi] works at [Deloitte] as a consultant.", ("ravi", "employer", "deloitte", False)),
        ("[Tom] got hired as sous chef at [Lumen]!", ("tom", "occupation", "sous chef", False)),
        (
            "[Fatima] is a junior lawyer at [Clifford & Price].",
            ("fatima", "employer", "clifford & price", False),
        ),
        ("[Daniel] works as a pharmacist.", ("daniel", "occupation", "pharmacist", False)),
        ("[Maya's sister] [Ana] is a nurse.", ("ana", "occupation", "nurse", False)),
        ("[Priya] has started dating [Leo].", ("priya", "partner", "leo", False)),
        ("Nina and [Jonas] split up.", ("jonas", "partner", "nina", True)),
        ("[Kenji] quit keto, [Kenji] is vegan now.", ("kenji", "diet", "keto", True)),
        ("[Kenji] quit keto, [Kenji] is vegan now.", ("kenji", "diet", "vegan", False)),
        ("[Lucia] got a [Tesla Model] 3.", ("lucia", "car", "tesla model 3", False)),
        (
            "And [Daniel] sold the [Fiesta] and got a [Toyota Corolla].",
            ("daniel", "car", "toyota corolla", False),
        ),
        ("[Kenji] replaced the [Galaxy] with an iPhone 15.", ("kenji", "phone", "galaxy", True)),
        ("[Sofia] quit teaching.", ("sofia", "occupation", ANY, True)),
        ("[Niamh] has been living in [Cork] since uni.", ("niamh", "residence", "cork", False)),
        ("[Zofia] has moved down to [Wrocław].", ("zofia", "residence", "wrocław", False)),
        ("[Hannah] is no longer at [Southbank].", ("hannah", "employer", "southbank", True)),
        (
            "[Ethan] started at [Cascade Robotics] last week.",
            ("ethan", "employer", "cascade robotics", False),
        ),
        ("[Sam] and [Ethan] are together now.", ("ethan", "partner", "sam", False)),
        ("Claire and [Ethan] ended things.", ("ethan", "partner", "claire", True)),
        ("[Marcus] is single.", ("marcus", "partner", "single", False)),
        ("[Marcus] has got a girlfriend now, [Dana].", ("marcus", "partner", "dana", False)),
        ("[Camille] is a proper vegetarian now.", ("camille", "diet", "vegetarian", False)),
        ("[Niamh] traded her old [Golf] for a [Kia Niro].", ("niamh", "car", "kia niro", False)),
        (
            "[Marcus] is a dispatcher at [Midway Transit].",
            ("marcus", "employer", "midway transit", False),
        ),
        (
            "[Idris] shifted from [Lagos] to [Abuja] for the new role.",
            ("idris", "residence", "abuja", False),
        ),
        (
            "[Ines] and others finally made the move to [Porto].",
            ("ines", "residence", "porto", False),
        ),
        (
            "[Ines] and others settled into the new flat in [Braga].",
            ("ines", "residence", "braga", False),
        ),
        ("[Omar] has been poached by [Brightline].", ("omar", "employer", "brightline", False)),
        ("Guess what, [Northwind] head-hunted [Omar].", ("omar", "employer", "northwind", False)),
        ("[Omar]'s new job at [Quill].", ("omar", "employer", "quill", False)),
        ("[Omar] quit the bike shop.", ("omar", "employer", ANY, True)),
        ("[Pia] is freelancing now.", ("pia", "occupation", "freelancing", False)),
        ("The chef promoted [Pia] to sous chef.", ("pia", "occupation", "sous chef", False)),
        ("[Pia] upgraded to an [iPhone] 15.", ("pia", "phone", "iphone 15", False)),
        ("[Pia]'s new ride is a [Vespa] Primavera.", ("pia", "car", "vespa primavera", False)),
        ("[Rui] is eating meat again.", ("rui", "diet", "meat", False)),
        (
            "Um, [Rui] has been seeing someone, her name is [Bea].",
            ("rui", "partner", "bea", False),
        ),
        (
            "The van broke down, so [Rui] has gone and bought a used [Ford Transit].",
            ("rui", "car", "ford transit", False),
        ),
    ],
)
def test_what_a_fact_states(text: str, expected: tuple[str, str, str, bool]) -> None:
    assert expected in _read(text)
    assert {c.attribute for c in claims(text)} <= set(SINGLE_VALUED)


@pytest.mark.parametrize(
    "text",
    [
        "[Sara] might move to [Porto].",
        "[Sara] will move to [Porto] next year.",
        "If [Sara] moved to [Porto] she would be happy.",
        "[Sara] doesn't live in [Leeds] anymore.",
        "[Sara] is not vegan.",
        "[Sara] is thinking about switching to a [Pixel].",
        "Does [Sara] live in [Leeds]?",
        "[Sara]'s brother lives in [Leeds].",
        "[Sara] is training for the [Leeds] half marathon.",
        "[Sara] loves her dog [Rex].",
        "[Sara] is a member at [Equinox].",
        "[Sara] no longer lives in [Leeds].",
    ],
)
def test_no_claim_from_a_question_negation_hypothesis_or_other_subject(text: str) -> None:
    assert claims(text) == []


def test_a_month_named_may_is_no_hypothesis() -> None:
    assert ("sara", "residence", "porto", False) in _read(
        "In [May::2024-05], [Sara] moved to [Porto]."
    )


def test_a_new_value_replaces_the_old_one_of_the_same_subject_only() -> None:
    known = [
        ("toronto", "[Maya] lives in [Toronto].", EARLIER),
        ("ana", "[Ana] lives in [Ottawa].", EARLIER),
        ("dog", "[Maya] has a beagle named [Pepper].", EARLIER),
    ]
    found = replaced("[Maya] moved to [Vancouver].", LATER, known)
    assert found.certain == ("toronto",) and found.uncertain == ()


def test_a_restatement_or_a_later_fact_is_not_replaced() -> None:
    known = [
        ("same", "[Maya] lives in [Vancouver].", EARLIER),
        ("after", "[Maya] lives in [Toronto].", datetime(2025, 1, 1, tzinfo=UTC)),
    ]
    assert replaced("[Maya] moved to [Vancouver].", LATER, known).certain == ()


def test_shared_words_or_an_implied_value_are_uncertain() -> None:
    known = [("deloitte", "[Ravi] works at [Deloitte].", EARLIER)]
    found = replaced("[Ravi] works at [Deloitte Digital].", LATER, known)
    assert found.certain == () and found.uncertain == ("deloitte",)
    phone = [("nokia", "[Jonas] has a [Nokia].", EARLIER)]
    implied = replaced("[Jonas]'s [Pixel] 8 broke.", LATER, phone)
    assert implied.certain == () and implied.uncertain == ("nokia",)


def test_an_end_replaces_only_the_value_it_ends() -> None:
    known = [
        ("keto", "[Kenji] has been doing keto.", EARLIER),
        ("audi", "[Ravi] drives an [Audi].", EARLIER),
    ]
    assert replaced("[Kenji] quit keto.", LATER, known).certain == ("keto",)
    assert replaced("[Ravi] sold the [Volvo].", LATER, known).certain == ()
    assert replaced("[Ravi] sold the [Audi].", LATER, known).certain == ("audi",)


def test_a_verb_joined_by_and_takes_the_nearest_subject_not_a_pronoun() -> None:
    read = _read("It broke down again, so [Rui] has gone and bought a [Kia] Ceed.")
    assert read == {("rui", "car", "kia ceed", False)}
