"""Copies of embedded stores for tests: sparse copies, and empty stores made from a template.

Qdrant Edge preallocates its log and page files (32 MiB each, mostly holes): a store holding a
few records is about 3 MB on disk but 1.2 GB long. ``shutil.copytree`` writes those holes out as
zeros; :func:`copy_store` copies the data only and leaves the holes holes.

Creating a store syncs every shard's files after each of its payload indexes is made (hundreds
of ``fsync`` calls, one to three seconds on a busy disk); opening one syncs a tenth of that.
:func:`empty_store` creates one empty store per configuration and process, and hands out copies
of it: a copy is the store a fresh ``Memory(path=...)`` would have made and closed, opened again.
Tests about creating a store (its files, its configuration, a folder that is not one) create
theirs as a user would.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from membrain.testing import file_extents


def copy_store(source: Path, target: Path) -> Path:
    """Copy the closed store folder ``source`` to ``target``, sparsely; ``target``.

    ``target`` must not exist, or be an empty folder.
    """
    target.mkdir(parents=True, exist_ok=True)
    if any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty")
    for path in sorted(source.rglob("*")):
        dest = target / path.relative_to(source)
        if path.is_dir():
            dest.mkdir(exist_ok=True)
            continue
        with dest.open("wb") as out:
            for offset, chunk in file_extents(path):
                out.seek(offset)
                out.write(chunk)
            out.truncate(path.stat().st_size)
    return target


class EmptyStores:
    """Empty stores, each configuration created once under ``root`` and copied from then on.

    Args:
        root: A folder for the templates (one sub-folder per configuration).
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        self._lock = threading.Lock()

    def copy(self, target: Path, name: str, create: Callable[[Path], None]) -> Path:
        """A copy at ``target`` of the store ``create(folder)`` makes (and closes) for ``name``."""
        template = self._root / name
        with self._lock:
            if not template.exists():
                building = self._root / f"{name}.building"
                shutil.rmtree(building, ignore_errors=True)
                create(building)
                building.rename(template)
        return copy_store(template, target)

    def memory(self, target: Path, dim: int = 64) -> Path:
        """An empty store at ``target`` for ``Memory(path=target, dense=HashingEncoder(dim))``."""
        from membrain import Memory
        from membrain.testing import HashingEncoder

        def create(folder: Path) -> None:
            Memory(path=folder, dense=HashingEncoder(dim=dim)).close()

        return self.copy(target, f"memory-hashing-{dim}", create)


_shared: list[EmptyStores] = []
_shared_lock = threading.Lock()


def shared_empty_stores() -> EmptyStores:
    """This process's templates, in a temporary folder removed when the process exits."""
    with _shared_lock:
        if not _shared:
            root = Path(tempfile.mkdtemp(prefix="membrain-test-stores-"))
            atexit.register(shutil.rmtree, root, ignore_errors=True)
            _shared.append(EmptyStores(root))
        return _shared[0]


def empty_store(target: Path, dim: int = 64) -> Path:
    """An empty store at ``target`` (absent, or an empty folder) for
    ``Memory(path=target, dense=HashingEncoder(dim))``: a copy of this process's template."""
    return shared_empty_stores().memory(target, dim)
