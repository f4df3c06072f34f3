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
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from membrain.audit import AuditAction, AuditEvent, FactHistory, ReviewItem, ReviewPolicy
from membrain.config import MembrainSettings
from membrain.embeddings import DenseEncoder, SparseEncoder
from membrain.extraction.base import Extractor
from membrain.extraction.prompts import Prompts
from membrain.inputs import DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME, as_messages
from membrain.memory import Memory
from membrain.models import (
    Actor,
    Context,
    Entity,
    Fact,
    Message,
    RetrievalMode,
    Scope,
    SearchResult,
    StoredMessage,
)
from membrain.results import AddResult, EvidenceHit, PurgeResult
from membrain.retrieval.rerank import Reranker
from membrain.storage.base import DENSE, SPARSE, Backend

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

    async def optimize(self) -> None:
        """Build search indexes now (useful after a bulk load)."""
        await asyncio.to_thread(self._memory.optimize)

    # -- write -------------------------------------------------------------------------------
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

    async def extract_pending(
        self, *, scope: Scope, on_progress: Callable[[int], None] | None = None
    ) -> AddResult:
        """Extract every pending message of the scope (see ``Memory.extract_pending``)."""
        return await asyncio.to_thread(
            self._memory.extract_pending, scope=scope, on_progress=on_progress
        )

    async def retry_failed(
        self, *, scope: Scope, on_progress: Callable[[int], None] | None = None
    ) -> AddResult:
        """Extract again the messages marked failed (see :meth:`Memory.retry_failed`)."""
        return await asyncio.to_thread(
            self._memory.retry_failed, scope=scope, on_progress=on_progress
        )

    async def dismiss_failed(
        self,
        message_ids: Sequence[str] | None = None,
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> list[str]:
        """Give up on failed messages (see :meth:`Memory.dismiss_failed`)."""
        return await asyncio.to_thread(
            self._memory.dismiss_failed, message_ids, scope=scope, by=by, reason=reason
        )

    # -- read --------------------------------------------------------------------------------
    async def search(
        self,
        question: str,
        *,
        scope: Scope,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        k: int = 10,
        reference: datetime | None = None,
        exclude_paths: Sequence[str] = (),
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        rerank: bool = True,
    ) -> SearchResult:
        """The ``k`` facts that best answer ``question`` (see ``Memory.search``).

        Raises:
            ScopeError: ``scope`` is missing or malformed.
            InputError: empty question or ``k < 1``.
            ConfigurationError: unknown mode.
        """
        return await asyncio.to_thread(
            self._memory.search,
            question,
            scope=scope,
            mode=mode,
            k=k,
            reference=reference,
            exclude_paths=tuple(exclude_paths),
            as_of=as_of,
            valid_at=valid_at,
            rerank=rerank,
        )

    async def context(
        self,
        question: str,
        *,
        scope: Scope,
        max_tokens: int = 2000,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        k: int = 50,
        profile_tokens: int = 0,
        reference: datetime | None = None,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> Context:
        """A cited context block for ``question`` within ``max_tokens`` (see ``Memory.context``).

        Raises:
            InputError: ``max_tokens < 1`` or a reserve larger than the budget.
        """
        return await asyncio.to_thread(
            self._memory.context,
            question,
            scope=scope,
            max_tokens=max_tokens,
            mode=mode,
            k=k,
            profile_tokens=profile_tokens,
            reference=reference,
            as_of=as_of,
            valid_at=valid_at,
        )

    async def search_messages(
        self,
        question: str,
        *,
        scope: Scope,
        k: int = 10,
        paths: Sequence[str] = (SPARSE, DENSE),
    ) -> list[EvidenceHit]:
        """Search the raw messages (the evidence) directly (see ``Memory.search_messages``)."""
        return await asyncio.to_thread(
            self._memory.search_messages, question, scope=scope, k=k, paths=tuple(paths)
        )

    async def facts(
        self,
        *,
        scope: Scope,
        include_inactive: bool = False,
        derived_from: Sequence[str] = (),
        ids: Sequence[str] | None = None,
    ) -> list[Fact]:
        """Every fact of the scope (see :meth:`Memory.facts`)."""
        return await asyncio.to_thread(
            self._memory.facts,
            scope=scope,
            include_inactive=include_inactive,
            derived_from=tuple(derived_from),
            ids=None if ids is None else tuple(ids),
        )

    async def messages(
        self, *, scope: Scope, ids: Sequence[str] | None = None
    ) -> list[StoredMessage]:
        """Every stored message of the scope, or those of ``ids`` (see ``Memory.messages``)."""
        return await asyncio.to_thread(
            self._memory.messages, scope=scope, ids=None if ids is None else tuple(ids)
        )

    async def entities(self, *, scope: Scope) -> list[Entity]:
        """Every entity of the scope's (dataset, task)."""
        return await asyncio.to_thread(self._memory.entities, scope=scope)

    async def participants(self, *, scope: Scope) -> list[str]:
        """The speakers of the scope's (dataset, task) (see :meth:`Memory.participants`)."""
        return await asyncio.to_thread(self._memory.participants, scope=scope)

    # -- accountability ----------------------------------------------------------------------
    async def forget(
        self,
        fact_ids: Sequence[str],
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> list[Fact]:
        """Tombstone facts (see :meth:`Memory.forget`)."""
        return await asyncio.to_thread(
            self._memory.forget, fact_ids, scope=scope, by=by, reason=reason
        )

    async def supersede(
        self,
        old_fact_id: str,
        new_fact_ids: Sequence[str],
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> Fact:
        """Record that new facts replace an old one (see :meth:`Memory.supersede`)."""
        return await asyncio.to_thread(
            self._memory.supersede, old_fact_id, new_fact_ids, scope=scope, by=by, reason=reason
        )

    async def confirm(
        self, fact_ids: Sequence[str], *, scope: Scope, by: Actor | str | None = None
    ) -> list[Fact]:
        """A person confirms facts (see :meth:`Memory.confirm`)."""
        return await asyncio.to_thread(self._memory.confirm, fact_ids, scope=scope, by=by)

    async def dispute(
        self,
        fact_ids: Sequence[str],
        *,
        scope: Scope,
        reason: str = "",
        by: Actor | str | None = None,
    ) -> ReviewItem:
        """Dispute facts and queue them for review (see :meth:`Memory.dispute`)."""
        return await asyncio.to_thread(
            self._memory.dispute, fact_ids, scope=scope, reason=reason, by=by
        )

    async def review_queue(self, *, scope: Scope) -> list[ReviewItem]:
        """What a person should look at (see :meth:`Memory.review_queue`)."""
        return await asyncio.to_thread(self._memory.review_queue, scope=scope)

    async def resolve(
        self,
        item: ReviewItem | str,
        *,
        accept: bool = True,
        by: Actor | str | None = None,
        note: str = "",
        scope: Scope | None = None,
    ) -> ReviewItem:
        """Accept or reject a review item (see :meth:`Memory.resolve`)."""
        return await asyncio.to_thread(
            self._memory.resolve, item, accept=accept, by=by, note=note, scope=scope
        )

    async def history(self, fact_id: str, *, scope: Scope) -> FactHistory:
        """A fact's life, oldest first (see :meth:`Memory.history`)."""
        return await asyncio.to_thread(self._memory.history, fact_id, scope=scope)

    async def audit(
        self,
        *,
        scope: Scope,
        since: datetime | None = None,
        actions: Sequence[AuditAction | str] | None = None,
        targets: Sequence[str] = (),
    ) -> list[AuditEvent]:
        """The scope's audit log (see :meth:`Memory.audit`)."""
        return await asyncio.to_thread(
            self._memory.audit, scope=scope, since=since, actions=actions, targets=targets
        )

    async def purge(
        self,
        fact_ids: Sequence[str] = (),
        *,
        scope: Scope,
        messages: Sequence[str] | bool = (),
        by: Actor | str | None = None,
        reason: str = "",
    ) -> PurgeResult:
        """Erase content from every index and the store's files (see :meth:`Memory.purge`)."""
        return await asyncio.to_thread(
            self._memory.purge, fact_ids, scope=scope, messages=messages, by=by, reason=reason
        )

    async def apply_retention(
        self, *, scope: Scope | None = None, at: datetime | None = None
    ) -> PurgeResult:
        """Erase messages older than the retention setting (see ``Memory.apply_retention``)."""
        return await asyncio.to_thread(self._memory.apply_retention, scope=scope, at=at)

    async def delete_scope(self, scope: Scope) -> None:
        """Delete everything stored under ``scope`` (all sessions when it has none)."""
        await asyncio.to_thread(self._memory.delete_scope, scope)
