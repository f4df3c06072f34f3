"""Background writing: buffer messages, extract later, never make the chat loop wait.

A chat loop stores each turn with ``Memory.add(..., extract=False)`` (durable: the messages are
pending evidence in the store) and then calls :meth:`BackgroundWriter.schedule`, which only notes
that the scope has new pending messages and returns. One worker thread per :class:`Memory`
extracts a scope (``Memory.extract_pending``) when

- the scope's buffered tokens reach ``token_threshold``, or
- the scope has been idle (nothing scheduled) for ``idle_seconds``, or
- :meth:`BackgroundWriter.flush` or :meth:`BackgroundWriter.shutdown` asks for it, or a reader
  asks for the scope before it searches (:func:`flush_scope`; the LangGraph recall node made
  with ``flush=True``).

``idle_seconds`` (default 5, ``MEMBRAIN_WRITER_IDLE_SECONDS`` through
:meth:`BackgroundWriter.from_settings`) is how long a question asked right after a turn may miss
that turn's facts unless its reader flushes the scope first.

Closing the memory (``Memory.close``, or leaving ``with Memory(...)``) first drains its writers:
together they get ``drain_timeout`` seconds (default 5) to extract what they buffered, then they
stop. What is not extracted by then stays pending (one warning is logged); the next ``add`` or
``extract_pending`` of its scope extracts it; an extraction the close cut short fails quietly.
Writers are known to their memory's close only weakly, so a stopped writer keeps nothing alive.

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
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from membrain.api.config import MembrainSettings, settings_for
from membrain.api.errors import ConfigurationError, MembrainError
from membrain.api.models import Message, Scope
from membrain.api.tokens import count_tokens
from membrain.memory import Memory

__all__ = [
    "DEFAULT_IDLE_SECONDS",
    "DEFAULT_TOKEN_THRESHOLD",
    "BackgroundWriter",
    "check_writer",
    "flush_scope",
    "schedule_extraction",
]

log = logging.getLogger("membrain.background")

DEFAULT_TOKEN_THRESHOLD = 2000
"""Buffered tokens of a scope that start its extraction at once."""
DEFAULT_IDLE_SECONDS = 5.0
"""Seconds a scope stays quiet before it is extracted (``MEMBRAIN_WRITER_IDLE_SECONDS``)."""


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
    shut down (buffers flushed) at interpreter exit, and drained and stopped when its memory
    closes (``Memory.close(drain_timeout=...)``); call :meth:`shutdown` to choose when.

    Example:
        >>> writer = BackgroundWriter.for_memory(mem)  # doctest: +SKIP
        >>> mem.add(messages, scope=scope, extract=False)  # doctest: +SKIP
        >>> writer.schedule(scope, tokens=120)  # doctest: +SKIP
    """

    _registry: ClassVar[dict[int, BackgroundWriter]] = {}
    _registry_lock = threading.Lock()
    _writers_lock = threading.Lock()
    _writers: ClassVar[weakref.WeakSet[BackgroundWriter]] = weakref.WeakSet()
    """Every writer, held weakly: what a closing memory drains."""
    _closed_memories: ClassVar[weakref.WeakSet[Memory]] = weakref.WeakSet()

    def __init__(
        self,
        memory: Memory,
        *,
        token_threshold: int = DEFAULT_TOKEN_THRESHOLD,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
    ) -> None:
        _check_settings(token_threshold, idle_seconds)
        self._memory = memory
        self.token_threshold = token_threshold
        self.idle_seconds = idle_seconds
        self._cond = threading.Condition(threading.Lock())
        self._pending: dict[Scope, _Buffer] = {}
        self._started: dict[Scope, int] = {}
        self._finished: dict[Scope, int] = {}
        self._running: Scope | None = None
        self._stopping = False
        self._closed = False
        self._detached = False
        """The memory closed: extract nothing more, stay quiet about a run it cut short."""
        self.runs = 0
        """Extractions run so far (successful or not)."""
        self.failures = 0
        """Extractions that raised or reported errors (their messages stay pending)."""
        self._thread = threading.Thread(
            target=self._run, name=f"membrain-writer-{id(memory):x}", daemon=True
        )
        with BackgroundWriter._writers_lock:
            if memory in BackgroundWriter._closed_memories:
                raise MembrainError("this memory is closed; open the store again")
            BackgroundWriter._writers.add(self)
        self._thread.start()
        atexit.register(self._at_exit)

    # -- registry ----------------------------------------------------------------------------
    @classmethod
    def for_memory(
        cls,
        memory: Memory,
        *,
        token_threshold: int | None = None,
        idle_seconds: float | None = None,
    ) -> BackgroundWriter:
        """The process-wide writer of ``memory``, created on first use.

        Settings given apply to it, also when it runs already (see :meth:`configure`); ``None``
        keeps its own (at creation :data:`DEFAULT_TOKEN_THRESHOLD` and
        :data:`DEFAULT_IDLE_SECONDS`). A writer that was shut down is replaced by a new one.

        Raises:
            ConfigurationError: A setting out of range.
            MembrainError: ``memory`` is closed.
        """
        with cls._registry_lock:
            writer = cls._registry.get(id(memory))
            if writer is None or writer._memory is not memory or writer._closed:
                writer = cls(
                    memory,
                    token_threshold=(
                        DEFAULT_TOKEN_THRESHOLD if token_threshold is None else token_threshold
                    ),
                    idle_seconds=DEFAULT_IDLE_SECONDS if idle_seconds is None else idle_seconds,
                )
                cls._registry[id(memory)] = writer
                return writer
        if token_threshold is not None or idle_seconds is not None:
            writer.configure(token_threshold=token_threshold, idle_seconds=idle_seconds)
        return writer

    @classmethod
    def from_settings(
        cls, memory: Memory, settings: MembrainSettings | None = None
    ) -> BackgroundWriter:
        """:meth:`for_memory` with ``settings.writer_idle_seconds`` (default: ``MEMBRAIN_*``).

        Example:
            >>> writer = BackgroundWriter.from_settings(mem)  # doctest: +SKIP

        Raises:
            ConfigurationError: An invalid ``MEMBRAIN_*`` setting.
        """
        chosen = settings_for(settings)
        return cls.for_memory(memory, idle_seconds=chosen.writer_idle_seconds)

    @classmethod
    def of(cls, memory: Memory) -> list[BackgroundWriter]:
        """The writers of ``memory`` that have not stopped (not only the shared one)."""
        with cls._writers_lock:
            return [w for w in list(cls._writers) if w._memory is memory and w.alive]

    @property
    def memory(self) -> Memory:
        """The memory this writer extracts."""
        return self._memory

    @property
    def alive(self) -> bool:
        """Whether the worker accepts work (not shut down, its memory not closed)."""
        return not self._closed and self._thread.is_alive()

    def configure(
        self, *, token_threshold: int | None = None, idle_seconds: float | None = None
    ) -> None:
        """Change the triggers (``None`` keeps one); buffered scopes are due by the new ones.

        Raises:
            ConfigurationError: A setting out of range.
        """
        with self._cond:
            threshold = self.token_threshold if token_threshold is None else token_threshold
            idle = self.idle_seconds if idle_seconds is None else idle_seconds
            _check_settings(threshold, idle)
            self.token_threshold, self.idle_seconds = threshold, idle
            self._cond.notify_all()

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

    def _check_caller(self, call: str) -> None:
        if threading.current_thread() is self._thread:
            raise MembrainError(f"{call} cannot be called from the writer's own thread")

    def _check_open(self) -> None:
        if self._closed and not self._stopping:
            raise MembrainError("this BackgroundWriter is shut down")

    def flush(self, scope: Scope | None = None, timeout: float | None = None) -> bool:
        """Extract now (every buffered scope, or ``scope`` even if nothing is buffered) and wait.

        Returns ``True`` when every requested extraction finished (successfully or with errors
        logged), ``False`` if ``timeout`` seconds passed first.

        Raises:
            MembrainError: The writer was shut down, or flush was called from the worker.
        """
        self._check_caller("flush()")
        with self._cond:
            self._check_open()
            targets = [scope] if scope is not None else list(self._pending)
            return self._flush_locked(targets, timeout)

    def flush_within(self, scope: Scope, timeout: float | None = None) -> bool:
        """Extract now what is buffered for ``scope`` (all its sessions when it has none), and wait.

        Also waits for such a scope's extraction already under way; other scopes wait their
        turn. Returns ``True`` when every one finished, ``False`` if ``timeout`` seconds passed
        first (the extraction goes on in the background).

        Raises:
            MembrainError: The writer was shut down, or this was called from the worker.
        """
        self._check_caller("flush_within()")
        with self._cond:
            self._check_open()
            targets = [s for s in self._pending if _covers(scope, s)]
            if self._running is not None and _covers(scope, self._running):
                targets.append(self._running)
            return self._flush_locked(targets, timeout, create=False) if targets else True

    def shutdown(self, timeout: float | None = None) -> bool:
        """Flush every buffered scope, then stop the worker. Idempotent.

        Returns ``True`` when the worker finished within ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        own = threading.current_thread() is self._thread
        with self._cond:
            if self._closed:
                finished = True
            else:
                self._closed = True
                if own:
                    finished = False  # the worker cannot wait for itself; it stops after this run
                else:
                    self._stopping = True
                    finished = self._flush_locked(list(self._pending), timeout)
                    self._stopping = False
            self._cond.notify_all()
        if not own:
            self._thread.join(_remaining(deadline))
        self._forget()
        return finished and not self._thread.is_alive()

    def _close_for_memory(self, deadline: float) -> int:
        """Drain until ``deadline`` for a closing memory, then stop; the scopes left pending."""
        own = threading.current_thread() is self._thread
        with self._cond:
            if not self._closed and not own:
                self._closed = self._stopping = True
                targets = list(self._pending)
                if self._running is not None:
                    targets.append(self._running)
                self._flush_locked(targets, _remaining(deadline), create=False)
                self._stopping = False
            self._closed = self._detached = True
            left = set(self._pending)
            self._pending.clear()
            self._cond.notify_all()
        if not own:
            self._thread.join(_remaining(deadline))
        with self._cond:
            if self._running is not None:
                left.add(self._running)
        self._forget()
        return len(left)

    def _forget(self) -> None:
        """Leave the exit hook and the shared registry (a stopped writer is done)."""
        atexit.unregister(self._at_exit)
        with BackgroundWriter._registry_lock:
            if BackgroundWriter._registry.get(id(self._memory)) is self:
                del BackgroundWriter._registry[id(self._memory)]

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
    def _flush_locked(
        self, targets: Sequence[Scope], timeout: float | None, *, create: bool = True
    ) -> bool:
        """Force extraction of ``targets`` and wait; lock held.

        A target with nothing buffered is extracted anyway when ``create``; otherwise only its
        run under way is waited for.
        """
        now = time.monotonic()
        marks: dict[Scope, int] = {}
        for target in targets:
            buffer = self._pending.get(target)
            if buffer is None and not create:
                marks[target] = self._started.get(target, 0)
                continue
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
                    if self._detached:
                        return  # the memory closed: what is buffered stays pending in the store
                    due, wait = self._due(time.monotonic())
                    if due:
                        break
                    if self._closed and not self._stopping:
                        return
                    self._cond.wait(wait)
                scope = self._running = due[0]
                del self._pending[scope]
                self._started[scope] = self._started.get(scope, 0) + 1
            try:
                self._extract(scope)
            finally:
                with self._cond:
                    self._running = None
                    self._finished[scope] = self._finished.get(scope, 0) + 1
                    self._cond.notify_all()

    def _extract(self, scope: Scope) -> None:
        self.runs += 1
        try:
            result = self._memory.extract_pending(scope=scope)
        except Exception:
            if self._detached:
                log.debug("the memory closed while scope %s was extracted; it stays pending", scope)
                return
            self.failures += 1
            log.exception(
                "background extraction of scope %s failed; its messages stay pending", scope
            )
            return
        if result.errors and self._detached:
            log.debug("the memory closed while scope %s was extracted; it stays pending", scope)
        elif result.errors:
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


def _check_settings(token_threshold: int, idle_seconds: float) -> None:
    if token_threshold < 1 or not idle_seconds > 0:
        raise ConfigurationError("token_threshold must be >= 1 and idle_seconds > 0")


def _covers(scope: Scope, other: Scope) -> bool:
    """Whether a read of ``scope`` sees the records of ``other``."""
    return scope.key == other.key and scope.session in (None, other.session)


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def _drain(memory: Memory, timeout: float) -> None:
    """``Memory.close`` hook: the memory's writers get ``timeout`` seconds in all, then stop."""
    with BackgroundWriter._writers_lock:
        BackgroundWriter._closed_memories.add(memory)
        writers = [w for w in list(BackgroundWriter._writers) if w._memory is memory]
    deadline = time.monotonic() + max(timeout, 0.0)
    left = sum(writer._close_for_memory(deadline) for writer in writers)
    if left:
        log.warning(
            "closing the memory: %d scope(s) not extracted within %s s stay pending; the next "
            "add() or extract_pending() of the scope extracts them",
            left,
            timeout,
        )


