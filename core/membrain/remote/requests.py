"""The HTTP request of every served operation, and how its answer is read: no I/O here.

:func:`request` builds the :class:`Call` of one operation call: the method and path are the
operation's ``route`` in :data:`membrain.operations.OPERATIONS`, the fields come from its
entry in :data:`REQUESTS`, whose ``build`` turns the call's arguments (bound to the operation's
parameters, defaults applied; see :func:`membrain.surface.signature`) into the body of a POST
or the query of a GET or DELETE, checking them before anything is sent; ``read`` turns the
answer's JSON into the record :class:`~membrain.Memory` returns. Both remote clients send these
requests, one blocking and one awaiting, so they check and send the same request for the same
call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from membrain.arguments import DENSE, SPARSE, as_ids, check_scope
from membrain.audit import AuditAction, AuditEvent, FactHistory, ReviewItem
from membrain.errors import ConfigurationError, ExtractionError, InputError, ScopeError
from membrain.inputs import as_messages
from membrain.metadata import metadata_filter
from membrain.models import (
    Context,
    Entity,
    Fact,
    MemoryHit,
    Message,
    RetrievalMode,
    Scope,
    SearchResult,
    StoredMessage,
)
from membrain.operations import operation
from membrain.path_names import current_names
from membrain.profile import ProfileEntry
from membrain.remote.transport import Call
from membrain.results import AddResult, EvidenceHit, PurgeResult
from membrain.scope import STORED, dataset_part

__all__ = ["REQUESTS", "Answered", "Arguments", "Fields", "Request", "request", "scope_fields"]

Arguments = Mapping[str, Any]
"""A call's arguments by parameter name, defaults applied."""
Fields = dict[str, Any]
"""A request's fields: the JSON body of a POST, the query of a GET or DELETE."""


@dataclass(frozen=True, slots=True)
class Answered:
    """The result of a call that needs no request (no ids asked for: nothing to answer)."""

    value: Any


@dataclass(frozen=True, slots=True)
class Request:
    """How one operation is sent and its answer read."""

    build: Callable[[Arguments], Fields | Answered]
    read: Callable[[Any, Arguments], Any]


