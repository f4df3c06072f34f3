"""LlamaIndex surfaces for MemBrain: a retriever and a memory block.

Example:
    >>> from membrain import Memory, Scope
    >>> from llama_index_membrain import MembrainMemoryBlock, MembrainRetriever
    >>> mem = Memory(path="/tmp/mem")  # doctest: +SKIP
    >>> scope = Scope(dataset="sara", task="assistant")
    >>> retriever = MembrainRetriever(memory=mem, scope=scope, similarity_top_k=5)  # doctest: +SKIP
    >>> block = MembrainMemoryBlock(memory=mem, scope=scope, max_tokens=800)  # doctest: +SKIP
"""

from llama_index_membrain.memory_block import MembrainMemoryBlock
from llama_index_membrain.retriever import (
    MembrainRetriever,
    hit_metadata,
    hit_to_node,
    membrain_filters,
)

__all__ = [
    "MembrainMemoryBlock",
    "MembrainRetriever",
    "hit_metadata",
    "hit_to_node",
    "membrain_filters",
]
