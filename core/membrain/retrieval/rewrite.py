"""Query rewrites for the ``bm25``, ``hyde`` and ``event`` paths: by the LLM, else deterministic.

* **keywords** (the ``bm25`` path in ``expand``/``deep``): the question's content words, with the
  names and time words kept, question words and auxiliaries dropped.
* **hypothetical fact** (the ``hyde`` path): a statement that would answer the question. Offline
  the question is turned into a declarative stem ("When did Caroline go to the support group?" ->
  "Caroline went to the support group") — close to how facts are written, so its embedding sits
  near the answer.
* **event** (the ``event`` path): the event the question is about, without who and when ("go to
  the support group"): it matches facts that tell the event in other words; the path looks for it
  among the facts of the participant the question names (:mod:`.vector_paths`).

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
    "quit": "quit",
    "put": "put",
    "set": "set",
    "let": "let",
    "cut": "cut",
    "hit": "hit",
    "hear": "heard",
    "keep": "kept",
    "bring": "brought",
    "build": "built",
    "send": "sent",
    "spend": "spent",
    "sing": "sang",
    "swim": "swam",
    "draw": "drew",
    "grow": "grew",
    "know": "knew",
    "eat": "ate",
    "drink": "drank",
    "drive": "drove",
    "ride": "rode",
    "fly": "flew",
    "sell": "sold",
    "catch": "caught",
    "choose": "chose",
    "fall": "fell",
    "hold": "held",
    "be": "was",
    "stop": "stopped",
    "plan": "planned",
    "adopt": "adopted",
}
_THIRD_PERSON = {"have": "has", "do": "does", "be": "is", "go": "goes"}
_BE = frozenset("is are was were am".split())
_ADVERBS = frozenset(
    "ever still also often usually really just recently already actually currently first".split()
)
_DETERMINERS = frozenset("the a an her his their my our your its this that".split())
_MAX_ASKED = 4
"""Words of the thing asked about before the auxiliary ("What [kind of] music does ...")."""


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

    The thing asked about moves after the statement ("What pets does Sara have?" -> "Sara has
    pets"), a "be" question keeps its subject first ("What is Sara's job?" -> "Sara's job is"),
    and adverbs between subject and verb are skipped ("Did Sara ever paint?" -> "Sara painted").
    Other shapes lose their question words and keep their order.
    """
    rest = list(words)
    while rest and rest[0].casefold() in _QUESTION_WORDS:
        rest.pop(0)
    if rest and rest[0].casefold() in ("kind", "type", "sort") and len(rest) > 1:
        rest = rest[2:] if rest[1].casefold() == "of" else rest[1:]
    asked: list[str] = []
    while rest and rest[0].casefold() not in _AUXILIARIES and len(asked) < _MAX_ASKED:
        asked.append(rest.pop(0))
    if not rest or rest[0].casefold() not in _AUXILIARIES or len(rest) < 3:
        return " ".join(asked + rest)
    auxiliary, subject = rest[0].casefold(), _subject(rest[1:])
    tail = rest[1 + len(subject) :]
    while tail and tail[0].casefold() in _ADVERBS:
        tail.pop(0)
    if auxiliary in _BE or not tail:
        return " ".join([*subject, auxiliary, *tail, *asked])
    verb, tail = tail[0], tail[1:]
    if auxiliary == "did":
        verb = _past(verb)
    elif auxiliary == "does":
        verb = _third_person(verb)
    elif auxiliary != "do":
        verb = f"{auxiliary} {verb}"
    return " ".join([*subject, verb, *tail, *asked])


def _subject(words: list[str]) -> list[str]:
    """The subject at the start of ``words``: a word, or a possessive or determiner phrase."""
    end = 1
    while end < len(words) and (
        words[end - 1].casefold() in _DETERMINERS or words[end - 1].endswith(("'s", "s'"))
    ):
        end += 1
    return words[:end]


def _past(verb: str) -> str:
    low = verb.casefold()
    if low in _PAST:
        return _PAST[low]
    if low.endswith("ed"):
        return verb
    if low.endswith("e"):
        return verb + "d"
    if low.endswith("y") and low[-2:-1] not in ("a", "e", "i", "o", "u"):
        return verb[:-1] + "ied"
    return verb + "ed"


def _third_person(verb: str) -> str:
    low = verb.casefold()
    if low in _THIRD_PERSON:
        return _THIRD_PERSON[low]
    if low.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    if low.endswith("y") and low[-2:-1] not in ("a", "e", "i", "o", "u"):
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
