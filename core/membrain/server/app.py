"""The HTTP API over one :class:`~membrain.Memory`: a FastAPI application.

Every route under ``/api/memory`` names a scope (``dataset``, ``task``, optional ``session``:
in the JSON body of a POST, in the query of a GET or DELETE) and declares the role it needs.
One dependency, :func:`authorize`, is attached to the whole router: it reads the route's
role, checks the bearer key against the keys file for the scope's dataset and hands the route
the checked scope (:data:`Granted`), so no route can skip the check. A route that declares no
role needs ``admin``.

Errors answer as JSON ``{"error": "<one line>", "type": "<ErrorClass>"}``: bad input 422, an
unknown fact or message 404, a request that contradicts what is stored 409 (a message id reused
for another text, superseding a retracted fact), a missing or unknown key 401, a key without
the dataset or role 403, a body larger than ``max_body_bytes`` 413 (refused before it is read),
a store that cannot serve 503, anything unexpected 500 with a generic message (the traceback
goes to the log, never to the client).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from membrain.audit import AuditEvent, FactHistory, ReviewItem
from membrain.background import BackgroundWriter
from membrain.checks import loads_json
from membrain.config import DEFAULT_MAX_BODY_BYTES
from membrain.errors import (
    InputError,
    MembrainError,
    NotFoundError,
)
from membrain.inputs import as_messages
from membrain.memory import Memory
from membrain.models import Actor, ActorKind, Context, Entity, Fact, Scope, StoredMessage
from membrain.profile import ProfileEntry
from membrain.scope import PARTS_HEADER, dataset_part
from membrain.server.guards import (
    BodyLimit,
    LoopbackHostsOnly,
    RequestTooLarge,
    UnexpectedErrors,
    body_limit,
    http_error,
    is_loopback_host,
    membrain_error,
    validation_error,
)
from membrain.server.inspector import mount_inspector
from membrain.server.keys import Access, Grant, KeyRing
from membrain.server.schemas import (
    AddRequest,
    AddResponse,
    ConfirmRequest,
    ContextRequest,
    DeleteScopeResponse,
    DismissRequest,
    DisputeRequest,
    ErrorBody,
    EvidenceHitBody,
    ExtractRequest,
    ForgetRequest,
    HealthResponse,
    MessageSearchRequest,
    ModelResponse,
    Profile,
    ProfileForgetRequest,
    ProfilePutRequest,
    PurgeRequest,
    PurgeResponse,
    ResolveRequest,
    SearchRequest,
    SearchResponse,
    SupersedeRequest,
    UpdateRequest,
)
from membrain.tokens import count_tokens

__all__ = [
    "ROLE_FIELD",
    "Authorized",
    "FactNotFound",
    "Granted",
    "RequestTooLarge",
    "authenticate",
    "authorize",
    "body_limit",
    "create_app",
    "is_loopback_host",
]

log = logging.getLogger("membrain.server")

ROLE_FIELD = "x-membrain-role"
"""The OpenAPI extension field in which a route declares the role it needs."""
API_PREFIX = "/api/memory"

_bearer = HTTPBearer(auto_error=False, description="An API key from the server's keys file.")


class FactNotFound(NotFoundError):
    """A fact id that names no fact of the scope (HTTP 404)."""


@dataclass(frozen=True, slots=True)
class Authorized:
    """A request that passed the key check: its scope and the key's grant.

    ``grant`` is ``None`` when the server runs without keys (loopback only).
    """

    scope: Scope
    grant: Grant | None

    @property
    def actor(self) -> Actor:
        """Who the audit log records for changes made by this request."""
        return self.grant.actor if self.grant is not None else Actor(kind=ActorKind.API)

    @property
    def reviewer(self) -> Actor:
        """Who the audit log records for a person's decision (confirm, dispute, resolve)."""
        name = self.grant.name if self.grant is not None else ""
        return Actor(kind=ActorKind.REVIEWER, name=name)


def needs(role: Access) -> dict[str, Any]:
    """The ``openapi_extra`` that declares the role a route needs."""
    return {ROLE_FIELD: role.value}


def route_role(route: object) -> Access:
    """The role ``route`` declares (``admin`` when it declares none: fail closed)."""
    extra = route.openapi_extra if isinstance(route, APIRoute) else None
    declared = (extra or {}).get(ROLE_FIELD)
    return (
        Access(declared) if isinstance(declared, str) and declared in set(Access) else Access.ADMIN
    )


