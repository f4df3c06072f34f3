"""The LangGraph store's TTL is the memory's expiry: items' facts expire with the item, a
refresh moves their expiry (audited, at most once per half TTL), the sweep marks them expired.

TTLs run on the store's clock (``store._now``), moved by hand: no test waits.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import langchain_membrain.langgraph.store as store_module
from langchain_membrain.langgraph import MembrainStore
from membrain import FactStatus, Memory
from membrain.testing import HashingEncoder


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_item_facts_expire_with_the_item_and_refreshes_move_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(store_module, "_now", clock)
    ns = ("memories", "sara")
    with (
        Memory(tmp_path / "m", dense=HashingEncoder(dim=64)) as mem,
        MembrainStore(memory=mem, path=":memory:", extract=False, user_name="Sara") as store,
    ):
        scope = store.scope_for(ns)
        store.put(ns, "code", {"text": "My door code is 4417."}, ttl=10)
        store.put(ns, "home", {"text": "I live in Porto."})
        mem.extract_pending(scope=scope)
        facts = mem.facts(scope=scope)
        code = next(f for f in facts if "4417" in f.text)
        home = next(f for f in facts if "Porto" in f.text)
        start = datetime.fromtimestamp(clock.now, UTC)
        assert code.expires_at is not None and home.expires_at is None
        assert abs(code.expires_at - (start + timedelta(minutes=10))) < timedelta(seconds=1)

        minute = timedelta(minutes=1)
        clock.now += 60
        assert (
            store.get(ns, "code", refresh_ttl=True) is not None
        )  # the item ends at 11 min: past its facts'
        assert mem.get(code.id, scope=scope).expires_at == start + 16 * minute  # + half a TTL
        moved = mem.audit(scope=scope, actions=["expiry_set"])
        assert len(moved) == 2  # the item's message and its fact, by the expiry actor
        assert {str(e.actor) for e in moved} == {"system:expiry"}
        clock.now += 4 * 60
        assert (
            store.get(ns, "code", refresh_ttl=True) is not None
        )  # ends at 15 min, before 16: nothing written
        assert len(mem.audit(scope=scope, actions=["expiry_set"])) == 2

        clock.now += 11 * 60  # the item expired at 15 min; its facts' expiry is back there
        assert store.get(ns, "code", refresh_ttl=False) is None
        assert store.sweep_ttl() == 1
        swept = mem.get(code.id, scope=scope)
        assert swept.status is FactStatus.EXPIRED
        assert swept.expires_at == start + 15 * minute
        assert [f.id for f in mem.facts(scope=scope)] == [home.id]
        assert mem.audit(scope=scope, actions=["expired"])
