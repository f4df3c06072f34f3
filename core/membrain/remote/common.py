"""What both remote clients share.

Requests built from :class:`~membrain.Memory`'s arguments, answers read back into records,
error responses turned into the library's errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from membrain.arguments import DENSE, SPARSE, as_ids, check_scope
from membrain.audit import AuditAction, AuditEvent, ReviewItem
from membrain.errors import (
    AnnotationError,
    BackendError,
    ConfigurationError,
    ConflictError,
    ExtractionError,
    InputError,
    MembrainError,
    NotFoundError,
    ScopeError,
)
from membrain.inputs import as_messages
from membrain.metadata import metadata_filter
from membrain.models import (
    Actor,
    Entity,
    Fact,
    MemoryHit,
    Message,
    RetrievalMode,
    Scope,
    SearchResult,
    StoredMessage,
)
from membrain.remote.transport import (
    RETRIES,
    Call,
    Transient,
    check_transient,
    encoded,
    retry_policy,
    send,
    send_async,
    unreachable,
)
from membrain.results import AddResult, EvidenceHit, PurgeResult

__all__ = [
    "API_PREFIX",
    "ENTITIES",
    "EVENTS",
    "FACTS",
    "REVIEW_ITEMS",
    "MESSAGES",
    "NAMES",
    "RETRIES",
    "SCOPES",
    "Call",
    "RemoteAccessError",
    "Transient",
    "add_call",
    "add_result",
    "answer",
    "audit_call",
    "check_transient",
    "check_url",
    "confirm_call",
    "dispute_call",
    "encoded",
    "error",
    "evidence_hits",
    "extract_call",
    "facts_call",
    "forget_call",
    "headers",
    "messages_call",
    "one_fact_call",
    "purge_call",
    "purge_result",
    "query_body",
    "retry_policy",
    "resolve_call",
    "scope_query",
    "search_messages_call",
    "search_result",
    "send",
    "send_async",
    "supersede_call",
    "unreachable",
    "unsupported",
    "update_call",
]

T = TypeVar("T")

API_PREFIX = "/api/memory"
MAX_ERROR_CHARS = 300
"""A non-JSON error body is quoted up to this length."""

FACTS = TypeAdapter(list[Fact])
ENTITIES = TypeAdapter(list[Entity])
NAMES = TypeAdapter(list[str])
SCOPES = TypeAdapter(list[Scope])
MESSAGES = TypeAdapter(list[StoredMessage])
HITS = TypeAdapter(list[MemoryHit])
EVENTS = TypeAdapter(list[AuditEvent])
REVIEW_ITEMS = TypeAdapter(list[ReviewItem])
# Error types a 422 answer may name, beyond InputError.
_INPUT_ERRORS: dict[str, type[MembrainError]] = {
    "ScopeError": ScopeError,
    "ConfigurationError": ConfigurationError,
    "AnnotationError": AnnotationError,
}


class RemoteAccessError(MembrainError):
    """The server refused the API key (HTTP 401 or 403).

    A missing or unknown key answers 401; a key that does not cover the dataset, or whose
    role is below the call's, 403.

    Args:
        message: What the server said.
        status: The HTTP status.
    """

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


# -- requests and answers (shared by both clients) ------------------------------------------------
def unsupported(method: str, **given: bool) -> None:
    """Refuse the arguments of ``given`` that were used: the HTTP API has no field for them.

    Raises:
        ConfigurationError: naming every one used.
    """
    names = [name for name, used in given.items() if used]
    if names:
        why = " (the server names the API key as the actor of a change)" if "by" in names else ""
        raise ConfigurationError(
            f"RemoteMemory.{method} does not support {', '.join(names)}: "
            f"the HTTP API has no field for it{why}"
        )


def scope_fields(scope: Scope) -> dict[str, Any]:
    """The body fields naming ``scope``.

    Raises:
        ScopeError: ``scope`` is not a :class:`Scope`.
    """
    check_scope(scope)
    return {"dataset": scope.dataset, "task": scope.task, "session": scope.session}


def scope_query(scope: Scope) -> dict[str, str | list[str]]:
    """The query parameters naming ``scope`` (a GET or DELETE)."""
    return {name: value for name, value in scope_fields(scope).items() if value is not None}


def iso(value: datetime | None) -> str | None:
    """``value`` as ISO 8601 text (a naive time stays naive, as the server reads it)."""
    return value.isoformat() if value is not None else None


def add_call(
    messages: object,
    scope: Scope,
    on_progress: Callable[[int], None] | None,
    extract: bool,
    by: Actor | str | None,
    user_name: str,
    assistant_name: str,
) -> Call:
    """The request of :meth:`Memory.add`; messages are converted and checked here."""
    unsupported("add", on_progress=on_progress is not None, by=by is not None)
    fields = scope_fields(scope)
    incoming = as_messages(messages, user_name=user_name, assistant_name=assistant_name)
    if not incoming:
        raise InputError("no messages to add")
    sent = [message.model_dump(mode="json", exclude_none=True) for message in incoming]
    return Call("POST", "/add", {**fields, "messages": sent, "extract": bool(extract)})


def query_body(
    query: str,
    scope: Scope,
    mode: RetrievalMode | str,
    k: int,
    reference: datetime | None,
    as_of: datetime | None,
    valid_at: datetime | None,
    filters: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The body of a search or context request (``filters`` checked before sending)."""
    metadata_filter(filters)
    return {
        **scope_fields(scope),
        "query": query,
        "mode": RetrievalMode.parse(mode).value,
        "k": k,
        "reference": iso(reference),
        "as_of": iso(as_of),
        "valid_at": iso(valid_at),
        "filters": dict(filters) if filters else None,
    }


