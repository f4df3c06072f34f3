"""Move a (dataset, task) scope from one store to another as JSON Lines.

:func:`export_scope` yields one JSON-serialisable record per line: a header
``{"kind": "membrain-export", "version": 1, "dataset": ..., "task": ...}``, then every stored
message, entity and fact of the scope (``{"kind": "message", "session": ..., ...}``: the
record's fields without its scope, plus the session it was written in), then its audit log
(``"kind": "event"``). Facts keep their status, trust and supersession links, so a forgotten
fact stays forgotten, and its history says who forgot it, when and why.

:func:`import_scope` writes such lines into an empty scope of another store through the record
store (audited as done by ``api:import``), then appends the exported events with their own
ids, actors, times and reasons, each marked ``details["imported"]``. Into the exported
(dataset, task) record ids are kept. Into another one (a copy under another user or task, in
the same store or another) every id is derived anew as the memory derives it for that scope
(a message's from its new scope and caller id, so a re-ingested message is still recognised;
an entity's from its name; a fact's from its sources and text), every reference follows
(sources, entity links, supersession links, event targets and ids in event details), and the
mapping is recorded: the import's ``created`` events carry ``imported_from`` (the exported
``dataset/task``) and ``original_ids`` (new id → exported id), and each imported event its
``original_id``.

Example:
    >>> lines = [json.dumps(r) for r in export_scope(source, scope)]  # doctest: +SKIP
    >>> import_scope(target, scope, lines)  # doctest: +SKIP
    {'message': 12, 'entity': 4, 'fact': 9, 'event': 31}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from membrain.audit import AuditEvent, Cause
from membrain.errors import InputError, MembrainError
from membrain.facts import entity_id, fact_id_of
from membrain.ingest import message_id
from membrain.memory import Memory
from membrain.models import Actor, ActorKind, Entity, Fact, Scope, StoredMessage
from membrain.remote import RemoteMemory

__all__ = ["FORMAT", "VERSION", "export_scope", "header_scope", "import_scope"]

FORMAT = "membrain-export"
"""The ``kind`` of an export's header line."""
VERSION = 1
"""The export format version this module writes and reads."""

_R = TypeVar("_R", StoredMessage, Fact, AuditEvent)

_MODELS: dict[str, type[BaseModel]] = {
    "message": StoredMessage,
    "fact": Fact,
    "entity": Entity,
    "event": AuditEvent,
}


