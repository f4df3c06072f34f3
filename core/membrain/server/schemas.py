"""Request and response bodies of the HTTP API.

Responses are the Python API's own records serialised (:class:`~membrain.models.MemoryHit`,
:class:`~membrain.models.Context`, :class:`~membrain.models.Fact`, ...), so a client reads the
same fields as ``Memory`` returns. Every request names its scope with ``dataset``, ``task`` and
an optional ``session``; unknown fields are refused. A question is at most
:data:`~membrain.checks.MAX_QUESTION_CHARS` characters, a reason or note
:data:`~membrain.checks.MAX_REASON_CHARS`, a message's text or caption
:data:`~membrain.checks.MAX_MESSAGE_CHARS` (checked by :class:`~membrain.models.Message`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field
from starlette.responses import Response

from membrain.arguments import DENSE, SPARSE
from membrain.checks import MAX_MESSAGE_CHARS, MAX_QUESTION_CHARS, MAX_REASON_CHARS
from membrain.models import MemoryHit, Message, RetrievalMode, SearchResult
from membrain.path_names import current_names
from membrain.profile import MAX_PROFILE_TEXT, ProfileEntry
from membrain.results import AddResult, EvidenceHit, PurgeResult

__all__ = [
    "AddRequest",
    "AddResponse",
    "ConfirmRequest",
    "ContextRequest",
    "DeleteScopeResponse",
    "DisputeRequest",
    "ErrorBody",
    "EvidenceHitBody",
    "DismissRequest",
    "ExtractRequest",
    "ForgetRequest",
    "HealthResponse",
    "ModelResponse",
    "MessageSearchRequest",
    "Profile",
    "ProfileForgetRequest",
    "ProfilePutRequest",
    "PurgeRequest",
    "PurgeResponse",
    "ResolveRequest",
    "ScopedRequest",
    "SearchRequest",
    "SearchResponse",
    "SupersedeRequest",
    "UpdateRequest",
]

MAX_K = 1000
"""The most facts one search or context request may ask for."""
MAX_MESSAGES = 5000
"""The most messages one add request may carry (send a longer import in parts)."""

PathNames = Annotated[list[str], AfterValidator(lambda v: list(current_names(v, warn=False)))]
"""Retrieval path names; a former letter is read as the name it stands for (no warning here: an
HTTP client would never see it)."""

Question = Annotated[
    str,
    Field(
        max_length=MAX_QUESTION_CHARS,
        description="What to look for ('question', its former name, is still read).",
    ),
]
Reason = Annotated[
    str, Field(max_length=MAX_REASON_CHARS, description="Why, as the audit log records it.")
]


class ScopedRequest(BaseModel):
    """The scope every request names: whose memory, which task, optionally which session."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(description="Whose memory (user, persona); the key must cover it.")
    task: str = Field(description="Which agent or application.")
    session: str | None = Field(default=None, description="Optional session within the task.")


class AddRequest(ScopedRequest):
    """Messages to store, and whether to extract their facts before answering."""

    messages: list[Message | dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_MESSAGES,
        description=(
            "Messages with speaker, text and timestamp, or OpenAI-style {role, content} dicts; "
            f"a text or caption has at most {MAX_MESSAGE_CHARS:,} characters."
        ),
    )
    extract: bool = Field(
        default=True,
        description=(
            "False stores the messages as pending evidence and extracts them in the background."
        ),
    )


class _Query(ScopedRequest):
    query: Question = Field(validation_alias=AliasChoices("query", "question"))
    mode: RetrievalMode = Field(default=RetrievalMode.EXPAND, description="Retrieval mode.")
    reference: datetime | None = Field(
        default=None, description="'Now' for relative times in the question (default: now)."
    )
    as_of: datetime | None = Field(
        default=None, description="Search what the memory believed at this record time."
    )
    valid_at: datetime | None = Field(
        default=None, description="Search the beliefs about this valid time."
    )
    filters: dict[str, Any] | None = Field(
        default=None,
        description='Only facts whose metadata meets these: {"project": "apollo"} or '
        '{"project": {"in": ["apollo", "zeus"]}}.',
    )


class SearchRequest(_Query):
    """A search: the ``k`` facts that best answer ``question``."""

    k: int = Field(default=10, ge=1, le=MAX_K, description="How many facts.")
    exclude_paths: PathNames = Field(
        default=[],
        description="Paths the mode would run but should not ('hyde', 'time', ...; the former "
        "letters 'A', 'B2', ... are still read).",
    )
    rerank: bool = Field(
        default=True, description="Order the first results with the reranker (false: fused)."
    )


class ContextRequest(_Query):
    """A cited context block for ``question`` within ``max_tokens``."""

    k: int = Field(default=50, ge=1, le=MAX_K, description="Candidate facts searched.")
    max_tokens: int = Field(default=2000, ge=1, le=1_000_000, description="Token budget.")
    profile_tokens: int = Field(
        default=0, ge=0, description="Part of the budget reserved (no block is written)."
    )
    profile_ratio: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of the budget for the user profile block that opens the context.",
    )


class ProfilePutRequest(ScopedRequest):
    """A new version of a profile entry."""

    topic: str = Field(max_length=48, description="A topic of the server's profile schema.")
    subtopic: str = Field(max_length=48, description="A subtopic of the topic.")
    text: str = Field(max_length=MAX_PROFILE_TEXT, description="A few sentences, no times.")
    facts: list[str] = Field(default=[], max_length=100, description="Fact ids it summarises.")
    reason: Reason = ""


class ProfileForgetRequest(ScopedRequest):
    """The removal of a profile entry."""

    topic: str = Field(max_length=48)
    subtopic: str = Field(max_length=48)
    reason: Reason = ""


