"""LangGraph surfaces for MemBrain: memory nodes and a ``BaseStore``.

- :func:`make_recall_node` puts a cited memory context for the latest human message into the
  state; :func:`make_writer_node` stores each turn as pending evidence and lets a
  :class:`~membrain.background.BackgroundWriter` extract it, so the graph never waits.
- The scope of a run comes from its values, ``config["configurable"]`` and the LangGraph 1.x
  runtime context (``graph.invoke(..., context=...)``; :func:`run_values`), through a
  :class:`~membrain.binding.ScopeBinding` (``ScopeTemplate`` is its LangGraph-flavoured name;
  ``ScopeBinding.from_namespace(("memories", "{user_id}"))`` reads langmem's namespaces). Any
  string is a valid ``user_id`` (:func:`~membrain.binding.scope_part`); the user's speaker name
  is ``user_name``, never the id.
- :class:`MembrainStore` is a LangGraph store (``graph.compile(store=...)``) whose query search
  is MemBrain's hybrid retrieval; :class:`RemoteMembrainStore` is the same store served by
  ``membrain serve``, shared by every process that reaches it.
- :mod:`langchain_membrain.langgraph.example` wires them into a small agent.

Needs ``pip install 'membrain-memory[langgraph]'``.
"""

from __future__ import annotations

from membrain.api.errors import MissingDependencyError

try:
    import langgraph.store.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("langgraph", "langgraph") from exc

from langchain_membrain.langgraph.namespaces import namespace_scopes
from langchain_membrain.langgraph.nodes import (
    DEFAULT_SCOPE_TEMPLATE,
    ScopeTemplate,
    UserName,
    make_recall_node,
    make_writer_node,
    run_values,
)
from langchain_membrain.langgraph.remote_store import RemoteMembrainStore
from langchain_membrain.langgraph.store import MembrainStore, scope_for_namespace, user_scope
from membrain.background import BackgroundWriter
from membrain.binding import ScopeBinding, scope_part

__all__ = [
    "DEFAULT_SCOPE_TEMPLATE",
    "BackgroundWriter",
    "MembrainStore",
    "RemoteMembrainStore",
    "ScopeBinding",
    "ScopeTemplate",
    "UserName",
    "make_recall_node",
    "make_writer_node",
    "namespace_scopes",
    "run_values",
    "scope_for_namespace",
    "user_scope",
    "scope_part",
]