def json_object(text: str | None, name: str) -> dict[str, Any] | None:
    """A query parameter holding a JSON object (``None`` when not given).

    Raises:
        InputError: not a JSON object.
    """
    if text is None:
        return None
    value = loads_json(text, name)
    if not isinstance(value, dict):
        raise InputError(f"{name} must be a JSON object")
    return value


def _scope_query(
    dataset: Annotated[str, Query(description="Whose memory; the key must cover it.")],
    task: Annotated[str, Query(description="Which agent or application.")],
    session: Annotated[str | None, Query(description="Optional session within the task.")] = None,
) -> None:
    """Documents the scope query parameters; ``authorize`` reads and checks them."""


async def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Grant | None:
    """The grant of the request's key (``None`` on a server run without keys).

    The dependency of routes that check datasets themselves (an extension's routes, whose
    requests name several datasets): they call ``grant.check(dataset, role)`` for each.

    Raises:
        Unauthenticated: no key, or an unknown key.
    """
    keys: KeyRing | None = request.app.state.keys
    if keys is None:
        return None
    return keys.authenticate(credentials.credentials if credentials else None)


async def authorize(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Authorized:
    """Check the request's key for its scope's dataset and its route's role.

    The key is checked first (401), then the scope is read (422 when malformed), then the
    key's datasets and role (403).

    Raises:
        Unauthenticated: no key, or an unknown key.
        ScopeError: a missing or malformed scope.
        Forbidden: the key does not cover the dataset, or its role is below the route's.
    """
    role = route_role(request.scope.get("route"))
    grant = await authenticate(request, credentials)
    fields = await _scope_fields(request)  # stored parts when a remote client sends them
    scope = Scope.stored(**fields) if PARTS_HEADER in request.headers else Scope(**fields)
    if grant is not None:
        grant.check(scope.dataset, role)
    return Authorized(scope=scope, grant=grant)


Granted = Annotated[Authorized, Depends(authorize)]
"""A route parameter receiving the checked scope and grant (the check runs once)."""

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (401, 403, 404, 409, 422, 500, 503)
}


