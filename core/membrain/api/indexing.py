"""The text MemBrain indexes for each record, and the matching query text.

A fact is indexed twice, differently:

* **BM25** sees the readable text with each entity named once (later mentions of the same ref read
  "they"/"their"), so the pronoun resolution that repeats "[Sara]" five times does not make the
  name outweigh the content.
* **Dense** sees the content with the conversation's participants replaced by "they"/"their", and
  the question is embedded the same way. Names are a lexical signal that BM25 matches exactly; in a
  sentence embedding they dominate the vector, so a question naming one participant pulls every
  fact about that participant and misses the right fact stated by the other one. On the LoCoMo dev
  split (3 conversations) this took dense recall@10 over facts from 0.47 to 0.65, and the fused
  result from 0.67 to 0.73 (``benchmarks/locomo_retrieval.py``).

Messages (the raw evidence) are indexed as ``speaker: text [image: caption]`` for both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from membrain.api.models import Message
from membrain.temporal import plain_text

__all__ = [
    "entity_text",
    "fact_dense_text",
    "fact_sparse_text",
    "message_text",
    "question_dense_text",
    "render_fact",
]

_REF = re.compile(r"\[([^\[\]:]+)\]('s)?")


def message_text(message: Message) -> str:
    """The searchable text of a message: speaker, text and image caption."""
    text = f"{message.speaker}: {message.text}".strip()
    if message.caption:
        text += f" [image: {message.caption}]"
    return text


def entity_text(name: str, description: str) -> str:
    """The searchable text of an entity: its name and description."""
    return f"{name}: {description}" if description else name


def fact_sparse_text(text: str) -> str:
    """A fact's BM25 text: readable, each entity named once."""
    seen: set[str] = set()

    def once(match: re.Match[str]) -> str:
        ref = match.group(1)
        if ref in seen:
            return "their" if match.group(2) else "they"
        seen.add(ref)
        return match.group(0)

    return plain_text(_REF.sub(once, text))


def fact_dense_text(text: str, participants: Iterable[str]) -> str:
    """A fact's dense text: readable, with participants as "they"/"their"."""
    keys = {p.casefold() for p in participants}

    def neutral(match: re.Match[str]) -> str:
        ref, possessive = match.group(1), match.group(2)
        if ref.casefold() in keys:
            return "their" if possessive else "they"
        owner, _, rest = ref.partition("'s ")
        if rest and owner.casefold() in keys:
            return f"their {rest}{possessive or ''}"
        return match.group(0)

    return plain_text(_REF.sub(neutral, text))


def named_participants(question: str, participants: Iterable[str]) -> list[str]:
    """The participants a question names (as a word, possessives included), in their order."""
    return [
        p
        for p in participants
        if p.strip() and re.search(rf"\b{re.escape(p)}(?:'s|’s)?\b", question, re.IGNORECASE)
    ]


def question_dense_text(question: str, participants: Iterable[str]) -> str:
    """A question's dense text: participants' names as "they"/"their", like the facts."""
    names = sorted({p for p in participants if p.strip()}, key=len, reverse=True)
    if not names:
        return question
    alternatives = "|".join(re.escape(n) for n in names)
    pattern = re.compile(rf"\b(?:{alternatives})(?:'s|’s)?\b", re.IGNORECASE)
    return pattern.sub(
        lambda m: "their" if m.group(0).lower().endswith(("'s", "’s")) else "they", question
    )


def render_fact(text: str, names: Mapping[str, str]) -> str:
    """A fact as a reader sees it: refs as the current canonical names, no markup."""

    def canonical(match: re.Match[str]) -> str:
        return f"[{names.get(match.group(1), match.group(1))}]{match.group(2) or ''}"

    return plain_text(_REF.sub(canonical, text))
