"""The SQLite sidecar and configuration helpers of :class:`~.store.MembrainStore`.

- Where the sidecar lives (:func:`sidecar_location`): beside the memory's own store (a file in
  an embedded memory's folder), an explicit ``path``, or ``":memory:"`` when asked for.
- LangGraph's ``index=`` configuration checked against the memory (:func:`index_fields`).
- Namespace rules, the checks every operation passes before a batch runs (:func:`check_op`),
  and the SQL helpers of the key-value half.

A namespace is stored as the JSON array of its labels (:func:`ns_text`), so no label, whatever
characters it holds, can address another namespace; a prefix matches whole labels only. Files
written before (labels joined by ``.``) are converted when opened (:func:`connect`).

:func:`legacy_scope` is where a sidecar of layout 1 kept its items' text: its labels were
hashed another way (``h-`` and a BLAKE2b digest) and NFC-normalised, so
:class:`~.store.MembrainStore` moves that text into the scopes of today's encoding when it
opens such a file, then marks it :data:`FORMAT`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
    tokenize_path,
)

from langchain_membrain.langgraph.filters import check_filter
from membrain import ConfigurationError, InputError, Memory, MemoryLike, Scope
from membrain.api.checks import check_json, is_unicode
from membrain.api.scope import is_scope_part, scope_part
from membrain.backends.edge import EdgeBackend

__all__ = [
    "FORMAT",
    "SimilaritySearch",
    "IN_MEMORY",
    "SIDECAR_NAME",
    "check_key",
    "check_labels",
    "check_namespace",
    "check_op",
    "check_ttl_config",
    "configured_fields",
    "connect",
    "layout",
    "legacy_scope",
    "ns_of",
    "ns_text",
    "set_layout",
    "sidecar_location",
    "strings",
    "tokenized",
]


class SimilaritySearch(SearchOp):
    """A query search ranked by similarity over every item under the prefix.

    What a store with an embedding index runs; a served store's client with an index config
    sends its searches so, since the server's store has no index of its own.
    """

    __slots__ = ()


SIDECAR_NAME = "langgraph-store.sqlite"
"""File name of the default sidecar, in an embedded memory's folder."""

IN_MEMORY = ":memory:"
"""The ``path`` that keeps the sidecar in RAM (items vanish with the process)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS namespaces (
    ns TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    source_id TEXT,
    vectors TEXT,
    ttl REAL,
    expires_at REAL,
    core_expires_at REAL,
    UNIQUE (ns, key)
);
CREATE INDEX IF NOT EXISTS items_source ON items (source_id);
"""

FORMAT = 3
"""The sidecar's layout (``PRAGMA user_version``): 3 is 2 whose default mapping is
:func:`~.store.user_scope` (the user is the dataset; the store moves a file of layout 2's text
from the scopes of ``scope_for_namespace(task="store")``, layout 2's default, when it opens it
with the default mapping); 2 is 1 whose items' text lives in the scopes of
:func:`membrain.api.scope.scope_part` (moved from the scopes of :func:`legacy_scope` when a
file of layout 1 is opened); 1 stores a namespace as a JSON array of its labels; 0, the layout
before it, joined the labels with ``.``."""
_JSON_LABELS = 1

_INDEX_KEYS = frozenset({"dims", "embed", "fields"})


def sidecar_location(memory: MemoryLike, path: str | Path | None) -> str:
    """The sidecar's file: ``path``, else ``langgraph-store.sqlite`` in the memory's folder.

    Raises:
        ConfigurationError: ``path`` is ``None`` and the memory's store has no folder (a Qdrant
            server): say where the items live.
    """
    if path is not None:
        if str(path) == IN_MEMORY:
            return IN_MEMORY
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return str(path)
    if not isinstance(memory, Memory):
        raise ConfigurationError(
            "MembrainStore keeps its items' values in a SQLite file; a served memory has no "
            f"folder of its own here: pass path='.../{SIDECAR_NAME}' (a file this process owns)"
        )
    backend = memory.store.backend
    if isinstance(backend, EdgeBackend):
        backend.path.mkdir(parents=True, exist_ok=True)
        return str(backend.path / SIDECAR_NAME)
    raise ConfigurationError(
        "MembrainStore keeps its items' values in a SQLite file beside the memory's store, but "
        f"this memory's store ({backend.engine}) has no folder; pass path='.../{SIDECAR_NAME}' "
        f"(a file this process owns), or path={IN_MEMORY!r} to keep the items only for the "
        "life of the process"
    )


