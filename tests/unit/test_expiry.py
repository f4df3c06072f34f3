"""Expiry of messages and facts: validation, current reads, as_of and history, the sweep,
retention after the grace, rules by metadata, settings and moved expiries.

Time is never waited for: expiries are set in the future and the reads' clock
(``membrain.records.filters.now``) is moved past them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import membrain.api.expiry as expiry_module
import membrain.records.filters as filters_module
from membrain import (
    ConfigurationError,
    ExpiryRule,
    FactStatus,
    InputError,
    MembrainSettings,
    Memory,
    Scope,
)
from membrain.api.expiry import fact_expiry
from membrain.backends.base import Collection
from membrain.testing import HashingEncoder, files_holding

SCOPE = Scope(dataset="sara", task="expiry")
T0 = datetime.now(UTC).replace(microsecond=0)
"""The test's "now" (set again as each test starts: expiries count from the wall clock)."""
HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def _now() -> None:
    global T0
    T0 = datetime.now(UTC).replace(microsecond=0)


def _said(text: str, at: datetime | None = None, **metadata: object) -> dict[str, object]:
    moment = at or T0
    return {"speaker": "Sara", "text": text, "timestamp": moment.isoformat(), "metadata": metadata}


class Clock:
    """The clock current reads compare expiries with, moved by hand."""

    def __init__(self) -> None:
        self.at: datetime | None = None

    def __call__(self) -> datetime:
        return self.at or datetime.now(UTC)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(filters_module, "now", made)
    monkeypatch.setattr(expiry_module, "now", made)
    return made


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "m", dense=HashingEncoder(64)) as memory:
        yield memory


def _texts(found: object) -> list[str]:
    return [h.fact.text for h in found]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"ttl": 0}, "positive"),
        ({"ttl": -30}, "positive"),
        ({"ttl": "soon"}, "duration"),
        ({"expires_at": datetime(2030, 1, 1)}, "timezone-aware"),  # noqa: DTZ001
        ({"expires_at": T0 + HOUR, "ttl": 60}, "not both"),
    ],
)
def test_bad_expiries_are_refused_before_anything_is_written(
    mem: Memory, arguments: dict[str, object], problem: str
) -> None:
    with pytest.raises(InputError, match=problem):
        mem.add([_said("My door code is 4417.")], scope=SCOPE, **arguments)  # type: ignore[arg-type]
    assert mem.messages(scope=SCOPE) == [] and mem.audit(scope=SCOPE) == []


def test_an_expired_fact_leaves_current_reads_at_its_expiry_and_stays_in_the_past(
    mem: Memory, clock: Clock
) -> None:
    ends = T0 + HOUR
    mem.add([_said("My door code is 4417.")], scope=SCOPE, expires_at=ends)
    mem.add([_said("I live in Porto.")], scope=SCOPE)
    (code,) = [f for f in mem.facts(scope=SCOPE) if "4417" in f.text]
    assert code.expires_at == ends
    (message,) = [m for m in mem.messages(scope=SCOPE) if "4417" in m.message.text]
    assert message.expires_at == ends
    assert any("4417" in t for t in _texts(mem.search("door code", scope=SCOPE)))
    assert any("4417" in h.message.text for h in mem.search_messages("door code", scope=SCOPE))

    clock.at = ends  # expires_at <= the read's time: gone from every current read
    assert not any("4417" in t for t in _texts(mem.search("door code", scope=SCOPE)))
    for mode in ("fast", "expand", "deep"):
        assert not any("4417" in t for t in _texts(mem.search("code", scope=SCOPE, mode=mode)))
    assert "4417" not in mem.context("What is the door code?", scope=SCOPE).text
    assert [f.id for f in mem.facts(scope=SCOPE) if f.id == code.id] == []
    assert not any("4417" in h.message.text for h in mem.search_messages("code", scope=SCOPE))
    assert any("Porto" in t for t in _texts(mem.search("Where does Sara live?", scope=SCOPE)))
    # before its expiry, as_of still sees it; get and history always do
    before = mem.search("door code", scope=SCOPE, as_of=ends - timedelta(minutes=1))
    assert any("4417" in t for t in _texts(before))
    after = mem.search("door code", scope=SCOPE, as_of=ends + timedelta(minutes=1))
    assert not any("4417" in t for t in _texts(after))
    assert mem.get(code.id, scope=SCOPE).expires_at == ends
    assert [f.id for f in mem.history(code.id, scope=SCOPE).facts] == [code.id]


