"""One process owns an embedded store; a second one is told which process holds it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from membrain import Memory, StoreInUseError
from membrain.backends.owner import FolderLock
from membrain.testing import HashingEncoder

_OPEN = """
import sys
from membrain import Memory, StoreInUseError
from membrain.testing import HashingEncoder
try:
    Memory(sys.argv[1], dense=HashingEncoder(64)).close()
except StoreInUseError as exc:
    print("in use:", exc)
else:
    print("opened")
"""


def _open_elsewhere(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _OPEN, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_second_process_is_told_who_owns_the_store(tmp_path: Path) -> None:
    mem = Memory(tmp_path, dense=HashingEncoder(64))
    try:
        said = _open_elsewhere(tmp_path)
        assert said.startswith("in use:")
        assert "LockBusy" not in said and "tantivy" not in said
        assert f"process {os.getpid()}" in said and "membrain serve" in said
    finally:
        mem.close()
    assert _open_elsewhere(tmp_path) == "opened"  # released on close


def test_the_lock_is_per_folder_and_reentrant_after_release(tmp_path: Path) -> None:
    first = FolderLock(tmp_path / "a")
    first.acquire()
    other = FolderLock(tmp_path / "b")
    other.acquire()  # another folder: free
    with pytest.raises(StoreInUseError, match="is open in process"):
        FolderLock(tmp_path / "a").acquire()
    first.release()
    again = FolderLock(tmp_path / "a")
    again.acquire()
    again.release()
    other.release()
