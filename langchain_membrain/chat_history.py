"""A LangChain chat message history whose messages are MemBrain evidence.

Every message added to the history is stored in MemBrain as a message of the chat's session (its
evidence store), and facts are then extracted from it: by a background writer when one is hooked in
(``on_added``), else right away. Reading the history returns the session's transcript.

``clear()`` ends the transcript and forgets the facts its messages produced (tombstones, kept
for audit); the messages stay as evidence. See :meth:`MembrainChatMessageHistory.clear`.
"""

from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Callable, Sequence
from datetime import datetime

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
)

from membrain import (
    Actor,
    ActorKind,
    MemoryLike,
    Message,
    MessageStatus,
    Role,
    Scope,
    StoredMessage,
)
from membrain.binding import CLOCK, DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME, ScopeBinding
from membrain.remote.protocol import actor_for

__all__ = ["MembrainChatMessageHistory", "transcript_marker_scope"]

log = logging.getLogger("membrain")

CLEAR_SOURCE_PREFIX = "membrain:clear:"
"""``source_id`` prefix of the markers :meth:`MembrainChatMessageHistory.clear` stores."""


def transcript_marker_scope(scope: Scope) -> Scope:
    """The scope that holds the transcript-cleared markers of ``scope``'s session.

    The markers are bookkeeping, not conversation: they live in :meth:`membrain.Scope.bookkeeping`
    so that no search, no listing of the chat's messages and no extraction of the chat's scope
    ever sees them; :meth:`membrain.Memory.delete_scope` of the chat's scope deletes them too.
    """
    return scope.bookkeeping()


