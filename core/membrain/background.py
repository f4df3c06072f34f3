"""Background writing: buffer messages, extract later, never make the chat loop wait (SPEC §8).

A chat loop stores each turn with ``Memory.add(..., extract=False)`` (durable: the messages are
pending evidence in the store) and then calls :meth:`BackgroundWriter.schedule`, which only notes
that the scope has new pending messages and returns. One worker thread per :class:`Memory`
extracts a scope (``Memory.extract_pending``) when

- the scope's buffered tokens reach ``token_threshold``, or
- the scope has been idle (nothing scheduled) for ``idle_seconds``, or
- :meth:`BackgroundWriter.flush` or :meth:`BackgroundWriter.shutdown` asks for it.

Crash safety comes from the store, not from the buffer: a message is persisted as pending
*before* it is scheduled, and extraction marks it processed only after its facts are written with
deterministic ids. A process that dies with messages buffered, or in the middle of a batch, leaves
them pending; the next ``extract_pending`` of the scope (any later ``schedule`` or ``flush`` of
it, in this process or a new one) extracts them, and nothing already processed is extracted
again.

Failures are logged and never raised into the chat loop: a failed batch stays pending (with its
error recorded on the messages) and is retried by the scope's next extraction. There is no
automatic retry loop, so a broken model does not spin.

Limits: one worker per ``Memory`` object serialises all extraction of that object, so the same
scope is never extracted by two threads of one writer at once. Two ``Memory`` objects (or two
processes) with their own writers over the same store could extract the same scope concurrently;
give each store one writer.

Example:
    >>> from membrain import Memory, Scope
    >>> from membrain.background import BackgroundWriter
    >>> mem = Memory(path="/tmp/mem")  # doctest: +SKIP
    >>> writer = BackgroundWriter.for_memory(mem)  # doctest: +SKIP
    >>> scope = Scope(dataset="sara", task="assistant")
    >>> mem.add(turn, scope=scope, extract=False)  # doctest: +SKIP
    >>> writer.schedule(scope, tokens=42)  # returns at once  # doctest: +SKIP
    >>> writer.flush()  # extract everything buffered now and wait  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from membrain.errors import ConfigurationError, MembrainError
from membrain.memory import Memory
from membrain.models import Message, Scope
from membrain.tokens import count_tokens

__all__ = ["BackgroundWriter", "check_writer", "schedule_extraction"]

log = logging.getLogger("membrain.background")


@dataclass(slots=True)
class _Buffer:
    """What is known about a scope's unextracted messages."""

    tokens: int
    last: float
    """``time.monotonic()`` of the latest ``schedule``."""
    forced: bool = False
    """A flush asked for this scope: extract it without waiting."""


