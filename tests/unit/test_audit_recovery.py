"""A change stored before its audit event was written is audited when the same call runs again."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrain import Memory, Scope
from membrain.storage.base import Collection
from membrain.storage.edge import EdgeBackend
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant")
SAID = {"speaker": "Sara", "text": "I adopted a cat named Miso.", "id": "m1"}


class _Killed(BaseException):
    """Stands for the process dying between a record's write and its audit event."""


def _audit_dies(monkeypatch: pytest.MonkeyPatch) -> None:
    upsert = EdgeBackend._upsert

    def killed(self: EdgeBackend, collection: Collection, points: object) -> None:
        if collection is Collection.AUDIT:
            raise _Killed
        upsert(self, collection, points)  # type: ignore[arg-type]

    monkeypatch.setattr(EdgeBackend, "_upsert", killed)


def test_a_forget_whose_event_was_lost_is_audited_on_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = Memory(tmp_path, dense=HashingEncoder(64))
    mem.add([{**SAID, "timestamp": "2024-03-15T10:00:00Z"}], scope=SCOPE)
    (fact,) = mem.facts(scope=SCOPE)
    _audit_dies(monkeypatch)
    with pytest.raises(_Killed):
        mem.forget([fact.id], scope=SCOPE, by="reviewer:ana")
    monkeypatch.undo()
    mem.close()

    with Memory(tmp_path, dense=HashingEncoder(64)) as reopened:
        assert reopened.audit(scope=SCOPE, actions=["forgotten"]) == []  # the gap
        reopened.forget([fact.id], scope=SCOPE, by="reviewer:ana")  # the call, again
        (event,) = reopened.audit(scope=SCOPE, actions=["forgotten"])
        assert event.targets == (fact.id,) and str(event.actor) == "reviewer:ana"
        assert event.details.get("recovered") is True
        reopened.forget([fact.id], scope=SCOPE)  # once audited, never twice
        assert len(reopened.audit(scope=SCOPE, actions=["forgotten"])) == 1


def test_a_message_whose_stored_event_was_lost_is_audited_when_added_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = Memory(tmp_path, dense=HashingEncoder(64))
    _audit_dies(monkeypatch)
    with pytest.raises(_Killed):
        mem.add([{**SAID, "timestamp": "2024-03-15T10:00:00Z"}], scope=SCOPE)
    monkeypatch.undo()
    mem.close()

    with Memory(tmp_path, dense=HashingEncoder(64)) as reopened:
        (stored,) = reopened.messages(scope=SCOPE)
        assert reopened.audit(scope=SCOPE, actions=["stored"]) == []
        reopened.add([{**SAID, "timestamp": "2024-03-15T10:00:00Z"}], scope=SCOPE)
        (event,) = reopened.audit(scope=SCOPE, actions=["stored"])
        assert event.targets == (stored.id,) and event.details.get("recovered") is True
        reopened.add([{**SAID, "timestamp": "2024-03-15T10:00:00Z"}], scope=SCOPE)
        assert len(reopened.audit(scope=SCOPE, actions=["stored"])) == 1
