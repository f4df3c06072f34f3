"""Type stub of membrain.aio: written by `python -m membrain.stubs`, do not edit."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from membrain.audit import ReviewPolicy
from membrain.config import MembrainSettings
from membrain.embeddings import DenseEncoder, SparseEncoder
from membrain.extraction.base import Extractor
from membrain.extraction.prompts import Prompts
from membrain.memory import Memory
from membrain.profile import ProfileSchema
from membrain.results import PurgeResult
from membrain.retrieval.rerank import Reranker
from membrain.scope import Scope
from membrain.storage.base import Backend
from membrain.surface import AsyncMemoryLike

__all__ = ["AsyncMemory"]

class AsyncMemory(AsyncMemoryLike):
    """Long-term memory for async agents: :class:`~membrain.Memory` with awaitable methods."""

    def __init__(self, path: str | Path | None = ..., *, qdrant_url: str | None = ..., qdrant_api_key: str | None = ..., backend: Backend | None = ..., dense: DenseEncoder | str | object | None = ..., sparse: SparseEncoder | None = ..., llm: object | None = ..., prompts: Prompts | None = ..., max_attempts: int = ..., extractor: Extractor | None = ..., batch_size: int = ..., context_window: int = ..., review: ReviewPolicy | None = ..., keep_messages: timedelta | None = ..., reranker: Reranker | None = ..., profile_schema: ProfileSchema | None = ...) -> None: ...
    @classmethod
    def from_memory(cls, memory: Memory) -> AsyncMemory: ...
    @classmethod
    def from_settings(cls, settings: MembrainSettings | None = ...) -> AsyncMemory: ...
    @property
    def memory(self) -> Memory: ...
    async def aclose(self, *, drain_timeout: float = ...) -> None: ...
    async def close(self, *, drain_timeout: float = ...) -> None: ...
    async def apply_retention(self, *, scope: Scope | None = ..., at: datetime | None = ...) -> PurgeResult: ...
    async def optimize(self) -> None: ...
