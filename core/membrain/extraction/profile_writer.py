"""An LLM proposes the user profile's changes after a flush: one call, checked, retried.

:class:`LLMProfileWriter` shows the model the profile schema, the user's current entries and the
facts a flush stored about the user (each as ``F1``, ``F2``, ...), and asks for the changes as
JSON::

    {"profile": [{"topic": "work", "subtopic": "occupation",
                  "text": "Sara works as a teacher.", "facts": ["F2"]},
                 {"topic": "lifestyle", "subtopic": "diet", "remove": true, "facts": ["F3"]}]}

Every change is checked before any is returned: the subtopic (known under a strict schema, a
listed topic otherwise), a non-empty text of at most a few sentences, at least one cited fact
and only facts it was shown. A failed check goes back to the model and the call is retried
(``max_attempts`` in all); when attempts run out :class:`~membrain.api.errors.ExtractionError`
is raised and nothing is proposed, so the profile is never half-written by one flush.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from membrain.api.profile import MAX_PROFILE_TEXT, ProfileEntry, ProfileSchema
from membrain.extraction.asking import Invalid, ask
from membrain.extraction.llm import LLMClient
from membrain.temporal import plain_text

__all__ = ["PROFILE_PROMPT_VERSION", "LLMProfileWriter", "ProfileChange", "ShownFact"]

PROFILE_PROMPT_VERSION = "profile-1"

SYSTEM = (
    "You keep a short profile of a user: what stays true of them between conversations. "
    "You answer with JSON only."
)

SCHEMA: dict[str, Any] = {
    "title": "profile_changes",
    "description": "Changes to the user's profile entries.",
    "type": "object",
    "properties": {
        "profile": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "topic": {"type": "string"},
                    "subtopic": {"type": "string"},
                    "text": {"type": "string"},
                    "facts": {"type": "array", "items": {"type": "string"}},
                    "remove": {"type": "boolean"},
                },
                "required": ["topic", "subtopic", "facts"],
            },
        }
    },
    "required": ["profile"],
}


@dataclass(frozen=True, slots=True)
class ShownFact:
    """A fact the model may cite: its id and text."""

    id: str
    text: str


@dataclass(frozen=True, slots=True)
class ProfileChange:
    """One checked change: set ``(topic, subtopic)`` to ``text``, or remove it."""

    topic: str
    subtopic: str
    text: str
    fact_ids: tuple[str, ...]
    remove: bool = False


class LLMProfileWriter:
    """Proposes profile changes with one model call per flush (see the module docstring).

    Args:
        client: The model.
        max_attempts: Calls before giving up (the first included).
    """

    def __init__(self, client: LLMClient, *, max_attempts: int = 3) -> None:
        self.client = client
        self._max_attempts = max_attempts

    @property
    def id(self) -> str:
        """The writer's name in the audit log."""
        return f"llm-profile:{PROFILE_PROMPT_VERSION}"

    def propose(
        self,
        user: str,
        schema: ProfileSchema,
        current: Sequence[ProfileEntry],
        facts: Sequence[ShownFact],
    ) -> list[ProfileChange]:
        """The changes the model proposes for ``user``'s profile, each checked.

        ``facts`` are the new facts about the user and those the current entries cite; only
        they may be cited.

        Raises:
            ExtractionError: no usable answer within ``max_attempts`` calls (or the model
                failed each time).
        """
        refs = {f"F{n}": fact.id for n, fact in enumerate(facts, 1)}
        base = _prompt(user, schema, current, facts)
        return ask(
            self.client,
            SYSTEM,
            lambda said: base + said,
            lambda data, raw, final: _checked(data, schema, refs),
            key="profile",
            schema=SCHEMA,
            what="profile update",
            attempts=self._max_attempts,
        )


def _prompt(
    user: str, schema: ProfileSchema, current: Sequence[ProfileEntry], facts: Sequence[ShownFact]
) -> str:
    topics = []
    for topic in schema.topics:
        subtopics = "; ".join(f"{s.name} ({s.description})" for s in topic.subtopics)
        topics.append(f"- {topic.name}: {topic.description} Subtopics: {subtopics}")
    rule = (
        "Use only the listed subtopics."
        if schema.strict
        else "Use the listed subtopics, or a new one (lowercase_with_underscores) under a listed "
        "topic."
    )
    ids = {fact.id: f"F{n}" for n, fact in enumerate(facts, 1)}
    entries = [_entry_line(e, ids) for e in current] or ["(empty)"]
    shown = [f"F{n}: {plain_text(fact.text)}" for n, fact in enumerate(facts, 1)]
    return "\n".join(
        [
            f"The profile of {user} has these topics:",
            *topics,
            rule,
            "",
            "Current entries:",
            *entries,
            "",
            f"New facts about {user}:",
            *shown,
            "",
            "Which entries do the new facts set, change or end? Answer with only the changes, as "
            '{"profile": [{"topic": ..., "subtopic": ..., "text": ..., "facts": ["F1", ...]}]}; '
            'to end an entry, give "remove": true and the facts that end it. A text is at most '
            f"three sentences about {user}, with no dates or times (they stay on the facts), "
            "and cites every fact it rests on. Leave out passing events and what is already "
            'said. Answer {"profile": []} when nothing changes.',
        ]
    )


def _entry_line(entry: ProfileEntry, refs: dict[str, str]) -> str:
    cited = ", ".join(refs.get(i, "?") for i in entry.fact_ids)
    stale = (
        " [stale: a fact it rests on no longer holds; update or remove it]" if entry.stale else ""
    )
    return f"- {entry.topic}/{entry.subtopic}: {entry.text} (facts: {cited}){stale}"


def _checked(
    data: dict[str, Any], schema: ProfileSchema, refs: dict[str, str]
) -> list[ProfileChange]:
    items = data.get("profile")
    if not isinstance(items, list):
        raise Invalid(['"profile" must be a list'])
    problems: list[str] = []
    changes: list[ProfileChange] = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            problems.append(f"change {n} is not an object")
            continue
        topic, subtopic = item.get("topic"), item.get("subtopic")
        remove = item.get("remove") is True
        given = item.get("text")
        text = given if isinstance(given, str) else ""
        cited = item.get("facts")
        where = f"change {n} ({topic}/{subtopic})"
        if not isinstance(topic, str) or not isinstance(subtopic, str):
            problems.append(f"change {n} needs a topic and a subtopic")
            continue
        if not schema.admits(topic, subtopic):
            problems.append(f"{where}: not a subtopic of the profile")
        if not remove and not text.strip():
            problems.append(f"{where}: the text is empty")
        if len(text) > MAX_PROFILE_TEXT:
            problems.append(f"{where}: the text is longer than {MAX_PROFILE_TEXT} characters")
        if not isinstance(cited, list) or not cited:
            problems.append(f"{where}: cite the facts it rests on")
            continue
        unknown = [c for c in cited if c not in refs]
        if unknown:
            problems.append(f"{where}: {json.dumps(unknown)} are not facts you were shown")
            continue
        ids = tuple(dict.fromkeys(refs[c] for c in cited))
        changes.append(ProfileChange(topic, subtopic, " ".join(text.split()), ids, remove))
    if problems:
        raise Invalid(problems)
    return changes
