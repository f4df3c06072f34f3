"""Scopes: whose memory, for which agent, and optionally which session.

A scope is part of every record's identity: every record belongs to exactly one (dataset, task)
and no read crosses it.

Scope parts
-----------
Every value names its tenant through one encoding, :func:`scope_part`, and it is injective:
two different strings never share a stored part (short of a 64-bit hash collision), on every
surface (:class:`Scope`, the framework adapters' templates and namespaces, the remote clients
and the HTTP server). A *plain* value (1-128 letters, digits, spaces and ``._@:+-``, not
starting with a space, not ``.`` or ``..``, not ending like an encoding) is its own part, so
``"sara"`` and ``"sara@example.com"`` are stored as they are. Any other value, of any length, is
stored as a readable prefix (each other character ``_``) plus ``-h`` and 16 hex digits of the
SHA-256 of the whole value: ``"auth0|64b7f1"`` is ``"auth0_64b7f1-h0965fcf43ca6e13d"``, and the
literal string ``"auth0_64b7f1-h0965fcf43ca6e13d"`` is encoded too, so it names another tenant.
No Unicode normalisation is applied: "Kevin" spelt with U+212A KELVIN SIGN and ``"Kevin"`` are
two tenants, and so are an accent typed precomposed and as a combining mark.

A part, once made, is a :class:`ScopePart` (a ``str``): ``Scope`` keeps a ``ScopePart`` as it
is and encodes every other string, so ``Scope(dataset=scope.dataset)`` is the same tenant and
``Scope(dataset=scope_part(x)) == Scope(dataset=x)``. A part read back as text (from storage, an
export or an HTTP answer) names its tenant through :meth:`Scope.stored`.

Values joined into one part (a template such as ``"{org}:{user_id}"``, a LangGraph namespace's
labels) go through :func:`compose_part`: a value holding a separator of the template is encoded
(hashed), so ``org="a:b", user_id="c"`` and ``org="a", user_id="b:c"`` never meet.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidatorFunctionWrapHandler, field_validator

from membrain.api.errors import ConfigurationError, ScopeError

__all__ = [
    "BOOKKEEPING_TASK_PREFIX",
    "DEFAULT_TASK",
    "MAX_PART",
    "PARTS_HEADER",
    "STORED",
    "Record",
    "Scope",
    "ScopePart",
    "compose_part",
    "dataset_part",
    "scope_part",
    "template_separators",
]

DEFAULT_TASK = "default"
"""The task of a scope that names none."""

_NAMESPACE = uuid.UUID("6c1f4a52-2f4e-4d8e-9a57-8d1b3f0e9c21")
BOOKKEEPING_TASK_PREFIX = "membrain.transcript:"
"""Task prefix of bookkeeping scopes (:meth:`Scope.bookkeeping`)."""
MAX_PART = 128
"""The most characters of a scope part."""
STORED: dict[str, Any] = {"stored": True}
"""Validation context of records read back: their scope parts are stored parts, not raw values
(``Fact.model_validate(data, context=STORED)``)."""
PARTS_HEADER = "Membrain-Scope-Parts"
"""HTTP header (any value) saying a request's ``dataset``/``task``/``session`` are stored parts,
as the remote clients send them; without it the server encodes them as :class:`Scope` does."""
_SCOPE_PART = re.compile(r"[\w.@:+-][\w .@:+-]{0,127}\Z")
_NOT_ALLOWED = re.compile(r"[^\w .@:+-]")
_DIGEST_CHARS = 16
_ENCODED = re.compile(rf"-h[0-9a-f]{{{_DIGEST_CHARS}}}\Z")


def is_scope_part(value: str) -> bool:
    """Whether ``value`` may be a stored part: 1-128 letters, digits, spaces and ``._@:+-``."""
    return bool(_SCOPE_PART.match(value)) and value not in (".", "..")


class ScopePart(str):
    """A stored scope part: made by :func:`scope_part`, or a part read back from storage.

    :class:`Scope` keeps a ``ScopePart`` as it is (it is already encoded) and encodes any other
    string. ``ScopePart(text)`` names the tenant a stored part names.

    Raises:
        ScopeError: ``text`` is not a stored part (see :func:`is_scope_part`).
    """

    __slots__ = ()

    def __new__(cls, value: object) -> ScopePart:
        """``value`` as a stored part, checked."""
        if isinstance(value, ScopePart):
            return value
        if not isinstance(value, str) or not is_scope_part(value):
            raise ScopeError(f"not a stored scope part: {value!r:.200}")
        return super().__new__(cls, value)


def _part(value: str) -> ScopePart:
    """``value``, known to be a part, as a :class:`ScopePart` (not checked again)."""
    return str.__new__(ScopePart, value)


def scope_part(value: str, reserved: str = "") -> ScopePart:
    """The stored part of ``value``: unchanged when it is plain, else a readable encoding.

    A plain value (1-128 letters, digits, spaces and ``._@:+-``, not starting with a space, not
    "." or "..", not ending like an encoded value: ``-h`` and 16 hex digits, and holding none
    of ``reserved``) is returned as it is. Any other string, of any length, is encoded
    deterministically: each character outside that alphabet or in ``reserved`` (and a leading
    space) becomes ``_``, the result is cut to 110 characters, and ``-h`` plus 16 hex digits of
    the SHA-256 of the whole original value is appended. So the stored part stays readable, is
    stable across processes, and two different values never share a part (short of a 64-bit
    hash collision). It reads the text alone: a :class:`ScopePart` is encoded as any string is
    (``Scope`` keeps one as it is).

    Args:
        value: Any string, such as a user id (``"auth0|64b7f1"``, ``"ชนิดา"``, an URL).
        reserved: Characters the part must not hold (the separators :func:`compose_part`
            joins parts with).

    Example:
        >>> scope_part("sara@example.com")
        'sara@example.com'
        >>> scope_part("auth0|64b7f1")
        'auth0_64b7f1-h0965fcf43ca6e13d'
    """
    plain = is_scope_part(value) and not _ENCODED.search(value)
    if plain and not any(char in value for char in reserved):
        return _part(value)
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    suffix = f"-h{digest}"
    readable = _NOT_ALLOWED.sub("_", value)
    for char in reserved:
        readable = readable.replace(char, "_")
    readable = readable[: MAX_PART - len(suffix)]
    if readable.startswith(" "):
        readable = "_" + readable[1:]
    return _part(readable + suffix)


def _separates(char: str) -> bool:
    """Whether ``char`` can separate two encoded values: no encoding ever holds it."""
    return not (char.isalnum() or char in "_-")


def template_separators(texts: Sequence[str]) -> str:
    """The separators of a template's literal ``texts`` (around and between its fields).

    Each text between two fields must hold a separator (a character that is not a letter, a
    digit, ``_`` or ``-``, such as ``:``), so values joined by it are told apart.

    Raises:
        ConfigurationError: two fields are adjacent, or separated by letters, digits, ``_`` or
            ``-`` only.
    """
    found: set[str] = set()
    for between in texts[1:-1]:
        chars = {char for char in between if _separates(char)}
        if not chars:
            raise ConfigurationError(
                f"scope template fields are joined by {between!r}, which an encoded value may "
                "hold, so two values could make one part; separate them with ':' (or another "
                "character that is not a letter, a digit, '_' or '-')"
            )
        found |= chars
    return "".join(sorted(found))


def compose_part(texts: Sequence[str], values: Sequence[str], separators: str = "") -> ScopePart:
    """The part ``texts[0] + v0 + texts[1] + v1 + ... + texts[-1]`` of encoded values.

    Each value is encoded by :func:`scope_part`, reserving the separators (those of the texts
    between values, see :func:`template_separators`, and ``separators``), so different values
    always make different parts. One value between empty texts is ``scope_part(value)``; texts
    alone are one raw value. A result that is not a part (too long, or texts outside the
    alphabet) is encoded as a whole.

    Raises:
        ConfigurationError: ``texts`` do not separate the values (see
            :func:`template_separators`), or ``texts`` is not one longer than ``values``.

    Example:
        >>> compose_part(["", ":", ""], ["acme", "sara"])
        'acme:sara'
        >>> compose_part(["", ":", ""], ["a", "b:c"]) != compose_part(["", ":", ""], ["a:b", "c"])
        True
    """
    if len(texts) != len(values) + 1:
        raise ConfigurationError("a template has one more literal text than values")
    if not values:
        return scope_part(texts[0])
    reserved = "".join(sorted(set(template_separators(texts)) | set(separators)))
    joined = texts[0] + "".join(
        scope_part(value, reserved) + text for value, text in zip(values, texts[1:], strict=True)
    )
    return _part(joined) if is_scope_part(joined) else scope_part(joined)


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

    A part may be any non-empty string, such as a user id from an identity provider: it is
    stored as :func:`scope_part` encodes it, exactly as the framework adapters and the HTTP
    server encode it, so ``Scope(dataset="auth0|64b7f1")`` and an adapter run with
    ``user_id="auth0|64b7f1"`` share one memory, and two different strings never share one. The
    parts of a scope are :class:`ScopePart` values, kept as they are, so
    ``Scope(dataset=scope.dataset)`` names the same tenant; a part read back as plain text
    names its tenant through :meth:`stored`.

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

    @field_validator("dataset", "task", "session", mode="wrap")
    @classmethod
    def _check_part(
        cls, value: object, handler: ValidatorFunctionWrapHandler, info: Any
    ) -> str | None:
        if value is None and info.field_name == "session":
            return None
        if isinstance(value, ScopePart):
            return value
        if isinstance(value, str) and (info.context or {}).get("stored"):
            return ScopePart(value)
        if not isinstance(value, str) or not value or not value.isprintable() and not value.strip():
            raise ScopeError(f"scope {info.field_name} must be a non-empty string; got {value!r}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ScopeError(f"scope {info.field_name} is not valid text; got {value!r}") from None
        return scope_part(value)

    @classmethod
    def stored(cls, dataset: str, task: str = DEFAULT_TASK, session: str | None = None) -> Scope:
        """The scope whose stored parts are these (as a record, a listing or an export shows them).

        Raises:
            ScopeError: a part that no scope stores.
        """
        return cls.model_validate(
            {"dataset": dataset, "task": task, "session": session}, context=STORED
        )

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


def dataset_part(dataset: object, stored: bool = False) -> str:
    """The stored dataset a caller's ``dataset`` (any user id) names, as :class:`Scope` stores it.

    With ``stored``, ``dataset`` is a stored part already (as a listing shows it).

    Raises:
        ScopeError: not a non-empty string (``stored``: not a stored part).
    """
    return Scope.model_validate({"dataset": dataset}, context=STORED if stored else None).dataset
