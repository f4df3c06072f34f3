"""A small LangGraph agent with MemBrain memory: recall → model → write (in the background).

The recall node puts a cited context for the latest human message into the state; the model
node sends it to the chat model as a system message before the conversation; the writer node
stores the turn as pending evidence and returns at once, while a
:class:`~membrain.background.BackgroundWriter` extracts it. The graph is compiled with a
checkpointer, so a thread's messages persist between invocations.

Example:
    >>> from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    >>> graph = build_example_graph(memory=mem, model=model)  # doctest: +SKIP
    >>> config = {"configurable": {"user_id": "Sara", "thread_id": "t1"}}
    >>> graph.invoke({"messages": [("user", "I adopted a cat named Miso.")]}, config)
    ... # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langchain_membrain.langgraph.nodes import (
    DEFAULT_SCOPE_TEMPLATE,
    make_recall_node,
    make_writer_node,
)
from membrain import MemoryLike, RetrievalMode
from membrain.background import BackgroundWriter
from membrain.binding import ScopeBinding

__all__ = ["SYSTEM_PROMPT", "ExampleState", "build_example_graph"]

SYSTEM_PROMPT = (
    "You are a helpful assistant with long-term memory. What you remember about the user, "
    "with the messages it comes from:\n\n{context}"
)


class ExampleState(MessagesState):
    """The conversation and the memory context recalled for its latest human message."""

    memory_context: str


def build_example_graph(
    *,
    memory: MemoryLike,
    model: BaseChatModel,
    writer: BackgroundWriter | None = None,
    scope_template: ScopeBinding = DEFAULT_SCOPE_TEMPLATE,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    max_tokens: int = 1000,
    mode: RetrievalMode | str = RetrievalMode.FAST,
    flush: bool = False,
    min_relevance: float | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the example agent: ``recall`` → ``model`` → ``write``.

    Args:
        memory: The agent's memory: an embedded :class:`~membrain.Memory` or a served one
            (:class:`~membrain.remote.RemoteMemory`).
        model: The chat model that answers.
        writer: The background writer of an embedded memory; default
            ``BackgroundWriter.for_memory(memory)`` (a server runs its own).
        scope_template: How ``config["configurable"]`` becomes a scope (needs ``user_id``).
        checkpointer: Keeps each thread's messages; default a new ``InMemorySaver``.
        max_tokens: Budget of the recalled context.
        mode: Retrieval mode of the recall.
        flush: Have the recall extract the scope's buffered turns first (see
            :func:`~langchain_membrain.langgraph.nodes.make_recall_node`).
        min_relevance: Relevance floor of the recalled facts (``None``: the context's default;
            ``0``: every fact).
    """

    def call_model(state: ExampleState) -> dict[str, Any]:
        context = state.get("memory_context") or ""
        prompt: list[BaseMessage] = list(state["messages"])
        if context:
            prompt.insert(0, SystemMessage(content=SYSTEM_PROMPT.format(context=context)))
        return {"messages": [model.invoke(prompt)]}

    builder = StateGraph(ExampleState)
    builder.add_node(
        "recall",
        make_recall_node(
            memory=memory,
            scope_template=scope_template,
            max_tokens=max_tokens,
            mode=mode,
            flush=flush,
            min_relevance=min_relevance,
        ),
    )
    builder.add_node("model", call_model)
    builder.add_node(
        "write", make_writer_node(memory=memory, scope_template=scope_template, writer=writer)
    )
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "model")
    builder.add_edge("model", "write")
    builder.add_edge("write", END)
    return builder.compile(
        checkpointer=checkpointer if checkpointer is not None else InMemorySaver()
    )
