"""One process owns an embedded store: an exclusive lock on its folder that names its holder.

Qdrant Edge shards and the tantivy index allow one writer each; a second process opening the
same folder would otherwise meet an engine's own lock error (or none at all). :class:`FolderLock`
takes an advisory ``flock`` on ``<folder>/owner.lock`` before anything is opened and writes who
holds it (process id, command, host, since when), so the second process is told exactly that.
The operating system releases the lock when its holder exits, however it exits: a killed owner
never leaves a stale lock behind.

On platforms without ``fcntl`` the lock is not taken, and the engines' own locks remain.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from membrain.api.errors import StoreInUseError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "FolderLock"]

LOCK_FILE = "owner.lock"


def _holder(text: str) -> str:
    try:
        who = json.loads(text)
        return f"process {who['pid']} on {who['host']} (`{who['command']}`, since {who['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


class FolderLock:
    """An exclusive lock on a store folder, held from :meth:`acquire` to :meth:`release`.

    Args:
        folder: The store's folder (created if missing).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._file: IO[str] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def acquire(self) -> None:
        """Take the lock, or say who holds it.

        Raises:
            StoreInUseError: another process holds it.
        """
        if fcntl is None or self._file is not None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        handle = open(self.folder / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = _holder(handle.read())
            handle.close()
            raise StoreInUseError(
                f"the store at {self.folder} is open in {holder}. An embedded store has one "
                "owning process: close it there, serve it from one process (`membrain serve`) "
                "and reach it over HTTP, or share a Qdrant server (qdrant_url=...)."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "command": " ".join(sys.argv)[:200] or sys.executable,
                    "since": datetime.now(UTC).isoformat(timespec="seconds"),
                }
            )
        )
        handle.flush()
        self._file = handle
        # A memory dropped without close() lets go of the lock with its last reference.
        self._finalizer = weakref.finalize(self, handle.close)

    def release(self) -> None:
        """Let go of the lock (the holder's details are left; they name nobody once unlocked)."""
        handle, self._file = self._file, None
        if handle is not None and fcntl is not None:
            if self._finalizer is not None:
                self._finalizer.detach()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()