if _drain not in Memory.before_close:
    Memory.before_close.append(_drain)


def schedule_extraction(
    memory: object,
    scope: Scope,
    messages: Sequence[Message],
    writer: BackgroundWriter | None = None,
    *,
    idle_seconds: float | None = None,
) -> None:
    """Have the messages an adapter just stored with ``extract=False`` extracted in the background.

    For an embedded :class:`~membrain.Memory` this schedules them on ``writer`` (default
    :meth:`BackgroundWriter.for_memory`, with ``idle_seconds`` when given). A served memory
    (:class:`~membrain.remote.RemoteMemory`) needs nothing: its server's own writer took them
    when they were stored.
    """
    if not messages or scope.is_bookkeeping:
        return
    if isinstance(memory, Memory):
        target = writer or BackgroundWriter.for_memory(memory, idle_seconds=idle_seconds)
        target.schedule(scope, tokens=sum(count_tokens(m.text) for m in messages))


def flush_scope(memory: object, scope: Scope, timeout: float) -> bool:
    """Extract what the writers of ``memory`` buffered for ``scope`` now, waiting ``timeout`` s.

    For a reader that must see the latest turns (:meth:`BackgroundWriter.flush_within` on every
    running writer of the memory, ``timeout`` in all). Returns ``True`` when they finished,
    ``False`` when the time ran out (the extraction goes on). A served memory's server extracts
    on its own schedule: ``True`` at once.

    Example:
        >>> flush_scope(mem, Scope(dataset="sara", task="assistant"), 5.0)  # doctest: +SKIP
        True
    """
    if not isinstance(memory, Memory):
        return True
    deadline = time.monotonic() + max(timeout, 0.0)
    done = True
    for writer in BackgroundWriter.of(memory):
        try:
            done = writer.flush_within(scope, _remaining(deadline)) and done
        except MembrainError:  # it stopped meanwhile: nothing of it to wait for
            continue
    return done


def check_writer(
    memory: object, writer: BackgroundWriter | None, idle_seconds: float | None = None
) -> None:
    """Refuse a ``writer`` or ``idle_seconds`` for a served memory: its server runs its own.

    Raises:
        ConfigurationError: ``writer`` or ``idle_seconds`` given with a memory that is not a
            :class:`Memory`, both given, or ``idle_seconds`` not positive.
    """
    if writer is not None and not isinstance(memory, Memory):
        raise ConfigurationError(
            "writer= extracts an embedded Memory; a served memory's server runs its own "
            "background writer: omit writer="
        )
    if idle_seconds is None:
        return
    if not isinstance(memory, Memory):
        raise ConfigurationError(
            "idle_seconds= sets an embedded Memory's writer; a served memory's server runs its "
            "own background writer: omit idle_seconds="
        )
    if writer is not None:
        raise ConfigurationError(
            "idle_seconds= sets the memory's shared writer; with writer= set it on that writer "
            "(BackgroundWriter(memory, idle_seconds=...)) and omit idle_seconds="
        )
    _check_settings(DEFAULT_TOKEN_THRESHOLD, idle_seconds)
