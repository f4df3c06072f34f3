"""LangGraph nodes: recall memory before the model, write turns to memory in the background.

Both nodes are plain ``(state, config, runtime=None) -> dict`` functions, so they work in any
``StateGraph`` whose state has a ``messages`` list (``MessagesState`` or your own schema).

The run's values are ``config["configurable"]`` together with LangGraph's runtime context
(``graph.invoke(..., context=Ctx(user_id=...))`` for a graph built with
``StateGraph(State, context_schema=Ctx)``; a dataclass, a mapping or a pydantic model), the
context winning where both hold a key (:func:`run_values`). The scope comes from them through a
:class:`membrain.binding.ScopeBinding` (:class:`ScopeTemplate`): by default
``Scope(dataset="{user_id}", task="{assistant_id}", session="{thread_id}")`` (the user is the
dataset, as for the tools, the retriever and the store: see the frameworks guide), where a missing
``assistant_id`` defaults to ``"assistant"``, a missing ``thread_id`` leaves the scope without a
session, and a missing ``user_id`` is an error (:class:`membrain.ScopeError`): memory must
always know whose it is. A user id may be any string (:func:`membrain.binding.scope_part`
encodes it for storage). The user's speaker name is ``user_name`` (the writer node's argument,
or the run's ``user_name`` value), never the user id.

The writer node returns before its turn is extracted: the background writer extracts a scope
once it was quiet for ``idle_seconds`` (default 5). Until then a recall does not see the turn,
unless the recall node is made with ``flush=True``: it then has its scope's buffered turns
extracted first, waiting at most ``flush_timeout`` seconds.

Example:
    >>> from langgraph.graph import START, MessagesState, StateGraph
    >>> class State(MessagesState):
    ...     memory_context: str
    >>> builder = StateGraph(State)  # doctest: +SKIP
    >>> builder.add_node("recall", make_recall_node(memory=mem))  # doctest: +SKIP
    >>> builder.add_node("model", call_model)  # doctest: +SKIP
    >>> builder.add_node("write", make_writer_node(memory=mem))  # doctest: +SKIP
    >>> graph.invoke({"messages": [("user", "hi")]},
    ...              {"configurable": {"user_id": "sara", "thread_id": "t1"}})  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from langchain_membrain._runs import run_of
from membrain import ConfigurationError, MemoryLike, Message, RetrievalMode, Role, Scope
from membrain.background import BackgroundWriter, check_writer, flush_scope, schedule_extraction
from membrain.binding import CLOCK, DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME, ScopeBinding
from membrain.extraction.llm import langchain_text

__all__ = [
    "DEFAULT_SCOPE_TEMPLATE",
    "Node",
    "ScopeTemplate",
    "UserName",
    "make_recall_node",
    "make_writer_node",
    "message_text",
    "run_values",
]

UserName: TypeAlias = str | Callable[[Mapping[str, Any]], str | None]
"""A speaker name, or a function of the run's values (:func:`run_values`) that returns one."""


class Node(Protocol):
    """A LangGraph node that reads the run's config and, under LangGraph 1.x, its runtime."""

    def __call__(
        self, state: Any, config: RunnableConfig, runtime: Runtime[Any] | None = None
    ) -> dict[str, Any]:
        """Run the node."""
        ...


_SOURCE = "config['configurable']"
_BOTH = "the runtime context or config['configurable']"
_HINT = (
    "pass it when invoking the graph, e.g. graph.invoke(inputs, {'configurable': {{key}: ...}}) "
    "or in its context=..."
)


class ScopeTemplate(ScopeBinding):
    """A :class:`membrain.binding.ScopeBinding` whose :meth:`resolve` also takes a whole config.

    Same arguments and defaults as ``ScopeBinding``. The nodes resolve any ``ScopeBinding``
    against ``config["configurable"]``; ``ScopeTemplate(...).resolve(config)`` also accepts the
    run's config itself.

    Example:
        >>> ScopeTemplate().resolve({"configurable": {"user_id": "sara", "thread_id": "t1"}})
        Scope(dataset='sara', task='assistant', session='t1')
    """

    def resolve(
        self,
        values: RunnableConfig | Mapping[str, Any] | None = None,
        *,
        source: str = _SOURCE,
        hint: str = _HINT,
    ) -> Scope:
        """The scope of a run, from its config or from its ``configurable`` values.

        Raises:
            ScopeError: A key that ``dataset`` or ``task`` needs is missing, or a resolved part
                is not a valid scope part.
        """
        if values is not None and "configurable" in values:
            values = _configurable(values)
        return super().resolve(values, source=source, hint=hint)


DEFAULT_SCOPE_TEMPLATE = ScopeTemplate()


