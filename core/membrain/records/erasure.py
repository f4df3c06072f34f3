"""Erasure receipts in the record store: fingerprinted before, issued after, checked later.

Before an erasure is announced, :func:`fingerprint` reads what it will erase and everything
that stays (every collection of every tenant) and keeps salted hashes of the erased records'
content and of their distinctive terms: the words of the erased content that no staying record
holds (a common word other records still use is not expected to go). The fingerprint travels
in the erasure's pending audit event, so an erasure finished after a crash issues the same
receipt; :func:`receipt_event` writes the receipt into the dataset's erasure log once the
erasure is done (the log outlives the dataset's scopes). :func:`verify` checks a receipt:
no erased id in any collection or derived index, and no fingerprinted term in any file of
the store.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from membrain.api.audit import AuditAction, AuditEvent
from membrain.api.erasure import (
    MAX_TERM_CHARS,
    MIN_TERM_CHARS,
    ErasureCheck,
    ErasureFinding,
    ErasureKind,
    ErasureReceipt,
    salted,
    terms,
)
from membrain.api.errors import InputError, NotFoundError
from membrain.api.scope import STORED, Scope
from membrain.backends.base import Backend, Collection, ScoredPoint, is_point_id
from membrain.backends.lexical import LexicalIndex

__all__ = [
    "FINGERPRINT",
    "LEXICAL",
    "RECEIPT",
    "TREE",
    "fingerprint",
    "receipt_event",
    "receipt_of",
    "receipts",
    "verify",
]

RECEIPT = "receipt"
"""Detail of an erasure's audit events: the receipt's id (and, in the log, the receipt)."""
FINGERPRINT = "fingerprint"
"""Detail of an erasure's first audit event: the receipt to issue, but for its id and actor."""
LEXICAL, TREE = "lexical", "tree"
"""The derived indexes a receipt names besides the collections."""

_CONTENT: dict[Collection, tuple[str, ...]] = {
    Collection.MESSAGES: ("message", "raw_output"),
    Collection.FACTS: ("text", "entities"),
    Collection.ENTITIES: ("name", "aliases", "versions"),
    Collection.PROFILE: ("text",),
    Collection.TREE: ("summary", "names", "terms"),
}
"""The payload fields holding a record's content (ids, statuses and times are no content)."""
_NO_CONTENT = frozenset(("id", "timestamp", "role", "source_id", "recorded_at", "fact_ids"))


def _strings(
    value: object, skip: frozenset[str] = frozenset(), *, keys: bool = False
) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key not in skip:
                if keys:
                    yield str(key)
                yield from _strings(item, skip, keys=keys)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, skip, keys=keys)


