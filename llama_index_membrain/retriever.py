"""A LlamaIndex retriever over MemBrain facts."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from membrain import Memory, MemoryHit, MemoryLike, RetrievalMode, Scope
from membrain.aio import AsyncMemory
from membrain.binding import ScopeBinding

__all__ = ["MembrainRetriever", "hit_metadata", "hit_to_node"]

# Kept in the metadata for programs, hidden from the LLM prompt and the embedding text.
_HIDDEN_KEYS = ["fact_id", "text", "sources", "score", "paths", "scope", "session"]


def hit_metadata(hit: MemoryHit) -> dict[str, Any]:
    """The metadata of a retrieved fact: :meth:`membrain.MemoryHit.metadata`."""
    return hit.metadata()


def hit_to_node(hit: MemoryHit) -> NodeWithScore:
    """A search hit as a scored LlamaIndex node (id: the fact id; text: the rendered fact)."""
    metadata = hit_metadata(hit)
    # An empty value ("valid_from: None", "superseded_by: []") tells the model nothing.
    hidden = [*_HIDDEN_KEYS, *(k for k, v in metadata.items() if v in (None, "", [], {}, ()))]
    node = TextNode(
        id_=hit.fact.id,
        text=hit.text or hit.fact.text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    return NodeWithScore(node=node, score=hit.score)


class MembrainRetriever(BaseRetriever):
    """Retrieves MemBrain facts as LlamaIndex nodes.

    Each result is a :class:`~llama_index.core.schema.NodeWithScore` whose node is a
    ``TextNode`` with the fact id as ``id_``, the fact as a reader sees it (canonical names, no
    markup) as ``text``, and :func:`hit_metadata` as metadata; the node's score is the fused
    score. ``_aretrieve`` runs the search in a worker thread.

    Args:
        memory: The memory to search: a :class:`membrain.Memory` (an ``AsyncMemory`` is
            unwrapped), or a :class:`~membrain.RemoteMemory` of a served memory.
        scope: Where to search; or give ``dataset`` and ``task`` (and optionally ``session``).
        k: How many facts per query.
        mode: Retrieval mode (``"fast"``, ``"expand"``, ``"deep"``, ``"auto"``).
        callback_manager: LlamaIndex callback manager.
        verbose: LlamaIndex verbose flag.

    Raises:
        ScopeError: Neither or both of ``scope`` and its parts were given, or a part is invalid.
        ConfigurationError: ``mode`` is not a retrieval mode.

    Example:
        >>> from membrain import Memory, Scope
        >>> retriever = MembrainRetriever(
        ...     memory=Memory(path="/tmp/mem"), scope=Scope(dataset="sara", task="assistant"), k=5
        ... )  # doctest: +SKIP
        >>> retriever.retrieve("What is Sara's cat called?")[0].node.text  # doctest: +SKIP
        'Sara adopted a grey cat named Miso.'
    """

    def __init__(
        self,
        *,
        memory: MemoryLike | AsyncMemory,
        scope: Scope | None = None,
        dataset: str | None = None,
        task: str | None = None,
        session: str | None = None,
        k: int = 10,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        binding = ScopeBinding.of(
            scope, dataset=dataset, task=task, session=session, owner="MembrainRetriever"
        )
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        sync: MemoryLike = memory.memory if isinstance(memory, AsyncMemory) else memory
        self.memory = sync
        self.scope = binding.resolve()
        self.k = k
        self.mode = RetrievalMode.parse(mode)
        self._amemory = AsyncMemory.from_memory(sync) if isinstance(sync, Memory) else None

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if not query_bundle.query_str.strip():
            return []
        hits = self.memory.search(
            query_bundle.query_str, scope=self.scope, mode=self.mode, k=self.k
        )
        return [hit_to_node(hit) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if not query_bundle.query_str.strip():
            return []
        if self._amemory is not None:
            hits = await self._amemory.search(
                query_bundle.query_str, scope=self.scope, mode=self.mode, k=self.k
            )
        else:
            hits = await asyncio.to_thread(
                self.memory.search,
                query_bundle.query_str,
                scope=self.scope,
                mode=self.mode,
                k=self.k,
            )
        return [hit_to_node(hit) for hit in hits]
