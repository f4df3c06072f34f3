"""What a search plans from the scope's state: the ``replaced`` path, answered once per change."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from membrain import Memory, Message, Scope


def _counting(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record every count of the store's facts (the question "any superseded fact?")."""
    calls: list[Any] = []
    original: Callable[..., int] = mem.store.count_facts

    def counted(scope: Scope, where: Any = None) -> int:
        calls.append(where)
        return original(scope, where)

    monkeypatch.setattr(mem.store, "count_facts", counted)
    return calls


def _said(mem: Memory, scope: Scope, text: str, day: int) -> str:
    at = datetime(2024, 3, day, 9, tzinfo=UTC)
    (fact_id, *_) = mem.add(
        [Message(speaker="Sara", text=text, timestamp=at)], scope=scope
    ).fact_ids
    return str(fact_id)


def test_the_replaced_path_follows_supersession_and_purge(
    memory: Memory, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _said(memory, scope, "I ride a red Vespa scooter to work.", 1)
    new = _said(memory, scope, "I take the tram to work now.", 2)
    counts = _counting(memory, monkeypatch)

    before = memory.search("red Vespa scooter", scope=scope, mode="fast")
    again = memory.search("red Vespa scooter", scope=scope, mode="fast")
    assert "replaced" not in before.paths and "replaced" not in again.paths
    assert len(counts) == 1  # unchanged scope: counted once

    memory.supersede(old, [new], scope=scope, reason="tram now")
    after = memory.search("red Vespa scooter", scope=scope, mode="fast")
    assert "replaced" in after.paths
    assert [h.fact.id for h in after][:1] == [new]
    memory.search("red Vespa scooter", scope=scope, mode="fast")
    assert len(counts) == 2  # counted again after the change only

    memory.purge([old], scope=scope, reason="privacy")
    purged = memory.search("red Vespa scooter", scope=scope, mode="fast")
    assert "replaced" not in purged.paths
    assert len(counts) == 3


def test_another_scope_is_counted_apart(
    memory: Memory, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = Scope(dataset="sara", task="other")
    old = _said(memory, scope, "I ride a red Vespa scooter to work.", 1)
    new = _said(memory, scope, "I take the tram to work now.", 2)
    _said(memory, other, "I ride a red Vespa scooter to work.", 1)
    memory.supersede(old, [new], scope=scope)
    assert "replaced" in memory.search("red Vespa", scope=scope, mode="fast").paths
    assert "replaced" not in memory.search("red Vespa", scope=other, mode="fast").paths
    counts = _counting(memory, monkeypatch)
    memory.search("red Vespa", scope=scope, mode="fast")
    memory.search("red Vespa", scope=other, mode="fast")
    assert counts == []
