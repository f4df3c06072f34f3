from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membrain.api.errors import InputError
from membrain.extraction.character import (
    PERSONA_STYLE_PROMPT,
    CharacterResponse,
    Layer,
    Segment,
    layer_statements,
    parse_response,
    persona_prompt,
    said_text,
)

D, A, T = Layer.DIALOGUE, Layer.ACTION, Layer.THOUGHT

SPEC_TENSE = "Sure, whatever. *starts typing then deletes it* （Why did I say that.）"
SPEC_CASUAL = "*sips coffee* Morning~"

# (input, [(layer, text, start, end), ...])
PARSE_CASES: list[tuple[str, list[tuple[Layer, str, int, int]]]] = [
    # the two SPEC §7 examples
    (
        SPEC_TENSE,
        [
            (D, "Sure, whatever.", 0, 15),
            (A, "starts typing then deletes it", 16, 47),
            (T, "Why did I say that.", 48, 69),
        ],
    ),
    (SPEC_CASUAL, [(A, "sips coffee", 0, 13), (D, "Morning~", 14, 22)]),
    # plain text, empty, blank
    ("Just talking here.", [(D, "Just talking here.", 0, 18)]),
    ("", []),
    ("  \n\t ", []),
    ("  padded  ", [(D, "padded", 2, 8)]),
    # **bold** is emphasis inside dialogue, kept verbatim, not an action
    ("That is **so** cool", [(D, "That is **so** cool", 0, 19)]),
    ("**bold** *nods*", [(D, "**bold**", 0, 8), (A, "nods", 9, 15)]),
    ("***", [(D, "***", 0, 3)]),
    # lone or unclosed asterisks stay dialogue
    ("I give it 5* honestly", [(D, "I give it 5* honestly", 0, 21)]),
    ("*", [(D, "*", 0, 1)]),
    ("*waves hello", [(D, "*waves hello", 0, 12)]),
    ("well *huh", [(D, "well *huh", 0, 9)]),
    # asterisks that are not flanking, or intraword, are not markers
    ("5 * 3 * 2", [(D, "5 * 3 * 2", 0, 9)]),
    ("2*3*4", [(D, "2*3*4", 0, 5)]),
    ("*nods *", [(D, "*nods *", 0, 7)]),
    # an action never spans a line break
    ("*starts\nover*", [(D, "*starts\nover*", 0, 13)]),
    # ASCII parentheses are ordinary dialogue; only full-width ones are thoughts
    ("That was close (lol)", [(D, "That was close (lol)", 0, 20)]),
    (
        "Fine (not fine) （not fine at all）",
        [(D, "Fine (not fine)", 0, 15), (T, "not fine at all", 16, 33)],
    ),
    # unclosed full-width parenthesis stays dialogue
    ("Hmm （wait", [(D, "Hmm （wait", 0, 9)]),
    ("（a（b）", [(D, "（a", 0, 2), (T, "b", 2, 5)]),
    # nested markers: the outer layer wins and the inner text is kept
    ("（*sigh* why）", [(T, "*sigh* why", 0, 12)]),
    ("（outer （inner） tail）", [(T, "outer （inner） tail", 0, 20)]),
    ("*looks away （ugh）*", [(A, "looks away （ugh）", 0, 18)]),
    # thoughts may span lines and are stripped
    ("（ one\ntwo ）", [(T, "one\ntwo", 0, 11)]),
    # empty markers are dropped
    ("a ** b", [(D, "a", 0, 1), (D, "b", 5, 6)]),
    ("**", []),
    ("（）", []),
    ("Hi （  ） there", [(D, "Hi", 0, 2), (D, "there", 8, 13)]),
    ("ok **（hm）", [(D, "ok", 0, 2), (T, "hm", 5, 9)]),
    # multiple segments of each kind, with whitespace and newlines between them
    (
        "*blinks* What?\n\n*leans in* （He noticed.） Say that again. （Please don't.）",
        [
            (A, "blinks", 0, 8),
            (D, "What?", 9, 14),
            (A, "leans in", 16, 26),
            (T, "He noticed.", 27, 40),
            (D, "Say that again.", 41, 56),
            (T, "Please don't.", 57, 72),
        ],
    ),
    # adjacent markers with no whitespace between them
    ("*nods**smiles*", [(A, "nods", 0, 6), (A, "smiles", 6, 14)]),
    ("*shrugs*（whatever）ok", [(A, "shrugs", 0, 8), (T, "whatever", 8, 18), (D, "ok", 18, 20)]),
    # an action in the middle of a sentence
    (
        "I think *pauses* you're right.",
        [(D, "I think", 0, 7), (A, "pauses", 8, 16), (D, "you're right.", 17, 30)],
    ),
    # CJK text attached to markers
    ("你好*点头*（好累）", [(D, "你好", 0, 2), (A, "点头", 2, 6), (T, "好累", 6, 10)]),
]


