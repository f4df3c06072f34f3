"""How both remote clients send a request: encoded once, sent again when no answer came.

:class:`Call` is a request built apart from any I/O (:func:`call_of` makes it from an
operation's request); :func:`encoded` turns it into bytes (or an
``InputError`` before anything is sent); :func:`send` and :func:`send_async` send it with
tenacity's retries on a connection failure or a 502/503/504.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from membrain.api.checks import is_unicode
from membrain.api.errors import BackendError, ConfigurationError, InputError, ScopeError
from membrain.api.operations import OPERATIONS
from membrain.api.requests import OperationRequest

__all__ = [
    "RETRIES",
    "Call",
    "Transient",
    "call_of",
    "check_transient",
    "encoded",
    "redacted",
    "retry_policy",
    "send",
    "send_async",
    "unreachable",
]


# -- retries -----------------------------------------------------------------------------------
RETRIES = 2
"""How many times a request that got no answer, or a 502/503/504, is sent again by default."""
_TRANSIENT_STATUS = frozenset({502, 503, 504})


class Transient(Exception):  # noqa: N818 - a signal to the retry loop, never raised to callers
    """An answer worth asking again for (a gateway or an unavailable server)."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def check_transient(response: httpx.Response) -> httpx.Response:
    """``response``, or :class:`Transient` when its status says to ask again."""
    if response.status_code in _TRANSIENT_STATUS:
        raise Transient(response)
    return response


def _is_transient(exc: BaseException) -> bool:
    """No answer came (connection refused or reset), or a gateway or unavailable server.

    A read timeout is not retried: the server may still be working on the request.
    """
    if isinstance(exc, Transient | httpx.ConnectTimeout):
        return True
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)


def retry_policy(retries: int) -> dict[str, Any]:
    """Tenacity's arguments for ``retries`` more attempts, backing off from 0.25 s.

    Every call may be sent again safely: adds are idempotent (message ids are deterministic),
    and so are forget, supersede and the reads.
    """
    return {
        "stop": stop_after_attempt(max(retries, 0) + 1),
        "wait": wait_exponential(multiplier=0.25, max=2.0),
        "retry": retry_if_exception(_is_transient),
        "reraise": True,
    }


def send(client: httpx.Client, url: str, retries: int, call: Call) -> httpx.Response:
    """Send ``call`` (again after no answer or a 502/503/504, see :func:`retry_policy`).

    Raises:
        InputError: ``call`` cannot be encoded (see :func:`encoded`); nothing is sent.
        BackendError: no answer came, after every retry.
    """
    content, sent = encoded(call)
    try:
        for attempt in Retrying(**retry_policy(retries)):
            with attempt:
                return check_transient(
                    client.request(
                        call.method,
                        call.path,
                        content=content,
                        headers=sent,
                        params=call.query or None,
                    )
                )
    except Transient as exc:
        return exc.response
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise unreachable(url, exc) from exc
    raise AssertionError("unreachable: tenacity returns or raises")


async def send_async(
    client: httpx.AsyncClient, url: str, retries: int, call: Call
) -> httpx.Response:
    """:func:`send` on an async client."""
    content, sent = encoded(call)
    try:
        async for attempt in AsyncRetrying(**retry_policy(retries)):
            with attempt:
                return check_transient(
                    await client.request(
                        call.method,
                        call.path,
                        content=content,
                        headers=sent,
                        params=call.query or None,
                    )
                )
    except Transient as exc:
        return exc.response
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise unreachable(url, exc) from exc
    raise AssertionError("unreachable: tenacity returns or raises")


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request: method, path under ``/api/memory``, JSON body or query."""

    method: str
    path: str
    body: dict[str, Any] | None = None
    query: dict[str, str | list[str]] = field(default_factory=dict)


def call_of(request: OperationRequest, client: str) -> Call:
    """The HTTP call of ``request``: its operation's route, its fields as body or query.

    Raises:
        ConfigurationError: ``request`` sets a field of the calling process only (``by``,
            ``on_progress``): a served memory names the API key instead.
        ScopeError: a request a served memory reads within one scope names none.
    """
    op = OPERATIONS.of(request)
    local = request.local_arguments()
    if local:
        why = " (the server names the API key as the actor of a change)" if "by" in local else ""
        raise ConfigurationError(
            f"{client}.{op.name} does not support {', '.join(local)}: "
            f"the HTTP API has no field for it{why}"
        )
    if request.names_one_scope() and getattr(request, "scope", None) is None:
        raise ScopeError(f"{client}.{op.name} needs scope= (a served memory checks its dataset)")
    method, path = op.route
    if method == "POST":
        return Call(method, path, request.wire())
    return Call(method, path, query=request.params())


def encoded(call: Call) -> tuple[bytes | None, dict[str, str]]:
    """The JSON body of ``call`` as UTF-8 bytes (as httpx writes it), and its headers.

    Raises:
        InputError: a text in the body or the query is not valid Unicode (a lone surrogate),
            or a value JSON cannot carry (NaN, an object); nothing is sent then.
    """
    for name, value in call.query.items():
        for text in [value] if isinstance(value, str) else value:
            if not is_unicode(text):
                raise InputError(f"{name} is not valid Unicode text (a lone surrogate?)")
    if call.body is None:
        return None, {}
    try:
        text = json.dumps(call.body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        content = text.encode("utf-8")
    except UnicodeEncodeError:
        where = _not_unicode(call.body) or "a text"
        raise InputError(f"{where} is not valid Unicode text (a lone surrogate?)") from None
    except (TypeError, ValueError) as exc:
        raise InputError(f"the request cannot be sent as JSON: {exc}") from None
    return content, {"Content-Type": "application/json"}


def _not_unicode(value: object, where: str = "") -> str | None:
    """Where in ``value`` the first text that is not valid Unicode is (``messages.0.text``)."""
    if isinstance(value, str):
        return None if is_unicode(value) else where or "a text"
    parts: list[tuple[object, object]] = []
    if isinstance(value, dict):
        parts = list(value.items())
    elif isinstance(value, list | tuple):
        parts = list(enumerate(value))
    for key, part in parts:
        name = f"{where}.{key}" if where else str(key)
        if isinstance(key, str) and not is_unicode(key):
            return where or "a key"
        found = _not_unicode(part, name)
        if found:
            return found
    return None


def unreachable(url: str, exc: Exception) -> BackendError:
    """The error for a request that got no answer (connection refused, timeout, bad URL).

    A user and password in the URL (or quoted by the failure) are hidden.
    """
    return BackendError(redacted(f"cannot reach the MemBrain server at {url}: {exc}"))


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s]*@")


def redacted(text: str) -> str:
    """``text`` with the user and password of every URL in it hidden: ``http://***@host``."""
    return _USERINFO.sub(r"\1***@", text)
