"""Shared helpers of the accountability tests: scripted conversations and probes.

A :class:`Turn` is one message with what a scripted model says about it (its entities and its
facts). :func:`story_model` builds a :class:`~membrain.testing.ScriptedChatModel` whose replies
are functions reading the prompt: the entity and fact calls answer for the turns found below the
prompt's divider, in any order, and every other prompt (query rewrites, the boolean path's query,
tree summaries) makes the model raise, so retrieval falls back to its deterministic versions.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membrain import Memory, Scope
from membrain.extraction.prompts import DIVIDER
from membrain.testing import HashingEncoder, ScriptedChatModel

MODES = ("fast", "expand", "deep", "auto")

_numbers = itertools.count()


def fresh_scope(name: str = "sara") -> Scope:
    """A scope no other test uses (tests share one store to keep the suite fast)."""
    return Scope(dataset=f"{name}{next(_numbers)}", task="assistant")


class SwitchModel:
    """A chat model that answers with whichever scripted model a test put in ``current``.

    Opening an embedded store takes about a second, so the tests of a module share one Memory
    (each in its own scope) and swap the script here.
    """

    def __init__(self) -> None:
        self.current = ScriptedChatModel()

    def generate(self, system: str, prompt: str) -> str:
        return self.current.generate(system, prompt)


FactSpec = str | Mapping[str, Any]
FactsFn = Callable[[str], Sequence[FactSpec]]

_KNOWN_LINE = re.compile(r"^K(\d+): (.*) \(stated \d{4}-\d{2}-\d{2}\)$")


@dataclass(frozen=True)
class Turn:
    """A message and the scripted extraction of it.

    ``facts`` are fact texts, or dicts (``text`` and optionally ``replaces``), or a function of
    the fact prompt returning those (to read the known facts it lists).
    """

    speaker: str
    text: str
    ts: str
    entities: Sequence[str] = ()
    facts: Sequence[FactSpec] | FactsFn = ()
    descriptions: Mapping[str, str] = field(default_factory=dict)
    source_id: str | None = None

    def message(self) -> dict[str, Any]:
        out: dict[str, Any] = {"speaker": self.speaker, "text": self.text, "timestamp": self.ts}
        if self.source_id is not None:
            out["source_id"] = self.source_id
        return out

    def fact_items(self, prompt: str) -> list[dict[str, Any]]:
        specs = self.facts(prompt) if callable(self.facts) else self.facts
        items = []
        for spec in specs:
            item = {"text": spec} if isinstance(spec, str) else dict(spec)
            item.setdefault("fact_ts", self.ts)
            items.append(item)
        return items


def target_window(prompt: str) -> str:
    """The messages to extract in an extraction prompt (below the divider when there is one)."""
    window = prompt.split("\nMessages:\n", 1)[-1]
    return window.split(DIVIDER, 1)[-1]


def known_facts(prompt: str) -> dict[str, str]:
    """The known facts a fact prompt lists: ``{"K1": text, ...}``."""
    block = prompt.split("Known facts:\n", 1)[1].split("\n\n", 1)[0]
    found = {}
    for line in block.splitlines():
        match = _KNOWN_LINE.match(line.strip())
        if match:
            found[f"K{match.group(1)}"] = match.group(2)
    return found


def ref_for(prompt: str, fragment: str) -> str:
    """The K-reference of the one known fact containing ``fragment`` (fails when not one)."""
    refs = [k for k, text in known_facts(prompt).items() if fragment in text]
    assert len(refs) == 1, f"{fragment!r} in known facts {known_facts(prompt)}"
    return refs[0]


def is_entity_prompt(prompt: str) -> bool:
    return prompt.startswith("List the entities mentioned")


def _turns_in(prompt: str, turns: Sequence[Turn]) -> list[Turn]:
    window = target_window(prompt)
    return [t for t in turns if f"{t.speaker}: {t.text}" in window]


def entity_reply(turns: Sequence[Turn]) -> Callable[[str, str], str]:
    def reply(system: str, prompt: str) -> str:
        if not is_entity_prompt(prompt):
            raise RuntimeError("not an extraction prompt: not scripted")
        names: dict[str, None] = {}
        descriptions: dict[str, str] = {}
        for turn in _turns_in(prompt, turns):
            names.update(dict.fromkeys(turn.entities))
            descriptions.update(turn.descriptions)
        return json.dumps({"entities": list(names), "descriptions": descriptions})

    return reply


def fact_reply(turns: Sequence[Turn]) -> Callable[[str, str], str]:
    def reply(system: str, prompt: str) -> str:
        items = [item for turn in _turns_in(prompt, turns) for item in turn.fact_items(prompt)]
        return json.dumps({"facts": items})

    return reply


def story_model(*turns: Turn, facts: Sequence[Any] | None = None) -> ScriptedChatModel:
    """A scripted model answering for ``turns`` (``facts`` replaces the fact replies)."""
    return ScriptedChatModel(
        entities=[entity_reply(turns)],
        facts=list(facts) if facts is not None else [fact_reply(turns)],
    )


def open_memory(path: Path, llm: object | None = None, **options: Any) -> Memory:
    return Memory(path=path, dense=HashingEncoder(dim=64), llm=llm, **options)


def steps(model: ScriptedChatModel, since: int = 0) -> list[str]:
    """The extraction steps of the model's calls from call number ``since``."""
    return [step for step, _, _ in model.calls[since:]]


def fact_prompts(model: ScriptedChatModel, since: int = 0) -> list[str]:
    return [prompt for step, _, prompt in model.calls[since:] if step == "facts"]
