"""What the HTTP API answers before and around its routes: errors, size and host guards.

Every error answers as JSON ``{"error": "<one line>", "type": "<ErrorClass>"}``
(:func:`error_response`); :func:`status_of` maps MemBrain's errors to statuses. The ASGI
guards wrap the application: :class:`BodyLimit` (413 before a too large body is read),
:class:`LoopbackHostsOnly` (a server without keys answers loopback hosts only) and
:class:`UnexpectedErrors` (a generic 500, the traceback in the log).
"""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Message as AsgiMessage
from starlette.types import Scope as AsgiScope

from membrain.api.checks import MAX_JSON_DEPTH, is_loopback
from membrain.api.errors import (
    BackendError,
    ConfigurationError,
    ConflictError,
    InputError,
    MembrainError,
    NotFoundError,
    ScopeError,
)
from membrain.server.keys import AuthError

__all__ = [
    "MAX_ERROR_CHARS",
    "BodyLimit",
    "LoopbackHostsOnly",
    "RequestTooLarge",
    "UnexpectedErrors",
    "body_limit",
    "error_response",
    "http_error",
    "is_loopback_host",
    "membrain_error",
    "status_of",
    "validation_error",
]

log = logging.getLogger("membrain.server")

MAX_ERROR_CHARS = 300
"""Error messages are cut to this length (they may quote a caller's input)."""


class RequestTooLarge(HTTPException):
    """A request body larger than the server reads (HTTP 413).

    Args:
        limit: The largest body the server reads, in bytes.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(
            413, f"the request body is larger than {limit:,} bytes; send it in smaller parts"
        )


def status_of(exc: MembrainError) -> int:
    """The HTTP status a MemBrain error answers with."""
    if isinstance(exc, AuthError):
        return exc.status
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, InputError | ScopeError | ConfigurationError):
        return 422
    return 503  # the store failed, or the memory cannot serve now (its writer is shut down)


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    """The JSON error body: ``message`` on one line, cut to :data:`MAX_ERROR_CHARS`.

    A lone surrogate the message quotes (a JSON id such as a bare high surrogate) is escaped.
    """
    text = " ".join(message.split()) or kind
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    return JSONResponse({"error": text, "type": kind}, status_code=status)


async def membrain_error(request: Request, exc: Exception) -> Response:
    """Answer a :class:`MembrainError` with its status (refusals and failures are logged)."""
    assert isinstance(exc, MembrainError)
    status = status_of(exc)
    if isinstance(exc, AuthError):
        client = request.client.host if request.client else "?"
        log.warning("refused %s %s from %s: %s", request.method, request.url.path, client, exc)
    elif isinstance(exc, BackendError) or status == 503:
        log.error("%s %s failed: %r", request.method, request.url.path, exc)
    return error_response(status, str(exc).strip().split("\n", 1)[0], type(exc).__name__)


async def validation_error(request: Request, exc: Exception) -> Response:
    """Answer a request that does not fit its schema: 422, the first problems on one line."""
    assert isinstance(exc, RequestValidationError)
    problems = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    more = len(exc.errors()) - len(problems)
    summary = "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")
    return error_response(422, summary or "invalid request", "ValidationError")


async def http_error(request: Request, exc: Exception) -> Response:
    """Answer Starlette's HTTP errors as ours; FastAPI's 400 for an unreadable body is a 422."""
    assert isinstance(exc, HTTPException)
    if isinstance(exc, RequestTooLarge):
        return _too_large(exc)
    if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
        # as a shallower body past the bound is refused by the records' checks
        return error_response(422, f"the request body: {_TOO_DEEP}", "InputError")
    if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
        return error_response(
            422, _unreadable(exc.__cause__), "ValidationError"
        )  # FastAPI's body parse
    return error_response(exc.status_code, str(exc.detail), "HTTPError")


_TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels"


def _unreadable(cause: BaseException) -> str:
    """Why a request body is not JSON (what FastAPI's 400 does not say)."""
    if isinstance(cause, UnicodeDecodeError):
        return "the request body is not valid UTF-8"
    return "the request body is not valid JSON"


def _too_large(exc: RequestTooLarge) -> JSONResponse:
    response = error_response(exc.status_code, str(exc.detail), type(exc).__name__)
    response.headers["Connection"] = "close"  # the rest of the body is not read
    return response


class BodyLimit:
    """Answers 413 to a request body larger than ``limit`` bytes, without reading it.

    A ``Content-Length`` over the limit is refused before the application runs; a body of
    unknown length (chunked) is counted as it streams in and refused at the first chunk past
    the limit.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:  # noqa: D102
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _too_large(RequestTooLarge(self.limit))(scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> AsgiMessage:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise RequestTooLarge(self.limit)
            return message

        async def watched(message: AsgiMessage) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except RequestTooLarge as exc:  # read outside a route (the routes answer it themselves)
            if started:
                raise
            await _too_large(exc)(scope, receive, send)


def body_limit(value: object) -> int:
    """``value`` when it is a usable request body limit: a positive number of bytes.

    Raises:
        ConfigurationError: it is not.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"the largest request body must be a positive number of bytes, not {value!r:.40}"
        )
    return value


class LoopbackHostsOnly:
    """Answers 403 to a request whose ``Host`` is not ``localhost`` or a loopback address.

    A server without keys trusts whoever reaches it; a page in a browser on the same machine
    could, by rebinding its own name to 127.0.0.1 (DNS rebinding), but its requests still
    carry that name.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:  # noqa: D102
        if scope["type"] == "http":
            host = _header(scope, b"host")
            if not is_loopback_host(host):
                shown = host.decode("latin-1") if host is not None else "(none)"
                message = (
                    f"host {shown!r} is refused: a server without API keys answers only "
                    "requests for localhost, 127.0.0.1 or [::1]"
                )
                await error_response(403, message, "Forbidden")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def is_loopback_host(value: bytes | None) -> bool:
    """Whether a ``Host`` header names a loopback host (``localhost``, ``127.0.0.1``, ``[::1]``).

    An optional port may follow; a name other than ``localhost`` is never resolved.
    """
    if not value:
        return False
    host = value.decode("latin-1").strip().lower()
    if host.startswith("["):  # [v6 address] with an optional port
        name, closed, rest = host[1:].partition("]")
        port = rest.removeprefix(":") if rest.startswith(":") else None
        if not closed or (rest and not (port and port.isdigit())):
            return False
        return ":" in name and is_loopback(name)
    name, colon, port = host.partition(":")
    if colon and not port.isdigit():
        return False
    return is_loopback(name)


def _header(scope: AsgiScope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _content_length(scope: AsgiScope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class UnexpectedErrors:
    """Answers an unexpected exception with a generic 500 and logs its traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:  # noqa: D102
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: AsgiMessage) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception:
            log.exception("unexpected error in %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            response = error_response(500, "internal server error", "InternalError")
            await response(scope, receive, send)
