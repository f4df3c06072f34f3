from __future__ import annotations

from membrain.api.indexing import (
    fact_dense_text,
    fact_sparse_text,
    message_text,
    question_dense_text,
)
from membrain.api.models import Message

FACT = (
    "[Caroline] is keen on counseling and [Caroline] would love to help [Caroline]'s friends "
    "and [Caroline's mom] with [Melanie] [yesterday::2023-05-07]."
)


def test_sparse_text_names_each_entity_once() -> None:
    assert fact_sparse_text(FACT) == (
        "Caroline is keen on counseling and they would love to help their friends "
        "and Caroline's mom with Melanie yesterday."
    )


def test_dense_text_neutralises_participants_only() -> None:
    assert fact_dense_text(FACT, ["Caroline"]) == (
        "they is keen on counseling and they would love to help their friends "
        "and their mom with Melanie yesterday."
    )
    assert fact_dense_text("[Miso] sleeps.", ["Caroline"]) == "Miso sleeps."


def test_question_dense_text_matches_the_fact_view() -> None:
    assert (
        question_dense_text("What did caroline's mom and Caroline paint?", ["Caroline", "Mel"])
        == "What did their mom and they paint?"
    )
    assert question_dense_text("Did Carolina call?", ["Caroline"]) == "Did Carolina call?"
    assert question_dense_text("Anything?", []) == "Anything?"


def test_message_text_carries_speaker_and_caption() -> None:
    message = Message(
        speaker="Sara", text="Look!", caption="a cat", timestamp="2024-01-01T00:00:00Z"
    )
    assert message_text(message) == "Sara: Look! [image: a cat]"
