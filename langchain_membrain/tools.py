"""Memory tools for agents that manage their own memory (LangMem-style names and arguments).

``search_memory(query, limit)`` and ``manage_memory(content, action, id)`` take the same
arguments as LangMem's ``create_search_memory_tool`` / ``create_manage_memory_tool``, so an agent
prompted for those tools works unchanged. What differs is what a memory is: MemBrain stores what
the agent writes as a message (evidence) and extracts cited facts from it; memory ids are fact ids.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from langchain_membrain._runs import run_of
from membrain import (
    Actor,
    ActorKind,
    FactStatus,
    InputError,
    Memory,
    MemoryHit,
    MemoryLike,
    Message,
    NotFoundError,
    RetrievalMode,
    Role,
    Scope,
    ScopeError,
)
from membrain.binding import CLOCK, DEFAULT_ASSISTANT_NAME, ScopeBinding
from membrain.retrieval.context import SHORT_ID, cited_as

__all__ = ["create_memory_tools", "format_hits"]

TOOL_SOURCE_PREFIX = "membrain:tool:"
"""``source_id`` prefix of the messages ``manage_memory`` stores."""

_SEARCH_DESCRIPTION = (
    "Search your long-term memory for facts relevant to the current conversation. "
    "Returns one fact per line as `[memory id] fact (sources: message ids)`."
)
_MANAGE_DESCRIPTION = (
    "Save information to long-term memory so it is available in future conversations. "
    "Call it when you learn a new user preference or fact, when the user asks you to remember "
    "something, or when a memory turns out to be wrong or outdated. "
    "action='create' stores `content` as a new memory. action='update' (with the `id` of the "
    "outdated memory) stores `content` as a new memory that supersedes the old one; the old "
    "memory is kept for the record but no longer returned, so write the update as a complete, "
    "self-contained statement. action='delete' (with the `id`) forgets a memory."
)


class SearchMemoryInput(BaseModel):
    """Arguments of ``search_memory``."""

    query: str = Field(description="What to look for, in natural language.")
    limit: int = Field(default=5, ge=1, le=50, description="How many memories to return.")


class ManageMemoryInput(BaseModel):
    """Arguments of ``manage_memory``."""

    content: str | None = Field(
        default=None, description="The memory to store: a self-contained statement."
    )
    action: Literal["create", "update", "delete"] = Field(
        default="create", description="create a memory, or update an outdated one."
    )
    id: str | None = Field(
        default=None, description="The id of the memory to update (not used for create)."
    )


def format_hits(hits: Iterable[MemoryHit]) -> str:
    """One line per hit: ``[fact id] fact text (sources: id, ...)``.

    Ids are shown as a context shows them (:func:`membrain.retrieval.context.cited_as`): a
    fact's first 8 hex digits, a message's own id unless generated; each is taken back as is.
    """
    lines = []
    for hit in hits:
        sources = ", ".join(dict.fromkeys(c for c in map(cited_as, hit.sources) if c))
        suffix = f" (sources: {sources})" if sources else ""
        lines.append(f"[{_short(hit.fact.id)}] {hit.text or hit.fact.text}{suffix}")
    return "\n".join(lines) if lines else "No memories found."


def _short(fact_id: str) -> str:
    return fact_id[:SHORT_ID]


def create_memory_tools(
    *,
    memory: MemoryLike,
    scope: Scope | None = None,
    namespace: Sequence[str] | None = None,
    speaker: str = DEFAULT_ASSISTANT_NAME,
    mode: RetrievalMode | str = RetrievalMode.EXPAND,
) -> list[BaseTool]:
    """Build ``search_memory`` and ``manage_memory``: an agent's tools for its MemBrain memory.

    ``manage_memory`` stores the content as a message from ``speaker`` (the agent's name) and
    extracts facts from it before returning (synchronously, with the memory's extractor).
    Updating does not overwrite: the new content becomes new facts that supersede the old one
    (:meth:`membrain.Memory.supersede`). Deleting forgets the fact
    (:meth:`membrain.Memory.forget`: a tombstone, kept for audit, out of every search), or
    queues the request for a person when the memory's review policy holds agents' forgets.
    The agent (``agent:<speaker>``) is the actor of every change in the audit log; the facts it
    writes are ``derived`` and name it as their author. On a :class:`~membrain.RemoteMemory`
    the server names the API key as the actor instead (the HTTP API takes no ``by``).

    Args:
        memory: The memory to use: a :class:`~membrain.Memory`, or a
            :class:`~membrain.RemoteMemory` of a served memory.
        scope: Where the agent's memories live (without a session they span all sessions).
        namespace: Instead of ``scope``, a langmem namespace template such as
            ``("memories", "{user_id}")``, resolved at each call from the run's
            ``config["configurable"]`` (:meth:`membrain.binding.ScopeBinding.from_namespace`:
            the templated labels name the dataset, the literal ones the task: the user is the
            dataset, as for the retriever, the nodes and the store), so one set of tools serves
            every user of a multi-user app.
        speaker: Speaker name of the messages ``manage_memory`` stores (default
            ``"Assistant"``, :data:`membrain.binding.DEFAULT_ASSISTANT_NAME`).
        mode: Retrieval mode of ``search_memory``.

    Returns:
        ``[search_memory, manage_memory]``.

    Raises:
        ConfigurationError: ``mode`` is not a retrieval mode, or ``namespace`` is malformed.
        ScopeError: neither or both of ``scope`` and ``namespace``; at a call, a value the
            namespace needs is missing from the run's config (a tool error the model sees).

    Example:
        >>> tools = create_memory_tools(memory=mem, scope=Scope(dataset="sara", task="assistant"))
        ... # doctest: +SKIP
        >>> tools[0].invoke({"query": "Sara's cat", "limit": 3})  # doctest: +SKIP
        '[4f0c...] Sara adopted a cat named Miso yesterday. (sources: m1)'
    """
    mode = RetrievalMode.parse(mode)
    if scope is not None and namespace is None:
        binding = ScopeBinding.fixed(scope)
    elif namespace is not None and scope is None:
        binding = ScopeBinding.from_namespace(namespace)
    else:
        raise ScopeError("pass scope=Scope(...) or namespace=(...), not both or neither")

    def scope_of(config: RunnableConfig) -> Scope:
        values = config.get("configurable") or {}
        try:
            return binding.resolve(values, source="config['configurable']")
        except ScopeError as exc:
            raise ToolException(str(exc)) from exc

    # A server names the API key as the actor of every change; only a Memory takes ``by``.
    agent = Actor(kind=ActorKind.AGENT, name=speaker) if isinstance(memory, Memory) else None

    def search_memory(
        config: RunnableConfig, query: str, limit: int = 5
    ) -> tuple[str, list[dict[str, Any]]]:
        scope = scope_of(config)
        try:
            hits = memory.search(query, scope=scope, mode=mode, k=limit, **run_of(config))
        except InputError as exc:
            raise ToolException(str(exc)) from exc
        return format_hits(hits), [hit.model_dump(mode="json") for hit in hits]

    async def asearch_memory(
        config: RunnableConfig, query: str, limit: int = 5
    ) -> tuple[str, list[dict[str, Any]]]:
        return await asyncio.to_thread(search_memory, config, query, limit)

    def manage_memory(
        config: RunnableConfig,
        content: str | None = None,
        action: Literal["create", "update", "delete"] = "create",
        id: str | None = None,  # noqa: A002 - the LangMem argument name
    ) -> str:
        scope = scope_of(config)
        if action == "delete":
            if not id:
                raise ToolException("Pass the `id` of the memory to forget.")
            try:
                (fact,) = memory.forget([id], scope=scope, by=agent, reason="manage_memory delete")
            except NotFoundError as exc:
                raise ToolException(
                    f"No memory with id {id!r}; search_memory shows the ids."
                ) from exc
            except InputError as exc:  # a prefix naming several memories
                raise ToolException(str(exc)) from exc
            if fact.status is FactStatus.ACTIVE:
                return f"asked to forget memory {_short(fact.id)}; a person will review the request"
            return f"forgot memory {_short(fact.id)}"
        if action == "create" and id is not None:
            raise ToolException(
                "Do not pass an id when creating a memory; omit `id`, or use action='update'."
            )
        if action == "update":
            if not id:
                raise ToolException("Pass the `id` of the memory to update.")
            try:  # a whole id or a unique prefix of 8+ hex digits
                named = memory.facts(scope=scope, ids=[id], include_inactive=True)
            except InputError as exc:
                raise ToolException(str(exc)) from exc
            if not named:
                raise ToolException(f"No memory with id {id!r}; search_memory shows the ids.")
            id = named[0].id  # noqa: A001
        if content is None or not content.strip():
            raise ToolException("Pass the memory to store as `content`.")
        message = Message(
            speaker=speaker,
            text=content.strip(),
            timestamp=CLOCK.next(),
            role=Role.ASSISTANT,
            source_id=f"{TOOL_SOURCE_PREFIX}{uuid.uuid4()}",
        )
        result = memory.add([message], scope=scope, by=agent)
        if result.errors:
            return (
                "The memory was stored as a note, but facts could not be extracted from it yet "
                f"(it will be retried): {result.errors[0]}"
            )
        if not result.fact_ids:
            return (
                "The memory was stored as a note, but no fact could be extracted from it; "
                "write it as a self-contained statement."
            )
        ids = ", ".join(_short(i) for i in result.fact_ids)
        noun = "memory" if len(result.fact_ids) == 1 else "memories"
        if action == "update" and id:
            memory.supersede(
                id, result.fact_ids, scope=scope, by=agent, reason="manage_memory update"
            )
            kept = "(kept, no longer returned)"
            return f"created {noun} {ids}; it supersedes memory {_short(id)} {kept}"
        return f"created {noun} {ids}"

    async def amanage_memory(
        config: RunnableConfig,
        content: str | None = None,
        action: Literal["create", "update", "delete"] = "create",
        id: str | None = None,  # noqa: A002 - the LangMem argument name
    ) -> str:
        return await asyncio.to_thread(manage_memory, config, content, action, id)

    return [
        StructuredTool.from_function(
            func=search_memory,
            coroutine=asearch_memory,
            name="search_memory",
            description=_SEARCH_DESCRIPTION,
            args_schema=SearchMemoryInput,
            response_format="content_and_artifact",
            handle_tool_error=True,
        ),
        StructuredTool.from_function(
            func=manage_memory,
            coroutine=amanage_memory,
            name="manage_memory",
            description=_MANAGE_DESCRIPTION,
            args_schema=ManageMemoryInput,
            handle_tool_error=True,
        ),
    ]