def test_the_sweep_marks_expired_facts_audited_by_the_expiry_actor(mem: Memory) -> None:
    ends = T0 + HOUR
    mem.add([_said("My door code is 4417.")], scope=SCOPE, ttl=HOUR)
    mem.add([_said("I live in Porto.")], scope=SCOPE)
    (code,) = [f for f in mem.facts(scope=SCOPE) if "4417" in f.text]
    assert code.expires_at is not None and abs(code.expires_at - ends) < timedelta(minutes=5)
    assert mem.expire(scope=SCOPE) == []  # nothing expired yet
    marked = mem.expire(scope=SCOPE, at=code.expires_at)
    assert marked == [code.id]
    assert mem.expire(scope=SCOPE, at=code.expires_at) == []  # once
    (event,) = mem.audit(scope=SCOPE, actions=["expired"])
    assert event.targets == (code.id,) and str(event.actor) == "system:expiry"
    assert mem.get(code.id, scope=SCOPE).status is FactStatus.EXPIRED
    history = mem.history(code.id, scope=SCOPE)
    assert "expired" in {e.action.value for e in history.events}
    # still what the memory believed before it expired
    found = mem.search("door code", scope=SCOPE, as_of=code.expires_at - timedelta(seconds=1))
    assert any("4417" in t for t in _texts(found))


def test_retention_erases_what_expired_longer_ago_than_the_grace(tmp_path: Path) -> None:
    path = tmp_path / "grace"
    with Memory(path, dense=HashingEncoder(64), expiry_grace=timedelta(days=2)) as mem:
        ends = T0 + HOUR
        mem.add([_said("My Quendarian code is 4417.")], scope=SCOPE, expires_at=ends)
        mem.add([_said("I live in Porto.")], scope=SCOPE)
        (code,) = [f for f in mem.facts(scope=SCOPE) if "4417" in f.text]
        early = mem.apply_retention(scope=SCOPE, at=ends + timedelta(days=1))
        assert early.fact_ids == () and early.message_ids == ()  # marked, kept for the grace
        assert mem.get(code.id, scope=SCOPE).status is FactStatus.EXPIRED
        erased = mem.apply_retention(scope=SCOPE, at=ends + timedelta(days=3))
        assert erased.fact_ids == (code.id,) and len(erased.message_ids) == 1
        assert [f.text for f in mem.facts(scope=SCOPE, include_inactive=True)] == [
            "[Sara] lives in [Porto]."
        ]
        assert len(mem.messages(scope=SCOPE)) == 1
        assert mem.audit(scope=SCOPE, actions=["purged"])
    assert files_holding(path, "Quendarian") == []