@pytest.mark.parametrize(
    ("text", "expected"), PARSE_CASES, ids=[c[0] or "<empty>" for c in PARSE_CASES]
)
def test_parse_response_exact_segments(
    text: str, expected: list[tuple[Layer, str, int, int]]
) -> None:
    response = parse_response(text)
    assert response.segments == tuple(Segment(*item) for item in expected)


@pytest.mark.parametrize(
    ("text", "expected"), PARSE_CASES, ids=[c[0] or "<empty>" for c in PARSE_CASES]
)
def test_offsets_point_at_the_source(
    text: str, expected: list[tuple[Layer, str, int, int]]
) -> None:
    for segment in parse_response(text).segments:
        source = text[segment.start : segment.end]
        if segment.layer is Layer.DIALOGUE:
            assert source == segment.text
        elif segment.layer is Layer.ACTION:
            assert source == f"*{segment.text}*"
        else:
            assert source[0] == "（" and source[-1] == "）"
            assert source[1:-1].strip() == segment.text


def test_response_properties_on_spec_example() -> None:
    response = parse_response(SPEC_TENSE)
    assert response.dialogue == "Sure, whatever."
    assert response.actions == ("starts typing then deletes it",)
    assert response.thoughts == ("Why did I say that.",)
    assert response.has_markup is True


def test_dialogue_joins_pieces_and_normalises_whitespace() -> None:
    response = parse_response("I  think\n*pauses*   you're\n\nright. *nods* Yes , really")
    assert response.dialogue == "I think you're right. Yes , really"
    assert response.actions == ("pauses", "nods")
    assert response.thoughts == ()


def test_dialogue_attaches_leading_punctuation() -> None:
    assert parse_response("Hello *waves*, friend *grins*!").dialogue == "Hello, friend!"


def test_has_markup_false_for_plain_and_bold_text() -> None:
    assert parse_response("Just (plain) **text**").has_markup is False
    assert parse_response("a ** b （）").has_markup is False
    assert parse_response("").has_markup is False
    assert parse_response("*nods*").has_markup is True
    assert parse_response("（hm）").has_markup is True


def test_response_is_frozen() -> None:
    response = parse_response("hi")
    with pytest.raises(AttributeError):
        response.segments = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        response.segments[0].text = "bye"  # type: ignore[misc]


# --------------------------------------------------------------------------- said_text


def test_said_text_excludes_actions_and_thoughts() -> None:
    assert said_text(SPEC_TENSE) == "Sure, whatever."
    assert said_text(SPEC_CASUAL) == "Morning~"
    said = said_text("*leans in* I'm fine. （I am not fine.） Really. *looks away*")
    assert said == "I'm fine. Really."
    assert "not fine" not in said and "leans" not in said and "looks" not in said


def test_said_text_is_empty_when_nothing_is_said() -> None:
    assert said_text("*sighs* （Again?）") == ""


def test_said_text_keeps_ascii_parentheses() -> None:
    assert said_text("That was close (lol) *laughs*") == "That was close (lol)"


# --------------------------------------------------------------------------- layer_statements


def test_layer_statements_spec_example() -> None:
    assert layer_statements("Kurisu", parse_response(SPEC_TENSE)) == [
        (Layer.DIALOGUE, "Sure, whatever."),
        (Layer.ACTION, "[Kurisu] starts typing then deletes it."),
        (Layer.THOUGHT, '[Kurisu] privately thought: "Why did I say that."'),
    ]


def test_layer_statements_casual_example() -> None:
    assert layer_statements("Kurisu", parse_response(SPEC_CASUAL)) == [
        (Layer.DIALOGUE, "Morning~"),
        (Layer.ACTION, "[Kurisu] sips coffee."),
    ]


@pytest.mark.parametrize(
    ("action", "statement"),
    [
        ("sips coffee", "[Kurisu] sips coffee."),
        ("sips coffee.", "[Kurisu] sips coffee."),
        ("Sips coffee", "[Kurisu] sips coffee."),
        ("slams the desk!", "[Kurisu] slams the desk!"),
        ("trails off…", "[Kurisu] trails off…"),
        ("shrugs,", "[Kurisu] shrugs."),
        ("Kurisu sips coffee", "[Kurisu] sips coffee."),
        ("I-is that so", "[Kurisu] I-is that so."),
        ("NASA mug in hand", "[Kurisu] NASA mug in hand."),
        ("stares at\tthe  screen", "[Kurisu] stares at the screen."),
    ],
)
def test_action_statement_normalisation(action: str, statement: str) -> None:
    response = CharacterResponse((Segment(Layer.ACTION, action, 0, len(action) + 2),))
    assert layer_statements("Kurisu", response) == [(Layer.ACTION, statement)]


