"""Move a (dataset, task) scope from one store to another as JSON Lines.

:func:`export_scope` yields one JSON-serialisable record per line: a header
``{"kind": "membrain-export", "version": 2, "dataset": ..., "task": ...}``, then every stored
message, entity and fact of the scope (``{"kind": "message", "session": ..., ...}``: the
record's fields without its scope, plus the session it was written in), every version of its
profile entries (``"kind": "profile"``, removed ones included, oldest first), then its audit
log (``"kind": "event"``). Facts keep their status, trust and supersession links, so a
forgotten fact stays forgotten, and its history says who forgot it, when and why. Version 1
files (no profile lines) are read too.

:func:`import_scope` writes such lines into an empty scope of a store through the record store
(audited as done by ``api:import``), then appends the exported events with their actors, times
and reasons, each marked ``details["imported"]``.

Ids: every record an import writes gets the id the memory derives for the target scope, never
the id the file gives (a message's from its session and caller id or content, an entity's from
its name, a fact's from its sources and text, a profile version's from its topic, subtopic and
number), so no file can make an import write over a record of another scope. Imported into its
own (dataset, task), an export derives its own ids again: every record id is kept. Into
another one (a copy under another user or task, in the same store or another) every id is new,
and a re-ingested message is still recognised. An imported event's id is derived for the
target from the id it had in the store that first wrote it, kept in ``details["original_id"]``
(a store's own event ids are random: none is taken from a file). References follow their
records (sources, entity links and description versions, supersession links, the facts a
profile version cites, event targets and ids in event details); one to a record the file does
not hold (erased before the export) is kept as it is: it names nothing the import writes. Where
ids changed, the import's own events record ``imported_from`` (the exported ``dataset/task``)
and ``original_ids`` (new id → exported id).

Every line is parsed and validated by its model, and every id derived, before anything is
written: a malformed file raises :class:`~membrain.api.errors.InputError` naming the line and leaves
the store as it was.

Resuming: an import writes step by step, each step audited as it is written (messages by
session, entities, facts by session, profile versions, then the exported events). Ids being
derived, an interrupted import (an error, a killed process) is completed by running the same
import again: what was written is recognised by its id and skipped, the rest is written, so
nothing is duplicated and every record has its one creation event and, once done, its exported
history. The import's own events carry ``details["import"]``, a digest of the export: a scope
holding only records of this export and events of this import (or none) is completed, any
other is refused. Running a finished import again writes nothing.

Example:
    >>> lines = [json.dumps(r) for r in export_scope(source, scope)]  # doctest: +SKIP
    >>> import_scope(target, scope, lines)  # doctest: +SKIP
    {'message': 12, 'entity': 4, 'fact': 9, 'profile': 3, 'event': 31}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from membrain.api.audit import AuditAction, AuditEvent, Cause
from membrain.api.checks import loads_json
from membrain.api.errors import InputError, MembrainError, NotFoundError
from membrain.api.models import Actor, ActorKind, Entity, Fact, Scope, StoredMessage
from membrain.api.profile import ProfileEntry
from membrain.ingest import message_id
from membrain.knowledge.facts import entity_id, fact_id_of
from membrain.memory import Memory
from membrain.records import RecordStore
from membrain.remote import RemoteMemory

__all__ = ["FORMAT", "READABLE", "VERSION", "export_scope", "header_scope", "import_scope"]

FORMAT = "membrain-export"
"""The ``kind`` of an export's header line."""
VERSION = 2
"""The export format version this module writes."""
READABLE = (1, 2)
"""The export format versions this module reads (version 1 has no profile lines)."""

_R = TypeVar("_R", StoredMessage, Fact, AuditEvent)

_MODELS: dict[str, type[BaseModel]] = {
    "message": StoredMessage,
    "fact": Fact,
    "entity": Entity,
    "profile": ProfileEntry,
    "event": AuditEvent,
}
_KINDS = {1: ("message", "fact", "entity", "event"), 2: tuple(_MODELS)}
_UNSCOPED = ("entity", "profile")
"""Kinds stored for the whole (dataset, task): their lines name no session."""
_PROFILE_ACTIONS = (AuditAction.PROFILE_SET, AuditAction.PROFILE_REMOVED)
_ACTOR = Actor(kind=ActorKind.API, name="import")


