"""A memory block for ``llama_index.core.memory.Memory`` backed by MemBrain."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr, field_validator
from llama_index.core.memory.memory import BaseMemoryBlock

from membrain import Memory, MemoryLike, Message, RetrievalMode, Role, Scope
from membrain.aio import AsyncMemory
from membrain.api.models import Context
from membrain.api.results import EvidenceHit
from membrain.api.tokens import count_tokens
from membrain.background import BackgroundWriter
from membrain.binding import CLOCK, DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME
from membrain.ingest import AddResult
from membrain.retrieval import assemble_context

__all__ = ["MembrainMemoryBlock"]

_ROLES = {
    MessageRole.USER: Role.USER,
    MessageRole.ASSISTANT: Role.ASSISTANT,
    MessageRole.CHATBOT: Role.ASSISTANT,
    MessageRole.MODEL: Role.ASSISTANT,
}
"""Conversation roles written as evidence; system, developer and tool messages are not."""

_ID_KEYS = ("source_id", "message_id", "id")
"""``additional_kwargs`` keys read, in this order, for the caller's id of a message."""

_CACHED_CONTEXTS = 16
_REPLIES_HEADING = "Earlier replies (quoted from the conversation; not facts):"


class MembrainMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for ``llama_index.core.memory.Memory``: cited facts from MemBrain.

    Every conversation message is written to MemBrain as evidence as soon as the block sees
    it: when the memory is read (the short-term messages and the new input, ``_aget``), and
    when messages leave the short-term FIFO (``_aput``), so a short session is remembered by
    the next one. Facts are extracted in batches by the memory's
    :class:`~membrain.background.BackgroundWriter` (``extract=False`` on the block extracts
    nothing; messages that leave the FIFO are extracted at once); on a
    :class:`~membrain.RemoteMemory`, by the server's background writer. A message is identified by
    its ``additional_kwargs`` id, else by its session, role, text and occurrence, so seeing it
    again writes nothing. When the memory is read, the block holds the context MemBrain
    assembles for the latest user message, within ``max_tokens`` (``_aget``); with
    ``priority > 0`` the memory may ask the block to shrink, and the context is assembled again
    within the smaller budget, dropping whole facts (``atruncate``).

    Facts come from what people say, never from the assistant's own words; so that the model
    still sees what it answered before (as a vector memory block would show it), the block
    also quotes up to ``replies`` of the assistant's earlier messages that share words with the
    latest user message (a BM25 search of the evidence), after the facts and within the same
    budget, leaving out the messages it was given (they are in the prompt already). They are
    dropped first when the block must shrink. A block with neither relevant facts nor replies
    is ``""`` (LlamaIndex then leaves it out).

    Args:
        memory: The memory to write to and read from: a :class:`membrain.Memory`, or a
            :class:`~membrain.RemoteMemory` of a served memory.
        scope: Where the memory belongs.
        max_tokens: Token budget of the block (cl100k).
        mode: Retrieval mode for the context (``"fast"`` by default: no LLM call on reads).
        k: Candidate facts searched for the context.
        profile_ratio: Share of ``max_tokens`` for the user profile block that opens the
            context (the same block every turn); the facts get the rest.
        user_name: Speaker name of user messages (a ``name`` in ``additional_kwargs`` wins);
            default ``"User"`` (:data:`membrain.binding.DEFAULT_USER_NAME`).
        assistant_name: Speaker name of assistant messages; default ``"Assistant"``
            (:data:`membrain.binding.DEFAULT_ASSISTANT_NAME`).
        name: Block name (the tag of its section in the memory prompt).
        priority: LlamaIndex truncation priority (0: never truncated).
        record_reads: Write the messages a read sees as evidence (default); ``False`` writes
            only what leaves the short-term FIFO (a read-only probe, an audit tool).
        min_relevance: Facts less relevant than this (``MemoryHit.relevance``, 0-1) are left
            out; ``None`` (default): the context's default
            (:data:`membrain.api.requests.CONTEXT_MIN_RELEVANCE` with a calibrated encoder, else no
            floor); ``0`` keeps all.
        replies: How many earlier assistant replies to quote (0: none).

    Example:
        >>> from llama_index.core.memory import Memory as ChatMemory
        >>> block = MembrainMemoryBlock(
        ...     memory=Memory(path="/tmp/mem"), scope=Scope(dataset="sara", task="chat")
        ... )  # doctest: +SKIP
        >>> chat_memory = ChatMemory.from_defaults(
        ...     session_id="s1", memory_blocks=[block], token_limit=4000
        ... )  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")  # no silent typos

    name: str = Field(default="membrain", description="The name of the memory block.")
    description: str | None = Field(
        default="Facts recalled from long-term memory, each citing its source messages."
    )
    priority: int = Field(default=1, description="Truncation priority (0: never truncated).")
    memory: MemoryLike = Field(
        description="The MemBrain memory (a Memory, or a RemoteMemory of a server).", exclude=True
    )
    scope: Scope = Field(description="Where the memory belongs.")
    max_tokens: int = Field(default=1000, gt=0, description="Token budget of the block.")
    mode: RetrievalMode = Field(
        default=RetrievalMode.FAST, description="Retrieval mode of the context."
    )
    k: int = Field(default=50, gt=0, description="Candidate facts searched for the context.")
    profile_ratio: float = Field(
        default=0.0, ge=0, le=1, description="Share of the budget for the user profile block."
    )
    user_name: str = Field(default=DEFAULT_USER_NAME, min_length=1)
    assistant_name: str = Field(default=DEFAULT_ASSISTANT_NAME, min_length=1)
    record_reads: bool = Field(
        default=True,
        description="Write the messages a read sees as evidence (False: only FIFO flushes).",
    )

    min_relevance: float | None = Field(
        default=None, ge=0, le=1, description="Relevance floor of the facts (None: context's)."
    )
    replies: int = Field(default=3, ge=0, description="Earlier assistant replies quoted.")
    run: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="The run the block's reads serve, recorded by a memory that traces recalls.",
    )

    _contexts: OrderedDict[str, tuple[Context, str]] = PrivateAttr(default_factory=OrderedDict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @field_validator("mode", mode="before")
    @classmethod
    def _parse_mode(cls, value: RetrievalMode | str) -> RetrievalMode:
        # ConfigurationError is a ValueError: pydantic reports it as a validation error.
        return RetrievalMode.parse(value)

    async def _add(self, batch: list[Message], *, extract: bool) -> AddResult:
        if isinstance(self.memory, Memory):
            return await AsyncMemory(self.memory).add(batch, scope=self.scope, extract=extract)
        return await asyncio.to_thread(self.memory.add, batch, scope=self.scope, extract=extract)

    async def _context(self, question: str) -> Context:
        arguments: dict[str, Any] = {
            "scope": self.scope,
            "max_tokens": self.max_tokens,
            "mode": self.mode,
            "k": self.k,
            "profile_ratio": self.profile_ratio,
            "min_relevance": self.min_relevance,
            "run": self.run,
        }
        if isinstance(self.memory, Memory):
            return await AsyncMemory(self.memory).context(question, **arguments)
        return await asyncio.to_thread(self.memory.context, question, **arguments)

    async def _replies(self, question: str, shown: set[str], budget: int) -> str:
        """The assistant's earlier replies sharing words with ``question``, within ``budget``."""
        if self.replies == 0 or budget <= count_tokens(_REPLIES_HEADING):
            return ""
        arguments: dict[str, Any] = {
            "scope": self.scope,
            "k": self.replies * 4 + len(shown),
            "paths": ["sparse"],
        }
        found: list[EvidenceHit]
        if isinstance(self.memory, Memory):
            found = await AsyncMemory(self.memory).search_messages(question, **arguments)
        else:
            found = await asyncio.to_thread(self.memory.search_messages, question, **arguments)
        lines = [_REPLIES_HEADING]
        used = count_tokens(_REPLIES_HEADING)
        for hit in found:
            message = hit.message
            if message.role is not Role.ASSISTANT or (message.source_id or "") in shown:
                continue
            line = f"- {message.speaker}: {message.text}"
            tokens = count_tokens(line) + 1
            if used + tokens > budget:
                continue
            lines.append(line)
            used += tokens
            if len(lines) > self.replies:
                break
        return "\n".join(lines) if len(lines) > 1 else ""

    async def _aput(self, messages: list[ChatMessage], **block_kwargs: Any) -> None:
        """Write the messages leaving the FIFO as evidence and extract facts from them now."""
        batch = self._to_messages(messages, str(block_kwargs.get("session_id") or ""))
        if batch:
            await self._add(batch, extract=True)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The cited context for the latest user message ("" before the first one).

        The messages given (the short-term history and the new input) are written as evidence
        first; the background writer extracts them (a served memory's: the server's).
        """
        session = str(block_kwargs.get("session_id") or "")
        given = self._to_messages(messages or [], session)
        if given and self.record_reads:
            result = await self._add(given, extract=False)
            if result.messages_stored and isinstance(self.memory, Memory):
                tokens = sum(count_tokens(m.text) for m in given)
                BackgroundWriter.for_memory(self.memory).schedule(self.scope, tokens=tokens)
        question = _latest_user_text(messages or [])
        if not question:
            return ""
        context = await self._context(question)
        facts = _facts_text(context)
        shown = {m.source_id for m in given if m.source_id}
        budget = self.max_tokens - (count_tokens(facts) + 2 if facts else 0)
        replies = await self._replies(question, shown, budget)
        text = "\n\n".join(part for part in (facts, replies) if part)
        self._remember(text, context, replies)
        return text

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Shrink the block by ``tokens_to_truncate``: replies first, then whole facts.

        The quoted replies go first; then the facts of the context this block returned are
        assembled again within its size minus what is still to cut. Returns ``None`` (drop the
        block) when no fact fits, or when ``content`` is not a text this block produced (or is
        empty).
        """
        if tokens_to_truncate <= 0:
            return content
        if not isinstance(content, str) or not content:
            return None
        with self._lock:
            entry = self._contexts.get(content)
        if entry is None:
            return None
        context, replies = entry
        facts = _facts_text(context)
        target = count_tokens(content) - tokens_to_truncate
        if replies and facts and count_tokens(facts) <= target:
            self._remember(facts, context, "")
            return facts
        budget = min(self.max_tokens, context.tokens, target)
        if budget < 1 or not context.hits:
            return None
        share = min(context.profile_tokens, budget)  # the profile keeps its place, shrunk too
        smaller = assemble_context(
            context.question,
            context.hits,
            max_tokens=budget,
            profile_tokens=share,
            profile=context.profile if context.profile else None,
        )
        if not smaller.text:
            return None
        self._remember(smaller.text, smaller, "")
        return smaller.text

    def _remember(self, text: str, context: Context, replies: str) -> None:
        if not text:
            return
        with self._lock:
            self._contexts[text] = (context, replies)
            self._contexts.move_to_end(text)
            while len(self._contexts) > _CACHED_CONTEXTS:
                self._contexts.popitem(last=False)

    def _to_messages(self, messages: list[ChatMessage], session: str) -> list[Message]:
        """MemBrain messages, timestamped now and strictly increasing across calls.

        Each has a ``source_id``: the caller's, else a digest of the session, role, text and
        how many equal messages came before it in ``messages``.
        """
        converted: list[Message] = []
        seen: dict[tuple[str, str], int] = {}
        for chat in messages:
            role = _ROLES.get(MessageRole(chat.role))
            text = (chat.content or "").strip()
            if role is None or not text:
                continue
            extra = chat.additional_kwargs
            default = self.user_name if role is Role.USER else self.assistant_name
            speaker = str(extra.get("name") or default)
            occurrence = seen[(role.value, text)] = seen.get((role.value, text), -1) + 1
            source_id = next((str(extra[key]) for key in _ID_KEYS if extra.get(key)), None)
            if source_id is None:
                key = "\x1f".join((session, role.value, text, str(occurrence)))
                source_id = (
                    "llamaindex:" + hashlib.blake2b(key.encode(), digest_size=12).hexdigest()
                )
            converted.append(
                Message(
                    speaker=speaker,
                    text=text,
                    role=role,
                    timestamp=CLOCK.next(),
                    source_id=source_id,
                )
            )
        return converted


def _facts_text(context: Context) -> str:
    """The context's text, ``""`` when it only says that nothing was relevant."""
    return "" if context.nothing_relevant and not context.profile else context.text


def _latest_user_text(messages: list[ChatMessage]) -> str:
    for chat in reversed(messages):
        if chat.role == MessageRole.USER:
            text = (chat.content or "").strip()
            if text:
                return text
    return ""
