"""The recall trace of a memory: reads note what they gave, a thread writes it in batches.

A traced read (``search``, ``context``) only puts its :class:`~membrain.api.recalls.Recall` on a
queue and returns; one daemon thread per log writes what the queue holds, a batch at a time
(:data:`BATCH` recalls, or what came within :data:`LINGER` seconds), through the record store.
Every read of the trace, a purge and a retention pass first wait for what is queued, so they
see every recall made before them; closing the memory drains the queue. A process killed
between a read and its batch loses that read's recall (never a fact, a message or an audit
event): the trace is a record of reads, written off their path.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Sequence
from datetime import datetime

from membrain.api.models import MemoryHit, Scope, now
from membrain.api.recalls import Recall, RecalledFact
from membrain.records import RecordStore

__all__ = ["BATCH", "LINGER", "RecallLog"]

log = logging.getLogger("membrain")

BATCH = 256
"""The most recalls one write holds."""
LINGER = 0.2
"""Seconds the writer waits for more recalls before it writes what it has."""

_NOW, _STOP = "write now", "stop"


class RecallLog:
    """Notes traced reads and writes them off the read path (see the module docstring)."""

    def __init__(self, store: RecordStore) -> None:
        self._store = store
        self._queue: queue.Queue[Recall | str] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def note(
        self,
        scope: Scope,
        operation: str,
        query: str,
        hits: Sequence[MemoryHit],
        *,
        run: str | None,
        tags: Sequence[str] = (),
    ) -> None:
        """Queue the recall of one read (returns at once)."""
        given = tuple(
            RecalledFact(fact_id=h.fact.id, rank=i, relevance=h.relevance)
            for i, h in enumerate(hits, 1)
        )
        recall = Recall(
            id=str(uuid.uuid4()),
            scope=scope,
            run=run,
            tags=tuple(tags),
            operation=operation,
            query=query,
            at=now(),
            facts=given,
        )
        with self._lock:
            if self._closed:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="membrain-recalls", daemon=True
                )
                self._thread.start()
            self._queue.put(recall)

    def flush(self) -> None:
        """Wait until every recall queued so far is written."""
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(_NOW)
            self._queue.join()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (within ``timeout`` s), then stop the writer."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout)

    def trace(self, scope: Scope, run: str) -> list[Recall]:
        """The recalls of ``run``, oldest first, each fact as stored now with its sources."""
        self.flush()
        return self._filled(scope, self._store.recalls_of(scope, run=run))

    def recalls(self, scope: Scope, fact_id: str) -> list[Recall]:
        """The recalls that gave ``fact_id``, oldest first."""
        self.flush()
        return self._filled(scope, self._store.recalls_of(scope, fact_id=fact_id))

    def drop_before(self, scopes: Sequence[Scope], before: datetime) -> int:
        """Delete the recalls made before ``before``; how many."""
        self.flush()
        return self._store.drop_recalls(scopes, before)

    def _filled(self, scope: Scope, found: Sequence[Recall]) -> list[Recall]:
        whole = scope.without_session()
        ids = list(dict.fromkeys(f.fact_id for r in found for f in r.facts))
        facts = {f.id: f for f in self._store.get_facts(whole, ids)} if ids else {}
        cited = list(dict.fromkeys(s for f in facts.values() for s in f.sources))
        kept = {m.id: m.message for m in self._store.get_messages(whole, cited)} if cited else {}

        def filled(given: RecalledFact) -> RecalledFact:
            fact = facts.get(given.fact_id)
            sources = tuple(kept[s] for s in (fact.sources if fact else ()) if s in kept)
            return given.model_copy(update={"fact": fact, "sources": sources})

        return [r.model_copy(update={"facts": tuple(map(filled, r.facts))}) for r in found]

    def _run(self) -> None:
        stop = False
        while not stop:
            batch: list[Recall] = []
            taken = 0
            item: Recall | str = self._queue.get()
            while True:  # a batch: until full, a marker, or nothing more within LINGER
                taken += 1
                if isinstance(item, str):
                    stop = item == _STOP
                    break
                batch.append(item)
                if len(batch) >= BATCH:
                    break
                try:
                    item = self._queue.get(timeout=LINGER)
                except queue.Empty:
                    break
            try:
                if batch:
                    self._store.put_recalls(batch)
            except Exception:  # a read never fails for its trace
                log.exception("writing %d recalls failed", len(batch))
            finally:
                for _ in range(taken):
                    self._queue.task_done()
