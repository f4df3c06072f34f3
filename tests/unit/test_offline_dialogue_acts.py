from __future__ import annotations

import pytest

from membrain.api.models import Message, Role
from membrain.extraction import OfflineExtractor
from membrain.extraction.base import ExtractionBatch

AGENT_CHAT = ["Maya", "Assistant"]


def _batch(
    text: str, speaker: str = "Maya", participants: list[str] = AGENT_CHAT
) -> ExtractionBatch:
    role = Role.ASSISTANT if speaker == "Assistant" else Role.USER
    message = Message(
        id="m", speaker=speaker, text=text, timestamp="2024-03-15T14:01:00Z", role=role
    )
    before = Message(id="u", speaker="Maya", text="Hi.", timestamp="2024-03-15T14:00:00Z")
    context = [before] if speaker == "Assistant" else []
    return OfflineExtractor().extract([message], context, participants)


@pytest.mark.parametrize(
    ("speaker", "text"),
    [
        ("Assistant", "What do you do for work?"),
        ("Assistant", "How was the trip?"),
        ("Maya", "Could you remind me to call the vet?"),
        ("Assistant", "Tell me more!"),
        ("Maya", "Long time no see."),
        ("Assistant", "Good morning!"),
        ("Maya", "Thanks for all the help with the move!"),
        ("Maya", "Haha ok"),
        ("Maya", "I see."),
        ("Maya", "Got it"),
        ("Maya", "Will do, thx"),
        ("Maya", "Lol only if they behave."),
        ("Maya", "Hope you're keeping well."),
        ("Maya", "Salut, it's Maya."),
        ("Maya", "Coucou!"),
        ("Maya", "Merci!"),
        ("Maya", "Haha, he's fine."),
        ("Assistant", "That must be demanding."),
        ("Assistant", "Wow, congrats on the move!"),
        ("Assistant", "Biscuit sounds adorable."),
        ("Assistant", "You two will have fun."),
        ("Assistant", "Planta on Queen West is a great vegetarian spot."),
        ("Maya", "Should I tell my boss I'm moving to Vancouver?"),
        ("Maya", "I've got some big news!"),
        ("Maya", "I'd like some advice about running shoes."),
        ("Maya", "I hope I'm not bothering you."),
    ],
)
def test_chatter_is_discarded_with_a_reason(speaker: str, text: str) -> None:
    batch = _batch(text, speaker)
    assert batch.facts == []
    assert batch.discarded
    assert all(d.reason and d.message_id == "m" for d in batch.discarded)


@pytest.mark.parametrize("text", ["Austin!", "Chess.", "Rough month."])
def test_a_short_answer_is_kept_it_may_be_what_was_asked(text: str) -> None:
    assert len(_batch(text).facts) == 1


def test_a_mixed_turn_keeps_only_its_content() -> None:
    batch = _batch("Pretty well. Pepper loves the beach.")
    assert [f.text for f in batch.facts] == ["Pepper loves the beach."]
    assert [(d.reason, d.text) for d in batch.discarded] == [("backchannel", "Pretty well.")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Wow, I finally got the job at Shopify!", "Wow, [Maya] finally got the job at [Shopify]!"),
        ("Thanks! I'm allergic to peanuts.", "[Maya] is allergic to peanuts."),
        (
            "Also I'm lactose intolerant, any tips for calcium?",
            "Also [Maya] is lactose intolerant.",
        ),
        ("That's where I met Leo.", "That's where [Maya] met [Leo]."),
    ],
)
def test_content_after_a_reaction_stays(text: str, expected: str) -> None:
    assert [f.text for f in _batch(text).facts] == [expected]


def test_assistant_restatements_about_the_user_stay() -> None:
    batch = _batch(
        "Hi Maya! You mentioned your sister Ana is a nurse. Did her visit go well?", "Assistant"
    )
    assert [f.text for f in batch.facts] == ["[Maya's sister] [Ana] is a nurse."]
    assert {d.reason for d in batch.discarded} >= {"question"}


