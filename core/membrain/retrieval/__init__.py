"""Retrieval: paths, modes and fusion, time-aware boosts, and token-budgeted context assembly."""

from membrain.retrieval.base import Ranked, RetrievalPath, SearchContext
from membrain.retrieval.context import assemble_context
from membrain.retrieval.search import RRF_K, Fused, RetrievalMode, Searcher, rrf

__all__ = [
    "RRF_K",
    "Fused",
    "Ranked",
    "RetrievalMode",
    "RetrievalPath",
    "SearchContext",
    "Searcher",
    "assemble_context",
    "rrf",
]