def forget_call(fact_ids: Sequence[str], scope: Scope, by: Actor | str | None, reason: str) -> Call:
    """The request of :meth:`Memory.forget`."""
    unsupported("forget", by=by is not None)
    body = {**scope_fields(scope), "fact_ids": as_ids(fact_ids), "reason": reason}
    return Call("POST", "/forget", body)


def supersede_call(
    old_fact_id: str,
    new_fact_ids: Sequence[str],
    scope: Scope,
    by: Actor | str | None,
    reason: str,
) -> Call:
    """The request of :meth:`Memory.supersede`."""
    unsupported("supersede", by=by is not None)
    if not isinstance(old_fact_id, str):
        raise InputError(f"a fact id must be a string, got {old_fact_id!r:.80}")
    body = {
        **scope_fields(scope),
        "old_fact_id": old_fact_id,
        "new_fact_ids": as_ids(new_fact_ids),
        "reason": reason,
    }
    return Call("POST", "/supersede", body)


def update_call(fact_id: str, text: str, scope: Scope, by: Actor | str | None, reason: str) -> Call:
    """The request of :meth:`Memory.update`."""
    unsupported("update", by=by is not None)
    if not isinstance(fact_id, str) or not isinstance(text, str):
        raise InputError("a fact id and its new text are strings")
    body = {**scope_fields(scope), "fact_id": fact_id, "text": text, "reason": reason}
    return Call("POST", "/update", body)


def extract_call(scope: Scope, on_progress: Callable[[int], None] | None) -> Call:
    """The request of :meth:`Memory.extract_pending`."""
    unsupported("extract_pending", on_progress=on_progress is not None)
    return Call("POST", "/extract", scope_fields(scope))


def facts_call(
    scope: Scope,
    include_inactive: bool,
    derived_from: Sequence[str],
    ids: Sequence[str] | None,
    filters: Mapping[str, object] | None = None,
) -> Call | None:
    """The request of :meth:`Memory.facts` (``None``: no ids, so no facts to ask for)."""
    query = {**scope_query(scope), "include_inactive": str(bool(include_inactive)).lower()}
    if metadata_filter(filters):
        query["filters"] = json.dumps(filters)
    if derived_from:
        query["derived_from"] = _strings(derived_from, "derived_from")
    if ids is not None:
        query["ids"] = _strings(ids, "ids")
        if not query["ids"]:
            return None
    return Call("GET", "/facts", query=query)


