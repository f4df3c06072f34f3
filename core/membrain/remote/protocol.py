"""What the framework adapters need of a memory, as a :class:`typing.Protocol`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from membrain.arguments import DENSE, SPARSE
from membrain.inputs import DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME
from membrain.models import (
    Actor,
    Context,
    Fact,
    Message,
    RetrievalMode,
    Scope,
    SearchResult,
    StoredMessage,
)
from membrain.remote.client import RemoteMemory
from membrain.results import AddResult, EvidenceHit

__all__ = ["MemoryLike", "actor_for"]


@runtime_checkable
class MemoryLike(Protocol):
    """What the framework adapters use of a memory.

    :class:`~membrain.Memory` and :class:`~membrain.remote.RemoteMemory` both provide it, so an
    adapter typed with it runs on an embedded memory or on a server's. One difference is
    deliberate: ``add(..., extract=False)`` leaves an embedded memory's messages pending until
    something extracts them (a :class:`~membrain.background.BackgroundWriter`, or
    :meth:`extract_pending`), while a server hands them to its own background writer.
    """

    def add(
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
        """Store messages as evidence, then extract facts from them."""
        ...

    def extract_pending(
        self, *, scope: Scope, on_progress: Callable[[int], None] | None = None
    ) -> AddResult:
        """Extract every pending message of the scope now."""
        ...

    def search(
        self,
        query: str,
        *,
        scope: Scope,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        k: int = 10,
        reference: datetime | None = None,
        exclude_paths: Sequence[str] = (),
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        rerank: bool = True,
        filters: Mapping[str, object] | None = None,
    ) -> SearchResult:
        """The ``k`` facts that best answer ``query``."""
        ...

    def context(
        self,
        query: str,
        *,
        scope: Scope,
        max_tokens: int = 2000,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        k: int = 50,
        profile_tokens: int = 0,
        reference: datetime | None = None,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        filters: Mapping[str, object] | None = None,
    ) -> Context:
        """A cited context block for ``query`` that fits ``max_tokens``."""
        ...

    def search_messages(
        self,
        query: str,
        *,
        scope: Scope,
        k: int = 10,
        paths: Sequence[str] = (SPARSE, DENSE),
    ) -> list[EvidenceHit]:
        """Search the raw messages (the evidence) directly."""
        ...

    def get(self, fact_id: str, *, scope: Scope) -> Fact:
        """One fact by its id, whatever its status."""
        ...

    def facts(
        self,
        *,
        scope: Scope,
        include_inactive: bool = False,
        derived_from: Sequence[str] = (),
        ids: Sequence[str] | None = None,
        filters: Mapping[str, object] | None = None,
    ) -> list[Fact]:
        """Every fact of the scope (active only unless ``include_inactive``)."""
        ...

    def messages(self, *, scope: Scope, ids: Sequence[str] | None = None) -> list[StoredMessage]:
        """Every stored message of the scope (or those of ``ids``), with its status."""
        ...

    def forget(
        self,
        fact_ids: Sequence[str],
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> list[Fact]:
        """Tombstone facts; returns them as updated."""
        ...

    def supersede(
        self,
        old_fact_id: str,
        new_fact_ids: Sequence[str],
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> Fact:
        """Record that ``new_fact_ids`` replace ``old_fact_id``; returns the old fact."""
        ...

    def update(
        self,
        fact_id: str,
        text: str,
        *,
        scope: Scope,
        reason: str = "",
        by: Actor | str | None = None,
    ) -> Fact:
        """Replace a fact by a new statement of it; returns the new fact."""
        ...

    def delete_scope(self, scope: Scope) -> None:
        """Delete everything stored under ``scope``."""
        ...

    def close(self) -> None:
        """Release the memory (or the connection to it)."""
        ...


def actor_for(memory: MemoryLike, by: Actor | str) -> Actor | str | None:
    """The ``by=`` an adapter passes to ``memory``.

    ``None`` for a served memory, whose server names the caller's API key as the actor of every
    change; ``by`` for any other.
    """
    return None if isinstance(memory, RemoteMemory) else by
