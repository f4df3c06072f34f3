from __future__ import annotations

from membrain import Memory, Scope

CHAT = [
    {
        "speaker": "Nate",
        "text": "Which instrument do you play in the orchestra?",
        "timestamp": "2024-03-15T14:00:00Z",
        "id": "q",
    },
    {
        "speaker": "Sara",
        "text": "The cello, since childhood.",
        "timestamp": "2024-03-15T14:00:30Z",
        "id": "a",
    },
    {
        "speaker": "Nate",
        "text": "I bake sourdough bread every Tuesday.",
        "timestamp": "2024-03-15T14:01:00Z",
        "id": "b",
    },
    {
        "speaker": "Nate",
        "text": "Nice! What is your cat called? Cats are the best company.",
        "timestamp": "2024-03-15T16:00:00Z",
        "id": "mid",
    },
    {
        "speaker": "Sara",
        "text": "Miso, a grey tabby.",
        "timestamp": "2024-03-15T16:00:20Z",
        "id": "miso",
    },
    {
        "speaker": "Sara",
        "text": "Which instrument is the loudest?",
        "timestamp": "2024-03-15T18:00:00Z",
        "id": "late",
    },
]


def test_a_retrieved_question_brings_its_answer(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    question = "Which instrument does Sara play in the orchestra?"
    fast = memory.search(question, scope=scope, mode="fast", k=2)
    assert fast[0].sources[0].source_id == "q"
    assert "a" not in [h.sources[0].source_id for h in fast]  # the reply shares no word
    hits = memory.search(question, scope=scope, mode="expand", k=2)
    assert [h.sources[0].source_id for h in hits] == ["q", "a"]
    assert hits[1].paths.get("answers") == 1 and hits[1].score == hits[0].score
    off = memory.search(question, scope=scope, mode="expand", k=2, exclude_paths=("answers",))
    assert "a" not in [h.sources[0].source_id for h in off]


def test_only_the_next_message_within_the_window_answers(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    hits = memory.search("Which instrument is the loudest?", scope=scope, mode="expand", k=3)
    assert hits[0].sources[0].source_id == "late"
    # nothing follows it within the hour: no reply is invented
    assert all("answers" not in h.paths or h.paths["answers"] != 1 for h in hits)


def test_a_question_inside_a_fact_brings_its_answer(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    hits = memory.search("What is Sara's cat called?", scope=scope, mode="expand", k=2)
    assert [h.sources[0].source_id for h in hits] == ["mid", "miso"]
    assert hits[1].paths.get("answers") == 1
