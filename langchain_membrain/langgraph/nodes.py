"""LangGraph nodes: recall memory before the model, write turns to memory in the background.

Both nodes are plain ``(state, config) -> dict`` functions, so they work in any ``StateGraph``
whose state has a ``messages`` list (``MessagesState`` or your own schema).

The scope comes from ``config["configurable"]`` through a :class:`ScopeTemplate`: by default
``Scope(dataset="{user_id}", task="{assistant_id}", session="{thread_id}")``, where a missing
``assistant_id`` defaults to ``"assistant"``, a missing ``thread_id`` leaves the scope without a
session, and a missing ``user_id`` is an error (:class:`membrain.ScopeError`): memory must
always know whose it is.

Example:
    >>> from langgraph.graph import START, MessagesState, StateGraph
    >>> class State(MessagesState):
    ...     memory_context: str
    >>> builder = StateGraph(State)  # doctest: +SKIP
    >>> builder.add_node("recall", make_recall_node(mem))  # doctest: +SKIP
    >>> builder.add_node("model", call_model)  # doctest: +SKIP
    >>> builder.add_node("write", make_writer_node(mem))  # doctest: +SKIP
    >>> graph.invoke({"messages": [("user", "hi")]},
    ...              {"configurable": {"user_id": "sara", "thread_id": "t1"}})  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import string
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig

from membrain import Memory, Message, RetrievalMode, Role, Scope, ScopeError
from membrain.background import BackgroundWriter
from membrain.extraction.llm import langchain_text
from membrain.tokens import count_tokens

__all__ = [
    "DEFAULT_SCOPE_TEMPLATE",
    "Node",
    "ScopeTemplate",
    "make_recall_node",
    "make_writer_node",
    "message_text",
]


class Node(Protocol):
    """A LangGraph node that reads the run's config."""

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Run the node."""
        ...


_FORMATTER = string.Formatter()


def _fields(template: str) -> list[str]:
    return [name for _, name, _, _ in _FORMATTER.parse(template) if name]


@dataclass(frozen=True)
class ScopeTemplate:
    """How a LangGraph run's ``config["configurable"]`` becomes a MemBrain :class:`Scope`.

    Each part is a ``str.format`` template over the ``configurable`` keys. ``defaults`` fill
    keys the config lacks. A key of ``dataset`` or ``task`` that is neither configured nor
    defaulted raises :class:`ScopeError`; when a key of ``session`` is missing the scope has no
    session (it covers every thread of the user). Set ``session=None`` to never use sessions.

    Args:
        dataset: Template of the scope's dataset (whose memory); default ``"{user_id}"``.
        task: Template of the scope's task (which agent); default ``"{assistant_id}"``.
        session: Template of the session, or ``None``; default ``"{thread_id}"``.
        defaults: Values for keys missing from the config; default
            ``{"assistant_id": "assistant"}``.

    Example:
        >>> ScopeTemplate().resolve({"configurable": {"user_id": "sara", "thread_id": "t1"}})
        Scope(dataset='sara', task='assistant', session='t1')
    """

    dataset: str = "{user_id}"
    task: str = "{assistant_id}"
    session: str | None = "{thread_id}"
    defaults: Mapping[str, str] = field(
        default_factory=lambda: {"assistant_id": "assistant"}, hash=False
    )

    def resolve(self, config: RunnableConfig | Mapping[str, Any] | None) -> Scope:
        """The scope of a run.

        Raises:
            ScopeError: A key that ``dataset`` or ``task`` needs is missing, or a resolved part
                is not a valid scope part.
        """
        values = {**self.defaults, **_configurable(config)}
        parts: dict[str, str] = {}
        for name, template in (("dataset", self.dataset), ("task", self.task)):
            missing = [key for key in _fields(template) if values.get(key) in (None, "")]
            if missing:
                raise ScopeError(
                    f"the scope's {name} is {template!r} but config['configurable'] has no "
                    f"{', '.join(repr(k) for k in missing)}; pass it when invoking the graph, "
                    f"e.g. graph.invoke(inputs, {{'configurable': {{{missing[0]!r}: ...}}}}), "
                    "or give the ScopeTemplate a default for it"
                )
            parts[name] = template.format_map(values)
        session: str | None = None
        if self.session is not None and all(
            values.get(key) not in (None, "") for key in _fields(self.session)
        ):
            session = self.session.format_map(values)
        return Scope(dataset=parts["dataset"], task=parts["task"], session=session)


DEFAULT_SCOPE_TEMPLATE = ScopeTemplate()


def _configurable(config: RunnableConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    if not config:
        return {}
    configurable = config.get("configurable") or {}
    return {key: str(value) for key, value in configurable.items() if value is not None}


def _messages(state: Any) -> Sequence[Any]:
    """``state["messages"]`` of a dict state, or ``state.messages`` of an object state."""
    if isinstance(state, Mapping):
        return state.get("messages") or ()
    return getattr(state, "messages", None) or ()


def message_text(message: Any) -> str:
    """The text of a LangChain message (see :func:`membrain.extraction.llm.langchain_text`)."""
    return langchain_text(message)


class _Clock:
    """Strictly increasing UTC timestamps (two messages of one turn never share a time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = datetime.min.replace(tzinfo=UTC)

    def next(self) -> datetime:
        with self._lock:
            moment = max(datetime.now(UTC), self._last + timedelta(microseconds=1))
            self._last = moment
            return moment


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
    memory: Memory,
    *,
    scope_template: ScopeTemplate = DEFAULT_SCOPE_TEMPLATE,
    writer: BackgroundWriter | None = None,
    assistant_name: str = "assistant",
) -> Node:
    """A node that stores the conversation's new messages and schedules their extraction.

    Each run takes the messages of ``state["messages"]`` it has not written yet for the run's
    scope (by LangChain message id), stores the human and AI ones durably as pending evidence
    (``memory.add(..., extract=False)``: the human speaker is the ``user_id`` of the config, or
    ``"user"``; the AI speaker is ``assistant_name``; ``source_id`` is the message id;
    timestamps are the current time, strictly increasing), schedules extraction on the
    background writer and returns ``{}`` without waiting for it. System and tool messages and
    messages without text are skipped.

    Re-writing is harmless: MemBrain's message ids are deterministic (scope and ``source_id``),
    so a new process that sees a thread's old messages again stores nothing twice.

    Args:
        memory: Where to write.
        scope_template: How the config becomes a scope.
        writer: The background writer; default ``BackgroundWriter.for_memory(memory)``.
        assistant_name: Speaker name of AI messages.

    Raises:
        ScopeError: (when the node runs) the config lacks a key the scope needs.
    """
    written: dict[Scope, set[str]] = {}
    lock = threading.Lock()
    clock = _Clock()

    def write_memory(state: Any, config: RunnableConfig) -> dict[str, Any]:
        scope = scope_template.resolve(config)
        user = _configurable(config).get("user_id") or "user"
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
                    timestamp=clock.next(),
                    role=role,
                    source_id=source_id,
                )
            )
        if records:
            memory.add(records, scope=scope, extract=False)
            target = writer if writer is not None else BackgroundWriter.for_memory(memory)
            target.schedule(scope, tokens=sum(count_tokens(r.text) for r in records))
        with lock:
            seen.update(source_id for _, source_id in new)
        return {}

    return write_memory


