"""Current beliefs first: for a question about now, a later statement outranks the earlier one.

Supersession retires a fact only when the extraction saw the change (:mod:`.replaced`). When it
did not (the two statements came in one batch, the match was uncertain and waits for review, or
a plan changed: "the Japan trip is pushed to October"), both facts stay active and the earlier
one often matches the question better, word for word. For a question about the present, a fact
is moved just above the highest-ranked earlier fact it disagrees with, on what the question is
about:

* an attribute the question asks for (:func:`asked_attributes`): the same single-valued
  attribute of the same subject with another value, or its end
  (:mod:`membrain.extraction.attributes`);
* a plan the question names: the later fact says in its own words that the plan was postponed,
  moved, cancelled, put on hold or pulled out of, and shares a name or a topic word near those
  words with an earlier fact that is a plan (it has a time or a plan word): "[Sofia] has a
  solo recital in March" then "the recital is postponed to May".

Then a question asking for an attribute ("Where does Maya live?", "What does Daniel do for
work?", "What car does Lucia drive?") gets, first, the latest fact among the results that
states it of the person it names: by a claim, or, for wording no pattern reads, by the
attribute's plain words in a clause that opens with the person ("Ethan is loving the new job
at Cascade").

A question about the past ("Where did Maya live before?", "What was ...", one naming a time)
keeps the fused order: the earlier fact may be its answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TypeVar

from membrain.api.models import Fact
from membrain.extraction.attributes import SINGLE_VALUED, Claim, claims
from membrain.temporal import plain_text

__all__ = ["asked_attributes", "asks_now", "current_first", "disagree"]

T = TypeVar("T")

_PAST = re.compile(
    r"\b(?:did|was|were|had|used to|before|previously|originally|at first|first|earlier"
    r"|former|formerly|old|ago|back then|until|last|history|ever)\b",
    re.IGNORECASE,
)
_CHANGED = (
    r"postponed|pushed(?: back)?|moved|delayed|rescheduled|cancel(?:l)?ed|called off|put off"
    r"|scrapped|shelved|brought forward"
)
_CHANGE = re.compile(
    rf"\b(?:is|was|got|has been|have been|been|are|were|now) (?:{_CHANGED})\b"
    rf"|\b(?:postponed|pushed|moved|put off|delayed|rescheduled|brought) (?:the|our|his|her"
    rf"|their|my) (?:[\w'’-]+ ){{0,4}}?(?:to|until|back|forward)\b"
    rf"|\b(?:trip|plan|plans|wedding|recital|conference|event|party|move)s? (?:{_CHANGED})\b"
    r"|\b(?:scrapped|cancel(?:l)?ed|called off|shelved|ditched|postponed|dropped) (?:the|our|his"
    r"|her|their|my) (?:[\w'’-]+ ){0,3}?(?:trip|plan|plans|party|wedding|recital|concert|show"
    r"|conference|holiday|vacation|visit|move|event|tour|race|marathon)\b"
    r"|\b(?:is|are|was|were) (?:off|on hold)\b|[\w]['’]s (?:off|on hold)\b"
    r"|\bput (?:[\w'’-]+ ){0,4}?on hold\b"
    r"|\b(?:pulled|dropped) out of\b|\bcalled (?:[\w'’-]+ ){0,4}?off\b|\bfell through\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(?:plan|plans|planning|planned|going to|will|'ll|’ll|next|upcoming|training for"
    r"|booked|scheduled|looking at|thinking of|preparing|signed up|registered|trip|holiday"
    r"|vacation|wedding|party|conference|summit|visit|concert|tour|race|marathon|recital"
    r"|january|february|march|april|june|july|august|september|october|november|december)\b",
    re.IGNORECASE,
)
_AROUND = 6
"""Words on either side of a change of plan that name what changed."""
_CLAUSE = re.compile(r"[.!?;]\s+")
_WORD = re.compile(r"[A-Za-z][\w'’-]*")
_COMMON = frozenset(
    """
    about after again also because been before being both could does doing during every from
    have having into just like made make more most much next only other over really same
    since some still such than that their them then there these they this those though
    through until very what when where which while will with would your year years month
    months week weeks today tomorrow yesterday because instead anyway actually others
    companion together everyone someone people thing things pretty always never great
    """.split()
)
_TOPIC_MIN = 4
_ASKS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), attributes)
    for pattern, attributes in (
        (
            r"\bwhere (?:does|do|is) [\w'’ ]{1,40}? (?:live|living|based|staying)\b"
            r"|\bwhich (?:city|country|town)\b|\bwhere\b.*\bhome\b",
            ("residence",),
        ),
        (
            r"\bwho does [\w'’ ]{1,40}? work for\b|\bwhere (?:does|do|is) [\w'’ ]{1,40}? work"
            r"|\bemployer\b|\bwhich company\b",
            ("employer", "occupation"),
        ),
        (
            r"\bwhat (?:does|do) [\w'’ ]{1,40}? do(?: for (?:work|a living)| now)?\s*\?"
            r"|\b(?:job|occupation|profession|career|rank|job title)\b|\bwork as\b",
            ("occupation", "employer"),
        ),
        (
            r"\bwho (?:is|are) [\w'’ ]{1,40}? (?:dating|seeing|with|married to|engaged to)\b"
            r"|\b(?:partner|girlfriend|boyfriend|husband|wife|fianc[ée]e?)\b",
            ("partner",),
        ),
        (
            r"\b(?:which|what) (?:school|college|university|uni|varsity)\b"
            r"|\bwhere (?:does|do|is) [\w'’ ]{1,40}? (?:study|studying|go to school|at school)\b"
            r"|\bwhat (?:does|do|is) [\w'’ ]{1,40}? (?:study|studying)\b",
            ("school",),
        ),
        (r"\bdiet\b|\bvegan\b|\bvegetarian\b|\bpescatarian\b|\bwhat does \w+ eat\b", ("diet",)),
        (
            r"\b(?:car|scooter|motorbike|motorcycle|bike|vehicle)\b|\b(?:drives?|rides?)\b",
            ("car",),
        ),
        (r"\b(?:phone|smartphone|mobile)\b", ("phone",)),
    )
)
_CLAUSES = re.compile(
    r"[.!?;:]\s+|,\s+(?=(?:but|and|so|though|then)\b)"
    r"|,\s+(?=[A-Z][\w'’-]* (?:and others )?(?:is|are|was|has|have|just|now|finally|also)\b)"
)
_OPENERS = frozenset(
    "also and but so then now oh anyway well yes ok okay plus still just big huge news update "
    "actually btw meanwhile though um uh er erm hmm honestly confession".split()
)
_HYPOTHETICAL = re.compile(
    r"(?i:\b(?:not|never|might|maybe|perhaps|could|would|should|if|whether|thinking|considering"
    r"|wants?|hopes?|hoping|plans?|planning|going to|will)\b|n't\b|n’t\b|'ll\b|’ll\b)"
)
_EMPLOYER = (
    r"\b(?:works?|working|started|job|position|role|internship) (?:at|for|with) (?:the )?[A-Z]"
    r"|\b(?:is|are) (?:now )?at [A-Z]\w+ now\b|\b(?:hired|laid off|let go|fired|resigned)\b"
)
_OCCUPATION = (
    r"\b(?:works?|working|started|hired|job|position|role|promoted) (?:as|to) an? \w+"
    r"|\b(?:laid off|let go|fired|resigned)\b"
)
_CUES: dict[str, re.Pattern[str]] = {
    attribute: re.compile(pattern)
    for attribute, pattern in (
        ("residence", r"\b(?:lives?|living|lived|moved|relocated|settled|based)\b|\bhome is\b"),
        ("employer", _EMPLOYER),
        ("occupation", _OCCUPATION),
        (
            "partner",
            r"\b(?:dating|girlfriend|boyfriend|partner|husband|wife|fianc\w*|together|married"
            r"|engaged|broke up|split|ended things|seeing|relationship|single)\b",
        ),
        (
            "diet",
            r"\b(?:vegan|vegetarian|pescatarian|keto|paleo|diet|meat|dairy|gluten|plant-based)\b",
        ),
        (
            "school",
            r"\b(?:school|college|university|uni|varsity|studying|studies|enrolled|student"
            r"|course|degree|class)\b",
        ),
        ("car", r"\b(?:car|drives?|driving|rides?|riding|scooter|motorbike|bike)\b"),
        ("phone", r"\b(?:phone|mobile|smartphone|iPhone|Pixel|Galaxy)\b"),
    )
}
_CALENDAR = frozenset(
    """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday i i'm i've oh also and but
    """.split()
)


def asks_now(question: str) -> bool:
    """Whether ``question`` asks about the present (no past tense, no "before", no "first")."""
    return _PAST.search(question) is None


def asked_attributes(question: str) -> tuple[str, ...]:
    """The single-valued attributes a question asks for, most likely first (may be none)."""
    for pattern, attributes in _ASKS:
        if pattern.search(question):
            return attributes
    return ()


def current_first(
    items: Sequence[T],
    fact_of: Callable[[T], Fact | None],
    people: Collection[str] = (),
    question: str = "",
) -> list[T]:
    """``items`` (best first) with each fact above the earlier ones it disagrees with.

    Only disagreements the question is about count: on an attribute it asks for, or on a plan
    it names. ``people`` (the scope's participants) are names that tell no topic apart;
    ``question``, when it asks for a single-valued attribute, puts the latest fact stating it
    first.
    """
    order = list(items)
    facts = [fact_of(i) for i in order]
    about = _About(asked_attributes(question), _words(question))
    if not about.attributes and not any(
        f is not None and _CHANGE.search(plain_text(f.text)) for f in facts
    ):
        return order  # nothing to reorder: spare reading every fact on the hot path
    ignored = {p.casefold() for p in people}
    readings = {id(f): _Reading(f, ignored) for f in facts if f is not None}
    for _ in range(len(order)):
        moved = False
        for j in range(1, len(order)):
            later = facts[j]
            if later is None:
                continue
            above = next(
                (
                    i
                    for i in range(j)
                    if facts[i] is not None
                    and _earlier(facts[i], later)  # type: ignore[arg-type]
                    and readings[id(facts[i])].disagrees(readings[id(later)], about)
                ),
                None,
            )
            if above is not None:
                order.insert(above, order.pop(j))
                facts.insert(above, facts.pop(j))
                moved = True
                break
        if not moved:
            break
    return _asked_first(order, facts, readings, question)[0]


@dataclass(frozen=True, slots=True)
class _About:
    """What a question is about: the attributes it asks for, its words."""

    attributes: tuple[str, ...] = ()
    words: frozenset[str] | None = None
    """``None``: any plan counts."""


def _asked_about(question: str) -> set[str]:
    """The words naming whom a question asks about: "Daniel's brother Chidi" is Chidi."""
    words = _WORD.findall(question)
    owners = {w.casefold()[:-2] for w in words if w[:1].isupper() and w.endswith(("'s", "’s"))}
    named = {w.casefold() for w in words if w[:1].isupper() and not w.endswith(("'s", "’s"))}
    named -= {w.casefold() for w in words[:1]}
    return (named or owners) | {w.casefold() for w in words if w.islower()}


def _words(text: str) -> frozenset[str]:
    words = {w.casefold().removesuffix("'s").removesuffix("’s") for w in _WORD.findall(text)}
    return frozenset(words | {part for w in words if "-" in w for part in w.split("-")})


def _asked_first(
    order: list[T], facts: list[Fact | None], readings: dict[int, _Reading], question: str
) -> tuple[list[T], list[Fact | None]]:
    """The latest fact stating (or ending) the asked attribute of the asked person, moved first."""
    asked = asked_attributes(question)
    named = _asked_about(question)
    for attribute in asked:
        stating = [
            (f.stated_at, strength, -i, i)
            for i, f in enumerate(facts)
            if f is not None and (strength := readings[id(f)].states(attribute, named))
        ]
        if stating:
            latest = max(stating)[-1]
            order.insert(0, order.pop(latest))
            facts.insert(0, facts.pop(latest))
            break
    return order, facts


def disagree(earlier: Fact, later: Fact, people: Collection[str] = ()) -> bool:
    """Whether ``later`` (stated after ``earlier``) states something ``earlier`` no longer is."""
    ignored = {p.casefold() for p in people}
    about = _About(SINGLE_VALUED)
    return _earlier(earlier, later) and _Reading(earlier, ignored).disagrees(
        _Reading(later, ignored), about
    )


def _earlier(first: Fact, second: Fact) -> bool:
    return first.stated_at < second.stated_at


class _Reading:
    """What the ranking compares of one fact."""

    __slots__ = ("changed", "claims", "cued", "names", "plan", "topic")

    def __init__(self, fact: Fact, people: set[str]) -> None:
        text = plain_text(fact.text)
        self.claims: list[Claim] = claims(fact.text)
        self.plan = bool(fact.times) or "::" in fact.text or _PLAN.search(text) is not None
        ignored = people | {c.subject for c in self.claims} | _CALENDAR
        self.names, self.topic = _named(text, ignored)
        self.cued = _cued(text)
        self.changed: tuple[set[str], set[str]] = (set(), set())
        for clause in _CLAUSE.split(text):
            for match in _CHANGE.finditer(clause):
                preceding = clause[: match.start()].split()
                before, after = preceding[-_AROUND:], clause[match.end() :].split()[:_AROUND]
                said = " ".join([*before, match.group(0), *after])
                names, topic = _named(said, ignored, first=len(preceding) <= _AROUND)
                self.changed[0].update(names)
                self.changed[1].update(topic)

    def states(self, attribute: str, named: set[str]) -> int:
        """How firmly the fact states ``attribute`` of a person ``named`` (0: it does not).

        3: a claim of a value (:mod:`membrain.extraction.attributes`); 2: a claim ending one;
        1: for wording the claims do not read, the attribute's words in a clause that opens
        with the person and changes no plan ("Ethan is loving the new job at Cascade", not
        "Tom and Jana moved the wedding because of Tom's new job"). Of facts stated at the same
        time, the firmer comes first.
        """
        own = [
            c for c in self.claims if c.attribute == attribute and set(c.subject.split()) & named
        ]
        if own:
            return 2 if all(c.ends for c in own) else 3
        return int(any(attribute in cues and subjects & named for subjects, cues in self.cued))

    def disagrees(self, later: _Reading, about: _About) -> bool:
        for new in later.claims:
            if new.attribute not in about.attributes:
                continue
            for old in self.claims:
                if old.ends or (old.subject, old.attribute) != (new.subject, new.attribute):
                    continue
                if new.ends or old.value != new.value:
                    return True
        names, topic = later.changed
        if not self.plan or not (names or topic):
            return False
        if about.words is not None and not (names | topic) & about.words:
            return False
        return bool(self.names & names or self.topic & topic)


def _cued(text: str) -> list[tuple[set[str], set[str]]]:
    """Per affirmative clause, the names it opens with and the attributes whose words it has.

    "Sam and Ethan are together now" opens with Sam and Ethan; "Zofia's brother Kuba moved"
    opens with no name of a person it is about (Zofia only owns the brother).
    """
    out = []
    for clause in _CLAUSES.split(text):
        if _HYPOTHETICAL.search(clause):
            continue
        words = clause.split()
        while words and words[0].strip(",:").casefold() in _OPENERS:
            words.pop(0)
        subjects: set[str] = set()
        expect_name = True
        for word in words:
            token = word.strip(",:!?\"'")
            if expect_name and token[:1].isupper() and not token.endswith(("'s", "’s")):
                subjects.add(token.casefold())
                expect_name = False
            elif not expect_name and token.casefold() == "and":
                expect_name = True
            else:
                break
        if _CHANGE.search(clause):
            continue
        cues = {a for a, cue in _CUES.items() if cue.search(clause)}
        if subjects and cues:
            out.append((subjects, cues))
    return out


def _named(text: str, ignored: set[str], *, first: bool = True) -> tuple[set[str], set[str]]:
    """The names (capitalised words not opening ``text``) and topic words of ``text``."""
    words = _WORD.findall(text)
    names = {
        w.casefold().removesuffix("'s").removesuffix("’s")
        for i, w in enumerate(words)
        if (i > 0 or not first) and w[:1].isupper()
    } - ignored
    topic = {
        part
        for w in words
        if len(w) > _TOPIC_MIN and w.islower() and w.casefold() not in _COMMON
        for part in {w.casefold().rstrip("'’"), *w.casefold().split("-")}
        if len(part) > 1
    }
    return names, topic