def export_scope(memory: Memory | RemoteMemory, scope: Scope) -> Iterator[dict[str, Any]]:
    """The records of ``scope``'s (dataset, task), every session, as JSON-serialisable dicts.

    Inactive facts (superseded, forgotten, retracted) are included with their state, and every
    version of every profile entry (removed ones too).
    """
    base = scope.without_session()
    yield {"kind": FORMAT, "version": VERSION, "dataset": base.dataset, "task": base.task}
    for message in memory.messages(scope=base):
        yield _record("message", message, message.scope.session)
    for entity in memory.entities(scope=base):
        yield _record("entity", entity, None)
    facts = memory.facts(scope=base, include_inactive=True)
    for fact in sorted(facts, key=lambda f: (f.recorded_at, f.id)):
        yield _record("fact", fact, fact.scope.session)
    events = memory.audit(scope=base)
    for entry in _profile_versions(memory, base, events):
        yield _record("profile", entry, None)
    for event in events:
        yield _record("event", event, event.scope.session)


def _profile_versions(
    memory: Memory | RemoteMemory, scope: Scope, events: Sequence[AuditEvent]
) -> list[ProfileEntry]:
    """Every version of every entry the profile holds or held (its audit names them all)."""
    keys = {(e.topic, e.subtopic) for e in memory.profile(scope=scope)}
    for event in events:
        topic, subtopic = event.details.get("topic"), event.details.get("subtopic")
        named = isinstance(topic, str) and isinstance(subtopic, str)
        if event.action in _PROFILE_ACTIONS and named:
            keys.add((str(topic), str(subtopic)))
    versions = []
    for topic, subtopic in sorted(keys):
        try:
            versions += memory.profile_history(topic, subtopic, scope=scope)
        except NotFoundError:  # every version was purged with the facts it cited
            continue
    return versions


def _record(kind: str, record: BaseModel, session: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": kind}
    if kind not in _UNSCOPED:
        data["session"] = session
    data.update(record.model_dump(mode="json", exclude={"scope", "stale"}))
    return data


@dataclass
class _Parsed:
    """The records of an export, each with its line number, in the order of the file."""

    messages: list[tuple[int, StoredMessage]] = field(default_factory=list)
    entities: list[tuple[int, Entity]] = field(default_factory=list)
    facts: list[tuple[int, Fact]] = field(default_factory=list)
    profiles: list[tuple[int, ProfileEntry]] = field(default_factory=list)
    events: list[tuple[int, AuditEvent]] = field(default_factory=list)
    digest: str = ""
    """A digest of the export's records (what tells one import's events from another's)."""


@dataclass
class _Placed:
    """The records of an export placed in the target scope: ids derived, references mapped."""

    messages: list[StoredMessage]
    entities: list[Entity]
    facts: list[Fact]
    profiles: list[ProfileEntry]
    events: list[AuditEvent]
    original: dict[str, str]
    """New id → exported id, for the records whose id changed."""

    def counts(self) -> dict[str, int]:
        return {
            "message": len(self.messages),
            "entity": len(self.entities),
            "fact": len(self.facts),
            "profile": len(self.profiles),
            "event": len(self.events),
        }


def import_scope(memory: Memory, scope: Scope, lines: Iterable[str]) -> dict[str, int]:
    """Write the records of an export into ``scope``; how many of each the scope now holds.

    ``scope`` must be empty, or hold only what an interrupted run of this same import wrote:
    then the import is completed (see the module's description). Every line is checked and
    every id derived for ``scope`` before anything is written.

    Raises:
        InputError: a line is malformed (its number is named), ``scope`` holds other records
            or is a bookkeeping scope.
    """
    target = scope.without_session()
    if target.is_bookkeeping:
        raise InputError(f"scope {target.key!r} is a bookkeeping scope: nothing is imported there")
    source, parsed = _parse(lines)
    placed = _Placement(source, target).apply(parsed)
    store = memory.store
    held = _held(store, target, placed, parsed.digest)
    details: dict[str, Any] = {"import": parsed.digest}
    if source != target or placed.original:
        details["imported_from"] = source.key

    def cause(records: Sequence[StoredMessage | Entity | Fact | ProfileEntry]) -> Cause:
        changed = {r.id: placed.original[r.id] for r in records if r.id in placed.original}
        mapping = {"original_ids": changed} if "imported_from" in details else {}
        return Cause(_ACTOR, "import", {**details, **mapping})

    for session, messages in _by_session(_fresh(placed.messages, held)).items():
        store.put_messages(_at(target, session), messages, cause=cause(messages))
    entities = _fresh(placed.entities, held)
    store.put_entities(target, entities, cause=cause(entities))
    participants = [e.name for e in placed.entities if e.participant]
    for session, facts in _by_session(_fresh(placed.facts, held)).items():
        store.put_facts(_at(target, session), facts, participants, cause=cause(facts))
    for entry in _fresh(placed.profiles, held):
        store.put_profile(entry, cause=cause([entry]))
    for session, events in _by_session(_fresh(placed.events, held)).items():
        store.import_events(_at(target, session), events)
    return placed.counts()


def header_scope(lines: Sequence[str]) -> Scope:
    """The (dataset, task) an export's header line names.

    Raises:
        InputError: the first non-blank line is not a MemBrain export header.
    """
    first = next(((n, line) for n, line in enumerate(lines, 1) if line.strip()), None)
    if first is None:
        raise InputError("empty export: no header line")
    number, line = first
    try:
        data = loads_json(line, f"line {number}")
    except InputError:
        data = None
    if not isinstance(data, dict):
        raise InputError(f"line {number}: not a MemBrain export (no {FORMAT!r} header)")
    return _check_header(number, data.pop("kind", None), data)[0]


def _parse(lines: Iterable[str]) -> tuple[Scope, _Parsed]:
    """The exported (dataset, task) and its records, each validated by its model, placed in it."""
    parsed = _Parsed()
    digest = hashlib.sha256()
    header: Scope | None = None
    kinds: tuple[str, ...] = ()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        data = loads_json(line, f"line {number}")  # bounded: nested too deeply is refused
        if not isinstance(data, dict):
            raise InputError(f"line {number}: expected a JSON object")
        try:  # what the store could not write (a lone surrogate) is refused before any write
            canonical = json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"line {number}: not valid Unicode text") from None
        digest.update(canonical + b"\n")
        kind = data.pop("kind", None)
        if header is None:
            header, version = _check_header(number, kind, data)
            kinds = _KINDS[version]
            continue
        model = _MODELS.get(kind) if isinstance(kind, str) and kind in kinds else None
        if model is None:
            raise InputError(f"line {number}: unknown record kind {kind!r}")
        session = None if kind in _UNSCOPED else data.pop("session", None)
        try:
            data["scope"] = _at(header, session)
            record = model.model_validate(data)
        except (ValueError, MembrainError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"line {number}: invalid {kind} record: {first}") from None
        if isinstance(record, StoredMessage):
            parsed.messages.append((number, record))
        elif isinstance(record, Entity):
            parsed.entities.append((number, record))
        elif isinstance(record, Fact):
            parsed.facts.append((number, record))
        elif isinstance(record, ProfileEntry):
            parsed.profiles.append((number, record))
        elif isinstance(record, AuditEvent):
            parsed.events.append((number, record))
    if header is None:
        raise InputError("empty export: no header line")
    parsed.digest = digest.hexdigest()[:32]
    return header, parsed


