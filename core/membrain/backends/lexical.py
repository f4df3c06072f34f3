"""The lexical index of the ``boolean`` path: facts in a tantivy index, for structured BM25 queries.

The index is derived: Qdrant holds the facts, and :meth:`LexicalIndex.rebuild` restores a scope
from them. Each fact is one document:

======== ========================================================================================
field    content
======== ========================================================================================
id       the fact id (raw, stored)
tenant   ``scope.key`` (raw); session: the fact's session, ``""`` when none (raw)
text     the readable text (``plain_text``), English stemming, positions for phrase queries
entities the entity refs as written, lowercased words with positions
year     ``"2023"`` for every year the fact's times cover (``month``: ``"2023-05"``, ``day``:
         ``"2023-05-07"``; see :func:`time_keys` for how long spans are capped)
status   ``active`` / ``superseded`` / ``forgotten`` (raw); layer: ``dialogue`` ... (raw)
======== ========================================================================================

Besides its facts, a tenant has one *mark* document (status ``mark``): the record time up to
which the index is known to hold every change of the record store (:meth:`LexicalIndex.mark`).
It is written in the same commit as the documents it vouches for, so a crash cannot leave the
mark ahead of them; whoever reconciles the index reads the facts revised since the mark.

A query is tantivy syntax over ``text``, ``entities``, ``year``, ``month``, ``day`` (and
``layer``); every search is a conjunction of it with the scope (tenant, and session when the
scope has one) and ``status:active``, so no query text reaches another tenant.

One long-lived writer per index, guarded by a lock: each :meth:`LexicalIndex.add` commits once
at its end (and every ``batch_size`` documents within it), then reloads the reader so the next
search sees the change. tantivy allows one writer per directory: one owner per path.

A deleted document is only marked deleted: its terms stay in its segment's files until a merge
rewrites the segment. :meth:`LexicalIndex.erase` drops every document and deletes those files.

Being derived, the index never keeps the store from opening or writing: when tantivy cannot open
the folder, or fails to commit or reload it (a process killed mid-commit leaves files tantivy
refuses to write again), the folder's files are deleted and an empty index takes its place, with
a ``RuntimeWarning``. It has no marks, so every tenant is rebuilt from the record store when it
is next reconciled.
"""

from __future__ import annotations

import functools
import re
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import tantivy

from membrain.api.entity_refs import entity_refs
from membrain.api.errors import BackendError, InputError, MembrainError, ScopeError, StoreInUseError
from membrain.api.listeners import RecordListener
from membrain.api.models import Fact, FactStatus, Scope
from membrain.backends.lexical_query import (
    DEFAULT_FIELDS,
    FIELD_BOOSTS,
    QUERY_FIELDS,
    normalize_query,
    query_problems,
)
from membrain.backends.lexical_terms import TimeKeys, fact_keys, time_keys
from membrain.temporal import plain_text

__all__ = [
    "DEFAULT_FIELDS",
    "FIELD_BOOSTS",
    "QUERY_FIELDS",
    "LexicalIndex",
    "TimeKeys",
    "normalize_query",
    "time_keys",
    "validate_query",
]


_HEAP_BYTES = 50_000_000  # tantivy needs at least 15 MB per indexing thread
_TANTIVY_FILE = re.compile(
    r"^(?:[0-9a-f]{32}(?:\.\d+)?\.\w+|meta\.json|\.managed\.json|\.tantivy-.+\.lock|\.tmp\w+)$"
)
"""Files tantivy writes: segment components (deletes carry an opstamp), metadata, locks, and the
temporary files of an atomic write."""
_MARK_ID = "~mark"
_MARK_STATUS = "mark"


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("revision", stored=True, tokenizer_name="raw", index_option="basic")
    for name in ("tenant", "session", "status", "layer", "year", "month", "day"):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("text", tokenizer_name="en_stem", index_option="position")
    builder.add_text_field("entities", tokenizer_name="default", index_option="position")
    return builder.build()


