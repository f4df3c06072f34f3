"""``MembrainStore``: a LangGraph ``BaseStore`` whose query search is MemBrain's hybrid retrieval.

Design
------
A LangGraph store is a key-value store (get/put/delete JSON values by namespace and key, list
namespaces, filter) with an optional natural-language search. MemBrain stores messages and the
facts extracted from them, and a :class:`~membrain.Message` has no slot for an arbitrary JSON
value. So the store has two halves:

- **Key-value half: a SQLite sidecar** (``path``; by default ``langgraph-store.sqlite`` in
  the embedded memory's folder, so items survive a restart; ``":memory:"`` only when asked
  for; a memory on a Qdrant server, or a served memory
  (:class:`~membrain.remote.RemoteMemory`), needs an explicit ``path``: the sidecar is this
  process's, while the items' text and facts live in the shared memory). It holds every item's value
  (JSON), timestamps and order, and answers ``get``, ``put``/``delete``, ``list_namespaces``
  and ``search`` without a query (with ``filter``, ``limit``, ``offset``) exactly as
  LangGraph's ``InMemoryStore`` does.
- **Search half: MemBrain.** Every put item (unless ``index=False``) is also written to MemBrain
  as one message: its text is the item's textual rendering (the string fields of the value, or
  the fields named by ``index`` / ``index_fields``), spoken by the user's display name
  (``user_name``, or the value's ``"user_name"``), its ``source_id`` a hash of (namespace,
  key, text, speaker) that the sidecar maps back to the item. It is embedded by the memory's
  own encoders (LangGraph's ``index["embed"]`` must be that encoder). The message is stored
  as pending evidence and extracted into facts by the
  :class:`~membrain.background.BackgroundWriter` (unless ``extract=False``). A ``search``
  with a ``query`` runs, per tenant under the namespace prefix, MemBrain's evidence search
  (BM25 and dense over the items' messages: works the moment the item is put) and fact search
  (``mode``; works once the writer has extracted). Each of the three rankings is merged across
  tenants by score, the three are fused per item by MemBrain's reciprocal rank fusion
  (:func:`membrain.retrieval.rrf` with :data:`membrain.retrieval.RRF_K`), and the current
  items they cite are returned in that order, after ``filter``, ``offset`` and ``limit``.

Scores
------
A query hit's ``score`` is the similarity of the query and the item, as LangGraph's stores
compute it: the largest cosine of the query's vector and the vectors of the item's indexed
fields (one per field, or per element of a list field; ``"$"``, the default, is the whole value
as JSON), embedded by the memory's dense encoder when the item is put and kept in the sidecar.
With an embedding index (``index=``, as LangGraph's stores take it) every live item under the
prefix that passes the filter is ranked by that similarity, items without a vector
(``index=False``) following without a score when the page has room: LangGraph's contract.
Without ``index=`` MemBrain's hybrid search above decides what is found and its order (the
facts find what the words alone miss), and the score is still the similarity. Over a served
memory (whose encoder this process cannot run) the score is the dense evidence path's cosine.

TTL
---
``put(..., ttl=minutes)`` and ``ttl=TTLConfig`` (``default_ttl``, ``refresh_on_read``,
``sweep_interval_minutes``) as LangGraph's SQL stores take them; ``get``/``search`` with
``refresh_ttl`` restart an item's TTL. An expired item is invisible to every read at once.
The item's text is added to the memory with the same expiry (``Memory.add(expires_at=...)``),
so the facts extracted from it leave every search of the memory when the item expires, by the
memory's own expiry (:mod:`membrain.api.expiry`). A refresh moves the facts' expiry
(``Memory.extend_expiry``, audited) only when the item's new expiry passes it, and then half a
TTL ahead: a hot item costs one write per half TTL, not one per read.
:meth:`MembrainStore.sweep_ttl` (or the thread :meth:`~MembrainStore.start_ttl_sweeper` starts)
deletes the expired items, brings their facts' expiry back to the item's and runs the memory's
sweep (``Memory.expire``: the facts are marked ``expired``, audited). Items put before the
memory kept expiries have their facts forgotten instead, with :data:`EXPIRED_REASON`.

Namespace to scope
------------------
By default **the user is the dataset** (:func:`user_scope`): ``(collection, user, rest...)`` →
``Scope(dataset=user, task=collection, session="rest:...")``, langmem's
``("memories", "{user_id}")`` convention, and ``(user,)`` → ``Scope(user, "store")``. ``task=``
keeps the older mapping, a task of its own: ``(d,)`` → ``Scope(d, task)``, ``(d, x, y...)`` →
``Scope(d, task, session="x:y...")``. ``scope_for_namespace`` without ``task`` is the
chat-sharing mapping:
``(d,)`` → ``Scope(d, default_task)``; ``(d, t)`` → ``Scope(d, t)``; ``(d, t, s)`` →
``Scope(d, t, session=s)``; deeper namespaces put their remaining labels into the session
(``s:x:y``). Every label is encoded as :class:`membrain.Scope` encodes a value
(:func:`membrain.api.scope.scope_part`: ``d`` is the dataset ``Scope(dataset=d)`` names, the one API
keys name), and the labels joined into a session by :func:`membrain.api.scope.compose_part`, so a
label holding ``:`` is encoded: ``("u", "a", "b:c")`` and ``("u", "a", "b", "c")`` are two
sessions. A sidecar written before this encoding has its items' text moved into their new
tenants when it is opened (see :class:`MembrainStore`). Pass ``namespace_to_scope`` to map
differently (for instance
``namespace_to_scope=scope_for_namespace`` shares the tenants of the chat memory written by
:func:`~langchain_membrain.langgraph.make_writer_node`). The
mapping only decides where the items' text lives in MemBrain; results are always mapped back to
exact namespaces through the sidecar, so two namespaces sharing a scope never see each other's
items.

Semantics and limits
--------------------
- Reads in a ``batch`` see the store as it was before the batch; the batch's puts apply after
  them, the last put of a (namespace, key) winning (as ``InMemoryStore`` does).
- Search without a query returns items in namespace creation order, then item insertion order
  (an overwrite keeps the item's place, a delete and re-put moves it to the end), as
  ``InMemoryStore`` does; ``score`` is ``None``.
- Filters: exact match on value fields (nested dicts and lists compare structurally) and the
  ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` operators. A comparison with a missing
  or non-numeric value is false (``InMemoryStore`` raises ``TypeError`` there; PostgreSQL's JSONB
  comparison is false, as here). Another operator is an ``InputError`` (``InMemoryStore`` raises
  ``ValueError``), even when no item reaches it.
- Every operation of a batch is checked before any runs: LangGraph's label rules (non-empty
  labels without ``.`` or NUL, as its store methods check them) for reads too, item keys,
  values, queries and filters of valid Unicode text. A bad one fails the whole batch, which then
  reads and writes nothing.
- ``list_namespaces`` lists only namespaces that hold items. ``InMemoryStore`` also lists
  namespaces emptied by deletes and namespaces a ``get`` merely looked at.
- Without ``index=``, query search returns only items MemBrain found; items put with
  ``index=False`` or without text are never found by a query. Filters apply after retrieval,
  to at most ``candidates`` (or ``offset + limit``, if larger) hits per tenant and path. A
  query runs three MemBrain searches per tenant under the prefix: keep prefixes narrow (a
  user's tenant, not ``()``). With ``index=`` a query reads every item under the prefix.
- Overwritten and deleted items stay in MemBrain as evidence (and their facts stay), but are
  never returned: only the current version of an item maps back. ``Memory.delete_scope``
  removes them for good.
- Values must be JSON-serialisable and round-trip through JSON (a tuple comes back as a list;
  ``InMemoryStore`` returns the very object that was put).
- ``created_at`` is kept across overwrites (``InMemoryStore`` resets it), unless the item had
  expired.
- One process per sidecar file (like the embedded MemBrain store); thread-safe within it.

Example:
    >>> store = MembrainStore(memory=mem, path="./.membrain/langgraph-store.sqlite")
    ... # doctest: +SKIP
    >>> store.put(("memories", "sara"), "pets", {"text": "Sara adopted a cat named Miso."})
    ... # doctest: +SKIP
    >>> store.search(("memories", "sara"), query="What is the cat called?")[0].key
    ... # doctest: +SKIP
    'pets'
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.config import get_config
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
)

from langchain_membrain._runs import run_of
from langchain_membrain.langgraph.filters import matches
from langchain_membrain.langgraph.sidecar import (
    FORMAT,
    SimilaritySearch,
    check_op,
    check_ttl_config,
    check_value,
    configured_fields,
    connect,
    does_match,
    layout,
    legacy_scope,
    ns_of,
    ns_text,
    prefix_sql,
    set_layout,
    sidecar_location,
    strings,
    tokenized,
    window,
)
from langchain_membrain.langgraph.ttl import Sweeper, SweeperFuture
from membrain import (
    Actor,
    ActorKind,
    ConfigurationError,
    Memory,
    MemoryLike,
    Message,
    MessageStatus,
    RetrievalMode,
    Role,
    Scope,
    ScopeError,
)
from membrain.api.scope import ScopePart, compose_part, scope_part
from membrain.background import BackgroundWriter, check_writer, schedule_extraction
from membrain.binding import CLOCK, DEFAULT_USER_NAME
from membrain.remote.protocol import actor_for
from membrain.retrieval import RRF_K, Ranked, rrf

__all__ = ["EXPIRED_REASON", "MembrainStore", "scope_for_namespace", "user_scope"]

log = logging.getLogger(__name__)


def _now() -> float:
    """The clock TTLs run on (Unix seconds)."""
    return time.time()


LIVE = "(expires_at IS NULL OR expires_at > ?)"
"""SQL condition of the items whose TTL has not run out (the parameter: now, Unix seconds)."""
LIVE_I = "(i.expires_at IS NULL OR i.expires_at > ?)"

EXPIRED_REASON = "the store item expired (its TTL ran out)"
"""The audit reason of the facts forgotten when an expired item put before the memory kept
expiries is swept."""

REFRESH_SLACK = 0.5
"""How far ahead of an item's refreshed expiry its facts' expiry is moved, in TTLs."""


def _moment(clock: float) -> datetime:
    """A Unix time as an aware datetime."""
    return datetime.fromtimestamp(clock, UTC)


def _best_cosine(query: np.ndarray, vectors: list[list[float]]) -> float:
    """The largest cosine similarity of ``query`` and any of ``vectors`` (0 for a zero vector)."""
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
    dots = matrix @ query
    cosines = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    return float(cosines.max())


def _session(labels: Sequence[str]) -> ScopePart:
    """The session of labels joined by ``:``; a label holding ``:`` is encoded, so none merge."""
    return compose_part(("", *([":"] * (len(labels) - 1)), ""), labels, separators=":")


def scope_for_namespace(
    namespace: tuple[str, ...], *, default_task: str = "store", task: str | None = None
) -> Scope:
    """The MemBrain scope of a LangGraph namespace (see module docs).

    Without ``task``: ``(d,)`` → ``Scope(d, default_task)``, ``(d, t)`` → ``Scope(d, t)``,
    ``(d, t, s, ...)`` → ``Scope(d, t, session="s:...")`` (the chat's scopes, shared with it).
    With ``task`` (:class:`MembrainStore`'s default, ``task="store"``): ``(d, rest...)`` →
    ``Scope(d, task, session="rest:...")``, a task of its own beside the chat's.

    Example:
        >>> scope_for_namespace(("sara", "assistant", "prefs"))
        Scope(dataset='sara', task='assistant', session='prefs')
        >>> scope_for_namespace(("sara", "assistant", "prefs"), task="store")
        Scope(dataset='sara', task='store', session='assistant:prefs')
    """
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    dataset = scope_part(namespace[0])
    if task is not None:
        rest = namespace[1:]
        return Scope(dataset=dataset, task=task, session=_session(rest) if rest else None)
    task = scope_part(namespace[1]) if len(namespace) > 1 else default_task
    session = _session(namespace[2:]) if len(namespace) > 2 else None
    return Scope(dataset=dataset, task=task, session=session)


def user_scope(namespace: tuple[str, ...]) -> Scope:
    """The store's default scope of a namespace: **the user is the dataset**.

    ``(user,)`` → ``Scope(user, "store")``; ``(collection, user, rest...)`` →
    ``Scope(dataset=user, task=collection, session="rest:...")``: langmem's convention
    (``("memories", "{user_id}")``), the scope :func:`~.namespaces.namespace_scopes` gives for
    that template, and where :func:`~langchain_membrain.tools.create_memory_tools` keeps a
    user's memories. Labels are encoded as :func:`scope_for_namespace` encodes them.

    Example:
        >>> user_scope(("memories", "sara"))
        Scope(dataset='sara', task='memories', session=None)
        >>> user_scope(("sara",))
        Scope(dataset='sara', task='store', session=None)
        >>> user_scope(("memories", "sara", "prefs"))
        Scope(dataset='sara', task='memories', session='prefs')
    """
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if len(namespace) == 1:
        return Scope(dataset=scope_part(namespace[0]), task="store")
    collection, user, *rest = namespace
    return Scope(
        dataset=scope_part(user),
        task=scope_part(collection),
        session=_session(rest) if rest else None,
    )


class MembrainStore(BaseStore):
    """A LangGraph store: key-value items in a SQLite sidecar, query search by MemBrain.

    Args:
        memory: The MemBrain memory that indexes the items' text and answers query searches:
            an embedded :class:`~membrain.Memory` or a served one
            (:class:`~membrain.remote.RemoteMemory`; its server extracts in the background).
        path: The SQLite file of the key-value sidecar (created if missing). Default: durable,
            beside the memory's own store (``langgraph-store.sqlite`` in an embedded memory's
            folder), so items survive a restart. A memory on a Qdrant server has no folder:
            pass a path then. ``":memory:"`` keeps the sidecar in RAM (items vanish with the
            process while their text stays in MemBrain).
        writer: Extracts facts from the items' messages; default
            ``BackgroundWriter.for_memory(memory)``.
        extract: ``False`` stores items' text as evidence only (query search then uses the
            evidence path alone).
        index: LangGraph's ``IndexConfig`` (``{"dims": ..., "embed": ..., "fields": [...]}``),
            as ``InMemoryStore`` takes it. ``fields`` are the JSON paths of the text to index
            (as ``index_fields``; ``"$"`` is every string of the value). Items are always
            embedded, and queries searched, by the memory's own dense encoder
            (``memory.store.dense``): ``embed``, if given, must be that encoder (the
            ``DenseEncoder``, the LangChain ``Embeddings`` object passed to
            ``Memory(dense=...)``, or the encoder's name) and ``dims``, if given, its dimension;
            anything else raises ``ConfigurationError`` rather than silently embedding with
            another model. To embed with a LangChain model, give it to ``Memory(dense=...)``.
        index_fields: JSON paths of the text to index (LangGraph's path syntax, e.g.
            ``["text", "tags[*]"]``); default every string in the value except a top-level
            ``"user_name"``.
        user_name: The user's display name, the speaker of the items' messages (whom extracted
            facts are about): a string, or a function of the item's namespace (returning
            ``None`` for the default). An item whose value holds a string ``"user_name"`` is
            spoken by that name instead. Default ``"User"``
            (:data:`membrain.binding.DEFAULT_USER_NAME`).
        speaker: Older name of ``user_name`` (a string); pass one of the two.
        task: The older mapping, the items in a task of their own: a namespace
            ``(d, rest...)`` maps to ``Scope(d, task, session="rest:...")``. Default: none, the
            user is the dataset (:func:`user_scope`). Pass either ``task`` or
            ``namespace_to_scope``.
        mode: MemBrain retrieval mode of the fact search (``"fast"`` makes no LLM call).
        candidates: Hits per tenant and path fetched before filtering.
        namespace_to_scope: Maps a namespace to its MemBrain scope, instead of
            :func:`user_scope`; ``scope_for_namespace`` (without ``task``) shares the chat's
            scopes, :func:`~.namespaces.namespace_scopes` reads another convention.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` and ``sweep_interval_minutes`` in
            minutes, ``refresh_on_read``); see the module docs. No sweeper runs until
            :meth:`start_ttl_sweeper`.
        actor: Who the memory's audit log names for the store's writes (an agent: the facts
            extracted from items are ``derived`` and name it as their author). Overwriting or
            deleting an item forgets the facts extracted from its previous value, by this actor
            (or queues the request for a person when the memory's review policy holds agents'
            forgets).

    Keep ``task`` / ``namespace_to_scope`` stable for a sidecar: an item is found by a query
    only in the scope it was written to. A sidecar written before labels were encoded as
    :class:`~membrain.Scope` encodes them (layout 1) has its items' text moved into the scopes
    they map to now when a store with the default mapping, ``task`` or
    :func:`scope_for_namespace` opens it, once; a sidecar of the older default mapping
    (layout 2, ``task="store"``) opened with the default mapping has its text moved to
    :func:`user_scope`'s scopes, once.

    Raises:
        ConfigurationError: ``mode`` is not a retrieval mode; ``path`` is missing for a memory
            without a folder; ``index`` does not fit the memory (see ``index``); ``task`` is
            not a valid scope part; or conflicting arguments.

    Example:
        >>> store = MembrainStore(memory=mem, user_name="Sara")  # doctest: +SKIP
        >>> store.put(("memories", "sara"), "k1", {"text": "I live in Lisbon."})
        ... # doctest: +SKIP
        >>> store.search(("memories", "sara"), query="Where does Sara live?")  # doctest: +SKIP
    """

    supports_ttl = True

    def __init__(
        self,
        *,
        memory: MemoryLike,
        path: str | Path | None = None,
        writer: BackgroundWriter | None = None,
        extract: bool = True,
        index: IndexConfig | None = None,
        index_fields: Sequence[str] | None = None,
        user_name: str | Callable[[tuple[str, ...]], str | None] | None = None,
        speaker: str | None = None,
        task: str | None = None,
        mode: RetrievalMode | str = RetrievalMode.FAST,
        candidates: int = 50,
        namespace_to_scope: Callable[[tuple[str, ...]], Scope] | None = None,
        actor: str = "agent:langgraph-store",
        ttl: TTLConfig | None = None,
    ) -> None:
        if user_name is not None and speaker is not None:
            raise ConfigurationError("pass user_name or speaker (its older name), not both")
        if task is not None and namespace_to_scope is not None:
            raise ConfigurationError("pass task or namespace_to_scope, not both")
        check_writer(memory, writer)
        if not extract and not isinstance(memory, Memory):
            raise ConfigurationError(
                "extract=False needs an embedded Memory: a served memory's server extracts "
                "everything it stores in the background"
            )
        self.memory = memory
        self._actor = Actor.parse(actor, ActorKind.AGENT)
        self._writer = writer
        self._extract = extract
        fields = configured_fields(memory, index, index_fields)
        self._index_fields = tokenized(fields or ())
        self._vector_fields = fields or ["$"]
        self._dense = memory.store.dense if isinstance(memory, Memory) else None
        self.index_config: IndexConfig | None = None
        if index is not None:
            resolved = dict(index)
            if self._dense is not None:
                resolved.setdefault("dims", self._dense.dim)
                resolved["embed"] = resolved.get("embed") or self._dense
            self.index_config = resolved  # type: ignore[assignment]
        # the model that embeds the items, as LangGraph's stores name it (None without index)
        self.embeddings: Any = None if self.index_config is None else self.index_config["embed"]
        self.ttl_config = check_ttl_config(ttl)
        self._sweeper = Sweeper(self.sweep_ttl)
        self._user_name = user_name if user_name is not None else speaker
        self._mode = RetrievalMode.parse(mode)
        self._candidates = candidates
        # the scopes older layouts kept the items' text in, by layout (None: where it is now)
        earlier: dict[int, Callable[[tuple[str, ...]], Scope] | None] | None
        self._scope_for: Callable[[tuple[str, ...]], Scope]
        if task is None and namespace_to_scope in (None, user_scope):
            self._scope_for = user_scope
            earlier = {
                1: partial(legacy_scope, task="store"),
                2: partial(scope_for_namespace, task="store"),
            }
            self._dataset_labels: int | None = 2
        elif namespace_to_scope is None:
            assert task is not None
            try:
                Scope(dataset="check", task=task)
            except ScopeError as exc:
                raise ConfigurationError(f"task={task!r} is not a valid task: {exc}") from exc
            self._scope_for = partial(scope_for_namespace, task=task)
            earlier = {1: partial(legacy_scope, task=task), 2: None}
            self._dataset_labels = 1
        else:
            self._scope_for = namespace_to_scope
            earlier, self._dataset_labels = None, None
            if namespace_to_scope is scope_for_namespace:
                earlier, self._dataset_labels = {1: legacy_scope, 2: None}, 1
        self.path = sidecar_location(memory, path)
        self._conn = connect(self.path)
        self._lock = threading.RLock()
        version = layout(self._conn)
        if earlier is not None and version < FORMAT:
            legacy = earlier.get(version)
            if legacy is not None:
                self._copy_legacy_text(legacy)
            set_layout(self._conn, FORMAT)
        self._embed_missing()

    def _embed_missing(self) -> None:
        """Embed the fields of items stored before the sidecar kept their vectors."""
        if self._dense is None:
            return
        rows = self._conn.execute(
            "SELECT id, value FROM items WHERE source_id IS NOT NULL AND vectors IS NULL"
        ).fetchall()
        for start in range(0, len(rows), 256):
            chunk = rows[start : start + 256]
            vectors = self._vectors([json.loads(value) for _, value in chunk], None)
            with self._conn:
                self._conn.executemany(
                    "UPDATE items SET vectors = ? WHERE id = ?",
                    [(v, row_id) for v, (row_id, _) in zip(vectors, chunk, strict=True)],
                )

    def _copy_legacy_text(self, legacy: Callable[[tuple[str, ...]], Scope]) -> None:
        """Move the items' text from the scopes an older sidecar kept it in to today's scopes.

        The sidecar holds every item's namespace, so the scope the old mapping chose (see
        :func:`~.sidecar.legacy_scope`) is known exactly; items whose scope is unchanged (every
        label plain) are left alone. The text is copied as pending evidence, extracted as a
        put's is, then the facts extracted from the old copy are forgotten (audited, by the
        store's actor), as an overwrite retires them; the old messages stay as evidence.
        """
        moves: dict[tuple[Scope, Scope], list[str]] = {}
        rows = self._conn.execute("SELECT ns, source_id FROM items WHERE source_id IS NOT NULL")
        for ns, source_id in rows.fetchall():
            namespace = ns_of(ns)
            old, new = legacy(namespace), self._scope_for(namespace)
            if old != new:
                moves.setdefault((old, new), []).append(source_id)
        by = actor_for(self.memory, self._actor)
        for (old, new), source_ids in moves.items():
            for start in range(0, len(source_ids), 500):
                stored = self.memory.messages(scope=old, ids=source_ids[start : start + 500])
                batch = [m.message for m in stored]
                if batch:
                    self.memory.add(batch, scope=new, extract=False, by=by)
                    if self._extract:
                        schedule_extraction(self.memory, new, batch, self._writer)
            self._retire({old: source_ids}, self._actor)
            log.info("moved the text of %d store items from %s to %s", len(source_ids), old, new)

    def scope_for(self, namespace: tuple[str, ...]) -> Scope:
        """The MemBrain scope that holds the text of the items of ``namespace``."""
        return self._scope_for(tuple(namespace))

    @property
    def dataset_labels(self) -> int | None:
        """How many leading labels of a namespace decide its dataset.

        ``2`` for the default mapping (:func:`user_scope`): every namespace under
        ``(collection, user)`` has the dataset of ``user``, while ``(user,)`` alone also
        prefixes other users' namespaces. ``1`` for ``task=`` or :func:`scope_for_namespace`:
        every namespace under ``(d,)`` has the dataset of ``(d,)``. ``None`` for another
        ``namespace_to_scope``, which may read any label.
        """
        return self._dataset_labels

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the TTL sweeper and close the sidecar (the memory and the writer stay open)."""
        self.stop_ttl_sweeper()
        with self._lock:
            self._conn.close()

    def __enter__(self) -> MembrainStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def writer(self) -> BackgroundWriter | None:
        """The background writer that extracts the items' messages.

        ``None`` for a served memory: its server runs its own.
        """
        if self._writer is not None or not isinstance(self.memory, Memory):
            return self._writer
        return BackgroundWriter.for_memory(self.memory)

    # -- batch -------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations: reads against the store as it was, then the puts (last one wins)."""
        return self.batch_by(ops, self._actor)

    def batch_by(self, ops: Iterable[Op], actor: Actor) -> list[Result]:
        """:meth:`batch`, the audit log naming ``actor`` for its writes.

        A server names the API key that sent the batch, instead of the store's own actor.
        """
        ops = list(ops)
        for op in ops:
            check_op(op)
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        queries: list[tuple[int, SearchOp]] = []
        with self._lock:
            for i, op in enumerate(ops):
                if isinstance(op, GetOp):
                    results[i] = self._get(op)
                elif isinstance(op, SearchOp):
                    if op.query:
                        queries.append((i, op))
                    else:
                        results[i] = self._scan(op)
                elif isinstance(op, ListNamespacesOp):
                    results[i] = self._list_namespaces(op)
                elif isinstance(op, PutOp):
                    puts[(tuple(op.namespace), op.key)] = op
                else:
                    raise ValueError(f"Unknown operation type: {type(op)}")
        for i, op in queries:
            results[i] = self._query(op)
        if puts:
            self._apply(puts, actor)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- reads -------------------------------------------------------------------------------
    @staticmethod
    def _fields(row: Sequence[Any]) -> dict[str, Any]:
        ns, key, value, created, updated = row[:5]
        return {
            "namespace": ns_of(ns),
            "key": key,
            "value": json.loads(value),
            "created_at": datetime.fromisoformat(created),
            "updated_at": datetime.fromisoformat(updated),
        }

    def _search_item(self, row: Sequence[Any], score: float | None = None) -> SearchItem:
        return SearchItem(**self._fields(row), score=score)

    def _refresh(self, keys: Sequence[tuple[str, str]]) -> None:
        """Restart the TTL of these items (``(ns, key)`` as stored) from now.

        The facts of an item whose new expiry passes theirs get an expiry half a TTL ahead.
        """
        if not keys:
            return
        clock = _now()
        with self._conn:
            self._conn.executemany(
                "UPDATE items SET expires_at = ? + ttl * 60 "
                "WHERE ns = ? AND key = ? AND ttl IS NOT NULL",
                [(clock, ns, key) for ns, key in keys],
            )
            behind = []
            for ns, key in keys:
                row = self._conn.execute(
                    "SELECT source_id, expires_at, ttl FROM items WHERE ns = ? AND key = ? "
                    "AND ttl IS NOT NULL AND source_id IS NOT NULL "
                    "AND core_expires_at IS NOT NULL AND core_expires_at < expires_at",
                    (ns, key),
                ).fetchone()
                if row is not None:
                    behind.append((ns, key, row[0], row[1] + row[2] * 60 * REFRESH_SLACK))
            self._conn.executemany(
                "UPDATE items SET core_expires_at = ? WHERE ns = ? AND key = ?",
                [(ahead, ns, key) for ns, key, _, ahead in behind],
            )
        for ns, _, source_id, ahead in behind:
            self._move_expiry(self._scope_for(ns_of(ns)), [source_id], ahead)

    def _move_expiry(self, scope: Scope, source_ids: Sequence[str], clock: float) -> None:
        """Move the expiry of these item texts' messages and facts in the memory."""
        if source_ids:
            self.memory.extend_expiry(_moment(clock), message_ids=list(source_ids), scope=scope)

    def _get(self, op: GetOp) -> Item | None:
        row = self._conn.execute(
            "SELECT ns, key, value, created_at, updated_at FROM items "
            f"WHERE ns = ? AND key = ? AND {LIVE}",
            (ns_text(tuple(op.namespace)), str(op.key), _now()),
        ).fetchone()
        if row is None:
            return None
        if op.refresh_ttl:
            self._refresh([(row[0], row[1])])
        return Item(**self._fields(row))

    def _scan(self, op: SearchOp) -> list[SearchItem]:
        where, params = prefix_sql(tuple(op.namespace_prefix), "i.ns")
        sql = (
            "SELECT i.ns, i.key, i.value, i.created_at, i.updated_at FROM items i "
            f"JOIN namespaces n ON n.ns = i.ns WHERE {where} AND {LIVE_I} ORDER BY n.seq, i.id"
        )
        params.append(_now())
        paged = not op.filter and min(op.offset, op.limit) >= 0
        if paged:
            sql += " LIMIT ? OFFSET ?"
            params += [op.limit, op.offset]
        rows = self._conn.execute(sql, params).fetchall()
        if not paged:
            stop = op.offset + op.limit if min(op.offset, op.limit) >= 0 else None
            kept: list[Any] = []
            for row in rows:
                if matches(json.loads(row[2]), op.filter):
                    kept.append(row)
                    if len(kept) == stop:
                        break
            rows = window(kept, op.offset, op.limit)
        if op.refresh_ttl:
            self._refresh([(row[0], row[1]) for row in rows])
        return [self._search_item(row) for row in rows]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [
            ns_of(ns)
            for (ns,) in self._conn.execute(
                f"SELECT DISTINCT ns FROM items WHERE {LIVE}", (_now(),)
            )
        ]
        if op.match_conditions:
            found = [ns for ns in found if all(does_match(c, ns) for c in op.match_conditions)]
        if op.max_depth is not None:
            found = sorted({ns[: op.max_depth] for ns in found})
        else:
            found = sorted(found)
        return window(found, op.offset, op.limit)

    def _query(self, op: SearchOp) -> list[SearchItem]:
        """Query search: items ranked by their similarity to the query (see module)."""
        assert op.query is not None
        similar = self.index_config is not None or isinstance(op, SimilaritySearch)
        found = self._similar(op) if self._dense is not None and similar else self._hybrid(op)
        if op.refresh_ttl and found:
            with self._lock:
                self._refresh([(ns_text(item.namespace), item.key) for item in found])
        return found

    def _similar(self, op: SearchOp) -> list[SearchItem]:
        """Every live item under the prefix that passes the filter, by cosine similarity.

        An item's score is the largest cosine of the query's vector and its embedded fields'
        (one vector per indexed field, or per element of a list field), as LangGraph's stores
        compute it; items without a vector (``index=False``, no text) follow the scored ones
        when the page has room, without a score.
        """
        assert op.query is not None and self._dense is not None
        query = np.asarray(self._dense.embed_query(op.query), dtype=np.float64)
        where, params = prefix_sql(tuple(op.namespace_prefix), "i.ns")
        with self._lock:
            rows = self._conn.execute(
                "SELECT i.ns, i.key, i.value, i.created_at, i.updated_at, i.vectors FROM items i "
                f"JOIN namespaces n ON n.ns = i.ns WHERE {where} AND {LIVE_I} "
                "ORDER BY n.seq, i.id",
                [*params, _now()],
            ).fetchall()
        scored: list[tuple[float, Sequence[Any]]] = []
        scoreless: list[Sequence[Any]] = []
        for row in rows:
            if not matches(json.loads(row[2]), op.filter):
                continue
            vectors = json.loads(row[5]) if row[5] else None
            if vectors:
                scored.append((_best_cosine(query, list(vectors.values())), row))
            else:
                scoreless.append(row)
        scored.sort(key=lambda pair: -pair[0])  # stable: ties keep the sidecar's order
        kept: list[tuple[float | None, Sequence[Any]]] = list(window(scored, op.offset, op.limit))
        if scoreless and len(kept) < op.limit:
            kept.extend((None, row) for row in scoreless[: op.limit - len(kept)])
        return [self._search_item(row, score) for score, row in kept]

    def _hybrid(self, op: SearchOp) -> list[SearchItem]:
        """Hybrid search: MemBrain's evidence and fact rankings fused per item (see module).

        Each item's score is its similarity to the query: the largest cosine of the query's
        vector and its embedded fields' (see :meth:`_similar`); over a served memory, whose
        encoder this process cannot run, the dense evidence path's cosine of the query and the
        item's text (``None`` when that path did not find it).
        """
        assert op.query is not None
        prefix = tuple(op.namespace_prefix)
        where, params = prefix_sql(prefix)
        item_where, item_params = prefix_sql(prefix, "i.ns")
        with self._lock:
            namespaces = [
                ns_of(ns)
                for (ns,) in self._conn.execute(
                    f"SELECT DISTINCT ns FROM items WHERE {where} AND source_id IS NOT NULL "
                    f"AND {LIVE}",
                    [*params, _now()],
                ).fetchall()
            ]
        tenants = dict.fromkeys(self._scope_for(ns).without_session() for ns in namespaces)
        k = max(self._candidates, op.offset + op.limit, 1)
        # one ranking per path, merged across tenants by score: BM25 and cosine scores compare
        # across tenants (one collection); fact scores are MemBrain's rank-based fusion
        paths: dict[str, list[tuple[float, int, int, str]]] = {
            "sparse": [],
            "dense": [],
            "facts": [],
        }
        run = _graph_run()  # the thread a graph's search serves, for the recall trace
        for number, tenant in enumerate(tenants):
            for path in ("sparse", "dense"):
                evidence = self.memory.search_messages(op.query, scope=tenant, k=k, paths=(path,))
                paths[path].extend(
                    (-hit.score, rank, number, hit.message.source_id)
                    for rank, hit in enumerate(evidence)
                    if hit.message.source_id
                )
            facts = self.memory.search(op.query, scope=tenant, mode=self._mode, k=k, **run)
            paths["facts"].extend(
                (-hit.score, rank, number, source.source_id)
                for rank, hit in enumerate(facts)
                for source in hit.sources
                if source.source_id
            )
        rankings = {name: sorted(entries) for name, entries in paths.items()}
        wanted = list(dict.fromkeys(e[3] for ranking in rankings.values() for e in ranking))
        rows: dict[str, Sequence[Any]] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for row in self._conn.execute(
                    "SELECT i.ns, i.key, i.value, i.created_at, i.updated_at, i.source_id, "
                    f"n.seq, i.id, i.vectors FROM items i JOIN namespaces n ON n.ns = i.ns "
                    f"WHERE i.source_id IN ({marks}) AND {item_where} AND {LIVE_I}",
                    [*chunk, *item_params, _now()],
                ):
                    rows[row[5]] = row
        # the rankings of source ids become rankings of current items (first mention counts)
        found: dict[str, Sequence[Any]] = {}
        items: dict[str, list[Ranked]] = {}
        for name, ranking in rankings.items():
            seen: set[str] = set()
            ranked: list[Ranked] = []
            for neg_score, _, _, source_id in ranking:
                row = rows.get(source_id)
                if row is None:
                    continue
                item_id = f"{row[0]}\x00{row[1]}"  # namespace labels hold no NUL
                if item_id in seen:
                    continue
                seen.add(item_id)
                found[item_id] = row
                ranked.append(Ranked(item_id, -neg_score))
            items[name] = ranked
        similarity: dict[str, float | None] = {r.id: r.score for r in items["dense"]}
        if self._dense is not None:
            query = np.asarray(self._dense.embed_query(op.query), dtype=np.float64)
            for item_id, row in found.items():
                vectors = json.loads(row[8]) if row[8] else None
                similarity[item_id] = (
                    _best_cosine(query, list(vectors.values())) if vectors else None
                )
        fused = rrf(items, {}, RRF_K)
        # ties keep the sidecar's order (namespace creation, then insertion), as scans do
        ordered = sorted(fused, key=lambda f: (-f.score, found[f.id][6], found[f.id][7]))
        kept = [f for f in ordered if matches(json.loads(found[f.id][2]), op.filter)]
        return [
            self._search_item(found[f.id], similarity.get(f.id))
            for f in window(kept, op.offset, op.limit)
        ]

    # -- writes ------------------------------------------------------------------------------
    def _text(self, value: Mapping[str, Any], index: Sequence[str] | None) -> str:
        """The item's text for MemBrain: the indexed fields' strings, one per line."""
        paths = tokenized(index) if index is not None else self._index_fields
        texts: list[Any] = []
        for path, tokens in paths or [("$", ["$"])]:
            if path == "$":
                texts.extend(strings({k: v for k, v in value.items() if k != "user_name"}))
            else:
                texts.extend(get_text_at_path(value, tokens))
        return "\n".join(t.strip() for t in texts if isinstance(t, str) and t.strip())

    def _speaker(self, namespace: tuple[str, ...], value: Mapping[str, Any]) -> str:
        """The user's display name for an item: its ``user_name``, else the store's."""
        name = value.get("user_name")
        if not isinstance(name, str) or not name.strip():
            configured = self._user_name
            name = configured(namespace) if callable(configured) else configured
        if not isinstance(name, str) or not name.strip():
            return DEFAULT_USER_NAME
        return name.strip()

    def _vectors(
        self, values: Sequence[Mapping[str, Any]], indexes: Sequence[Any] | None
    ) -> list[str | None]:
        """Each value's embedded fields, JSON ``{path: vector}`` (``None``: nothing to embed).

        The fields are the put's ``index`` paths, else the store's (``"$"``: the whole value as
        JSON), a list field giving one vector per element (``path.i``), as LangGraph's stores
        embed them; all in one call to the memory's dense encoder.
        """
        if self._dense is None:
            return [None] * len(values)
        wanted: list[tuple[int, str, str]] = []
        for n, value in enumerate(values):
            index = indexes[n] if indexes is not None else None
            if index is False:
                continue
            for path in index if index is not None else self._vector_fields:
                texts = get_text_at_path(value, path)
                if len(texts) == 1:
                    wanted.append((n, path, texts[0]))
                else:
                    wanted.extend((n, f"{path}.{i}", t) for i, t in enumerate(texts))
        embedded = self._dense.embed_documents([text for _, _, text in wanted]) if wanted else []
        found: list[dict[str, list[float]]] = [{} for _ in values]
        for (n, path, _), vector in zip(wanted, embedded, strict=True):
            found[n][path] = [float(x) for x in vector]
        return [json.dumps(f) if f else None for f in found]

    def _apply(self, puts: Mapping[tuple[tuple[str, ...], str], PutOp], actor: Actor) -> None:
        rows: list[tuple[str, str, str | None, str | None, str | None, float | None]] = []
        messages: dict[Scope, list[Message]] = {}
        expiring: dict[tuple[Scope, float | None], list[Message]] = {}
        clock = _now()
        previous = self._sources(puts)
        stored_puts = [op for op in puts.values() if op.value is not None]
        vectors = dict(
            zip(
                [id(op) for op in stored_puts],
                self._vectors(
                    [op.value for op in stored_puts if op.value is not None],
                    [op.index for op in stored_puts],
                ),
                strict=True,
            )
        )
        for (namespace, key), op in puts.items():
            if op.value is None:
                rows.append((ns_text(namespace), key, None, None, None, None))
                continue
            value_json = check_value(op.value)
            text = "" if op.index is False else self._text(op.value, op.index)
            source_id: str | None = None
            if text:
                speaker = self._speaker(namespace, op.value)
                digest = hashlib.blake2b(
                    json.dumps([list(namespace), key, text, speaker]).encode(), digest_size=16
                ).hexdigest()
                source_id = f"lgstore-{digest}"
                said = Message(
                    speaker=speaker,
                    text=text,
                    timestamp=CLOCK.next(),
                    role=Role.USER,
                    source_id=source_id,
                )
                messages.setdefault(self._scope_for(namespace), []).append(said)
                ends = None if op.ttl is None else clock + op.ttl * 60
                expiring.setdefault((self._scope_for(namespace), ends), []).append(said)
            rows.append((ns_text(namespace), key, value_json, source_id, vectors[id(op)], op.ttl))
        # MemBrain first: a crash in between leaves an unreferenced message, never an item
        # whose text is missing from the index.
        # The text expires with the item: a text stored already (the same value put again) has
        # its expiry moved.
        for (scope, ends), batch in expiring.items():
            added = self.memory.add(
                batch,
                scope=scope,
                extract=False,
                by=actor_for(self.memory, actor),
                expires_at=None if ends is None else _moment(ends),
            )
            if added.messages_skipped and ends is not None:
                self._move_expiry(scope, [m.source_id or "" for m in batch], ends)
        now = datetime.now(UTC).isoformat()
        with self._lock, self._conn:
            for ns, key, stored, ref, embedded, ttl in rows:
                if stored is None:
                    self._conn.execute("DELETE FROM items WHERE ns = ? AND key = ?", (ns, key))
                    continue
                self._conn.execute(
                    "INSERT OR IGNORE INTO namespaces (ns, seq) "
                    "VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM namespaces))",
                    (ns,),
                )
                self._conn.execute(
                    "INSERT INTO items (ns, key, value, created_at, updated_at, source_id, "
                    "vectors, ttl, expires_at, core_expires_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, "
                    "updated_at = excluded.updated_at, source_id = excluded.source_id, "
                    "vectors = excluded.vectors, ttl = excluded.ttl, "
                    "expires_at = excluded.expires_at, core_expires_at = excluded.core_expires_at, "
                    # an expired item put again is a new item
                    "created_at = CASE WHEN items.expires_at IS NOT NULL "
                    "AND items.expires_at <= ? THEN excluded.created_at ELSE items.created_at END",
                    (
                        ns,
                        key,
                        stored,
                        now,
                        now,
                        ref,
                        embedded,
                        ttl,
                        None if ttl is None else clock + ttl * 60,
                        None if ttl is None else clock + ttl * 60,
                        clock,
                    ),
                )
        retired: dict[Scope, list[str]] = {}
        for (namespace, key), old in previous.items():
            if old not in {r[3] for r in rows if (r[0], r[1]) == (ns_text(namespace), key)}:
                retired.setdefault(self._scope_for(namespace), []).append(old)
        self._retire(retired, actor)
        if self._extract:
            for scope, batch in messages.items():
                schedule_extraction(self.memory, scope, batch, self._writer)

    def _sources(
        self, puts: Mapping[tuple[tuple[str, ...], str], PutOp]
    ) -> dict[tuple[tuple[str, ...], str], str]:
        """The message ids of the items these puts overwrite or delete."""
        found: dict[tuple[tuple[str, ...], str], str] = {}
        with self._lock:
            for namespace, key in puts:
                row = self._conn.execute(
                    "SELECT source_id FROM items WHERE ns = ? AND key = ?",
                    (ns_text(namespace), key),
                ).fetchone()
                if row is not None and row[0]:
                    found[(namespace, key)] = row[0]
        return found

    def _retire(
        self,
        retired: Mapping[Scope, list[str]],
        actor: Actor,
        reason: str = "the store item was overwritten or deleted",
    ) -> None:
        """Forget the facts of overwritten or deleted items' previous values (audited).

        A previous value still waiting for extraction is extracted first, so its facts never
        arrive after the item changed.
        """
        for scope, source_ids in retired.items():
            stored = self.memory.messages(scope=scope, ids=source_ids)
            if any(m.status is MessageStatus.PENDING for m in stored):
                self.memory.extract_pending(scope=scope)
            facts = self.memory.facts(scope=scope, derived_from=source_ids)
            if facts:
                self.memory.forget(
                    [f.id for f in facts],
                    scope=scope,
                    by=actor_for(self.memory, actor),
                    reason=reason,
                )

    # -- TTL ---------------------------------------------------------------------------------
    def sweep_ttl(self) -> int:
        """Delete the items whose TTL ran out; the number deleted.

        Expired items are invisible to every read at once, and so are the facts extracted from
        their text (they expire with the item in the memory); sweeping removes the items and
        runs the memory's sweep for their scopes (the facts are marked ``expired``, audited).
        """
        clock = _now()
        with self._lock, self._conn:
            expired = self._conn.execute(
                "SELECT id, ns, source_id, expires_at, core_expires_at FROM items "
                "WHERE expires_at IS NOT NULL AND expires_at <= ?",
                (clock,),
            ).fetchall()
            self._conn.executemany("DELETE FROM items WHERE id = ?", [(r[0],) for r in expired])
        retired: dict[Scope, list[str]] = {}
        swept: set[Scope] = set()
        for _, ns, source_id, ends, core_ends in expired:
            scope = self._scope_for(ns_of(ns))
            if not source_id:
                continue
            if core_ends is None:  # put before the memory kept expiries
                retired.setdefault(scope, []).append(source_id)
                continue
            if core_ends > ends:  # moved ahead by a refresh: back to the item's own
                self._move_expiry(scope, [source_id], ends)
            swept.add(scope)
        if retired:
            self._retire(retired, self._actor, EXPIRED_REASON)
        for scope in swept:
            self.memory.expire(scope=scope, at=_moment(clock))
        return len(expired)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> SweeperFuture:
        """Sweep expired items every ``sweep_interval_minutes`` in a daemon thread.

        Default: the ``ttl`` config's ``sweep_interval_minutes``, else 5. The future completes
        when :meth:`stop_ttl_sweeper` stops the thread. Like LangGraph's async stores, an async
        caller may ``await store.start_ttl_sweeper()``: that starts it and gives the future.
        """
        config = self.ttl_config or {}
        return self._sweeper.start(sweep_interval_minutes or config.get("sweep_interval_minutes"))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it stopped within ``timeout`` seconds."""
        return self._sweeper.stop(timeout)


def _graph_run() -> dict[str, Any]:
    """The ``run`` of a search made inside a LangGraph node (nothing outside one)."""
    try:
        config = get_config()
    except RuntimeError:
        return {}
    return run_of(config)
