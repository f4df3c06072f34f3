"""Single-valued attributes of a person, read from fact texts with no LLM.

A person lives in one place, works for one employer, holds one occupation, has one partner,
follows one diet, drives one car (or rides one scooter or bike) and carries one phone at a
time: a new statement of one of these (:data:`SINGLE_VALUED`) makes an earlier, different one
no longer true. :func:`claims` reads what a fact states of them; :func:`replaced` decides which
earlier facts a new fact replaces, for sure or only perhaps (then a person should review it).

A claim is read only from an affirmative statement about a named subject: nothing is read from
a question, a negation ("Sara doesn't live in Leeds") or a hypothetical or future ("Sara might
move to Porto", "Sara will move to Porto", "if Sara moved ..."). A subject is the name right
before the verb ("Maya's sister Ana is a nurse" is about Ana); "Sara and others" (the offline
reading of "we") is about Sara, "Sara and Tom" about both. Values are compared by their words:
the same words restate, shared words (Deloitte, Deloitte Digital) are uncertain, no shared word
is a change.

Example:
    >>> [(c.subject, c.attribute, c.value) for c in claims("[Maya] moved to [Vancouver].")]
    [('maya', 'residence', 'vancouver')]
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache, partial

from membrain.extraction.detector import PHONE_MAKES, VEHICLE_MAKES, packaged_detector
from membrain.temporal import plain_text

__all__ = [
    "SINGLE_VALUED",
    "Claim",
    "Replacement",
    "claim_key",
    "claims",
    "held_keys",
    "pattern_claims",
    "replaced",
]

SINGLE_VALUED = ("residence", "employer", "occupation", "school", "partner", "diet", "car", "phone")
"""The attributes a person holds one value of at a time."""

DETECTED = 0.5
"""The detector's confidence from which a sentence it reads states an attribute
(:mod:`membrain.extraction.detector`, after the patterns); below :data:`DETECTED_STRONG` such a
claim is only implied, so a change it signals queues for review instead of superseding."""
DETECTED_STRONG = 0.85
"""The detector's confidence from which its claim counts as said outright (it may supersede)."""

MAX_UNREAD = 3
"""Content words a known fact may hold beyond its claims and still be superseded for sure."""
ANY = "*"
"""The value of an ending claim that names no value ("Sara quit her job")."""


@dataclass(frozen=True, slots=True)
class Claim:
    """What a fact states of one single-valued attribute of one subject."""

    subject: str
    """The subject's name, case-folded."""
    attribute: str
    """One of :data:`SINGLE_VALUED`."""
    value: str
    """The value, case-folded, articles dropped; :data:`ANY` for an end naming none."""
    ends: bool = False
    """The statement ends the value ("quit keto", "sold the Audi") instead of stating one."""
    strong: bool = True
    """Said outright ("drives a Civic"); ``False`` when only implied ("Sara's Civic")."""


@dataclass(frozen=True, slots=True)
class Replacement:
    """Known facts a new fact replaces: ``certain`` ones, and ``uncertain`` ones to review."""

    certain: tuple[str, ...] = ()
    uncertain: tuple[str, ...] = ()


