"""Query rewrites for paths A, B2 and B3: by the LLM when one is configured, else deterministic.

* **keywords** (path A in ``expand``/``deep``): the question's content words, with the names and
  time words kept, question words and auxiliaries dropped.
* **hypothetical fact** (path B2, HyDE): a statement that would answer the question. Offline the
  question is turned into a declarative stem ("When did Caroline go to the support group?" ->
  "Caroline went to the support group") — close to how facts are written, so its embedding sits
  near the answer.
* **event** (path B3): the event the question is about, without who and when ("go to the
  support group"): it matches facts that tell the event in other words or about another person.

The LLM versions ask for the same three things in one call and fall back to the deterministic
ones when the model fails.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from membrain.extraction.jsonout import MalformedOutput, parse_json_object
from membrain.extraction.llm import LLMCallError, LLMClient

__all__ = ["REWRITE_PROMPT", "Rewrites", "deterministic_rewrites", "llm_rewrites"]

_WORD = re.compile(r"[\w'’-]+")
_QUESTION_WORDS = frozenset("what when where which who whom whose why how".split())
_AUXILIARIES = frozenset(
    """
    do does did is are was were has have had will would can could should shall may might must
    be been being am
    """.split()
)
_STOP = frozenset(
    """
    a an the of to in on at for with about from by as and or but if any some kind kinds type
    types sort thing things something anything that this these those there it its their they
    them he him his she her you your we our us i me my mine likely probably ever also
    """.split()
)
_PAST = {
    "go": "went",
    "do": "did",
    "have": "had",
    "make": "made",
    "get": "got",
    "take": "took",
    "see": "saw",
    "buy": "bought",
    "find": "found",
    "give": "gave",
    "meet": "met",
    "read": "read",
    "run": "ran",
    "paint": "painted",
    "start": "started",
    "visit": "visited",
    "say": "said",
    "tell": "told",
    "think": "thought",
    "feel": "felt",
    "come": "came",
    "leave": "left",
    "lose": "lost",
    "win": "won",
    "write": "wrote",
    "begin": "began",
    "teach": "taught",
    "learn": "learned",
}


@dataclass(frozen=True, slots=True)
class Rewrites:
    """The three rewrites of one question."""

    keywords: str
    hypothetical: str
    event: str
    by_llm: bool = False


def _words(question: str) -> list[str]:
    return _WORD.findall(question.replace("’", "'"))


def deterministic_rewrites(question: str, participants: Sequence[str] = ()) -> Rewrites:
    """Rewrites without a model (see the module docstring)."""
    words = _words(question)
    lowered = [w.casefold() for w in words]
    names = {p.casefold() for p in participants}
    keywords = [
        w
        for w, low in zip(words, lowered, strict=True)
        if low not in _QUESTION_WORDS and low not in _AUXILIARIES and low not in _STOP
    ]
    event = [w for w in keywords if w.casefold().removesuffix("'s") not in names]
    return Rewrites(
        keywords=" ".join(keywords) or question,
        hypothetical=_declarative(words) or question,
        event=" ".join(event) or " ".join(keywords) or question,
    )


def _declarative(words: list[str]) -> str:
    """A declarative stem of a question: "When did Caroline go?" -> "Caroline went".

    Other shapes lose their question words and keep their order.
    """
    rest = list(words)
    while rest and rest[0].casefold() in _QUESTION_WORDS:
        rest.pop(0)
    if rest and rest[0].casefold() in ("kind", "type", "sort") and len(rest) > 1:
        rest = rest[2:] if rest[1].casefold() == "of" else rest[1:]
    if not rest:
        return ""
    auxiliary = rest[0].casefold()
    if auxiliary in _AUXILIARIES and len(rest) > 2:
        subject, verb, tail = rest[1], rest[2], rest[3:]
        if auxiliary == "did":
            verb = _PAST.get(verb.casefold(), verb if verb.endswith("ed") else verb + "ed")
        elif auxiliary in ("does", "do"):
            verb = verb if auxiliary == "do" else _third_person(verb)
        else:
            return " ".join([subject, auxiliary, verb, *tail])
        return " ".join([subject, verb, *tail])
    return " ".join(rest)


def _third_person(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


REWRITE_PROMPT = """\
A user asks a question of a long-term memory of conversations. Write three search queries for it.

- "keywords": the words a matching memory would contain (names, things, places, actions),
  including close synonyms; no question words.
- "hypothetical": one sentence stating a plausible answer, written like a memory entry, e.g.
  "Caroline went to an LGBTQ support group on 7 May 2023." Invent the details if needed.
- "event": the event or activity the question is about, without who or when.

Question: {question}

Answer with exactly this JSON shape:
{{"keywords": "...", "hypothetical": "...", "event": "..."}}
"""

_SYSTEM = "You write search queries. You answer with one JSON object and nothing else."


def llm_rewrites(client: LLMClient, question: str, participants: Sequence[str] = ()) -> Rewrites:
    """The three rewrites by the model (one call); deterministic ones where it fails."""
    fallback = deterministic_rewrites(question, participants)
    try:
        reply = client.call(_SYSTEM, REWRITE_PROMPT.format(question=question))
        data = parse_json_object(reply.text)
    except (LLMCallError, MalformedOutput):
        return fallback

    def field(name: str, default: str) -> str:
        value = data.get(name)
        return value.strip() if isinstance(value, str) and value.strip() else default

    return Rewrites(
        keywords=field("keywords", fallback.keywords),
        hypothetical=field("hypothetical", fallback.hypothetical),
        event=field("event", fallback.event),
        by_llm=True,
    )