def make_recall_node(
    memory: Memory,
    *,
    scope_template: ScopeTemplate = DEFAULT_SCOPE_TEMPLATE,
    max_tokens: int = 1000,
    mode: RetrievalMode | str = RetrievalMode.FAST,
    key: str = "memory_context",
    across_sessions: bool = True,
) -> Node:
    """A node that puts a memory context for the latest human message into the state.

    Runs ``memory.context(<latest human message text>, max_tokens=..., mode=...)`` and returns
    ``{key: context.text}`` (``""`` when there is no human message or nothing is remembered).
    The state schema needs a ``key`` field (a ``str``).

    Args:
        memory: Where to look.
        scope_template: How the config becomes a scope.
        max_tokens: Token budget of the context (cl100k tokens).
        mode: Retrieval mode; ``"fast"`` makes no LLM call.
        key: State key to write the context text to.
        across_sessions: Recall from every thread of the user (the scope without its session);
            ``False`` recalls from the current thread only.

    Raises:
        ScopeError: (when the node runs) the config lacks a key the scope needs.
    """

    def recall_memory(state: Any, config: RunnableConfig) -> dict[str, Any]:
        scope = scope_template.resolve(config)
        if across_sessions:
            scope = scope.without_session()
        question = ""
        for message in reversed(_messages(state)):
            if getattr(message, "type", None) == "human":
                question = message_text(message)
                break
        if not question.strip():
            return {key: ""}
        context = memory.context(question, scope=scope, max_tokens=max_tokens, mode=mode)
        return {key: context.text}

    return recall_memory
