"""Prompts for LLM extraction, as module constants.

Each prompt is a :class:`str.format` template; override any of them per :class:`~membrain.Memory`
with ``Memory(prompts=Prompts(facts=...))``. Placeholders:

* ``{window}``: the rendered messages, context above ``--- EXTRACT BELOW ---``, target below;
* ``{entities}``: the entity list, one per line (fact prompt only);
* ``{known}``: the known facts a new fact may replace, one per line as
  ``K1: <text> (stated 2023-01-10)``, or ``(none)`` (fact prompt only; a custom fact template
  without it still works, its model is just never asked about replacements);
* ``{feedback}``: empty, or what was wrong with the previous answer (on a retry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DIVIDER",
    "ENTITY_PROMPT",
    "ENTITY_SCHEMA",
    "ENTITY_SYSTEM",
    "FACT_PROMPT",
    "FACT_SCHEMA",
    "FACT_SYSTEM",
    "NO_KNOWN_FACTS",
    "PROMPT_VERSION",
    "Prompts",
]

PROMPT_VERSION = "3"
DIVIDER = "--- EXTRACT BELOW ---"

ENTITY_SYSTEM = (
    "You read chat transcripts and list the things people talk about that someone could later "
    "ask about on their own. You answer with one JSON object and nothing else."
)

ENTITY_PROMPT = """\
List the entities mentioned in the messages below.

Include:
- people (speakers and anyone named or referred to, e.g. "Sara's mom"), named places,
  organisations and creative works (books, songs, films, bands);
- pets and other animals, named or not; specific things someone bought or owns; specific objects
  with identifying detail;
- an activity only when it is the main subject (pottery, swimming); relational groups
  ("Nate's regulars", "Sara's family"); the object of a key action (what is researched, bought,
  planned).
Do not include: generic activities ("had dinner"), unnamed groups ("some people"), abstract
concepts, emotions or values, generic category labels.

Names: the shortest phrase that identifies the referent (1-4 words), a proper name when the
messages give one, a relationship for groups; never put a time expression in a name.
Messages above the line "{divider}" are context: use them to understand pronouns, but only
list entities mentioned below that line. Without the line, use every message.

For each entity give a one-sentence description of what the messages say it is (who the person
is, what the thing is).

Answer with exactly this JSON shape:
{{"entities": ["name", ...], "descriptions": {{"name": "description", ...}}}}
{feedback}
Each message starts with "[time] Speaker:"; an indented line continues the message above it.
Messages:
{window}
"""

FACT_SYSTEM = (
    "You turn chat transcripts into self-contained facts for a long-term memory. You never "
    "invent information. You answer with one JSON object and nothing else."
)

NO_KNOWN_FACTS = "(none)"
"""What ``{known}`` shows when memory holds no fact about the batch's entities."""

FACT_PROMPT = """\
Write the facts stated in the messages below the line "{divider}" (messages above it are
context only).

Rules:
- A fact is 1-3 sentences about one topic, understandable on its own: replace every pronoun by
  who or what it refers to.
- Wrap every entity in square brackets, spelled exactly as in the entity list below, e.g.
  [Sara] (a name bracketed in a known fact may be used too, spelled as there). Do not bracket
  anything else and do not add new entities. Mention every listed entity in some fact when the
  messages say something about it.
- Keep substantive claims: plans, decisions, habits, preferences, concrete details (colours,
  brand names, titles, nicknames, pet species, tools, counts and ordinals, "did X in 2019").
  Keep frequency words as written ("every Tuesday"). Skip greetings, compliments, reactions and
  small talk.
- Write each determinate time as [raw::resolved]: raw is the words used, resolved is ISO 8601
  at the precision the words support, computed from the message time: a year 2022, a month
  2023-10, a day 2023-05-07, a date and time 2023-05-08T21:30Z, an interval 2023-03/2023-05,
  an open interval 2022/ ("since ...") or /2023-05-08 ("before ..."). Example: a message sent
  2023-05-08 saying "yesterday" gives [yesterday::2023-05-07]. Leave vague times ("recently",
  "someday") as plain words without brackets.
- A line marked "(private thought)" is something the speaker thought and did not say: write it
  as "[Name] privately thought ...", never as something said to anyone.
- fact_ts is the time of the message the fact was stated in, exactly as shown.
- The known facts below are already in memory. They are context: do not write them again as new
  facts. Give a new fact "replaces": ["K3", ...] only when it makes those known facts no longer
  true from some time on: a change of residence, job or relationship status, a plan cancelled
  or changed, a preference reversed. Never replace a known fact with an additional detail, a
  repetition, or something that can be true at the same time. Otherwise leave "replaces" out.

Entities:
{entities}

Known facts:
{known}

Answer with exactly this JSON shape ("replaces" only on facts that replace known facts):
{{"facts": [{{"text": "...", "fact_ts": "...", "replaces": ["K1", ...]}}, ...]}}
{feedback}
Each message starts with "[time] Speaker:"; an indented line continues the message above it.
Messages:
{window}
"""


ENTITY_SCHEMA: dict[str, Any] = {
    "title": "EntityList",
    "description": "The entities mentioned in the target messages.",
    "type": "object",
    "properties": {
        "entities": {"type": "array", "items": {"type": "string"}},
        "descriptions": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["entities"],
}
"""Native structured-output schema of the entity answer (where the model supports it)."""

FACT_SCHEMA: dict[str, Any] = {
    "title": "FactList",
    "description": "Self-contained facts with bracketed entities and [raw::resolved] times.",
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "fact_ts": {"type": "string"},
                    "replaces": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "References (K1, K2, ...) of the known facts this fact "
                        "makes no longer true.",
                    },
                },
                "required": ["text", "fact_ts"],
            },
        }
    },
    "required": ["facts"],
}
"""Native structured-output schema of the fact answer (where the model supports it)."""


@dataclass(frozen=True, slots=True)
class Prompts:
    """The prompt templates one :class:`~membrain.Memory` uses (override any of them)."""

    entity_system: str = ENTITY_SYSTEM
    entities: str = ENTITY_PROMPT
    fact_system: str = FACT_SYSTEM
    facts: str = FACT_PROMPT
