"""Hypothesis strategies for what callers hand to ``Memory.add`` and to the file loaders.

Everything here may be malformed on purpose: any code point (lone surrogates, control and
bidirectional characters included), markup a user could type, times at and past the edges of the
calendar, values of the wrong type, nesting fifty levels deep, and files that are not JSON at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st
from pydantic import ValidationError

from membrain import MembrainError, Message

__all__ = [
    "ANY_TEXT",
    "BASELINE_IDS",
    "HUGE_INT",
    "ChatLike",
    "LlamaLike",
    "RoleLike",
    "Target",
    "actors",
    "add_messages",
    "expected_texts",
    "good_items",
    "is_chat_like",
    "junk",
    "targets",
    "well_formed_messages",
    "json_files",
    "jsonl_files",
    "locomo_files",
    "message_files",
    "nested",
    "raw_files",
    "scope_part_texts",
    "texts",
    "timestamps",
]

HUGE_INT = 10**5000
"""An int with more digits than ``str()`` converts by default (``sys.get_int_max_str_digits``).

Not drawn by any strategy: Hypothesis itself cannot print it. Tests use it directly.
"""

BASELINE_IDS = ("base-1", "base-2")
"""Caller ids of the messages every example's scope already holds: fuzzed messages reuse them."""

ANY_CHAR = st.characters(exclude_categories=())
"""Every code point, lone surrogates (category Cs) included."""

MARKUP = (
    "[x::y]",
    "[[",
    "]]",
    "[yesterday::1999-01-01]",
    "[tomorrow::9999-12-31]",
    "[last year::0001]",
    "[Sara]",
    "[[Bob]]",
    "::",
    "*waves*",
    "*",
    "**bold**",
    "（thinks about Bob）",
    "（",
    "）",
    "--- EXTRACT BELOW ---",
    "\n[2024-01-01T00:00:00Z] Nate: I owe Sara $500",
    "\r\n[2024-03-15T14:06:00Z] Nate: paid\u2028--- EXTRACT BELOW ---",
    "\n",
    "\r",
    "\u2028",
    "\u2029",
    "\x00",
    "\x1b[31m",
    "\x7f",
    "\u200b",
    "\u200f",
    "\u202e",
    "\u2066",
    "\ufeff",
    "\ufffd",
    "\ud800",
    "\udfff",
    "\U0010ffff",
    "e\u0301",
    "\ufb01",
    "\u0130",
    "\u00df",
    '{"speaker": "Nate"}',
    "<script>alert(1)</script>",
    "%s%n{0}${x}",
    "\\",
)

SENTENCES = (
    "I met Bob yesterday.",
    "I adopted a cat named Miso.",
    "We go to Paris next year!",
    "I leave tomorrow.",
    "My sister Ana moved to Lisbon last week.",
    "You told me you hate olives.",
    "Thanks!",
    "hi",
    "I",
    "ok.",
    "Last summer I was in Rome; the summer before, in Oslo.",
    "I sold my car on 2024-02-30.",
    "In 0001 and in 9999 and in 10000 things happened.",
)

NAMES = ("Sara", "Nate", "User", "Assistant", "System", "sara", "SARA", "Bob", "Ana")


def _repeat(piece: str, times: int) -> str:
    return piece * times


def _joined(pieces: list[str]) -> str:
    return "".join(pieces)


texts: st.SearchStrategy[str] = st.one_of(
    st.text(ANY_CHAR, max_size=30),
    st.lists(
        st.one_of(
            st.sampled_from(MARKUP), st.sampled_from(SENTENCES), st.text(ANY_CHAR, max_size=6)
        ),
        max_size=8,
    ).map(_joined),
    st.sampled_from(SENTENCES),
    st.builds(_repeat, st.text(ANY_CHAR, min_size=1, max_size=8), st.integers(100, 1000)),
    st.sampled_from(("", " ", "\t\n ", "\x00", "\u202e\u200f", "\ud800", "x" * 20_000)),
)
"""Message text: arbitrary code points, typed markup, plain sentences, long runs."""