def one_fact_call(path: str, fact_id: str, scope: Scope) -> Call:
    """The request of an operation on one fact (``/fact``, ``/history``)."""
    if not isinstance(fact_id, str):
        raise InputError(f"a fact id must be a string, got {fact_id!r:.80}")
    return Call("GET", path, query={**scope_query(scope), "fact_id": fact_id})


def messages_call(scope: Scope, ids: Sequence[str] | None) -> Call | None:
    """The request of :meth:`Memory.messages` (``None``: no ids, so no messages to ask for)."""
    query = scope_query(scope)
    if ids is not None:
        query["ids"] = _strings(ids, "ids")
        if not query["ids"]:
            return None
    return Call("GET", "/messages", query=query)


def search_messages_call(query: str, scope: Scope, k: int, paths: Sequence[str]) -> Call:
    """The request of :meth:`Memory.search_messages`.

    Raises:
        ConfigurationError: ``paths`` is not a non-empty subset of the two evidence paths.
    """
    chosen = [paths] if isinstance(paths, str) else list(paths)
    if not chosen or set(chosen) - {SPARSE, DENSE}:
        raise ConfigurationError(f"paths must be a non-empty subset of {SPARSE!r}, {DENSE!r}")
    body = {**scope_fields(scope), "query": query, "k": k, "paths": chosen}
    return Call("POST", "/messages/search", body)


def evidence_hits(body: Any) -> list[EvidenceHit]:
    """The :class:`EvidenceHit` list of a message search answer."""
    return [
        EvidenceHit(message=Message.model_validate(hit["message"]), score=float(hit["score"]))
        for hit in body
    ]


def audit_call(
    scope: Scope,
    since: datetime | None,
    actions: Sequence[AuditAction | str] | None,
    targets: Sequence[str],
) -> Call:
    """The request of :meth:`Memory.audit` (no ``actions``: every action).

    Raises:
        ConfigurationError: an unknown action (refused before sending).
    """
    query = scope_query(scope)
    if since is not None:
        query["since"] = since.isoformat()  # naive stays naive, as Memory.audit reads it
    try:
        wanted = [AuditAction(a).value for a in actions or ()]
    except ValueError:
        known = ", ".join(a.value for a in AuditAction)
        raise ConfigurationError(f"unknown audit action in {actions!r}; known: {known}") from None
    if wanted:
        query["actions"] = wanted
    if targets:
        query["targets"] = _strings(targets, "targets")
    return Call("GET", "/audit", query=query)


def _strings(values: Sequence[str], name: str) -> list[str]:
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise InputError(f"{name} must be a list of strings")
    return list(values)


def confirm_call(fact_ids: Sequence[str], scope: Scope, by: Actor | str | None) -> Call:
    """The request of :meth:`Memory.confirm`."""
    unsupported("confirm", by=by is not None)
    return Call("POST", "/confirm", {**scope_fields(scope), "fact_ids": as_ids(fact_ids)})


def dispute_call(
    fact_ids: Sequence[str], scope: Scope, reason: str, by: Actor | str | None
) -> Call:
    """The request of :meth:`Memory.dispute`."""
    unsupported("dispute", by=by is not None)
    body = {**scope_fields(scope), "fact_ids": as_ids(fact_ids), "reason": reason}
    return Call("POST", "/dispute", body)


def resolve_call(
    item: ReviewItem | str,
    accept: bool,
    by: Actor | str | None,
    note: str,
    scope: Scope | None,
) -> Call:
    """The request of :meth:`Memory.resolve`.

    Raises:
        ScopeError: ``item`` is an id and ``scope`` is not given (the server needs it).
    """
    unsupported("resolve", by=by is not None)
    if isinstance(item, ReviewItem):
        item_id, scope = item.id, scope or item.scope
    elif isinstance(item, str):
        item_id = item
    else:
        raise InputError(f"a review item or its id, got {item!r:.80}")
    if scope is None:
        raise ScopeError("RemoteMemory.resolve needs scope= with a review item id")
    body = {**scope_fields(scope), "item_id": item_id, "accept": bool(accept), "note": note}
    return Call("POST", "/review/resolve", body)


