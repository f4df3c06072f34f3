"""The blocking client: :class:`RemoteMemory`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from membrain.arguments import renamed
from membrain.operations import OPERATIONS, operation
from membrain.remote.common import API_PREFIX, RETRIES, answer, connection, headers, send
from membrain.remote.requests import REQUESTS, Answered, request
from membrain.surface import MemoryLike, signature

__all__ = ["RemoteMemory", "bound", "describe"]

F = TypeVar("F", bound=Callable[..., Any])


class RemoteMemory(MemoryLike):
    """A MemBrain server's memory, with :class:`~membrain.Memory`'s methods (blocking).

    Each served operation of :data:`membrain.operations.OPERATIONS` is a method with
    :class:`~membrain.Memory`'s parameters (declared on :class:`~membrain.surface.MemoryLike`):
    the call is checked and its request built (:mod:`membrain.remote.requests`) before
    anything is sent, and the answer is read back into the record the memory returns.

    Args:
        url: The server's base URL (``http://host:9574``). A user and password in it
            (``http://user:pw@host``) are sent as basic auth and never shown: ``url`` and
            every message hold the URL without them.
        api_key: A key from the server's keys file (``None`` for a server run without keys).
        timeout: Seconds to wait for each answer (an ``add`` that extracts may take long).
        transport: An ``httpx`` transport (tests: ``httpx.MockTransport``).
        retries: How many times a request is sent again when no answer came (connection
            refused or reset) or the answer was 502, 503 or 504, backing off from 0.25 s. A
            read timeout is not retried.

    Example:
        >>> from membrain import Scope
        >>> from membrain.remote import RemoteMemory
        >>> mem = RemoteMemory("http://127.0.0.1:9574", api_key="mbk_...")  # doctest: +SKIP
        >>> scope = Scope(dataset="sara", task="assistant")
        >>> mem.search("What is the cat called?", scope=scope)[0].fact.text  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        retries: int = RETRIES,
    ) -> None:
        self.url, auth = connection(url)
        self._retries = retries
        self._client = httpx.Client(
            base_url=self.url + API_PREFIX,
            headers=headers(api_key),
            auth=auth,
            timeout=timeout,
            transport=transport,
        )

    def _call(self, name: str, arguments: dict[str, Any]) -> Any:
        planned = request(name, arguments)
        if isinstance(planned, Answered):
            return planned.value
        read = REQUESTS[name].read
        response = send(self._client, self.url, self._retries, planned)
        return answer(response, lambda body: read(body, arguments))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


def bound(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call of operation ``name`` by parameter, defaults applied.

    Raises:
        TypeError: as a call with these arguments would (a missing or unknown one).
    """
    arguments = signature(name).bind(None, *args, **kwargs)
    arguments.apply_defaults()
    return dict(list(arguments.arguments.items())[1:])  # without ``self``


def describe(name: str, cls: str, run: F) -> F:
    """``run`` named as ``cls``'s method of operation ``name``, with its signature and docs.

    An operation taking a ``query`` still reads ``question=``, its former name, with a warning.
    """
    run.__name__ = name
    run.__qualname__ = f"{cls}.{name}"
    run.__doc__ = (
        f"{operation(name).summary}\n\nSee :meth:`Memory.{name} <membrain.Memory.{name}>`: the "
        "same arguments, result and errors, from the server."
    )
    run.__signature__ = signature(name)  # type: ignore[attr-defined]
    return renamed("question", "query")(run) if "query" in signature(name).parameters else run


def _blocking(name: str) -> Callable[..., Any]:
    def run(self: RemoteMemory, /, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, bound(name, args, kwargs))

    return describe(name, "RemoteMemory", run)


for _operation in OPERATIONS:
    if _operation.route is not None:
        setattr(RemoteMemory, _operation.name, _blocking(_operation.name))
