"""Fuzzing what callers hand to MemBrain: ``Memory.add``, ``Scope`` and the file loaders.

Properties, over arbitrary Unicode, typed markup, times at and past the calendar's edges, values
of the wrong type, deep nesting and files that are not JSON:

1. only :class:`membrain.MembrainError` subclasses escape (``add`` refuses bad input with its
   documented ``InputError`` or ``ScopeError``, and then stores nothing);
2. nothing already stored changes: the scope's baseline messages and facts keep their ids, texts
   and statuses, and another scope lists byte for byte the same;
3. a message that was accepted is stored with the text it was given and ends ``processed`` or
   ``failed``, never ``pending``, once ``add`` returns (offline extractor).

One store per test function (opening one takes about a second; the parametrized edge cases share
one per module); each example writes into a scope of its own that already holds the baseline.
Examples are derandomized, so CI sees the same ones. Inputs Hypothesis cannot draw or print (an
int past ``str()``'s digit limit, nesting past the stack) and the smallest failing inputs fuzzing
found are parametrized cases rather than ``@example``s: a failing explicit example would stop
Hypothesis from generating any others.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import fuzz_strategies as fs
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from store_templates import empty_store

from membrain import (
    FactStatus,
    InputError,
    MembrainError,
    Memory,
    Message,
    MessageStatus,
    Scope,
    ScopeError,
)
from membrain.files.loaders import Conversation, load_conversations
from membrain.testing import HashingEncoder

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)

OTHER = Scope(dataset="fuzz", task="other")
"""A scope no example writes to: it must list the same after every example."""

BASELINE: tuple[dict[str, str], ...] = (
    {
        "speaker": "Sara",
        "text": "I adopted a cat named Miso.",
        "timestamp": "2024-03-15T14:00:00Z",
        "id": fs.BASELINE_IDS[0],
    },
    {
        "speaker": "Nate",
        "text": "My sister Ana moved to Lisbon last week.",
        "timestamp": "2024-03-15T14:01:00Z",
        "id": fs.BASELINE_IDS[1],
    },
)
ACCEPTED_END = (MessageStatus.PROCESSED, MessageStatus.FAILED)


@dataclass(frozen=True)
class Baseline:
    """Ids, texts and statuses of a scope's messages and facts."""

    messages: dict[str, tuple[str, MessageStatus]]
    facts: dict[str, tuple[str, FactStatus]]


def _state(mem: Memory, scope: Scope) -> Baseline:
    return Baseline(
        messages={m.id: (m.message.text, m.status) for m in mem.messages(scope=scope)},
        facts={f.id: (f.text, f.status) for f in mem.facts(scope=scope, include_inactive=True)},
    )


def _restricted(state: Baseline, to: Baseline) -> Baseline:
    """``state`` limited to the records ``to`` holds (new records are allowed)."""
    return Baseline(
        messages={i: v for i, v in state.messages.items() if i in to.messages},
        facts={i: v for i, v in state.facts.items() if i in to.facts},
    )


def _listing(mem: Memory, scope: Scope) -> list[str]:
    """Everything the API lists of ``scope``, serialized."""
    messages = sorted(mem.messages(scope=scope), key=lambda m: m.id)
    facts = sorted(mem.facts(scope=scope, include_inactive=True), key=lambda f: f.id)
    entities = sorted(mem.entities(scope=scope), key=lambda e: e.id)
    return [r.model_dump_json() for r in (*messages, *facts, *entities)]


@dataclass
class FuzzStore:
    """One store for a whole test function, with a scope per example."""

    mem: Memory
    other: list[str] = field(repr=False)
    numbers: Iterator[int] = field(default_factory=itertools.count, repr=False)

    def fresh_scope(self) -> tuple[Scope, Baseline]:
        """A new scope holding the baseline messages and their facts."""
        scope = Scope(dataset="fuzz", task=f"example-{next(self.numbers)}")
        self.mem.add(list(BASELINE), scope=scope)
        baseline = _state(self.mem, scope)
        assert len(baseline.messages) == len(BASELINE) and baseline.facts
        assert {s for _, s in baseline.messages.values()} == {MessageStatus.PROCESSED}
        return scope, baseline

    def check_untouched(self, scope: Scope, baseline: Baseline) -> None:
        """The baseline of ``scope`` and all of the other scope are as they were."""
        now = _state(self.mem, scope)
        assert _restricted(now, baseline) == baseline, "a stored message or fact changed"
        assert _listing(self.mem, OTHER) == self.other, "another scope changed"


