"""Offline facts name every person: no first- or second-person word is left, verbs agree."""

from __future__ import annotations

import pytest

from membrain.api.models import Message
from membrain.extraction import OfflineExtractor


def _facts(*texts: str, speaker: str = "Lucia") -> list[str]:
    messages = [
        Message(id=f"m{i}", speaker=speaker, text=t, timestamp="2024-03-15T14:01:00Z")
        for i, t in enumerate(texts)
    ]
    return [f.text for f in OfflineExtractor().extract(messages, [], [speaker, "Nate"]).facts]


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        (
            "We live in Seattle with our daughter Ines.",
            "[Lucia] and others live in [Seattle] with [Lucia's daughter] [Ines].",
        ),
        ("Nobody ever helps us.", "Nobody ever helps [Lucia] and others."),
        ("The blue house is ours.", "The blue house is [Lucia]'s."),
        ("I walk my dog every evening.", "[Lucia] walks [Lucia's dog] every evening."),
        ("I also carry an inhaler.", "[Lucia] also carries an inhaler."),
        ("I can swim.", "[Lucia] can swim."),
        ("I got a job.", "[Lucia] got a job."),
    ],
)
def test_persons_are_resolved_and_verbs_agree(said: str, fact: str) -> None:
    assert _facts(said) == [fact]


def test_a_name_used_inside_a_sentence_is_bracketed_where_it_opens_one() -> None:
    facts = _facts("I have a beagle named Pepper.", "Pepper loves the beach.")
    assert facts[-1] == "[Pepper] loves the beach."


def test_leading_words_are_not_part_of_a_name() -> None:
    assert _facts("Also the Lisbon conference got cancelled.") == [
        "Also the [Lisbon] conference got cancelled."
    ]


def test_a_name_coordinated_with_a_person_is_bracketed() -> None:
    assert _facts("Arjun and I broke up.") == ["[Arjun] and [Lucia] broke up."]


def test_a_name_the_batch_used_is_still_content() -> None:
    facts = _facts("Guess who I met at the premiere?", "It's Shia Labeouf!", speaker="Gina")
    assert facts[-1] == "It's [Shia Labeouf]!"


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        ("You all did great at the Lima race.", "[Nate] all did great at the [Lima] race."),
        ("I so want to visit Lima.", "[Lucia] so wants to visit [Lima]."),
    ],
)
def test_a_word_that_is_no_verb_is_not_conjugated_nor_an_adverb_in_the_way(
    said: str, fact: str
) -> None:
    assert _facts(said) == [fact]