def _records(kind: Any) -> Callable[[Any, Arguments], Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return lambda body, _: adapter.validate_python(body, context=STORED)


# -- arguments ---------------------------------------------------------------------------------
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


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None  # a naive time stays naive


def _strings(values: Sequence[str], name: str) -> list[str]:
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise InputError(f"{name} must be a list of strings")
    return list(values)


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {value!r:.80}")
    return value


def _scoped(a: Arguments, **fields: Any) -> Fields:
    return {**scope_fields(a["scope"]), **fields}


# -- writes ------------------------------------------------------------------------------------
def _add(a: Arguments) -> Fields:
    unsupported("add", on_progress=a["on_progress"] is not None, by=a["by"] is not None)
    fields = scope_fields(a["scope"])
    names = {"user_name": a["user_name"], "assistant_name": a["assistant_name"]}
    incoming = as_messages(a["messages"], **names)
    if not incoming:
        raise InputError("no messages to add")
    sent = [message.model_dump(mode="json", exclude_none=True) for message in incoming]
    return {**fields, "messages": sent, "extract": bool(a["extract"])}


def _add_result(body: Any, _: Arguments) -> AddResult:
    """An ``add`` answer (extraction errors come back as text in ExtractionError)."""
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


def _extraction(name: str) -> Callable[[Arguments], Fields]:
    def build(a: Arguments) -> Fields:
        unsupported(name, on_progress=a["on_progress"] is not None)
        return _scoped(a)

    return build


def _dismiss(a: Arguments) -> Fields:
    unsupported("dismiss_failed", by=a["by"] is not None)
    ids = a["message_ids"]
    ids = None if ids is None else as_ids(ids, "message ids")
    return _scoped(a, message_ids=ids, reason=a["reason"])


def _forget(a: Arguments) -> Fields:
    unsupported("forget", by=a["by"] is not None)
    return _scoped(a, fact_ids=as_ids(a["fact_ids"]), reason=a["reason"])


def _supersede(a: Arguments) -> Fields:
    unsupported("supersede", by=a["by"] is not None)
    old = _text(a["old_fact_id"], "a fact id")
    new = as_ids(a["new_fact_ids"])
    return _scoped(a, old_fact_id=old, new_fact_ids=new, reason=a["reason"])


def _update(a: Arguments) -> Fields:
    unsupported("update", by=a["by"] is not None)
    fact_id, text = _text(a["fact_id"], "a fact id"), _text(a["text"], "a fact's new text")
    return _scoped(a, fact_id=fact_id, text=text, reason=a["reason"])


def _confirm(a: Arguments) -> Fields:
    unsupported("confirm", by=a["by"] is not None)
    return _scoped(a, fact_ids=as_ids(a["fact_ids"]))


def _dispute(a: Arguments) -> Fields:
    unsupported("dispute", by=a["by"] is not None)
    return _scoped(a, fact_ids=as_ids(a["fact_ids"]), reason=a["reason"])


def _resolve(a: Arguments) -> Fields:
    unsupported("resolve", by=a["by"] is not None)
    item, scope = a["item"], a["scope"]
    if isinstance(item, ReviewItem):
        item_id, scope = item.id, scope or item.scope
    elif isinstance(item, str):
        item_id = item
    else:
        raise InputError(f"a review item or its id, got {item!r:.80}")
    if scope is None:
        raise ScopeError("RemoteMemory.resolve needs scope= with a review item id")
    body = {"item_id": item_id, "accept": bool(a["accept"]), "note": a["note"]}
    return {**scope_fields(scope), **body}


def _purge(a: Arguments) -> Fields:
    unsupported("purge", by=a["by"] is not None)
    body: dict[str, Any] = {"fact_ids": as_ids(a["fact_ids"]), "reason": a["reason"]}
    messages = a["messages"]
    if messages is True:
        body["sources"] = True
    elif messages is not False:
        body["message_ids"] = as_ids(messages, "message ids")
    return _scoped(a, **body)


def _purge_result(body: Any, _: Arguments) -> PurgeResult:
    return PurgeResult(
        fact_ids=tuple(body["fact_ids"]),
        message_ids=tuple(body["message_ids"]),
        entity_ids=tuple(body["entity_ids"]),
    )


def _delete_dataset(a: Arguments) -> Fields:
    return {"dataset": dataset_part(a["dataset"])}


# -- reads -------------------------------------------------------------------------------------
def _query_body(a: Arguments) -> dict[str, Any]:
    """The body of a search or context request (``filters`` checked before sending)."""
    filters = a["filters"]
    metadata_filter(filters)
    return {
        **scope_fields(a["scope"]),
        "query": a["query"],
        "mode": RetrievalMode.parse(a["mode"]).value,
        "k": a["k"],
        "reference": _iso(a["reference"]),
        "as_of": _iso(a["as_of"]),
        "valid_at": _iso(a["valid_at"]),
        "filters": dict(filters) if filters else None,
    }


def _search(a: Arguments) -> Fields:
    body = _query_body(a)
    # A former path letter warns the client's caller (up through request, _call, the method and
    # its ``renamed`` wrapper) and is sent as the name it stands for.
    skip = current_names(as_ids(a["exclude_paths"], "exclude_paths"), stacklevel=6)
    body.update(exclude_paths=list(skip), rerank=a["rerank"])
    return body


_HITS = TypeAdapter(list[MemoryHit])


def _search_result(body: Any, a: Arguments) -> SearchResult:
    requested = RetrievalMode.parse(a["mode"])
    ran = RetrievalMode(body["mode"])
    # ``auto`` ends as ``fast``, or as ``expand`` exactly when it escalated.
    escalated = body.get(
        "escalated", requested is RetrievalMode.AUTO and ran is RetrievalMode.EXPAND
    )
    return SearchResult(
        question=a["query"],
        hits=tuple(_HITS.validate_python(body["hits"], context=STORED)),
        requested=requested,
        mode=ran,
        escalated=bool(escalated),
        paths=tuple(body["paths"]),
    )


def _context(a: Arguments) -> Fields:
    body = _query_body(a)
    body.update(
        max_tokens=a["max_tokens"],
        profile_tokens=a["profile_tokens"],
        profile_ratio=a["profile_ratio"],
    )
    return body


def _search_messages(a: Arguments) -> Fields:
    paths = a["paths"]
    chosen = [paths] if isinstance(paths, str) else list(paths)
    if not chosen or set(chosen) - {SPARSE, DENSE}:
        raise ConfigurationError(f"paths must be a non-empty subset of {SPARSE!r}, {DENSE!r}")
    return _scoped(a, query=a["query"], k=a["k"], paths=chosen)


def _evidence_hits(body: Any, _: Arguments) -> list[EvidenceHit]:
    return [
        EvidenceHit(message=Message.model_validate(hit["message"]), score=float(hit["score"]))
        for hit in body
    ]


def _facts(a: Arguments) -> Fields | Answered:
    query = _scoped(a, include_inactive=str(bool(a["include_inactive"])).lower())
    filters = a["filters"]
    if metadata_filter(filters):
        query["filters"] = json.dumps(filters)
    if a["derived_from"]:
        query["derived_from"] = _strings(a["derived_from"], "derived_from")
    if a["ids"] is not None:
        query["ids"] = _strings(a["ids"], "ids")
        if not query["ids"]:
            return Answered([])
    return query


def _messages(a: Arguments) -> Fields | Answered:
    if a["ids"] is None:
        return _scoped(a)
    ids = _strings(a["ids"], "ids")
    return _scoped(a, ids=ids) if ids else Answered([])


def _one_fact(a: Arguments) -> Fields:
    return _scoped(a, fact_id=_text(a["fact_id"], "a fact id"))


def _audit(a: Arguments) -> Fields:
    query: Fields = {}
    if a["since"] is not None:
        query["since"] = a["since"].isoformat()  # naive stays naive, as Memory.audit reads it
    try:
        wanted = [AuditAction(action).value for action in a["actions"] or ()]
    except ValueError:
        known = ", ".join(action.value for action in AuditAction)
        raise ConfigurationError(
            f"unknown audit action in {a['actions']!r}; known: {known}"
        ) from None
    if wanted:
        query["actions"] = wanted
    if a["targets"]:
        query["targets"] = _strings(a["targets"], "targets")
    return _scoped(a, **query)


def _scopes(a: Arguments) -> Fields:
    dataset = a["dataset"]
    return {} if dataset is None else {"dataset": dataset_part(dataset)}


def _listing(a: Arguments) -> Fields:
    return _scoped(a)


def _profile(a: Arguments) -> Fields:
    topics = a["topics"]
    return _scoped(a) if topics is None else _scoped(a, topics=_strings(topics, "topics"))


def _profile_put(a: Arguments) -> Fields:
    unsupported("profile_put", by=a["by"] is not None)
    topic, subtopic = _text(a["topic"], "a topic"), _text(a["subtopic"], "a subtopic")
    text, facts = _text(a["text"], "a profile text"), as_ids(a["facts"])
    return _scoped(a, topic=topic, subtopic=subtopic, text=text, facts=facts, reason=a["reason"])


def _profile_forget(a: Arguments) -> Fields:
    unsupported("profile_forget", by=a["by"] is not None)
    topic, subtopic = _text(a["topic"], "a topic"), _text(a["subtopic"], "a subtopic")
    return _scoped(a, topic=topic, subtopic=subtopic, reason=a["reason"])


def _profile_history(a: Arguments) -> Fields:
    topic, subtopic = _text(a["topic"], "a topic"), _text(a["subtopic"], "a subtopic")
    return _scoped(a, topic=topic, subtopic=subtopic)


def _nothing(body: Any, _: Arguments) -> None:
    """An answer whose content the caller does not need."""


REQUESTS: dict[str, Request] = {
    "add": Request(_add, _add_result),
    "extract_pending": Request(_extraction("extract_pending"), _add_result),
    "retry_failed": Request(_extraction("retry_failed"), _add_result),
    "dismiss_failed": Request(_dismiss, _records(list[str])),
    "search": Request(_search, _search_result),
    "context": Request(_context, _records(Context)),
    "search_messages": Request(_search_messages, _evidence_hits),
    "facts": Request(_facts, _records(list[Fact])),
    "get": Request(_one_fact, _records(Fact)),
    "messages": Request(_messages, _records(list[StoredMessage])),
    "entities": Request(_listing, _records(list[Entity])),
    "participants": Request(_listing, _records(list[str])),
    "scopes": Request(_scopes, _records(list[Scope])),
    "forget": Request(_forget, _records(list[Fact])),
    "supersede": Request(_supersede, _records(Fact)),
    "update": Request(_update, _records(Fact)),
    "confirm": Request(_confirm, _records(list[Fact])),
    "dispute": Request(_dispute, _records(ReviewItem)),
    "review_queue": Request(_listing, _records(list[ReviewItem])),
    "resolve": Request(_resolve, _records(ReviewItem)),
    "history": Request(_one_fact, _records(FactHistory)),
    "audit": Request(_audit, _records(list[AuditEvent])),
    "profile": Request(_profile, _records(list[ProfileEntry])),
    "profile_put": Request(_profile_put, _records(ProfileEntry)),
    "profile_forget": Request(_profile_forget, _records(ProfileEntry)),
    "profile_history": Request(_profile_history, _records(list[ProfileEntry])),
    "purge": Request(_purge, _purge_result),
    "delete_scope": Request(_listing, _nothing),
    "delete_dataset": Request(_delete_dataset, _records(list[Scope])),
}
"""The fields and answer of every served operation (``tests/unit/test_operations.py`` holds
the keys to the table)."""


def request(name: str, arguments: Arguments) -> Call | Answered:
    """The request of a call of operation ``name``, or its answer when none is needed.

    Raises:
        MembrainError: an argument the operation (or the HTTP API) refuses; nothing is sent.
    """
    fields = REQUESTS[name].build(arguments)
    if isinstance(fields, Answered):
        return fields
    route = operation(name).route
    assert route is not None, name
    method, path = route
    if method == "POST":
        return Call(method, path, fields)
    return Call(method, path, query={k: v for k, v in fields.items() if v is not None})
