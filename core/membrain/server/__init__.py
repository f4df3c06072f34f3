"""MemBrain as a service: the memory behind an HTTP API with per-dataset API keys.

Needs the ``server`` extra (``pip install 'membrain-memory[server]'``: FastAPI, uvicorn and
Jinja2, which renders the inspector's pages at ``/ui``).
Nothing else in :mod:`membrain` imports this package, so the core works without them.

Example:
    >>> from membrain.server import add_key, serve
    >>> key = add_key("keys.toml", ["sara"], "write", name="sara-app")  # doctest: +SKIP
    >>> serve(path=".membrain", keys_file="keys.toml")  # doctest: +SKIP
"""

from typing import Any

from membrain.api.errors import MissingDependencyError

try:
    import fastapi  # noqa: F401
    import jinja2  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingDependencyError(exc.name or "fastapi", "server") from exc

from membrain.server import keys
from membrain.server.app import create_app
from membrain.server.keys import (
    Access,
    AuthError,
    Forbidden,
    Grant,
    KeyRing,
    Unauthenticated,
    add_key,
    revoke_key,
)
from membrain.server.run import serve, serve_in_thread

__all__ = [
    "Access",
    "AuthError",
    "Forbidden",
    "Grant",
    "KeyRing",
    "Unauthenticated",
    "add_key",
    "create_app",
    "revoke_key",
    "serve",
    "serve_in_thread",
]


def __getattr__(name: str) -> Any:
    if name == "Role":
        return keys.Role  # deprecated there: it warns
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
