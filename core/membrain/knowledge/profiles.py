"""The user profile over the record store: reading, writing, and keeping it up to date.

:class:`ProfileBook` reads the current entries (the last version of each subtopic, unless it
removes it), marks an entry *stale* when a fact it cites is no longer active (superseded,
forgotten, retracted or purged: it leaves the context until refreshed), and writes versions
through the record store, each audited. Every write is checked first: the subtopic against the
schema, the text, the cited facts (they exist in the scope and are active) and the topic's cap.

Offline, :meth:`ProfileBook.from_facts` fills the subtopics of the single-valued attributes
(:mod:`membrain.extraction.attributes`: where the user lives, works, ...) from the facts a
flush stored about the user, each entry citing its fact: a new value adds a version, the same
value keeps the entry, an ended value ("quit her job") removes it.

Example:
    >>> book = ProfileBook(store, DEFAULT_PROFILE_SCHEMA)  # doctest: +SKIP
    >>> book.put(scope, "work", "occupation", "Sara is a nurse.", [fact], cause)  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from membrain.api.audit import Cause
from membrain.api.errors import ConflictError, InputError, NotFoundError
from membrain.api.models import Actor, ActorKind, Fact, FactStatus, Scope
from membrain.api.profile import MAX_PROFILE_TEXT, ProfileEntry, ProfileSchema
from membrain.backends.base import Collection, is_point_id
from membrain.extraction.attributes import claims
from membrain.extraction.profile_writer import LLMProfileWriter, ProfileChange, ShownFact
from membrain.knowledge.facts import entity_id
from membrain.records import RecordStore, is_current
from membrain.temporal import find_annotations, plain_text

__all__ = ["ATTRIBUTE_SUBTOPICS", "OFFLINE_AUTHOR", "ProfileBook", "timeless"]

ATTRIBUTE_SUBTOPICS: dict[str, tuple[str, str]] = {
    "residence": ("basic_info", "residence"),
    "employer": ("work", "employer"),
    "occupation": ("work", "occupation"),
    "school": ("work", "education"),
    "partner": ("relationships", "partner"),
    "diet": ("lifestyle", "diet"),
    "car": ("possessions", "vehicle"),
    "phone": ("possessions", "phone"),
}
"""Where each single-valued attribute the offline extractor reads goes in the profile."""

MAX_SHOWN_FACTS = 30
"""New facts about the user shown to the model per flush, at most (the latest): a bulk import
would otherwise send them all in one prompt."""

OFFLINE_AUTHOR = Actor(kind=ActorKind.EXTRACTOR, name="offline-profile")
"""Who writes the entries filled from single-valued attributes."""


_LEAD_IN = re.compile(
    r"(?:\b(?:in|on|at|since|from|until|till|by|during|around|about|for|of)\s+)?$"
)
"""The preposition that introduces a time, dropped with it."""


def timeless(text: str) -> str:
    """A fact's text without its times: a profile keeps them structured on the cited facts.

    Example:
        >>> timeless("[Sara] moved to [Berlin] in [May 2024::2024-05].")
        'Sara moved to Berlin.'
    """
    kept, start = [], 0
    for annotation in find_annotations(text):
        before = text[start : annotation.start]
        kept.append(_LEAD_IN.sub("", before))
        start = annotation.end
    kept.append(text[start:])
    plain = plain_text("".join(kept))
    return re.sub(r"\s+([.,;!?])", r"\1", " ".join(plain.split()))


class ProfileBook:
    """The profiles of a store, under one schema (see the module docstring)."""

    def __init__(self, store: RecordStore, schema: ProfileSchema) -> None:
        self._store = store
        self.schema = schema

    # -- reading -----------------------------------------------------------------------------
    def current(self, scope: Scope, topics: Sequence[str] | None = None) -> list[ProfileEntry]:
        """The current entries, in block order: preferred topics first, then best backed.

        The order is the schema's topic order, then the number of active facts an entry cites
        (most first), then topic and subtopic: the same entries always come in the same order.
        Stale entries are included, marked.
        """
        latest: dict[tuple[str, str], ProfileEntry] = {}
        for entry in self._store.profile_versions(scope):
            latest[entry.key] = entry  # versions come oldest first
        entries = [e for e in latest.values() if not e.removed]
        if topics is not None:
            entries = [e for e in entries if e.topic in set(topics)]
        marked = self._marked(scope, entries)
        return sorted(
            marked,
            key=lambda e: (self.schema.order(e.topic), -len(e.fact_ids), e.topic, e.subtopic),
        )

    def history(self, scope: Scope, topic: str, subtopic: str) -> list[ProfileEntry]:
        """Every version of one entry, oldest first (removals included).

        Raises:
            NotFoundError: the entry never existed.
        """
        versions = self._store.profile_versions(scope, topic=topic, subtopic=subtopic)
        if not versions:
            raise NotFoundError(f"no profile entry {topic}/{subtopic} in {scope.key!r}")
        return self._marked(scope, versions)

    def _marked(self, scope: Scope, entries: Sequence[ProfileEntry]) -> list[ProfileEntry]:
        cited = sorted({i for e in entries for i in e.fact_ids})
        active = {
            f.id for f in self._store.get_facts(scope.without_session(), cited) if is_current(f)
        }
        return [
            e.model_copy(update={"stale": not set(e.fact_ids) <= active}) if e.fact_ids else e
            for e in entries
        ]

    # -- writing -----------------------------------------------------------------------------
    def put(
        self,
        scope: Scope,
        topic: str,
        subtopic: str,
        text: str,
        facts: Sequence[str],
        cause: Cause,
    ) -> ProfileEntry:
        """Write ``text`` as the entry's next version (nothing when it says the same).

        Raises:
            InputError: the schema does not admit the subtopic, the text is empty or too long,
                a cited fact is not a fact of the scope, or the topic is full.
            ConflictError: a cited fact is not active.
        """
        self.schema.check(topic, subtopic)
        if not isinstance(text, str) or not text.strip():
            raise InputError("a profile entry needs a text")
        text = " ".join(text.split())
        if len(text) > MAX_PROFILE_TEXT:
            raise InputError(f"a profile entry has at most {MAX_PROFILE_TEXT} characters")
        cited = self._active(scope, facts)
        versions = self._store.profile_versions(scope, topic=topic, subtopic=subtopic)
        last = versions[-1] if versions else None
        if last is not None and not last.removed and (last.text, last.fact_ids) == (text, cited):
            return last
        if last is None or last.removed:
            self._check_cap(scope, topic)
        return self._write(scope, topic, subtopic, text, cited, last, cause)

    def forget(
        self, scope: Scope, topic: str, subtopic: str, cause: Cause, facts: Sequence[str] = ()
    ) -> ProfileEntry:
        """Remove an entry: a last version marks it removed (the earlier ones stay).

        Raises:
            NotFoundError: the entry is not in the profile.
        """
        versions = self._store.profile_versions(scope, topic=topic, subtopic=subtopic)
        if not versions or versions[-1].removed:
            raise NotFoundError(f"no profile entry {topic}/{subtopic} in {scope.key!r}")
        last = versions[-1]
        cited = tuple(facts) or last.fact_ids
        return self._write(scope, topic, subtopic, last.text, cited, last, cause, removed=True)

    def _write(
        self,
        scope: Scope,
        topic: str,
        subtopic: str,
        text: str,
        cited: tuple[str, ...],
        last: ProfileEntry | None,
        cause: Cause,
        *,
        removed: bool = False,
    ) -> ProfileEntry:
        version = 1 if last is None else last.version + 1
        base = scope.without_session()
        entry = ProfileEntry(
            id=ProfileEntry.id_for(base, topic, subtopic, version),
            scope=base,
            topic=topic,
            subtopic=subtopic,
            text=text,
            fact_ids=cited,
            version=version,
            recorded_at=self._store.now(),
            author=str(cause.actor),
            removed=removed,
            reason=cause.reason,
        )
        self._store.put_profile(entry, cause=cause)
        return entry

    def _active(self, scope: Scope, facts: Sequence[str]) -> tuple[str, ...]:
        if isinstance(facts, str) or not all(isinstance(f, str) for f in facts):
            raise InputError("facts must be a list of fact ids")
        base = scope.without_session()
        ids = self._store.full_ids(Collection.FACTS, base, list(dict.fromkeys(facts)))
        found = {f.id: f for f in self._store.get_facts(base, [i for i in ids if is_point_id(i)])}
        unknown = [i for i in ids if i not in found]
        if unknown:
            raise InputError(f"no fact {unknown[0]!r} in {base.key!r}")
        inactive = [i for i in ids if found[i].status is not FactStatus.ACTIVE]
        if inactive:
            state = found[inactive[0]].status.value
            raise ConflictError(f"fact {inactive[0]!r} is {state}: a profile cites active facts")
        return tuple(ids)

    def _check_cap(self, scope: Scope, topic: str) -> None:
        found = self.schema.topic(topic)
        held = sum(1 for e in self.current(scope, [topic]))
        if found is not None and held >= found.cap:
            raise InputError(
                f"profile topic {topic!r} holds its {found.cap} entries; forget one first"
            )

    # -- offline updating --------------------------------------------------------------------
    def from_facts(
        self, scope: Scope, facts: Iterable[Fact], user_names: Iterable[str]
    ) -> list[ProfileEntry]:
        """Fill the attribute subtopics from new facts about the user; the versions written.

        A fact whose claim names the user (one of ``user_names``) sets its subtopic to the
        fact's text, citing it; the latest stated fact of an attribute wins. A subtopic the
        schema does not admit is left alone.
        """
        users = {name.casefold() for name in user_names}
        chosen: dict[tuple[str, str], tuple[Fact, bool]] = {}
        for fact in sorted(facts, key=lambda f: (f.stated_at, f.recorded_at)):
            if fact.status is not FactStatus.ACTIVE:
                continue
            ends: dict[tuple[str, str], bool] = {}
            for claim in claims(fact.text):
                key = ATTRIBUTE_SUBTOPICS.get(claim.attribute)
                if key is None or claim.subject not in users or not claim.strong:
                    continue
                if self.schema.admits(*key):  # a new value outweighs an end in one fact
                    ends[key] = ends.get(key, True) and claim.ends
            for key, ended in ends.items():
                chosen[key] = (fact, ended)
        cause = Cause(OFFLINE_AUTHOR, "stated by the user")
        held = {e.key: e.id for e in self._store.profile_versions(scope)} if chosen else {}
        written = []
        for (topic, subtopic), (fact, ended) in chosen.items():
            try:
                if ended:
                    written.append(self.forget(scope, topic, subtopic, cause, [fact.id]))
                else:
                    entry = self.put(scope, topic, subtopic, timeless(fact.text), [fact.id], cause)
                    if held.get((topic, subtopic)) != entry.id:  # the same again writes nothing
                        written.append(entry)
            except (InputError, NotFoundError):
                continue  # a full topic, an entry already gone: the profile stays as it is
        return written

    # -- updating with a model ---------------------------------------------------------------
    def from_model(
        self,
        scope: Scope,
        writer: LLMProfileWriter,
        facts: Iterable[Fact],
        user_names: Iterable[str],
    ) -> list[ProfileEntry]:
        """Apply the changes ``writer`` proposes from new facts about the user; the versions.

        Nothing happens when no new fact names a user; at most :data:`MAX_SHOWN_FACTS` of them
        (the latest) are shown. The changes are checked against the
        store (cited facts active, topics not over their cap) before any is written.

        Raises:
            ExtractionError: the model gave no usable answer (nothing is written).
            InputError: a proposed change does not fit the store (nothing is written).
        """
        users = {entity_id(scope, name): name for name in user_names}
        about = [f for f in facts if is_current(f) and users.keys() & set(f.entity_ids)]
        if not about:
            return []
        about = sorted(about, key=lambda f: (f.stated_at, f.recorded_at))[-MAX_SHOWN_FACTS:]
        user = next(users[i] for i in about[-1].entity_ids if i in users)
        current = self.current(scope)
        shown = {f.id: ShownFact(f.id, f.text) for f in about}
        cited = [i for e in current if not e.stale for i in e.fact_ids if i not in shown]
        for fact in self._store.get_facts(scope.without_session(), cited):
            shown.setdefault(fact.id, ShownFact(fact.id, fact.text))
        changes = writer.propose(user, self.schema, current, list(shown.values()))
        self._check_changes(scope, changes, current)
        cause = Cause(Actor(kind=ActorKind.EXTRACTOR, name=writer.id), "proposed from new facts")
        held = {e.key: e.id for e in current}
        written = []
        for change in changes:
            key = (change.topic, change.subtopic)
            if change.remove:
                if key in held:
                    written.append(self.forget(scope, *key, cause, change.fact_ids))
                continue
            entry = self.put(scope, *key, change.text, change.fact_ids, cause)
            if held.get(key) != entry.id:  # the same text again writes nothing
                written.append(entry)
        return written

    def _check_changes(
        self, scope: Scope, changes: Sequence[ProfileChange], current: Sequence[ProfileEntry]
    ) -> None:
        """Refuse a set of changes that cannot all be written (before any is)."""
        self._active(scope, [i for c in changes if not c.remove for i in c.fact_ids])
        counts: dict[str, set[str]] = {}
        for entry in current:
            counts.setdefault(entry.topic, set()).add(entry.subtopic)
        for change in changes:
            if not change.remove:
                counts.setdefault(change.topic, set()).add(change.subtopic)
        for topic, subtopics in counts.items():
            found = self.schema.topic(topic)
            if found is not None and len(subtopics) > found.cap:
                raise InputError(f"the changes would put {len(subtopics)} entries in {topic!r}")
