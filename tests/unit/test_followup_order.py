"""The answer follow-up places the reply that came next in time, however many turns follow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from membrain import Memory, Message, Scope

SCOPE = Scope(dataset="nate", task="bench")


def test_the_reply_is_the_next_turn_even_when_many_follow_within_the_window(
    memory: Memory,
) -> None:
    start = datetime(2023, 5, 1, 10, 0, tzinfo=UTC)
    turns = [
        ("Joanna", "What did you cook for the party on Saturday, Nate?"),
        ("Nate", "I made a spicy pumpkin lasagna with sage."),
        *(
            ("Joanna" if i % 2 else "Nate", f"Chapter {i} of the novel draft has {i} pages now.")
            for i in range(2, 62)
        ),
    ]
    memory.add(
        [
            Message(speaker=s, text=t, timestamp=start + timedelta(seconds=i))
            for i, (s, t) in enumerate(turns)
        ],
        scope=SCOPE,
    )
    for mode in ("expand", "deep"):
        hits = memory.search("What did Nate cook for the party?", scope=SCOPE, mode=mode, k=5)
        replies = [h.fact.text for h in hits if "answers" in h.paths]
        assert replies and all("lasagna" in r for r in replies), (mode, replies)
