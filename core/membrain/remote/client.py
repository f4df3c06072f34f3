"""The blocking client: :class:`RemoteMemory`."""

from __future__ import annotations

from typing import Any

import httpx

from membrain.api.operations import OPERATIONS
from membrain.api.requests import OperationRequest
from membrain.api.surface import MemoryLike
from membrain.remote.common import API_PREFIX, RETRIES, answer, connection, headers, send
from membrain.remote.transport import call_of

__all__ = ["RemoteMemory"]


class RemoteMemory(MemoryLike):
    """A MemBrain server's memory, with :class:`~membrain.Memory`'s methods (blocking).

    Each operation of :data:`membrain.api.operations.OPERATIONS` is a method with
    :class:`~membrain.Memory`'s parameters (made by :class:`~membrain.api.surface.MemoryLike` from
    the operation's request): the call is checked into its request before anything is sent,
    sent to the operation's route (:func:`~membrain.remote.transport.call_of`), and the answer
    is read back into the record the memory returns.

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

    def execute(self, request: OperationRequest) -> Any:
        """Send one checked request and read the answer into the operation's result.

        Raises:
            ConfigurationError: the request sets ``by`` or ``on_progress`` (nothing is sent).
            MembrainError: the server's answer, as the embedded memory raises it.
        """
        op = OPERATIONS.of(request)
        response = send(self._client, self.url, self._retries, call_of(request, "RemoteMemory"))
        return answer(response, op.load_result)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