def _keys(value: object) -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _keys(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _keys(item)


def content(collection: Collection, payload: Mapping[str, Any]) -> list[str]:
    """The content of a stored record: the texts a receipt fingerprints."""
    fields = _CONTENT.get(collection, ())
    return [s for f in fields for s in _strings(payload.get(f), _NO_CONTENT)]


def _main_text(collection: Collection, payload: Mapping[str, Any]) -> str:
    if collection is Collection.MESSAGES:
        return str((payload.get("message") or {}).get("text", ""))
    return str(payload.get("name" if collection is Collection.ENTITIES else "text", ""))


def _fingerprinted(word: str) -> bool:
    return not word.isdigit() or len(word) >= 6  # a year is in too many files by chance


def _points(backend: Backend, collection: Collection, scope: Scope) -> Iterator[ScoredPoint]:
    offset: str | None = None
    while True:
        page, offset = backend.scroll(collection, scope, offset=offset)
        yield from page
        if offset is None:
            return


Leaving = Callable[[Collection, ScoredPoint], bool]


_BYTES = re.compile(rb"[0-9A-Za-z\x80-\xff]{%d,}" % MIN_TERM_CHARS)
"""Runs of bytes that may hold a word (ASCII letters and digits, UTF-8 sequences)."""
_RUN = re.compile(r"[^\W_]+")
_GLUE = 2
"""A word in a binary file may follow up to this many letters of framing (a CBOR length)."""


def _pieces(text: str) -> Iterator[str]:
    """Every word the file scan may read in ``text`` (:func:`_files_holding`)."""
    for run in _RUN.findall(text.lower()):
        for start in range(min(_GLUE + 1, len(run))):
            for end in range(start + MIN_TERM_CHARS, min(len(run), start + MAX_TERM_CHARS) + 1):
                yield run[start:end]


def _structure(root: Path | None) -> Iterator[str]:
    """The text of the store's own JSON files (configurations: names, never records)."""
    for path in sorted(root.rglob("*.json")) if root is not None else ():
        with suppress(OSError):
            yield path.read_text(encoding="utf-8", errors="replace")


def fingerprint(
    backend: Backend,
    erased: Mapping[Collection, Sequence[ScoredPoint]],
    leaving: Leaving,
    *,
    also: Iterable[str] = (),
    staying: Iterable[str] = (),
) -> dict[str, Any]:
    """The salt and hashes of a receipt, read from the store before anything is erased.

    A distinctive term is a word of the erased content that the file scan could not read
    elsewhere: in no staying record (its values and field names), nor the store's own
    configuration files, even as part of a longer word (``collect`` in ``collector``).

    Args:
        backend: The store.
        erased: The records the erasure deletes, by collection.
        leaving: Whether a stored record goes with the erasure (it is not read as staying).
        also: More erased texts (what revised entities lose).
        staying: More staying texts (what revised entities keep).
    """
    salt = secrets.token_hex(16)
    gone: set[str] = set()
    hashes = []
    for collection, points in erased.items():
        for point in points:
            hashes.append(salted(salt, _main_text(collection, point.payload)))
            gone.update(w for text in content(collection, point.payload) for w in terms(text))
    gone.update(w for text in also for w in terms(text))
    gone = {w for w in gone if _fingerprinted(w)}
    gone.difference_update(w for text in staying for w in _pieces(text))
    root = getattr(backend, "path", None)
    gone.difference_update(w for text in _structure(root) for w in _pieces(text))
    for collection in Collection:
        for tenant in backend.tenants(collection):
            for point in _points(backend, collection, tenant):
                if not gone:
                    break
                if leaving(collection, point):  # its field names stay in the files' format
                    texts = list(_keys(point.payload))
                else:
                    texts = list(_strings(point.payload, keys=True))
                gone.difference_update(w for s in texts for w in _pieces(s))
    return {
        "salt": salt,
        "content_hashes": hashes,
        "term_hashes": sorted(salted(salt, w) for w in gone),
    }


def in_scopes(scopes: Sequence[Scope]) -> Leaving:
    """Whether a record belongs to one of ``scopes`` (all sessions of one without a session)."""

    def leaving(_: Collection, point: ScoredPoint) -> bool:
        tenant, session = point.payload.get("tenant"), point.payload.get("session")
        return any(tenant == s.key and (s.session is None or session == s.session) for s in scopes)

    return leaving


def scopes_of(scopes: Sequence[Scope]) -> list[dict[str, Any]]:
    """Scopes as a receipt names them."""
    return [{"dataset": s.dataset, "task": s.task, "session": s.session} for s in scopes]


def receipt_of(
    receipt_id: str, events: Sequence[Mapping[str, Any]], at: datetime
) -> ErasureReceipt | None:
    """The receipt of a finished erasure, from its audit events' payloads (None before receipts).

    A purge's events each name the records of one kind (``details.record``); a deletion's
    event names scopes, and its fingerprint the records.
    """
    drafts = [e["details"][FINGERPRINT] for e in events if FINGERPRINT in e.get("details", {})]
    if not drafts:
        return None
    draft = dict(drafts[0])
    ids: dict[str, list[str]] = {"fact": [], "message": [], "entity": []}
    for event in events:
        kind = event.get("details", {}).get("record")
        if kind in ids:
            ids[kind].extend(event.get("targets", ()))
    if draft.get("kind") == ErasureKind.PURGE:
        draft |= {"facts": ids["fact"], "messages": ids["message"], "entities": ids["entity"]}
    first = events[0]
    return ErasureReceipt.model_validate(
        {
            **draft,
            "id": receipt_id,
            "erased_at": at,
            "by": first.get("actor") or {"kind": "system"},
            "reason": first.get("reason", ""),
        },
        context=STORED,
    )


def receipt_event(log: Scope, receipt: ErasureReceipt) -> dict[str, Any]:
    """The payload of the erasure log's event holding ``receipt`` (its point id: the receipt's)."""
    event = AuditEvent(
        id=receipt.id,
        scope=log,
        action=AuditAction.ERASURE_RECEIPT,
        targets=tuple(receipt.ids()) or tuple(_scope_ids(receipt)),
        actor=receipt.by,
        reason=receipt.reason,
        at=receipt.erased_at,
        details={RECEIPT: receipt.model_dump(mode="json")},
    )
    return event.model_dump(mode="json", exclude={"scope"})


def _scope_ids(receipt: ErasureReceipt) -> list[str]:
    return [Scope.stored(s.dataset, s.task, s.session).record_id("scope") for s in receipt.scopes]


def receipts(events: Iterable[AuditEvent]) -> list[ErasureReceipt]:
    """The receipts the erasure log's events hold, oldest first."""
    return [
        ErasureReceipt.model_validate(e.details[RECEIPT], context=STORED)
        for e in events
        if e.action is AuditAction.ERASURE_RECEIPT and RECEIPT in e.details
    ]


# -- verification ----------------------------------------------------------------------------
def issued(backend: Backend, log: Scope, receipt: ErasureReceipt) -> ErasureReceipt:
    """The receipt the erasure log holds under ``receipt``'s id, checked equal to it.

    Raises:
        NotFoundError: the dataset's log holds no receipt of that id.
        InputError: it holds one that differs (a forged or altered receipt).
    """
    found = backend.retrieve(Collection.AUDIT, log, [receipt.id]) if is_point_id(receipt.id) else []
    held = found[0].payload.get("details", {}).get(RECEIPT) if found else None
    if held is None:
        raise NotFoundError(f"no erasure receipt {receipt.id} in dataset {receipt.dataset!r}")
    stored = ErasureReceipt.model_validate(held, context=STORED)
    if stored != receipt:
        raise InputError(f"erasure receipt {receipt.id} differs from the one the store issued")
    return stored


def verify(
    backend: Backend,
    receipt: ErasureReceipt,
    *,
    lexical: LexicalIndex | None,
    root: Path | None,
) -> ErasureCheck:
    """Check that nothing ``receipt`` names is left (see :meth:`membrain.Memory.verify_erasure`)."""
    scopes = [Scope.stored(s.dataset, s.task, s.session) for s in receipt.scopes]
    # By id: a scope deleted may hold new records since, which the receipt does not name.
    findings = _left_by_id(backend, scopes, receipt)
    checked = [c.value for c in Collection if c is not Collection.AUDIT]
    if lexical is not None:
        checked.append(LEXICAL)
        left = lexical.holding(receipt.facts)
        findings += [ErasureFinding(where=LEXICAL, record=i) for i in left]
    files, note = 0, ""
    if root is None:
        note = "the store's files are not local (a Qdrant server): only its records were checked"
    else:
        wanted = set(receipt.term_hashes)
        for path, count in _files_holding(root, receipt.salt, wanted):
            files += 1
            if count:
                findings.append(ErasureFinding(where=str(path.relative_to(root)), terms=count))
    return ErasureCheck(
        receipt=receipt.id,
        ok=not findings,
        findings=tuple(findings),
        checked=tuple(checked),
        files_checked=files,
        note=note,
    )


def _left_by_id(
    backend: Backend, scopes: Sequence[Scope], receipt: ErasureReceipt
) -> list[ErasureFinding]:
    found: list[ErasureFinding] = []
    facts = set(receipt.facts)
    entities = set(receipt.entities)
    for scope in scopes:
        whole = scope.without_session()
        named = (
            (Collection.FACTS, whole, receipt.facts),
            (Collection.MESSAGES, whole, receipt.messages),
            (Collection.ENTITIES, whole, receipt.entities),
            (Collection.PROFILE, whole, receipt.profile),
        )
        for collection, where, ids in named:
            for point in backend.retrieve(collection, where, list(ids)):
                found.append(ErasureFinding(where=collection.value, record=point.id))
        for point in _points(backend, Collection.ENTITIES, whole):  # taught by erased facts
            taught = {i for v in point.payload.get("versions") or () for i in v.get("fact_ids", ())}
            found += [ErasureFinding(where="entities (versions)", record=i) for i in taught & facts]
        for point in _points(backend, Collection.PROFILE, whole):
            cited = facts & set(point.payload.get("fact_ids") or ())
            found += [ErasureFinding(where="profile (citations)", record=i) for i in cited]
        for point in _points(backend, Collection.TREE, whole):
            members = entities & set(point.payload.get("members") or ())
            found += [ErasureFinding(where=TREE, record=i) for i in sorted(members)]
    return found


# -- the files -------------------------------------------------------------------------------


def _extents(path: Path, piece: int = 16 << 20) -> Iterator[bytes]:
    """The data of a file in pieces, its holes skipped (Qdrant Edge preallocates files)."""
    with path.open("rb") as f:
        fd, pos, end = f.fileno(), 0, os.fstat(f.fileno()).st_size
        if not hasattr(os, "SEEK_DATA"):
            yield f.read()
            return
        while pos < end:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                return
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            while start < pos:
                size = min(pos - start, piece)
                yield os.pread(fd, size, start)
                start += size


def _files_holding(root: Path, salt: str, wanted: set[str]) -> Iterator[tuple[Path, int]]:
    """Each file under ``root`` with how many of the ``wanted`` term hashes its words match.

    A word is an alphanumeric run, lowercased; as a binary format may glue a word to the
    letters framing it, every run is also read from each of its first :data:`_GLUE` + 1
    characters at each length a term may have.
    """
    known: dict[str, str] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        matched: set[str] = set()
        if wanted:
            tail = b""
            for chunk in _extents(path):
                data = tail + chunk
                tail = data[-4 * MAX_TERM_CHARS :]
                for raw in _BYTES.findall(data):
                    for piece in _pieces(raw.decode("utf-8", "replace")):
                        found = known.get(piece)
                        if found is None:  # each word hashed once per walk
                            digest = salted(salt, piece)
                            found = known[piece] = digest if digest in wanted else ""
                        if found:
                            matched.add(found)
        yield path, len(matched)
