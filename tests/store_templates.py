"""Copies of embedded stores for tests: sparse copies, and empty stores made from a template.

Qdrant Edge preallocates its log and page files (32 MiB each, mostly holes): a store holding a
few records is about 3 MB on disk but 1.2 GB long. ``shutil.copytree`` writes those holes out as
zeros; :func:`copy_store` copies the data only and leaves the holes holes.

Creating a store syncs every shard's files after each of its payload indexes is made (hundreds
of ``fsync`` calls, one to three seconds on a busy disk); opening one syncs a tenth of that.
:class:`EmptyStores` creates one empty store per configuration and hands out copies of it: a
copy is the store a fresh ``Memory(path=...)`` would have made and closed, opened again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from membrain.testing import file_extents


def copy_store(source: Path, target: Path) -> Path:
    """Copy the closed store folder ``source`` to ``target`` (which must not exist), sparsely."""
    target.mkdir(parents=True)
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