Profile = list[ProfileEntry]
"""Profile entries, as ``Memory.profile`` returns them."""


class MessageSearchRequest(ScopedRequest):
    """A search of the raw messages (the evidence), by BM25, dense or both fused."""

    query: Question = Field(validation_alias=AliasChoices("query", "question"))
    k: int = Field(default=10, ge=1, le=MAX_K, description="How many messages.")
    paths: list[str] = Field(
        default=[SPARSE, DENSE],
        min_length=1,
        description=f"Which rankings: {SPARSE!r} (BM25), {DENSE!r} or both (fused).",
    )


class EvidenceHitBody(BaseModel):
    """A stored message a message search found, with its score."""

    message: Message
    score: float

    @classmethod
    def of(cls, hit: EvidenceHit) -> EvidenceHitBody:
        """The body for ``hit``."""
        return cls(message=hit.message, score=hit.score)


class ExtractRequest(ScopedRequest):
    """Extract the scope's pending messages now (those stored with ``extract`` false)."""


class DismissRequest(ScopedRequest):
    """Give up on failed messages (all of the scope's when ``message_ids`` is null)."""

    message_ids: list[str] | None = None
    reason: Reason = ""


class ForgetRequest(ScopedRequest):
    """Facts to tombstone (kept for audit, out of every search)."""

    fact_ids: list[str] = Field(min_length=1)
    reason: Reason = ""


class SupersedeRequest(ScopedRequest):
    """Facts that replace an older fact; nothing is overwritten."""

    old_fact_id: str
    new_fact_ids: list[str] = Field(min_length=1)
    reason: Reason = ""


class UpdateRequest(ScopedRequest):
    """A new statement of a fact: stored as evidence, it supersedes the fact."""

    fact_id: str
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    reason: Reason = ""


class ConfirmRequest(ScopedRequest):
    """Facts a person confirms: their trust becomes ``confirmed``, open disputes close."""

    fact_ids: list[str] = Field(min_length=1)


class DisputeRequest(ScopedRequest):
    """Facts a person disputes: they wait in the review queue."""

    fact_ids: list[str] = Field(min_length=1)
    reason: Reason = ""


class ResolveRequest(ScopedRequest):
    """A decision on an open review item (accepting applies the change it proposes)."""

    item_id: str
    accept: bool = True
    note: Reason = ""


class PurgeRequest(ScopedRequest):
    """Content to erase from every index and the store's files (the audit keeps the ids)."""

    fact_ids: list[str] = Field(default=[], description="Facts to erase.")
    message_ids: list[str] = Field(default=[], description="Stored messages to erase.")
    sources: bool = Field(default=False, description="Also erase the named facts' source messages.")
    reason: Reason = ""


class PurgeResponse(BaseModel):
    """What a purge erased, by id."""

    fact_ids: list[str]
    message_ids: list[str]
    entity_ids: list[str]

    @classmethod
    def of(cls, result: PurgeResult) -> PurgeResponse:
        """The response for ``result``."""
        return cls(
            fact_ids=list(result.fact_ids),
            message_ids=list(result.message_ids),
            entity_ids=list(result.entity_ids),
        )


class SearchResponse(BaseModel):
    """The hits of a search (best first), the mode that ran and the paths it ran."""

    hits: list[MemoryHit]
    mode: RetrievalMode
    paths: list[str]
    escalated: bool = Field(default=False, description="An auto search went on to expand.")

    @classmethod
    def of(cls, result: SearchResult) -> SearchResponse:
        """The response for ``result``."""
        return cls(
            hits=list(result.hits),
            mode=result.mode,
            paths=list(result.paths),
            escalated=result.escalated,
        )


class AddResponse(BaseModel):
    """What an add did: the :class:`~membrain.ingest.AddResult` fields, errors as text."""

    messages_stored: int
    messages_skipped: int
    messages_retried: int
    fact_ids: list[str]
    entity_ids: list[str]
    discarded: int
    errors: list[str] = Field(description="Extraction errors; their messages stay pending.")
    llm_calls: int
    input_tokens: int
    output_tokens: int
    scheduled: bool = Field(
        default=False, description="Extraction was handed to the background writer."
    )

    @classmethod
    def of(cls, result: AddResult, *, scheduled: bool = False) -> AddResponse:
        """The response for ``result``."""
        return cls(
            messages_stored=result.messages_stored,
            messages_skipped=result.messages_skipped,
            messages_retried=result.messages_retried,
            fact_ids=list(result.fact_ids),
            entity_ids=list(result.entity_ids),
            discarded=result.discarded,
            errors=[str(error) for error in result.errors],
            llm_calls=result.llm_calls,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            scheduled=scheduled,
        )


class DeleteScopeResponse(BaseModel):
    """The scope that was deleted (every session of it when ``session`` is null)."""

    dataset: str
    task: str
    session: str | None


class HealthResponse(BaseModel):
    """The server is up."""

    status: str = "ok"
    version: str


class ErrorBody(BaseModel):
    """Every error response: one line saying what went wrong, and the error's class."""

    error: str
    type: str


class ModelResponse(Response):
    """A model's JSON, encoded once by pydantic.

    For the busiest answers (search, context): FastAPI would dump the returned model to Python
    values, validate them against the response model again and encode them (1.4 ms for ten
    search hits, against 0.05 ms for the model's own JSON). Routes returning it name their
    ``response_model`` so the schema is unchanged.
    """

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """``content`` (a pydantic model) as JSON bytes."""
        if not isinstance(content, BaseModel):
            raise TypeError(f"ModelResponse renders a pydantic model, not {type(content).__name__}")
        return content.model_dump_json().encode("utf-8")
