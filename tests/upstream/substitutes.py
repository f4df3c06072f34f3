"""MemBrain's classes in place of the ones the frameworks' own tests construct.

Each substitute takes the constructor arguments of the class it replaces and builds MemBrain's
adapter over a fresh memory: embedded (a :class:`membrain.Memory` in a temporary folder) or
served (the same memory behind ``membrain.server`` in a thread, reached over HTTP). What a test
builds is closed by :func:`close_built` after it; :data:`BUILT` counts the constructions, so a
test that never built one is reported as not exercising MemBrain.

The variant comes from ``MEMBRAIN_UPSTREAM_VARIANT`` (``embedded`` or ``served``).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

VARIANTS = ("embedded", "served")

BUILT = [0]
"""How many substitutes were built in this process."""

_open: list[ExitStack] = []
_root: list[Path] = []


def variant() -> str:
    """The variant this process runs (``MEMBRAIN_UPSTREAM_VARIANT``, default embedded)."""
    name = os.environ.get("MEMBRAIN_UPSTREAM_VARIANT", "embedded")
    if name not in VARIANTS:
        raise ValueError(f"MEMBRAIN_UPSTREAM_VARIANT={name!r}: not one of {VARIANTS}")
    return name


def _store_templates() -> ModuleType:
    """``tests/store_templates.py`` (copies of empty stores), loaded by its path."""
    path = Path(__file__).resolve().parents[1] / "store_templates.py"
    spec = importlib.util.spec_from_file_location("membrain_store_templates", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_templates: list[Any] = []


def _folder() -> Path:
    """A new empty folder under this process's temporary root."""
    if not _root:
        _root.append(Path(tempfile.mkdtemp(prefix="membrain-upstream-")))
    return _root[0] / uuid.uuid4().hex


def fresh_memory(embed: Any = None) -> Any:
    """A new embedded memory: dense encoder ``embed`` (LangChain Embeddings), else hashing.

    An empty store is copied from one made once per encoder (creating a store is slow).
    """
    from membrain import Memory
    from membrain.testing import HashingEncoder

    if not _templates:
        module = _store_templates()
        _templates.append(module.shared_empty_stores())
    stores = _templates[0]
    target = _folder()
    if embed is None or isinstance(embed, int | str):
        return Memory(path=stores.memory(target, dim=64), dense=HashingEncoder(dim=64))
    dims = len(embed.embed_query("dimensions"))
    name = f"memory-{type(embed).__module__}.{type(embed).__qualname__}-{dims}".replace("<", "")

    def create(folder: Path) -> None:
        Memory(path=folder, dense=embed).close()

    path = stores.copy(target, name.replace(">", ""), create)
    return Memory(path=path, dense=embed)


def _embed_of(index: Any) -> Any:
    """The ``embed`` of a LangGraph ``IndexConfig``, if any."""
    if not index:
        return None
    return index.get("embed")


def _track(stack: ExitStack) -> ExitStack:
    _open.append(stack)
    return stack


def close_built() -> None:
    """Close every substitute (and its memory or server) built since the last call."""
    while _open:
        _open.pop().close()


def remove_folders() -> None:
    """Remove this process's temporary folders."""
    close_built()
    for root in _root:
        shutil.rmtree(root, ignore_errors=True)
    _root.clear()


def serve(memory: Any, stack: ExitStack) -> str:
    """Serve ``memory`` (no keys, loopback, with the installed extensions); its URL."""
    from membrain.background import BackgroundWriter
    from membrain.server import create_app, serve_in_thread
    from membrain.server.run import extensions

    app = create_app(
        memory,
        keys=None,
        writer=BackgroundWriter.for_memory(memory),
        close_memory=True,
        extensions=extensions(memory),  # the LangGraph store route, as `membrain serve` adds
    )
    return stack.enter_context(serve_in_thread(app))


# -- LangGraph stores -------------------------------------------------------------------------
def _store_kwargs(index: Any, ttl: Any) -> dict[str, Any]:
    """The ``index`` and ``ttl`` the test gave, each when this variant's store takes it."""
    takes = inspect.signature(_store_base()).parameters
    given = {"index": index, "ttl": ttl}
    return {name: value for name, value in given.items() if value is not None and name in takes}


def _store_base() -> type:
    from langchain_membrain.langgraph import MembrainStore, RemoteMembrainStore

    return MembrainStore if variant() == "embedded" else RemoteMembrainStore