def _document(scope: Scope, fact: Fact) -> tantivy.Document:
    if fact.scope.key != scope.key:
        raise ScopeError(f"fact {fact.id} belongs to {fact.scope.key!r}, not {scope.key!r}")
    if scope.session is not None and fact.scope.session != scope.session:
        raise ScopeError(f"fact {fact.id} is not of session {scope.session!r}")
    keys = fact_keys(fact)
    return tantivy.Document(
        id=fact.id,
        tenant=scope.key,
        session=fact.scope.session or "",
        text=plain_text(fact.text),
        entities=list(fact.entities or entity_refs(fact.text)),
        year=list(keys.years),
        month=list(keys.months),
        day=list(keys.days),
        status=fact.status.value,
        layer=fact.layer.value,
    )


def _drop_files(path: Path) -> None:
    for child in path.iterdir():
        if child.is_file() and _TANTIVY_FILE.match(child.name):
            child.unlink()


@functools.cache
def _validator() -> tantivy.Index:
    return tantivy.Index(_schema())


def validate_query(query: str) -> list[str]:
    """What is wrong with a query (syntax errors, unknown or reserved fields); empty when valid.

    Example:
        >>> validate_query('entities:Sara AND month:2023-05')
        []
        >>> validate_query('colour:red')
        ["Field does not exist: 'colour'"]
    """
    return query_problems(_validator(), query)


@contextmanager
def _engine(action: str) -> Iterator[None]:
    try:
        yield
    except MembrainError:
        raise
    except Exception as exc:
        raise BackendError(f"tantivy failed to {action}: {exc}") from exc


