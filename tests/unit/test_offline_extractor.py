from __future__ import annotations

import pytest

from membrain.api.models import Message
from membrain.extraction import OfflineExtractor, entity_refs

PARTICIPANTS = ["Sara", "Nate"]


def _facts(text: str, speaker: str = "Sara", **extra: str) -> list[str]:
    message = Message(id="m", speaker=speaker, text=text, timestamp="2024-03-15T14:01:00Z", **extra)
    return [f.text for f in OfflineExtractor().extract([message], [], PARTICIPANTS).facts]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I love pottery.", "[Sara] loves pottery."),
        ("My cat sleeps a lot.", "[Sara's cat] sleeps a lot."),
        ("My garden is full of tulips.", "[Sara]'s garden is full of tulips."),
        ("My mom visited me.", "[Sara's mom] visited [Sara]."),
        ("Do you still bake at your bakery?", "Do [Nate] still bake at [Nate]'s bakery?"),
        ("You're a great baker.", "[Nate] is a great baker."),
        ("I saw Taylor Swift in Paris.", "[Sara] saw [Taylor Swift] in [Paris]."),
        ("We joined the LGBTQ center.", "[Sara] and others joined the [LGBTQ] center."),
        ("You two met in Rome.", "[Nate] and a companion met in [Rome]."),
    ],
)
def test_rewrites_persons_and_brackets_names(text: str, expected: str) -> None:
    assert _facts(text) == [expected]


def test_second_person_needs_a_two_party_chat() -> None:
    message = Message(
        id="m", speaker="Sara", text="You cook well.", timestamp="2024-03-15T14:01:00Z"
    )
    group = OfflineExtractor().extract([message], [], ["Sara", "Nate", "Lina"]).facts
    assert group[0].text == "You cook well."
    addressed = message.model_copy(update={"addressee": "Lina"})
    assert OfflineExtractor().extract([addressed], [], ["Sara", "Nate", "Lina"]).facts[0].text == (
        "[Lina] cooks well."
    )


def test_greetings_and_reactions_are_discarded_with_a_reason() -> None:
    message = Message(
        id="m",
        speaker="Nate",
        text="Hey Sara! Wow, that's awesome! I opened a second bakery in Porto.",
        timestamp="2024-03-15T14:01:00Z",
    )
    batch = OfflineExtractor().extract([message], [], PARTICIPANTS)
    assert [f.text for f in batch.facts] == ["[Nate] opened a second bakery in [Porto]."]
    assert [d.text for d in batch.discarded] == ["Hey Sara!", "Wow, that's awesome!"]
    assert all(d.reason and d.message_id == "m" for d in batch.discarded)


def test_caption_is_evidence_and_long_messages_split() -> None:
    facts = _facts(
        "I fly kites. I built one from bamboo. I painted it red. I fly it on the beach.",
        caption="a photo of a red kite",
    )
    assert len(facts) == 2
    assert facts[-1].endswith("[Sara] shared an image: a photo of a red kite.")


def test_every_fact_cites_its_message_and_time() -> None:
    messages = [
        Message(id=f"m{i}", speaker=s, text=t, timestamp=f"2024-03-15T14:0{i}:00Z")
        for i, (s, t) in enumerate([("Sara", "I run marathons."), ("Nate", "I bake bread daily.")])
    ]
    facts = OfflineExtractor().extract(messages, [], PARTICIPANTS).facts
    assert [f.sources for f in facts] == [("m0",), ("m1",)]
    assert [f.stated_at for f in facts] == [m.timestamp for m in messages]


def test_entity_refs_skip_time_annotations() -> None:
    text = "[Sara] booked a [wedding shoot] for [June::2024-06] with [Sara's mom]."
    assert entity_refs(text) == ["Sara", "wedding shoot", "Sara's mom"]


def test_system_messages_are_not_evidence() -> None:
    message = Message(
        id="s",
        speaker="system",
        role="system",
        text="You are Kurisu.",
        timestamp="2024-03-15T14:01:00Z",
    )
    batch = OfflineExtractor().extract([message], [], PARTICIPANTS)
    assert batch.facts == []
    assert [d.reason for d in batch.discarded] == ["system message, not evidence"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I'm a photographer and I've got two cameras.",
            ["[Sara] is a photographer.", "[Sara] has got two cameras."],
        ),
        (
            "I live in Leeds and I work as a pharmacist, and the shifts are wearing me out.",
            [
                "[Sara] lives in [Leeds].",
                "[Sara] works as a pharmacist, and the shifts are wearing [Sara] out.",
            ],
        ),
        (
            "I live in Lisbon and work as a teacher.",
            ["[Sara] lives in [Lisbon].", "[Sara] works as a teacher."],
        ),
        ("I sold the car and got a bike.", ["[Sara] sold the car and got a bike."]),
    ],
)
def test_coordinated_first_person_clauses_are_separate_facts(
    text: str, expected: list[str]
) -> None:
    message = Message(id="m", speaker="Sara", text=text, timestamp="2024-03-15T14:01:00Z")
    facts = OfflineExtractor().extract([message], [], PARTICIPANTS).facts
    assert [f.text for f in facts] == expected
    assert all(f.sources == ("m",) for f in facts)
