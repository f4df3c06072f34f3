"""The routes of the HTTP API, one per operation of :data:`membrain.api.operations.OPERATIONS`.

Each operation is served at its ``route`` under ``/api/memory`` with the access it declares: a
POST reads the operation's request from its JSON body, a GET or DELETE from its query (a list
repeated, an object as JSON text). The request model checks it (the same checks, limits and
errors as every other surface), the key's holder is the actor of a change (a reviewer for a
person's decision), :meth:`Memory.execute <membrain.Memory.execute>` runs it in a worker thread,
and the result is answered as the operation encodes it. The OpenAPI document describes each
route with its request model.

An operation whose request holds a required scope is served on the scoped router, where
:func:`~membrain.server.app.authorize` checks the key for the scope's dataset before the route
runs. The others (``scopes``, ``delete_dataset``, ``apply_retention``, ``resolve`` by id,
``optimize``) check the datasets they name here; one that names none acts on every dataset and
needs a key for every dataset (``*``), except a listing, which shows the key's datasets only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema
from starlette.concurrency import run_in_threadpool

from membrain.api.errors import InputError, NotFoundError
from membrain.api.models import Actor, ActorKind, Scope
from membrain.api.operations import OPERATIONS, Operation
from membrain.api.requests import LOCAL, OperationRequest
from membrain.api.results import AddResult
from membrain.api.scope import PARTS_HEADER, dataset_part
from membrain.api.tokens import count_tokens
from membrain.background import BackgroundWriter
from membrain.server.keys import ALL_DATASETS, Access, Grant, KeyRing

if TYPE_CHECKING:
    from membrain.memory import Memory

__all__ = [
    "ROLE_FIELD",
    "Authenticated",
    "Authorized",
    "FactNotFound",
    "Granted",
    "authenticate",
    "authorize",
    "found_history",
    "openapi_schemas",
    "route_role",
    "scheduled_add",
    "scoped",
    "serve_operation",
]

ROLE_FIELD = "x-membrain-role"
"""The OpenAPI extension field in which a route declares the access it needs."""
_SCOPE_FIELDS = ("dataset", "task", "session")
_COMPONENTS = "#/components/schemas/{model}"
_bearer = HTTPBearer(auto_error=False, description="An API key from the server's keys file.")


class FactNotFound(NotFoundError):
    """A fact id that names no fact of the scope (HTTP 404)."""


@dataclass(frozen=True, slots=True)
class Authorized:
    """A request that passed the key check: its scope (scoped routes) and the key's grant.

    ``grant`` is ``None`` when the server runs without keys (loopback only).
    """

    scope: Scope | None
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

    def actor_of(self, op: Operation) -> Actor:
        """Who the audit log records for what ``op`` changes."""
        return self.reviewer if op.reviewer else self.actor


def route_role(route: object) -> Access:
    """The access ``route`` declares (``admin`` when it declares none: fail closed)."""
    extra = route.openapi_extra if isinstance(route, APIRoute) else None
    declared = (extra or {}).get(ROLE_FIELD)
    return (
        Access(declared) if isinstance(declared, str) and declared in set(Access) else Access.ADMIN
    )


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
    """Check the request's key for its scope's dataset and its route's access.

    The key is checked first (401), then the scope is read (422 when malformed), then the
    key's datasets and access (403).

    Raises:
        Unauthenticated: no key, or an unknown key.
        ScopeError: a missing or malformed scope.
        Forbidden: the key does not cover the dataset, or its access is below the route's.
    """
    role = route_role(request.scope.get("route"))
    grant = await authenticate(request, credentials)
    op = OPERATIONS.named(getattr(request.scope.get("route"), "name", ""))
    fields = await request_fields(request, op)
    scope = _scope_of(request, fields)
    if grant is not None:
        grant.check(scope.dataset, role)
    return Authorized(scope=scope, grant=grant)


Granted = Annotated[Authorized, Depends(authorize)]
"""A route parameter receiving the checked scope and grant (the check runs once)."""
Authenticated = Annotated[Grant | None, Depends(authenticate)]
"""A route parameter receiving the key's grant; the route checks the datasets it names."""


