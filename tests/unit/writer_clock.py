"""Background-writer test helpers: a clock only the test moves, and a hang-guarded wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

HANG_GUARD = 30.0
"""Seconds a wait may take before the test fails as hung (never a speed check)."""


def wait_until(predicate: Callable[[], bool], timeout: float = HANG_GUARD) -> bool:
    """Whether ``predicate`` comes true (``timeout`` only guards against a hang)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


class WorkerClock:
    """The writer's monotonic clock, moved only by the test.

    The worker reads it each time it decides which scopes are due; :meth:`worker_decided`
    waits for such a decision at the current time.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._test_thread = threading.current_thread()
        self._worker_read: float | None = None
        self._changed = threading.Condition()

    def monotonic(self) -> float:
        with self._changed:
            if threading.current_thread() is not self._test_thread:
                self._worker_read = self.now
                self._changed.notify_all()
            return self.now

    def move_to(self, moment: float) -> None:
        with self._changed:
            assert moment > self.now
            self.now = moment

    def worker_decided(self) -> bool:
        """Whether the worker decided what is due at the current time (waits for it)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._worker_read == self.now, HANG_GUARD)
