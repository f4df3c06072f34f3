"""Character responses: the three-layer persona style, its parser, and layer-aware statements.

A persona agent answers in three layers:

* **dialogue** — plain text, what the character says aloud;
* **action** — ``*...*`` with single asterisks, lowercase and present tense (``*sips coffee*``);
* **thought** — full-width parentheses ``（...）``, inner monologue that is never said.

:data:`PERSONA_STYLE_PROMPT` teaches an agent the style; its only placeholder is
``{character}``, the character's name (fill it with :func:`persona_prompt`).
:func:`parse_response` splits a reply into :class:`Segment` objects, :func:`said_text` keeps only
what was said, and :func:`layer_statements` turns a reply into statements an extractor can write
as facts without ever confusing a thought with something said to the user.

Parsing rules, in the order the scanner applies them (left to right, the first marker that opens
*and* closes owns everything up to its close — the outer layer wins, nested markers stay as text):

* ``（...）`` is a thought when it has a matching ``）`` (nesting of ``（）`` is balanced; the
  thought may span lines). An unclosed ``（`` is dialogue. ASCII ``(...)`` is always dialogue.
* ``*...*`` is an action when the opening ``*`` is a single asterisk that is not preceded by an
  ASCII letter or digit (so ``2*3*4`` stays dialogue) and is followed by a non-space character,
  and the next ``*`` on the same line is preceded by a non-space character. Otherwise the ``*``
  is dialogue: a lone ``*``, an unclosed ``*``, or ``5 * 3 * 2``.
* A run of two or more asterisks is never an action marker: ``**bold**`` is kept verbatim in the
  dialogue. The one exception is an *empty action* ``**`` standing alone between whitespace,
  markers or the ends of the text; it is dropped, as is an empty or blank thought ``（ ）``.
* Everything else is dialogue, stripped of surrounding whitespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from membrain.api.errors import InputError
from membrain.api.models import Layer

__all__ = [
    "PERSONA_STYLE_PROMPT",
    "CharacterResponse",
    "Layer",
    "Segment",
    "layer_statements",
    "parse_response",
    "persona_prompt",
    "said_text",
]

PERSONA_STYLE_PROMPT = """\
You are {character}. Stay in character, and write every reply in up to three layers:

1. Dialogue: plain text with no markers. This is what {character} says out loud to the person \
they are talking with.
2. Actions: wrapped in single asterisks, like *sips coffee*. Use them for gestures, movements and \
facial expressions. Write them in lowercase and in the present tense, without repeating \
{character}'s name.
3. Inner monologue: wrapped in full-width parentheses, like （this）. These are {character}'s \
unspoken thoughts. Nobody else hears them, and they may contradict what {character} says aloud.

Fit the layers to the moment. In a casual exchange, use dialogue alone or dialogue with a single \
action. When the moment is tense or emotional, use all three.

Examples:
- casual: *sips coffee* Morning~
- tense: Sure, whatever. *starts typing then deletes it* （Why did I say that.）

Rules:
- Only full-width parentheses （ ） mark thoughts; ordinary parentheses ( ) are part of what is \
said.
- Use asterisks only for actions, never for emphasis.
- Never speak a thought aloud, and never answer the other person's thoughts as if you had heard \
them.
"""


def persona_prompt(character: str, persona: str = "") -> str:
    """The persona style prompt for ``character``, with an optional persona description appended.

    Args:
        character: The character's name; replaces ``{character}`` in the prompt.
        persona: A free-text description of the character (background, voice, relationships).

    Returns:
        The prompt, ready to use as a system message.

    Raises:
        InputError: If ``character`` is blank.
    """
    name = character.strip()
    if not name:
        raise InputError("a persona prompt needs a character name")
    prompt = PERSONA_STYLE_PROMPT.format(character=name)
    description = persona.strip()
    if description:
        prompt += f"\nAbout {name}:\n{description}\n"
    return prompt


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of a character response.

    Attributes:
        layer: The layer the piece belongs to.
        text: The content without its markers, stripped of surrounding whitespace.
        start: Offset in the original response where the piece begins (its opening marker for an
            action or thought).
        end: Offset just past the piece (past its closing marker), so ``response[start:end]`` is
            the piece as written.
    """

    layer: Layer
    text: str
    start: int
    end: int


# Punctuation that attaches to the preceding word when dialogue pieces are joined.
_ATTACHED = frozenset(",.!?;:…~)]}、。，！？；：）」』")


@dataclass(frozen=True, slots=True)
class CharacterResponse:
    """A character response split into its layers, in the order they were written."""

    segments: tuple[Segment, ...]

    @property
    def dialogue(self) -> str:
        """Everything said aloud, pieces joined with single spaces and whitespace normalised."""
        said = ""
        for segment in self.segments:
            if segment.layer is not Layer.DIALOGUE:
                continue
            piece = " ".join(segment.text.split())
            if said and piece[0] not in _ATTACHED:
                said += " "
            said += piece
        return said

    @property
    def actions(self) -> tuple[str, ...]:
        """The actions and expressions, in order."""
        return tuple(s.text for s in self.segments if s.layer is Layer.ACTION)

    @property
    def thoughts(self) -> tuple[str, ...]:
        """The unspoken thoughts, in order. Never show these as something said."""
        return tuple(s.text for s in self.segments if s.layer is Layer.THOUGHT)

    @property
    def has_markup(self) -> bool:
        """Whether the response has at least one action or thought."""
        return any(s.layer is not Layer.DIALOGUE for s in self.segments)


