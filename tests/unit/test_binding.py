"""membrain.binding: the adapters' clock, scope binding and speaker names."""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta

import pytest

from membrain import ConfigurationError, Scope, ScopeError
from membrain.api import inputs as inputs_module
from membrain.binding import (
    CLOCK,
    DEFAULT_ASSISTANT_NAME,
    DEFAULT_USER_NAME,
    MonotonicClock,
    ScopeBinding,
    scope_part,
)

TICK = timedelta(microseconds=1)


# -- clock -------------------------------------------------------------------------------------
def test_clock_reads_utc_now() -> None:
    before = datetime.now(UTC)
    moment = MonotonicClock().next()
    after = datetime.now(UTC)
    assert moment.tzinfo is UTC
    assert before <= moment <= after + TICK


def test_clock_strictly_increases_when_the_wall_clock_stalls_or_goes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frozen = [datetime(2024, 3, 15, 12, 0, tzinfo=UTC)]
    # The clock reads the wall clock through membrain.api.inputs.now.
    monkeypatch.setattr(inputs_module, "now", lambda: frozen[0])
    clock = MonotonicClock()
    readings = [clock.next() for _ in range(5)]
    frozen[0] -= timedelta(seconds=1)  # the wall clock is set back
    readings += [clock.next() for _ in range(5)]
    assert readings[0] == datetime(2024, 3, 15, 12, 0, tzinfo=UTC)
    assert all(b - a == TICK for a, b in itertools.pairwise(readings))