@pytest.mark.parametrize(
    "text",
    [
        "Your hard work paid off.",
        "Good that you're prepared.",
        "Lentils and tofu will be your new best friends.",
        "Salsa is fantastic exercise, and you'll be dancing at weddings in no time.",
        "A band with your twin, how cool is that!",
        "Good to know, I'll keep that in mind for restaurant ideas.",
        "I can help you find allergists near your new neighborhood once you know it.",
        "I'm glad you sound happy.",
        "I love that.",
    ],
)
def test_an_assistants_own_words_are_discarded(text: str) -> None:
    batch = _batch(text, "Assistant")
    assert batch.facts == []
    assert [d.reason for d in batch.discarded] == [
        "the assistant's own words, not something the user stated"
    ]


def test_an_assistant_keeps_the_actions_it_reports() -> None:
    batch = _batch("Done! I booked a table at Nopa for tomorrow.", "Assistant")
    assert [f.text for f in batch.facts] == [
        "[Assistant] booked a table at [Nopa] for [tomorrow::2024-03-16]."
    ]


def test_a_persona_keeps_what_it_states_about_itself() -> None:
    persona = ["Maya", "Aria"]
    said = "I grew up in Kyoto. I'm glad you asked."
    message = Message(
        id="m", speaker="Aria", text=said, timestamp="2024-03-15T14:01:00Z", role=Role.ASSISTANT
    )
    before = Message(id="u", speaker="Maya", text="Hi.", timestamp="2024-03-15T14:00:00Z")
    batch = OfflineExtractor().extract([message], [before], persona)
    assert [f.text for f in batch.facts] == ["[Aria] grew up in [Kyoto]."]


def test_questions_between_named_people_stay_facts() -> None:
    batch = _batch("Did you adopt Biscuit last year?", "Sara", ["Sara", "Nate"])
    assert [f.text for f in batch.facts] == ["Did [Nate] adopt [Biscuit] [last year::2023]?"]


def test_an_assistant_in_the_context_makes_an_agent_chat() -> None:
    context = Message(
        id="c", speaker="Bot", text="Hello!", timestamp="2024-03-15T14:00:00Z", role=Role.ASSISTANT
    )
    message = Message(id="m", speaker="Maya", text="How was your day?", timestamp=context.timestamp)
    batch = OfflineExtractor().extract([message], [context], ["Maya", "Bot"])
    assert batch.facts == []
    assert [d.reason for d in batch.discarded] == ["question"]


def test_reactions_between_named_people_stay_facts() -> None:
    batch = _batch("That photo is stunning!", "Sara", ["Sara", "Nate"])
    assert [f.text for f in batch.facts] == ["That photo is stunning!"]


def test_an_assistant_note_alone_is_kept() -> None:
    note = Message(
        id="n",
        speaker="Assistant",
        role=Role.ASSISTANT,
        text="Maya's favourite colour is teal.",
        timestamp="2024-03-15T14:01:00Z",
    )
    facts = OfflineExtractor().extract([note], [], ["Assistant"]).facts
    assert [f.text for f in facts] == ["Maya's favourite colour is teal."]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Slowly. Maya finished the first chapter.", "[Maya] finished the first chapter."),
        ("Freezing, but good. Maya got a new coat.", "[Maya] got a new coat."),
        ("Not yet, soon. Maya booked the movers.", "[Maya] booked the movers."),
    ],
)
def test_a_short_reply_before_the_content_of_a_turn_is_chatter(text: str, kept: str) -> None:
    batch = _batch(text)
    assert [f.text for f in batch.facts] == [kept]
    assert [d.reason for d in batch.discarded] == ["short reply before content"]


@pytest.mark.parametrize(
    "text",
    [
        "Slowly.",
        "Chess. Maya plays every Sunday.",
        "I need help moving to Leeds next week.",
        "I have news about my sister Ana.",
    ],
)
def test_a_short_reply_alone_or_naming_something_is_kept(text: str) -> None:
    batch = _batch(text)
    assert batch.facts
    assert "short reply before content" not in [d.reason for d in batch.discarded]
