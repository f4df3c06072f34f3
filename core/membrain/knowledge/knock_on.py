"""Knock-on review: when a fact is superseded, question the facts that rested on its old value.

"[Sara] moved to [Oslo]" supersedes "[Sara] lives in [Lisbon]"; "[Sara] walks to the [Lisbon]
office" is still believed, but may no longer hold. After every supersession the
:class:`~membrain.knowledge.ledger.Ledger` asks :class:`KnockOn` for the **dependants** of the
change, and queues them as one :class:`~membrain.api.audit.ReviewItem` of kind ``knock_on``.

A dependant is an active fact about the same subject (it names an entity of the replaced fact
other than the old value) that was stated before the change and:

* **names the old value**: the value of the replaced fact's claim (:func:`~membrain.extraction.
  attributes.claims`: the city, employer, partner ...), or the value whose end the new facts
  state ("[Jonas] and [Nina] split up": Nina, of Jonas), or, when no claim is read, the one
  bracketed ref of the replaced fact that the new facts do not carry, swapped for one of their
  own ("[Rafael] is a dentist in [São Paulo]" → "... opened a clinic in [Campinas]"), as whole
  words; or
* **was stated in its light**: it cites a message of the replaced fact, or was stated within
  :data:`LIGHT_WINDOW` of it in the same session (a scope's sessions, when it has them), and
  speaks of the claim's attribute (one of
  the words of :data:`TOPIC_WORDS`: a flat or a commute for a residence, colleagues for an
  employer).

A fact that names a new value was said knowing the change, and is left alone; so are the
replaced and the new facts, and facts no longer active. With a model, the candidates of every
change of one batch are shown to it in one call (:class:`~membrain.extraction.knock_on.
LLMKnockOnFilter`), and only those it says depend on the old value are queued; a model that
gives no usable answer leaves the rule's candidates.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from membrain.api.errors import ExtractionError
from membrain.api.models import Fact, FactStatus, Scope
from membrain.extraction.attributes import ANY, Claim, claims
from membrain.extraction.knock_on import KnockOnQuestion, LLMKnockOnFilter
from membrain.extraction.llm import LLMClient
from membrain.records import FactFilter, RecordStore
from membrain.temporal import plain_text

__all__ = ["LIGHT_WINDOW", "TOPIC_WORDS", "Change", "Dependants", "KnockOn", "still_holds"]

log = logging.getLogger("membrain")

LIGHT_WINDOW = timedelta(minutes=30)
"""How close to the replaced fact, in the same session, a fact is stated in its light."""

MAX_VALUE_CHARS = 80
"""How much of a value (or of a fact's text, when no value is read) a reason quotes."""

REASON_PREFIX = "may be outdated: "
ARROW = " → "

_WORDS = {
    "residence": "flat apartment house neighbourhood neighborhood street rent landlord "
    "flatmate roommate commute commutes commuting office walk walks cafe café local nearby "
    "near gym",
    "employer": "office colleague colleagues coworker coworkers boss manager team commute "
    "commutes salary desk shift shifts job",
    "occupation": "office colleague colleagues patients students clients shift shifts job "
    "salary boss",
    "school": "class classes campus lecture lectures course courses professor exam exams "
    "semester classmates",
    "partner": "together date dates anniversary wedding moved",
    "diet": "eat eats eating food meal meals restaurant restaurants recipe recipes cook cooks "
    "dish dishes snack snacks",
    "car": "drive drives driving parking garage road commute",
    "phone": "app apps screen case charger",
}
TOPIC_WORDS: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in _WORDS.items()}
"""Per single-valued attribute, the words that make a fact speak of it."""

_WORD = re.compile(r"[\w'’-]+")
_PREPOSITIONS = "in|at|to|from|for|with|near|into"


@dataclass(frozen=True, slots=True)
class Change:
    """One applied supersession: ``old`` (as it was, active) replaced by ``new``."""

    scope: Scope
    old: Fact
    new: tuple[Fact, ...]


