"""The :class:`AsyncMemory` facade: :class:`~membrain.Memory` for ``asyncio`` code.

The embedded engines (Qdrant Edge, tantivy, the ONNX encoder) have no async client, so
:class:`AsyncMemory` is a thin driver: every method runs the same :class:`~membrain.Memory`
method in a worker thread (:func:`asyncio.to_thread`) and awaits it. All planning stays in
:class:`~membrain.Memory`; the two facades differ only in how they wait for I/O.

Calls from many tasks at once are safe: the memory and its backends are thread-safe, and each call
runs in its own worker thread (the event loop's default executor). A cancelled call stops waiting
but the thread finishes its work; the write path is idempotent, so a later ``add`` of the same
messages writes nothing twice.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from membrain.api.config import MembrainSettings
from membrain.api.errors import ConfigurationError
from membrain.api.requests import OperationRequest
from membrain.api.surface import AsyncMemoryLike
from membrain.memory import Memory

__all__ = ["AsyncMemory"]


def _signature() -> inspect.Signature:
    """``Memory.__init__``'s signature, whose ``path`` may also be an open ``Memory``."""
    signature = inspect.signature(Memory.__init__)
    path = signature.parameters["path"]
    wrapped = path.replace(annotation=f"Memory | {path.annotation}")
    return signature.replace(
        parameters=[wrapped if p.name == "path" else p for p in signature.parameters.values()]
    )


class AsyncMemory(AsyncMemoryLike):
    """Long-term memory for async agents: :class:`~membrain.Memory` with awaitable methods.

    Takes the same arguments as :class:`~membrain.Memory` (and builds one), or an open
    :class:`~membrain.Memory` alone, which it wraps and shares: ``AsyncMemory(mem)``, the same as
    :meth:`from_memory`. Every operation of :class:`~membrain.Memory` is here as a coroutine with
    the same parameters; :meth:`aclose` (or ``async with``) releases the store.

    A wrapped memory has one store: closing either the ``Memory`` or the ``AsyncMemory`` closes
    it for both (closing again is harmless). Close it where it was opened, e.g.
    ``with Memory(...) as mem:`` around the code that uses ``AsyncMemory(mem)``.

    Raises:
        ConfigurationError: A ``Memory`` was given together with other arguments.

    Example:
        >>> import asyncio
        >>> from membrain import Scope
        >>> from membrain.aio import AsyncMemory
        >>> async def main() -> None:
        ...     async with AsyncMemory(path="/tmp/mem") as mem:
        ...         scope = Scope(dataset="sara", task="assistant")
        ...         await mem.add([{"speaker": "Sara", "text": "I adopted a cat named Miso.",
        ...                         "timestamp": "2024-03-15T14:01:00Z"}], scope=scope)
        ...         hits = await mem.search("What is the cat called?", scope=scope)
        >>> asyncio.run(main())  # doctest: +SKIP
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        given = args[0] if args else kwargs.get("path")
        if isinstance(given, Memory):
            if len(args) + len(kwargs) > 1:
                raise ConfigurationError(
                    "AsyncMemory(memory) wraps an open Memory and takes no other argument; "
                    "configure the Memory itself"
                )
            self._memory = given
            return
        self._memory = Memory(*args, **kwargs)

    __init__.__signature__ = _signature()  # type: ignore[attr-defined]

    @classmethod
    def from_memory(cls, memory: Memory) -> AsyncMemory:
        """An AsyncMemory driving ``memory``: ``AsyncMemory(memory)`` (one store, closed once).

        Example:
            >>> amem = AsyncMemory.from_memory(Memory(path="/tmp/mem"))  # doctest: +SKIP
        """
        instance = cls.__new__(cls)
        instance._memory = memory
        return instance

    @classmethod
    def from_settings(cls, settings: MembrainSettings | None = None) -> AsyncMemory:
        """An AsyncMemory configured like :meth:`Memory.from_settings <membrain.Memory>`.

        Reads ``settings``, or the ``MEMBRAIN_*`` environment variables when it is ``None``.
        """
        return cls.from_memory(Memory.from_settings(settings))

    @property
    def memory(self) -> Memory:
        """The synchronous :class:`~membrain.Memory` this facade drives."""
        return self._memory

    # -- lifecycle ---------------------------------------------------------------------------
    async def aclose(self, *, drain_timeout: float = 5.0) -> None:
        """Drain the background writers, then release the store (:meth:`Memory.close`)."""
        await asyncio.to_thread(self._memory.close, drain_timeout=drain_timeout)

    async def close(self, *, drain_timeout: float = 5.0) -> None:
        """Drain the background writers, then release the store (the same as :meth:`aclose`)."""
        await self.aclose(drain_timeout=drain_timeout)

    async def execute(self, request: OperationRequest) -> Any:
        """Run one checked request: :meth:`Memory.execute <membrain.Memory.execute>`, awaited.

        The request is built on the caller's loop (messages given as a generator are read
        there, and a list changed after the call changes nothing), then run in a worker thread.
        """
        return await asyncio.to_thread(self._memory.execute, request)
