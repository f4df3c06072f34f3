"""Move a (dataset, task) scope from one store to another as JSON Lines.

:func:`export_scope` yields one JSON-serialisable record per line: a header
``{"kind": "membrain-export", "version": 1, "dataset": ..., "task": ...}``, then every stored
message, entity and fact of the scope (``{"kind": "message", "session": ..., ...}``: the
record's fields without its scope, plus the session it was written in), then its audit log
(``"kind": "event"``). Facts keep their status, trust and supersession links, so a forgotten
fact stays forgotten, and its history says who forgot it, when and why.

:func:`import_scope` writes such lines into an empty scope of another store through the record
store (audited as done by ``api:import``), then appends the exported events with their own
ids, actors, times and reasons, each marked ``details["imported"]``. Record ids are kept: they
are derived from the scope's ``dataset/task`` (a message's id from its scope and caller id, which
is how a re-ingested message is recognised), so the target must be the exported (dataset, task).
Moving a scope to another store is the use case; a copy under another name in the same store
is refused, as it would give the copy ids that belong to the original.

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

    Every line is checked before anything is written.

    Raises:
        InputError: a line is malformed (its number is named), the export is of another
            (dataset, task) than ``scope``, or ``scope`` already holds records.
    """
    target = scope.without_session()
    parsed = _parse(target, lines)
    if _holds_records(memory, target):
        raise InputError(
            f"scope {target.key!r} is not empty; import only into an empty scope "
            "(delete it first to restore it)"
        )
    cause = Cause(Actor(kind=ActorKind.API, name="import"), "import")
    store = memory.store
    for session, messages in _by_session(parsed.messages).items():
        store.put_messages(_at(target, session), messages, cause=cause)
    store.put_entities(target, parsed.entities, cause=cause)
    participants = [e.name for e in parsed.entities if e.participant]
    for session, facts in _by_session(parsed.facts).items():
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
    if not isinstance(data, dict) or data.get("kind") != FORMAT:
        raise InputError(f"line {number}: not a MemBrain export (no {FORMAT!r} header)")
    try:
        return Scope(dataset=data.get("dataset"), task=data.get("task"))
    except (ValueError, MembrainError) as exc:
        raise InputError(f"line {number}: invalid dataset or task in the header: {exc}") from None


def _parse(target: Scope, lines: Iterable[str]) -> _Parsed:
    parsed = _Parsed()
    header: dict[str, Any] | None = None
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
            header = _check_header(number, kind, data, target)
            continue
        model = _MODELS.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise InputError(f"line {number}: unknown record kind {kind!r}")
        session = data.pop("session", None)
        try:
            data["scope"] = _at(target, session)
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
    return parsed


def _check_header(number: int, kind: object, data: dict[str, Any], target: Scope) -> dict[str, Any]:
    if kind != FORMAT:
        raise InputError(f"line {number}: not a MemBrain export (no {FORMAT!r} header)")
    if data.get("version") != VERSION:
        raise InputError(f"line {number}: unsupported export version {data.get('version')!r}")
    source = (data.get("dataset"), data.get("task"))
    if source != (target.dataset, target.task):
        raise InputError(
            f"the export is of {source[0]}/{source[1]}, not {target.key!r}: record ids derive "
            "from the dataset and task, so an export is imported under its own (into another "
            "store)"
        )
    return data


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