def create_app(
    memory: Memory,
    *,
    keys: KeyRing | None,
    writer: BackgroundWriter | None = None,
    close_memory: bool = False,
    extensions: Sequence[APIRouter] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """The HTTP API over ``memory``.

    Args:
        memory: The memory to serve.
        keys: The API keys; ``None`` serves every request without a key (loopback only:
            :func:`membrain.server.serve` refuses any other host then, and a request whose
            ``Host`` header names no loopback host answers 403, so a web page cannot reach
            the server through a name it rebinds to 127.0.0.1).
        writer: Extracts what ``add`` stores with ``extract=false``; without one such
            messages stay pending until an ``add`` extracts them.
        close_memory: At shutdown, after the writer has flushed, close ``memory``.
        extensions: More routes (see :func:`membrain.server.extensions`); each route depends
            on :func:`authenticate` and checks the datasets it touches itself.
        max_body_bytes: The largest request body read; a larger one answers 413 before it is
            read (on its ``Content-Length``, or as soon as a streamed body passes the limit).

    Raises:
        ConfigurationError: ``max_body_bytes`` is not a positive integer.

    Example:
        >>> app = create_app(Memory(path="/tmp/mem"), keys=KeyRing.load("keys.toml"))
        ... # doctest: +SKIP
    """
    max_body_bytes = body_limit(max_body_bytes)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.closed = False
        yield
        await run_in_threadpool(_shutdown, memory, writer, close_memory)
        app.state.closed = close_memory

    app = FastAPI(
        title="MemBrain",
        summary="Accountable long-term memory for LLM agents.",
        version=_version(),
        lifespan=lifespan,
    )

    app.state.keys = keys
    router = APIRouter(prefix=API_PREFIX, dependencies=[Depends(authorize)], responses=ERRORS)
    in_query = [Depends(_scope_query)]

    @router.post("/add", openapi_extra=needs(Access.WRITE))
    def add(body: AddRequest, access: Granted) -> AddResponse:
        """Store messages, then extract their facts (or hand extraction to the writer)."""
        messages = as_messages(body.messages)
        result = memory.add(messages, scope=access.scope, extract=body.extract, by=access.actor)
        scheduled = (
            not body.extract
            and writer is not None
            and result.messages_stored > 0
            and not access.scope.is_bookkeeping
        )
        if scheduled and writer is not None:
            writer.schedule(access.scope, tokens=sum(count_tokens(m.text) for m in messages))
        return AddResponse.of(result, scheduled=scheduled)

    @router.post("/extract", openapi_extra=needs(Access.WRITE))
    def extract(body: ExtractRequest, access: Granted) -> AddResponse:
        """Extract the scope's pending messages now; answers when they are done."""
        return AddResponse.of(memory.extract_pending(scope=access.scope))

    @router.post("/retry", openapi_extra=needs(Access.WRITE))
    def retry(body: ExtractRequest, access: Granted) -> AddResponse:
        """Extract the scope's failed messages again; answers when they are done."""
        return AddResponse.of(memory.retry_failed(scope=access.scope))

    @router.post("/dismiss", openapi_extra=needs(Access.WRITE))
    def dismiss(body: DismissRequest, access: Granted) -> list[str]:
        """Give up on failed messages: kept as evidence, never extracted again."""
        return memory.dismiss_failed(
            body.message_ids, scope=access.scope, by=access.actor, reason=body.reason
        )

    @router.post("/search", response_model=SearchResponse, openapi_extra=needs(Access.READ))
    def search(body: SearchRequest, access: Granted) -> ModelResponse:
        """The ``k`` facts that best answer the question, with their sources."""
        result = memory.search(
            body.query,
            scope=access.scope,
            mode=body.mode,
            k=body.k,
            reference=body.reference,
            exclude_paths=tuple(body.exclude_paths),
            as_of=body.as_of,
            valid_at=body.valid_at,
            rerank=body.rerank,
            filters=body.filters,
        )
        return ModelResponse(SearchResponse.of(result))

    @router.post("/context", response_model=Context, openapi_extra=needs(Access.READ))
    def context(body: ContextRequest, access: Granted) -> ModelResponse:
        """A cited context block for the question that fits ``max_tokens``."""
        found = memory.context(
            body.query,
            scope=access.scope,
            max_tokens=body.max_tokens,
            profile_tokens=body.profile_tokens,
            profile_ratio=body.profile_ratio,
            mode=body.mode,
            k=body.k,
            reference=body.reference,
            as_of=body.as_of,
            valid_at=body.valid_at,
            filters=body.filters,
        )
        return ModelResponse(found)

    @router.post("/messages/search", openapi_extra=needs(Access.READ))
    def search_messages(body: MessageSearchRequest, access: Granted) -> list[EvidenceHitBody]:
        """The stored messages that best match the question (BM25, dense or both fused)."""
        found = memory.search_messages(
            body.query, scope=access.scope, k=body.k, paths=tuple(body.paths)
        )
        return [EvidenceHitBody.of(hit) for hit in found]

    @router.get("/facts", openapi_extra=needs(Access.READ), dependencies=in_query)
    def facts(
        access: Granted,
        include_inactive: bool = False,
        derived_from: Annotated[list[str] | None, Query()] = None,
        ids: Annotated[list[str] | None, Query()] = None,
        filters: Annotated[str | None, Query(description="A JSON object (as in search).")] = None,
    ) -> list[Fact]:
        """Every fact of the scope (active only unless ``include_inactive``).

        ``derived_from`` (repeatable) keeps the facts citing one of these messages, ``ids``
        (repeatable) only these facts, ``filters`` (JSON) those whose metadata meets them.
        """
        return memory.facts(
            scope=access.scope,
            include_inactive=include_inactive,
            derived_from=tuple(derived_from or ()),
            ids=ids,
            filters=json_object(filters, "filters"),
        )

    @router.get("/messages", openapi_extra=needs(Access.READ), dependencies=in_query)
    def messages(
        access: Granted, ids: Annotated[list[str] | None, Query()] = None
    ) -> list[StoredMessage]:
        """Every stored message of the scope, with its processing status.

        ``ids`` (repeatable) keeps only these messages (caller's or stored ids).
        """
        return memory.messages(scope=access.scope, ids=ids)

    @router.post("/forget", openapi_extra=needs(Access.WRITE))
    def forget(body: ForgetRequest, access: Granted) -> list[Fact]:
        """Tombstone facts: kept for audit, out of every search; returns them as updated."""
        return memory.forget(body.fact_ids, scope=access.scope, by=access.actor, reason=body.reason)

    @router.post("/supersede", openapi_extra=needs(Access.WRITE))
    def supersede(body: SupersedeRequest, access: Granted) -> Fact:
        """Record that new facts replace an old one; returns the old fact as updated."""
        return memory.supersede(
            body.old_fact_id,
            body.new_fact_ids,
            scope=access.scope,
            by=access.actor,
            reason=body.reason,
        )

    @router.post("/update", openapi_extra=needs(Access.WRITE))
    def update(body: UpdateRequest, access: Granted) -> Fact:
        """Replace a fact by a new statement of it; returns the new fact."""
        return memory.update(
            body.fact_id, body.text, scope=access.scope, by=access.actor, reason=body.reason
        )

    @router.post("/confirm", openapi_extra=needs(Access.WRITE))
    def confirm(body: ConfirmRequest, access: Granted) -> list[Fact]:
        """A person confirms facts: trust ``confirmed``; returns them as updated."""
        return memory.confirm(body.fact_ids, scope=access.scope, by=access.reviewer)

    @router.post("/dispute", openapi_extra=needs(Access.WRITE))
    def dispute(body: DisputeRequest, access: Granted) -> ReviewItem:
        """A person disputes facts: trust ``disputed``; returns the review item opened."""
        return memory.dispute(
            body.fact_ids, scope=access.scope, reason=body.reason, by=access.reviewer
        )

    @router.get("/entities", openapi_extra=needs(Access.READ), dependencies=in_query)
    def entities(access: Granted) -> list[Entity]:
        """The entities of the scope's (dataset, task)."""
        return memory.entities(scope=access.scope)

    @router.get("/participants", openapi_extra=needs(Access.READ), dependencies=in_query)
    def participants(access: Granted) -> list[str]:
        """The people who speak in the scope's conversations."""
        return memory.participants(scope=access.scope)

    @router.get("/review", openapi_extra=needs(Access.READ), dependencies=in_query)
    def review(access: Granted) -> list[ReviewItem]:
        """The scope's open review items, oldest first."""
        return memory.review_queue(scope=access.scope)

    @router.post("/review/resolve", openapi_extra=needs(Access.WRITE))
    def resolve(body: ResolveRequest, access: Granted) -> ReviewItem:
        """Accept (apply the change) or reject a review item; returns it as decided."""
        return memory.resolve(
            body.item_id,
            accept=body.accept,
            by=access.reviewer,
            note=body.note,
            scope=access.scope,
        )

    @router.get("/profile", openapi_extra=needs(Access.READ), dependencies=in_query)
    def profile(access: Granted, topics: Annotated[list[str] | None, Query()] = None) -> Profile:
        """The user profile's current entries, in block order (stale ones marked)."""
        return memory.profile(scope=access.scope, topics=topics)

    @router.post("/profile", openapi_extra=needs(Access.WRITE))
    def profile_put(body: ProfilePutRequest, access: Granted) -> ProfileEntry:
        """Set a profile entry: a new version citing facts (the previous one kept)."""
        return memory.profile_put(
            body.topic,
            body.subtopic,
            body.text,
            scope=access.scope,
            facts=body.facts,
            by=access.actor,
            reason=body.reason,
        )

    @router.post("/profile/forget", openapi_extra=needs(Access.WRITE))
    def profile_forget(body: ProfileForgetRequest, access: Granted) -> ProfileEntry:
        """Remove a profile entry; the version that removes it."""
        return memory.profile_forget(
            body.topic, body.subtopic, scope=access.scope, by=access.actor, reason=body.reason
        )

    @router.get("/profile/history", openapi_extra=needs(Access.READ), dependencies=in_query)
    def profile_history(
        access: Granted, topic: Annotated[str, Query()], subtopic: Annotated[str, Query()]
    ) -> Profile:
        """Every version of a profile entry, oldest first."""
        return memory.profile_history(topic, subtopic, scope=access.scope)

    @router.post("/purge", openapi_extra=needs(Access.ADMIN))
    def purge(body: PurgeRequest, access: Granted) -> PurgeResponse:
        """Erase content from every index and the store's files; the audit keeps the ids."""
        messages: list[str] | bool = True if body.sources else body.message_ids
        if body.sources and body.message_ids:
            raise InputError("name message_ids or set sources, not both")
        result = memory.purge(
            body.fact_ids,
            scope=access.scope,
            messages=messages,
            by=access.actor,
            reason=body.reason,
        )
        return PurgeResponse.of(result)

    @router.delete("/scope", openapi_extra=needs(Access.ADMIN), dependencies=in_query)
    def delete_scope(access: Granted) -> DeleteScopeResponse:
        """Delete everything stored under the scope (every session when it names none)."""
        memory.delete_scope(access.scope)
        scope = access.scope
        return DeleteScopeResponse(dataset=scope.dataset, task=scope.task, session=scope.session)

    @router.get("/fact", openapi_extra=needs(Access.READ), dependencies=in_query)
    def get(access: Granted, fact_id: Annotated[str, Query()]) -> Fact:
        """One fact by its id, whatever its status."""
        return memory.get(fact_id, scope=access.scope)

    @router.get("/history", openapi_extra=needs(Access.READ), dependencies=in_query)
    def history(access: Granted, fact_id: Annotated[str, Query()]) -> FactHistory:
        """A fact's life: the facts it replaced and that replaced it, and every event."""
        found = memory.history(fact_id, scope=access.scope)
        if not found.facts and not found.events:
            raise FactNotFound(f"no fact with id {fact_id} in scope {access.scope.key!r}")
        return found

    @router.get("/audit", openapi_extra=needs(Access.READ), dependencies=in_query)
    def audit(
        access: Granted,
        since: datetime | None = None,
        actions: Annotated[list[str] | None, Query()] = None,
        targets: Annotated[list[str] | None, Query()] = None,
    ) -> list[AuditEvent]:
        """The scope's audit log, oldest first (from ``since``, of ``actions``, on ``targets``)."""
        return memory.audit(
            scope=access.scope, since=since, actions=actions, targets=tuple(targets or ())
        )

    # Scopes are listed across tasks: the key's datasets decide what is shown, not one scope.
    listing = APIRouter(prefix=API_PREFIX, responses=ERRORS)

    @listing.get("/scopes", openapi_extra=needs(Access.READ))
    def scopes(
        request: Request,
        grant: Annotated[Grant | None, Depends(authenticate)],
        dataset: str | None = None,
    ) -> list[Scope]:
        """The (dataset, task) scopes holding records, of the datasets the key may read."""
        if dataset is not None:
            dataset = dataset_part(dataset, stored=PARTS_HEADER in request.headers)
        if grant is not None and dataset is not None:
            grant.check(dataset, Access.READ)  # every role reads: only the dataset is checked
        found = memory.scopes(dataset)
        return [s for s in found if grant is None or grant.covers(s.dataset)]

    @listing.delete("/dataset", openapi_extra=needs(Access.ADMIN))
    def delete_dataset(
        request: Request,
        grant: Annotated[Grant | None, Depends(authenticate)],
        dataset: Annotated[str, Query(description="Whose memory: every task of it goes.")],
    ) -> list[Scope]:
        """Delete every task of a dataset (a whole user); the scopes deleted."""
        dataset = dataset_part(dataset, stored=PARTS_HEADER in request.headers)
        if grant is not None:
            grant.check(dataset, Access.ADMIN)
        return memory.delete_dataset(dataset)

    @app.get("/api/health")
    def health() -> HealthResponse:
        """The server is up (no key needed)."""
        return HealthResponse(version=_version())

    app.include_router(router)
    app.include_router(listing)
    mount_inspector(app, memory, keys)  # the web inspector at /ui, behind the same keys
    for extension in extensions:
        app.include_router(extension)
    app.add_exception_handler(MembrainError, membrain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(UnexpectedErrors)
    if keys is None:
        app.add_middleware(LoopbackHostsOnly)
    return app


async def _scope_fields(request: Request) -> dict[str, Any]:
    """The ``dataset``, ``task`` and ``session`` the request names (query, else JSON body)."""
    names = ("dataset", "task", "session")
    if request.method in ("GET", "HEAD", "DELETE"):
        return {name: request.query_params.get(name) for name in names}
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        raise InputError("the request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise InputError("the request body must be a JSON object")
    return {name: body.get(name) for name in names}


def _shutdown(memory: Memory, writer: BackgroundWriter | None, close_memory: bool) -> None:
    if writer is not None and not writer.shutdown(timeout=60.0):
        log.warning("the background writer did not finish; unextracted messages stay pending")
    if close_memory:
        memory.close()


def _version() -> str:
    try:
        return metadata.version("membrain-memory")
    except metadata.PackageNotFoundError:
        return "unknown"
