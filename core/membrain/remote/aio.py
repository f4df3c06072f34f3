"""The ``asyncio`` client: :class:`AsyncRemoteMemory`.

Its operations are :class:`~membrain.remote.RemoteMemory`'s: each builds its request with the
blocking client's code (a client that builds requests and sends none) and awaits it on
``httpx.AsyncClient``, so both clients check and send the same request for the same call. One
coroutine per served operation of :data:`membrain.operations.OPERATIONS` is added when this
module is imported; type checkers read their signatures from ``aio.pyi``
(``python -m membrain.stubs`` writes it).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

from membrain.operations import OPERATIONS
from membrain.remote.client import RemoteMemory
from membrain.remote.common import (
    API_PREFIX,
    RETRIES,
    Call,
    answer,
    check_url,
    headers,
    send_async,
)

T = TypeVar("T")

__all__ = ["AsyncRemoteMemory"]


class AsyncRemoteMemory:
    """A MemBrain server's memory, with :class:`~membrain.AsyncMemory`'s methods.

    The same arguments, answers and errors as :class:`~membrain.remote.RemoteMemory`, awaited
    on ``httpx.AsyncClient``: many calls may run at once on one event loop.

    Args:
        url: The server's base URL (``http://host:9574``).
        api_key: A key from the server's keys file (``None`` for a server run without keys).
        timeout: Seconds to wait for each answer.
        transport: An ``httpx`` async transport (tests: ``httpx.MockTransport``).
        retries: Requests sent again after no answer or a 502/503/504 (see
            :class:`~membrain.remote.RemoteMemory`).

    Example:
        >>> async with AsyncRemoteMemory("http://127.0.0.1:9574", "mbk_...") as mem:
        ...     hits = await mem.search("What is the cat called?", scope=scope)
        ... # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        retries: int = RETRIES,
    ) -> None:
        self.url = check_url(url)
        self._retries = retries
        self._client = httpx.AsyncClient(
            base_url=self.url + API_PREFIX,
            headers=headers(api_key),
            timeout=timeout,
            transport=transport,
        )

    async def _send(self, call: Call, reader: Callable[[Any], T]) -> T:
        return answer(await send_async(self._client, self.url, self._retries, call), reader)

    # -- lifecycle ---------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def close(self) -> None:
        """Close the connection pool (the same as :meth:`aclose`)."""
        await self.aclose()

    async def __aenter__(self) -> AsyncRemoteMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@dataclass(frozen=True, slots=True)
class _Planned:
    """A request built and not sent: the call, and how to read its answer."""

    call: Call
    reader: Callable[[Any], Any]


class _Planner(RemoteMemory):
    """RemoteMemory's operations building their requests, sending none."""

    def __init__(self) -> None:  # no connection: nothing is sent
        pass

    def _send(self, call: Call, reader: Callable[[Any], T]) -> T:
        return cast(T, _Planned(call, reader))


_PLANNER = _Planner()


def _awaiting(name: str) -> Callable[..., Awaitable[Any]]:
    """The coroutine of operation ``name``: RemoteMemory's request, awaited."""
    blocking = getattr(RemoteMemory, name)

    async def run(self: AsyncRemoteMemory, /, *args: Any, **kwargs: Any) -> Any:
        planned = getattr(_PLANNER, name)(*args, **kwargs)
        if not isinstance(planned, _Planned):  # answered without asking (no ids, no facts)
            return planned
        return await self._send(planned.call, planned.reader)

    run.__name__ = name
    run.__qualname__ = f"AsyncRemoteMemory.{name}"
    run.__doc__ = blocking.__doc__
    run.__signature__ = inspect.signature(blocking)  # type: ignore[attr-defined]
    return run


for _operation in OPERATIONS:
    if _operation.route is not None:
        setattr(AsyncRemoteMemory, _operation.name, _awaiting(_operation.name))