def test_thought_statement_is_marked_private_and_quoted() -> None:
    statements = layer_statements("Kurisu", parse_response('（He said "later"\nagain.）'))
    assert statements == [(Layer.THOUGHT, "[Kurisu] privately thought: \"He said 'later' again.\"")]
    ((_, text),) = statements
    assert "said to" not in text and "privately thought" in text


def test_layer_statements_keep_order_and_layers() -> None:
    text = "*blinks* What? （He noticed.） Say it again. *leans in* （Please don't.）"
    assert layer_statements(" Okabe ", parse_response(text)) == [
        (Layer.DIALOGUE, "What? Say it again."),
        (Layer.ACTION, "[Okabe] blinks."),
        (Layer.THOUGHT, '[Okabe] privately thought: "He noticed."'),
        (Layer.ACTION, "[Okabe] leans in."),
        (Layer.THOUGHT, '[Okabe] privately thought: "Please don\'t."'),
    ]


def test_layer_statements_empty_response() -> None:
    assert layer_statements("Kurisu", parse_response("  ")) == []


@pytest.mark.parametrize("speaker", ["", "   ", "[Kurisu]", "Ku]risu"])
def test_layer_statements_rejects_bad_speaker(speaker: str) -> None:
    with pytest.raises(InputError):
        layer_statements(speaker, parse_response("hi"))


# --------------------------------------------------------------------------- persona prompt


def test_style_prompt_has_placeholder_and_examples() -> None:
    assert "{character}" in PERSONA_STYLE_PROMPT
    assert SPEC_TENSE in PERSONA_STYLE_PROMPT
    assert SPEC_CASUAL in PERSONA_STYLE_PROMPT


def test_persona_prompt_fills_in_the_name_and_keeps_examples() -> None:
    prompt = persona_prompt("Kurisu Makise")
    assert "{character}" not in prompt
    assert prompt.startswith("You are Kurisu Makise.")
    assert SPEC_TENSE in prompt and SPEC_CASUAL in prompt
    assert "（" in prompt and "*sips coffee*" in prompt


def test_persona_prompt_appends_persona() -> None:
    bare = persona_prompt("Kurisu")
    full = persona_prompt("Kurisu", "  A neuroscientist who hates being called Christina.  ")
    assert full.startswith(bare)
    assert full.rstrip().endswith("A neuroscientist who hates being called Christina.")
    assert persona_prompt("Kurisu", "   ") == bare


def test_persona_prompt_name_with_braces_is_literal() -> None:
    assert "You are {x}." in persona_prompt("{x}")


def test_persona_prompt_rejects_blank_name() -> None:
    with pytest.raises(InputError):
        persona_prompt("  ")


# --------------------------------------------------------------------------- properties

_MARKERS = "*（）"
responses = st.text(
    alphabet=st.sampled_from(list("ab. ,\n*（）()*（）~")) | st.characters(), max_size=60
)


@settings(max_examples=500)
@given(responses)
def test_no_character_is_lost_except_markers_and_whitespace(text: str) -> None:
    segments = parse_response(text).segments
    kept = Counter(c for s in segments for c in s.text if not c.isspace())
    given_ = Counter(c for c in text if not c.isspace())
    lost = given_ - kept
    assert set(lost) <= set(_MARKERS), lost
    assert not kept - given_  # nothing invented


@settings(max_examples=500)
@given(responses)
def test_segments_are_ordered_and_text_between_them_is_only_markers(text: str) -> None:
    segments = parse_response(text).segments
    position = 0
    for segment in segments:
        assert position <= segment.start < segment.end <= len(text)
        gap = text[position : segment.start]
        assert all(c.isspace() or c in _MARKERS for c in gap), gap
        assert segment.text and segment.text == segment.text.strip()
        position = segment.end
    assert all(c.isspace() or c in _MARKERS for c in text[position:])


@settings(max_examples=500)
@given(responses)
def test_no_markup_inside_segments_except_nested_in_thoughts(text: str) -> None:
    for segment in parse_response(text).segments:
        if segment.layer is Layer.ACTION:
            assert "*" not in segment.text and "\n" not in segment.text
        elif segment.layer is Layer.DIALOGUE:
            # a dialogue piece holds no action, thought or empty marker: it re-parses to itself
            assert parse_response(segment.text).segments == (
                Segment(Layer.DIALOGUE, segment.text, 0, len(segment.text)),
            )


_plain = st.text(alphabet=st.sampled_from(list("ab. ,\n*（）()~")), max_size=30)


@settings(max_examples=500)
@given(_plain, _plain)
def test_said_text_never_contains_a_thought(before: str, after: str) -> None:
    text = f"{before}（SECRET）{after}"
    response = parse_response(text)
    said = said_text(text)
    assert said == response.dialogue
    assert "\n" not in said and "  " not in said
    assert "SECRET" not in said
    assert any("SECRET" in s.text for s in response.segments if s.layer is not Layer.DIALOGUE)
