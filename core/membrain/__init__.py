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

import importlib
from typing import TYPE_CHECKING

from membrain import _former_paths
from membrain.api.audit import (
    AuditAction,
    AuditEvent,
    FactHistory,
    ReviewItem,
    ReviewKind,
    ReviewPolicy,
)
from membrain.api.erasure import ErasureCheck, ErasureFinding, ErasureReceipt
from membrain.api.errors import (
    AnnotationError,
    BackendError,
    ConfigurationError,
    ConflictError,
    ExtractionError,
    InputError,
    MembrainError,
    MissingDependencyError,
    ModelFileError,
    NotFoundError,
    ScopeError,
    StoreInUseError,
)
from membrain.api.expiry import ExpiryRule
from membrain.api.models import (
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
from membrain.api.profile import ContextRecipe, ProfileEntry, ProfileSchema
from membrain.api.recalls import Recall, RecalledFact
from membrain.api.results import AddResult, EvidenceHit, PurgeResult
from membrain.remote import AsyncRemoteMemory, MemoryLike, RemoteAccessError, RemoteMemory

_former_paths.install()  # ``membrain.models`` and the other module paths of earlier versions

if TYPE_CHECKING:
    from membrain.aio import AsyncMemory
    from membrain.api.config import MembrainSettings
    from membrain.api.listeners import RecordListener
    from membrain.extraction.llm import ChatModel, LLMReply
    from membrain.extraction.prompts import Prompts
    from membrain.memory import Memory

    def _conforms(memory: Memory, remote: RemoteMemory) -> tuple[MemoryLike, MemoryLike]:
        """Both memories satisfy the adapters' protocol (mypy checks this)."""
        return memory, remote


_ENGINE = {
    "AsyncMemory": "membrain.aio",
    "ChatModel": "membrain.extraction.llm",
    "LLMReply": "membrain.extraction.llm",
    "MembrainSettings": "membrain.api.config",
    "Memory": "membrain.memory",
    "Prompts": "membrain.extraction.prompts",
    "RecordListener": "membrain.api.listeners",
}
"""Names loaded on first use: the records above import no engine, so importing
``membrain.remote`` (a served memory's client) loads neither a storage engine nor a model."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    module = _ENGINE.get(name)
    if module is None:
        raise AttributeError(f"module 'membrain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
    "ContextRecipe",
    "Entity",
    "EntityVersion",
    "EntityView",
    "ErasureCheck",
    "ErasureFinding",
    "ErasureReceipt",
    "EvidenceHit",
    "ExpiryRule",
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
    "ModelFileError",
    "NotFoundError",
    "Prompts",
    "Precision",
    "ProfileEntry",
    "ProfileSchema",
    "PurgeResult",
    "Recall",
    "RecalledFact",
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