def _check_header(number: int, kind: object, data: dict[str, Any]) -> tuple[Scope, int]:
    if kind != FORMAT:
        raise InputError(f"line {number}: not a MemBrain export (no {FORMAT!r} header)")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version not in READABLE:
        raise InputError(f"line {number}: unsupported export version {version!r}")
    try:
        dataset, task = data.get("dataset"), data.get("task")
        if not isinstance(dataset, str) or not isinstance(task, str):
            raise InputError(f"dataset and task must be strings, got {dataset!r} and {task!r}")
        return Scope.stored(dataset, task), version  # as the export stored them
    except (ValueError, MembrainError) as exc:
        raise InputError(f"line {number}: invalid dataset or task in the header: {exc}") from None


class _Placement:
    """An export's records placed in the target scope: every id derived for it, links kept."""

    def __init__(self, source: Scope, target: Scope) -> None:
        self.source, self.target = source, target
        self.ids: dict[str, str] = {}
        """Exported id → new id."""
        self.lines: dict[str, int] = {}
        """Exported or new id → the line of the record that holds it."""

    def apply(self, parsed: _Parsed) -> _Placed:
        """``parsed`` in the target (a fact's id needs its messages', a link every record's).

        Raises:
            InputError: two records share an id, or would get the same one here.
        """
        messages = [self._message(n, m) for n, m in parsed.messages]
        facts = [(n, self._fact(n, f)) for n, f in parsed.facts]
        entities = [self._entity(n, e) for n, e in parsed.entities]
        linked = [f.model_copy(update=self._links(f)) for _, f in facts]
        profiles = [self._profile(n, p) for n, p in parsed.profiles]
        roots = [(n, e, self._root(e)) for n, e in parsed.events]
        for number, event, root in roots:
            self._new(number, event.id, self.target.record_id("event", root))
        events = [self._event(e, root) for _, e, root in roots]
        records: list[StoredMessage | Entity | Fact | ProfileEntry] = [
            *messages,
            *entities,
            *linked,
            *profiles,
        ]
        original = {new: old for old, new in self.ids.items() if old != new}
        changed = {r.id: original[r.id] for r in records if r.id in original}
        return _Placed(messages, entities, linked, profiles, events, changed)

    def _new(self, number: int, old: str, new: str) -> str:
        for known in (old, new):
            if known in self.lines:
                raise InputError(
                    f"line {number}: the id {known!r} is the id of the record of line "
                    f"{self.lines[known]} too"
                )
        self.ids[old] = new
        self.lines[old] = self.lines[new] = number
        return new

    def _at(self, record: StoredMessage | Fact | AuditEvent) -> Scope:
        return _at(self.target, record.scope.session)

    def _message(self, number: int, message: StoredMessage) -> StoredMessage:
        scope = self._at(message)
        new = self._new(number, message.id, message_id(scope, message.message))
        return message.model_copy(update={"id": new, "scope": scope})

    def _entity(self, number: int, entity: Entity) -> Entity:
        new = self._new(number, entity.id, entity_id(self.target, entity.name))
        versions = tuple(
            v.model_copy(update={"fact_ids": self._mapped(v.fact_ids)}) for v in entity.versions
        )
        return entity.model_copy(update={"id": new, "scope": self.target, "versions": versions})

    def _fact(self, number: int, fact: Fact) -> Fact:
        scope = self._at(fact)
        sources = self._mapped(fact.sources)
        new = self._new(number, fact.id, fact_id_of(scope, fact.extractor, sources, fact.text))
        return fact.model_copy(update={"id": new, "scope": scope, "sources": sources})

    def _links(self, fact: Fact) -> dict[str, Any]:
        return {
            "entity_ids": self._mapped(fact.entity_ids),
            "supersedes": self._mapped(fact.supersedes),
            "superseded_by": self._mapped(fact.superseded_by),
        }

    def _profile(self, number: int, entry: ProfileEntry) -> ProfileEntry:
        new = ProfileEntry.id_for(self.target, entry.topic, entry.subtopic, entry.version)
        update = {"id": new, "scope": self.target, "fact_ids": self._mapped(entry.fact_ids)}
        self._new(number, entry.id, new)
        return entry.model_copy(update=update)

    @staticmethod
    def _root(event: AuditEvent) -> str:
        """The id the event had in the store that first wrote it."""
        first = event.details.get("original_id") if event.details.get("imported") else None
        return first if isinstance(first, str) and first else event.id

    def _event(self, event: AuditEvent, root: str) -> AuditEvent:
        details = {**self._value(event.details), "original_id": root}
        return event.model_copy(
            update={
                "id": self.ids[event.id],
                "scope": self._at(event),
                "targets": self._mapped(event.targets),
                "details": details,
            }
        )

    def _mapped(self, ids: Sequence[str]) -> tuple[str, ...]:
        return tuple(self.ids.get(i, i) for i in ids)

    def _value(self, value: Any) -> Any:
        """``value`` (an event's details) with every exported id it holds replaced."""
        if isinstance(value, str):
            return self.ids.get(value, value)
        if isinstance(value, list | tuple):
            return [self._value(v) for v in value]
        if isinstance(value, dict):
            return {k: self._value(v) for k, v in value.items()}
        return value


