"""A memory served over HTTP for the remote-client tests: a real uvicorn in a thread."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from store_templates import empty_store

from membrain import Memory, RemoteMemory
from membrain.background import BackgroundWriter
from membrain.server import Access, KeyRing, add_key, create_app, serve_in_thread
from membrain.server.run import extensions
from membrain.testing import HashingEncoder, any_encoder_reranker

CONVERSATION = [
    {
        "id": "m1",
        "speaker": "Sara",
        "text": "I adopted a cat named Miso yesterday.",
        "timestamp": "2024-03-15T14:01:00Z",
    },
    {
        "id": "m2",
        "speaker": "Sara",
        "text": "I run a bakery in Porto with my brother.",
        "timestamp": "2024-03-15T14:03:00Z",
    },
]


@dataclass
class Served:
    """A served memory: its URL, the memory behind it and its keys by name."""

    url: str
    memory: Memory
    keys: dict[str, str]

    def remote(self, key: str | None = "sara-writer") -> RemoteMemory:
        """A client with the key of that name (``None``: no key)."""
        return RemoteMemory(self.url, self.keys[key] if key else None)


@contextmanager
def serving(
    root: Path, keys: dict[str, tuple[Sequence[str], Access]], *, writer: bool = False
) -> Iterator[Served]:
    """Serve a fresh memory under ``root`` with these keys (name: datasets, role)."""
    keys_file = root / "keys.toml"
    made = {
        name: add_key(keys_file, list(datasets), role, name=name)
        for name, (datasets, role) in keys.items()
    }
    store = empty_store(root / "store")
    memory = Memory(store, dense=HashingEncoder(dim=64), reranker=any_encoder_reranker())
    background = BackgroundWriter.for_memory(memory) if writer else None
    app = create_app(
        memory,
        keys=KeyRing.load(keys_file),
        writer=background,
        close_memory=True,
        extensions=extensions(memory),  # what `membrain serve` adds: the LangGraph store
    )
    with serve_in_thread(app) as url:
        yield Served(url=url, memory=memory, keys=made)
