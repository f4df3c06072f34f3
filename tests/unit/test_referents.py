"""Third-person pronouns of an introduced relative are resolved by the offline extractor."""

from __future__ import annotations

from membrain.api.models import Message
from membrain.extraction import OfflineExtractor
from membrain.extraction.referents import Referents


def _facts(*texts: str) -> list[str]:
    messages = [
        Message(id=f"m{i}", speaker="Lena", text=t, timestamp=f"2024-05-02T10:0{i}:00Z")
        for i, t in enumerate(texts)
    ]
    return [f.text for f in OfflineExtractor().extract(messages, [], ["Lena", "Assistant"]).facts]


def test_he_and_she_stand_for_the_latest_relative_of_that_gender() -> None:
    facts = _facts(
        "My brother Tomas is a baker in Graz.",
        "My sister Eva studies law.",
        "He moved to Linz last month and she's visiting him.",
    )
    assert "[Tomas] moved to [Linz]" in facts[-1]
    assert "[Eva]'s visiting" in facts[-1]


def test_his_becomes_the_relatives_possessive_and_her_is_left_alone() -> None:
    people = Referents()
    people.resolve("Our son Milo and our daughter Ada are home.")
    assert people.resolve("His band plays tonight.") == "[Milo]'s band plays tonight."
    assert people.resolve("I drove her to school.") == "I drove her to school."


def test_a_pronoun_with_no_introduced_relative_of_its_gender_stays() -> None:
    people = Referents()
    people.resolve("My colleague Sam is great.")
    people.resolve("My mum Rosa called.")
    assert people.resolve("He left early.") == "He left early."
    assert people.resolve("She left early.") == "[Rosa] left early."