@contextmanager
def _opened_store(path: Path) -> Iterator[FuzzStore]:
    with Memory(empty_store(path), dense=HashingEncoder(64)) as mem:
        mem.add(
            [
                *BASELINE,
                {"speaker": "Ana", "text": "I work in Porto.", "timestamp": "2024-03-16T09:00:00Z"},
            ],
            scope=OTHER,
        )
        mem.add(
            "My brother Leo plays chess.", scope=Scope(dataset="fuzz", task="other", session="s1")
        )
        other = _listing(mem, OTHER)
        assert len(other) > 3
        yield FuzzStore(mem, other)


@pytest.fixture
def fuzz_store(tmp_path: Path) -> Iterator[FuzzStore]:
    """A store for one test function (its examples share it)."""
    with _opened_store(tmp_path / "store") as store:
        yield store


@pytest.fixture(scope="module")
def edge_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzStore]:
    """A store shared by the edge cases of this module (each writes to a scope of its own)."""
    with _opened_store(tmp_path_factory.mktemp("edge") / "store") as store:
        yield store


def _only_membrain_errors(exc: BaseException, call: str) -> None:
    """Re-raise ``exc`` (with its own traceback) unless it is a MembrainError."""
    if not isinstance(exc, MembrainError):
        exc.add_note(f"{call} let {type(exc).__name__} escape: only MembrainError subclasses may")
        raise exc


def _target_scope(target: fs.Target, own: Scope) -> object:
    """The ``scope`` argument ``target`` stands for (``own`` when its parts make no scope)."""
    if target.kind == "junk":
        return target.dataset
    try:
        if target.kind == "session":
            return Scope(dataset=own.dataset, task=own.task, session=target.session)
        if target.kind == "parts":
            scope = Scope(dataset=target.dataset, task=target.task, session=target.session)
            return own if scope.without_session() == OTHER else scope
    except MembrainError:
        pass
    except Exception as exc:
        _only_membrain_errors(exc, "Scope()")
    return own


def _given_count(messages: object) -> int:
    if isinstance(messages, str | Message | Mapping) or fs.is_chat_like(messages):
        return 1
    assert isinstance(messages, Iterable)
    return len(list(messages))


# -- Scope -----------------------------------------------------------------------------------


@settings(FUZZ, max_examples=400)
@given(
    dataset=fs.scope_part_texts,
    task=fs.scope_part_texts,
    session=st.none() | fs.scope_part_texts,
)
def test_scope_parts_are_accepted_or_refused_with_scope_error(
    dataset: str, task: str, session: str | None
) -> None:
    try:
        scope = Scope(dataset=dataset, task=task, session=session)
    except Exception as exc:
        _only_membrain_errors(exc, "Scope()")
        assert isinstance(exc, ScopeError)
        return
    parts = [scope.dataset, scope.task, *([scope.session] if scope.session is not None else [])]
    for part in parts:
        assert 1 <= len(part) <= 128 and not part.startswith(" ") and part not in (".", "..")
        assert "/" not in part and "\n" not in part
        part.encode("utf-8")  # no lone surrogate
    assert scope.key == f"{scope.dataset}/{scope.task}"
    assert Scope(dataset=scope.dataset, task=scope.task, session=scope.session) == scope


@settings(FUZZ, max_examples=100)
@given(dataset=fs.junk | st.sampled_from(["d"]), task=fs.junk | st.sampled_from(["t"]))
def test_scope_parts_of_other_types_are_refused_with_scope_error(dataset: Any, task: Any) -> None:
    try:
        scope = Scope(dataset=dataset, task=task)
    except Exception as exc:
        _only_membrain_errors(exc, "Scope()")
        return
    assert isinstance(scope.dataset, str) and isinstance(scope.task, str)


# -- Memory.add ------------------------------------------------------------------------------


@settings(FUZZ, max_examples=250)
@given(
    messages=fs.add_messages,
    target=fs.targets,
    by=fs.actors,
    user_name=st.sampled_from(["User", "Sara"]) | fs.speakers,
    assistant_name=st.sampled_from(["Assistant"]) | fs.speakers,
)
def test_add_refuses_with_membrain_errors_and_keeps_what_is_stored(
    fuzz_store: FuzzStore,
    messages: Any,
    target: fs.Target,
    by: Any,
    user_name: Any,
    assistant_name: Any,
) -> None:
    own, baseline = fuzz_store.fresh_scope()
    outcome = _add_and_check(
        fuzz_store,
        own,
        baseline,
        messages,
        _target_scope(target, own),
        by=by,
        user_name=user_name,
        assistant_name=assistant_name,
    )
    event(outcome)