class BackgroundWriter:
    """Extracts a :class:`Memory`'s pending messages in one background thread.

    Args:
        memory: The memory whose pending messages to extract.
        token_threshold: Extract a scope as soon as this many tokens are buffered for it.
        idle_seconds: Extract a scope once nothing was scheduled for it for this long.

    Use :meth:`for_memory` to share one writer per ``Memory`` in a process. The writer is
    shut down (buffers flushed) at interpreter exit; call :meth:`shutdown` earlier, before
    closing the memory, to control when.

    Example:
        >>> writer = BackgroundWriter.for_memory(mem)  # doctest: +SKIP
        >>> mem.add(messages, scope=scope, extract=False)  # doctest: +SKIP
        >>> writer.schedule(scope, tokens=120)  # doctest: +SKIP
    """

    _registry: dict[int, BackgroundWriter] = {}
    _registry_lock = threading.Lock()

    def __init__(
        self, memory: Memory, *, token_threshold: int = 2000, idle_seconds: float = 5.0
    ) -> None:
        if token_threshold < 1 or idle_seconds <= 0:
            raise ConfigurationError("token_threshold must be >= 1 and idle_seconds > 0")
        self._memory = memory
        self.token_threshold = token_threshold
        self.idle_seconds = idle_seconds
        self._cond = threading.Condition(threading.Lock())
        self._pending: dict[Scope, _Buffer] = {}
        self._started: dict[Scope, int] = {}
        self._finished: dict[Scope, int] = {}
        self._stopping = False
        self._closed = False
        self.runs = 0
        """Extractions run so far (successful or not)."""
        self.failures = 0
        """Extractions that raised or reported errors (their messages stay pending)."""
        self._thread = threading.Thread(
            target=self._run, name=f"membrain-writer-{id(memory):x}", daemon=True
        )
        self._thread.start()
        atexit.register(self._at_exit)

    # -- registry ----------------------------------------------------------------------------
    @classmethod
    def for_memory(
        cls, memory: Memory, *, token_threshold: int = 2000, idle_seconds: float = 5.0
    ) -> BackgroundWriter:
        """The process-wide writer of ``memory`` (created on first use, with these settings).

        A writer that was shut down is replaced by a new one.
        """
        with cls._registry_lock:
            writer = cls._registry.get(id(memory))
            if writer is None or writer._memory is not memory or writer._closed:
                writer = cls(memory, token_threshold=token_threshold, idle_seconds=idle_seconds)
                cls._registry[id(memory)] = writer
            return writer

    @property
    def memory(self) -> Memory:
        """The memory this writer extracts."""
        return self._memory

    @property
    def alive(self) -> bool:
        """Whether the worker accepts work (not shut down)."""
        return not self._closed and self._thread.is_alive()

    # -- API ---------------------------------------------------------------------------------
    def schedule(self, scope: Scope, tokens: int = 0) -> None:
        """Note that ``scope`` has new pending messages (about ``tokens`` tokens of them).

        Call it after the messages are stored (``Memory.add(..., extract=False)``). Returns at
        once; never waits for extraction.

        Raises:
            MembrainError: The writer was shut down (the messages stay pending in the store).
        """
        with self._cond:
            if self._closed:
                raise MembrainError(
                    "this BackgroundWriter is shut down; the messages stay pending in the store. "
                    "Use BackgroundWriter.for_memory(memory) to get a running writer."
                )
            buffer = self._pending.get(scope)
            if buffer is None:
                buffer = self._pending[scope] = _Buffer(tokens=0, last=0.0)
            buffer.tokens += max(tokens, 0)
            buffer.last = time.monotonic()
            # wake the worker: a threshold is crossed, or it must re-arm its idle timer
            self._cond.notify_all()

    def pending(self) -> dict[Scope, int]:
        """Buffered scopes and their token counts (not yet handed to extraction)."""
        with self._cond:
            return {scope: buffer.tokens for scope, buffer in self._pending.items()}

    def flush(self, scope: Scope | None = None, timeout: float | None = None) -> bool:
        """Extract now (every buffered scope, or ``scope`` even if nothing is buffered) and wait.

        Returns ``True`` when every requested extraction finished (successfully or with errors
        logged), ``False`` if ``timeout`` seconds passed first.

        Raises:
            MembrainError: The writer was shut down, or flush was called from the worker.
        """
        if threading.current_thread() is self._thread:
            raise MembrainError("flush() cannot be called from the writer's own thread")
        with self._cond:
            if self._closed and not self._stopping:
                raise MembrainError("this BackgroundWriter is shut down")
            return self._flush_locked(scope, timeout)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Flush every buffered scope, then stop the worker. Idempotent.

        Returns ``True`` when the worker finished within ``timeout`` seconds. Shut the writer
        down before closing its memory.
        """
        with self._cond:
            if self._closed:
                finished = True
            else:
                self._closed = True
                if threading.current_thread() is self._thread:
                    finished = False  # the worker cannot wait for itself; it stops after this run
                else:
                    self._stopping = True
                    finished = self._flush_locked(None, timeout)
                    self._stopping = False
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        atexit.unregister(self._at_exit)
        with BackgroundWriter._registry_lock:
            if BackgroundWriter._registry.get(id(self._memory)) is self:
                del BackgroundWriter._registry[id(self._memory)]
        return finished and not self._thread.is_alive()

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _at_exit(self) -> None:
        try:
            self.shutdown(timeout=30.0)
        except Exception:  # never let interpreter exit fail on us
            log.exception("background writer shutdown at exit failed")

    # -- worker ------------------------------------------------------------------------------
    def _flush_locked(self, scope: Scope | None, timeout: float | None) -> bool:
        """Force extraction of ``scope`` (or all buffered scopes) and wait; lock held."""
        targets = [scope] if scope is not None else list(self._pending)
        now = time.monotonic()
        marks: dict[Scope, int] = {}
        for target in targets:
            buffer = self._pending.get(target)
            if buffer is None:
                buffer = self._pending[target] = _Buffer(tokens=0, last=now)
            buffer.forced = True
            # a run that starts after this request must finish
            marks[target] = self._started.get(target, 0) + 1
        self._cond.notify_all()
        deadline = None if timeout is None else now + timeout
        while any(self._finished.get(s, 0) < mark for s, mark in marks.items()):
            if not self._thread.is_alive():
                return False
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._cond.wait(remaining)
        return True

    def _due(self, now: float) -> tuple[list[Scope], float | None]:
        """Scopes to extract now, and seconds until the next idle deadline; lock held."""
        due: list[Scope] = []
        wait: float | None = None
        for scope, buffer in self._pending.items():
            idle_at = buffer.last + self.idle_seconds
            if buffer.forced or buffer.tokens >= self.token_threshold or idle_at <= now:
                due.append(scope)
            else:
                wait = idle_at - now if wait is None else min(wait, idle_at - now)
        return due, wait

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    due, wait = self._due(time.monotonic())
                    if due:
                        break
                    if self._closed and not self._stopping:
                        return
                    self._cond.wait(wait)
                scope = due[0]
                del self._pending[scope]
                self._started[scope] = self._started.get(scope, 0) + 1
            try:
                self._extract(scope)
            finally:
                with self._cond:
                    self._finished[scope] = self._finished.get(scope, 0) + 1
                    self._cond.notify_all()

    def _extract(self, scope: Scope) -> None:
        self.runs += 1
        try:
            result = self._memory.extract_pending(scope=scope)
        except Exception:
            self.failures += 1
            log.exception(
                "background extraction of scope %s failed; its messages stay pending", scope
            )
            return
        if result.errors:
            self.failures += 1
            log.warning(
                "background extraction of scope %s left %d batch(es) pending: %s",
                scope,
                len(result.errors),
                "; ".join(str(e) for e in result.errors),
            )
        else:
            log.debug(
                "background extraction of scope %s wrote %d facts", scope, len(result.fact_ids)
            )


def schedule_extraction(
    memory: object,
    scope: Scope,
    messages: Sequence[Message],
    writer: BackgroundWriter | None = None,
) -> None:
    """Have the messages an adapter just stored with ``extract=False`` extracted in the background.

    For an embedded :class:`~membrain.Memory` this schedules them on ``writer`` (default
    :meth:`BackgroundWriter.for_memory`). A served memory
    (:class:`~membrain.remote.RemoteMemory`) needs nothing: its server's own writer took them
    when they were stored.
    """
    if not messages or scope.is_bookkeeping:
        return
    if isinstance(memory, Memory):
        target = writer if writer is not None else BackgroundWriter.for_memory(memory)
        target.schedule(scope, tokens=sum(count_tokens(m.text) for m in messages))


def check_writer(memory: object, writer: BackgroundWriter | None) -> None:
    """Refuse a ``writer`` for a served memory: its server runs its own.

    Raises:
        ConfigurationError: ``writer`` given with a memory that is not a :class:`Memory`.
    """
    if writer is not None and not isinstance(memory, Memory):
        raise ConfigurationError(
            "writer= extracts an embedded Memory; a served memory's server runs its own "
            "background writer: omit writer="
        )