def store_class(replaced: str) -> type:
    """A subclass of MemBrain's store standing for ``replaced`` (``InMemoryStore(**kwargs)``).

    Embedded: ``MembrainStore`` over a new ``Memory`` whose dense encoder is the index's
    ``embed`` (hashing when there is no index). Served: ``RemoteMembrainStore`` of a server
    serving such a memory, given the same ``index`` and ``ttl`` (the client sends the index's
    ``fields`` with each put). A subclass, so a test may spy on its methods.
    """
    from langchain_membrain.langgraph import MembrainStore, RemoteMembrainStore

    base = _store_base()

    def __init__(self: Any, *args: Any, index: Any = None, ttl: Any = None, **kw: Any) -> None:
        BUILT[0] += 1  # counted when tried: a constructor that refuses the test's config fails it
        stack = ExitStack()
        try:
            memory = fresh_memory(_embed_of(index))
            if base is MembrainStore:
                stack.callback(memory.close)
                MembrainStore.__init__(self, memory=memory, **_store_kwargs(index, ttl))
            else:
                url = serve(memory, stack)
                RemoteMembrainStore.__init__(self, url, **_store_kwargs(index, ttl))
            stack.callback(self.close)
        except BaseException:
            stack.close()
            raise
        _track(stack)

    return type(f"Membrain{replaced}", (base,), {"__init__": __init__})


def build_store(index: Any = None, ttl: Any = None) -> Any:
    """A MemBrain LangGraph store over a fresh memory, for this process's variant."""
    return store_class("Store")(index=index, ttl=ttl)


BACKEND_INDEX_KEYS = ("distance_type", "ann_index_config")
"""The SQL backends' own index settings (their vector index), left out of ours."""


def _backend_index(index: Any) -> Any:
    """A SQL backend's index config as LangGraph's ``IndexConfig``.

    SQLite names ``fields`` ``text_fields``; the vector index's settings
    (:data:`BACKEND_INDEX_KEYS`) are the backend's.
    """
    if not index:
        return index
    config = {k: v for k, v in index.items() if k not in ("text_fields", *BACKEND_INDEX_KEYS)}
    if index.get("text_fields") is not None:
        config["fields"] = index["text_fields"]
    return config


def backend_store_class(replaced: str) -> type:
    """Standing for ``SqliteStore``/``PostgresStore``: ``from_conn_string`` builds ours.

    ``setup()`` (the backend's schema migration) has nothing to do.
    """
    cls = store_class(replaced)

    @contextmanager
    def from_conn_string(
        klass: type, /, conn_string: str, *, index: Any = None, ttl: Any = None, **kw: Any
    ) -> Iterator[Any]:
        yield klass(index=_backend_index(index), ttl=ttl)

    def setup(self: Any) -> None:
        return None

    cls.from_conn_string = classmethod(from_conn_string)  # type: ignore[attr-defined]
    cls.setup = setup  # type: ignore[attr-defined]
    return cls


def async_backend_store_class(replaced: str) -> type:
    """As :func:`backend_store_class`, with an async ``from_conn_string`` and ``setup``."""
    cls = store_class(replaced)

    @asynccontextmanager
    async def from_conn_string(
        klass: type, /, conn_string: str, *, index: Any = None, ttl: Any = None, **kw: Any
    ) -> AsyncIterator[Any]:
        yield klass(index=_backend_index(index), ttl=ttl)

    async def setup(self: Any) -> None:
        return None

    cls.from_conn_string = classmethod(from_conn_string)  # type: ignore[attr-defined]
    cls.setup = setup  # type: ignore[attr-defined]
    return cls


# -- LangChain chat history ---------------------------------------------------------------------
_chat_memory: list[tuple[Any, ExitStack]] = []
QUIET: list[Callable[[], Any]] = []
"""Context managers a test runs under while its seed messages are written (blockbuster off)."""


def chat_target() -> Any:
    """The memory this test's histories share (a new one per test): embedded, or remote.

    Made before the test runs (:data:`PREPARE`), as an application opens its memory once.
    """
    if _chat_memory and _chat_memory[0][1] in _open:
        return _chat_memory[0][0]
    _chat_memory.clear()
    target, stack = _memory_target()
    _chat_memory.append((target, stack))
    _open.append(stack)
    return target


def _memory_target() -> tuple[Any, ExitStack]:
    """A fresh memory for this variant (embedded, or a ``RemoteMemory`` of a server serving
    it) and the stack that closes it."""
    from membrain import RemoteMemory

    stack = ExitStack()
    memory = fresh_memory()
    if variant() == "embedded":
        stack.callback(memory.close)
        target: Any = memory
    else:
        target = RemoteMemory(serve(memory, stack))
        stack.callback(target.close)
    return target, stack


def _without_id(message: Any) -> Any:
    return message.model_copy(update={"id": None})


