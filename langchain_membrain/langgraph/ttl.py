"""The TTL sweeper thread both LangGraph stores run.

:class:`~.store.MembrainStore` sweeps its sidecar; :class:`~.remote_store.RemoteMembrainStore`
asks its server to.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any

__all__ = ["Sweeper", "SweeperFuture"]

log = logging.getLogger(__name__)

DEFAULT_MINUTES = 5.0
"""Minutes between sweeps when neither the call nor the store's TTL config says."""


class SweeperFuture(Future[None]):
    """The future of a sweeper thread: done when it stops.

    Awaiting it returns it at once (the sweeper runs on), as awaiting an async LangGraph
    store's ``start_ttl_sweeper()`` gives its task.
    """

    def __await__(self) -> Generator[Any, None, SweeperFuture]:
        return self
        yield  # a generator: awaiting returns at once


class Sweeper:
    """Calls ``sweep`` every few minutes in a daemon thread, until stopped."""

    def __init__(self, sweep: Callable[[], int]) -> None:
        self._sweep = sweep
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, minutes: float | None) -> SweeperFuture:
        """Start sweeping every ``minutes`` (default 5); a running sweeper is left as it is."""
        done = SweeperFuture()
        if self._thread is not None and self._thread.is_alive():
            done.set_result(None)
            return done
        interval = float(minutes or DEFAULT_MINUTES) * 60
        self._stop.clear()

        def run() -> None:
            try:
                while not self._stop.wait(interval):
                    try:
                        self._sweep()
                    except Exception:  # the next round tries again
                        log.exception("sweeping expired store items failed")
            finally:
                done.set_result(None)

        self._thread = threading.Thread(target=run, name="membrain-store-ttl", daemon=True)
        self._thread.start()
        return done

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the thread; whether it stopped within ``timeout`` seconds."""
        thread = self._thread
        if thread is None:
            return True
        self._stop.set()
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._thread = None
        return True
