"""Whom a user's statement is about: pronouns resolved, and the user where no one is named.

A fact must stand on its own: "he's not in São Paulo any more" says nothing once stored. A
relative introduced by a gendered relation word ("my brother Rafael", "Kasia's sister Magda",
"our son Leo") is the person a later "he" or "she" of the same batch stands for, the latest one
of that gender winning. Only subject pronouns and "his" are rewritten ("he's" -> "[Rafael]'s",
"his clinic" -> "[Rafael]'s clinic"); "her" (object or possessive) and a pronoun with no
introduced relative of its gender stay as they are.

In a chat with an assistant the user speaks of themself: a terse statement that opens with a
verb ("Left Stripe, started at Cloudflare Monday") has the user as subject
(:func:`implied_speaker`), and one that states an attribute but names nobody says it is the
user's (:func:`about_speaker`: "[Helen]: Fairphone 5 now.").

Example:
    >>> people = Referents()
    >>> people.resolve("My brother Rafael is a dentist.")
    'My brother Rafael is a dentist.'
    >>> print(people.resolve("He opened his own clinic in Campinas."))
    [Rafael] opened [Rafael]'s own clinic in Campinas.
"""

from __future__ import annotations

import re

from membrain.extraction.attributes import DETECTED
from membrain.extraction.detector import packaged_detector

__all__ = ["BASE_VERBS", "Referents", "about_speaker", "implied_speaker"]

_BRACKETED = re.compile(r"\[[^\[\]]*\]")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
BASE_VERBS = frozenset(
    """
    love like want need think feel go do have run make take get work live play hope plan
    know see try enjoy miss remember use wish teach volunteer bake paint cook write read
    study watch believe guess mean agree prefer adore hate own keep visit help spend
    practice train collect start dream am don't
    """.split()
)
"""Present verbs in their base form ("I love" -> "[Sara] loves")."""

# A user's sentence opening with a verb has the speaker as its subject ("Left Stripe, started at
# Cloudflare Monday"): the past tense, a present verb, or "-ing" ("living in Galway now").
_PAST = frozenset(
    """
    got went took made left quit sold bought became began found joined started moved switched
    landed signed resumed relocated shifted ditched dropped traded upgraded dumped married
    met finished graduated enrolled transferred settled rented leased flogged picked grabbed
    won lost broke split gave kept spent sent drove rode flew ate wrote built paid
    """.split()
)
_SUBJECTLESS = re.compile(
    r"^(?P<adverb>(?:(?i:just|finally|recently|also|now|officially|actually|literally|basically"
    r"|still|already|newly)\s+)*)(?P<verb>[A-Za-z]+(?:in'?|ing|ed)|[A-Za-z]+)\b(?P<rest>.*)$",
    re.DOTALL,
)

_MALE = frozenset(
    """
    brother son dad father husband boyfriend fiance fiancé grandpa grandfather granddad uncle
    nephew stepdad stepfather stepson stepbrother
    """.split()
)
_FEMALE = frozenset(
    """
    sister daughter mom mum mother wife girlfriend fiancee fiancée grandma grandmother granny
    aunt niece stepmom stepmum stepmother stepdaughter stepsister
    """.split()
)
_INTRODUCED = re.compile(
    r"\b(?:[Mm]y|[Oo]ur|[A-Z][\w-]*(?:'s|’s))"
    r" (?:(?:little|big|younger|older|elder|eldest|youngest|baby|twin|kid|new) )?"
    r"(?P<relation>[a-zé]+),? (?P<name>[A-Z][a-zà-ÿ]+(?:-[A-Z][a-zà-ÿ]+)?)\b"
)
_PRONOUNS = {
    "he": re.compile(r"\b(?P<p>[Hh]e)\b(?P<c>['’](?:s|ll|d))?(?![\w'’-])|\b(?P<his>[Hh]is)\b"),
    "she": re.compile(r"\b(?P<p>[Ss]he)\b(?P<c>['’](?:s|ll|d))?(?![\w'’-])"),
}
_BRACKETED = re.compile(r"\[[^\[\]]*\]")


class Referents:
    """The latest relative of each gender introduced so far in one batch of messages."""

    def __init__(self) -> None:
        self._latest: dict[str, str] = {}

    def resolve(self, sentence: str) -> str:
        """``sentence`` with its pronouns replaced, after noting the relatives it introduces."""
        for match in _INTRODUCED.finditer(sentence):
            relation = match.group("relation").casefold()
            if relation in _MALE:
                self._latest["he"] = match.group("name")
            elif relation in _FEMALE:
                self._latest["she"] = match.group("name")
        for pronoun, pattern in _PRONOUNS.items():
            name = self._latest.get(pronoun)
            if name is not None:
                sentence = _outside_brackets(sentence, pattern, name)
        return sentence


def _outside_brackets(text: str, pattern: re.Pattern[str], name: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group("p") is None:
            return f"[{name}]'s"
        contraction = match.group("c") or ""
        return f"[{name}]{contraction}"

    out: list[str] = []
    start = 0
    for bracket in _BRACKETED.finditer(text):
        out.append(pattern.sub(replace, text[start : bracket.start()]))
        out.append(bracket.group(0))
        start = bracket.end()
    out.append(pattern.sub(replace, text[start:]))
    return "".join(out)


def about_speaker(text: str, speaker: str) -> str:
    """A user's fact that states an attribute but does not name the user, given the user.

    "Fairphone 5 now." -> "[Helen]: Fairphone 5 now." In a chat with an assistant the user
    speaks of themself and their life: a terse statement of where they live, work... that
    names nobody is theirs, and one that names someone else still says who told it. A fact
    stating no attribute is left as it is (small talk stays hard to find).
    """
    own = speaker.casefold()
    if any(own in ref.casefold().split("'")[0] for ref in _BRACKETED.findall(text)):
        return text
    detector = packaged_detector()
    if max(detector.stated(s)[1] for s in _SENTENCE.split(text.strip())) < DETECTED:
        return text
    return f"[{speaker}]: {text}"


def implied_speaker(sentence: str) -> str:
    """A user's sentence opening with a verb, given the speaker as its subject.

    Used where the detector reads the result as perhaps stating an attribute (half its claim
    confidence): small talk ("Just kidding") stays as it is.

    "Left Stripe, started at Cloudflare Monday" -> "I left Stripe, ..."; "living in Galway now"
    -> "I'm living in Galway now". A question, or a word that is not a verb form, is left alone.
    """
    match = _SUBJECTLESS.match(sentence)
    if match is None or sentence.rstrip().endswith("?") or not _WORD.search(match.group("rest")):
        return sentence
    verb = match.group("verb")
    folded = verb.casefold()
    if verb[1:] != verb[1:].lower():
        return sentence
    if folded.endswith(("ing", "in", "in'")) and len(folded) >= 5 and folded not in _NOT_VERBS:
        subject = "I'm"
    elif folded in _PAST or (folded.endswith("ed") and len(folded) >= 5) or folded in BASE_VERBS:
        if folded in _NOT_VERBS:
            return sentence
        subject = "I"
    else:
        return sentence
    adverb = match.group("adverb")
    return f"{subject} {adverb.casefold()}{folded}{match.group('rest')}"


_NOT_VERBS = frozenset(
    """
    nothing something anything everything morning evening mornin evenin during thing king
    ring spring string wedding building ceiling darling pudding sibling ceilin bed red need
    seed shed speed weed feed breed wicked naked sacred hundred cousin robin cabin basin raisin
    origin margin begin within main again certain captain mountain curtain brain train
    chain rain plain gain pain domain terrain bargain garden cotton button
    """.split()
)