@dataclass(frozen=True, slots=True)
class Dependants:
    """The facts that may rest on a change's old value, and the values, for the reason."""

    scope: Scope
    """Where the review item goes: one that sees every fact of it."""
    change: Change
    old_value: str
    new_value: str
    facts: tuple[Fact, ...]

    @property
    def reason(self) -> str:
        """``"may be outdated: <old value> → <new value>"``."""
        return f"{REASON_PREFIX}{self.old_value}{ARROW}{self.new_value}"


def still_holds(reason: str) -> str:
    """The reason a rejected knock-on review confirms its facts with."""
    values = reason.removeprefix(REASON_PREFIX)
    return f"still holds after {values}" if values else "still holds"


class KnockOn:
    """Finds the dependants of supersessions (see the module docstring).

    Args:
        store: Where the facts are read.
        llm: The model that filters the candidates (``None``: the rule alone).
        max_attempts: Calls per batch before the rule's candidates are kept.
    """

    def __init__(
        self, store: RecordStore, llm: LLMClient | None = None, *, max_attempts: int = 3
    ) -> None:
        self.store = store
        self.filter = LLMKnockOnFilter(llm, max_attempts=max_attempts) if llm else None

    def dependants(self, changes: Sequence[Change]) -> tuple[list[Dependants], str]:
        """The dependants of each change that has some, and what chose them.

        What chose them is ``"rule"``, or the model filter's id when the model answered.
        """
        found = [d for d in (self._found(c) for c in changes) if d is not None]
        if self.filter is None or not found:
            return found, "rule"
        questions = [
            KnockOnQuestion(
                d.change.old.text,
                tuple(n.text for n in d.change.new),
                d.old_value,
                d.new_value,
                tuple(f.text for f in d.facts),
            )
            for d in found
        ]
        try:
            picked = self.filter.dependent(questions)
        except ExtractionError as exc:
            log.warning("knock-on review: the model gave no usable answer (%s); rule kept", exc)
            return found, "rule"
        kept = [
            Dependants(d.scope, d.change, d.old_value, d.new_value, tuple(d.facts[i] for i in p))
            for d, p in zip(found, picked, strict=True)
            if p
        ]
        return kept, self.filter.id

    def _found(self, change: Change) -> Dependants | None:
        old, news = change.old, change.new
        read = _values(old, news)
        if read is None:
            return None
        old_names, new_names, old_value, new_value, attribute, subject_ids = read
        whole = change.scope.without_session()
        latest = max(n.stated_at for n in news)
        skip = {old.id, *(n.id for n in news)}
        new_sources = {s for n in news for s in n.sources}
        olds = [_pattern(n) for n in old_names]
        fresh = [_pattern(n) for n in new_names]
        facts = []
        for fact in self.store.iter_facts(whole, FactFilter(entity_ids=subject_ids)):
            if fact.id in skip or fact.status is not FactStatus.ACTIVE:
                continue
            if fact.stated_at > latest or new_sources & set(fact.sources):
                continue  # said knowing the change
            text = plain_text(fact.text)
            if any(p.search(text) for p in fresh):
                continue
            if any(p.search(text) for p in olds) or _in_light(fact, old, attribute, text):
                facts.append(fact)
        if not facts:
            return None
        facts.sort(key=lambda f: (f.stated_at, f.id))
        ids = [f.id for f in facts]
        where = change.scope
        if len(self.store.get_facts(where, ids)) < len(ids):
            where = whole
        return Dependants(where, change, old_value, new_value, tuple(facts))


