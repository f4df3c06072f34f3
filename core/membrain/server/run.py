"""Run the HTTP API: open the memory, start its background writer, serve with uvicorn.

Without a keys file every request is served without a key, so the server then binds only to
a loopback address. On shutdown (Ctrl-C, SIGTERM) the writer extracts what it buffered, then
the memory is closed.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import uvicorn
from fastapi import APIRouter, FastAPI

from membrain.api.checks import is_loopback
from membrain.api.config import MembrainSettings, settings_for
from membrain.api.errors import ConfigurationError, MembrainError
from membrain.background import BackgroundWriter
from membrain.memory import Memory
from membrain.server.app import body_limit, create_app
from membrain.server.keys import KeyRing

__all__ = [
    "DEFAULT_PORT",
    "EXTENSIONS",
    "check_host",
    "extensions",
    "is_loopback",
    "serve",
    "serve_in_thread",
]

DEFAULT_PORT = 9574
EXTENSIONS = "membrain.server"
"""Entry-point group of server extensions: callables ``(memory) -> APIRouter | None``."""

log = logging.getLogger("membrain.server")


def extensions(memory: Memory) -> list[APIRouter]:
    """The routes installed packages add to the server for ``memory``.

    Each entry point of the :data:`EXTENSIONS` group is a callable taking the memory and
    returning an ``APIRouter`` (its routes depend on :func:`membrain.server.app.authenticate`
    and check every dataset they touch), or ``None`` when it cannot serve this memory. One
    that cannot load (its framework is not installed) is logged and left out.
    """
    found = []
    for point in metadata.entry_points(group=EXTENSIONS):
        try:
            router = point.load()(memory)
        except (ImportError, MembrainError) as exc:
            log.warning("server extension %r is off: %s", point.name, exc)
            continue
        if router is None:
            log.info("server extension %r does not serve this memory", point.name)
            continue
        log.info("server extension %r is on", point.name)
        found.append(router)
    return found


def check_host(host: str, keys: KeyRing | None) -> None:
    """Refuse to serve ``host`` without keys unless it is a loopback address.

    Raises:
        ConfigurationError: no keys and a host other machines can reach.
    """
    if keys is None and not is_loopback(host):
        raise ConfigurationError(
            f"refusing to serve {host!r} without API keys: anyone who can reach it could read "
            "and change every memory. Pass a keys file, or bind to 127.0.0.1."
        )


def serve(
    *,
    path: str | Path | None = None,
    qdrant_url: str | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    keys_file: str | Path | None = None,
    log_level: str = "info",
    settings: MembrainSettings | None = None,
    llm: str | None = None,
    max_body_bytes: int | None = None,
) -> None:
    """Serve the memory at ``path`` (or the Qdrant server at ``qdrant_url``) until stopped.

    The memory is opened by :meth:`Memory.from_settings`: ``settings`` (default: the
    ``MEMBRAIN_*`` environment), with ``path`` or ``qdrant_url`` overriding its store, so the
    server extracts with the configured model (``MEMBRAIN_LLM``) and embeds with the
    configured encoder.

    Args:
        path: Folder of the embedded store (default ``./.membrain``).
        qdrant_url: Use a Qdrant server instead of the embedded store.
        host: Address to bind; without ``keys_file`` only a loopback address is accepted.
        port: Port to bind.
        keys_file: The API keys (see :mod:`membrain.server.keys`); without it no key is asked.
        log_level: ``debug``, ``info``, ``warning`` or ``error``.
        settings: The memory's settings (model, encoder, Qdrant key, batch size...).
        llm: The extraction model as ``module:attribute`` (instead of ``MEMBRAIN_LLM``).
        max_body_bytes: The largest request body read, larger ones answer 413 (default: the
            settings' ``max_body_bytes``, ``MEMBRAIN_MAX_BODY_BYTES``, 4 MiB).

    Raises:
        ConfigurationError: a non-loopback host without keys, a malformed keys file, a
            ``max_body_bytes`` below 1, or a store that cannot open with these settings.
        StoreInUseError: another process owns the embedded store.
    """
    keys = KeyRing.load(keys_file) if keys_file is not None else None
    check_host(host, keys)
    if not logging.getLogger().handlers:  # refused requests and failures reach the console
        level = logging.getLevelNamesMapping().get(log_level.upper(), logging.DEBUG)
        logging.basicConfig(level=level, format="%(levelname)s: %(name)s: %(message)s")
    chosen = settings_for(settings, path=path, qdrant_url=qdrant_url, llm=llm)
    limit = body_limit(chosen.max_body_bytes if max_body_bytes is None else max_body_bytes)
    memory = Memory.from_settings(chosen)
    writer: BackgroundWriter | None = None
    app: FastAPI | None = None
    try:
        writer = BackgroundWriter.from_settings(memory, chosen)
        app = create_app(
            memory,
            keys=keys,
            writer=writer,
            close_memory=True,
            extensions=extensions(memory),
            max_body_bytes=limit,
        )
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, ws="none")
        uvicorn.Server(config).run()
    finally:
        # the app's shutdown closes both; this covers a server that never started
        if app is None or not getattr(app.state, "closed", False):
            if writer is not None:
                writer.shutdown(timeout=60.0)
            memory.close()


@contextmanager
def serve_in_thread(
    app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0
) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a background thread; yields its base URL.

    ``port=0`` picks a free port. Leaving the block shuts the server down (running the app's
    shutdown) and waits for the thread.

    Raises:
        RuntimeError: the server did not start within ``timeout`` seconds.

    Example:
        >>> with serve_in_thread(create_app(mem, keys=None)) as url:  # doctest: +SKIP
        ...     httpx.get(f"{url}/api/health")
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # named TCP, so asyncio sets TCP_NODELAY on each connection (else Nagle holds answers ~40 ms)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, log_level="warning", ws="none", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="membrain-server", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {host}:{bound} did not start")
            time.sleep(0.01)
        netloc = f"[{host}]" if family == socket.AF_INET6 else host
        yield f"http://{netloc}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
