"""The ``asyncio`` client: :class:`AsyncRemoteMemory`.

Its operations are :class:`~membrain.remote.RemoteMemory`'s: each checks the same request and
sends the same call (:func:`~membrain.remote.transport.call_of`), awaited on
``httpx.AsyncClient``. The methods come from :class:`~membrain.api.surface.AsyncMemoryLike`.
"""

from __future__ import annotations

from typing import Any

import httpx

from membrain.api.operations import OPERATIONS
from membrain.api.requests import OperationRequest
from membrain.api.surface import AsyncMemoryLike
from membrain.remote.common import API_PREFIX, RETRIES, answer, connection, headers, send_async
from membrain.remote.transport import call_of

__all__ = ["AsyncRemoteMemory"]


class AsyncRemoteMemory(AsyncMemoryLike):
    """A MemBrain server's memory, with :class:`~membrain.AsyncMemory`'s methods.

    The same arguments, answers and errors as :class:`~membrain.remote.RemoteMemory`, awaited
    on ``httpx.AsyncClient``: many calls may run at once on one event loop.

    Args:
        url: The server's base URL (``http://host:9574``). A user and password in it
            (``http://user:pw@host``) are sent as basic auth and never shown: ``url`` and
            every message hold the URL without them.
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
        self.url, auth = connection(url)
        self._retries = retries
        self._client = httpx.AsyncClient(
            base_url=self.url + API_PREFIX,
            headers=headers(api_key),
            auth=auth,
            timeout=timeout,
            transport=transport,
        )

    async def execute(self, request: OperationRequest) -> Any:
        """Send one checked request and read the answer (see :meth:`RemoteMemory.execute`)."""
        op = OPERATIONS.of(request)
        call = call_of(request, "AsyncRemoteMemory")
        response = await send_async(self._client, self.url, self._retries, call)
        return answer(response, op.load_result)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- lifecycle ---------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()
