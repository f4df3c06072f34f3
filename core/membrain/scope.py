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

__all__ = ["BOOKKEEPING_TASK_PREFIX", "DEFAULT_TASK", "Record", "Scope"]

DEFAULT_TASK = "default"
"""The task of a scope that names none."""

_NAMESPACE = uuid.UUID("6c1f4a52-2f4e-4d8e-9a57-8d1b3f0e9c21")
BOOKKEEPING_TASK_PREFIX = "membrain.transcript:"
"""Task prefix of bookkeeping scopes (:meth:`Scope.bookkeeping`)."""
_SCOPE_PART = re.compile(r"^[\w.@:+-][\w .@:+-]{0,127}\Z")


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

    Example:
        >>> Scope(dataset="okabe", task="casual_chat").key
        'okabe/casual_chat'
        >>> Scope(dataset="okabe").key
        'okabe/default'
    """

    dataset: str
    task: str = DEFAULT_TASK
    session: str | None = None

    @field_validator("dataset", "task", "session", mode="before")
    @classmethod
    def _check_part(cls, value: object, info: Any) -> str | None:
        if value is None and info.field_name == "session":
            return None
        if isinstance(value, str):
            value = unicodedata.normalize("NFC", value)  # "é" typed either way is one name
        if not isinstance(value, str) or not _SCOPE_PART.match(value) or value in (".", ".."):
            raise ScopeError(
                f"scope {info.field_name} must be 1-128 characters of letters, digits, spaces or "
                f"'._@:+-', not start with a space and not be '.' or '..'; got {value!r}"
            )
        return value

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
