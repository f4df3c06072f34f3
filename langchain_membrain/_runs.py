"""Which run a read serves, from a LangChain or LangGraph config: what the recall trace records.

The run is the LangGraph thread (``configurable["thread_id"]``) when there is one, so
``memory.trace(run=thread_id)`` lists what every turn of a conversation was told; otherwise the
LangChain run that called the reader (its parent run, else its own run id). The tags are the
config's tags, with the LangGraph checkpoint the step ran from and the step's number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

__all__ = ["run_of"]


def run_of(
    config: Mapping[str, Any] | None,
    *,
    run_id: UUID | None = None,
    parent_run_id: UUID | None = None,
    tags: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``run`` and ``run_tags`` arguments of a read made under ``config``."""
    config = config or {}
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    thread = configurable.get("thread_id") or metadata.get("thread_id")
    fallback = parent_run_id or run_id or config.get("run_id")
    run = str(thread) if thread is not None else str(fallback) if fallback else None
    labels = [*tags, *(config.get("tags") or ())]
    checkpoint = configurable.get("checkpoint_id") or (
        (configurable.get("checkpoint_map") or {}).get("")
    )
    if checkpoint:
        labels.append(f"checkpoint_id:{checkpoint}")
    step = metadata.get("langgraph_step")
    if step is not None:
        labels.append(f"langgraph_step:{step}")
    unique = [str(t)[:256] for t in dict.fromkeys(labels) if str(t)][:32]
    return {"run": run[:256] if run else None, "run_tags": tuple(unique)}
