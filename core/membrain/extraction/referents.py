"""Third-person pronouns resolved to the relative they stand for, with no LLM.

A fact must stand on its own: "he's not in São Paulo any more" says nothing once stored. A
relative introduced by a gendered relation word ("my brother Rafael", "Kasia's sister Magda",
"our son Leo") is the person a later "he" or "she" of the same batch stands for, the latest one
of that gender winning. Only subject pronouns and "his" are rewritten ("he's" -> "[Rafael]'s",
"his clinic" -> "[Rafael]'s clinic"); "her" (object or possessive) and a pronoun with no
introduced relative of its gender stay as they are.

Example:
    >>> people = Referents()
    >>> people.resolve("My brother Rafael is a dentist.")
    'My brother Rafael is a dentist.'
    >>> print(people.resolve("He opened his own clinic in Campinas."))
    [Rafael] opened [Rafael]'s own clinic in Campinas.
"""

from __future__ import annotations

import re

__all__ = ["Referents"]

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