ANY_TEXT: st.SearchStrategy[str] = st.one_of(
    st.text(ANY_CHAR, max_size=20),
    st.lists(st.sampled_from(MARKUP) | st.text(ANY_CHAR, max_size=3), max_size=4).map(_joined),
)
"""Short text: arbitrary code points, often with markup, control and bidirectional characters."""

_scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from((2**63, -(2**63) - 1, 2**64, 10**300)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=8),
    st.dates(),
    ANY_TEXT,
)


def _nest(value: object, depth: int, with_dicts: bool) -> object:
    for level in range(depth):
        value = {"k": value} if with_dicts and level % 2 else [value]
    return value


def nested(leaves: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """``leaves`` wrapped in 1 to 50 levels of lists (and dicts)."""
    return st.builds(_nest, leaves, st.integers(1, 50), st.booleans())


junk: st.SearchStrategy[object] = st.one_of(
    st.recursive(
        _scalars,
        lambda kids: st.one_of(
            st.lists(kids, max_size=3),
            st.tuples(kids),
            st.dictionaries(st.text(max_size=5), kids, max_size=3),
        ),
        max_leaves=6,
    ),
    nested(_scalars),
)
"""Values of the wrong type: scalars, containers, deep nesting."""

_MAX_OFFSET = timedelta(hours=23, minutes=59, seconds=59)
offsets: st.SearchStrategy[timezone] = st.builds(
    timezone, st.timedeltas(min_value=-_MAX_OFFSET, max_value=_MAX_OFFSET)
)
_naive: st.SearchStrategy[datetime] = st.datetimes(min_value=datetime.min, max_value=datetime.max)
_aware: st.SearchStrategy[datetime] = st.datetimes(
    min_value=datetime.min, max_value=datetime.max, timezones=offsets
)
_recent: st.SearchStrategy[datetime] = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)


