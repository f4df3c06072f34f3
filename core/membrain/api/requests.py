"""The request of every operation: its parameters, defaults, limits and documentation, once.

Each operation of :data:`membrain.api.operations.OPERATIONS` takes one request model from here. A
call of any surface (``Memory.search(...)``, the async facade, the remote clients, an HTTP
body, an MCP tool, a command) becomes one of these before anything runs, so a limit declared
on a field (a length, a count, the JSON depth of metadata and filters) holds on every surface,
with the same typed error (:meth:`OperationRequest.of`).

The parameters of a method are the request's fields, in order: those in ``positional`` may be
passed by position, the others by keyword. ``LOCAL`` fields (``on_progress``, ``by``) exist
in the process that calls: a served memory names the API key as the actor, and progress
callbacks do not cross HTTP. On the wire a request is its JSON fields with the scope spread
into ``dataset``, ``task`` and ``session`` (:meth:`OperationRequest.wire`).

Defined below the engine, so a caller of a served memory reads it without loading one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, ClassVar, Self, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WrapValidator,
    model_validator,
)

from membrain.api.arguments import DENSE, SPARSE, as_ids, check_scope
from membrain.api.audit import AuditAction, ReviewItem
from membrain.api.checks import (
    MAX_MESSAGE_CHARS,
    MAX_QUESTION_CHARS,
    MAX_REASON_CHARS,
    bounded_text,
    loads_json,
    unicode_text,
)
from membrain.api.erasure import ErasureReceipt
from membrain.api.errors import ConfigurationError, InputError, MembrainError
from membrain.api.expiry import ExpiresAt, Ttl, aware_expiry, one_expiry
from membrain.api.inputs import DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME, as_messages
from membrain.api.metadata import metadata_filter
from membrain.api.models import Actor, Message, RetrievalMode
from membrain.api.path_names import current_names
from membrain.api.profile import MAX_PROFILE_TEXT
from membrain.api.recalls import MAX_RUN_CHARS, RunName, RunTags
from membrain.api.scope import Scope, ScopePart, dataset_part

__all__ = [
    "CONTEXT_MIN_RELEVANCE",
    "LOCAL",
    "MAX_IDS",
    "MAX_K",
    "MAX_MESSAGES",
    "Accepts",
    "Former",
    "AddRequest",
    "ApplyRetentionRequest",
    "AuditRequest",
    "ConfirmRequest",
    "ContextRequest",
    "DeleteDatasetRequest",
    "DeleteScopeRequest",
    "DismissFailedRequest",
    "DisputeRequest",
    "EntitiesRequest",
    "ExtractPendingRequest",
    "FactsRequest",
    "ForgetRequest",
    "GetRequest",
    "HistoryRequest",
    "MessagesRequest",
    "OperationRequest",
    "OptimizeRequest",
    "ParticipantsRequest",
    "ProfileForgetRequest",
    "ProfileHistoryRequest",
    "ProfilePutRequest",
    "ProfileRequest",
    "RecallsRequest",
    "PurgeRequest",
    "ReceiptsRequest",
    "ResolveRequest",
    "RetryFailedRequest",
    "ReviewQueueRequest",
    "ScopesRequest",
    "SearchMessagesRequest",
    "SearchRequest",
    "SupersedeRequest",
    "TraceRequest",
    "UpdateRequest",
    "VerifyErasureRequest",
]

MAX_K = 1000
"""The most facts (or messages) one search or context asks for."""
MAX_MESSAGES = 5000
"""The most messages one ``add`` carries (send a longer import in parts)."""
MAX_IDS = 10_000
"""The most ids one request names."""
LOCAL = ("on_progress", "by")
"""Fields of the calling process only: never sent to a server (it names the key's actor)."""
_SCOPE_FIELDS = ("dataset", "task", "session")


class Former:
    """Values a field still reads under a former name.

    The field's check maps them silently; a method's call warns of them
    (``DeprecationWarning``) where it is made.
    """

    __slots__ = ("warn",)

    def __init__(self, warn: Callable[[Any, int], object]) -> None:
        self.warn = warn
        """Warn of the former values in a value given, at ``stacklevel`` (the caller's)."""


class Accepts:
    """What a caller may pass for a field, when the request stores something narrower.

    ``Annotated[tuple[str, ...], Accepts("str | Sequence[str]")]``: the method's signature and
    the type stubs show the accepted form; the field holds the checked one.
    """

    __slots__ = ("annotation",)

    def __init__(self, annotation: str) -> None:
        self.annotation = annotation


# -- checked field types -----------------------------------------------------------------------
def _scope(value: object) -> Scope:
    return check_scope(value)


def _optional_scope(value: object) -> Scope | None:
    return None if value is None else check_scope(value)


def _ids(what: str) -> Callable[[object], tuple[str, ...]]:
    def check(value: object) -> tuple[str, ...]:
        if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
            value = list(value)  # an iterator is read once, here, where the call is made
        ids = as_ids(value, what)
        if len(ids) > MAX_IDS:
            raise InputError(f"at most {MAX_IDS:,} {what} in one request, got {len(ids):,}")
        return tuple(ids)

    return check


def _optional(check: Callable[[object], Any]) -> Callable[[object], Any]:
    return lambda value: None if value is None else check(value)


def _query(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError("the query must be a non-empty string")
    unicode_text(value, "the query")
    return bounded_text(value, "the query", MAX_QUESTION_CHARS)


def _reason(value: object) -> str:
    return bounded_text(value, "reason", MAX_REASON_CHARS)


def _filters(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes):  # a query parameter holds the JSON text
        value = loads_json(value, "filters")
    if not isinstance(value, Mapping):
        raise InputError("filters must be a JSON object of metadata conditions")
    metadata_filter(value)  # refuses what is not a filter
    return dict(value)


def _actions(value: object) -> tuple[AuditAction, ...]:
    if not isinstance(value, str | Iterable) or isinstance(value, bytes | Mapping):
        raise InputError("actions must be a list of audit actions")
    given = [value] if isinstance(value, str) else list(value)
    try:
        return tuple(AuditAction(a) for a in given)
    except ValueError:
        known = ", ".join(a.value for a in AuditAction)
        raise ConfigurationError(f"unknown audit action in {given!r}; known: {known}") from None


def _path_names(value: object) -> tuple[str, ...]:
    given = (value,) if isinstance(value, str) else value
    if isinstance(given, Iterable) and not isinstance(given, bytes | Mapping):
        given = list(given)
        if all(isinstance(name, str) for name in given):
            return current_names(given, warn=False)
    raise InputError("exclude_paths must be a list of path names")


def _mode(value: object) -> RetrievalMode:
    return RetrievalMode.parse(value)  # type: ignore[arg-type]


def _dataset(value: object, _: object) -> str:
    return dataset_part(value)  # a stored part (a ScopePart) is kept as it is


ScopeField = Annotated[Scope, BeforeValidator(_scope), Field(description="Where the records are.")]
Ids = Annotated[tuple[str, ...], BeforeValidator(_ids("fact ids")), Accepts("str | Sequence[str]")]
MessageIds = Annotated[
    tuple[str, ...], BeforeValidator(_ids("message ids")), Accepts("str | Sequence[str]")
]
Query = Annotated[
    str,
    BeforeValidator(_query),
    Field(description="What to look for, as a question (``question=`` is still read)."),
]
Reason = Annotated[
    str, BeforeValidator(_reason), Field(description="Why, as the audit log records it.")
]
By = Annotated[
    Actor | str | None,
    Field(
        description='Who makes the change (``"agent:planner"``, a name, an :class:`Actor`; '
        "default the application). A served memory names the API key instead."
    ),
]
Filters = Annotated[
    dict[str, Any] | None,
    BeforeValidator(_filters),
    Accepts("Mapping[str, object] | None"),
    Field(
        description='Only facts whose metadata meets these conditions (``{"project": '
        '"apollo"}``, ``{"project": {"in": ["apollo", "zeus"]}}``; :mod:`membrain.api.metadata`).'
    ),
]
Mode = Annotated[
    RetrievalMode,
    BeforeValidator(_mode),
    Accepts("RetrievalMode | str"),
    Field(description="Which paths run (see :class:`RetrievalMode`)."),
]
Progress = Annotated[
    Callable[[int], None] | None,
    Field(description="Called with the number of messages finished after each batch."),
]
Reference = Annotated[
    datetime | None,
    Field(
        description='"Now" for relative times in the question ("last summer"); default the '
        "current time."
    ),
]
AsOf = Annotated[
    datetime | None,
    Field(
        description="Read what the memory believed at this record time: facts recorded by "
        "then and not yet superseded, forgotten or retracted then. Default: the current "
        "beliefs (active facts)."
    ),
]
ValidAt = Annotated[
    datetime | None,
    Field(
        description="Read the beliefs about this valid time: facts superseded since that "
        "were true then are included. A time the question names does the same."
    ),
]


class OperationRequest(BaseModel):
    """One call of an operation, checked: the base of every request."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    positional: ClassVar[tuple[str, ...]] = ()
    """The fields a method takes by position, in order (the others by keyword)."""
    served_scope: ClassVar[bool] = False
    """A served memory needs the scope even where an embedded one may find it by itself."""

    @classmethod
    def names_one_scope(cls) -> bool:
        """Whether a served memory reads this request within one scope it checks first."""
        field = cls.model_fields.get("scope")
        return field is not None and (field.is_required() or cls.served_scope)

    @classmethod
    def of(cls, **arguments: Any) -> Self:
        """The request of these arguments, checked.

        Raises:
            InputError: an argument is missing, unknown, of the wrong type or over a limit
                (or the library error a check raised: ``ScopeError``, ``ConfigurationError``).
        """
        try:
            return cls(**arguments)
        except ValidationError as invalid:
            raise _error(invalid) from None
        except (TypeError, ValueError) as exc:  # a check's own, on a value of an unexpected kind
            raise InputError(f"{cls.__name__}: {exc}") from None

    def wire(self) -> dict[str, Any]:
        """The request as JSON fields (local fields left out, the scope spread)."""
        fields = self.model_dump(mode="json", exclude={"scope", *LOCAL}, exclude_none=True)
        scope = getattr(self, "scope", None)
        if isinstance(scope, Scope):
            fields.update(dataset=scope.dataset, task=scope.task, session=scope.session)
        return {name: value for name, value in fields.items() if value is not None}

    def params(self) -> dict[str, str | list[str]]:
        """The request as URL query parameters: a list repeated, an object as JSON text.

        An empty list is sent as one empty value where it differs from an absent field (whose
        default is ``None``: ``ids=[]`` asks for nothing, no ``ids`` for everything).
        """
        params: dict[str, str | list[str]] = {}
        for name, value in self.wire().items():
            if isinstance(value, dict):
                params[name] = json.dumps(value)
            elif isinstance(value, list):
                field = type(self).model_fields.get(name)
                if value or (field is not None and field.default is None):
                    params[name] = [_query_value(v) for v in value] or [""]
            else:
                params[name] = _query_value(value)
        return params

    @classmethod
    def from_wire(cls, fields: Mapping[str, Any], scope: Scope | None = None, **local: Any) -> Self:
        """The request a server reads: JSON fields, the scope it checked, its local fields.

        ``question``, the former name of ``query``, is still read.

        Raises:
            InputError: as :meth:`of`; also for a local field sent over the wire.
        """
        scoped = "scope" in cls.model_fields
        sent = {k: v for k, v in fields.items() if not (scoped and k in _SCOPE_FIELDS)}
        refused = [name for name in (*LOCAL, "scope") if name in sent]
        if refused:
            raise InputError(f"unknown field {refused[0]!r}")
        if "question" in sent and "query" in cls.model_fields and "query" not in sent:
            sent["query"] = sent.pop("question")
        if scoped and scope is not None:
            sent["scope"] = scope
        return cls.of(**sent, **local)

    @classmethod
    def many(cls, name: str) -> bool:
        """Whether field ``name`` holds several values (a query repeats it)."""
        field = cls.model_fields.get(name)
        return field is not None and _is_many(field.annotation)

    @classmethod
    def query_fields(cls, params: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """The fields of a URL query (each name to its values): lists kept, others single."""
        fields: dict[str, Any] = {}
        for name, values in params.items():
            field = cls.model_fields.get(name)
            if field is not None and _is_many(field.annotation):
                fields[name] = [v for v in values if v != ""]
            elif field is not None and field.annotation in (int, float, bool):
                fields[name] = _scalar(field.annotation, values[-1], name)  # type: ignore[arg-type]
            else:
                fields[name] = values[-1]
        return fields

    def local_arguments(self) -> list[str]:
        """The local fields this request sets (a served memory cannot take them)."""
        return [
            name
            for name in LOCAL
            if name in type(self).model_fields and getattr(self, name) is not None
        ]


def _scalar(kind: type, text: str, name: str) -> Any:
    """A number or a truth value of a URL query, as its text says it."""
    try:
        return TypeAdapter(kind).validate_python(text)
    except ValidationError:
        raise InputError(f"{name} must be {kind.__name__}, got {text!r:.40}") from None


def _query_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_many(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        return _is_many(get_args(annotation)[0])
    if get_origin(annotation) in (Union, type(int | None)):
        return any(_is_many(a) for a in get_args(annotation) if a is not type(None))
    return get_origin(annotation) in (list, tuple, Sequence)


def _error(invalid: ValidationError) -> MembrainError:
    """The library error inside ``invalid`` (a check's own), else an :class:`InputError`."""
    for error in invalid.errors():
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, MembrainError):
            return cause
    first = invalid.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "request"
    if first["type"] == "missing":
        return InputError(f"missing argument {where!r}")
    if first["type"] == "extra_forbidden":
        return InputError(f"unknown argument {where!r}")
    return InputError(f"{where}: {first['msg']}")


# -- extraction --------------------------------------------------------------------------------
class AddRequest(OperationRequest):
    """Store messages as evidence, then extract facts from them.

    Messages already processed are skipped; messages left pending by an earlier failure are
    extracted again. Extraction errors do not raise: the affected messages stay pending with
    the error recorded, and the errors are returned in :attr:`AddResult.errors`.

    Raises:
        ScopeError: ``scope`` is missing or malformed.
        InputError: a message is malformed, or more than :data:`MAX_MESSAGES` (nothing is
            stored then).
    """

    positional: ClassVar[tuple[str, ...]] = ("messages",)
    messages: Annotated[
        tuple[Message, ...],
        Accepts("str | Iterable[Message | Mapping[str, Any] | object]"),
        Field(
            max_length=MAX_MESSAGES,
            description=":class:`Message` objects or dicts with ``speaker``, ``text``, "
            '``timestamp``; or a string (one user message, said now); OpenAI-style ``{"role", '
            '"content"}`` dicts; LangChain or LlamaIndex chat messages (see '
            f":mod:`membrain.api.inputs`). A text has at most {MAX_MESSAGE_CHARS:,} characters.",
        ),
    ]
    scope: ScopeField
    on_progress: Progress = None
    extract: bool = Field(
        True,
        description="``False`` only stores the messages, durably, as pending evidence (for a "
        "background writer); :meth:`extract_pending` extracts them later.",
    )
    by: By = None
    user_name: str = Field(
        DEFAULT_USER_NAME,
        description="The speaker of user messages that name none (the name facts use).",
    )
    assistant_name: str = Field(
        DEFAULT_ASSISTANT_NAME, description="The speaker of assistant messages that name none."
    )
    expires_at: Annotated[ExpiresAt, Accepts("datetime | None")] = None
    ttl: Annotated[Ttl, Accepts("timedelta | float | None")] = None

    @model_validator(mode="after")
    def _one_expiry(self) -> Self:
        one_expiry(self.expires_at, self.ttl)
        return self

    @model_validator(mode="before")
    @classmethod
    def _messages(cls, data: Any) -> Any:
        if isinstance(data, dict) and "messages" in data:
            names = {
                "user_name": data.get("user_name", DEFAULT_USER_NAME),
                "assistant_name": data.get("assistant_name", DEFAULT_ASSISTANT_NAME),
            }
            given = data["messages"]
            many = isinstance(given, Sequence) and not isinstance(given, str)
            if many and len(given) > MAX_MESSAGES:
                raise InputError(f"at most {MAX_MESSAGES} messages in one add, got {len(given)}")
            data = {**data, "messages": tuple(as_messages(given, **names))}
        return data


class ExtractPendingRequest(OperationRequest):
    """Extract every pending message of the scope.

    Pending messages are those ``add(..., extract=False)`` stored and those an earlier
    failure left pending. Safe to call again: processed messages are never extracted twice.
    """

    scope: ScopeField
    on_progress: Progress = None


class RetryFailedRequest(OperationRequest):
    """Extract again the scope's messages marked ``failed`` (each failed on its own).

    What fails again stays failed, with the new error recorded.
    """

    scope: ScopeField
    on_progress: Progress = None


class DismissFailedRequest(OperationRequest):
    """Give up on failed messages: they stay stored as evidence and are never extracted.

    ``message_ids`` are stored ids (or unique prefixes of 8 or more hex digits) or source
    ids (default: every failed message of the scope). Audited as ``dismissed`` with ``by``
    and ``reason``; returns the ids dismissed.

    Raises:
        InputError: an id names no failed message of ``scope``.
    """

    positional: ClassVar[tuple[str, ...]] = ("message_ids",)
    message_ids: Annotated[
        tuple[str, ...] | None,
        BeforeValidator(_optional(_ids("message ids"))),
        Accepts("Sequence[str] | None"),
        Field(description="The failed messages to give up on (default: all)."),
    ] = None
    scope: ScopeField
    by: By = None
    reason: Reason = ""


# -- reading -----------------------------------------------------------------------------------
CONTEXT_MIN_RELEVANCE = 0.03
"""The floor of :meth:`context` when ``min_relevance`` is not given, for a memory whose dense
encoder has a relevance calibration of its own (the packaged one): hits less relevant (see
:mod:`membrain.retrieval.relevance`) are left out, so a question about a topic the memory does not
hold gets no facts. With another encoder relevance reads word overlap alone, which says nothing of
a question sharing no word with its answer, so the default is no floor. ``0`` keeps every hit.
Chosen with ``benchmarks/calibrate_relevance.py``; figures in ``docs/benchmarks/relevance.md``."""

_FLOOR = "Drop hits whose relevance (0-1, calibrated; MemoryHit.relevance) is below this, after "
MinRelevance = Annotated[
    float | None, Field(ge=0, le=1, strict=True, description=_FLOOR + "ranking. None keeps all.")
]
ContextMinRelevance = Annotated[
    float | None,
    Field(
        ge=0,
        le=1,
        strict=True,
        description=_FLOOR + "ranking. None: CONTEXT_MIN_RELEVANCE (0.03) when the memory's "
        "encoder has a relevance calibration (the packaged one), else no floor; 0 keeps all.",
    ),
]


class SearchRequest(OperationRequest):
    """The ``k`` facts that best answer ``query``, with their sources and explanation.

    Returns:
        A :class:`SearchResult`: a sequence of :class:`MemoryHit` (best first) that also
        says which mode ran (``auto`` ends as ``fast`` or ``expand``, ``escalated`` when it
        went on) and which paths. Every hit's ``paths`` maps each path that found the fact
        to its rank there, ``score`` is the fused score and ``relevance`` a calibrated
        probability (0-1: the memory holds the question's topic and evidence is at this hit or
        below), never higher than the hit above it; ``min_relevance`` drops the hits below it
        (none by default).

    Raises:
        ScopeError: ``scope`` is missing or malformed.
        InputError: empty question or ``k`` outside 1-:data:`MAX_K`.
        ConfigurationError: unknown mode.
    """

    positional: ClassVar[tuple[str, ...]] = ("query",)
    query: Query
    scope: ScopeField
    mode: Mode = RetrievalMode.EXPAND
    k: int = Field(10, ge=1, le=MAX_K, strict=True, description="How many facts.")
    reference: Reference = None
    exclude_paths: Annotated[
        tuple[str, ...],
        BeforeValidator(_path_names),
        Former(lambda value, stacklevel: current_names(value, stacklevel=stacklevel)),
        Accepts("Sequence[str]"),
        Field(
            max_length=64,
            description='Path names the mode would run but should not ("hyde", "time", ...; '
            '"answers" turns off the answer follow-up of :mod:`membrain.retrieval.followup`). '
            'The former letters ("A", "B2", ...; :mod:`membrain.api.path_names`) are read as the '
            "names they stand for, with a ``DeprecationWarning``.",
        ),
    ] = ()
    as_of: AsOf = None
    valid_at: ValidAt = None
    rerank: bool = Field(
        True,
        description="Order the first results of the answer follow-up (every mode but "
        "``fast``, chats between named people) with the packaged reranker "
        "(:mod:`membrain.retrieval.rerank`); ``False`` keeps the fused order.",
    )
    filters: Filters = None
    min_relevance: MinRelevance = None
    run: RunName = None
    run_tags: RunTags = ()


class ContextRequest(OperationRequest):
    """A cited context block for ``query`` that fits ``max_tokens`` (cl100k tokens).

    Facts are searched (``k`` candidates), then as many as fit are grouped under the
    entities they mention (with the entities' latest descriptions), ordered in time, each
    citing its source messages. With ``profile_ratio`` (0-1) the user profile's current
    entries (:meth:`profile`, stale ones left out) open the context within
    ``profile_ratio * max_tokens`` tokens, and the facts get the rest, the profile's unused
    share included. ``profile_tokens`` only reserves budget (no block). ``as_of``,
    ``valid_at`` and ``filters`` read as in :meth:`search`. Lines mark disputed facts,
    facts an agent wrote and superseded facts (when and by which fact). Hits whose relevance
    is below ``min_relevance`` are left out (default :data:`CONTEXT_MIN_RELEVANCE` with an encoder
    that has a relevance calibration, the packaged one; no floor with another); when none is
    left the context holds no facts and its text says nothing relevant was found.

    Raises:
        InputError: ``max_tokens < 1``, a reserve larger than the budget, a ratio outside
            0-1, or both a ratio and a reserve.
    """

    positional: ClassVar[tuple[str, ...]] = ("query",)
    query: Query
    scope: ScopeField
    max_tokens: int = Field(2000, ge=1, le=1_000_000, strict=True, description="The token budget.")
    mode: Mode = RetrievalMode.EXPAND
    k: int = Field(50, ge=1, le=MAX_K, strict=True, description="How many facts are candidates.")
    profile_tokens: int = Field(
        0, ge=0, strict=True, description="Tokens reserved for a profile block the caller writes."
    )
    reference: Reference = None
    as_of: AsOf = None
    valid_at: ValidAt = None
    filters: Filters = None
    profile_ratio: float = Field(
        0.0,
        ge=0,
        le=1,
        strict=True,
        description="The share of the budget the user profile may open with.",
    )
    min_relevance: ContextMinRelevance = None
    run: RunName = None
    run_tags: RunTags = ()

    @model_validator(mode="after")
    def _one_share(self) -> Self:
        if self.profile_ratio and self.profile_tokens:
            raise InputError("profile_ratio is between 0 and 1, and excludes profile_tokens")
        return self


def _message_paths(value: object) -> tuple[str, ...]:
    if not isinstance(value, str | Iterable) or isinstance(value, bytes | Mapping):
        raise ConfigurationError(f"paths must be a non-empty subset of {SPARSE!r}, {DENSE!r}")
    chosen = (value,) if isinstance(value, str) else tuple(value)
    if not chosen or set(chosen) - {SPARSE, DENSE}:
        raise ConfigurationError(f"paths must be a non-empty subset of {SPARSE!r}, {DENSE!r}")
    return chosen


class SearchMessagesRequest(OperationRequest):
    """Search the raw messages (the evidence) directly, by BM25, dense or both fused."""

    positional: ClassVar[tuple[str, ...]] = ("query",)
    query: Query
    scope: ScopeField
    k: int = Field(10, ge=1, le=MAX_K, strict=True, description="How many messages.")
    paths: Annotated[
        tuple[str, ...],
        BeforeValidator(_message_paths),
        Accepts("Sequence[str]"),
        Field(max_length=2, description=f"Which searches run: {SPARSE!r}, {DENSE!r} or both."),
    ] = (SPARSE, DENSE)


class FactsRequest(OperationRequest):
    """Every fact of the scope (active only unless ``include_inactive``).

    ``derived_from`` keeps the facts citing one of these messages, named by the caller's
    message ids (``Message.source_id``, as :attr:`MemoryHit.source_ids` shows them) or by
    their stored ids (:attr:`StoredMessage.id`, or a unique prefix). ``ids`` keeps only
    these facts, in the order given, each named whole or by a unique prefix of 8 or more
    hex digits (ids that name no fact of the scope are skipped). ``filters`` keeps the facts
    whose metadata meets them (as in :meth:`search`).
    """

    scope: ScopeField
    include_inactive: bool = Field(False, description="Also superseded, forgotten, retracted.")
    derived_from: Annotated[
        MessageIds, Accepts("Sequence[str]"), Field(description="Messages the facts cite.")
    ] = ()
    ids: Annotated[
        tuple[str, ...] | None,
        BeforeValidator(_optional(_ids("fact ids"))),
        Accepts("Sequence[str] | None"),
        Field(description="Only these facts (ids or 8+ hex prefixes)."),
    ] = None
    filters: Filters = None


class GetRequest(OperationRequest):
    """One fact by its id (or a unique prefix of it), whatever its status.

    Raises:
        NotFoundError: no fact of ``scope`` has that id.
    """

    positional: ClassVar[tuple[str, ...]] = ("fact_id",)
    fact_id: str = Field(description="The fact's id or a unique prefix of 8+ hex digits.")
    scope: ScopeField


class MessagesRequest(OperationRequest):
    """Every stored message of the scope, with its processing status, in time order.

    ``ids`` keeps only these messages, named by the caller's message ids
    (``Message.source_id``) or by their stored ids (:attr:`StoredMessage.id`), whole or by
    a unique prefix of 8 or more hex digits (as a context cites them); ids that name no
    message of the scope are skipped.

    Raises:
        InputError: a prefix names several messages of the scope (the message names them).
    """

    scope: ScopeField
    ids: Annotated[
        tuple[str, ...] | None,
        BeforeValidator(_optional(_ids("message ids"))),
        Accepts("Sequence[str] | None"),
        Field(description="Only these messages."),
    ] = None


class EntitiesRequest(OperationRequest):
    """Every entity of the scope's (dataset, task)."""

    scope: ScopeField


class ParticipantsRequest(OperationRequest):
    """The speakers of the scope's (dataset, task): whom its first-person facts are about."""

    scope: ScopeField


class ScopesRequest(OperationRequest):
    """The (dataset, task) scopes that hold messages or facts (of ``dataset`` when given).

    A served memory lists the scopes of the datasets the API key may read.

    Raises:
        ScopeError: ``dataset`` is not a valid scope part.
    """

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    dataset: Annotated[
        str | None,
        WrapValidator(lambda v, h: None if v is None else _dataset(v, h)),
        Field(description="Whose scopes."),
    ] = None


class ReviewQueueRequest(OperationRequest):
    """What a person should look at, oldest first.

    Disputed facts (time contradictions found at extraction included); supersessions by the
    model and agents' forget requests when the review policy holds them.
    """

    scope: ScopeField


class HistoryRequest(OperationRequest):
    """A fact's life, oldest first: the facts it replaced and that replaced it, every event.

    A purged fact's whole id still has its events; a whole id naming nothing has none (a
    served memory answers 404 then).

    Raises:
        NotFoundError: an id prefix names no fact of ``scope``.
        InputError: ``fact_id`` is neither an id nor an id prefix.
    """

    positional: ClassVar[tuple[str, ...]] = ("fact_id",)
    fact_id: str = Field(description="The fact's id or a unique prefix of 8+ hex digits.")
    scope: ScopeField


class AuditRequest(OperationRequest):
    """The scope's audit log, oldest first (from ``since``, of ``actions``, about ``targets``).

    Raises:
        ConfigurationError: an unknown action.
    """

    scope: ScopeField
    since: datetime | None = Field(None, description="Only events recorded from then.")
    actions: Annotated[
        Annotated[tuple[AuditAction, ...], Field(max_length=64)] | None,
        BeforeValidator(_optional(_actions)),
        Accepts("Sequence[AuditAction | str] | None"),
        Field(description="Only these kinds of change."),
    ] = None
    targets: Annotated[
        MessageIds, Accepts("Sequence[str]"), Field(description="Only events about these ids.")
    ] = ()


class TraceRequest(OperationRequest):
    """What a run was told: the recalls recorded under ``run``, oldest first.

    Each :class:`~membrain.api.recalls.Recall` lists the facts a read gave, in the order it
    gave them, each with the fact as stored now and the messages it cites that are still kept.
    Recalls are recorded by a memory made with ``trace_recalls=True`` (none otherwise).
    """

    positional: ClassVar[tuple[str, ...]] = ("run",)
    run: Annotated[str, StringConstraints(min_length=1, max_length=MAX_RUN_CHARS)] = Field(
        description="The run's name, as the reads gave it."
    )
    scope: ScopeField


class RecallsRequest(OperationRequest):
    """The recalls that gave a fact to an agent, oldest first: which runs used it, and how.

    Raises:
        NotFoundError: an id prefix names no fact of ``scope``.
        InputError: ``fact_id`` is neither an id nor an id prefix.
    """

    positional: ClassVar[tuple[str, ...]] = ("fact_id",)
    fact_id: str = Field(description="The fact's id or a unique prefix of 8+ hex digits.")
    scope: ScopeField


class ProfileRequest(OperationRequest):
    """The user profile: the current entries of the scope's (dataset, task), in block order.

    Preferred topics (the schema's order) first, then entries backed by more facts; an
    entry citing a fact that is no longer active is returned with ``stale=True`` and is left
    out of :meth:`context` until refreshed. ``topics`` keeps only those topics.

    Raises:
        ScopeError: ``scope`` is missing or malformed.
    """

    scope: ScopeField
    topics: Annotated[
        Annotated[tuple[str, ...], Field(max_length=256)] | None,
        Accepts("Sequence[str] | None"),
        Field(description="Only these topics."),
    ] = None


class ProfileHistoryRequest(OperationRequest):
    """Every version of a profile entry, oldest first, each citing its facts.

    Raises:
        NotFoundError: the entry never existed.
    """

    positional: ClassVar[tuple[str, ...]] = ("topic", "subtopic")
    topic: str = Field(max_length=128, description="The entry's topic.")
    subtopic: str = Field(max_length=128, description="The entry's subtopic.")
    scope: ScopeField


# -- changes -----------------------------------------------------------------------------------
class ForgetRequest(OperationRequest):
    """Tombstone facts: their status becomes ``forgotten`` (recorded as ``forgotten_at``).

    A forgotten fact is kept, with its sources, for audit, and never returned by a search
    (except ``as_of`` a time before it was forgotten) or by :meth:`facts` (unless
    ``include_inactive``). To erase content, :meth:`purge` it. When the review policy holds
    agents' forget requests, an agent's request is queued instead and the facts are returned
    unchanged.

    Raises:
        InputError: an id names no fact of ``scope``.
    """

    positional: ClassVar[tuple[str, ...]] = ("fact_ids",)
    fact_ids: Annotated[Ids, Field(description="The facts to forget.")]
    scope: ScopeField
    by: By = None
    reason: Reason = ""


class SupersedeRequest(OperationRequest):
    """Record that ``new_fact_ids`` replace ``old_fact_id``; nothing is overwritten.

    The old fact becomes ``superseded`` (out of current beliefs, still answering questions
    about its own time), records ``superseded_by`` and ``superseded_at``, and its valid time
    is closed where the first new fact's begins; each new fact records ``supersedes``.
    Returns the old fact as updated.

    Raises:
        InputError: an id names no fact of ``scope``, or no new id is given.
    """

    positional: ClassVar[tuple[str, ...]] = ("old_fact_id", "new_fact_ids")
    old_fact_id: str = Field(description="The fact replaced.")
    new_fact_ids: Annotated[Ids, Field(description="The facts that replace it.")]
    scope: ScopeField
    by: By = None
    reason: Reason = ""


class UpdateRequest(OperationRequest):
    """Replace a fact by a new statement of it; the old one is superseded, not overwritten.

    ``text`` is what is now true, in the fact format (``"[Sara] lives in [Berlin] since
    [March 2024::2024-03]"``), where the names of the old fact's entities written without
    brackets are bracketed. It is stored as a message said by ``by`` (the evidence the new
    fact cites), the new fact is written from it like an extracted one (entities, indexes,
    audit), and the old fact is superseded by it with ``reason``: one audited
    supersession. Returns the new fact.

    It is one change, announced in the audit first: a crash midway leaves it applied in full
    (or, stopped before the message was stored, not at all) once the store opens again, and
    the message is never extracted by anything else.

    Raises:
        NotFoundError: no fact of ``scope`` has that id.
        ConflictError: the fact is not active (superseded, forgotten or retracted).
        InputError: ``text`` is empty, too long or has a malformed time annotation, or
            ``reason`` is too long (nothing is written then).
    """

    positional: ClassVar[tuple[str, ...]] = ("fact_id", "text")
    fact_id: str = Field(description="The fact replaced.")
    text: Annotated[
        str,
        BeforeValidator(lambda v: bounded_text(v, "text", MAX_MESSAGE_CHARS)),
        Field(description="What is now true, in the fact format."),
    ]
    scope: ScopeField
    reason: Reason = ""
    by: By = None
    expires_at: Annotated[ExpiresAt, Accepts("datetime | None")] = None
    ttl: Annotated[Ttl, Accepts("timedelta | float | None")] = None

    @model_validator(mode="after")
    def _one_expiry(self) -> Self:
        one_expiry(self.expires_at, self.ttl)
        return self


class ConfirmRequest(OperationRequest):
    """A person confirms facts: their trust becomes ``confirmed``; open disputes close."""

    positional: ClassVar[tuple[str, ...]] = ("fact_ids",)
    fact_ids: Annotated[Ids, Field(description="The facts confirmed.")]
    scope: ScopeField
    by: By = None


class DisputeRequest(OperationRequest):
    """Dispute facts: their trust becomes ``disputed`` and they wait in the review queue."""

    positional: ClassVar[tuple[str, ...]] = ("fact_ids",)
    fact_ids: Annotated[Ids, Field(description="The facts disputed.")]
    scope: ScopeField
    reason: Reason = ""
    by: By = None


class ResolveRequest(OperationRequest):
    """Accept or reject a review item; the decision is audited (``review_resolved``).

    Accepting applies the change (confirms a disputed fact, applies a supersession, forgets);
    rejecting a disputed fact retracts it: out of every read, kept for audit. ``item`` is
    a :class:`ReviewItem` or its id; the scope is the item's, or ``scope`` when given (an
    id this process has not seen in :meth:`review_queue` or :meth:`dispute` needs it).

    Raises:
        InputError: no open review item has this id in the scope.
        ScopeError: the item's scope is unknown and ``scope`` is not given.
    """

    positional: ClassVar[tuple[str, ...]] = ("item",)
    served_scope: ClassVar[bool] = True  # a served memory checks the key for the item's dataset
    item: Annotated[
        str,
        BeforeValidator(lambda v: v.id if isinstance(v, ReviewItem) else v),
        Accepts("ReviewItem | str"),
        Field(max_length=64, description="The review item or its id."),
    ]
    accept: bool = Field(True, description="Apply the change (``False``: reject it).")
    by: By = None
    note: Annotated[
        str,
        BeforeValidator(lambda v: bounded_text(v, "note", MAX_REASON_CHARS)),
        Field(description="Why, as the audit log records it."),
    ] = ""
    scope: Annotated[
        Scope | None,
        BeforeValidator(_optional_scope),
        Field(description="The item's scope (needed for an id this process has not seen)."),
    ] = None

    @model_validator(mode="before")
    @classmethod
    def _item(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "item_id" in data and "item" not in data:  # its name in the HTTP API before
            data = {**{k: v for k, v in data.items() if k != "item_id"}, "item": data["item_id"]}
        item = data.get("item")
        if isinstance(item, ReviewItem) and data.get("scope") is None:
            data = {**data, "scope": item.scope}
        return data


class ProfilePutRequest(OperationRequest):
    """Set a profile entry: a new version of ``(topic, subtopic)`` citing ``facts``.

    The previous version stays (see :meth:`profile_history`); the change is audited as
    ``profile_set`` by ``by`` (the application when ``None``). Writing what the entry
    already says changes nothing. ``facts`` are ids (or 8+ hex prefixes) of active facts
    the text summarises.

    Raises:
        InputError: the schema does not admit the subtopic (``strict``), the text is empty
            or longer than 600 characters, the topic is full, or a fact id names no fact
            of the scope.
        ConflictError: a cited fact is not active.
    """

    positional: ClassVar[tuple[str, ...]] = ("topic", "subtopic", "text")
    topic: str = Field(max_length=128, description="The entry's topic.")
    subtopic: str = Field(max_length=128, description="The entry's subtopic.")
    text: str = Field(
        max_length=MAX_PROFILE_TEXT * 4, description="What the profile says (600 characters)."
    )
    scope: ScopeField
    facts: Annotated[Ids, Field(description="The facts the text summarises.")] = ()
    by: By = None
    reason: Reason = ""


class ProfileForgetRequest(OperationRequest):
    """Remove a profile entry; returns the version that removes it (audited).

    Raises:
        NotFoundError: the profile has no such entry.
    """

    positional: ClassVar[tuple[str, ...]] = ("topic", "subtopic")
    topic: str = Field(max_length=128, description="The entry's topic.")
    subtopic: str = Field(max_length=128, description="The entry's subtopic.")
    scope: ScopeField
    by: By = None
    reason: Reason = ""


# -- erasure and the store ---------------------------------------------------------------------
class PurgeRequest(OperationRequest):
    """Erase content for privacy: it leaves every index and the store's files.

    The named facts lose their text, vectors, lexical and entity-tree entries. ``messages``
    names stored message ids to erase too, or is ``True`` for the named facts' source
    messages; every fact derived from an erased message is erased with it. Entities lose
    the description versions those facts wrote, and an entity no fact names any more is
    erased. The audit keeps a ``purged`` event with the ids and the actor, never content.

    The erasure is announced in the audit before anything is deleted: one interrupted (an
    error, a killed process) is finished by the next purge of the scope or when the store
    opens. A purge is idempotent: ids an earlier purge erased are reported erased again.

    Raises:
        InputError: nothing to purge, or an id names no fact or message of ``scope`` (nor
            one a purge erased).
    """

    positional: ClassVar[tuple[str, ...]] = ("fact_ids",)
    fact_ids: Annotated[Ids, Field(description="The facts to erase.")] = ()
    scope: ScopeField
    messages: Annotated[
        tuple[str, ...] | bool,
        BeforeValidator(lambda v: v if isinstance(v, bool) else _ids("message ids")(v)),
        Accepts("Sequence[str] | bool"),
        Field(description="Messages to erase too, or ``True`` for the facts' sources."),
    ] = ()
    by: By = None
    reason: Reason = ""

    @model_validator(mode="before")
    @classmethod
    def _former_fields(cls, data: Any) -> Any:
        """``message_ids`` and ``sources``, the HTTP API's names before, are still read."""
        if not isinstance(data, dict) or not {"message_ids", "sources"} & set(data):
            return data
        data = dict(data)
        ids, sources = data.pop("message_ids", None), data.pop("sources", False)
        if "messages" in data or (ids and sources):
            raise InputError("name message_ids or set sources, not both")
        data["messages"] = True if sources else (ids or ())
        return data


class ApplyRetentionRequest(OperationRequest):
    """Erase extracted messages older than ``keep_messages`` (the retention setting).

    A message's age is counted from its ``timestamp`` (when it was said) to ``at`` (default
    now). Erased as by :meth:`purge`, from every index and the store's files; the facts
    extracted from them stay, and then cite evidence that no longer exists. Pending
    messages stay until extracted. Without ``scope``, every (dataset, task) of the store
    (served: an admin key for every dataset). Does nothing when messages are kept forever
    (the default).
    """

    scope: Annotated[
        Scope | None,
        BeforeValidator(_optional_scope),
        Field(description="Only this scope's messages."),
    ] = None
    at: datetime | None = Field(None, description="The time ages are counted to (now).")


class DeleteScopeRequest(OperationRequest):
    """Delete everything stored under ``scope`` (all sessions when it has none); returns it.

    That includes its audit log, its derived lexical index entries and its bookkeeping scope
    (:meth:`Scope.bookkeeping`, e.g. a chat history's "cleared" markers). The embedded
    store's files are rewritten so nothing of it stays on disk (as by :meth:`purge`).
    """

    positional: ClassVar[tuple[str, ...]] = ("scope",)
    scope: ScopeField


class DeleteDatasetRequest(OperationRequest):
    """Delete every task of ``dataset`` (a whole user), as :meth:`delete_scope` deletes one.

    Every (dataset, task) holding any record goes, bookkeeping scopes included, in one
    deletion that finishes after a crash. The dataset's erasure log stays: it records that
    the deletion happened. Returns the (dataset, task) scopes deleted, bookkeeping ones
    left out.

    Raises:
        ScopeError: ``dataset`` is not a valid scope part.
    """

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    dataset: Annotated[str, WrapValidator(_dataset), Field(description="Whose memory.")]


class OptimizeRequest(OperationRequest):
    """Build the search indexes now (useful after a bulk load)."""


class ReceiptsRequest(OperationRequest):
    """The erasure receipts of ``dataset``, oldest first.

    One per purge, retention erasure and deleted scope (or dataset), read from the dataset's
    erasure log, which outlives its scopes: the receipt of ``delete_dataset`` is the last one.
    Each holds ids and salted hashes, never content.

    Raises:
        ScopeError: ``dataset`` is not a valid scope part.
    """

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    dataset: Annotated[str, WrapValidator(_dataset), Field(description="Whose receipts.")]


class VerifyErasureRequest(OperationRequest):
    """Check an erasure receipt against the store: is everything it erased still gone?

    No record with an erased id may be in any collection (facts, messages, entities,
    profile, the entity tree's member lists, the entities' versions and profile entries
    citing erased facts) nor in the lexical index; and no word of the store's files, read as
    bytes, may match one of the receipt's salted term hashes. The files are read where the
    store is local (Qdrant Edge); for a Qdrant server, the verdict says they were not.
    Findings name ids, places and files, never a term.

    Raises:
        NotFoundError: the dataset's erasure log holds no receipt of that id.
        InputError: the receipt differs from the one the store issued, or ``dataset`` is not
            the receipt's.
    """

    positional: ClassVar[tuple[str, ...]] = ("receipt",)
    receipt: ErasureReceipt = Field(description="A receipt, as ``receipts`` or a purge gave it.")
    dataset: Annotated[
        str | None,
        WrapValidator(lambda v, h: None if v is None else _dataset(v, h)),
        Field(description="The receipt's dataset (default: as it says; a server checks it)."),
    ] = None

    @model_validator(mode="after")
    def _of_its_dataset(self) -> Self:
        if self.dataset is None:
            object.__setattr__(self, "dataset", ScopePart(self.receipt.dataset))
        elif self.dataset != self.receipt.dataset:
            raise InputError(
                f"the receipt is of dataset {self.receipt.dataset!r}, not {self.dataset!r}"
            )
        return self


class ExpireRequest(OperationRequest):
    """Mark the active facts past their expiry ``expired``; returns their ids.

    Reads leave out an expired fact at its ``expires_at`` already; this records it: one
    audited ``expired`` event (actor ``system:expiry``, ids only) per batch of facts, finished
    after a crash. :meth:`apply_retention` runs it too, then erases what expired longer ago
    than the memory's ``expiry_grace``. Without ``scope``, every (dataset, task) of the store
    (served: an admin key for every dataset).
    """

    scope: Annotated[
        Scope | None,
        BeforeValidator(_optional_scope),
        Field(description="Only this scope's facts."),
    ] = None
    at: datetime | None = Field(None, description="The time expiries are compared to (now).")


class ExtendExpiryRequest(OperationRequest):
    """Move the expiry of expiring facts and messages to ``expires_at``; the ids of those moved.

    For items whose time to live restarts when read (the LangGraph store's ``refresh_ttl``):
    the messages named and every current fact citing them move. Records that never expire,
    and facts no longer current (expired, superseded, forgotten), are left as they are: an
    expired fact is never revived. Audited as ``expiry_set``.

    Raises:
        InputError: ``expires_at`` is naive.
    """

    positional: ClassVar[tuple[str, ...]] = ("expires_at",)
    fact_ids: Annotated[Ids, Field(description="Facts whose expiry moves.")] = ()
    message_ids: Annotated[
        MessageIds,
        Field(description="Messages (stored or source ids) whose expiry moves, with their facts'."),
    ] = ()
    expires_at: Annotated[
        datetime,
        BeforeValidator(aware_expiry),
        Accepts("datetime"),
        Field(description="The new expiry (an aware datetime)."),
    ]
    scope: ScopeField


_ = (Iterable, Mapping, Sequence, timedelta)  # named by the ``Accepts`` annotations
