"""The server extension that serves the LangGraph store: ``POST /api/store/batch``.

``membrain serve`` loads :func:`store_routes` (entry point group ``membrain.server``): one
:class:`~.store.MembrainStore` over the served memory, its SQLite sidecar beside the store, so
every worker of an application shares the same items (reached with
:class:`~.remote_store.RemoteMembrainStore`).

Every operation is checked first (:func:`~.sidecar.check_op`: a bad label, key, query, value
or filter fails the whole batch with an ``InputError``, before any operation runs), then
against the API key. The dataset of a namespace is the one the store keeps its items' text in
(:meth:`~.store.MembrainStore.scope_for`: the user, the second label of
``(collection, user, ...)`` or the only one of ``(user,)``, encoded as ``Scope(dataset=label)``
encodes it, as API keys name it), so a key reaches exactly the items it may: ``get`` and a
search need ``read``, ``put`` and ``delete`` need ``write`` on that dataset. A search prefix
that does not decide one dataset (``()``, ``("memories",)``) needs a key for every dataset
(``"*"``); a namespace listing whose prefix does not decide one returns only the namespaces of
the key's datasets. A bad label answers 422 with type ``InvalidNamespaceError``, which the
client raises again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from langgraph.store.base import (
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
    TTLConfig,
)

from langchain_membrain.langgraph.remote_store import (
    STORE_BATCH,
    STORE_SWEEP,
    StoreBatch,
    op_of,
    result_json,
)
from langchain_membrain.langgraph.sidecar import check_op, sidecar_location
from langchain_membrain.langgraph.store import MembrainStore
from membrain import Actor, ActorKind, ConfigurationError, Memory, ScopeError
from membrain.server.app import authenticate
from membrain.server.guards import error_response
from membrain.server.keys import ALL_DATASETS, Access, Forbidden, Grant

__all__ = ["ANONYMOUS", "MAX_LISTED", "SWEEP_MINUTES", "store_routes"]

SWEEP_MINUTES = 5.0
"""How often the served store deletes expired items, by default."""

ANONYMOUS = Actor(kind=ActorKind.API)
"""Who the audit names for writes on a server run without keys."""

MAX_LISTED = 100_000
"""The most namespaces a listing that names no dataset reads before keeping the key's own."""


# -- the server side ---------------------------------------------------------------------------
def _dataset(store: MembrainStore, namespace: Sequence[str]) -> str:
    """The dataset the store keeps the items of ``namespace`` in."""
    return store.scope_for(tuple(namespace)).dataset


def _prefix_dataset(store: MembrainStore, prefix: Sequence[str]) -> str | None:
    """The one dataset of every namespace under ``prefix``; ``None`` when it may reach several.

    ``"*"`` is a wildcard in a listing's match path: it decides nothing.
    """
    depth = store.dataset_labels
    if depth is None or len(prefix) < depth or "*" in prefix[:depth]:
        return None
    return _dataset(store, prefix[:depth])


def _listed_dataset(store: MembrainStore, op: ListNamespacesOp) -> str | None:
    """The one dataset a listing's prefix conditions decide, if any."""
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix":
            dataset = _prefix_dataset(store, condition.path)
            if dataset is not None:
                return dataset
    return None


def _check(store: MembrainStore, grant: Grant, op: Op) -> None:
    """Refuse ``op`` unless the key may do it (see the module docs).

    Raises:
        Forbidden: the key does not cover the dataset, or its role is too low.
    """
    if isinstance(op, GetOp | PutOp):
        role = Access.WRITE if isinstance(op, PutOp) else Access.READ
        grant.check(_dataset(store, op.namespace), role)
    elif isinstance(op, SearchOp):
        dataset = _prefix_dataset(store, op.namespace_prefix)
        if dataset is not None:
            grant.check(dataset, Access.READ)
        elif ALL_DATASETS not in grant.datasets:
            raise Forbidden(
                f"key {grant.name!r} may search only under a prefix that names one of its datasets"
            )
    elif isinstance(op, ListNamespacesOp):
        dataset = _listed_dataset(store, op)
        if dataset is not None:
            grant.check(dataset, Access.READ)
        # else: every key may read; the listing keeps only the key's datasets (_narrowed)