def _scope_of(request: Request, fields: dict[str, Any]) -> Scope:
    """The scope the fields name: stored parts when a remote client says so.

    Raises:
        ScopeError: a missing or malformed part.
    """
    dataset, task, session = (fields.get(name) for name in _SCOPE_FIELDS)
    if PARTS_HEADER in request.headers:
        return Scope.stored(dataset, task, session)  # type: ignore[arg-type]
    return Scope(dataset=dataset, task=task, session=session)


def scoped(op: Operation) -> bool:
    """Whether ``op`` is served within one scope, checked before the route runs."""
    return op.request.names_one_scope()


async def request_fields(request: Request, op: Operation) -> dict[str, Any]:
    """The fields ``request`` sends: its JSON body (POST) or its query (GET, DELETE).

    Raises:
        InputError: a body that is no JSON object.
    """
    if request.method == "POST":
        try:
            body = await request.json()
        except (ValueError, RecursionError):
            raise InputError("the request body must be a JSON object") from None
        if not isinstance(body, dict):
            raise InputError("the request body must be a JSON object")
        return body
    params: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        params.setdefault(name, []).append(value)
    return op.request.query_fields(params)


def _named_scope(request: Request, fields: dict[str, Any]) -> Scope | None:
    """The scope the fields name, read as stored parts when the client says so."""
    if fields.get("dataset") is None:
        return None
    return _scope_of(request, fields)


def _check_unscoped(
    request: Request, op: Operation, fields: dict[str, Any], grant: Grant | None
) -> tuple[dict[str, Any], Scope | None]:
    """The fields and scope of an operation served without a required scope, checked.

    Raises:
        ScopeError: a malformed scope or dataset.
        Forbidden: the key does not cover the dataset named, or every dataset when a change
            names none.
    """
    scope = _named_scope(request, fields) if "scope" in op.request.model_fields else None
    named = scope.dataset if scope is not None else None
    if "dataset" in op.request.model_fields and fields.get("dataset") is not None:
        named = dataset_part(fields["dataset"], stored=PARTS_HEADER in request.headers)
        fields = {**fields, "dataset": named}
    if grant is not None and (named is not None or op.mutates):
        grant.check(named if named is not None else ALL_DATASETS, op.role)
    return fields, scope


Policy = Callable[[OperationRequest, Any], Any]
"""What a server does with an operation's result before answering: the answer's JSON data."""


async def _answer(
    request: Request,
    op: Operation,
    memory: Memory,
    caller: Authorized,
    policy: Policy | None,
) -> Response:
    fields = await request_fields(request, op)
    scope: Scope | None = caller.scope
    if not scoped(op):
        fields, scope = _check_unscoped(request, op, fields, caller.grant)
    local = {"by": caller.actor_of(op)} if "by" in op.request.model_fields else {}
    checked = op.request.from_wire(fields, scope, **local)
    result = await run_in_threadpool(memory.execute, checked)
    if caller.grant is not None and scope is None and not op.mutates and isinstance(result, list):
        grant = caller.grant  # a listing across datasets shows the key's own
        result = [s for s in result if not isinstance(s, Scope) or grant.covers(s.dataset)]
    if policy is not None:
        return JSONResponse(policy(checked, result))
    return Response(op.dump_result_json(result), media_type="application/json")