class MembrainChatMessageHistory(BaseChatMessageHistory):
    """Chat history stored in MemBrain: the session's messages are evidence for facts.

    Messages are stored at once (durably, as pending evidence); facts are then extracted from
    them. With ``on_added`` (a background writer's ``schedule`` function, for instance) and
    ``extract_in_background=True`` extraction is left to that callback; otherwise the history
    extracts synchronously with :meth:`membrain.Memory.extract_pending` before returning.

    Human messages are stored with role ``user`` and speaker ``user_name`` (or the message's own
    ``name``), AI messages with role ``assistant`` and speaker ``assistant_name``, system
    messages with role ``system`` (speaker ``"system"``). The speaker defaults are
    :data:`membrain.binding.DEFAULT_USER_NAME` and :data:`membrain.binding.DEFAULT_ASSISTANT_NAME`
    (``"User"`` and ``"Assistant"``); read back,
    a message whose speaker is the configured name (in any case) has no ``name``. A LangChain
    message ``id`` is kept as the MemBrain ``source_id``, so facts cite it; a message added
    without one is read back without one, so what :attr:`messages` returns compares equal to
    what was added (type, text, name and id; ``additional_kwargs`` and
    ``response_metadata`` are not stored). Messages without
    text (an AI turn holding only tool calls) are not stored; tool calls and tool results are
    not kept as evidence.

    **clear() forgets what the transcript taught.** It ends the transcript (:attr:`messages` no
    longer returns what was said before) and forgets the facts extracted from its messages: no
    search finds them again, and they stay with their sources for audit. The messages stay as
    evidence until a purge (see :meth:`clear`).

    Args:
        memory: The memory to store into: an embedded :class:`~membrain.Memory` or a served
            one (:class:`~membrain.remote.RemoteMemory`).
        scope: The chat's scope; it must name a ``session`` (the chat's thread).
        dataset: Scope dataset (instead of ``scope``).
        task: Scope task (instead of ``scope``).
        session: Scope session (instead of ``scope``).
        user_name: Speaker name of human messages (default ``"User"``).
        assistant_name: Speaker name of AI messages (default ``"Assistant"``), as on every
            surface (``ai_name``, its former name, is still accepted, deprecated).
        extract_in_background: Leave extraction to ``on_added`` when it is given.
        on_added: Called with the scope after messages are stored.

    Example:
        >>> from membrain import Memory, Scope
        >>> mem = Memory(path="/tmp/mem")  # doctest: +SKIP
        >>> history = MembrainChatMessageHistory(
        ...     memory=mem,
        ...     scope=Scope(dataset="sara", task="assistant", session="thread-1"),
        ...     user_name="Sara",
        ... )  # doctest: +SKIP
        >>> history.add_user_message("I adopted a cat named Miso yesterday.")  # doctest: +SKIP
        >>> history.messages  # doctest: +SKIP
        [HumanMessage(content='I adopted a cat named Miso yesterday.', ...)]
    """

    def __init__(
        self,
        *,
        memory: MemoryLike,
        scope: Scope | None = None,
        dataset: str | None = None,
        task: str | None = None,
        session: str | None = None,
        user_name: str = DEFAULT_USER_NAME,
        assistant_name: str = DEFAULT_ASSISTANT_NAME,
        extract_in_background: bool = True,
        on_added: Callable[[Scope], None] | None = None,
        ai_name: str | None = None,
    ) -> None:
        binding = ScopeBinding.of(
            scope,
            dataset=dataset,
            task=task,
            session=session,
            owner="MembrainChatMessageHistory",
            session_required=True,
        )
        if ai_name is not None:
            warnings.warn(
                "ai_name= is deprecated; pass assistant_name=", DeprecationWarning, stacklevel=2
            )
            assistant_name = ai_name
        if not user_name or not assistant_name:
            raise ValueError("user_name and assistant_name must be non-empty speaker names")
        self.memory = memory
        self.scope = binding.resolve()
        self.user_name = user_name
        self.assistant_name = assistant_name
        self.extract_in_background = extract_in_background
        self.on_added = on_added

    # -- read --------------------------------------------------------------------------------
    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's transcript since the last :meth:`clear`, in time order."""
        cleared_at = self._cleared_at()
        stored = self.memory.messages(scope=self.scope)
        return [
            self._to_langchain(m)
            for m in stored
            if cleared_at is None or m.recorded_at > cleared_at
        ]

    def _cleared_at(self) -> datetime | None:
        markers = self.memory.messages(scope=transcript_marker_scope(self.scope))
        times = [
            m.recorded_at
            for m in markers
            if (m.message.source_id or "").startswith(CLEAR_SOURCE_PREFIX)
        ]
        return max(times, default=None)

    def _to_langchain(self, stored: StoredMessage) -> BaseMessage:
        message = stored.message
        content = message.text
        if message.caption:
            content = f"{content}\n[image: {message.caption}]" if content else message.caption
        message_id = message.source_id  # the caller's id only: a message read back equals it
        if message.role is Role.USER:
            return HumanMessage(
                content=content, id=message_id, name=_name(message.speaker, self.user_name)
            )
        if message.role is Role.ASSISTANT:
            return AIMessage(
                content=content, id=message_id, name=_name(message.speaker, self.assistant_name)
            )
        if message.role is Role.SYSTEM:
            return SystemMessage(
                content=content, id=message_id, name=_name(message.speaker, "system")
            )
        return ChatMessage(content=content, role=message.speaker, id=message_id)

    # -- write -------------------------------------------------------------------------------
    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` as evidence of the session, then have facts extracted from them.

        Timestamps are the current time, strictly increasing (even within one call), so the
        transcript keeps the order the messages were added in.
        """
        converted = [m for m in (self._from_langchain(msg) for msg in messages) if m is not None]
        if not converted:
            return
        self.memory.add(converted, scope=self.scope, extract=False)
        background = self.extract_in_background and self.on_added is not None
        if not background:
            result = self.memory.extract_pending(scope=self.scope)
            for error in result.errors:
                log.warning("extraction failed; the messages stay pending: %s", error)
        if self.on_added is not None:
            self.on_added(self.scope)

    def _from_langchain(self, message: BaseMessage) -> Message | None:
        text = message.text
        if not text.strip():
            return None
        name = message.name or None
        if isinstance(message, HumanMessage):
            speaker, role = name or self.user_name, Role.USER
        elif isinstance(message, AIMessage):
            speaker, role = name or self.assistant_name, Role.ASSISTANT
        elif isinstance(message, SystemMessage):
            speaker, role = name or "system", Role.SYSTEM
        elif isinstance(message, ChatMessage):
            speaker, role = name or message.role, _ROLES.get(message.role, Role.OTHER)
            if role is Role.USER and not name:
                speaker = self.user_name
            elif role is Role.ASSISTANT and not name:
                speaker = self.assistant_name
        else:
            # Tool and function results are not conversation evidence.
            return None
        return Message(
            speaker=speaker,
            text=text,
            timestamp=CLOCK.next(),
            role=role,
            source_id=message.id or None,
        )

    def clear(self) -> None:
        """End the transcript and forget what its messages taught the memory.

        After ``clear()``, :attr:`messages` returns only messages added later, for this and every
        other history object of the same session. The facts extracted from the cleared messages
        are forgotten (:meth:`membrain.Memory.forget`: out of every search, kept with their
        sources for audit, the audit naming ``api:chat-history`` as the actor, or the API key
        on a served memory); messages still waiting for extraction are extracted first, so
        their facts never arrive afterwards. The messages themselves stay as evidence;
        :meth:`membrain.Memory.purge` erases content.

        The clear is recorded as a marker message in a bookkeeping scope beside the chat's
        (:func:`transcript_marker_scope`), never in the chat's own scope, so it is neither
        searched nor extracted; messages recorded up to the newest marker are hidden.
        """
        cleared_at = self._cleared_at()
        stored = self.memory.messages(scope=self.scope)
        cleared = [m for m in stored if cleared_at is None or m.recorded_at > cleared_at]
        if any(m.status is MessageStatus.PENDING for m in cleared):
            self.memory.extract_pending(scope=self.scope)
        facts = self.memory.facts(scope=self.scope, derived_from=[m.id for m in cleared])
        if facts:
            self.memory.forget(
                [f.id for f in facts],
                scope=self.scope,
                by=actor_for(self.memory, Actor(kind=ActorKind.API, name="chat-history")),
                reason="chat history cleared",
            )
        marker = Message(
            speaker="membrain",
            text="transcript cleared",
            timestamp=CLOCK.next(),
            role=Role.SYSTEM,
            source_id=f"{CLEAR_SOURCE_PREFIX}{uuid.uuid4()}",
        )
        self.memory.add([marker], scope=transcript_marker_scope(self.scope), extract=False)


def _name(speaker: str, default: str) -> str | None:
    """The message's own name, ``None`` for the configured speaker (matched as entities are)."""
    return None if speaker.casefold() == default.casefold() else speaker


_ROLES = {
    "user": Role.USER,
    "human": Role.USER,
    "assistant": Role.ASSISTANT,
    "ai": Role.ASSISTANT,
    "system": Role.SYSTEM,
}
