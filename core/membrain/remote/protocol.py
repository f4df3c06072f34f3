"""What the framework adapters need of a memory, as a :class:`typing.Protocol`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from membrain.ingest import AddResult
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

__all__ = ["MemoryLike"]


@runtime_checkable
class MemoryLike(Protocol):
    """What the framework adapters use of a memory.

    :class:`~membrain.Memory` and :class:`~membrain.remote.RemoteMemory` both provide it, so an
    adapter typed with it runs on an embedded memory or on a server's.
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

    def search(
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
    ) -> SearchResult:
        """The ``k`` facts that best answer ``question``."""
        ...

    def context(
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
        """A cited context block for ``question`` that fits ``max_tokens``."""
        ...

    def facts(
        self,
        *,
        scope: Scope,
        include_inactive: bool = False,
        derived_from: Sequence[str] = (),
    ) -> list[Fact]:
        """Every fact of the scope (active only unless ``include_inactive``)."""
        ...

    def messages(self, *, scope: Scope) -> list[StoredMessage]:
        """Every stored message of the scope, with its processing status."""
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

    def delete_scope(self, scope: Scope) -> None:
        """Delete everything stored under ``scope``."""
        ...

    def close(self) -> None:
        """Release the memory (or the connection to it)."""
        ...
