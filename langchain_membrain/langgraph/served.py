"""The server extension that serves the LangGraph store: ``POST /api/store/batch``.

``membrain serve`` loads :func:`store_routes` (entry point group ``membrain.server``): one
:class:`~.store.MembrainStore` over the served memory, its SQLite sidecar beside the store, so
every worker of an application shares the same items (reached with
:class:`~.remote_store.RemoteMembrainStore`).

Every operation is checked against the API key: the dataset of a namespace is its first label
(as :func:`~.store.scope_for_namespace` maps it); ``get`` and a search need ``read``, ``put``
needs ``write``. A search whose prefix names no dataset needs a key for every dataset (``"*"``);
a namespace listing without a dataset prefix returns only the namespaces of the key's datasets.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, Op, PutOp, SearchOp

from langchain_membrain.langgraph.remote_store import STORE_BATCH, StoreBatch, op_of, result_json
from langchain_membrain.langgraph.sidecar import sidecar_location
from langchain_membrain.langgraph.store import MembrainStore, scope_for_namespace
from membrain import Actor, ActorKind, ConfigurationError, InputError, Memory
from membrain.server.app import authenticate
from membrain.server.keys import ALL_DATASETS, Forbidden, Grant, Role

__all__ = ["ANONYMOUS", "MAX_LISTED", "store_routes"]

ANONYMOUS = Actor(kind=ActorKind.API)
"""Who the audit names for writes on a server run without keys."""

MAX_LISTED = 100_000
"""The most namespaces a listing that names no dataset reads before keeping the key's own."""


# -- the server side ---------------------------------------------------------------------------
def _dataset(namespace: Sequence[str]) -> str:
    return scope_for_namespace(tuple(namespace)).dataset


def _check(grant: Grant | None, op: Op) -> None:
    """Refuse ``op`` unless the key may do it (see the module docs)."""
    if grant is None:
        return
    if isinstance(op, GetOp | PutOp):
        grant.check(_dataset(op.namespace), Role.WRITE if isinstance(op, PutOp) else Role.READ)
    elif isinstance(op, SearchOp):
        if op.namespace_prefix:
            grant.check(_dataset(op.namespace_prefix[:1]), Role.READ)
        elif ALL_DATASETS not in grant.datasets:
            raise Forbidden(f"key {grant.name!r} may search only under its datasets' namespaces")
    elif isinstance(op, ListNamespacesOp):
        prefix = _listed_dataset(op)
        if prefix is not None:
            grant.check(prefix, Role.READ)
        # else: every key may read; the listing keeps only the key's datasets (store_routes)


def _listed_dataset(op: ListNamespacesOp) -> str | None:
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix" and condition.path and condition.path[0] != "*":
            return _dataset(condition.path[:1])
    return None


def store_routes(memory: Memory) -> APIRouter | None:
    """The server extension: ``POST /api/store/batch`` over a store of ``memory``'s items.

    ``None`` for a memory whose store has no folder to keep the items' values in (a Qdrant
    server): the extension is then off.
    """
    try:
        sidecar_location(memory, None)
    except ConfigurationError:
        return None
    opened: list[MembrainStore] = []
    lock = threading.Lock()

    def store() -> MembrainStore:
        """The store, opened on first use (a server nobody asks for items creates no file)."""
        with lock:
            if not opened:
                opened.append(MembrainStore(memory=memory))
            return opened[0]

    router = APIRouter()

    @router.post(STORE_BATCH, tags=["langgraph store"])
    def batch(body: StoreBatch, grant: Annotated[Grant | None, Depends(authenticate)]) -> list[Any]:
        """Run LangGraph store operations; answers one result per operation, in order."""
        ops = [op_of(wire) for wire in body.ops]
        # a listing that names no dataset is run whole, then cut to the key's datasets and paged
        narrowed: dict[int, ListNamespacesOp] = {}
        run: list[Op] = []
        for i, op in enumerate(ops):
            if grant is not None and isinstance(op, ListNamespacesOp) and not _listed_dataset(op):
                narrowed[i] = op
                op = op._replace(limit=MAX_LISTED, offset=0)
            run.append(op)
        try:
            for op in ops:
                _check(grant, op)
            results = store().batch_by(run, grant.actor if grant else ANONYMOUS)
        except InvalidNamespaceError as exc:
            raise InputError(f"invalid namespace: {exc}") from None
        for i, listing in narrowed.items():
            assert grant is not None
            found = results[i]
            listed = (
                [ns for ns in found if isinstance(ns, tuple)] if isinstance(found, list) else []
            )
            mine = [ns for ns in listed if ns and grant.covers(_dataset(ns))]
            results[i] = mine[listing.offset : listing.offset + listing.limit]
        return [result_json(result) for result in results]

    return router