def connect(location: str) -> sqlite3.Connection:
    """Open (and create) the sidecar at ``location``, converting a file of an older layout.

    Raises:
        ConfigurationError: the file was written by a newer version (a layout above
            :data:`FORMAT`).
    """
    conn = sqlite3.connect(location, check_same_thread=False)
    with conn:
        if location != IN_MEMORY:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(SCHEMA)
        _add_columns(conn)
        conn.execute("CREATE INDEX IF NOT EXISTS items_expiry ON items (expires_at)")
    try:
        _upgrade(conn, location)
    except BaseException:
        conn.close()
        raise
    return conn


_COLUMNS = {"vectors": "TEXT", "ttl": "REAL", "expires_at": "REAL", "core_expires_at": "REAL"}
"""Columns added after layout 1 (a file without them gets them, empty, when opened): the
items' embedded fields (``vectors``, JSON ``{path: vector}``), their TTL in minutes, the
time (Unix seconds) they expire at, and the time their text's facts expire at in the memory
(``core_expires_at``; empty for an item put before the memory kept expiries)."""


def _add_columns(conn: sqlite3.Connection) -> None:
    have = {row[1] for row in conn.execute("PRAGMA table_info(items)")}
    for name, kind in _COLUMNS.items():
        if name not in have:
            conn.execute(f"ALTER TABLE items ADD COLUMN {name} {kind}")


def layout(conn: sqlite3.Connection) -> int:
    """The sidecar's layout (see :data:`FORMAT`)."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def set_layout(conn: sqlite3.Connection, version: int) -> None:
    """Mark the sidecar as of layout ``version``."""
    with conn:
        conn.execute(f"PRAGMA user_version = {int(version)}")


def _legacy_part(value: str) -> str:
    """The part layout 1's ``Scope`` stored for ``value`` (NFC-normalised when that fit)."""
    normal = unicodedata.normalize("NFC", value)
    return normal if is_scope_part(normal) else scope_part(value)


def _legacy_label(label: str) -> str:
    """A namespace label as layout 1 mapped it: kept when it fit a scope, else hashed."""
    if not label.startswith("h-") and is_scope_part(unicodedata.normalize("NFC", label)):
        return _legacy_part(label)
    return "h-" + hashlib.blake2b(label.encode(), digest_size=16).hexdigest()


def legacy_scope(
    namespace: tuple[str, ...], *, default_task: str = "store", task: str | None = None
) -> Scope:
    """The scope in which layout 1 kept the text of ``namespace``'s items.

    Its mapping was :func:`~.store.scope_for_namespace`'s, with each label (and the session's
    labels joined by ``:``) kept when it fit a scope after NFC normalisation, else hashed
    (``h-`` and a BLAKE2b digest).
    """
    if task is not None:
        chosen, rest = _legacy_part(task), namespace[1:]
    elif len(namespace) > 1:
        chosen, rest = _legacy_label(namespace[1]), namespace[2:]
    else:
        chosen, rest = _legacy_part(default_task), ()
    session = _legacy_label(":".join(rest)) if rest else None
    return Scope.stored(_legacy_label(namespace[0]), chosen, session)


def _upgrade(conn: sqlite3.Connection, location: str) -> None:
    """Bring the sidecar to layout 1 at least, in one transaction that another opener waits for.

    Layout 0 joined labels with ``.``; puts never accepted a label holding ``.`` (see
    :func:`check_namespace`), so splitting there gives the labels back unambiguously. Layout 2
    is the store's (:data:`FORMAT`).
    """
    if _JSON_LABELS <= layout(conn) <= FORMAT:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = layout(conn)
        if version > FORMAT:
            raise ConfigurationError(
                f"the LangGraph store sidecar {location!r} has layout {version}, newer than this "
                f"version reads ({FORMAT}): upgrade membrain-memory"
            )
        if version == 0:
            conn.create_function(
                "membrain_dotted_ns", 1, lambda old: ns_text(old.split(".")), deterministic=True
            )
            for table in ("namespaces", "items"):
                # through a "."-prefixed value, which no old or new namespace is, so no two
                # rows ever share a namespace during the update (ns is unique per table)
                conn.execute(f"UPDATE {table} SET ns = '.' || membrain_dotted_ns(ns)")
                conn.execute(f"UPDATE {table} SET ns = substr(ns, 2)")
        conn.execute(f"PRAGMA user_version = {max(version, _JSON_LABELS)}")
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _is_memory_encoder(embed: object, dense: object) -> bool:
    """Whether ``embed`` is the memory's own dense encoder (or the model it wraps, or its name)."""
    if embed is dense:
        return True
    if isinstance(embed, str):
        return embed == getattr(dense, "name", None)
    return any(getattr(dense, a, None) is embed for a in ("_embeddings", "_embedding"))


