"""The module paths of earlier versions, still importable: each names its module's new home.

``import membrain.models`` or ``from membrain.storage.edge import EdgeBackend`` load
``membrain.api.models`` and ``membrain.backends.edge``: the same module objects, so a class
imported by either path is one class. ``python -m membrain.mcp_server`` runs
``membrain.server.mcp``. Installed first on the import system's finders by ``membrain``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

__all__ = ["FORMER_PATHS", "install"]

_GROUND = (
    "errors", "models", "scope", "audit", "results", "profile", "requests", "operations",
    "surface", "path_names", "metadata", "checks", "arguments", "inputs", "tokens",
    "config", "listeners", "indexing", "stubs",
)  # fmt: skip

FORMER_PATHS: dict[str, str] = {
    **{f"membrain.{name}": f"membrain.api.{name}" for name in _GROUND},
    "membrain.names": "membrain.api.entity_refs",
    "membrain.store.records": "membrain.records.store",
    "membrain.store": "membrain.records",
    "membrain.storage": "membrain.backends",
    "membrain.facts": "membrain.knowledge.facts",
    "membrain.entities": "membrain.knowledge.entities",
    "membrain.ledger": "membrain.knowledge.ledger",
    "membrain.profiling": "membrain.knowledge.profiles",
    "membrain.mcp_server": "membrain.server.mcp",
    "membrain.loaders": "membrain.files.loaders",
    "membrain.transfer": "membrain.files.transfer",
}
"""A former module path (or package prefix) -> where the module lives now."""


def current_path(name: str) -> str | None:
    """Where the module ``name`` of a former path lives now (``None``: not a former path)."""
    for former in sorted(FORMER_PATHS, key=len, reverse=True):
        if name == former or name.startswith(former + "."):
            return FORMER_PATHS[former] + name[len(former) :]
    return None


class _Alias(importlib.abc.Loader):
    """Loads a former path as the module that lives at its new one."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing: the module ran when it was imported at its new path."""

    def get_code(self, fullname: str) -> CodeType | None:
        """The new module's code (``python -m`` runs a former path as the new module)."""
        spec = importlib.util.find_spec(self.target)
        loader = spec.loader if spec is not None else None
        get_code = getattr(loader, "get_code", None)
        return get_code(self.target) if get_code is not None else None

    def is_package(self, fullname: str) -> bool:
        spec = importlib.util.find_spec(self.target)
        return spec is not None and spec.submodule_search_locations is not None


class _FormerPaths(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        current = current_path(fullname)
        if current is None:
            return None
        loader = _Alias(current)
        return importlib.util.spec_from_loader(
            fullname, loader, is_package=loader.is_package(fullname)
        )


def install() -> None:
    """Put the finder of former paths first (once)."""
    if not any(isinstance(finder, _FormerPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _FormerPaths())
