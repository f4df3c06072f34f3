"""API keys bound to datasets: who may read, write or administer which memories.

A keys file is TOML with one ``[[key]]`` table per key; only the key's SHA-256 is stored::

    [[key]]
    name = "sara-app"
    hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    datasets = ["sara"]          # or ["*"] for every dataset
    role = "write"               # read, write or admin

:func:`add_key` appends a new key to the file and returns it, the only time it is shown.
Roles nest: a ``write`` key also reads, an ``admin`` key also writes and deletes whole scopes.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
import tomllib
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membrain.api.errors import ConfigurationError, MembrainError, ScopeError
from membrain.api.models import Actor, ActorKind
from membrain.api.operations import Access
from membrain.api.scope import dataset_part, is_scope_part

__all__ = [
    "ALL_DATASETS",
    "Access",
    "AuthError",
    "Forbidden",
    "Grant",
    "KeyRing",
    "Unauthenticated",
    "add_key",
    "hash_key",
    "revoke_key",
]

ALL_DATASETS = "*"
"""The dataset name that grants a key every dataset."""
KEY_PREFIX = "mb_"
"""Every generated key starts with this, so a leaked key is easy to recognise."""

log = logging.getLogger("membrain.server")

_HASH = re.compile(r"^[0-9a-f]{64}\Z")
_NAME = re.compile(r"^[\w.@:+-]{1,64}\Z")


class AuthError(MembrainError):
    """A request the keys do not allow; ``status`` is the HTTP status to answer with."""

    status = 401


class Unauthenticated(AuthError):
    """No key, or a key the keys file does not hold (HTTP 401)."""

    status = 401


class Forbidden(AuthError):
    """A known key asking for a dataset or a role it does not have (HTTP 403)."""

    status = 403


@dataclass(frozen=True, slots=True)
class Grant:
    """What one key may do: its role over its datasets.

    Dataset names are stored parts, as a scope listing shows them (``"sara"``,
    ``"auth0_64b7f1-h0965fcf43ca6e13d"``); a name that is no stored part is a user id, stored as
    :class:`membrain.api.models.Scope` stores it (``"auth0|64b7f1"``). No name is normalised, so a
    key covers exactly the tenants it names.

    Attributes:
        name: The key's name in the keys file, or a prefix of its hash when it has none.
        role: The key's role.
        datasets: The datasets it may use (``"*"``: every dataset).
    """

    name: str
    role: Access
    datasets: frozenset[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "datasets", frozenset(map(_stored, self.datasets)))

    def covers(self, dataset: str) -> bool:
        """Whether the key may use ``dataset``."""
        return ALL_DATASETS in self.datasets or dataset in self.datasets

    def check(self, dataset: str, needs: Access) -> None:
        """Refuse unless the key may act on ``dataset`` with role ``needs``.

        Raises:
            Forbidden: the key does not cover ``dataset``, or its role is below ``needs``.
        """
        if not self.covers(dataset):
            raise Forbidden(f"key {self.name!r} may not use dataset {dataset!r}")
        if not self.role.includes(needs):
            raise Forbidden(f"key {self.name!r} has role {self.role.value}; this needs {needs}")

    @property
    def actor(self) -> Actor:
        """The actor the audit log records for changes made with this key."""
        return Actor(kind=ActorKind.API, name=self.name)


@dataclass(frozen=True, slots=True)
class _Entry:
    digest: str
    grant: Grant


def _stored(dataset: str) -> str:
    """The stored dataset a key's name names (``"*"`` stays the wildcard).

    Raises:
        ScopeError: a name that no scope may have.
    """
    if dataset == ALL_DATASETS or isinstance(dataset, str) and is_scope_part(dataset):
        return dataset  # a stored part: add_key writes them, a listing shows them
    return dataset_part(dataset)


def hash_key(key: str) -> str:
    """The SHA-256 hex digest a keys file stores for ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyRing:
    """The keys of a keys file; answers whether a key may do something to a dataset.

    Example:
        >>> ring = KeyRing.load("keys.toml")  # doctest: +SKIP
        >>> ring.authorize("mb_...", "sara", Access.READ).name  # doctest: +SKIP
        'sara-app'
    """

    def __init__(self, entries: Iterable[tuple[str, Grant]] = ()) -> None:
        self._entries = tuple(_Entry(digest, grant) for digest, grant in entries)
        self._source: Path | None = None
        self._stamp: tuple[int, int] | None = None
        self._reload_lock = threading.Lock()

    def __len__(self) -> int:
        self._refresh()
        return len(self._entries)

    @classmethod
    def load(cls, path: str | Path) -> KeyRing:
        """The keys of the TOML file at ``path``, kept in step with the file.

        A key added (``membrain keys add``) or removed while the server runs counts from the
        next request. A change that does not load (a half-edited file) is logged and the keys
        loaded before stay in force.

        Raises:
            ConfigurationError: the file is missing, is not TOML, or a key table is malformed.
        """
        source = Path(path)
        stamp = _stamp(source)
        ring = cls(_read(source))
        ring._source, ring._stamp = source, stamp
        return ring

    def _refresh(self) -> None:
        """Reload the keys when the file changed since they were read."""
        source = self._source
        if source is None:
            return
        stamp = _stamp(source)
        if stamp == self._stamp:
            return
        with self._reload_lock:
            if stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                entries = _read(source)
            except ConfigurationError as exc:
                log.error("keys file changed but does not load; the previous keys stay: %s", exc)
                return
            self._entries = tuple(_Entry(digest, grant) for digest, grant in entries)
            log.info("keys file %s reloaded: %d keys", source, len(self._entries))

    @property
    def grants(self) -> list[Grant]:
        """What each key may do, in the file's order (never the keys or their hashes)."""
        self._refresh()
        return [entry.grant for entry in self._entries]

    def authenticate(self, key: str | None) -> Grant:
        """The grant of ``key``.

        Every stored hash is compared, in constant time, whatever matches.

        Raises:
            Unauthenticated: no key, or a key this ring does not hold.
        """
        self._refresh()
        if not key:
            raise Unauthenticated("missing API key: send 'Authorization: Bearer <key>'")
        digest = hash_key(key)
        found: Grant | None = None
        for entry in self._entries:
            if hmac.compare_digest(entry.digest, digest):
                found = entry.grant
        if found is None:
            raise Unauthenticated("unknown API key")
        return found

    def authorize(self, key: str | None, dataset: str, needs: Access) -> Grant:
        """The grant of ``key`` when it may act on ``dataset`` with role ``needs``.

        Raises:
            Unauthenticated: no key, or an unknown key.
            Forbidden: the key does not cover ``dataset``, or its role is below ``needs``.
        """
        grant = self.authenticate(key)
        grant.check(dataset, needs)
        return grant