def test_clock_is_strictly_increasing_across_threads() -> None:
    clock = MonotonicClock()
    threads, per_thread = 8, 2000
    readings: list[list[datetime]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def read(into: list[datetime]) -> None:
        start.wait()
        for _ in range(per_thread):
            into.append(clock.next())

    workers = [threading.Thread(target=read, args=(r,)) for r in readings]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for own in readings:  # each thread sees its readings increase
        assert all(a < b for a, b in itertools.pairwise(own))
    everything = sorted(r for own in readings for r in own)
    assert len(set(everything)) == threads * per_thread  # no reading is handed out twice
    assert all(b - a >= TICK for a, b in itertools.pairwise(everything))


def test_the_process_wide_clock_is_a_monotonic_clock() -> None:
    assert isinstance(CLOCK, MonotonicClock)
    assert CLOCK.next() < CLOCK.next()


def test_default_speaker_names() -> None:
    assert (DEFAULT_USER_NAME, DEFAULT_ASSISTANT_NAME) == ("User", "Assistant")


# -- fixed scopes and scope parts --------------------------------------------------------------
SCOPE = Scope(dataset="sara", task="assistant", session="t1")


def test_fixed_binding_ignores_values() -> None:
    fixed = ScopeBinding.fixed(SCOPE)
    assert fixed.scope == SCOPE
    assert fixed.resolve() == SCOPE
    assert fixed.resolve({"user_id": "nate", "thread_id": "t9"}) == SCOPE
    without_session = ScopeBinding.fixed(SCOPE.without_session())
    assert without_session.resolve({"thread_id": "t9"}) == SCOPE.without_session()


def test_of_takes_a_scope_or_its_parts() -> None:
    assert ScopeBinding.of(SCOPE).resolve() == SCOPE
    by_parts = ScopeBinding.of(dataset="sara", task="assistant", session="t1")
    assert by_parts.scope == SCOPE
    assert ScopeBinding.of(dataset="sara", task="assistant").resolve() == Scope(
        dataset="sara", task="assistant"
    )


def test_of_refuses_both_and_neither() -> None:
    with pytest.raises(ScopeError, match="not both"):
        ScopeBinding.of(SCOPE, dataset="sara")
    with pytest.raises(ScopeError, match="not both"):
        ScopeBinding.of(SCOPE, session="t2")
    with pytest.raises(ScopeError, match=r"^MyAdapter needs a scope: pass scope=Scope"):
        ScopeBinding.of(owner="MyAdapter")
    with pytest.raises(ScopeError, match="needs a scope"):
        ScopeBinding.of(dataset="sara")  # no task
    with pytest.raises(ScopeError, match="needs a scope"):
        ScopeBinding.of(task="assistant", session="t1")  # no dataset


def test_of_validates_the_parts() -> None:
    encoded = ScopeBinding.of(dataset="sara/bad", task="assistant").scope
    assert encoded is not None and encoded.dataset == scope_part("sara/bad")
    with pytest.raises(ScopeError, match="scope task"):
        ScopeBinding.of(dataset="sara", task="")


def test_of_can_require_a_session() -> None:
    with pytest.raises(ScopeError, match=r"Chat needs a scope with a session, e\.g\. Scope"):
        ScopeBinding.of(
            Scope(dataset="sara", task="assistant"), owner="Chat", session_required=True
        )
    with pytest.raises(ScopeError, match="with a session"):
        ScopeBinding.of(dataset="sara", task="assistant", session_required=True)
    with pytest.raises(ScopeError, match="with a session: pass"):
        ScopeBinding.of(session_required=True)
    assert ScopeBinding.of(SCOPE, session_required=True).scope == SCOPE


# -- templates ---------------------------------------------------------------------------------
def test_default_template() -> None:
    template = ScopeBinding()
    assert template.scope is None
    assert template.resolve({"user_id": "sara", "thread_id": "t1"}) == SCOPE
    assert template.resolve({"user_id": "sara"}) == Scope(dataset="sara", task="assistant")
    assert template.resolve({"user_id": "sara", "assistant_id": "tutor", "thread_id": 7}) == Scope(
        dataset="sara", task="tutor", session="7"
    )


def test_template_with_custom_parts_and_defaults() -> None:
    template = ScopeBinding(
        dataset="{org}:{user_id}", task="tutor", session="{thread_id}-x", defaults={"org": "acme"}
    )
    assert template.resolve({"user_id": "sara"}) == Scope(dataset="acme:sara", task="tutor")
    assert template.resolve({"user_id": "sara", "org": "globex", "thread_id": "t1"}) == Scope(
        dataset="globex:sara", task="tutor", session="t1-x"
    )


def test_none_and_empty_values_are_missing_and_defaults_fill_them() -> None:
    template = ScopeBinding(defaults={"assistant_id": "helper", "user_id": "anon"})
    assert template.resolve({"user_id": None, "assistant_id": "", "thread_id": ""}) == Scope(
        dataset="anon", task="helper"
    )


def test_missing_dataset_or_task_key_is_a_clear_error() -> None:
    with pytest.raises(ScopeError) as caught:
        ScopeBinding().resolve({"thread_id": "t1"}, source="the context")
    message = str(caught.value)
    assert "the scope's dataset is '{user_id}' but the context has no 'user_id'" in message
    assert "defaults={'user_id': ...}" in message
    with pytest.raises(ScopeError, match="the scope's task is '{agent}'.*has no 'agent'"):
        ScopeBinding(task="{agent}").resolve({"user_id": "sara"})
    with pytest.raises(ScopeError, match="has no 'user_id'"):
        ScopeBinding().resolve(None)
    with pytest.raises(ScopeError, match=r"has no 'user_id'; add 'user_id' to the run, or"):
        ScopeBinding().resolve({}, hint="add {key} to the run")


def test_missing_session_key_means_no_session() -> None:
    template = ScopeBinding(session="{org}/{thread_id}")
    assert template.resolve({"user_id": "sara", "thread_id": "t1"}).session is None
    never = ScopeBinding(session=None)
    assert never.resolve({"user_id": "sara", "thread_id": "t1"}).session is None


def test_resolved_parts_are_validated() -> None:
    # values are encoded to fit (scope_part), and so is a part the template's own text spoils
    assert ScopeBinding(dataset="a/{user_id}").resolve({"user_id": "sara"}).dataset == scope_part(
        "a/sara"
    )
    resolved = ScopeBinding(session="{thread_id}|x").resolve({"user_id": "sara", "thread_id": "t1"})
    assert resolved.session == scope_part("t1|x")


def test_malformed_templates_are_refused_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="does not parse"):
        ScopeBinding(dataset="{user_id")
    with pytest.raises(ConfigurationError, match="must name a value"):
        ScopeBinding(dataset="{}")
    with pytest.raises(ConfigurationError, match="must name a value"):
        ScopeBinding(dataset="{user.name}")
    with pytest.raises(ScopeError):  # all literal: a fixed scope, checked at once
        ScopeBinding(dataset="", task="assistant", session=None)


def test_bindings_are_immutable_values() -> None:
    defaults = {"assistant_id": "tutor"}
    template = ScopeBinding(defaults=defaults)
    defaults["assistant_id"] = "changed"
    assert template.resolve({"user_id": "sara"}).task == "tutor"
    with pytest.raises(TypeError):
        template.defaults["assistant_id"] = "x"  # type: ignore[index]
    assert ScopeBinding() == ScopeBinding()
    assert hash(ScopeBinding.fixed(SCOPE)) == hash(ScopeBinding.fixed(SCOPE))
    assert ScopeBinding.fixed(SCOPE) != ScopeBinding()
