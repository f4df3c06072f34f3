"""The HTTP API over one :class:`~membrain.Memory`: a FastAPI application.

Every operation of :data:`membrain.api.operations.OPERATIONS` is served under ``/api/memory`` at
its route, with the access it declares (:mod:`membrain.server.routes`). An operation naming
one scope (``dataset``, ``task``, optional ``session``: in the JSON body of a POST, in the
query of a GET or DELETE) is on a router with one dependency, :func:`authorize`: it reads the
route's access, checks the bearer key against the keys file for the scope's dataset and hands
the route the checked scope (:data:`Granted`), so no such route can skip the check. A route
that declares no access needs ``admin``.

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
from importlib import metadata
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from membrain.api.config import DEFAULT_MAX_BODY_BYTES
from membrain.api.errors import MembrainError
from membrain.api.operations import OPERATIONS
from membrain.background import BackgroundWriter
from membrain.memory import Memory
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
from membrain.server.keys import KeyRing
from membrain.server.routes import (
    ROLE_FIELD,
    Authorized,
    FactNotFound,
    Granted,
    Policy,
    authenticate,
    authorize,
    found_history,
    openapi_schemas,
    route_role,
    scheduled_add,
    serve_operation,
)
from membrain.server.schemas import ErrorBody, HealthResponse

__all__ = [
    "API_PREFIX",
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
    "route_role",
]

log = logging.getLogger("membrain.server")

API_PREFIX = "/api/memory"


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
    # Operations naming one scope: the key is checked for its dataset before the route runs.
    scoped = APIRouter(prefix=API_PREFIX, dependencies=[Depends(authorize)], responses=ERRORS)
    # The others check each dataset they name themselves (a listing: the key's datasets).
    unscoped = APIRouter(prefix=API_PREFIX, responses=ERRORS)
    policies: dict[str, Policy] = {"add": scheduled_add(writer), "history": found_history}
    for op in OPERATIONS:
        serve_operation(scoped, unscoped, op, memory, policies.get(op.name))

    @app.get("/api/health")
    def health() -> HealthResponse:
        """The server is up (no key needed)."""
        return HealthResponse(version=_version())

    app.include_router(scoped)
    app.include_router(unscoped)
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
    document = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            components = document().setdefault("components", {}).setdefault("schemas", {})
            for name, schema in openapi_schemas().items():  # what the requests refer to
                components.setdefault(name, schema)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]
    return app


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
