"""A LangChain retriever over MemBrain facts.

Each retrieved :class:`~langchain_core.documents.Document` is one fact: its ``page_content`` is
the fact as a reader should see it (entities under their canonical names, times as written), its
``id`` the fact id, and its metadata carries the evidence: the raw fact text, the entities, the
validity window, the cited source messages, the fused score and the paths that found it.
"""

from __future__ import annotations

import asyncio

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator, model_validator

from membrain import MemoryHit, RetrievalMode, Scope
from membrain.binding import ScopeBinding
from membrain.extraction.llm import llm_callbacks
from membrain.remote import MemoryLike

__all__ = ["MembrainRetriever", "hit_to_document"]


def hit_to_document(hit: MemoryHit) -> Document:
    """Convert a :class:`~membrain.MemoryHit` into a LangChain ``Document``.

    Metadata: :meth:`membrain.MemoryHit.metadata` (fact id, raw text, canonical entity names,
    valid time, sources, fused score, paths and ranks, scope and session).
    """
    return Document(page_content=hit.text or hit.fact.text, metadata=hit.metadata(), id=hit.fact.id)


class MembrainRetriever(BaseRetriever):
    """Retrieve MemBrain facts as LangChain documents.

    Give either a ready ``scope`` or its parts (``dataset`` and ``task``, optionally
    ``session``). ``k`` and ``mode`` may also be passed per call:
    ``retriever.invoke("question", k=3)``.

    Args:
        memory: The memory to search: a :class:`~membrain.Memory`, or a
            :class:`~membrain.RemoteMemory` of a served memory.
        scope: Where to search.
        dataset: Scope dataset (instead of ``scope``).
        task: Scope task (instead of ``scope``).
        session: Scope session (instead of ``scope``; optional).
        k: How many facts to return (without ``max_tokens``), or to search (with it).
        mode: Retrieval mode (``fast``, ``expand``, ``deep``, ``auto``).
        max_tokens: Return the facts of ``Memory.context`` within this budget (cl100k tokens)
            instead of the ``k`` best.
        profile_ratio: With ``max_tokens``: the user profile's share of it. The first
            document is then the profile block (``metadata["kind"] == "profile"``, the entry and
            fact ids it holds), the same every turn.

    Example:
        >>> from membrain import Memory, Scope
        >>> mem = Memory(path="/tmp/mem")  # doctest: +SKIP
        >>> retriever = MembrainRetriever(memory=mem, dataset="sara", task="assistant", k=5)
        ... # doctest: +SKIP
        >>> docs = retriever.invoke("What is Sara's cat called?")  # doctest: +SKIP
        >>> docs[0].metadata["sources"]  # doctest: +SKIP
        ['m1']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: MemoryLike  # a Memory, or a RemoteMemory of a server
    scope: Scope | None = None
    dataset: str | None = None
    task: str | None = None
    session: str | None = None
    k: int = Field(default=10, ge=1)
    mode: str = RetrievalMode.EXPAND.value
    max_tokens: int | None = Field(default=None, ge=1)
    profile_ratio: float = Field(default=0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _resolve_scope(self) -> MembrainRetriever:
        parts = (self.dataset, self.task, self.session)
        scope = self.scope
        if scope is None or parts != (scope.dataset, scope.task, scope.session):
            dataset, task, session = parts
            binding = ScopeBinding.of(
                scope, dataset=dataset, task=task, session=session, owner="MembrainRetriever"
            )
            scope = binding.resolve()
        self.scope = scope
        self.dataset, self.task, self.session = scope.dataset, scope.task, scope.session
        if self.profile_ratio and self.max_tokens is None:
            raise ValueError("profile_ratio takes a share of max_tokens: give max_tokens too")
        return self

    @field_validator("mode", mode="before")
    @classmethod
    def _check_mode(cls, value: RetrievalMode | str) -> str:
        # ConfigurationError is a ValueError: pydantic reports it as a validation error.
        return RetrievalMode.parse(value).value

    def _search(self, query: str, k: int | None, mode: str | None) -> list[Document]:
        assert self.scope is not None  # set by the validator
        chosen = RetrievalMode.parse(mode) if mode is not None else self.mode
        if self.max_tokens is None:
            found = self.memory.search(query, scope=self.scope, mode=chosen, k=k or self.k)
            return [hit_to_document(hit) for hit in found]
        context = self.memory.context(
            query,
            scope=self.scope,
            mode=chosen,
            k=k or self.k,
            max_tokens=self.max_tokens,
            profile_ratio=self.profile_ratio,
        )
        documents = [hit_to_document(hit) for hit in context.hits]
        if not context.profile:
            return documents
        block = context.text.split("\n\n", 1)[0]
        metadata = {
            "kind": "profile",
            "entry_ids": [e.id for e in context.profile],
            "fact_ids": [i for e in context.profile for i in e.fact_ids],
        }
        return [Document(page_content=block, metadata=metadata), *documents]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        mode: str | None = None,
    ) -> list[Document]:
        with llm_callbacks(run_manager.get_child()):  # MemBrain's model calls: child runs
            return self._search(query, k, mode)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        mode: str | None = None,
    ) -> list[Document]:
        with llm_callbacks(run_manager.get_child()):  # copied into the worker thread
            return await asyncio.to_thread(self._search, query, k, mode)