def _values(
    old: Fact, news: Sequence[Fact]
) -> tuple[list[str], list[str], str, str, str | None, tuple[str, ...]] | None:
    """What a change replaced (``None``: nothing a dependant could name).

    The old names to look for, the new ones, the two values as a reason shows them, the
    attribute (when a claim says it) and the subject's entity ids.
    """
    new_claims = [c for n in news for c in claims(n.text)]
    pairs: list[tuple[Claim, Claim]] = []
    for was in claims(old.text):
        if was.ends or was.value == ANY:
            continue
        for now in new_claims:
            same = (now.subject, now.attribute) == (was.subject, was.attribute)
            if same and (now.ends or now.value != was.value):
                pairs.append((was, now))
    new_refs = {e.casefold() for n in news for e in n.entities}
    old_refs = {e.casefold() for e in old.entities}
    if not pairs:  # an end of a value the replaced fact names ("[Jonas] and [Nina] split up")
        order = [e.casefold() for e in old.entities]
        for now in new_claims:
            if now.ends and now.subject in old_refs and now.value in old_refs:
                first = min(now.subject, now.value, key=order.index)
                if first == now.subject:  # one direction: the fact's own subject first
                    pairs.append((Claim(now.subject, now.attribute, now.value), now))
    dropped = [e for e in dict.fromkeys(old.entities) if e.casefold() not in new_refs]
    added = [e for n in news for e in dict.fromkeys(n.entities) if e.casefold() not in old_refs]
    subjects = {was.subject for was, _ in pairs}
    dropped = [e for e in dropped if e.casefold() not in subjects]
    added = [e for e in added if _placed(e, news)]
    if pairs or len(dropped) != 1 or not added or not _placed(dropped[0], [old]):
        dropped = []  # a claim names the value; else one place swapped for another does
    old_names = [*(was.value for was, _ in pairs), *dropped]
    new_names = [*(now.value for _, now in pairs if now.value != ANY and not now.ends), *added]
    if not old_names:
        return None
    old_text, new_text = plain_text(old.text), " ".join(plain_text(n.text) for n in news)
    if pairs:
        was, now = pairs[0]
        old_value = _as_said(was.value, old_text)
        ended = now.ends or now.value == ANY
        new_value = _short(new_text) if ended else _as_said(now.value, new_text)
        attribute: str | None = was.attribute
    else:
        old_value = ", ".join(dropped)
        new_value = ", ".join(dict.fromkeys(added)) or _short(new_text)
        attribute = None
    if not subjects:  # the refs the change kept, but a possessor ("[Wade]'s son [Travis]")
        owners = {e.casefold() for e in re.findall(r"\[([^\[\]]+)\]['’]s\b", old.text)}
        kept = {e.casefold() for e in old.entities} - {n.casefold() for n in old_names}
        subjects = (kept - owners) or kept
    subject = [
        i for e, i in zip(old.entities, old.entity_ids, strict=False) if e.casefold() in subjects
    ]
    if not subject:
        return None
    return old_names, new_names, _short(old_value), _short(new_value), attribute, tuple(subject)


def _in_light(fact: Fact, old: Fact, attribute: str | None, text: str) -> bool:
    """Stated with the replaced fact (same message, or close in one session), about its topic."""
    if attribute is None or attribute not in TOPIC_WORDS:
        return False
    together = bool(set(fact.sources) & set(old.sources)) or (
        fact.scope.session is not None
        and fact.scope.session == old.scope.session
        and abs(fact.stated_at - old.stated_at) <= LIGHT_WINDOW
    )
    words = {w.casefold() for w in _WORD.findall(text)}
    return together and bool(words & TOPIC_WORDS[attribute])


def _placed(ref: str, facts: Sequence[Fact]) -> bool:
    """Whether ``ref`` follows a preposition in one of ``facts`` ("in [Lisbon]", "at [Galp]")."""
    pattern = re.compile(rf"\b(?:{_PREPOSITIONS}) (?:the )?\[{re.escape(ref)}\]", re.IGNORECASE)
    return any(pattern.search(f.text) for f in facts)


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)


def _as_said(value: str, text: str) -> str:
    """``value`` (case-folded) as ``text`` writes it."""
    found = _pattern(value).search(text)
    return found.group(0) if found else value


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"
