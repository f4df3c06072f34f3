"""The pluggable chat model: LangChain, LlamaIndex, or MemBrain's own minimal protocol.

:func:`as_llm_client` wraps whatever the user passed in an :class:`LLMClient`, which makes one
call at a time look the same for every kind of model and counts every call's tokens. Framework
objects are recognised by the names in their class hierarchy, so the core never imports a
framework; LlamaIndex's ``ChatMessage`` is imported only inside a call, when the caller has
already passed a LlamaIndex model.

``LLMClient.call`` never retries: retrying is the caller's job. Every exception the model raises
becomes :class:`LLMCallError` with the original chained.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from membrain.api.errors import ConfigurationError, ExtractionError
from membrain.api.tokens import count_tokens

__all__ = [
    "ChatModel",
    "LLMCallError",
    "LLMClient",
    "LLMReply",
    "Usage",
    "as_llm_client",
    "llm_callbacks",
    "load_model",
]

logger = logging.getLogger("membrain.llm")

_callbacks: ContextVar[object | None] = ContextVar("membrain_llm_callbacks", default=None)


@contextmanager
def llm_callbacks(callbacks: object | None) -> Iterator[None]:
    """Run the LangChain model calls MemBrain makes in this block under ``callbacks``.

    ``callbacks`` is what a LangChain ``config["callbacks"]`` takes (a callback manager, such
    as a retriever's ``run_manager.get_child()``, or a list of handlers): the calls then show as
    child runs of the caller's run in its traces. Threads started with the context copied
    (``asyncio.to_thread``) inherit it.
    """
    token = _callbacks.set(callbacks)
    try:
        yield
    finally:
        _callbacks.reset(token)


_INPUT_KEYS = ("input_tokens", "prompt_tokens", "prompt_token_count")
_OUTPUT_KEYS = ("output_tokens", "completion_tokens", "candidates_token_count")
# Reported (input, output) token counts; a missing one is counted with tiktoken.
_Counts = tuple[int | None, int | None]


@dataclass(frozen=True, slots=True)
class LLMReply:
    """One model answer and what it cost.

    Args:
        text: The raw text the model returned (for structured output: the JSON text).
        input_tokens: Prompt tokens, as reported by the model or counted with tiktoken.
        output_tokens: Answer tokens, likewise.
        parsed: The object, when the model produced structured output natively.
    """

    text: str
    input_tokens: int
    output_tokens: int
    parsed: dict[str, Any] | None = None


@runtime_checkable
class ChatModel(Protocol):
    """MemBrain's minimal model protocol, for users without a framework.

    Example:
        >>> class Echo:
        ...     def generate(self, system: str, prompt: str) -> str:
        ...         return '{"facts": []}'
        >>> as_llm_client(Echo()).call("system", "prompt").text
        '{"facts": []}'
    """

    def generate(self, system: str, prompt: str) -> str | LLMReply:
        """Answer ``prompt`` under the ``system`` instructions."""
        ...


@dataclass
class Usage:
    """Running totals of model calls and tokens; increments are thread-safe."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, reply: LLMReply) -> None:
        """Count one call."""
        with self._lock:
            self.calls += 1
            self.input_tokens += reply.input_tokens
            self.output_tokens += reply.output_tokens

    def snapshot(self) -> Usage:
        """A consistent copy of the totals."""
        with self._lock:
            return Usage(self.calls, self.input_tokens, self.output_tokens)


class LLMCallError(ExtractionError):
    """The model raised; the original exception is chained as ``__cause__``."""


class LLMClient:
    """Wraps any supported model; every call's tokens are counted.

    Args:
        model: A LangChain chat model, a LlamaIndex LLM, or an object with
            ``generate(system, prompt)``.

    Example:
        >>> class Echo:
        ...     def generate(self, system: str, prompt: str) -> str:
        ...         return prompt
        >>> client = LLMClient(Echo())
        >>> client.call("Be brief.", "hello").text, client.usage.calls
        ('hello', 1)
    """

    def __init__(self, model: object) -> None:
        self.model: Any = model
        self.kind: str = _kind_of(model)
        self.usage = Usage()
        self._lock = threading.Lock()
        self._structured: dict[str, Any] = {}  # schema (as JSON) -> runnable
        self._structured_supported = True

    def __repr__(self) -> str:
        return f"LLMClient(kind={self.kind!r}, model={type(self.model).__name__})"

    def call(self, system: str, prompt: str, *, schema: dict[str, Any] | None = None) -> LLMReply:
        """Ask the model once.

        Args:
            system: The system instructions.
            prompt: The user prompt.
            schema: A JSON schema for the answer, used where the model supports structured
                output natively (LangChain models with ``with_structured_output``); ignored
                otherwise. Give it a ``title`` and ``description``.

        Returns:
            The reply with its token counts; also added to :attr:`usage`.

        Raises:
            LLMCallError: The model raised (any exception, timeouts included). The failed call
                is still counted in :attr:`usage`, with the prompt's tokens as input.
        """
        try:
            if self.kind == "langchain":
                reply = self._call_langchain(system, prompt, schema)
            elif self.kind == "llamaindex":
                reply = self._call_llamaindex(system, prompt)
            else:
                reply = self._call_membrain(system, prompt)
        except Exception as exc:
            # A failed call still counts, with the prompt's tokens (what it was sent).
            self.usage.add(LLMReply("", count_tokens(system) + count_tokens(prompt), 0))
            raise LLMCallError(
                f"the {self.kind} model {type(self.model).__name__} raised "
                f"{type(exc).__name__}: {exc}; check the model's configuration and "
                "credentials, or retry later"
            ) from exc
        self.usage.add(reply)
        logger.debug(
            "llm call kind=%s tokens_in=%d tokens_out=%d structured=%s",
            self.kind,
            reply.input_tokens,
            reply.output_tokens,
            reply.parsed is not None,
        )
        return reply

    # LangChain -------------------------------------------------------------------------------

    def _call_langchain(self, system: str, prompt: str, schema: dict[str, Any] | None) -> LLMReply:
        messages = [("system", system), ("human", prompt)]
        callbacks = _callbacks.get()
        config = {"callbacks": callbacks} if callbacks is not None else None
        runnable = self._structured_runnable(schema) if schema is not None else None
        if runnable is None:
            message = self.model.invoke(messages, config=config)
            text = langchain_text(message)
            return _reply(system, prompt, text, _langchain_usage(message))
        result = runnable.invoke(messages, config=config)
        raw = result.get("raw") if isinstance(result, Mapping) else None
        parsed = result.get("parsed") if isinstance(result, Mapping) else None
        error = result.get("parsing_error") if isinstance(result, Mapping) else None
        if isinstance(parsed, dict) and error is None:
            text = json.dumps(parsed, ensure_ascii=False)
            return _reply(system, prompt, text, _langchain_usage(raw), parsed=parsed)
        return _reply(system, prompt, _langchain_fallback_text(raw), _langchain_usage(raw))

    def _structured_runnable(self, schema: dict[str, Any]) -> Any:
        """The model's structured-output runnable for ``schema``, or None if unsupported."""
        key = json.dumps(schema, sort_keys=True, default=str)
        with self._lock:
            if not self._structured_supported:
                return None
            if key not in self._structured:
                try:
                    self._structured[key] = self.model.with_structured_output(
                        schema, method="json_schema", include_raw=True
                    )
                except (NotImplementedError, TypeError, ValueError, AttributeError) as exc:
                    logger.debug(
                        "structured output unavailable for %s (%s: %s); using plain invoke",
                        type(self.model).__name__,
                        type(exc).__name__,
                        exc,
                    )
                    self._structured_supported = False
                    return None
            return self._structured[key]

    # LlamaIndex ------------------------------------------------------------------------------

    def _call_llamaindex(self, system: str, prompt: str) -> LLMReply:
        # The caller passed a LlamaIndex LLM, so llama_index is installed.
        from llama_index.core.llms import ChatMessage  # noqa: TID251

        response = self.model.chat(
            [
                ChatMessage(role="system", content=system),
                ChatMessage(role="user", content=prompt),
            ]
        )
        text = getattr(getattr(response, "message", None), "content", None) or ""
        usage = _usage_numbers(getattr(response, "raw", None))
        if usage is None:
            usage = _usage_numbers(getattr(response, "additional_kwargs", None), nested=False)
        return _reply(system, prompt, str(text), usage)

    # MemBrain protocol -----------------------------------------------------------------------

    def _call_membrain(self, system: str, prompt: str) -> LLMReply:
        answer = self.model.generate(system, prompt)
        if isinstance(answer, LLMReply):
            return answer
        if isinstance(answer, str):
            return _reply(system, prompt, answer, None)
        raise TypeError(f"generate() returned {type(answer).__name__}; expected str or LLMReply")


def load_model(spec: str) -> object:
    """The chat model that ``spec`` (``"module:attribute"``) names.

    The attribute is the model itself, or a function or class that makes it when called with
    no argument (the way a server's command line names an application's model).

    Raises:
        ConfigurationError: ``spec`` is malformed, its module cannot be imported, it names
            nothing, or making the model failed.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"name the model as module:attribute, got {spec!r}")
    try:
        target: object = importlib.import_module(module_name.strip())
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r} for the model: {exc}") from exc
    try:
        for part in attribute.strip().split("."):
            target = getattr(target, part)
    except AttributeError:
        raise ConfigurationError(f"{module_name!r} has no {attribute!r} (the model)") from None
    if inspect.isfunction(target) or inspect.isclass(target):
        try:
            target = target()
        except Exception as exc:  # the application's own factory: report, do not guess
            raise ConfigurationError(f"making the model with {spec}() failed: {exc!r}") from exc
    return target


def as_llm_client(model: object) -> LLMClient:
    """Wrap ``model`` in an :class:`LLMClient` (an ``LLMClient`` is returned as is).

    Raises:
        ConfigurationError: ``model`` is none of the supported kinds.
    """
    if isinstance(model, LLMClient):
        return model
    return LLMClient(model)


def _kind_of(model: object) -> str:
    if isinstance(model, type):
        raise ConfigurationError(
            f"got the class {model.__name__}; pass an instance of it (a model object)"
        )
    if _has_base(model, "langchain_core", ("BaseChatModel",)):
        return "langchain"
    if _has_base(model, "llama_index", ("LLM", "BaseLLM")):
        return "llamaindex"
    if callable(getattr(model, "generate", None)):
        return "membrain"
    raise ConfigurationError(
        f"cannot use {type(model).__name__} as a model: pass a LangChain chat model "
        "(a langchain_core BaseChatModel), a LlamaIndex LLM, or an object with a "
        "generate(system, prompt) -> str method (membrain.extraction.llm.ChatModel)"
    )


def _has_base(model: object, package: str, names: tuple[str, ...]) -> bool:
    return any(
        cls.__name__ in names
        and (cls.__module__ == package or cls.__module__.startswith(package + "."))
        for cls in type(model).__mro__
    )


def _reply(
    system: str,
    prompt: str,
    text: str,
    usage: _Counts | None,
    *,
    parsed: dict[str, Any] | None = None,
) -> LLMReply:
    inputs, outputs = usage if usage is not None else (None, None)
    if inputs is None:
        inputs = count_tokens(system) + count_tokens(prompt)
    if outputs is None:
        outputs = count_tokens(text)
    return LLMReply(text=text, input_tokens=inputs, output_tokens=outputs, parsed=parsed)


def langchain_text(message: object) -> str:
    """The text of a LangChain message: ``content`` as a string, or its text blocks joined."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return "" if content is None else str(content)


def _langchain_fallback_text(raw: object) -> str:
    """Text of a structured-output reply whose parsing failed: content, else tool arguments."""
    text = langchain_text(raw) if raw is not None else ""
    if text.strip():
        return text
    for attr in ("tool_calls", "invalid_tool_calls"):
        for call in getattr(raw, attr, None) or ():
            args = call.get("args") if isinstance(call, Mapping) else None
            if isinstance(args, str):
                return args
            if isinstance(args, Mapping):
                return json.dumps(dict(args), ensure_ascii=False)
    return text


def _langchain_usage(message: object) -> _Counts | None:
    return _usage_numbers(getattr(message, "usage_metadata", None), nested=False)


def _usage_numbers(source: object, *, nested: bool = True) -> _Counts | None:
    """Token counts from a usage record (or, if ``nested``, from its ``usage`` field).

    Accepts dicts, attribute objects and pydantic models with OpenAI-style
    (``prompt_tokens``/``completion_tokens``) or ``input_tokens``/``output_tokens`` names
    (the keys LlamaIndex's own token counter reads).
    """
    if source is None:
        return None
    if nested:
        for name in ("usage", "usage_metadata"):
            found = _usage_numbers(_field(source, name), nested=False)
            if found is not None:
                return found
        return None
    inputs = _first_int(source, _INPUT_KEYS)
    outputs = _first_int(source, _OUTPUT_KEYS)
    if inputs is None and outputs is None:
        return None
    return inputs, outputs


def _first_int(source: object, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = _field(source, key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _field(source: object, name: str) -> object:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)