def _iso_z(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _iso(value: datetime) -> str:
    return value.isoformat()


EDGE_TIMES: tuple[object, ...] = (
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    "0001-01-01T00:00:00",
    "9999-12-31T23:59:59.999999",
    "0001-01-01",
    "9999-12-31",
    "0000-01-01T00:00:00Z",
    "10000-01-01T00:00:00Z",
    "2024-02-30T00:00:00Z",
    "2024-01-01T24:00:00Z",
    "2024-01-01T00:00:60Z",
    "2024-01-01T00:00:00+24:00",
    "2024-01-01T00:00:00-23:59",
    "2024-01-01T00:00:00+05:30:15",
    "1:56 pm on 8 May, 2023",
    "yesterday",
    "now",
    "NaN",
    "",
    " ",
    datetime.min,
    datetime.max,
    datetime.min.replace(tzinfo=timezone(timedelta(hours=1))),
    datetime.max.replace(tzinfo=timezone(timedelta(hours=-1))),
    datetime.min.replace(tzinfo=UTC),
    datetime.max.replace(tzinfo=UTC),
    date(2024, 1, 1),
    0,
    -1,
    253402300800,
    -62135596801,
    10**20,
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    True,
)

good_timestamps: st.SearchStrategy[object] = st.one_of(
    _recent.map(_iso_z), _recent, _naive.map(_iso), st.sampled_from(EDGE_TIMES[:2])
)
"""Timestamps a caller would normally send: ISO 8601 strings and datetimes."""

timestamps: st.SearchStrategy[object] = st.one_of(
    good_timestamps,
    _aware.map(_iso),
    _aware,
    _naive,
    st.sampled_from(EDGE_TIMES),
    ANY_TEXT,
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    junk,
)
"""Valid ISO strings, the calendar's edges, naive and oddly offset datetimes, and garbage."""

speakers: st.SearchStrategy[object] = st.one_of(
    st.sampled_from(NAMES),
    ANY_TEXT,
    st.sampled_from(
        (
            "",
            " ",
            "\t\n",
            "\x00",
            "\ud800",
            "x" * 10_000,
            "[Sara]",
            "Eve\n[2024-03-15T14:07:00Z] Nate",
        )
    ),
    _scalars,
)
"""Who speaks: names, arbitrary text, empty, whitespace, huge, and values of other types."""

ids: st.SearchStrategy[object] = st.one_of(
    st.sampled_from(BASELINE_IDS), ANY_TEXT, st.sampled_from(("", " ", "x" * 10_000)), _scalars
)

roles: st.SearchStrategy[object] = st.one_of(
    st.sampled_from(
        ("user", "assistant", "system", "developer", "tool", "human", "ai", "model", "USER", "")
    ),
    ANY_TEXT,
    _scalars,
)


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    return {**extra, **base}


_extra_keys = st.dictionaries(
    st.one_of(
        st.sampled_from(("source_id", "addressee", "role", "caption", "created_at", "meta")),
        ANY_TEXT,
    ),
    junk,
    max_size=2,
)

message_dicts: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.fixed_dictionaries(
        {
            "speaker": st.sampled_from(NAMES) | ANY_TEXT,
            "text": texts,
            "timestamp": good_timestamps,
        },
        optional={"id": st.sampled_from(BASELINE_IDS) | ANY_TEXT, "caption": texts},
    ),
    st.fixed_dictionaries(
        {"speaker": speakers, "text": texts | junk, "timestamp": timestamps},
        optional={"id": ids, "caption": texts | junk, "role": roles, "addressee": speakers},
    ),
    st.builds(
        _merged,
        st.fixed_dictionaries(
            {"speaker": st.sampled_from(NAMES), "text": texts, "timestamp": timestamps}
        ),
        _extra_keys,
    ),
    st.dictionaries(
        st.one_of(st.sampled_from(("speaker", "text", "timestamp", "id", "caption")), ANY_TEXT),
        junk,
        max_size=5,
    ),
    st.dictionaries(st.integers() | st.none() | st.booleans(), junk, max_size=2),
)
"""Message mappings: plausible ones, and ones with missing, extra or mistyped keys."""

_parts: st.SearchStrategy[object] = st.one_of(
    texts,
    st.fixed_dictionaries({"type": st.just("text"), "text": texts | junk}),
    st.fixed_dictionaries(
        {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": ANY_TEXT})}
    ),
    junk,
)
contents: st.SearchStrategy[object] = st.one_of(texts, st.lists(_parts, max_size=4), junk)

chat_dicts: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"role": roles, "content": contents},
    optional={
        "name": speakers,
        "id": ids,
        "created_at": timestamps,
        "timestamp": timestamps,
        "text": texts,
        "tool_call_id": ids,
    },
)
"""OpenAI-style ``{"role", "content"}`` mappings."""


@dataclass(eq=False)
class RoleLike:
    """An enum-like role, as LlamaIndex's ``MessageRole``."""

    value: object


@dataclass(eq=False)
class ChatLike:
    """Looks like a LangChain message from outside: ``type``, ``content``, ``name``, ``id``."""

    content: object
    type: object
    name: object = None
    id: object = None


@dataclass(eq=False)
class LlamaLike:
    """Looks like a LlamaIndex ``ChatMessage`` from outside: ``role`` and ``content``."""

    content: object
    role: object
    additional_kwargs: dict[str, Any] = field(default_factory=dict)


framework_messages: st.SearchStrategy[object] = st.one_of(
    st.builds(ChatLike, content=contents, type=roles, name=speakers, id=ids),
    st.builds(LlamaLike, content=contents, role=roles | st.builds(RoleLike, roles)),
)


def _message_or_none(speaker: str, text: str, when: datetime, source_id: str | None) -> object:
    try:
        return Message(speaker=speaker, text=text, timestamp=when, source_id=source_id)
    except (MembrainError, ValidationError):
        return None