_NAME = r"[A-Z][\w'’&.-]*(?: (?:&|de|of|the) [A-Z][\w'’.-]*| [A-Z][\w'’&.-]*)*"
_LEAD = frozenset(
    "also and but now so then oh anyway because plus still just well yes guess big huge news "
    "update okay ok actually btw meanwhile finally um uh er erm hmm honestly confession it he "
    "she they this that there here".split()
)
_SUBJECT = rf"(?P<s>{_NAME})(?: and (?:others|a companion|(?P<s2>{_NAME})))?,?"
_ADV = (
    r"(?: (?:now|just|finally|recently|officially|also|still|already|actually|since|has|have"
    r"|had|'s|’s))*"
)
_VALUE = rf"(?:the )?(?P<v>{_NAME})"
_DEVICE = (
    r"(?:an? |the |(?:his|her|their) |[A-Z]\w*'s )?(?:(?:new|old|used|shiny|wee|little|second-hand"
    r"|secondhand|red|blue|black|white|silver|grey|gray|green) )*"
    r"(?P<v>[A-Za-z][\w-]*(?: [A-Z0-9][\w-]*)*)"
)
_ROLE = r"(?P<v>[a-z][\w-]*(?: [a-z][\w-]*){0,3}?)"
_OCCUPATIONS = frozenset(
    """
    accountant actor actress administrator agent analyst architect artist assistant associate
    attorney baker barista coordinator dispatcher intern planner postdoc specialist tester
    bartender biologist builder butcher carpenter cashier cellist chef chemist cleaner clerk
    coach consultant cook counsel counsellor counselor dancer dentist designer developer
    director doctor driver economist editor electrician engineer farmer firefighter
    freelancer gardener guide hairdresser historian instructor journalist judge lawyer
    lecturer librarian manager mechanic midwife musician nanny nurse officer paramedic
    pharmacist photographer physician physiotherapist pianist pilot plumber poet policeman
    politician professor programmer psychologist researcher scientist secretary singer
    student surgeon tailor teacher technician therapist translator tutor veterinarian vet
    violinist waiter waitress writer
    """.split()
)
_OCCUPATION_WORDS = "|".join(sorted(_OCCUPATIONS))
_DIETS = (
    r"vegan|vegetarian|pescatarian|pescetarian|keto|paleo|carnivore|flexitarian|gluten-free"
    r"|dairy-free|low-carb|whole30|raw vegan|plant-based"
)
_CAR_MAKES = VEHICLE_MAKES
_PHONE_MAKES = PHONE_MAKES
_PARTNERS = r"girlfriend|boyfriend|partner|husband|wife|fianc[ée]e?|spouse"
_NEGATION = re.compile(
    r"(?i:\b(?:not|never|no longer|might|maybe|perhaps|could|would|should|if|whether|unless"
    r"|considering|thinking|consider|wants?|wanted|hopes?|hoping|dreams?|wish(?:es)?|plans?"
    r"|planning|going to|gonna|will|about to|someday|one day|instead of)\b"
    r"|n't\b|n’t\b|'ll\b|’ll\b|'d\b|’d\b)|\bmay\b"
)
_WORD = re.compile(r"[A-Za-z][\w'’-]*")
_FILLER = frozenset(
    """
    a an the and or but so of to in on at by for with from as is are was were be been am has
    have had do does did it its it's this that these those there here he she they him her his
    their them i me my we us our you your also just now still really very too then oh well
    others other again since though
    """.split()
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_CARRIED_VERB = re.compile(
    r"\s+and\s+(?=(?:got|bought|moved|joined|started|switched|became|works|lives|drives)\b)"
)
_FIRST_SUBJECT = re.compile(
    rf"(?:^|[:,]\s+|\b(?:so|and|but|then) )(?P<s>{_NAME})(?: and others)? [a-z]"
)


def _rules() -> tuple[tuple[str, bool, bool, re.Pattern[str]], ...]:
    """(attribute, ends, strong, pattern) for every reading."""
    s, a, v, role = _SUBJECT, _ADV, _VALUE, _OCCUPATION_WORDS
    jobs = (
        "job|firm|company|pharmacy|hospital|practice|agency|office|restaurant|bistro|startup"
        "|store|shop|cafe|café|bakery|clinic|bank|factory|warehouse|garage|salon|studio|lab"
    )
    split = "broke up|split up|split|separated|divorced|ended things|called it quits"
    together = r"(?:together|a couple|dating|engaged|married|official)\b"
    agent = (
        r"(?!member|customer|regular|visitor|guest|user|subscriber|fan)"
        r"[a-z]+(?:er|or|ist|ian|ant|ent)"
    )
    model = r"(?:[A-Za-z][\w-]*(?: [A-Z0-9][\w-]*)*)"
    # fmt: off
    table: list[tuple[str, bool, bool, str]] = [
        ("residence", False, True,
         rf"{s}{a} (?:lives?|is living|are living|been living|resides?) (?:alone |together )?in "
         rf"(?:an? [a-z -]{{0,30}}? in )?{v}"),
        ("residence", False, True,
         rf"{s}{a} (?:has |have |had )?(?:just |finally |recently |now |also )*"
         rf"(?:moved|relocated|shifted|transferred|made the move) (?:back |down |up |over |out "
         rf"|across |away )?(?:from (?:the )?{_NAME} )?to {v}"),
        ("residence", False, False,
         rf"{s}{a} (?:got|found|bought|rented|have|has) (?:an? |the |(?:his|her|their) )"
         rf"(?:little |new |small |tiny |lovely )?(?:place|flat|house|apartment|home|condo) "
         rf"in {v}"),
        ("residence", False, True, rf"{s}{a} (?:(?:is|are){a} )?(?:settled|based) in {v}"),
        ("residence", False, True,
         rf"{s}{a} (?:(?:is|are|has|have){a} )?(?:settled|moved) into (?:an? |the |(?:his|her"
         rf"|their) )(?:[a-z]+ ){{0,2}}(?:place|flat|house|apartment|home|condo) in {v}"),
        ("employer", False, True,
         rf"{s}{a} (?:works?|is working) (?:as [a-z -]{{1,40}} )?(?:at|for) {v}"),
        ("employer", False, True,
         rf"{s}{a} (?:got hired|was hired|has been hired|got a job|started working"
         rf"|started a job|started|joined|is joining)(?: as [a-z -]{{1,40}}?)? (?:at |with |by )?"
         rf"(?:an? [a-z -]{{1,30}}? (?:called|named) )?{v}"),
        ("employer", False, True,
         rf"{s}{a} (?:is|are){a} (?:an? |the )?(?:[\w-]+ ){{0,3}}(?:{role}|{agent})s? "
         rf"(?:at|for|with) {v}"),
        ("employer", False, True, rf"{s}{a} teach(?:es)? [a-z ]{{1,30}} at {v}"),
        ("employer", False, False, rf"{s}{a} (?:is|are){a} at {v} now\b"),
        ("employer", False, True,
         rf"{s}{a} (?:has been|was|got|have been) (?:poached|head-?hunted|hired|recruited) by {v}"),
        ("employer", False, True,
         rf"{v} (?:poached|head-?hunted|hired|recruited|snapped up) (?P<s>{_NAME})\b"),
        ("employer", False, True,
         rf"(?P<s>{_NAME})(?:'s|’s) new (?:job|role|position|gig) (?:is )?(?:at|with) {v}"),
        ("employer", True, True, rf"{s}{a} (?:left|quit) {v}"),
        ("employer", True, True, rf"{s}{a} (?:is|are){a} no longer (?:at|with|working at) {v}"),
        ("employer", True, True,
         rf"{s}{a} (?:left|quit) (?P<v>(?:the|her|his|their) (?:[a-z]+ )?(?:{jobs}|school))\b"),
        ("occupation", False, True,
         rf"{s}{a} (?:works?|is working|got hired|was hired|started working|started"
         rf"|joined [^.,]{{1,40}}?) as (?:an? |the )?{_ROLE}(?= at| for| in|,|\.|!|$| and)"),
        ("occupation", False, True,
         rf"{s}{a} (?:is|are){a} (?:an? |the )?(?P<v>(?:[\w-]+ ){{0,2}}?{agent})s? (?:at|for) "
         rf"(?:the )?[A-Z]"),
        ("occupation", False, True,
         rf"{s}{a} (?:is|are){a} (?:an? |the )?"
         rf"(?P<v>(?:(?!as |working )[\w-]+ ){{0,3}}?(?:{role}))\b"),
        ("occupation", True, True,
         rf"{s}{a} (?:quit|left|gave up|stopped) "
         rf"(?P<v>teaching|nursing|(?:the|her|his|their) (?:{jobs}|school))\b"),
        ("occupation", False, True,
         rf"{s}{a} (?:is|are){a} (?P<v>freelancing|self-employed|unemployed|retired"
         rf"|between jobs|job-hunting|out of work)\b"),
        ("occupation", False, True,
         rf"\b(?:promoted|made) (?P<s>{_NAME}) (?:to )?(?:an? |the )?{_ROLE}"
         rf"(?= at| on| for| last| this|,|\.|!|$)"),
        ("partner", False, False, rf"(?P<s>{_NAME})(?:'s|’s) (?:{_PARTNERS}),? {v}"),
        ("partner", False, True,
         rf"{s}{a} (?:is|are|has been|have been){a} (?:seeing|dating|engaged to|married to"
         rf"|in a relationship with) {v}"),
        ("partner", False, True,
         rf"{s}{a} (?:has |have )?(?:started|began|been) (?:dating|seeing) "
         rf"(?:someone(?: new)?, (?:his|her|their) name is )?{v}"),
        ("partner", False, True,
         rf"{s}{a} (?:has|have|got)(?: got)? an? (?:new )?(?:{_PARTNERS})(?: now)?,? "
         rf"(?:(?:called|named) )?{v}"),
        ("partner", False, True, rf"{s}{a} (?:is|are){a} (?P<v>single)\b"),
        ("partner", False, True, rf"{v} and (?P<s>{_NAME}) (?:are|have been){a} {together}"),
        ("partner", False, True, rf"(?P<s>{_NAME}) and {v} (?:are|have been){a} {together}"),
        ("partner", True, True, rf"{v} and (?P<s>{_NAME}) (?:{split})"),
        ("partner", True, True, rf"(?P<s>{_NAME}) and {v} (?:{split})"),
        ("partner", True, True, rf"{s}{a} (?:broke up|split up|separated) (?:with|from) {v}"),
        ("diet", False, True,
         rf"{s}{a} (?:is|are|went|gone|became|become){a} (?:fully |strictly |mostly )?"
         rf"(?:an? )?(?:[a-z]+ )?(?P<v>{_DIETS})\b"),
        ("diet", False, True,
         rf"{s}{a} (?:is on|are on|started|has been doing|is doing|does|follows|switched to"
         rf"|went) (?:a |the )?(?P<v>{_DIETS})\b"),
        ("diet", False, True,
         rf"{s}{a} (?:is |are )?(?:eating|eats|ate) (?P<v>meat|fish|chicken) (?:again|now)\b"),
        ("diet", True, True,
         rf"{s}{a} (?:quit|stopped|gave up|dropped|came off|went off) (?:the |being )?"
         rf"(?P<v>{_DIETS})\b"),
        ("vehicle", False, True,
         rf"{s}{a} (?:drives?|is driving|rides?|is riding|got|bought|has|owns?|leased"
         rf"|switched to|upgraded to|went for|went with|picked up) {_DEVICE}"),
        ("vehicle", False, True,
         rf"{s}{a} replaced (?:the |her |his |their )?{model} with {_DEVICE}"),
        ("vehicle", False, True,
         rf"{s}{a} traded (?:in )?(?:the |her |his |their |{_NAME}(?:'s|’s) )?(?:old )?{model} "
         rf"for {_DEVICE}"),
        ("vehicle", False, True,
         rf"(?P<s>{_NAME})(?:'s|’s) new (?:ride|car|phone|bike|scooter|motorbike|wheels) "
         rf"(?:is|are) {_DEVICE}"),
        ("vehicle", False, False,
         rf"(?P<s>{_NAME})(?:'s|’s) (?:[a-z]+ ){{0,2}}(?P<v>{model})"),
        ("vehicle", True, True,
         rf"{s}{a} (?:sold|got rid of|crashed|totalled|totaled|wrote off|replaced|traded in"
         rf"|gave away|lost|traded(?: in)?) {_DEVICE}"),
    ]
    # fmt: on
    return tuple((attr, ends, strong, re.compile(p)) for attr, ends, strong, p in table)


_RULES = _rules()


def claims(text: str) -> list[Claim]:
    """The single-valued attributes a fact text (fact format or plain) states.

    The patterns read first; the detector (:mod:`membrain.extraction.detector`) adds what it
    reads of a subject and attribute they did not, from :data:`DETECTED` confidence.
    """
    return list(_read(text)[0])


def pattern_claims(text: str) -> list[Claim]:
    """What the patterns alone read in ``text`` (no detector)."""
    plain = plain_text(text)
    found = {c: None for clause in _clauses(plain) for c, _ in _clause_claims(clause)}
    return list(found)


def claim_key(subject: str, attribute: str) -> str:
    """The key of one attribute of one subject (``"maya|residence"``): what a lookup matches."""
    return f"{subject}|{attribute}"


def held_keys(text: str) -> list[str]:
    """The keys of the values ``text`` states (not ends): what a later fact may replace in it.

    A known fact is replaced only through one of these (:func:`replaced`), so an index of them
    finds every fact a new one may replace.
    """
    return list(
        dict.fromkeys(claim_key(c.subject, c.attribute) for c in claims(text) if not c.ends)
    )


@lru_cache(maxsize=1 << 15)
def _read(text: str) -> tuple[tuple[Claim, ...], int]:
    """The claims of ``text``, and how many of its content words they leave unread.

    Cached: a tenant's known facts are read again by every message that may replace them.
    """
    found: dict[tuple[str, str, str, bool], Claim] = {}
    plain = plain_text(text)
    read: set[str] = set()
    for clause in _clauses(plain):
        for claim, said in _clause_claims(clause):
            read.update(w.casefold() for w in _WORD.findall(said))
            key = (claim.subject, claim.attribute, claim.value, claim.ends)
            if key not in found or claim.strong:
                found[key] = claim
    ruled = {(c.subject, c.attribute) for c in found.values()}
    for detection in packaged_detector().detect(text, DETECTED):
        if detection.confidence < DETECTED or (detection.subject, detection.attribute) in ruled:
            continue
        value = detection.value or ANY
        claim = Claim(
            detection.subject,
            detection.attribute,
            value,
            detection.ends,
            detection.confidence >= DETECTED_STRONG,
        )
        found.setdefault((claim.subject, claim.attribute, claim.value, claim.ends), claim)
        read.update(w.casefold() for w in _WORD.findall(plain_text(detection.said)))
    words = {w.casefold() for w in _WORD.findall(plain)} - _FILLER
    return tuple(found.values()), len(words - read)


def _clauses(text: str) -> Iterator[str]:
    """The statements of ``text``, a verb joined by "and" given its subject again."""
    for sentence in _SENTENCE.split(text.strip()):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?"):
            continue
        yield _CARRIED_VERB.sub(partial(_carried, sentence=sentence), sentence)


def _carried(joint: re.Match[str], sentence: str) -> str:
    """A verb joined by "and" given the nearest subject before it, if any.

    "So Maya has gone and bought" -> "So Maya has gone and Maya bought".
    """
    subjects = [
        m for m in _FIRST_SUBJECT.finditer(sentence, 0, joint.start()) if _subject(m.group("s"))
    ]
    if not subjects:
        return joint.group(0)
    return " and " + _subject(subjects[-1].group("s")).title() + " "


def _clause_claims(clause: str) -> Iterator[tuple[Claim, str]]:
    for attribute, ends, strong, pattern in _RULES:
        for match in pattern.finditer(clause):
            start = max(clause.rfind(",", 0, match.start()), clause.rfind(":", 0, match.start()))
            said = clause[start + 1 : match.end()]
            if ends and "no longer" in match.group(0):
                said = said.replace("no longer", "")
            if strong and _NEGATION.search(said):
                continue
            value = _value(match.group("v"))
            subjects = _subjects(clause, match)
            subject = subjects[0]
            if not subject or not value:
                continue
            if attribute == "vehicle":
                kind = _device(value)
                if kind is None:
                    continue
                attribute_of = kind
            else:
                attribute_of = attribute
            if (
                ends
                and attribute in ("employer", "occupation")
                and not match.group("v")[:1].isupper()
            ):
                value = ANY
            for subject in dict.fromkeys(filter(None, subjects)):
                yield Claim(subject, attribute_of, value, ends, strong), match.group(0)


def _subjects(clause: str, match: re.Match[str]) -> list[str]:
    """The subjects of a reading: "Sara and Tom live in Leeds" is about both of them.

    Only a pair that opens the clause is one subject; in "lives in Leeds and Tom works" the
    first name is the object of the clause before.
    """
    second = match.groupdict().get("s2")
    if second is None:
        return [_subject(match.group("s"))]
    before = clause[: match.start()].rstrip()
    words = before.split()
    if before and not before.endswith((",", ":", ";")) and words[-1].casefold() not in _LEAD:
        return [_subject(second)]
    return [_subject(match.group("s")), _subject(second)]


def _subject(name: str) -> str:
    words = name.split()
    while words and words[0].casefold() in _LEAD:
        words.pop(0)
    return " ".join(words).casefold()


def _value(raw: str) -> str:
    words = [w for w in raw.replace("’", "'").split() if w.casefold() not in ("a", "an", "the")]
    return " ".join(words).casefold().strip(".,!;:")


def _device(value: str) -> str | None:
    first = value.split()[0]
    if first in _CAR_MAKES:
        return "car"
    if first in _PHONE_MAKES:
        return "phone"
    return None


def replaced(
    text: str, stated_at: datetime, known: Sequence[tuple[str, str, datetime]]
) -> Replacement:
    """Which ``known`` facts (id, text, stated at) the new fact ``text`` replaces.

    Only facts stated before ``stated_at`` are replaced. Certain: a strong claim of a value with
    no word in common with the known one, or the end of the known value. Uncertain: values that
    share some words, a claim only implied ("Sara's Civic"), or a known fact that says more
    than its claims (more than :data:`MAX_UNREAD` other words: "[Lucia] lives in [Seattle] with
    her husband [Diego] and our daughter [Inés]"), which superseding would take out of current
    beliefs with the rest.
    """
    news = claims(text)
    if not news:
        return Replacement()
    certain: dict[str, None] = {}
    uncertain: dict[str, None] = {}
    for fact_id, known_text, known_at in known:
        if known_at >= stated_at:
            continue
        read, unread = _read(known_text)
        olds = [c for c in read if not c.ends]
        verdicts = [_verdict(new, olds) for new in news]
        if "same" in verdicts:
            continue
        if "certain" in verdicts and unread <= MAX_UNREAD:
            certain[fact_id] = None
        elif "certain" in verdicts or "uncertain" in verdicts:
            uncertain[fact_id] = None
    return Replacement(tuple(certain), tuple(uncertain))


def _verdict(new: Claim, olds: Sequence[Claim]) -> str | None:
    relevant = [o for o in olds if (o.subject, o.attribute) == (new.subject, new.attribute)]
    if not relevant:
        return None
    if not new.ends and any(o.value == new.value for o in relevant):
        return "same" if new.strong else None
    verdict = None
    for old in relevant:
        shared = set(old.value.split()) & set(new.value.split())
        if new.ends:
            if new.value == ANY or shared:
                return "certain" if new.strong else "uncertain"
            continue
        if shared:
            verdict = "uncertain"
        elif verdict is None:
            verdict = "certain" if new.strong else "uncertain"
    return verdict