_OPEN, _CLOSE = "（", "）"


def _boundary(text: str, index: int) -> bool:
    """Whether ``index`` is outside ``text``, whitespace or a marker character."""
    return not 0 <= index < len(text) or text[index].isspace() or text[index] in "*（）"


def _thought_end(text: str, start: int) -> int | None:
    """The index of the ``）`` matching the ``（`` at ``start``, if there is one."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == _OPEN:
            depth += 1
        elif text[index] == _CLOSE:
            depth -= 1
            if depth == 0:
                return index
    return None


def _action_end(text: str, start: int) -> int | None:
    """The index of the ``*`` closing a single-asterisk action opened at ``start``, if any."""
    if start > 0 and text[start - 1].isascii() and text[start - 1].isalnum():
        return None
    if start + 1 >= len(text) or text[start + 1].isspace():
        return None
    close = text.find("*", start + 1)
    if close == -1 or text[close - 1].isspace():
        return None
    content = text[start + 1 : close]
    if "\n" in content or "\r" in content:
        return None
    return close


def parse_response(text: str) -> CharacterResponse:
    """Split a character response into dialogue, action and thought segments, in order.

    See the module docstring for the exact rules. Text with no markup is a single dialogue
    segment; empty or blank text has no segments. Only markers and the whitespace around
    segments are dropped: every other character of ``text`` is in some segment's text.

    Args:
        text: The response as the persona agent wrote it.

    Returns:
        The parsed response.
    """
    segments: list[Segment] = []
    pending = 0  # start of the text not yet assigned to a segment

    def flush(until: int) -> None:
        piece = text[pending:until]
        content = piece.strip()
        if content:
            begin = pending + len(piece) - len(piece.lstrip())
            segments.append(Segment(Layer.DIALOGUE, content, begin, begin + len(content)))

    index = 0
    while index < len(text):
        char = text[index]
        if char == _OPEN and (close := _thought_end(text, index)) is not None:
            flush(index)
            inner = text[index + 1 : close].strip()
            if inner:
                segments.append(Segment(Layer.THOUGHT, inner, index, close + 1))
            index = pending = close + 1
        elif char == "*":
            run = len(text) - index - len(text[index:].lstrip("*"))
            if run == 1 and (close := _action_end(text, index)) is not None:
                flush(index)
                segments.append(Segment(Layer.ACTION, text[index + 1 : close], index, close + 1))
                index = pending = close + 1
            elif run == 2 and _boundary(text, index - 1) and _boundary(text, index + 2):
                flush(index)  # an empty action: dropped
                index = pending = index + 2
            else:
                index += run
        else:
            index += 1
    flush(len(text))
    return CharacterResponse(tuple(segments))


def said_text(text: str) -> str:
    """Only what the character said aloud: no actions, and never a thought.

    Use this wherever a response is shown back as speech, such as a transcript for the user.

    Args:
        text: The response as the persona agent wrote it.

    Returns:
        The dialogue, whitespace normalised; empty if nothing was said.
    """
    return parse_response(text).dialogue


def _check_speaker(speaker: str) -> str:
    name = speaker.strip()
    if not name or "[" in name or "]" in name:
        raise InputError(f"a speaker must be a non-blank name without brackets; got {speaker!r}")
    return name


def _action_statement(speaker: str, action: str) -> str:
    body = " ".join(action.split())
    if body.casefold().startswith(speaker.casefold() + " "):
        body = body[len(speaker) + 1 :]  # "*Kurisu sips coffee*" names the speaker already
    first = body.split(" ", 1)[0]
    if first[:1].isupper() and first[1:2].islower():
        body = body[0].lower() + body[1:]  # "Sips" -> "sips"; "I", "I-is", "NASA" stay
    body = body.rstrip(",;:")
    if not body.endswith((".", "!", "?", "…")):
        body += "."
    return f"[{speaker}] {body}"


def layer_statements(speaker: str, response: CharacterResponse) -> list[tuple[Layer, str]]:
    """Statements an extractor can turn into facts, each tagged with its layer.

    The dialogue comes first, as one statement left unchanged (the extractor rewrites it into
    facts later), followed by the actions and thoughts in the order they were written:

    * an action becomes ``[Speaker] sips coffee.`` (the first word lowercased when it is simply
      capitalised, a leading repeat of the speaker's name dropped, one final period);
    * a thought becomes ``[Speaker] privately thought: "..."``.

    Thoughts are private. Downstream they are stored with ``layer=thought`` and must never be
    rendered, retrieved or summarised as something the character said to the user.

    Args:
        speaker: The character's name, written as the ``[Speaker]`` entity ref.
        response: The parsed response.

    Returns:
        ``(layer, statement)`` pairs; empty when the response has no segments.

    Raises:
        InputError: If ``speaker`` is blank or contains square brackets.
    """
    name = _check_speaker(speaker)
    statements: list[tuple[Layer, str]] = []
    if dialogue := response.dialogue:
        statements.append((Layer.DIALOGUE, dialogue))
    for segment in response.segments:
        if segment.layer is Layer.ACTION:
            statements.append((Layer.ACTION, _action_statement(name, segment.text)))
        elif segment.layer is Layer.THOUGHT:
            thought = " ".join(segment.text.split()).replace('"', "'")
            statements.append((Layer.THOUGHT, f'[{name}] privately thought: "{thought}"'))
    return statements
