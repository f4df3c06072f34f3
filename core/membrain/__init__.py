"""MemBrain: long-term memory for LLM agents that can be held accountable.

Conversations go in; self-contained, time-anchored facts about named entities come out, each
citing the messages it came from; a hybrid search returns them.

Example:
    >>> from membrain import Memory, Scope
    >>> mem = Memory(path="./.membrain")  # doctest: +SKIP
    >>> scope = Scope(dataset="sara", task="assistant")
    >>> mem.add([{"speaker": "Sara", "text": "I adopted a cat named Miso yesterday.",
    ...           "timestamp": "2024-03-15T14:01:00Z"}], scope=scope)  # doctest: +SKIP
    >>> mem.search("What is Sara's cat called?", scope=scope)  # doctest: +SKIP
"""

from membrain.accountable import PurgeResult
from membrain.aio import AsyncMemory
from membrain.audit import (
    AuditAction,
    AuditEvent,
    FactHistory,
    ReviewItem,
    ReviewKind,
    ReviewPolicy,
)
from membrain.config import MembrainSettings
from membrain.errors import (
    AnnotationError,
    BackendError,
    ConfigurationError,
    ConflictError,
    ExtractionError,
    InputError,
    MembrainError,
    MissingDependencyError,
    NotFoundError,
    ScopeError,
    StoreInUseError,
)
from membrain.extraction.llm import ChatModel, LLMReply
from membrain.extraction.prompts import Prompts
from membrain.listeners import RecordListener
from membrain.memory import AddResult, EvidenceHit, Memory
from membrain.models import (
    Actor,
    ActorKind,
    Context,
    Entity,
    EntityVersion,
    EntityView,
    Fact,
    FactStatus,
    Layer,
    MemoryHit,
    Message,
    MessageStatus,
    Precision,
    RetrievalMode,
    Role,
    Scope,
    SearchResult,
    StoredMessage,
    TimeCheck,
    TimeSpan,
    Trust,
)
from membrain.remote import AsyncRemoteMemory, MemoryLike, RemoteAccessError, RemoteMemory

__version__ = "0.1.0"

__all__ = [
    "AsyncRemoteMemory",
    "MemoryLike",
    "RemoteAccessError",
    "RemoteMemory",
    "Actor",
    "ActorKind",
    "AddResult",
    "AnnotationError",
    "AsyncMemory",
    "AuditAction",
    "AuditEvent",
    "ChatModel",
    "BackendError",
    "ConfigurationError",
    "ConflictError",
    "Context",
    "Entity",
    "EntityVersion",
    "EntityView",
    "EvidenceHit",
    "ExtractionError",
    "Fact",
    "FactHistory",
    "FactStatus",
    "InputError",
    "LLMReply",
    "Layer",
    "MembrainError",
    "MembrainSettings",
    "Memory",
    "MemoryHit",
    "Message",
    "MessageStatus",
    "MissingDependencyError",
    "NotFoundError",
    "Prompts",
    "Precision",
    "PurgeResult",
    "RecordListener",
    "RetrievalMode",
    "ReviewItem",
    "ReviewKind",
    "ReviewPolicy",
    "Role",
    "Scope",
    "ScopeError",
    "StoreInUseError",
    "SearchResult",
    "StoredMessage",
    "TimeCheck",
    "TimeSpan",
    "Trust",
    "__version__",
]