def test_a_rule_by_metadata_expires_messages_after_their_timestamp(tmp_path: Path) -> None:
    rule = ExpiryRule(metadata={"kind": "otp"}, after=timedelta(minutes=10))
    with Memory(tmp_path / "r", dense=HashingEncoder(64), expiry=rule) as mem:
        mem.add([_said("My login code is 918273.", kind="otp")], scope=SCOPE)
        mem.add([_said("I live in Porto.", kind="fact")], scope=SCOPE)
        old = T0 - HOUR
        mem.add([_said("My old code was 555111.", at=old, kind="otp")], scope=SCOPE)
        # an add's own expiry wins over the rules
        mem.add([_said("My new code is 777.", kind="otp")], scope=SCOPE, ttl=timedelta(days=1))
        ends = {m.message.text: m.expires_at for m in mem.messages(scope=SCOPE)}
        assert ends["My login code is 918273."] == T0 + timedelta(minutes=10)
        assert ends["I live in Porto."] is None
        assert ends["My new code is 777."] is not None
        assert ends["My new code is 777."] > T0 + timedelta(hours=23)
        texts = [f.text for f in mem.facts(scope=SCOPE)]
        assert not any("555111" in t for t in texts)  # expired when it was added
        assert any("918273" in t for t in texts)
    with pytest.raises(ConfigurationError, match="expiry"):
        Memory(tmp_path / "bad", dense=HashingEncoder(64), expiry=[{"after": 0}])  # type: ignore[list-item]


def test_rules_and_grace_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMBRAIN_EXPIRY", '[{"metadata": {"kind": "otp"}, "after": 600}]')
    monkeypatch.setenv("MEMBRAIN_EXPIRY_GRACE", "P1D")
    settings = MembrainSettings(path=tmp_path / "s")
    assert settings.expiry == [ExpiryRule(metadata={"kind": "otp"}, after=timedelta(minutes=10))]
    assert settings.expiry_grace == timedelta(days=1)
    with Memory.from_settings(settings, dense=HashingEncoder(64)) as mem:
        assert mem.expiry == (ExpiryRule(metadata={"kind": "otp"}, after=timedelta(seconds=600)),)


def test_a_fact_expires_with_the_latest_of_its_sources_when_all_expire() -> None:
    assert fact_expiry([T0, T0 + HOUR]) == T0 + HOUR
    assert fact_expiry([T0, None]) is None
    assert fact_expiry([]) is None


def test_update_takes_an_expiry_and_extend_expiry_moves_it(mem: Memory, clock: Clock) -> None:
    mem.add([_said("I live in Porto.")], scope=SCOPE)
    (home,) = mem.facts(scope=SCOPE)
    with pytest.raises(InputError, match="not both"):
        mem.update(home.id, "[Sara] lives in [Lisbon].", scope=SCOPE, ttl=60, expires_at=T0)
    assert mem.get(home.id, scope=SCOPE).status is FactStatus.ACTIVE
    ends = T0 + HOUR
    new = mem.update(home.id, "[Sara] lives in [Lisbon].", scope=SCOPE, expires_at=ends)
    assert new.expires_at == ends
    later = ends + HOUR
    assert mem.extend_expiry(later, fact_ids=[new.id], scope=SCOPE) == [new.id]
    assert mem.get(new.id, scope=SCOPE).expires_at == later
    (moved,) = mem.audit(scope=SCOPE, actions=["expiry_set"])
    assert moved.targets == (new.id,)
    clock.at = ends + timedelta(minutes=1)  # past the old expiry, before the new one
    assert [f.id for f in mem.facts(scope=SCOPE)] == [new.id]
    clock.at = later
    assert mem.facts(scope=SCOPE) == []
    # an expired fact is never revived
    assert mem.extend_expiry(later + HOUR, fact_ids=[new.id], scope=SCOPE) == []


def test_facts_stored_before_expiries_existed_stay_current(tmp_path: Path) -> None:
    path = tmp_path / "old"
    with Memory(path, dense=HashingEncoder(64)) as mem:
        mem.add([_said("I live in Porto."), _said("I adopted a cat named Miso.")], scope=SCOPE)
        ids = sorted(f.id for f in mem.facts(scope=SCOPE))
        # as an older version wrote them: no derived ``expires`` field
        mem.store.backend.set_payload(Collection.FACTS, SCOPE, ids, {"expires": None})
    with Memory(path, dense=HashingEncoder(64)) as mem:
        assert sorted(f.id for f in mem.facts(scope=SCOPE)) == ids
        assert any("Miso" in t for t in _texts(mem.search("cat", scope=SCOPE)))
