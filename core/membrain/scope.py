"""Scopes: whose memory, for which agent, and optionally which session.

A scope is part of every record's identity: every record belongs to exactly one (dataset, task)
and no read crosses it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from membrain.errors import ScopeError

__all__ = [
    "BOOKKEEPING_TASK_PREFIX",
    "DEFAULT_TASK",
    "MAX_PART",
    "Record",
    "Scope",
    "dataset_part",
    "scope_part",
]

DEFAULT_TASK = "default"
"""The task of a scope that names none."""

_NAMESPACE = uuid.UUID("6c1f4a52-2f4e-4d8e-9a57-8d1b3f0e9c21")
BOOKKEEPING_TASK_PREFIX = "membrain.transcript:"
"""Task prefix of bookkeeping scopes (:meth:`Scope.bookkeeping`)."""
MAX_PART = 128
"""The most characters of a scope part."""
_SCOPE_PART = re.compile(r"[\w.@:+-][\w .@:+-]{0,127}\Z")
_NOT_ALLOWED = re.compile(r"[^\w .@:+-]")
_DIGEST_CHARS = 16
_ENCODED = re.compile(rf"-h[0-9a-f]{{{_DIGEST_CHARS}}}\Z")


def is_scope_part(value: str) -> bool:
    """Whether ``value`` is stored as it is: 1-128 letters, digits, spaces and ``._@:+-``."""
    return bool(_SCOPE_PART.match(value)) and value not in (".", "..")


def scope_part(value: str) -> str:
    """``value`` as a valid scope part: unchanged when it is one, else a readable encoding.

    A valid part (1-128 letters, digits, spaces and ``._@:+-``, not starting with a space, not
    "." or "..") is returned as it is, unless it ends like an encoded value (``-h`` and 16 hex
    digits). Any other string, of any length, is encoded deterministically: each character
    outside that alphabet (and a leading space) becomes ``_``, the result is cut to 110
    characters, and ``-h`` plus 16 hex digits of the SHA-256 of the whole original value is
    appended. So the stored part stays readable, is stable across processes, and two different
    values never share a part (short of a 64-bit hash collision).

    Args:
        value: Any string, such as a user id (``"auth0|64b7f1"``, ``"ชนิดา"``, an URL).

    Example:
        >>> scope_part("sara@example.com")
        'sara@example.com'
        >>> scope_part("auth0|64b7f1")
        'auth0_64b7f1-h0965fcf43ca6e13d'
    """
    if is_scope_part(value) and not _ENCODED.search(value):
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    suffix = f"-h{digest}"
    readable = _NOT_ALLOWED.sub("_", value)[: MAX_PART - len(suffix)]
    if readable.startswith(" "):
        readable = "_" + readable[1:]
    return readable + suffix


class Record(BaseModel):
    """Base of every record: frozen, and no field it does not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Scope(Record):
    """Whose memory, for which agent, and optionally which session.

    ``dataset`` and ``task`` form the tenant key: every record belongs to exactly one
    (dataset, task) pair and no read crosses it. ``session`` narrows further: records written
    with a session carry it, and a read with a session sees only that session's records, while a
    read without one sees every session of the (dataset, task). An application with one agent
    can leave ``task`` out: it is :data:`DEFAULT_TASK`.

    A part may be any non-empty string, such as a user id from an identity provider: a value
    outside the part alphabet (1-128 letters, digits, spaces and ``._@:+-``) is stored encoded
    by :func:`scope_part`, exactly as the framework adapters encode it, so
    ``Scope(dataset="auth0|64b7f1")`` and an adapter run with ``user_id="auth0|64b7f1"`` share
    one memory. A value that is already a valid part is kept as it is, so a scope read back
    from storage or from a server names the same tenant.

    Example:
        >>> Scope(dataset="okabe", task="casual_chat").key
        'okabe/casual_chat'
        >>> Scope(dataset="okabe").key
        'okabe/default'
        >>> Scope(dataset="auth0|64b7f1").dataset
        'auth0_64b7f1-h0965fcf43ca6e13d'
    """

    dataset: str
    task: str = DEFAULT_TASK
    session: str | None = None

    @field_validator("dataset", "task", "session", mode="before")
    @classmethod
    def _check_part(cls, value: object, info: Any) -> str | None:
        if value is None and info.field_name == "session":
            return None
        if not isinstance(value, str) or not value or not value.isprintable() and not value.strip():
            raise ScopeError(f"scope {info.field_name} must be a non-empty string; got {value!r}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ScopeError(f"scope {info.field_name} is not valid text; got {value!r}") from None
        normal = unicodedata.normalize("NFC", value)  # "é" typed either way is one name
        return normal if is_scope_part(normal) else scope_part(value)

    @property
    def key(self) -> str:
        """The tenant key ``dataset/task`` stored and indexed on every record."""
        return f"{self.dataset}/{self.task}"

    def without_session(self) -> Scope:
        """The (dataset, task) scope this scope belongs to."""
        return Scope(dataset=self.dataset, task=self.task)

    def record_id(self, *parts: str) -> str:
        """A deterministic UUID for a record of this tenant identified by ``parts``."""
        return str(uuid.uuid5(_NAMESPACE, "\x1f".join((self.key, *parts))))

    @property
    def is_bookkeeping(self) -> bool:
        """Whether this is a bookkeeping scope (:meth:`bookkeeping`): never extracted."""
        return self.task.startswith(BOOKKEEPING_TASK_PREFIX)

    def bookkeeping(self) -> Scope:
        """The sibling scope for bookkeeping records of this scope (a chat's "cleared" markers).

        It is a task of the same dataset (``membrain.transcript:<hash of the task>``), so no
        search, listing or extraction of this scope sees its records, and
        :meth:`membrain.Memory.delete_scope` deletes it with this scope.
        """
        digest = hashlib.sha256(self.task.encode()).hexdigest()[:24]
        return Scope(
            dataset=self.dataset, task=f"{BOOKKEEPING_TASK_PREFIX}{digest}", session=self.session
        )


def dataset_part(dataset: object) -> str:
    """The stored dataset a caller's ``dataset`` (any user id) names, as :class:`Scope` stores it.

    Raises:
        ScopeError: not a non-empty string.
    """
    return Scope(dataset=dataset).dataset