def _stamp(source: Path) -> tuple[int, int] | None:
    """When and how big the file was last written (``None``: it cannot be read now)."""
    try:
        status = source.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _read(source: Path) -> list[tuple[str, Grant]]:
    """The (hash, grant) entries of the keys file at ``source``.

    Raises:
        ConfigurationError: the file is missing, is not TOML, or a key table is malformed.
    """
    try:
        document = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"keys file {str(source)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read keys file {str(source)!r}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"keys file {str(source)!r} is not valid TOML: {exc}") from None
    unknown = set(document) - {"key"}
    if unknown:
        raise ConfigurationError(
            f"keys file {str(source)!r} has unknown tables {sorted(unknown)}; only [[key]]"
        )
    tables = document.get("key", [])
    if not isinstance(tables, list):
        raise ConfigurationError(f"keys file {str(source)!r}: 'key' must be [[key]] tables")
    entries = [_parse_entry(table, index, source) for index, table in enumerate(tables, 1)]
    digests = [digest for digest, _ in entries]
    if len(set(digests)) != len(digests):
        raise ConfigurationError(f"keys file {str(source)!r} lists the same key twice")
    return entries


def _parse_entry(table: object, index: int, source: Path) -> tuple[str, Grant]:
    where = f"keys file {str(source)!r}, key #{index}"
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where}: not a table")
    unknown = set(table) - {"hash", "datasets", "role", "name"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown fields {sorted(unknown)}")
    digest = table.get("hash")
    if not isinstance(digest, str) or not _HASH.match(digest):
        raise ConfigurationError(f"{where}: 'hash' must be 64 lowercase hex digits (SHA-256)")
    role_name = table.get("role")
    if not isinstance(role_name, str) or role_name not in Access._value2member_map_:
        known = ", ".join(r.value for r in Access)
        raise ConfigurationError(f"{where}: 'role' must be one of {known}")
    role = Access(role_name)
    datasets = _check_datasets(table.get("datasets"), where)
    name = table.get("name")
    if name is None:
        name = f"key-{digest[:12]}"
    elif not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(f"{where}: 'name' must be 1-64 letters, digits or '._@:+-'")
    return digest, Grant(name=name, role=role, datasets=frozenset(datasets))


def _check_datasets(value: Any, where: str) -> list[str]:
    """The dataset names of a key, each as a scope stores it (see :class:`Grant`).

    Raises:
        ConfigurationError: not a non-empty list, or a name no scope may have.
    """
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ConfigurationError(f"{where}: 'datasets' must be a non-empty list of names or ['*']")
    names: list[str] = []
    for dataset in value:
        if dataset == ALL_DATASETS:
            names.append(dataset)
            continue
        try:
            names.append(_stored(dataset))
        except ScopeError as exc:
            raise ConfigurationError(f"{where}: bad dataset name: {exc}") from None
    return names


def add_key(
    path: str | Path, datasets: Sequence[str], role: Access | str, name: str | None = None
) -> str:
    """Create a key for ``datasets`` with ``role``, append it to the keys file, return it.

    The file keeps only the key's hash: the returned key cannot be shown again. It is created
    when missing and made private (mode 0600) on every write, whatever its mode was.

    Raises:
        ConfigurationError: a bad role, dataset list or name, or an existing keys file that does
            not load.
    """
    target = Path(path)
    try:
        chosen = Access(role)
    except ValueError:
        raise ConfigurationError(f"unknown role {role!r}; known: read, write, admin") from None
    where = f"new key for {str(target)!r}"
    names = _check_datasets(list(datasets) if not isinstance(datasets, str) else datasets, where)
    if name is not None and not _NAME.match(name):
        raise ConfigurationError(f"{where}: the name must be 1-64 letters, digits or '._@:+-'")
    if target.exists():
        KeyRing.load(target)  # never append to a file that does not load
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    lines = ["", "[[key]]"]
    if name is not None:
        lines.append(f'name = "{name}"')
    lines.append(f'hash = "{hash_key(key)}"')
    lines.append("datasets = [" + ", ".join(f'"{d}"' for d in names) + "]")
    lines.append(f'role = "{chosen.value}"')
    # dataset and key names hold no quote, backslash or control character: safe as TOML strings
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(descriptor, "a", encoding="utf-8") as out:
        _make_private(descriptor, target)
        out.write("\n".join(lines) + "\n")
    KeyRing.load(target)
    return key


def _make_private(descriptor: int, path: Path) -> None:
    """Set mode 0600 on the open keys file at ``path``, before anything is written to it.

    Raises:
        ConfigurationError: the mode cannot be changed (a file of another user).
    """
    try:
        os.chmod(descriptor if os.chmod in os.supports_fd else path, 0o600)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot make keys file {str(path)!r} private (mode 0600): {exc}"
        ) from None


