"""Clients of a MemBrain server (``membrain serve``) with :class:`~membrain.Memory`'s methods.

:class:`RemoteMemory` (blocking, ``httpx.Client``) and :class:`AsyncRemoteMemory` (``asyncio``,
``httpx.AsyncClient``) take the same arguments and return the same records as
:class:`~membrain.Memory`, so code written against :class:`MemoryLike` runs on either. Messages
are turned into :class:`~membrain.api.models.Message` records on the client (speaker names and
timestamps filled in here) and sent as JSON. Only ``httpx`` is needed: nothing here imports
:mod:`membrain.server`.

The server records the API key's name as the actor of every change and reports no progress, so
``by`` and ``on_progress`` (and the few other arguments the HTTP API has no field for) raise
:class:`~membrain.api.errors.ConfigurationError` instead of being dropped. Error responses come back
as the library's own errors: bad input :class:`~membrain.api.errors.InputError` (or
:class:`~membrain.api.errors.ScopeError`), an unknown fact :class:`~membrain.api.errors.InputError`,
a refused key :class:`RemoteAccessError`, a server that cannot be reached or cannot serve
:class:`~membrain.api.errors.BackendError`.

Example:
    >>> from membrain import Scope
    >>> from membrain.remote import RemoteMemory
    >>> with RemoteMemory("http://127.0.0.1:9574", api_key="mbk_...") as mem:  # doctest: +SKIP
    ...     mem.search("What is the cat called?", scope=Scope(dataset="sara", task="assistant"))
"""

from membrain.remote.aio import AsyncRemoteMemory
from membrain.remote.client import RemoteMemory
from membrain.remote.common import RemoteAccessError
from membrain.remote.protocol import MemoryLike

__all__ = ["AsyncRemoteMemory", "MemoryLike", "RemoteAccessError", "RemoteMemory"]