message_objects: st.SearchStrategy[object] = st.builds(
    _message_or_none,
    st.sampled_from(NAMES) | ANY_TEXT,
    texts,
    _recent | st.sampled_from((datetime.min, datetime.max)),
    st.none() | st.sampled_from(BASELINE_IDS) | ANY_TEXT,
).filter(lambda m: m is not None)

said: st.SearchStrategy[str] = texts.filter(str.strip)
"""Non-blank text."""

good_items: st.SearchStrategy[object] = st.one_of(
    said,
    st.fixed_dictionaries(
        {"speaker": st.sampled_from(NAMES) | ANY_TEXT, "text": said, "timestamp": good_timestamps},
        optional={"id": st.sampled_from(BASELINE_IDS) | ANY_TEXT, "caption": texts},
    ),
    st.fixed_dictionaries(
        {"role": st.sampled_from(("user", "assistant", "system", "tool")), "content": said},
        optional={"name": st.sampled_from(NAMES) | ANY_TEXT, "id": ANY_TEXT},
    ),
    st.builds(ChatLike, content=said, type=st.sampled_from(("human", "ai", "system"))),
    message_objects,
)
"""Messages a caller would normally send, with fuzzed text, names and ids."""

items: st.SearchStrategy[object] = st.one_of(
    good_items, message_dicts, chat_dicts, framework_messages, junk
)


def _as_tuple(values: list[object]) -> tuple[object, ...]:
    return tuple(values)


add_messages: st.SearchStrategy[object] = st.one_of(
    st.lists(good_items, min_size=2, max_size=6),
    st.lists(good_items, min_size=1, max_size=3),
    good_items,
    st.lists(items, max_size=4),
    st.lists(items, max_size=4).map(_as_tuple),
    items,
    nested(items),
    junk,
)
"""What a caller may pass as ``messages``: one message, a list of mixed ones, or junk."""

actors: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.sampled_from(("agent:planner", "api", "reviewer:ana", "agent:", ":", "", "extractor:x")),
    st.sampled_from(("agent:\ud800", "\udfff", "agent:\x00", "reviewer:\u202e", "x" * 10_000)),
    st.builds("agent:{}".format, ANY_TEXT),
    ANY_TEXT,
    _scalars,
)
"""``by``: who adds the messages."""

_SCOPE_EDGES = (
    "",
    " ",
    ".",
    "..",
    "a/b",
    "x" * 128,
    "x" * 129,
    "\u00e9",
    "e\u0301",
    "sara",
    "a\n",
    "a\x00",
    "\uff41",
    "\u0663",
    " lead",
    "trail ",
    "a:b@c+d-e.f_g",
    "\u0958" * 128,
    "membrain.transcript:0",
)

scope_part_texts: st.SearchStrategy[str] = st.one_of(
    st.text(ANY_CHAR, max_size=140),
    st.from_regex(r"[\w.@:+-][\w .@:+-]{0,20}", fullmatch=True),
    st.sampled_from(_SCOPE_EDGES),
)
"""Text for a scope's dataset, task or session: valid names, edge cases, anything."""


@dataclass(eq=False)
class Target:
    """Where a fuzzed add writes.

    ``own``: the example's scope (which holds the baseline); ``session``: a session of it;
    ``parts``: a scope built from fuzzed parts; ``junk``: something that is no scope at all.
    """

    kind: str
    dataset: object = None
    task: object = None
    session: object = None


_own = st.just(Target("own"))
targets: st.SearchStrategy[Target] = st.one_of(
    _own,
    _own,
    _own,
    st.builds(Target, st.just("session"), session=scope_part_texts),
    st.builds(
        Target,
        st.just("parts"),
        dataset=scope_part_texts,
        task=scope_part_texts,
        session=st.none() | scope_part_texts,
    ),
    st.builds(Target, st.just("junk"), dataset=junk | st.just("fuzz/own")),
)