def _covers(store: MembrainStore, grant: Grant, namespace: tuple[str, ...]) -> bool:
    """Whether the key may read the items of ``namespace`` (not when it maps to no dataset)."""
    try:
        return grant.covers(_dataset(store, namespace))
    except (ScopeError, InvalidNamespaceError):
        return False


def _narrowed(
    store: MembrainStore, grant: Grant, listing: ListNamespacesOp, found: Any
) -> list[tuple[str, ...]]:
    """A listing's answer cut to the key's datasets: whole namespaces kept, then cut and paged."""
    listed = [ns for ns in found if isinstance(ns, tuple)] if isinstance(found, list) else []
    mine = [ns for ns in listed if _covers(store, grant, ns)]
    depth = listing.max_depth
    kept = sorted({ns[:depth] for ns in mine}) if depth is not None else sorted(mine)
    return kept[listing.offset : listing.offset + listing.limit]


def store_routes(
    memory: Memory,
    *,
    index: IndexConfig | None = None,
    ttl: TTLConfig | None = None,
    sweep_interval_minutes: float = SWEEP_MINUTES,
) -> APIRouter | None:
    """The server extension: ``POST /api/store/batch`` over a store of ``memory``'s items.

    ``index`` and ``ttl`` are :class:`~.store.MembrainStore`'s (for an application that builds
    its own server; ``membrain serve`` uses the defaults). The store sweeps expired items every
    ``sweep_interval_minutes`` (``ttl``'s ``sweep_interval_minutes`` if given), and on
    ``POST /api/store/sweep`` (a key with ``admin`` on every dataset).

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
                served = MembrainStore(memory=memory, index=index, ttl=ttl)
                served.start_ttl_sweeper(
                    (ttl or {}).get("sweep_interval_minutes") or sweep_interval_minutes
                )
                opened.append(served)
            return opened[0]

    def close() -> None:
        """Stop the store's sweeper and close its file when the server shuts down."""
        with lock:
            for served in opened:
                served.close()
            opened.clear()

    router = APIRouter(on_shutdown=[close])

    @router.post(STORE_SWEEP, tags=["langgraph store"])
    def sweep(grant: Annotated[Grant | None, Depends(authenticate)]) -> dict[str, int]:
        """Delete the items whose TTL ran out now (the server also sweeps on a timer)."""
        if grant is not None:
            grant.check(ALL_DATASETS, Access.ADMIN)
        return {"deleted": store().sweep_ttl()}

    @router.post(STORE_BATCH, tags=["langgraph store"])
    def batch(body: StoreBatch, grant: Annotated[Grant | None, Depends(authenticate)]) -> Any:
        """Run LangGraph store operations; answers one result per operation, in order."""
        ops = [op_of(wire) for wire in body.ops]
        try:
            for op in ops:
                check_op(op)  # all, before the keys are asked: a bad op fails the whole batch
            served = store()
            narrowed: dict[int, ListNamespacesOp] = {}
            run: list[Op] = []
            for i, op in enumerate(ops):
                if grant is not None:
                    _check(served, grant, op)
                    if (
                        isinstance(op, ListNamespacesOp)
                        and ALL_DATASETS not in grant.datasets
                        and _listed_dataset(served, op) is None
                    ):
                        # run whole, over full namespaces; _narrowed keeps the key's and pages
                        narrowed[i] = op
                        op = op._replace(max_depth=None, limit=MAX_LISTED, offset=0)
                run.append(op)
            results = served.batch_by(run, grant.actor if grant else ANONYMOUS)
        except InvalidNamespaceError as exc:
            # the client raises it again, as the embedded store does
            return error_response(422, str(exc), "InvalidNamespaceError")
        for i, listing in narrowed.items():
            assert grant is not None
            results[i] = _narrowed(served, grant, listing, results[i])
        return [result_json(result) for result in results]

    return router
