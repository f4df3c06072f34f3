"""The records the memory's operations return, beside the models.

They are defined below the engine, so a caller of a served memory (:mod:`membrain.remote`)
reads them without importing storage, retrieval or extraction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from membrain.api.erasure import ErasureReceipt
from membrain.api.errors import ExtractionError
from membrain.api.models import Message

__all__ = ["AddResult", "EvidenceHit", "PurgeResult"]


def _errors(value: Iterable[object]) -> tuple[ExtractionError, ...]:
    return tuple(e if isinstance(e, ExtractionError) else ExtractionError(str(e)) for e in value)


Errors = Annotated[
    tuple[ExtractionError, ...],
    PlainValidator(_errors),
    PlainSerializer(lambda errors: [str(e) for e in errors], return_type=list[str]),
    WithJsonSchema({"type": "array", "items": {"type": "string"}}),
]
"""Extraction errors; as JSON, one line of text each."""


@dataclass(frozen=True, slots=True)
class AddResult:
    """What one :meth:`Memory.add` did."""

    messages_stored: int = 0
    """Messages given that were new, and stored."""
    messages_skipped: int = 0
    """Messages given that were already stored (or given twice in one call): not stored again."""
    messages_retried: int = 0
    """Of those, messages an earlier call left pending, extracted again by this one."""
    fact_ids: tuple[str, ...] = ()
    entity_ids: tuple[str, ...] = ()
    discarded: int = 0
    errors: Errors = ()
    """Extraction errors: their messages stay pending."""
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class EvidenceHit:
    """A raw message returned by :meth:`Memory.search_messages`."""

    message: Message
    score: float


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """What a purge (or the retention policy) erased, by id."""

    fact_ids: tuple[str, ...] = ()
    message_ids: tuple[str, ...] = ()
    entity_ids: tuple[str, ...] = ()
    receipt: ErasureReceipt | None = None
    """The erasure's receipt (:meth:`Memory.verify_erasure` checks it); None when nothing new
    was erased, or when the retention policy erased in several scopes (each has its receipt:
    :meth:`Memory.receipts`)."""