def _configurable(config: RunnableConfig | Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not config:
        return {}
    configurable: Mapping[str, Any] = config.get("configurable") or {}
    return configurable


def _context_values(context: Any) -> dict[str, Any]:
    """The fields of a runtime context: a mapping, a dataclass, a pydantic model or an object."""
    if context is None:
        return {}
    if isinstance(context, Mapping):
        return dict(context)
    if dataclasses.is_dataclass(context) and not isinstance(context, type):
        return {f.name: getattr(context, f.name) for f in dataclasses.fields(context)}
    dump = getattr(context, "model_dump", None)
    if callable(dump):
        dumped: dict[str, Any] = dump()
        return dumped
    return dict(getattr(context, "__dict__", {}))


def run_values(
    config: RunnableConfig | Mapping[str, Any] | None = None, runtime: Any = None
) -> dict[str, Any]:
    """The run's values: ``config["configurable"]``, updated by the runtime context's fields.

    ``runtime`` is LangGraph's ``Runtime`` (its ``context`` is read) or the context itself.

    Example:
        >>> run_values({"configurable": {"user_id": "a", "thread_id": "t1"}}, {"user_id": "b"})
        {'user_id': 'b', 'thread_id': 't1'}
    """
    values = dict(_configurable(config))
    context = runtime.context if isinstance(runtime, Runtime) else runtime
    values.update(_context_values(context))
    return values


def _has_context(runtime: Any) -> bool:
    return runtime is not None and (not isinstance(runtime, Runtime) or runtime.context is not None)


def _scope(binding: ScopeBinding, config: RunnableConfig | None, runtime: Any = None) -> Scope:
    source = _BOTH if _has_context(runtime) else _SOURCE
    return binding.resolve(run_values(config, runtime), source=source, hint=_HINT)


def _user_name(user_name: UserName | None, values: Mapping[str, Any]) -> str:
    """The node's ``user_name`` (or what it returns), else the run's, else ``"User"``."""
    name = user_name(values) if callable(user_name) else user_name
    if not name:
        name = values.get("user_name")
    return str(name) if name else DEFAULT_USER_NAME


def _messages(state: Any) -> Sequence[Any]:
    """``state["messages"]`` of a dict state, or ``state.messages`` of an object state."""
    if isinstance(state, Mapping):
        return state.get("messages") or ()
    return getattr(state, "messages", None) or ()


def message_text(message: Any) -> str:
    """The text of a LangChain message (see :func:`membrain.extraction.llm.langchain_text`)."""
    return langchain_text(message)


def _source_id(message: Any, position: int) -> str:
    """The LangChain message id; for a message without one, a hash of its place and text."""
    message_id = getattr(message, "id", None)
    if message_id:
        return str(message_id)
    digest = hashlib.blake2b(
        f"{position}\x1f{getattr(message, 'type', '')}\x1f{message_text(message)}".encode(),
        digest_size=12,
    ).hexdigest()
    return f"lc-{digest}"


def make_writer_node(
    *,
    memory: MemoryLike,
    scope_template: ScopeBinding = DEFAULT_SCOPE_TEMPLATE,
    writer: BackgroundWriter | None = None,
    user_name: UserName | None = None,
    assistant_name: str = DEFAULT_ASSISTANT_NAME,
    idle_seconds: float | None = None,
) -> Node:
    """A node that stores the conversation's new messages and schedules their extraction.

    Each run takes the messages of ``state["messages"]`` it has not written yet for the run's
    scope (by LangChain message id), stores the human and AI ones durably as pending evidence
    (``memory.add(..., extract=False)``: the human speaker is ``user_name``, else the run's
    ``user_name`` value (runtime context or ``config["configurable"]``), else ``"User"``
    (:data:`membrain.binding.DEFAULT_USER_NAME`), never the user id; the AI speaker is
    ``assistant_name`` (default ``"Assistant"``); ``source_id`` is the message id;
    timestamps are the current time, strictly increasing), schedules extraction on the
    background writer and returns ``{}`` without waiting for it. System and tool messages and
    messages without text are skipped.

    Re-writing is harmless: MemBrain's message ids are deterministic (scope and ``source_id``),
    so a new process that sees a thread's old messages again stores nothing twice.

    Args:
        memory: Where to write: an embedded :class:`~membrain.Memory`, or a served memory
            (:class:`~membrain.remote.RemoteMemory`, whose server extracts in the background).
        scope_template: How the run's values become a scope (any
            :class:`~membrain.binding.ScopeBinding`; ``ScopeBinding.fixed(scope)`` pins one).
        writer: The background writer of an embedded memory; default
            ``BackgroundWriter.for_memory(memory)``.
        user_name: Speaker name of human messages, or a function of the run's values
            (:func:`run_values`) returning it (``None`` or ``""`` falls back to the run's
            ``user_name``, then ``"User"``).
        assistant_name: Speaker name of AI messages.
        idle_seconds: Seconds a scope stays quiet before the memory's shared writer extracts it
            (set on ``BackgroundWriter.for_memory(memory)``); default: the writer's own
            (5 s, or ``BackgroundWriter.from_settings``' ``MEMBRAIN_WRITER_IDLE_SECONDS``).

    Raises:
        ConfigurationError: ``writer`` or ``idle_seconds`` given for a served memory, both
            given, or ``idle_seconds`` not positive.
        ScopeError: (when the node runs) the config lacks a key the scope needs.
    """
    check_writer(memory, writer, idle_seconds)
    written: dict[Scope, set[str]] = {}
    lock = threading.Lock()

    def write_memory(
        state: Any, config: RunnableConfig, runtime: Runtime[Any] | None = None
    ) -> dict[str, Any]:
        scope = _scope(scope_template, config, runtime)
        user = _user_name(user_name, run_values(config, runtime))
        with lock:
            seen = written.setdefault(scope, set())
            new = [
                (message, source_id)
                for position, message in enumerate(_messages(state))
                if (source_id := _source_id(message, position)) not in seen
            ]
        records: list[Message] = []
        for message, source_id in new:
            kind = getattr(message, "type", None)
            if kind == "human":
                speaker, role = user, Role.USER
            elif kind == "ai":
                speaker, role = assistant_name, Role.ASSISTANT
            else:
                continue
            text = message_text(message)
            if not text.strip():
                continue
            records.append(
                Message(
                    speaker=speaker,
                    text=text,
                    timestamp=CLOCK.next(),
                    role=role,
                    source_id=source_id,
                )
            )
        if records:
            memory.add(records, scope=scope, extract=False)
            schedule_extraction(memory, scope, records, writer, idle_seconds=idle_seconds)
        with lock:
            seen.update(source_id for _, source_id in new)
        return {}

    return write_memory


def make_recall_node(
    *,
    memory: MemoryLike,
    scope_template: ScopeBinding = DEFAULT_SCOPE_TEMPLATE,
    max_tokens: int = 1000,
    mode: RetrievalMode | str = RetrievalMode.FAST,
    key: str = "memory_context",
    across_sessions: bool = True,
    flush: bool = False,
    flush_timeout: float = 5.0,
    profile_ratio: float = 0.0,
    min_relevance: float | None = None,
) -> Node:
    """A node that puts a memory context for the latest human message into the state.

    Runs ``memory.context(<latest human message text>, max_tokens=..., mode=...)`` and returns
    ``{key: context.text}`` (``""`` when there is no human message or nothing is remembered).
    The state schema needs a ``key`` field (a ``str``); it is ``""`` too when no fact is
    relevant enough (``min_relevance``).

    A turn the writer node wrote is recalled once the background writer extracted it (after
    ``idle_seconds`` of quiet). With ``flush=True`` the node first has the turns the writers of
    an embedded memory still buffer for the recalled scope extracted
    (:func:`membrain.background.flush_scope`: that scope only, and an extraction of it under
    way), waiting at most ``flush_timeout`` seconds, then reads whatever is extracted. It waits
    only while a turn of the scope is not extracted, but then for the extraction's model calls:
    use it when a question may follow a turn at once from another thread (or in a graph without
    a checkpointer); within a checkpointed thread the model sees the previous turn anyway. A
    served memory's server extracts on its own schedule.

    Args:
        memory: Where to look (embedded or served).
        scope_template: How the run's values become a scope (any
            :class:`~membrain.binding.ScopeBinding`; ``ScopeBinding.fixed(scope)`` pins one).
        max_tokens: Token budget of the context (cl100k tokens).
        mode: Retrieval mode; ``"fast"`` makes no LLM call.
        key: State key to write the context text to.
        across_sessions: Recall from every thread of the user (the scope without its session);
            ``False`` recalls from the current thread only.
        flush: Extract the scope's buffered turns before reading; ``False`` (the default)
            never waits.
        flush_timeout: Seconds the flush may wait at most (then recall goes on without it).
        profile_ratio: Share of ``max_tokens`` for the user profile, which then opens the
            context (the same block every turn); the facts get the rest.
        min_relevance: Facts less relevant than this (``MemoryHit.relevance``, 0-1) are left
            out; ``None``: the context's default
            (:data:`membrain.api.requests.CONTEXT_MIN_RELEVANCE` with a calibrated encoder, else
            no floor); ``0`` keeps every fact.

    Raises:
        ConfigurationError: ``mode`` is not a retrieval mode, or ``flush_timeout`` is negative.
        ScopeError: (when the node runs) the config lacks a key the scope needs.
    """
    mode = RetrievalMode.parse(mode)
    if not flush_timeout >= 0:
        raise ConfigurationError(f"flush_timeout must be >= 0 seconds, got {flush_timeout!r}")

    def recall_memory(
        state: Any, config: RunnableConfig, runtime: Runtime[Any] | None = None
    ) -> dict[str, Any]:
        scope = _scope(scope_template, config, runtime)
        if across_sessions:
            scope = scope.without_session()
        question = ""
        for message in reversed(_messages(state)):
            if getattr(message, "type", None) == "human":
                question = message_text(message)
                break
        if not question.strip():
            return {key: ""}
        if flush:
            flush_scope(memory, scope, flush_timeout)
        context = memory.context(
            question,
            scope=scope,
            max_tokens=max_tokens,
            mode=mode,
            profile_ratio=profile_ratio,
            min_relevance=min_relevance,
            **run_of(config),
        )
        if context.nothing_relevant and not context.profile:
            return {key: ""}  # nothing to recall: no note saying so in the prompt
        return {key: context.text}

    return recall_memory