def build_history(messages: Sequence[Any] | None = None) -> Any:
    """A ``MembrainChatMessageHistory`` of a new session, seeded with ``messages``."""
    from langchain_membrain import MembrainChatMessageHistory

    class History(MembrainChatMessageHistory):
        def __eq__(self, other: object) -> bool:
            # InMemoryChatMessageHistory (a pydantic model) equals one holding equal messages;
            # the ids MemBrain gives a session's messages differ from session to session
            return isinstance(other, MembrainChatMessageHistory) and [
                _without_id(m) for m in self.messages
            ] == [_without_id(m) for m in other.messages]

        __hash__ = None  # type: ignore[assignment]

    BUILT[0] += 1
    history = History(
        memory=chat_target(),
        dataset="upstream",
        task="chat",
        session=uuid.uuid4().hex,
    )
    if messages:
        with ExitStack() as quiet:
            for make in QUIET:
                quiet.enter_context(make())
            history.add_messages(list(messages))
    return history


def history_class() -> type:
    """A class standing for ``InMemoryChatMessageHistory(messages=[...])``."""

    class MembrainInMemoryChatMessageHistory:
        def __new__(cls, *args: Any, messages: Sequence[Any] | None = None, **kw: Any) -> Any:
            return build_history(messages)

    return MembrainInMemoryChatMessageHistory


# -- LlamaIndex --------------------------------------------------------------------------------
def _llama_target() -> Any:
    """A new memory for a LlamaIndex block or retriever: embedded, or remote."""
    target, stack = _memory_target()
    _track(stack)
    return target


def memory_block_class() -> type:
    """Standing for ``VectorMemoryBlock(vector_store=..., similarity_top_k=..., name=...)``."""

    class MembrainVectorMemoryBlock:
        def __new__(
            cls,
            *args: Any,
            name: str = "retrieved_messages",
            priority: int = 1,
            similarity_top_k: int = 2,
            **kw: Any,
        ) -> Any:
            from llama_index_membrain import MembrainMemoryBlock
            from membrain import Scope

            BUILT[0] += 1
            return MembrainMemoryBlock(
                memory=_llama_target(),
                scope=Scope(dataset="upstream", task="memory"),
                name=name,
                priority=priority,
            )

    return MembrainVectorMemoryBlock


def retriever_class() -> type:
    """Standing for ``VectorIndexRetriever(index, similarity_top_k=...)``.

    The index's nodes are added to a new memory as evidence (with extraction), then searched.
    """

    class MembrainVectorIndexRetriever:
        def __new__(cls, index: Any, *args: Any, similarity_top_k: int = 2, **kw: Any) -> Any:
            from llama_index_membrain import MembrainRetriever
            from membrain import Scope

            BUILT[0] += 1
            memory = _llama_target()
            scope = Scope(dataset="upstream", task="index")
            texts = [node.get_content() for node in index.docstore.docs.values()]
            if texts:
                memory.add([{"speaker": "User", "text": t} for t in texts], scope=scope)
            return MembrainRetriever(memory=memory, scope=scope, k=similarity_top_k, mode="fast")

    return MembrainVectorIndexRetriever


PREPARE: dict[str, Callable[[], Any]] = {"langchain-core": chat_target}
"""Per suite: what is made before each test (outside its event loop)."""


SUBSTITUTES: dict[str, dict[str, Callable[[], type]]] = {
    "langgraph-checkpoint": {
        "langgraph.store.memory:InMemoryStore": lambda: store_class("InMemoryStore"),
    },
    "langgraph-checkpoint-sqlite": {
        "langgraph.store.sqlite:SqliteStore": lambda: backend_store_class("SqliteStore"),
        "langgraph.store.sqlite:AsyncSqliteStore": lambda: async_backend_store_class(
            "AsyncSqliteStore"
        ),
    },
    "langgraph-checkpoint-postgres": {
        "langgraph.store.postgres:PostgresStore": lambda: backend_store_class("PostgresStore"),
        "langgraph.store.postgres:AsyncPostgresStore": lambda: async_backend_store_class(
            "AsyncPostgresStore"
        ),
    },
    "langchain-core": {
        "langchain_core.chat_history:InMemoryChatMessageHistory": history_class,
    },
    "llama-index-core": {
        "llama_index.core.memory.memory_blocks.vector:VectorMemoryBlock": memory_block_class,
        "llama_index.core.memory.memory_blocks:VectorMemoryBlock": memory_block_class,
        "llama_index.core.memory:VectorMemoryBlock": memory_block_class,
        "llama_index.core.indices.vector_store.retrievers:VectorIndexRetriever": retriever_class,
        "llama_index.core.indices.vector_store.retrievers.retriever:VectorIndexRetriever": (
            retriever_class
        ),
        "llama_index.core.indices.vector_store:VectorIndexRetriever": retriever_class,
        "llama_index.core.retrievers:VectorIndexRetriever": retriever_class,
    },
}
"""Per suite: ``module:attribute`` to replace, and the function making its substitute."""