def _add_and_check(
    store: FuzzStore,
    own: Scope,
    baseline: Baseline,
    messages: Any,
    scope: Any,
    **options: Any,
) -> str:
    """``store.mem.add(messages, scope=scope, **options)`` and the three properties; the outcome."""
    mem = store.mem
    before = {m.id for m in mem.messages(scope=scope)} if isinstance(scope, Scope) else set()
    try:
        result = mem.add(messages, scope=scope, **options)
    except Exception as exc:
        store.check_untouched(own, baseline)
        _only_membrain_errors(exc, "Memory.add")
        if not isinstance(exc, InputError | ScopeError):
            exc.add_note("Memory.add refuses bad input with InputError or ScopeError")
            raise
        if isinstance(scope, Scope):
            after = {m.id for m in mem.messages(scope=scope)}
            assert after == before, f"add raised {exc!r} but stored {after - before}"
        return f"refused: {type(exc).__name__}"
    store.check_untouched(own, baseline)
    assert isinstance(scope, Scope), "add accepted something that is no Scope"
    stored = mem.messages(scope=scope)
    new = [m for m in stored if m.id not in before]
    # The example's own scope is fresh: every message in it went through this add.
    ended = stored if scope.without_session() == own else new
    stuck = [m for m in ended if m.status not in ACCEPTED_END]
    assert not stuck, f"messages left {[m.status.value for m in stuck]} after add returned"
    assert len(new) == result.messages_stored
    assert result.messages_stored + result.messages_skipped == _given_count(messages)
    texts = {m.message.text for m in stored}
    by_caller = {m.message.source_id: m.message.text for m in stored if m.message.source_id}
    for caller_id, text in fs.expected_texts(messages):
        assert text in texts, f"{text!r} is not stored verbatim"
        if caller_id:
            assert by_caller.get(caller_id) == text, f"message {caller_id!r} has another text"
    return f"accepted: {result.messages_stored} stored, {len(result.errors)} failed"


