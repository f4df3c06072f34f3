"""What the framework adapters need of a memory: :class:`~membrain.api.surface.MemoryLike`."""

from __future__ import annotations

from membrain.api.models import Actor
from membrain.api.surface import MemoryLike
from membrain.remote.client import RemoteMemory

__all__ = ["MemoryLike", "actor_for"]


def actor_for(memory: MemoryLike, by: Actor | str) -> Actor | str | None:
    """The ``by=`` an adapter passes to ``memory``.

    ``None`` for a served memory, whose server names the caller's API key as the actor of every
    change; ``by`` for any other.
    """
    return None if isinstance(memory, RemoteMemory) else by
