"""Reading conversations from files: JSON, JSON Lines and the LoCoMo benchmark format.

Plain formats hold message objects with ``speaker``, ``text`` and ``timestamp`` (ISO 8601) and
optionally ``role``, ``id``, ``addressee`` and ``caption``: a JSON list, a JSON object with a
``messages`` list, or one object per line. A LoCoMo file is a list of conversations, each with
``conversation.session_N`` turn lists and ``session_N_date_time`` times.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from membrain.api.errors import InputError
from membrain.api.inputs import message_label, validate_message
from membrain.api.models import Message

__all__ = ["Conversation", "load_conversations", "locomo_conversations", "parse_locomo_time"]

_SESSION = re.compile(r"^session_(\d{1,9})$")
_LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59)


@dataclass(frozen=True, slots=True)
class Conversation:
    """Messages of one conversation; ``name`` is ``None`` for plain message files."""

    name: str | None
    messages: list[Message]
    speakers: tuple[str, ...] = ()


def load_conversations(path: str | Path) -> list[Conversation]:
    """Read a file of messages or of LoCoMo conversations.

    Raises:
        InputError: unreadable file, unknown format, or a malformed message (the message says
            which one and why).
    """
    file = Path(path)
    try:
        raw = file.read_text(encoding="utf-8-sig")  # a byte-order mark is not content
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {file}: {exc}") from exc
    try:
        data: Any = json.loads(raw)
    except json.JSONDecodeError:
        return [Conversation(None, list(_jsonl_messages(file, raw)))]
    except (ValueError, RecursionError) as exc:  # nested too deeply, a number too long
        raise InputError(f"{file}: JSON that cannot be messages ({_reason(exc)})") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    elif isinstance(data, dict) and _is_message(data):
        data = [data]  # JSON Lines of one message
    if isinstance(data, list) and data and all(_is_locomo(d) for d in data):
        return locomo_conversations(data)
    if isinstance(data, list):
        return [
            Conversation(None, [_message(item, f"{file} item {i}") for i, item in enumerate(data)])
        ]
    raise InputError(
        f"{file}: unknown format; expected a JSON list of messages, an object with 'messages', "
        "JSON Lines, or a LoCoMo conversation list"
    )


def _jsonl_messages(file: Path, raw: str) -> Iterator[Message]:
    # JSON Lines breaks lines at "\n" only; U+2028 and friends are text inside a message.
    lines = [(n, line) for n, line in enumerate(raw.split("\n"), 1) if line.strip()]
    if not lines:
        raise InputError(f"{file}: the file holds no messages")
    for number, line in lines:
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{file} line {number}: neither JSON nor JSON Lines ({exc.msg})"
            ) from exc
        except (ValueError, RecursionError) as exc:
            raise InputError(f"{file} line {number}: {_reason(exc)}") from None
        yield _message(item, f"{file} line {number}")


def _message(item: Any, where: str) -> Message:
    if not isinstance(item, dict):
        raise InputError(f"{where}: a message must be a JSON object, got {type(item).__name__}")
    fields = dict(item)
    if "timestamp" not in fields:
        raise InputError(f"{where}: the message has no timestamp")
    given_id = fields.pop("id", None)
    if given_id is not None and "source_id" not in fields:
        try:
            fields["source_id"] = message_label(given_id, "id")
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    return validate_message(fields, where)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).split(";")[0][:120]


def _is_message(item: dict[str, Any]) -> bool:
    return "timestamp" in item or "text" in item or ("role" in item and "content" in item)


def _is_locomo(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("conversation"), dict)


def parse_locomo_time(value: str) -> datetime:
    """Parse a LoCoMo session time such as ``"1:56 pm on 8 May, 2023"``.

    Raises:
        InputError: the value is not in that form.
    """
    try:
        return datetime.strptime(value.strip().upper(), "%I:%M %p ON %d %B, %Y")
    except ValueError as exc:
        raise InputError(f"not a LoCoMo session time: {value!r}") from exc


def locomo_conversations(data: Sequence[dict[str, Any]]) -> list[Conversation]:
    """Conversations of a parsed LoCoMo file; turns keep their ``dia_id`` as ``source_id``.

    Turns of a session are timestamped at the session time plus one second per turn, so their
    order survives sorting.
    """
    conversations = []
    for number, item in enumerate(data):
        conv = item["conversation"]
        name = str(item.get("sample_id") or f"conversation-{number}")
        speakers = tuple(str(conv[k]) for k in ("speaker_a", "speaker_b") if k in conv)
        sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION.match(key)))
        messages: list[Message] = []
        for _, key in sessions:
            turns = conv[key]
            if not turns:
                continue
            if not isinstance(turns, list):
                raise InputError(f"{name} {key}: a session must be a list of turns")
            when = conv.get(f"{key}_date_time")
            if not when:
                raise InputError(f"{name} {key}: the session has no date_time")
            start = parse_locomo_time(str(when))
            for index, turn in enumerate(turns):
                if not isinstance(turn, dict):
                    raise InputError(f"{name} {key} turn {index}: a turn must be a JSON object")
                if index > (_LAST_SECOND - start).total_seconds():
                    raise InputError(f"{name} {key}: the session runs past the year 9999")
                other = [s for s in speakers if s != turn.get("speaker")]
                fields = {
                    "speaker": turn.get("speaker"),
                    "text": turn.get("text", ""),
                    "timestamp": start + timedelta(seconds=index),
                    "source_id": turn.get("dia_id"),
                    "caption": turn.get("blip_caption"),
                    "addressee": other[0] if len(other) == 1 else None,
                }
                messages.append(_message(fields, f"{name} {key} turn {index}"))
        conversations.append(Conversation(name, messages, speakers))
    return conversations