def serve_operation(
    scoped_router: APIRouter,
    router: APIRouter,
    op: Operation,
    memory: Memory,
    policy: Policy | None = None,
) -> None:
    """Add ``op``'s route: on ``scoped_router`` (its scope checked first) or on ``router``."""
    method, path = op.route
    if scoped(op):

        async def endpoint(request: Request, caller: Granted) -> Response:
            return await _answer(request, op, memory, caller, policy)

        target = scoped_router
    else:

        async def endpoint(request: Request, grant: Authenticated) -> Response:  # type: ignore[misc]
            return await _answer(request, op, memory, Authorized(None, grant), policy)

        target = router
    endpoint.__name__ = op.name
    target.add_api_route(
        path,
        endpoint,
        methods=[method],
        name=op.name,
        summary=op.summary,
        description=inspect.cleandoc(op.request.__doc__ or op.summary),
        response_model=op.result,
        openapi_extra={ROLE_FIELD: op.role.value, **_documented(op)},
    )


# -- what a server adds to an operation --------------------------------------------------------
def found_history(request: Any, result: Any) -> Any:
    """``history``: a whole id naming nothing answers 404 (the embedded memory: no events)."""
    if not result.facts and not result.events:
        raise FactNotFound(f"no fact with id {request.fact_id} in scope {request.scope.key!r}")
    return OPERATIONS.named("history").dump_result(result)


def scheduled_add(writer: BackgroundWriter | None) -> Policy:
    """``add``: messages stored without extraction go to the background writer."""

    def after(request: Any, result: AddResult) -> Any:
        scope = request.scope
        scheduled = (
            not request.extract
            and writer is not None
            and result.messages_stored > 0
            and not scope.is_bookkeeping
        )
        if scheduled and writer is not None:
            writer.schedule(scope, tokens=sum(count_tokens(m.text) for m in request.messages))
        return {**OPERATIONS.named("add").dump_result(result), "scheduled": scheduled}

    return after


# -- the OpenAPI document -----------------------------------------------------------------------
class _WireSchema(GenerateJsonSchema):
    """JSON schemas of requests as sent: a callable (a local field) has none."""

    def callable_schema(self, schema: core_schema.CallableSchema) -> JsonSchemaValue:
        return {}


_SCOPE_PROPERTIES: dict[str, Any] = {
    "dataset": {"type": "string", "description": "Whose memory; the key must cover it."},
    "task": {"type": "string", "description": "Which agent or application."},
    "session": {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "description": "Optional session within the task.",
    },
}
_DEFINITIONS: dict[str, Any] = {}
"""Schemas the requests refer to, for the document's components."""


def _wire_schema(op: Operation) -> dict[str, Any]:
    schema = op.request.model_json_schema(
        ref_template=_COMPONENTS, schema_generator=_WireSchema, mode="validation"
    )
    _DEFINITIONS.update(schema.pop("$defs", {}))
    properties = dict(schema.get("properties", {}))
    required = [n for n in schema.get("required", []) if n not in (*LOCAL, "scope")]
    has_scope = "scope" in properties
    for name in (*LOCAL, "scope"):
        properties.pop(name, None)
    if has_scope:
        properties = {**_SCOPE_PROPERTIES, **properties}
        if scoped(op):
            required = ["dataset", "task", *required]
    return {"type": "object", "properties": properties, "required": required}


def _documented(op: Operation) -> dict[str, Any]:
    schema = _wire_schema(op)
    if op.route[0] == "POST":
        content = {"application/json": {"schema": schema}}
        return {"requestBody": {"required": True, "content": content}}
    return {
        "parameters": [
            {
                "name": name,
                "in": "query",
                "required": name in schema["required"],
                "schema": _query_schema(prop),
            }
            for name, prop in schema["properties"].items()
        ]
    }


def _query_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """A property as a query parameter's schema: an object travels as JSON text."""
    kinds = [prop] + list(prop.get("anyOf", []))
    if any(k.get("type") == "object" for k in kinds):
        return {"type": "string", "description": "A JSON object."}
    return prop


def openapi_schemas() -> dict[str, Any]:
    """The schemas the routes' requests refer to (for the document's components)."""
    return dict(_DEFINITIONS)