def _held(store: RecordStore, target: Scope, placed: _Placed, digest: str) -> set[str]:
    """The ids of the records and events of ``placed`` the target holds already.

    Raises:
        InputError: the target holds a record or an event that is not of this import.
    """
    held: dict[str, set[str]] = {
        "message": {m.id for m in store.iter_messages(target)},
        "entity": {e.id for e in store.iter_entities(target)},
        "fact": {f.id for f in store.iter_facts(target)},
        "profile": {p.id for p in store.profile_versions(target)},
    }
    planned = {
        "message": {m.id for m in placed.messages},
        "entity": {e.id for e in placed.entities},
        "fact": {f.id for f in placed.facts},
        "profile": {p.id for p in placed.profiles},
    }
    carried = {e.id for e in placed.events}
    events = store.iter_audit(target)
    strangers = [e for e in events if e.id not in carried and e.details.get("import") != digest]
    if strangers or any(held[kind] - planned[kind] for kind in held):
        raise InputError(
            f"scope {target.key!r} is not empty; import only into an empty scope "
            "(delete it first to restore it)"
        )
    found = {e.id for e in events if e.id in carried}
    for ids in held.values():
        found |= ids
    return found


_T = TypeVar("_T", StoredMessage, Entity, Fact, ProfileEntry, AuditEvent)


def _fresh(records: Sequence[_T], held: set[str]) -> list[_T]:
    """The records not written yet (by an interrupted run of the same import)."""
    return [r for r in records if r.id not in held]


def _at(target: Scope, session: object) -> Scope:
    if session is not None and not isinstance(session, str):
        raise InputError(f"session must be a string or null, got {session!r}")
    return Scope.stored(target.dataset, target.task, session or None)  # the file's stored part


def _by_session(records: Sequence[_R]) -> dict[str | None, list[_R]]:
    groups: dict[str | None, list[_R]] = {}
    for record in records:
        groups.setdefault(record.scope.session, []).append(record)
    return groups
