"""LangChain surfaces for MemBrain: a retriever, a chat message history and agent memory tools.

The adapters only convert types and call :class:`membrain.Memory`.

Example:
    >>> from membrain import Memory, Scope
    >>> from langchain_membrain import MembrainRetriever
    >>> mem = Memory(path="/tmp/mem")  # doctest: +SKIP
    >>> retriever = MembrainRetriever(memory=mem, scope=Scope(dataset="sara", task="assistant"))
    ... # doctest: +SKIP
    >>> retriever.invoke("What is Sara's cat called?")  # doctest: +SKIP
"""

from langchain_membrain.chat_history import MembrainChatMessageHistory, transcript_marker_scope
from langchain_membrain.retrievers import MembrainRetriever, hit_to_document
from langchain_membrain.tools import create_memory_tools, format_hits

__all__ = [
    "MembrainChatMessageHistory",
    "MembrainRetriever",
    "create_memory_tools",
    "format_hits",
    "hit_to_document",
    "transcript_marker_scope",
]
