"""Erasure receipts: what a purge or a deletion erased, provable later without its content.

An :class:`ErasureReceipt` names the erased records by id and kind, the scopes, the
collections and indexes they left, who erased them, when and why; and a fingerprint of their
content: salted SHA-256 hashes (:func:`salted`, one random salt per receipt) of each erased
record's content and of its *distinctive terms* (:func:`terms`): the words of the erased
records that no record staying in the store holds. The hashes prove nothing without the
content; with a store, they let :meth:`membrain.Memory.verify_erasure` find a term that is
still in one of its files. The verdict is an :class:`ErasureCheck`, whose findings name ids,
collections and files, never a term.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from membrain.api.checks import UtcDatetime
from membrain.api.models import Actor

__all__ = [
    "MAX_TERM_CHARS",
    "MIN_TERM_CHARS",
    "ErasedScope",
    "ErasureCheck",
    "ErasureFinding",
    "ErasureKind",
    "ErasureReceipt",
    "salted",
    "terms",
]

MIN_TERM_CHARS = 4
"""Shorter words are no fingerprint: they occur by chance in any binary file."""
MAX_TERM_CHARS = 40
"""Longer tokens are dropped, as the lexical index's tokenizer drops them."""
_WORD = re.compile(r"[^\W_]+")


def terms(text: str) -> Iterator[str]:
    """The words of ``text`` as the lexical index splits them: lowercased alphanumeric runs.

    Only words of :data:`MIN_TERM_CHARS` to :data:`MAX_TERM_CHARS` characters are kept.

    Example:
        >>> list(terms("Sara adopted Zorblaxian, a dog."))
        ['sara', 'adopted', 'zorblaxian']
    """
    for word in _WORD.findall(text.lower()):
        if MIN_TERM_CHARS <= len(word) <= MAX_TERM_CHARS:
            yield word


def salted(salt: str, value: str) -> str:
    """The SHA-256 (hex) of ``value`` under ``salt``: what a receipt keeps instead of it."""
    return hashlib.sha256(f"{salt}\x1f{value}".encode("utf-8", "surrogatepass")).hexdigest()


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ErasureKind(StrEnum):
    """What made an erasure."""

    PURGE = "purge"
    """A purge (or the retention policy): named records and what derives from them."""
    SCOPES = "scopes"
    """Whole scopes deleted (``delete_scope``, ``delete_dataset``)."""


class ErasedScope(_Record):
    """A scope an erasure touched, as stored (its parts are stored parts)."""

    dataset: str
    task: str
    session: str | None = None


class ErasureReceipt(_Record):
    """The proof of one erasure: ids, hashes and names, never content.

    Export it as JSON (``receipt.model_dump_json()``), check it later with
    :meth:`membrain.Memory.verify_erasure`.
    """

    id: str
    kind: ErasureKind
    dataset: str
    """The dataset whose erasure log holds the receipt."""
    scopes: tuple[ErasedScope, ...]
    erased_at: UtcDatetime
    by: Actor
    reason: str = ""
    facts: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    """Entities deleted."""
    profile: tuple[str, ...] = ()
    """Profile versions deleted (they summarised erased facts)."""
    revised: tuple[str, ...] = ()
    """Entities kept, rewritten without what erased facts taught them."""
    erased_from: tuple[str, ...] = ()
    """The collections and derived indexes the content was erased from."""
    salt: str = Field(min_length=16, max_length=128)
    content_hashes: tuple[str, ...] = ()
    """:func:`salted` of each erased record's content."""
    term_hashes: tuple[str, ...] = ()
    """:func:`salted` of each distinctive term of the erased content."""

    def ids(self) -> Iterable[str]:
        """Every record id the receipt names."""
        return (*self.facts, *self.messages, *self.entities, *self.profile)


class ErasureFinding(_Record):
    """Something an erasure should have removed and did not: an id in a place, or a file."""

    where: str
    """A collection (``facts``, ``messages`` ...), a derived index (``lexical``, ``tree``) or
    a file of the store (its path under the store's folder)."""
    record: str | None = None
    """The erased id found there (none for a file)."""
    terms: int = 0
    """For a file: how many fingerprinted terms it still holds (never which)."""

    def __str__(self) -> str:
        if self.record is not None:
            return f"{self.record} is still in {self.where}"
        return f"{self.terms} erased term(s) still in the file {self.where}"


class ErasureCheck(_Record):
    """The verdict of :meth:`membrain.Memory.verify_erasure` on one receipt."""

    receipt: str
    ok: bool
    findings: tuple[ErasureFinding, ...] = ()
    checked: tuple[str, ...] = ()
    """The collections and indexes looked into."""
    files_checked: int = 0
    """How many of the store's files were read; 0 when they are not local."""
    note: str = ""
    """What could not be checked, and why (a served Qdrant's files are not local)."""