def _deep(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


def _said(**fields: object) -> dict[str, object]:
    return {
        "speaker": "Sara",
        "text": "I met Bob yesterday.",
        "timestamp": "2024-03-15T14:00:00Z",
    } | fields


EDGE_ADDS: dict[str, Callable[[], tuple[object, dict[str, object]]]] = {
    # Inputs Hypothesis cannot draw or print (an int past str()'s digit limit, nesting past the
    # stack), and the smallest failing inputs fuzzing found: (messages, keyword arguments).
    "utc-before-year-1": lambda: (_said(timestamp="0001-01-01T00:00:00+05:00"), {}),
    "utc-after-year-9999": lambda: (_said(timestamp="9999-12-31T23:59:59-05:00"), {}),
    "aware-datetime-min": lambda: (
        _said(timestamp=datetime.min.replace(tzinfo=timezone(timedelta(hours=1)))),
        {},
    ),
    "huge-int-id": lambda: ([_said(id=fs.HUGE_INT)], {}),
    "huge-int-extra-key": lambda: ([_said(meta=fs.HUGE_INT)], {}),
    "huge-int-timestamp": lambda: ([_said(timestamp=fs.HUGE_INT)], {}),
    "huge-int-role": lambda: ([{"role": fs.HUGE_INT, "content": "hi"}], {}),
    "deep-id": lambda: ([_said(id=_deep(100_000))], {}),
    "deep-extra-key": lambda: ([_said(meta=_deep(100_000))], {}),
    "deep-timestamp": lambda: ([_said(timestamp=_deep(100_000))], {}),
    "agent-name-lone-surrogate": lambda: ("I met Bob yesterday.", {"by": "agent:\ud800"}),
    "api-name-lone-surrogate": lambda: ("I met Bob yesterday.", {"by": "\ud800"}),
    "bracketed-speaker-with-action": lambda: (_said(speaker="[Sara]", text="*waves*"), {}),
    "bracket-user-name-with-thought": lambda: ("（hi）", {"user_name": "["}),
}


@pytest.mark.parametrize("case", list(EDGE_ADDS))
def test_add_edge_inputs_are_refused_or_stored_and_extracted(
    edge_store: FuzzStore, case: str
) -> None:
    messages, options = EDGE_ADDS[case]()
    own, baseline = edge_store.fresh_scope()
    _add_and_check(edge_store, own, baseline, messages, own, **options)


# -- loaders ---------------------------------------------------------------------------------


def _check_loaded(conversations: list[Conversation]) -> None:
    assert isinstance(conversations, list)
    for conversation in conversations:
        assert isinstance(conversation, Conversation)
        for message in conversation.messages:
            assert isinstance(message, Message)
            for part in (message.speaker, message.text, message.caption or ""):
                part.encode("utf-8")
            assert message.speaker
            assert message.text.strip() or (message.caption or "").strip()
            assert message.timestamp.utcoffset() is not None


@settings(FUZZ, max_examples=300)
@given(content=fs.message_files)
def test_load_conversations_raises_only_membrain_errors(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "conversations.json"
    path.write_bytes(content)
    try:
        conversations = load_conversations(path)
    except Exception as exc:
        _only_membrain_errors(exc, "load_conversations")
        assert isinstance(exc, InputError)
        return
    _check_loaded(conversations)


_LINE = b'{"speaker": "Sara", "text": "hi", "timestamp": "2024-01-01T00:00:00Z"}\n'
EDGE_FILES: dict[str, bytes] = {
    "nesting-past-the-stack": b"[" * 100_000,
    "nesting-past-the-stack-in-json-lines": _LINE + b"[" * 100_000,
    "int-past-the-digit-limit": b"[" + b"1" * 5000 + b"]",
    "int-past-the-digit-limit-in-json-lines": _LINE + b"1" * 5000,
    "utc-before-year-1": (
        b'[{"speaker": "Sara", "text": "hi", "timestamp": "0001-01-01T00:00:00+05:00"}]'
    ),
    "utc-after-year-9999": (
        b'[{"speaker": "Sara", "text": "hi", "timestamp": "9999-12-31T23:59:59-05:00"}]'
    ),
    "invalid-utf-8": b"\xff\xfe[",
    "lone-surrogate-escape": (
        b'[{"speaker": "Sara", "text": "\\ud800", "timestamp": "2024-01-01T00:00:00Z"}]'
    ),
}


@pytest.mark.parametrize("case", list(EDGE_FILES))
def test_load_conversations_refuses_edge_files_with_an_input_error(
    tmp_path: Path, case: str
) -> None:
    path = tmp_path / "conversations.json"
    path.write_bytes(EDGE_FILES[case])
    with pytest.raises(InputError):
        load_conversations(path)


WELL_FORMED_FILES: dict[str, str] = {
    "json-lines-of-one-message": (
        '{"speaker": "Sara", "text": "hi", "timestamp": "2024-03-15T14:00:00Z"}\n'
    ),
    "json-lines-with-u2028-in-a-text": (
        '{"speaker": "Sara", "text": "one\u2028two", "timestamp": "2024-03-15T14:00:00Z"}\n'
        '{"speaker": "Nate", "text": "hi", "timestamp": "2024-03-15T14:01:00Z"}\n'
    ),
    "json-lines-with-nel-in-a-text": (
        '{"speaker": "Sara", "text": "one\x85two", "timestamp": "2024-03-15T14:00:00Z"}\n'
        '{"speaker": "Nate", "text": "hi", "timestamp": "2024-03-15T14:01:00Z"}\n'
    ),
}


@pytest.mark.parametrize("case", list(WELL_FORMED_FILES))
def test_well_formed_json_lines_load_verbatim(tmp_path: Path, case: str) -> None:
    text = WELL_FORMED_FILES[case]
    path = tmp_path / "conversation.jsonl"
    path.write_text(text, encoding="utf-8")
    (conversation,) = load_conversations(path)
    expected = [json.loads(line)["text"] for line in text.split("\n") if line]
    assert [m.text for m in conversation.messages] == expected


def _with_ids(messages: list[dict[str, Any]], numbered: list[bool]) -> list[dict[str, Any]]:
    return [
        {**m, "id": f"m{n}"} if n < len(numbered) and numbered[n] else m
        for n, m in enumerate(messages)
    ]


@settings(FUZZ, max_examples=80)
@given(
    messages=st.lists(fs.well_formed_messages, min_size=1, max_size=4),
    numbered=st.lists(st.booleans(), max_size=4),
    layout=st.sampled_from(["list", "object", "lines"]),
    ascii_only=st.booleans(),
)
def test_well_formed_files_load_and_add_verbatim(
    fuzz_store: FuzzStore,
    tmp_path: Path,
    messages: list[dict[str, Any]],
    numbered: list[bool],
    layout: str,
    ascii_only: bool,
) -> None:
    written = _with_ids(messages, numbered)
    if layout == "lines":
        text = "\n".join(json.dumps(m, ensure_ascii=ascii_only) for m in written) + "\n"
    else:
        document: object = written if layout == "list" else {"messages": written}
        text = json.dumps(document, ensure_ascii=ascii_only, indent=1)
    path = tmp_path / f"conversation.{'jsonl' if layout == 'lines' else 'json'}"
    path.write_text(text, encoding="utf-8")
    (conversation,) = load_conversations(path)
    assert [m.text for m in conversation.messages] == [m["text"] for m in written]
    assert [m.source_id for m in conversation.messages] == [m.get("id") for m in written]
    own, baseline = fuzz_store.fresh_scope()
    scope = Scope(dataset=own.dataset, task=own.task, session="file")
    fuzz_store.mem.add(conversation.messages, scope=scope)
    fuzz_store.check_untouched(own, baseline)
    stored = fuzz_store.mem.messages(scope=scope)
    assert {m.message.text for m in stored} == {m["text"] for m in written}
    assert all(m.status in ACCEPTED_END for m in stored)
