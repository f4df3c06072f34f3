"""A user-assistant chat, as a new user meets the default memory: facts, not chatter; now first."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from membrain import Memory, Message, Role, Scope
from membrain.api.models import FactStatus
from membrain.temporal import plain_text

SCOPE = Scope(dataset="maya", task="assistant")
SESSIONS: tuple[tuple[str, ...], ...] = (
    (
        "Hi! I'm Maya. I live in Toronto and I work as a nurse at Mount Sinai.",
        "Nice to meet you, Maya! That must be demanding. What do you do to unwind?",
        "I walk my dog Biscuit every evening, he's a beagle.",
        "Biscuit sounds adorable. Do you have any trips planned?",
        "We are planning a trip to Japan in May.",
        "You two will have fun. Let me know if you need packing tips!",
        "Thanks, will do.",
    ),
    (
        "Long time no see.",
        "Welcome back! How have you been?",
        "Big news: we just moved to Vancouver! I work as a pharmacist at London Drugs now.",
        "Wow, congrats on the move! What do you do for work these days?",
        "Pretty well. Biscuit loves the beach here.",
        "That's lovely. Your hard work paid off.",
        "Also the Japan trip is postponed to October because of the move.",
    ),
)
QUESTIONS = {
    "Where does Maya live?": "Vancouver",
    "Where does Maya work?": "London Drugs",
    "When is Maya's trip to Japan?": "October",
}
_UNRESOLVED = re.compile(r"\b(?:I|I'm|me|my|we|We|our|you|You|your|Your)\b")


@pytest.fixture
def chat(memory: Memory) -> Memory:
    start = datetime(2024, 1, 8, 18, 0, tzinfo=UTC)
    for day, session in zip((0, 60), SESSIONS, strict=True):
        messages = [
            Message(
                speaker="Maya" if i % 2 == 0 else "Assistant",
                role=Role.USER if i % 2 == 0 else Role.ASSISTANT,
                text=text,
                timestamp=start + timedelta(days=day, minutes=i),
            )
            for i, text in enumerate(session)
        ]
        memory.add(messages, scope=SCOPE)
    return memory


@pytest.mark.parametrize("mode", ["fast", "expand", "deep"])
def test_the_current_belief_comes_first_and_no_chatter_in_the_top_three(
    chat: Memory, mode: str
) -> None:
    assistant = {m.id for m in chat.messages(scope=SCOPE) if m.message.role is Role.ASSISTANT}
    for question, current in QUESTIONS.items():
        hits = chat.search(question, scope=SCOPE, mode=mode, k=3).hits
        assert current in hits[0].fact.text, (question, [h.fact.text for h in hits])
        for hit in hits:
            assert not set(hit.fact.sources) <= assistant, hit.fact.text
            assert not plain_text(hit.fact.text).endswith("?"), hit.fact.text


def test_chatter_is_evidence_not_facts_and_every_person_is_resolved(chat: Memory) -> None:
    facts = chat.facts(scope=SCOPE, include_inactive=True)
    texts = [plain_text(f.text) for f in facts]
    assert not [t for t in texts if _UNRESOLVED.search(t)]
    assert not [t for t in texts if t.endswith("?") or "Long time" in t or "congrats" in t]
    cited = {s for f in facts for s in f.sources}
    stored = chat.messages(scope=SCOPE)
    chatter = [m for m in stored if m.id not in cited]
    assert chatter and all(m.discarded for m in chatter)
    superseded = {plain_text(f.text) for f in facts if f.status is FactStatus.SUPERSEDED}
    assert "Maya lives in Toronto." in superseded
