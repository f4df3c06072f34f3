"""What :meth:`membrain.Memory.add` accepts, as :class:`~membrain.api.models.Message` records.

* a string: one message from the user, said now;
* a :class:`Message`, or a mapping with ``speaker``, ``text`` and ``timestamp``;
* an OpenAI-style mapping, ``{"role": "user", "content": "..."}`` (``content`` may be a list of
  parts; the text parts are kept); ``name`` names the speaker when given;
* a LangChain ``BaseMessage`` (``type`` human / ai / system / tool, ``content``) or a LlamaIndex
  ``ChatMessage`` (``role``, ``content``), recognised by their attributes: the core imports
  neither framework.

A message without a speaker is the user's (``user_name``) or the assistant's
(``assistant_name``) by its role; one without a time was said now (times strictly increase, so
a conversation handed over at once keeps its order).
"""

from __future__ import annotations

import reprlib
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from membrain.api.errors import InputError
from membrain.api.models import Message, Role, now

__all__ = [
    "CLOCK",
    "DEFAULT_ASSISTANT_NAME",
    "DEFAULT_USER_NAME",
    "MonotonicClock",
    "as_messages",
    "message_label",
    "validate_message",
]

DEFAULT_USER_NAME = "User"
"""Speaker name of a user's messages when the caller names nobody.

A speaker name is the entity name facts use (``User adopted a cat named Miso.``), hence the
capital; entity names match case-insensitively, so memories written as ``"user"`` are the same
entity. Message roles (:class:`~membrain.Role`) stay lowercase.
"""

DEFAULT_ASSISTANT_NAME = "Assistant"
"""Speaker name of an assistant's messages when the caller names nobody."""

_ROLES = {
    "user": Role.USER,
    "human": Role.USER,
    "assistant": Role.ASSISTANT,
    "ai": Role.ASSISTANT,
    "model": Role.ASSISTANT,
    "chatbot": Role.ASSISTANT,
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
}
_TICK = timedelta(microseconds=1)


class MonotonicClock:
    """A thread-safe UTC clock whose readings strictly increase, at least 1 µs apart.

    Example:
        >>> clock = MonotonicClock()
        >>> first, second = clock.next(), clock.next()
        >>> first < second
        True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = datetime.min.replace(tzinfo=UTC)

    def next(self) -> datetime:
        """The current UTC time, or 1 µs after the previous reading if that is later."""
        with self._lock:
            moment = max(now(), self._last + _TICK)
            self._last = moment
            return moment


CLOCK = MonotonicClock()
"""The process-wide clock of messages said now: no two of them share a timestamp."""


def as_messages(
    messages: object,
    *,
    user_name: str = DEFAULT_USER_NAME,
    assistant_name: str = DEFAULT_ASSISTANT_NAME,
) -> list[Message]:
    """``messages`` (one string, or an iterable of any accepted form) as Message records.

    A caller's ``id`` becomes ``source_id`` (stored ids are MemBrain's own).

    Raises:
        InputError: a message of no accepted form, or malformed (the message says which).
    """
    if isinstance(messages, str):
        return [_one(messages, user_name, assistant_name)]
    if isinstance(messages, Message | Mapping) or _framework_message(messages):
        return [_one(messages, user_name, assistant_name)]
    if not isinstance(messages, Iterable):
        raise InputError(f"messages must be a string or an iterable, got {type(messages).__name__}")
    return [_one(m, user_name, assistant_name) for m in messages]


def _framework_message(value: object) -> bool:
    return hasattr(value, "content") and (hasattr(value, "type") or hasattr(value, "role"))


def _one(value: object, user_name: str, assistant_name: str) -> Message:
    if isinstance(value, Message):
        if value.id and not value.source_id:
            return value.model_copy(update={"source_id": value.id, "id": None})
        return value
    if isinstance(value, str):
        return _validated(
            {"speaker": user_name, "text": value, "role": Role.USER, "timestamp": CLOCK.next()}
        )
    if isinstance(value, Mapping):
        fields = dict(value)
        if "speaker" not in fields and "role" in fields and "content" in fields:
            role = message_label(fields.pop("role"), "role")
            fields = _chat_fields(role, fields.pop("content"), fields, user_name, assistant_name)
        if "id" in fields and not fields.get("source_id"):
            fields["source_id"] = message_label(fields.pop("id"), "id")
        return _validated(fields)
    if _framework_message(value):
        kind = getattr(value, "type", None) or getattr(value, "role", None)
        role_name = str(getattr(kind, "value", kind))
        extra: dict[str, Any] = {}
        name = getattr(value, "name", None)
        if isinstance(name, str) and name.strip():
            extra["name"] = name
        message_id = getattr(value, "id", None)
        if isinstance(message_id, str) and message_id:
            extra["id"] = message_id
        content = getattr(value, "content", "")
        fields = _chat_fields(role_name, content, extra, user_name, assistant_name)
        if "id" in fields:
            fields["source_id"] = str(fields.pop("id"))
        return _validated(fields)
    raise InputError(
        "a message must be a string, a Message, a mapping (speaker/text/timestamp or "
        f"role/content) or a LangChain/LlamaIndex chat message, got {type(value).__name__}"
    )


def _chat_fields(
    role_name: str,
    content: object,
    rest: dict[str, Any],
    user_name: str,
    assistant_name: str,
) -> dict[str, Any]:
    """Message fields of a role/content chat message (OpenAI, LangChain, LlamaIndex)."""
    role = _ROLES.get(role_name.lower(), Role.OTHER)
    default = assistant_name if role is Role.ASSISTANT else user_name
    if role is Role.SYSTEM:
        default = "System"
    speaker = rest.pop("name", None) or default
    fields = {"speaker": speaker, "text": _text(content), "role": role, **rest}
    fields.setdefault("timestamp", fields.pop("created_at", None) or CLOCK.next())
    return fields


def _text(content: object) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable) and not isinstance(content, bytes | Mapping):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(getattr(part, "text", None), str):
                parts.append(part.text)
        return "\n".join(p for p in parts if p.strip())
    raise InputError(
        f"message content must be text or a list of parts, got {type(content).__name__}"
    )


def message_label(value: object, what: str) -> str:
    """A message id or role given as text or a number, as text.

    Raises:
        InputError: anything else (a number too long to be an id included).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**30:
        return str(value)
    raise InputError(f"a message {what} must be text or a small integer, got {_brief(value)}")


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 3, 80, 80, 40


def _brief(value: object) -> str:
    """A short repr, safe for any value (deep nesting, huge numbers)."""
    try:
        return _BRIEF.repr(value)
    except (ValueError, RecursionError):  # an integer too long to print
        return f"<{type(value).__name__} too large to show>"


def _validated(fields: dict[str, Any]) -> Message:
    return validate_message(fields, f"invalid message {_brief(fields)}")


def validate_message(fields: dict[str, Any], where: str) -> Message:
    """The message ``fields`` describe.

    Raises:
        InputError: they do not describe one; the message starts with ``where`` and names every
            problem on one line.
    """
    try:
        return Message.model_validate(fields)
    except InputError:
        raise
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}" for e in exc.errors()
        )
        raise InputError(f"{where}: {problems}") from None
    except (ValueError, RecursionError) as exc:  # an int too long to convert, deep nesting
        raise InputError(f"{where}: {type(exc).__name__}") from None