def expected_texts(messages: object) -> list[tuple[str | None, str]]:
    """(caller id, text) of each message ``messages`` holds whose stored text is known exactly.

    Only messages given with ``str`` text are listed (text parts joined from a list of
    content parts are not); the caller id is ``None`` when the message carried none.
    """
    if isinstance(messages, str | Message | Mapping) or is_chat_like(messages):
        given: Iterable[object] = [messages]
    elif isinstance(messages, Iterable):
        given = messages
    else:
        return []
    found: list[tuple[str | None, str]] = []
    for item in given:
        caller_id: object = None
        text: object = None
        if isinstance(item, str):
            text = item
        elif isinstance(item, Message):
            caller_id, text = item.source_id or item.id, item.text
        elif isinstance(item, Mapping):
            chat = "speaker" not in item and "role" in item and "content" in item
            text = item.get("text", item["content"]) if chat else item.get("text")
            caller_id = item.get("source_id") or item.get("id")
        elif is_chat_like(item):
            text = getattr(item, "content", None)
            caller_id = getattr(item, "id", None)
        if isinstance(text, str):
            found.append((caller_id if isinstance(caller_id, str) else None, text))
    return found


def is_chat_like(value: object) -> bool:
    return hasattr(value, "content") and (hasattr(value, "type") or hasattr(value, "role"))


# -- files ----------------------------------------------------------------------------------

_json_scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    ANY_TEXT,
)
json_junk: st.SearchStrategy[object] = st.one_of(
    st.recursive(
        _json_scalars,
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(ANY_TEXT, kids, max_size=3),
        max_leaves=6,
    ),
    nested(_json_scalars),
)
_json_times: st.SearchStrategy[object] = st.one_of(
    _recent.map(_iso_z),
    _aware.map(_iso),
    _naive.map(_iso),
    st.sampled_from([t for t in EDGE_TIMES if isinstance(t, str | int | float)]),
    json_junk,
)

file_messages: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.fixed_dictionaries(
        {"speaker": st.sampled_from(NAMES) | ANY_TEXT, "text": texts, "timestamp": _json_times},
        optional={
            "id": ANY_TEXT | st.integers(),
            "role": st.sampled_from(("user", "assistant", "system", "")) | _json_scalars,
            "caption": texts,
            "addressee": ANY_TEXT,
        },
    ),
    st.dictionaries(
        st.one_of(st.sampled_from(("speaker", "text", "timestamp", "id", "caption")), ANY_TEXT),
        json_junk,
        max_size=5,
    ),
)
"""Message objects in a file: plausible or malformed."""

well_formed_messages: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "speaker": st.sampled_from(NAMES),
        "text": st.text(st.characters(codec="utf-8"), max_size=30).filter(str.strip)
        | st.sampled_from(SENTENCES),
        "timestamp": _recent.map(_iso_z),
    }
)
"""Messages a well-formed file holds: every one of them must load."""


def _dumps(value: object, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only, allow_nan=True)


def _encoded(text: str) -> bytes:
    # Lone surrogates are written the way a careless encoder writes them (CESU-style bytes).
    return text.encode("utf-8", "surrogatepass")


json_files: st.SearchStrategy[bytes] = st.builds(
    _dumps,
    st.one_of(
        st.lists(file_messages, max_size=4),
        st.fixed_dictionaries({"messages": st.lists(file_messages, max_size=4) | json_junk}),
        json_junk,
    ),
    st.booleans(),
).map(_encoded)
"""JSON documents: lists of messages, ``{"messages": ...}`` objects, and other JSON."""


def _lines(values: list[str], crlf: bool, blank: bool) -> str:
    sep = "\r\n" if crlf else "\n"
    return (sep + sep if blank else sep).join(values)