_TABLE = re.compile(r"^[ \t]*\[\[key\]\]", re.MULTILINE)


def revoke_key(path: str | Path, name: str) -> int:
    """Remove the keys named ``name`` from the keys file; returns how many were removed.

    The rest of the file (other keys, comments) is kept as written; the file is replaced in
    one step, so a running server reads either the old file or the new one. A server that
    reads the file refuses the removed key from its next request.

    Raises:
        ConfigurationError: the file does not load, or no key has this name.
    """
    target = Path(path)
    before = KeyRing.load(target).grants
    doomed = {index for index, grant in enumerate(before) if grant.name == name}
    if not doomed:
        known = ", ".join(sorted({g.name for g in before})) or "none"
        raise ConfigurationError(f"no key named {name!r} in {str(target)!r} (keys: {known})")
    text = target.read_text(encoding="utf-8")
    starts = [match.start() for match in _TABLE.finditer(text)]
    if len(starts) != len(before):
        raise ConfigurationError(
            f"keys file {str(target)!r} has key tables this command cannot tell apart; "
            "remove the key by hand"
        )
    bounds = [*starts, len(text)]
    kept = text[: starts[0]] + "".join(
        text[bounds[i] : bounds[i + 1]] for i in range(len(starts)) if i not in doomed
    )
    staged = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            _make_private(descriptor, staged)
            out.write(kept)
        if len(_read(staged)) != len(before) - len(doomed):
            raise ConfigurationError(f"removing {name!r} would break {str(target)!r}; unchanged")
        os.replace(staged, target)
    finally:
        staged.unlink(missing_ok=True)
    return len(doomed)


def __getattr__(name: str) -> Any:
    if name == "Role":  # the name of :class:`Access` before it was shared with the operations
        warnings.warn(
            "membrain.server.Role is deprecated: use membrain.server.Access "
            "(membrain.api.operations.Access); membrain.Role is a message's author",
            DeprecationWarning,
            stacklevel=2,
        )
        return Access
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
