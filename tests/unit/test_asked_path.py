"""A question kept only as evidence (no fact) still leads expand and deep to its reply."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from membrain import Memory, Message, Role, Scope

SCOPE = Scope(dataset="maya", task="assistant")
TURNS = (
    ("Maya", "Guess what, we are moving next month!"),
    ("Assistant", "Exciting! Which city are you moving to?"),
    ("Maya", "Austin!"),
    ("Assistant", "Great choice."),
    ("Maya", "I also adopted a kitten called Mochi."),
)


@pytest.fixture
def chat(memory: Memory) -> Memory:
    start = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    memory.add(
        [
            Message(
                speaker=speaker,
                text=text,
                role=Role.ASSISTANT if speaker == "Assistant" else Role.USER,
                timestamp=start + timedelta(minutes=i),
            )
            for i, (speaker, text) in enumerate(TURNS)
        ],
        scope=SCOPE,
    )
    return memory


def test_the_assistants_question_is_evidence_not_a_fact(chat: Memory) -> None:
    texts = [f.text for f in chat.facts(scope=SCOPE)]
    assert "[Austin]!" in texts or "Austin!" in texts
    assert not [t for t in texts if "?" in t]


@pytest.mark.parametrize("mode", ["expand", "deep"])
def test_the_reply_to_the_matching_question_is_found(chat: Memory, mode: str) -> None:
    hits = chat.search("Which city is Maya moving to?", scope=SCOPE, mode=mode, k=3).hits
    austin = [h for h in hits if "Austin" in h.fact.text]
    assert austin and "asked" in austin[0].paths


def test_fast_mode_runs_no_message_search(chat: Memory) -> None:
    result = chat.search("Which city is Maya moving to?", scope=SCOPE, mode="fast", k=3)
    assert "asked" not in result.paths
