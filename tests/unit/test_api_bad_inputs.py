"""Every bad argument to the public API is a MembrainError with a one-line message."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from membrain import MembrainError, Memory, Scope
from membrain.testing import HashingEncoder

S = Scope(dataset="d", task="t")
UTC = dt.UTC


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path: Path = tmp_path_factory.mktemp("bad-inputs")
    with Memory(path, dense=HashingEncoder(64)) as memory:
        memory.add("I adopted a cat named Miso.", scope=S, user_name="Sara")
        yield memory


def _message(timestamp: object, text: str = "x") -> list[dict[str, object]]:
    return [{"speaker": "a", "text": text, "timestamp": timestamp}]


CALLS: dict[str, Callable[[Memory, str], Any]] = {
    "question None": lambda m, f: m.search(None, scope=S),
    "question lone surrogate": lambda m, f: m.search("\ud800", scope=S),
    "k a string": lambda m, f: m.search("x", scope=S, k="3"),
    "k zero": lambda m, f: m.search("x", scope=S, k=0),
    "mode unknown": lambda m, f: m.search("x", scope=S, mode=3),
    "scope None": lambda m, f: m.search("x", scope=None),
    "scope a dict": lambda m, f: m.search("x", scope={"dataset": "d"}),
    "as_of a string": lambda m, f: m.search("x", scope=S, as_of="yesterday"),
    "as_of and valid_at": lambda m, f: m.search(
        "x", scope=S, as_of=dt.datetime(2024, 1, 1), valid_at=dt.datetime(2024, 1, 1)
    ),
    "audit since a string": lambda m, f: m.audit(scope=S, since="x"),
    "audit unknown action": lambda m, f: m.audit(scope=S, actions=["nope"]),
    "context budget negative": lambda m, f: m.context("x", scope=S, max_tokens=-1),
    "forget None": lambda m, f: m.forget(None, scope=S),
    "forget a number": lambda m, f: m.forget([1], scope=S),
    "forget unknown id": lambda m, f: m.forget(["nope"], scope=S),
    "supersede by itself": lambda m, f: m.supersede(f, [f], scope=S),
    "supersede two old facts": lambda m, f: m.supersede([f, f], [f], scope=S),
    "history None": lambda m, f: m.history(None, scope=S),
    "purge nothing": lambda m, f: m.purge([], scope=S),
    "purge messages None": lambda m, f: m.purge([f], scope=S, messages=None),
    "resolve unknown item": lambda m, f: m.resolve("nope", accept=True, scope=S),
    "add None": lambda m, f: m.add(None, scope=S),
    "add a number": lambda m, f: m.add(5, scope=S),
    "add by a number": lambda m, f: m.add("hi", scope=S, by=3),
    "timestamp year 10000": lambda m, f: m.add(_message("10000-01-01T00:00:00Z"), scope=S),
    "timestamp NaN": lambda m, f: m.add(_message(float("nan")), scope=S),
    "timestamp 10**20": lambda m, f: m.add(_message(10**20), scope=S),
    "timestamp year 1 east of UTC": lambda m, f: m.add(
        _message("0001-01-01T00:00:00+23:59"), scope=S
    ),
    "timestamp year 9999 west of UTC": lambda m, f: m.add(
        _message("9999-12-31T23:59:59-23:59", "yesterday"), scope=S
    ),
    "dataset a number": lambda m, f: Scope(dataset=1, task="t"),
    "dataset empty": lambda m, f: Scope(dataset="", task="t"),
    "delete_scope a string": lambda m, f: m.delete_scope("d/t"),
    "retention at a string": lambda m, f: m.apply_retention(at="x"),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_bad_argument_is_a_membrain_error(mem: Memory, name: str) -> None:
    before = [(f.id, f.status) for f in mem.facts(scope=S, include_inactive=True)]
    with pytest.raises(MembrainError) as raised:
        CALLS[name](mem, before[0][0])
    assert "\n" not in str(raised.value).strip()
    assert [(f.id, f.status) for f in mem.facts(scope=S, include_inactive=True)] == before