def purge_call(
    fact_ids: Sequence[str],
    scope: Scope,
    messages: Sequence[str] | bool,
    by: Actor | str | None,
    reason: str,
) -> Call:
    """The request of :meth:`Memory.purge`."""
    unsupported("purge", by=by is not None)
    body: dict[str, Any] = {**scope_fields(scope), "fact_ids": as_ids(fact_ids), "reason": reason}
    if messages is True:
        body["sources"] = True
    elif messages is not False:
        body["message_ids"] = as_ids(messages, "message ids")
    return Call("POST", "/purge", body)


def purge_result(body: Any) -> PurgeResult:
    """The :class:`PurgeResult` of a ``purge`` answer."""
    return PurgeResult(
        fact_ids=tuple(body["fact_ids"]),
        message_ids=tuple(body["message_ids"]),
        entity_ids=tuple(body["entity_ids"]),
    )


def add_result(body: Any) -> AddResult:
    """The :class:`AddResult` of an ``add`` answer (errors as text in ExtractionError)."""
    return AddResult(
        messages_stored=int(body["messages_stored"]),
        messages_skipped=int(body["messages_skipped"]),
        messages_retried=int(body["messages_retried"]),
        fact_ids=tuple(body["fact_ids"]),
        entity_ids=tuple(body["entity_ids"]),
        discarded=int(body["discarded"]),
        errors=tuple(ExtractionError(str(error)) for error in body["errors"]),
        llm_calls=int(body["llm_calls"]),
        input_tokens=int(body["input_tokens"]),
        output_tokens=int(body["output_tokens"]),
    )


def search_result(question: str, mode: RetrievalMode | str, body: Any) -> SearchResult:
    """The :class:`SearchResult` of a ``search`` answer to ``question`` asked in ``mode``."""
    requested = RetrievalMode.parse(mode)
    ran = RetrievalMode(body["mode"])
    # ``auto`` ends as ``fast``, or as ``expand`` exactly when it escalated.
    escalated = body.get(
        "escalated", requested is RetrievalMode.AUTO and ran is RetrievalMode.EXPAND
    )
    return SearchResult(
        question=question,
        hits=tuple(HITS.validate_python(body["hits"])),
        requested=requested,
        mode=ran,
        escalated=bool(escalated),
        paths=tuple(body["paths"]),
    )


def error(response: httpx.Response) -> MembrainError:
    """The library error an error response stands for."""
    status = response.status_code
    try:
        body = response.json()
        text, kind = str(body["error"]), str(body["type"])
    except (ValueError, KeyError, TypeError):
        text, kind = response.text[:MAX_ERROR_CHARS] or response.reason_phrase, ""
    message = f"{text} ({_where(response)}: HTTP {status})"
    if status in (401, 403):
        return RemoteAccessError(message, status=status)
    if status == 404:
        return NotFoundError(message)
    if status == 409:
        return ConflictError(message)
    if status == 422:
        return _INPUT_ERRORS.get(kind, InputError)(message)
    if status == 413:  # the request is larger than the server reads
        return InputError(message)
    return BackendError(message)


def answer(response: httpx.Response, reader: Callable[[Any], T]) -> T:
    """The JSON of a successful ``response``, read by ``reader``.

    Raises:
        MembrainError: the error an error response stands for (see :func:`error`).
        BackendError: an answer that is not JSON, or not of the expected shape.
    """
    if not response.is_success:
        raise error(response)
    where = _where(response)
    try:
        body = response.json()
    except ValueError as exc:
        raise BackendError(f"the MemBrain server answered no JSON ({where})") from exc
    try:
        return reader(body)
    except (ValidationError, KeyError, TypeError, ValueError) as exc:
        raise BackendError(f"unexpected answer from the MemBrain server ({where}): {exc}") from exc


def _where(response: httpx.Response) -> str:
    return f"{response.request.method} {response.request.url.copy_with(query=None)}"


def check_url(url: str) -> str:
    """``url`` without a trailing slash.

    Raises:
        ConfigurationError: not an ``http://`` or ``https://`` URL.
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"the server URL must start with http:// or https://, got {url!r}")
    return url.rstrip("/")


def headers(api_key: str | None) -> dict[str, str]:
    """The headers that carry ``api_key``."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