def _check_encoder(memory: Memory, index: Mapping[str, Any]) -> None:
    """Refuse ``dims`` or ``embed`` that are not the memory's own dense encoder's."""
    dense = memory.store.dense
    dims = index.get("dims")
    if dims is not None and dims != dense.dim:
        raise ConfigurationError(
            f"index['dims'] is {dims}, but the memory's dense encoder ({dense.name}) makes "
            f"{dense.dim}-dimensional vectors; MembrainStore's items are embedded by the memory's "
            "encoder: omit 'dims' or give that dimension"
        )
    embed = index.get("embed")
    if embed is not None and not _is_memory_encoder(embed, dense):
        raise ConfigurationError(
            "index['embed'] must be the memory's own dense encoder: MembrainStore's items are "
            f"embedded, and queries searched, by the memory's encoder ({dense.name}); choose the "
            "model with Memory(dense=...) (a LangChain Embeddings is accepted there) and omit "
            "'embed' here"
        )


def configured_fields(
    memory: MemoryLike, index: Mapping[str, Any] | None, fields: Sequence[str] | None
) -> list[str] | None:
    """The JSON paths to index, from LangGraph's ``index=`` config and ``index_fields``.

    Raises:
        ConfigurationError: ``index`` has an unknown key, ``dims`` differs from the memory's
            dense encoder, ``embed`` is not the memory's own encoder, or ``fields`` and
            ``index_fields`` disagree.
    """
    if index is None:
        return None if fields is None else list(fields)
    if not isinstance(index, Mapping):
        raise ConfigurationError(
            f"index= takes LangGraph's IndexConfig (a dict), got {type(index).__name__}"
        )
    unknown = sorted(set(index) - _INDEX_KEYS)
    if unknown:
        raise ConfigurationError(
            f"index= has unknown keys {unknown}; it takes 'dims', 'embed' and 'fields'"
        )
    if isinstance(memory, Memory):
        _check_encoder(memory, index)
    elif index.get("dims") is not None or index.get("embed") is not None:
        raise ConfigurationError(
            "a served memory embeds the items with its server's dense encoder: omit "
            "index['dims'] and index['embed']"
        )
    wanted = index.get("fields")
    if wanted is None:
        return None if fields is None else list(fields)
    if isinstance(wanted, str):
        raise ConfigurationError("index['fields'] is a list of JSON paths, not a string")
    if fields is not None and list(fields) != list(wanted):
        raise ConfigurationError(
            f"index['fields'] {list(wanted)} and index_fields {list(fields)} disagree; pass one"
        )
    return list(wanted)


_TTL_KEYS = frozenset({"default_ttl", "refresh_on_read", "sweep_interval_minutes"})


def check_ttl_config(ttl: Mapping[str, Any] | None) -> Any:
    """LangGraph's ``TTLConfig`` (``default_ttl``, ``refresh_on_read``, ``sweep_interval_minutes``).

    Raises:
        ConfigurationError: an unknown key, or a TTL or interval that is not a positive number.
    """
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ConfigurationError(f"ttl= takes LangGraph's TTLConfig (a dict), got {ttl!r:.80}")
    unknown = sorted(set(ttl) - _TTL_KEYS)
    if unknown:
        raise ConfigurationError(f"ttl= has unknown keys {unknown}; it takes {sorted(_TTL_KEYS)}")
    for name in ("default_ttl", "sweep_interval_minutes"):
        minutes = ttl.get(name)
        if minutes is not None and (
            isinstance(minutes, bool) or not isinstance(minutes, int | float) or not minutes > 0
        ):
            raise ConfigurationError(f"ttl[{name!r}] is a positive number of minutes")
    return dict(ttl)


def check_key(key: object) -> str:
    """An item key: a string of valid Unicode text.

    Raises:
        InputError: anything else.
    """
    if not isinstance(key, str) or not is_unicode(key):
        raise InputError(f"an item key must be a string of valid Unicode text, got {key!r:.80}")
    return key


def check_labels(namespace: tuple[str, ...]) -> None:
    """LangGraph's rules for the labels of any operation, and valid Unicode text.

    Raises:
        InvalidNamespaceError: a label that is not a non-empty string of valid Unicode text
            without periods (``.``) or NUL bytes.
    """
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r:.80} in {namespace!r:.200}: labels must be "
                "non-empty strings without periods ('.') or NUL bytes."
            )
        if not is_unicode(label):
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r:.80} in {namespace!r:.200}: not valid "
                "Unicode text."
            )