class LexicalIndex(RecordListener):
    """A tantivy index of facts, scoped on every call (see the module docstring).

    Args:
        path: Directory of the index (created if missing); ``None`` keeps it in memory.
        batch_size: Documents after which an ``add`` commits before going on.

    Attributes:
        created: The index was created empty by this open (new directory, or an index of an
            older schema that was discarded, or a damaged one): rebuild it from the source of
            truth.

    Raises:
        BackendError: The directory cannot be opened, or another writer holds it.
    """

    def __init__(self, path: Path | None = None, *, batch_size: int = 10_000) -> None:
        self.path = path
        self._batch_size = max(1, batch_size)
        self._lock = threading.RLock()
        self._schema = _schema()
        self.created = True
        self._marked: set[str] = set()
        """Tenants whose mark this object set (by a reconciliation)."""
        self._unsure: set[str] = set()
        """Tenants a write of which failed here since they were last rebuilt."""
        self._writer: tantivy.IndexWriter | None = None
        with _engine(f"open the lexical index at {path}"):
            if path is not None:
                path.mkdir(parents=True, exist_ok=True)
            self._index = self._open()
            self._index.config_reader("manual")
            try:
                self._writer = self._take_writer()
            except StoreInUseError:
                raise
            except Exception as exc:
                self._reset(exc)

    def _take_writer(self) -> tantivy.IndexWriter:
        try:
            return self._index.writer(_HEAP_BYTES, 1)
        except ValueError as exc:
            if "LockBusy" not in str(exc):
                raise
            raise StoreInUseError(
                f"the lexical index at {self.path} is open for writing in another process; "
                "one process owns a store's folder"
            ) from exc

    def _open(self) -> tantivy.Index:
        path = self.path
        if path is None or not tantivy.Index.exists(str(path)):
            return self._fresh()
        try:
            index = tantivy.Index(self._schema, path=str(path), reuse=True)
            index.searcher()  # reads every segment's files: damage shows here, not mid-search
        except Exception as exc:
            # A derived index of another schema is dropped quietly; a damaged one with a warning.
            if "schema does not match" not in str(exc):
                self._warn(exc)
            return self._fresh()
        self.created = False
        return index

    def _fresh(self) -> tantivy.Index:
        """A new empty index, in place of whatever tantivy files the folder holds."""
        if self.path is None:
            return tantivy.Index(self._schema)
        _drop_files(self.path)
        return tantivy.Index(self._schema, path=str(self.path))

    def _warn(self, exc: Exception) -> None:
        warnings.warn(
            f"the lexical index at {self.path or 'memory'} is damaged ({str(exc)[:160]}); it is "
            "rebuilt from the record store as scopes are searched",
            RuntimeWarning,
            stacklevel=4,
        )

    def _reset(self, exc: Exception) -> None:
        """Replace a damaged index by an empty one; every tenant is rebuilt when reconciled.

        Its files are deleted, not moved aside: what they hold may be erased content.

        Raises:
            BackendError: even an empty index cannot be written there.
        """
        with self._lock:
            self._warn(exc)
            writer, self._writer = self._writer, None
            if writer is not None:
                with suppress(Exception):
                    writer.rollback()
                with suppress(Exception):
                    writer.wait_merging_threads()  # ends the writer, and its lock with it
                del writer
            self._marked.clear()
            self._unsure.clear()
            self.created = True
            with _engine(f"create the lexical index at {self.path}"):
                self._index = self._fresh()
                self._index.config_reader("manual")
                self._writer = self._take_writer()

    def __enter__(self) -> LexicalIndex:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _live_writer(self) -> tantivy.IndexWriter:
        if self._writer is None:
            raise BackendError("the lexical index is closed")
        return self._writer

    def _commit(self) -> None:
        writer = self._live_writer()
        try:
            writer.commit()
            self._index.reload()
        except Exception as exc:
            raise _CommitFailed(str(exc)) from exc

    # -- writes ------------------------------------------------------------------------------
    def add(self, scope: Scope, facts: Sequence[Fact]) -> None:
        """Index facts of ``scope``, replacing earlier versions of the same ids.

        Raises:
            ScopeError: A fact belongs to another tenant or session.
            BackendError: tantivy failed.
        """
        self._write(scope, facts, drop_scope=False)

    def facts_written(self, scope: Scope, facts: Sequence[Fact]) -> None:
        """Index facts the record store wrote or changed (see :meth:`add`)."""
        self.add(scope, facts)

    def facts_unsure(self, scope: Scope) -> None:
        """A fact write failed midway: the tenant is rebuilt when next reconciled."""
        with self._lock:
            self._unsure.add(scope.without_session().key)

    def unsure(self, scope: Scope) -> bool:
        """Whether a write of the tenant failed here since it was last rebuilt.

        Then rebuild it: its mark may vouch for a change this index never heard of.
        """
        return scope.without_session().key in self._unsure

    def scope_deleted(self, scope: Scope) -> None:
        """Drop the documents of a deleted scope (see :meth:`delete_scope`)."""
        self.delete_scope(scope)

    def rebuild(self, scope: Scope, facts: Iterable[Fact], *, mark: datetime | None = None) -> None:
        """Drop the scope's documents (one session's, when the scope has one), index ``facts``.

        With ``mark``, the tenant's mark becomes it in the same commit (see :meth:`mark`).
        """
        self._write(scope, facts, drop_scope=True, mark=mark)

    def catch_up(self, scope: Scope, facts: Iterable[Fact], *, mark: datetime) -> None:
        """Index ``facts`` (the ones revised since :meth:`mark`) and move the mark to ``mark``.

        Both land in one commit: the mark never vouches for documents not written.
        """
        self._write(scope, facts, drop_scope=False, mark=mark)

    def in_step(self, scope: Scope) -> bool:
        """Whether this object set the tenant's mark and every write of it since succeeded.

        Then, in a process that owns the store (every change reaches this index as a listener),
        the documents match the store and a reconciliation need read nothing.
        """
        tenant = scope.without_session().key
        return tenant in self._marked and tenant not in self._unsure

    def mark(self, scope: Scope) -> datetime | None:
        """The record time up to which the tenant's documents match the store (``None``: never).

        Facts revised after it may be missing or stale here; older ones are indexed as stored.
        """
        with self._lock:
            self._live_writer()
            try:
                searcher = self._index.searcher()
                query = tantivy.Query.boolean_query(
                    [
                        (tantivy.Occur.Must, self._term("tenant", scope.key)),
                        (tantivy.Occur.Must, self._term("status", _MARK_STATUS)),
                    ]
                )
                hits = searcher.search(query, 1).hits
                value = searcher.doc(hits[0][1]).get_first("revision") if hits else None
            except Exception as exc:
                self._reset(exc)  # unreadable: empty now, so the tenant is rebuilt
                return None
            return datetime.fromisoformat(str(value)) if value else None

    def delete_scope(self, scope: Scope) -> None:
        """Drop the scope's documents (one session's, when the scope has one)."""
        self._write(scope, (), drop_scope=True)

    def erased(self) -> None:
        """The record store erased purged records from disk: erase this index too (see below)."""
        self.erase()

    def erase(self) -> None:
        """Drop every document (marks included), and delete every file that held one.

        Deleting documents leaves their terms in the segment files; this removes the segments
        themselves, so nothing of a purged fact stays in the directory. The owners rebuild
        their scopes from the record store as they use them again.

        Raises:
            BackendError: tantivy failed.
        """
        with self._lock:
            self._marked.clear()  # every mark goes too: each tenant is rebuilt when next read
            try:
                writer = self._live_writer()
                writer.delete_all_documents()
                writer.commit()
                self._writer = None
                writer.wait_merging_threads()  # ends the writer: no merge still reads old segments
                self._index.reload()  # the reader lets go of the old segments' files
                self._writer = self._index.writer(_HEAP_BYTES, 1)
                self._writer.garbage_collect_files()
            except MembrainError:
                raise
            except Exception as exc:
                self._reset(exc)  # deletes every file: the erasure is done all the same

    def _write(
        self,
        scope: Scope,
        facts: Iterable[Fact],
        *,
        drop_scope: bool,
        mark: datetime | None = None,
    ) -> None:
        tenant = scope.without_session().key
        with self._lock, _engine(f"index facts of {scope.key!r}"):
            writer = self._live_writer()
            try:
                pending = self._stage(writer, scope, facts, drop_scope=drop_scope)
                if mark is not None:
                    self._stage_mark(writer, scope, mark)
                    pending += 1
                if pending:
                    self._commit()
            except _CommitFailed as failed:
                # The folder is damaged (a commit killed midway leaves files tantivy will not
                # write again): an empty index replaces it, and the tenants are rebuilt.
                self._reset(failed)
                return
            except BaseException:
                self._unsure.add(tenant)
                writer.rollback()  # nothing half-written reaches a later commit
                raise
            if mark is not None:
                self._marked.add(tenant)
                if drop_scope and scope.session is None:
                    self._unsure.discard(tenant)

    def _stage_mark(self, writer: tantivy.IndexWriter, scope: Scope, mark: datetime) -> None:
        writer.delete_documents_by_query(
            tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, self._term("tenant", scope.key)),
                    (tantivy.Occur.Must, self._term("status", _MARK_STATUS)),
                ]
            )
        )
        writer.add_document(
            tantivy.Document(
                id=_MARK_ID,
                tenant=scope.key,
                session="",
                status=_MARK_STATUS,
                revision=mark.isoformat(),
            )
        )

    def _stage(
        self, writer: tantivy.IndexWriter, scope: Scope, facts: Iterable[Fact], *, drop_scope: bool
    ) -> int:
        """Queue the changes (committing every ``batch_size``); how many are left uncommitted."""
        pending = 0
        if drop_scope:
            writer.delete_documents_by_query(self._scope_query(scope, active_only=False))
            pending += 1
        for fact in facts:
            document = _document(scope, fact)
            same = [self._term("id", fact.id), self._term("tenant", scope.key)]
            writer.delete_documents_by_query(
                tantivy.Query.boolean_query([(tantivy.Occur.Must, q) for q in same])
            )
            writer.add_document(document)
            pending += 1
            if pending >= self._batch_size:
                self._commit()
                pending = 0
        return pending

    # -- reads -------------------------------------------------------------------------------
    def _term(self, field: str, value: str) -> tantivy.Query:
        return tantivy.Query.term_query(self._schema, field, value)

    def _scope_query(
        self, scope: Scope, *, active_only: bool, facts_only: bool = False
    ) -> tantivy.Query:
        terms = [self._term("tenant", scope.key)]
        if scope.session is not None:
            terms.append(self._term("session", scope.session))
        if active_only:
            terms.append(self._term("status", FactStatus.ACTIVE.value))
        clauses = [(tantivy.Occur.Must, tantivy.Query.const_score_query(t, 0.0)) for t in terms]
        if facts_only:
            clauses.append((tantivy.Occur.MustNot, self._term("status", _MARK_STATUS)))
        return tantivy.Query.boolean_query(clauses)

    def validate(self, query: str) -> list[str]:
        """Problems of a query (see :func:`validate_query`); empty when it is valid."""
        return query_problems(self._index, query)

    def search(
        self, scope: Scope, query: str, *, limit: int, lenient: bool = True
    ) -> list[tuple[str, float]]:
        """Ids of active facts of ``scope`` matching a tantivy query, with their BM25 scores.

        Args:
            scope: Where to search; always enforced, whatever the query says.
            query: tantivy syntax over text, entities, year, month, day (words without a field
                search text and entities; entities count double).
            limit: How many ids to return at most.
            lenient: Recover from syntax errors (run what parses); ``False`` rejects them.

        ``NOT x`` is read as ``-x`` (see :func:`normalize_query`).

        Raises:
            InputError: ``lenient`` is false and the query does not parse or names a field it
                may not.
            BackendError: tantivy failed.
        """
        if limit <= 0:
            return []
        query = normalize_query(query)
        if lenient:
            with _engine("parse a query"):
                parsed, _ = self._index.parse_query_lenient(query, DEFAULT_FIELDS, FIELD_BOOSTS)
        else:
            try:
                parsed = self._index.parse_query(query, DEFAULT_FIELDS, FIELD_BOOSTS)
            except ValueError as exc:
                raise InputError(f"invalid lexical query {query!r}: {exc}") from exc
            problems = self.validate(query)
            if problems:
                raise InputError(f"invalid lexical query {query!r}: {'; '.join(problems)}")
        scoped = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, parsed),
                (tantivy.Occur.Must, self._scope_query(scope, active_only=True)),
            ]
        )
        with _engine(f"search {scope.key!r}"):
            self._live_writer()
            searcher = self._index.searcher()
            hits = searcher.search(scoped, limit).hits
            return [
                (str(searcher.doc(address).get_first("id")), float(score))
                for score, address in hits
            ]

    def count(self, scope: Scope) -> int:
        """How many facts of the scope are indexed, whatever their status."""
        with _engine(f"count {scope.key!r}"):
            self._live_writer()
            searcher = self._index.searcher()
            # ``SearchResult.count`` is missing from tantivy's type stubs.
            query = self._scope_query(scope, active_only=False, facts_only=True)
            result: Any = searcher.search(query, 1)
            return int(result.count)

    def holding(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` the index holds a document of, whatever its tenant or status."""
        found = []
        with _engine("look up ids"):
            self._live_writer()
            searcher = self._index.searcher()
            for record_id in dict.fromkeys(ids):
                result: Any = searcher.search(self._term("id", record_id), 1)
                if int(result.count):
                    found.append(record_id)
        return found

    def close(self) -> None:
        """Release the writer (and the directory's lock); later calls raise ``BackendError``."""
        with self._lock:
            writer, self._writer = self._writer, None
            if writer is not None:
                with _engine("close the lexical index"):
                    writer.wait_merging_threads()


class _CommitFailed(Exception):
    """tantivy failed to commit or reload the index."""


_registry_lock = threading.Lock()
_registry: dict[Path, tuple[LexicalIndex, int]] = {}


def open_lexical_index(path: Path | None) -> LexicalIndex:
    """The process-wide index at ``path``, or a new in-RAM index when ``path`` is None.

    tantivy allows one writer per folder. Release the index with :func:`release_lexical_index`.
    """
    if path is None:
        return LexicalIndex(None)
    resolved = path.expanduser().resolve()
    with _registry_lock:
        index, users = _registry.get(resolved, (None, 0))
        if index is None:
            index = LexicalIndex(resolved)
        _registry[resolved] = (index, users + 1)
        return index


def release_lexical_index(index: LexicalIndex) -> None:
    """Give back an index from :func:`open_lexical_index`; the last user closes it."""
    with _registry_lock:
        for path, (shared, users) in list(_registry.items()):
            if shared is index:
                if users > 1:
                    _registry[path] = (shared, users - 1)
                    return
                del _registry[path]
                break
    index.close()
