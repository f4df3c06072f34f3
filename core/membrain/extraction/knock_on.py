"""An LLM picks, among facts a rule found, those that depend on a value that just changed.

When a fact is superseded ("[Sara] lives in [Lisbon]" by "[Sara] moved to [Oslo]"), the rule of
:mod:`membrain.knowledge.knock_on` finds the active facts that may have rested on the old value
("[Sara] walks to the [Lisbon] office"). :class:`LLMKnockOnFilter` shows the model every change
of one batch with its candidates, each as ``D1``, ``D2``, ..., in one call, and asks which
candidates are no longer sure to hold::

    {"dependent": ["D1", "D3"]}

Only refs it was shown are accepted; anything else goes back to the model and the call is
retried (``max_attempts`` in all); then :class:`~membrain.api.errors.ExtractionError` is raised
and the caller keeps the rule's candidates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from membrain.extraction.asking import Invalid, ask
from membrain.extraction.llm import LLMClient
from membrain.temporal import plain_text

__all__ = [
    "KNOCK_ON_PROMPT",
    "KNOCK_ON_PROMPT_VERSION",
    "KNOCK_ON_SCHEMA",
    "KNOCK_ON_SYSTEM",
    "KnockOnQuestion",
    "LLMKnockOnFilter",
]

KNOCK_ON_PROMPT_VERSION = "knock-on-1"

KNOCK_ON_SYSTEM = (
    "You keep a memory of facts about people consistent after one of their facts changed. "
    "You answer with one JSON object and nothing else."
)

KNOCK_ON_PROMPT = """\
Some facts were just replaced by newer ones. Under each change are other facts, still believed,
about the same person (D1, D2, ...). For each, decide whether it rested on the old value, so it
may no longer be true now (the office of a city they left, a commute to a job they quit, a
restaurant near a flat they moved out of), or whether it holds whatever the change (a sibling,
a pet, a hobby, a memory of a past trip).

{changes}

Answer as {{"dependent": ["D1", ...]}}: the facts that may no longer be true. Answer
{{"dependent": []}} when every fact still holds.
{feedback}"""

KNOCK_ON_SCHEMA: dict[str, Any] = {
    "title": "knock_on",
    "description": "The facts that may no longer be true after the changes.",
    "type": "object",
    "properties": {"dependent": {"type": "array", "items": {"type": "string"}}},
    "required": ["dependent"],
}


@dataclass(frozen=True, slots=True)
class KnockOnQuestion:
    """One change and the texts of the facts that may depend on its old value."""

    old: str
    """The replaced fact's text."""
    new: tuple[str, ...]
    """The texts of the facts that replaced it."""
    old_value: str
    new_value: str
    candidates: tuple[str, ...]


class LLMKnockOnFilter:
    """Asks the model which candidates depend on the old values, one call per batch.

    Args:
        client: The model.
        max_attempts: Calls before giving up (the first included).
    """

    def __init__(self, client: LLMClient, *, max_attempts: int = 3) -> None:
        self.client = client
        self._max_attempts = max_attempts

    @property
    def id(self) -> str:
        """The filter's name in the audit log."""
        return f"llm-knock-on:{KNOCK_ON_PROMPT_VERSION}"

    def dependent(self, questions: Sequence[KnockOnQuestion]) -> list[tuple[int, ...]]:
        """Per question, the positions of the candidates the model says depend on the change.

        Raises:
            ExtractionError: no usable answer within ``max_attempts`` calls.
        """
        refs: dict[str, tuple[int, int]] = {}
        blocks = []
        for q, question in enumerate(questions):
            lines = [
                f"Change {q + 1}: {question.old_value} -> {question.new_value}",
                f"  was: {plain_text(question.old)}",
                *(f"  now: {plain_text(text)}" for text in question.new),
            ]
            for c, text in enumerate(question.candidates):
                ref = f"D{len(refs) + 1}"
                refs[ref] = (q, c)
                lines.append(f"  {ref}: {plain_text(text)}")
            blocks.append("\n".join(lines))
        changes = "\n\n".join(blocks)
        picked = ask(
            self.client,
            KNOCK_ON_SYSTEM,
            lambda said: KNOCK_ON_PROMPT.format(changes=changes, feedback=said),
            lambda data, raw, final: _checked(data, refs),
            key="dependent",
            schema=KNOCK_ON_SCHEMA,
            what="knock-on review",
            attempts=self._max_attempts,
        )
        found: list[list[int]] = [[] for _ in questions]
        for q, c in picked:
            found[q].append(c)
        return [tuple(sorted(set(f))) for f in found]


def _checked(data: dict[str, Any], refs: dict[str, tuple[int, int]]) -> list[tuple[int, int]]:
    items = data.get("dependent")
    if not isinstance(items, list):
        raise Invalid(['"dependent" must be a list of fact refs'])
    unknown = [i for i in items if not isinstance(i, str) or i.strip() not in refs]
    if unknown:
        raise Invalid([f"{json.dumps(unknown)} are not facts you were shown"])
    return [refs[i.strip()] for i in items]