def check_namespace(namespace: tuple[str, ...]) -> None:
    """LangGraph's namespace rules for writes.

    Raises:
        InvalidNamespaceError: an empty namespace, a bad label, or the root label
            ``"langgraph"``.
    """
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    check_labels(namespace)
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "langgraph". Got: {namespace!r:.200}'
        )


def check_value(value: Mapping[str, Any]) -> str:
    """An item value as the sidecar stores it (JSON).

    Raises:
        InputError: the value is not a mapping, not JSON-serialisable, nested deeper than
            :data:`membrain.api.checks.MAX_JSON_DEPTH`, or holds text that is not valid Unicode.
    """
    check_json(value, "an item value", any_integer=True)
    try:
        text = json.dumps(dict(value), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"an item value must be JSON-serialisable: {exc}") from None
    if not is_unicode(text):
        raise InputError("an item value must hold valid Unicode text (no lone surrogate)")
    return text


def check_op(op: Op) -> None:
    """Refuse an operation the store cannot run; a batch checks all of its before running any.

    Raises:
        InvalidNamespaceError: a namespace, prefix or match path with a bad label, or a put's
            empty namespace (its root ``"langgraph"`` is refused by ``put``, as LangGraph's
            stores do, not in a batch).
        InputError: a bad item key, value, TTL, query, filter or match type.
        ValueError: not a LangGraph store operation.
    """
    if isinstance(op, GetOp):
        check_labels(tuple(op.namespace))
        check_key(op.key)
    elif isinstance(op, PutOp):
        # the root "langgraph" is refused by ``put`` (BaseStore's check), not in a batch
        if not op.namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        check_labels(tuple(op.namespace))
        check_key(op.key)
        ttl = op.ttl
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0
        ):
            raise InputError(f"a put's ttl is a positive number of minutes, got {ttl!r:.40}")
        if op.value is not None:
            check_value(op.value)
        index = op.index
        if not (
            index is None
            or index is False
            or (isinstance(index, list | tuple) and all(isinstance(p, str) for p in index))
        ):
            raise InputError(f"a put's index is False or a list of JSON paths, got {index!r:.80}")
    elif isinstance(op, SearchOp):
        check_labels(tuple(op.namespace_prefix))
        if op.query is not None and (not isinstance(op.query, str) or not is_unicode(op.query)):
            raise InputError(f"a search query must be valid Unicode text, got {op.query!r:.80}")
        check_filter(op.filter)
    elif isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise InputError(f"Unsupported match type: {condition.match_type!r:.40}")
            check_labels(tuple(condition.path))
    else:
        raise ValueError(f"Unknown operation type: {type(op)}")


def ns_text(namespace: Sequence[str]) -> str:
    """A namespace as the sidecar stores it: the JSON array of its labels.

    Example:
        >>> ns_text(("sara", "prefs"))
        '["sara","prefs"]'
    """
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def ns_of(text: str) -> tuple[str, ...]:
    """The namespace the sidecar stored as ``text`` (see :func:`ns_text`)."""
    return tuple(json.loads(text))


def prefix_sql(prefix: tuple[str, ...], column: str = "ns") -> tuple[str, list[Any]]:
    """SQL condition (and parameters) of the namespaces under ``prefix``, by whole labels.

    A stored namespace is under ``prefix`` when it is ``prefix`` or its JSON starts with the
    prefix's labels and a comma: inside a JSON string a quote is escaped, so ``"`` followed by
    ``,`` only ever ends a label.
    """
    if not prefix:
        return "1", []
    whole = ns_text(prefix)
    under = whole[:-1] + ","
    return f"({column} = ? OR substr({column}, 1, ?) = ?)", [whole, len(under), under]


def does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether a namespace passes a ``list_namespaces`` match condition."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(wanted == "*" or label == wanted for label, wanted in pairs)


def window(rows: list[Any], offset: int, limit: int) -> list[Any]:
    """``rows[offset:offset + limit]``."""
    return rows[offset : offset + limit]


def tokenized(paths: Iterable[str]) -> list[tuple[str, Any]]:
    """LangGraph JSON paths with their tokens (``"$"``: the whole value)."""
    return [(p, ["$"] if p == "$" else tokenize_path(p)) for p in paths]


def strings(value: Any) -> Iterable[str]:
    """Every string leaf of a JSON value, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)
