from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from membrain import InputError, Message, Precision, Scope, ScopeError, TimeSpan
from membrain.api.scope import scope_part


def test_scope_key_and_deterministic_ids() -> None:
    a = Scope(dataset="okabe", task="chat")
    assert a.key == "okabe/chat"
    assert a.record_id("x") == Scope(dataset="okabe", task="chat", session="s").record_id("x")
    assert a.record_id("x") != Scope(dataset="okabe", task="other").record_id("x")
    assert a.record_id("x") != a.record_id("y")


@pytest.mark.parametrize("raw", [" lead", "a/b", "x" * 129, "new\nline", "auth0|64b7f1", ".."])
def test_scope_encodes_any_user_id_as_the_adapters_do(raw: str) -> None:
    scope = Scope(dataset=raw, task=raw)
    assert scope.dataset == scope.task == scope_part(raw) != raw
    assert Scope(dataset=scope.dataset, task=scope.task) == scope  # read back: the same tenant
    assert Scope(dataset=raw + "x").dataset != scope.dataset


@pytest.mark.parametrize("bad", ["", "\n", "\ud800", 7, None])
def test_scope_refuses_what_names_no_one(bad: object) -> None:
    with pytest.raises(ScopeError):
        Scope(dataset=bad, task="t")  # type: ignore[arg-type]
    with pytest.raises(ScopeError):
        Scope(dataset="d", task=bad)  # type: ignore[arg-type]


def test_message_times_become_utc() -> None:
    naive = Message(speaker="A", text="hi", timestamp=datetime(2024, 1, 1, 12))
    assert naive.timestamp.tzinfo is UTC
    aware = Message(
        speaker="A",
        text="hi",
        timestamp=datetime(2024, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))),
    )
    assert aware.timestamp == datetime(2024, 1, 1, 10, tzinfo=UTC)


def test_message_needs_content_and_timestamp() -> None:
    with pytest.raises(InputError):
        Message(speaker="A", text="  ", timestamp="2024-01-01T00:00:00Z")
    assert Message(speaker="A", text="", caption="a cat", timestamp="2024-01-01T00:00:00Z")
    with pytest.raises(ValidationError):
        Message.model_validate({"speaker": "A", "text": "hi"})


def test_timespan_validation() -> None:
    start = datetime(2023, 5, 1, tzinfo=UTC)
    with pytest.raises(InputError):
        TimeSpan(start=start, end=start, precision=Precision.DAY)
    with pytest.raises(InputError):
        TimeSpan(start=None, end=None, precision=Precision.DAY, interval=True)
    with pytest.raises(InputError):
        TimeSpan(start=start, end=None, precision=Precision.DAY)
    open_right = TimeSpan(start=start, end=None, precision=Precision.YEAR, interval=True)
    assert open_right.end is None


def test_a_scope_without_a_task_is_the_default_task() -> None:
    assert Scope(dataset="okabe") == Scope(dataset="okabe", task="default")
    assert Scope(dataset="okabe").record_id("x") == Scope(
        dataset="okabe", task="default"
    ).record_id("x")
