"""What the clients of a server share: the connection's settings, answers read, errors mapped.

An error response becomes the library's own error (:func:`error`); a successful one is read by
the caller's reader (:func:`answer`). Requests are built in :mod:`membrain.remote.transport`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpx
from pydantic import ValidationError

from membrain.api.errors import (
    AnnotationError,
    BackendError,
    ConfigurationError,
    ConflictError,
    InputError,
    MembrainError,
    NotFoundError,
    ScopeError,
)
from membrain.api.scope import PARTS_HEADER
from membrain.remote.transport import (
    RETRIES,
    Call,
    Transient,
    check_transient,
    encoded,
    redacted,
    retry_policy,
    send,
    send_async,
    unreachable,
)

__all__ = [
    "API_PREFIX",
    "RETRIES",
    "Call",
    "RemoteAccessError",
    "Transient",
    "answer",
    "check_transient",
    "check_url",
    "connection",
    "encoded",
    "error",
    "headers",
    "redacted",
    "retry_policy",
    "send",
    "send_async",
    "unreachable",
]

T = TypeVar("T")

API_PREFIX = "/api/memory"
MAX_ERROR_CHARS = 300
"""A non-JSON error body is quoted up to this length."""

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


# -- answers (shared by both clients and the store client) ------------------------------------
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
    url = response.request.url.copy_with(query=None, userinfo=b"")
    return f"{response.request.method} {url}"


def check_url(url: str) -> str:
    """``url`` without a trailing slash.

    Raises:
        ConfigurationError: not an ``http://`` or ``https://`` URL.
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        shown = redacted(url) if isinstance(url, str) else url
        raise ConfigurationError(
            f"the server URL must start with http:// or https://, got {shown!r}"
        )
    return url.rstrip("/")


def connection(url: str) -> tuple[str, httpx.BasicAuth | None]:
    """``url`` checked (:func:`check_url`) without its user and password, and their basic auth.

    httpx sends a URL's user and password as basic auth; kept apart from the URL, they never
    show where the URL does (an error, httpx's log of each request, the client's ``url``).

    Raises:
        ConfigurationError: not an ``http://`` or ``https://`` URL.
    """
    checked = check_url(url)
    try:
        parsed = httpx.URL(checked)
    except httpx.InvalidURL:
        return checked, None  # refused when first sent, its message redacted
    if not parsed.userinfo:
        return checked, None
    bare = str(parsed.copy_with(userinfo=b"")).rstrip("/")
    return bare, httpx.BasicAuth(parsed.username, parsed.password)


def headers(api_key: str | None) -> dict[str, str]:
    """The headers that carry ``api_key``, and say the scopes sent are stored parts."""
    sent = {PARTS_HEADER: "1"}  # a Scope holds encoded parts: the server must not encode again
    return {"Authorization": f"Bearer {api_key}", **sent} if api_key else sent