def export_scope(memory: Memory | RemoteMemory, scope: Scope) -> Iterator[dict[str, Any]]:
    """The records of ``scope``'s (dataset, task), every session, as JSON-serialisable dicts.

    Inactive facts (superseded, forgotten, retracted) are included with their state.
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
    for event in memory.audit(scope=base):
        yield _record("event", event, event.scope.session)


def _record(kind: str, record: BaseModel, session: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": kind}
    if kind != "entity":
        data["session"] = session
    data.update(record.model_dump(mode="json", exclude={"scope"}))
    return data


@dataclass
class _Parsed:
    messages: list[StoredMessage] = field(default_factory=list)
    entities: list[Entity] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    events: list[AuditEvent] = field(default_factory=list)


def import_scope(memory: Memory, scope: Scope, lines: Iterable[str]) -> dict[str, int]:
    """Write the records of an export into ``scope``, which must be empty; how many of each.

    Every line is checked before anything is written. Into another (dataset, task) than the
    exported one, ids are derived anew for ``scope`` and the mapping is recorded in the audit
    log (see the module's description).

    Raises:
        InputError: a line is malformed (its number is named), or ``scope`` already holds
            records.
    """
    target = scope.without_session()
    source, parsed = _parse(lines)
    if _holds_records(memory, target):
        raise InputError(
            f"scope {target.key!r} is not empty; import only into an empty scope "
            "(delete it first to restore it)"
        )
    moved = _Move(source, target) if source != target else None
    if moved is not None:
        parsed = moved.apply(parsed)
    actor = Actor(kind=ActorKind.API, name="import")
    store = memory.store
    for session, messages in _by_session(parsed.messages).items():
        cause = Cause(actor, "import", _mapping(moved, messages))
        store.put_messages(_at(target, session), messages, cause=cause)
    cause = Cause(actor, "import", _mapping(moved, parsed.entities))
    store.put_entities(target, parsed.entities, cause=cause)
    participants = [e.name for e in parsed.entities if e.participant]
    for session, facts in _by_session(parsed.facts).items():
        cause = Cause(actor, "import", _mapping(moved, facts))
        store.put_facts(_at(target, session), facts, participants, cause=cause)
    for session, events in _by_session(parsed.events).items():
        store.import_events(_at(target, session), events)
    return {
        "message": len(parsed.messages),
        "entity": len(parsed.entities),
        "fact": len(parsed.facts),
        "event": len(parsed.events),
    }


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
        data = json.loads(line)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise InputError(f"line {number}: not a MemBrain export (no {FORMAT!r} header)")
    return _check_header(number, data.pop("kind", None), data)


def _parse(lines: Iterable[str]) -> tuple[Scope, _Parsed]:
    """The exported (dataset, task) and its records, placed in it."""
    parsed = _Parsed()
    header: Scope | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise InputError(f"line {number}: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise InputError(f"line {number}: expected a JSON object")
        kind = data.pop("kind", None)
        if header is None:
            header = _check_header(number, kind, data)
            continue
        model = _MODELS.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise InputError(f"line {number}: unknown record kind {kind!r}")
        session = data.pop("session", None)
        try:
            data["scope"] = _at(header, session)
            record = model.model_validate(data)
        except (ValueError, MembrainError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"line {number}: invalid {kind} record: {first}") from None
        if isinstance(record, StoredMessage):
            parsed.messages.append(record)
        elif isinstance(record, Entity):
            parsed.entities.append(record)
        elif isinstance(record, Fact):
            parsed.facts.append(record)
        elif isinstance(record, AuditEvent):
            parsed.events.append(record)
    if header is None:
        raise InputError("empty export: no header line")
    return header, parsed


def _check_header(number: int, kind: object, data: dict[str, Any]) -> Scope:
    if kind != FORMAT:
        raise InputError(f"line {number}: not a MemBrain export (no {FORMAT!r} header)")
    if data.get("version") != VERSION:
        raise InputError(f"line {number}: unsupported export version {data.get('version')!r}")
    try:
        return Scope(dataset=data.get("dataset"), task=data.get("task"))
    except (ValueError, MembrainError) as exc:
        raise InputError(f"line {number}: invalid dataset or task in the header: {exc}") from None


class _Move:
    """Records of one (dataset, task) placed in another: every id derived anew, every link kept."""

    def __init__(self, source: Scope, target: Scope) -> None:
        self.source, self.target = source, target
        self.ids: dict[str, str] = {}
        """Exported id → new id."""

    def apply(self, parsed: _Parsed) -> _Parsed:
        """``parsed`` in the target scope (messages, then entities and facts, then events)."""
        messages = [self._message(m) for m in parsed.messages]
        entities = [self._entity(e) for e in parsed.entities]
        facts = [self._fact(f) for f in parsed.facts]  # a fact's id needs only its messages'
        facts = [f.model_copy(update=self._links(f)) for f in facts]
        events = [self._event(e) for e in parsed.events]
        return _Parsed(messages, entities, facts, events)

    def _at(self, record: StoredMessage | Fact | AuditEvent) -> Scope:
        return _at(self.target, record.scope.session)

    def _new(self, old: str, new: str) -> str:
        self.ids[old] = new
        return new

    def _message(self, message: StoredMessage) -> StoredMessage:
        scope = self._at(message)
        new = self._new(message.id, message_id(scope, message.message))
        return message.model_copy(update={"id": new, "scope": scope})

    def _entity(self, entity: Entity) -> Entity:
        new = self._new(entity.id, entity_id(self.target, entity.name))
        return entity.model_copy(update={"id": new, "scope": self.target})

    def _fact(self, fact: Fact) -> Fact:
        scope = self._at(fact)
        sources = self._mapped(fact.sources)
        new = self._new(fact.id, fact_id_of(scope, fact.extractor, sources, fact.text))
        return fact.model_copy(update={"id": new, "scope": scope, "sources": sources})

    def _links(self, fact: Fact) -> dict[str, Any]:
        return {
            "entity_ids": self._mapped(fact.entity_ids),
            "supersedes": self._mapped(fact.supersedes),
            "superseded_by": self._mapped(fact.superseded_by),
        }

    def _event(self, event: AuditEvent) -> AuditEvent:
        scope = self._at(event)
        details = {**self._value(event.details), "original_id": event.id}
        return event.model_copy(
            update={
                "id": scope.record_id("event", self.source.key, event.id),
                "scope": scope,
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


def _mapping(
    moved: _Move | None, records: Sequence[StoredMessage | Entity | Fact]
) -> dict[str, Any]:
    """What a moved import's ``created`` events record: the exported scope and the old ids."""
    if moved is None:
        return {}
    inverse = {new: old for old, new in moved.ids.items()}
    return {
        "imported_from": moved.source.key,
        "original_ids": {r.id: inverse[r.id] for r in records if r.id in inverse},
    }


def _at(target: Scope, session: object) -> Scope:
    if session is not None and not isinstance(session, str):
        raise InputError(f"session must be a string or null, got {session!r}")
    return Scope(dataset=target.dataset, task=target.task, session=session or None)


def _by_session(records: Sequence[_R]) -> dict[str | None, list[_R]]:
    groups: dict[str | None, list[_R]] = {}
    for record in records:
        groups.setdefault(record.scope.session, []).append(record)
    return groups


def _holds_records(memory: Memory, scope: Scope) -> bool:
    store = memory.store
    if store.count_facts(scope):
        return True
    if next(store.iter_messages(scope), None) is not None:
        return True
    return next(store.iter_entities(scope), None) is not None
