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
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from membrain.audit import ReviewPolicy
from membrain.config import MembrainSettings
from membrain.embeddings import DenseEncoder, SparseEncoder
from membrain.extraction.base import Extractor
from membrain.extraction.prompts import Prompts
from membrain.inputs import DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME, as_messages
from membrain.memory import Memory
from membrain.models import (
    Actor,
    Message,
    Scope,
)
from membrain.operations import OPERATIONS, operation
from membrain.results import AddResult
from membrain.retrieval.rerank import Reranker
from membrain.storage.base import Backend

__all__ = ["AsyncMemory"]


class AsyncMemory:
    """Long-term memory for async agents: :class:`~membrain.Memory` with awaitable methods.

    Takes the same arguments as :class:`~membrain.Memory` (and builds one), or wraps an existing
    one with :meth:`from_memory`. Every public method of :class:`~membrain.Memory` is here as a
    coroutine with the same signature; :meth:`aclose` (or ``async with``) releases the store.

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

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        qdrant_url: str | None = None,
        qdrant_api_key: str | None = None,
        backend: Backend | None = None,
        dense: DenseEncoder | str | object | None = None,
        sparse: SparseEncoder | None = None,
        llm: object | None = None,
        prompts: Prompts | None = None,
        max_attempts: int = 3,
        extractor: Extractor | None = None,
        batch_size: int = 32,
        context_window: int = 6,
        review: ReviewPolicy | None = None,
        keep_messages: timedelta | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self._memory = Memory(
            path,
            qdrant_url=qdrant_url,
            qdrant_api_key=qdrant_api_key,
            backend=backend,
            dense=dense,
            sparse=sparse,
            llm=llm,
            prompts=prompts,
            max_attempts=max_attempts,
            extractor=extractor,
            batch_size=batch_size,
            context_window=context_window,
            review=review,
            keep_messages=keep_messages,
            reranker=reranker,
        )

    @classmethod
    def from_memory(cls, memory: Memory) -> AsyncMemory:
        """An AsyncMemory driving ``memory`` (closing one closes the other's store).

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

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- operations: add reads its messages on the loop; the rest are generated below -------
    async def add(
        self,
        messages: str | Iterable[Message | Mapping[str, Any] | object],
        *,
        scope: Scope,
        on_progress: Callable[[int], None] | None = None,
        extract: bool = True,
        by: Actor | str | None = None,
        user_name: str = DEFAULT_USER_NAME,
        assistant_name: str = DEFAULT_ASSISTANT_NAME,
    ) -> AddResult:
        """Store messages as evidence, then extract facts from them.

        See :meth:`Memory.add <membrain.Memory.add>`. ``messages`` is read before the call
        returns control to the loop; ``on_progress`` is called from the worker thread.

        Raises:
            ScopeError: ``scope`` is missing or malformed.
            InputError: a message is malformed (nothing is stored then).
        """
        batch = as_messages(messages, user_name=user_name, assistant_name=assistant_name)
        return await asyncio.to_thread(
            self._memory.add, batch, scope=scope, on_progress=on_progress, extract=extract, by=by
        )


def _snapshot(value: object) -> object:
    """A list, set or iterator argument as a tuple, read before the call leaves the loop."""
    if isinstance(value, list | set | frozenset | Iterator):
        return tuple(value)
    return value


def _threaded(name: str) -> Callable[..., Awaitable[Any]]:
    """The coroutine of operation ``name``: :class:`Memory`'s method, awaited in a thread."""
    method = getattr(Memory, name)

    async def run(self: AsyncMemory, /, *args: Any, **kwargs: Any) -> Any:
        args = tuple(_snapshot(a) for a in args)
        kwargs = {key: _snapshot(value) for key, value in kwargs.items()}
        return await asyncio.to_thread(getattr(self._memory, name), *args, **kwargs)

    run.__name__ = name
    run.__qualname__ = f"AsyncMemory.{name}"
    run.__doc__ = (
        f"{operation(name).summary}\n\n"
        f"Awaits :meth:`Memory.{name} <membrain.Memory.{name}>` in a worker thread (same "
        "arguments, same result, same errors)."
    )
    run.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return run


for _operation in OPERATIONS:
    if _operation.name not in vars(AsyncMemory):
        setattr(AsyncMemory, _operation.name, _threaded(_operation.name))