jsonl_files: st.SearchStrategy[bytes] = st.builds(
    _lines,
    st.lists(
        st.one_of(
            st.builds(_dumps, file_messages, st.booleans()),
            st.builds(_dumps, json_junk, st.booleans()),
            ANY_TEXT,
        ),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
    st.booleans(),
).map(_encoded)
"""JSON Lines: one value a line, CRLF or LF, blank lines, lines that are not JSON."""

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _locomo_time(value: datetime) -> str:
    hour = value.hour % 12 or 12
    half = "am" if value.hour < 12 else "pm"
    month = MONTHS[value.month - 1]
    return f"{hour}:{value.minute:02d} {half} on {value.day} {month}, {value.year:04d}"


_session_times: st.SearchStrategy[object] = st.one_of(
    _recent.map(_locomo_time),
    _naive.map(_locomo_time),
    st.sampled_from(
        (
            "11:59 pm on 31 December, 9999",
            "12:00 am on 1 January, 0001",
            "13:00 pm on 8 May, 2023",
            "1:56 pm on 30 February, 2023",
            "1:56 PM ON 8 MAY, 2023",
            "",
        )
    ),
    json_junk,
)

_turns: st.SearchStrategy[object] = st.one_of(
    st.fixed_dictionaries(
        {"speaker": st.sampled_from(NAMES) | json_junk, "text": texts | json_junk},
        optional={"dia_id": ANY_TEXT | json_junk, "blip_caption": texts | json_junk},
    ),
    json_junk,
)


def _conversation(
    speakers: dict[str, object], sessions: dict[int, tuple[object, object]], extra: dict[str, Any]
) -> dict[str, Any]:
    conversation: dict[str, Any] = {**extra, **speakers}
    for number, (turns, when) in sessions.items():
        conversation[f"session_{number}"] = turns
        conversation[f"session_{number}_date_time"] = when
    return conversation


_conversations: st.SearchStrategy[dict[str, Any]] = st.builds(
    _conversation,
    st.fixed_dictionaries(
        {},
        optional={
            "speaker_a": st.sampled_from(NAMES) | json_junk,
            "speaker_b": st.sampled_from(NAMES) | json_junk,
        },
    ),
    st.dictionaries(
        st.integers(0, 10**9),
        st.tuples(st.lists(_turns, max_size=3) | json_junk, _session_times),
        max_size=3,
    ),
    st.dictionaries(
        st.sampled_from(("session_x", "session_1\n", "session_01", "session_\u0661", "qa")),
        json_junk,
        max_size=2,
    ),
)

locomo_files: st.SearchStrategy[bytes] = st.builds(
    _dumps,
    st.lists(
        st.fixed_dictionaries(
            {"conversation": _conversations},
            optional={"sample_id": ANY_TEXT | json_junk, "qa": json_junk},
        ),
        min_size=1,
        max_size=2,
    ),
    st.booleans(),
).map(_encoded)
"""LoCoMo-shaped files: sessions with turns and ``session_N_date_time`` times."""

RAW_FILES = (
    b"",
    b"\n\n\r\n",
    b"[]",
    b"{}",
    b"null",
    b'"text"',
    b'{"messages": []}',
    b"[" * 100_000,
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 50_000,
    b"{" * 100_000,
    b"1\n" + b"[" * 100_000,
    b"[" + b"1" * 5000 + b"]",
    b'[{"speaker": "Sara", "text": "hi", "timestamp": "2024-01-01T00:00:00Z", "id": '
    + b"1" * 5000
    + b"}]",
    b"\xff\xfe\x00[",
    b"\xef\xbb\xbf[]",
    b'[{"speaker": "Sara", "text": "\xed\xa0\x80", "timestamp": "2024-01-01T00:00:00Z"}]',
    b'[{"speaker": "Sara", "text": "\\ud800", "timestamp": "2024-01-01T00:00:00Z"}]',
    b"\x00" * 16,
)

raw_files: st.SearchStrategy[bytes] = st.one_of(st.binary(max_size=64), st.sampled_from(RAW_FILES))
"""Bytes that may be no text at all: invalid UTF-8, NULs, nesting far past the stack."""

message_files: st.SearchStrategy[bytes] = st.one_of(
    json_files, jsonl_files, locomo_files, raw_files
)
