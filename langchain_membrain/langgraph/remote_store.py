"""A LangGraph store served by ``membrain serve``: :class:`RemoteMembrainStore` and its wire format.

``membrain serve`` serves one :class:`~.store.MembrainStore` over the served memory at
``POST /api/store/batch`` (:mod:`langchain_membrain.langgraph.served`), so every worker of an
application shares the same items. :class:`RemoteMembrainStore` is the LangGraph ``BaseStore``
that sends a batch of operations there; it needs no server package.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any, Literal

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from pydantic import BaseModel, Field

from langchain_membrain.langgraph.sidecar import SimilaritySearch, check_op, check_ttl_config
from langchain_membrain.langgraph.ttl import Sweeper, SweeperFuture
from membrain import ConfigurationError
from membrain.remote.common import RETRIES, Call, answer, connection, headers, send

__all__ = [
    "MAX_OPS",
    "STORE_BATCH",
    "STORE_SWEEP",
    "RemoteMembrainStore",
    "StoreBatch",
    "WireOp",
    "op_json",
    "op_of",
    "result_json",
    "result_of",
]

STORE_BATCH = "/api/store/batch"
STORE_SWEEP = "/api/store/sweep"
MAX_OPS = 1000
"""The most operations one batch request may carry."""


# -- the wire format ---------------------------------------------------------------------------
class _Get(BaseModel):
    op: Literal["get"]
    namespace: list[str]
    key: str
    refresh_ttl: bool = True


class _Search(BaseModel):
    op: Literal["search"]
    namespace_prefix: list[str]
    query: str | None = None
    filter: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = True
    similar: bool = False  # ranked by similarity over every item, as with an index


class _Put(BaseModel):
    op: Literal["put"]
    namespace: list[str]
    key: str
    value: dict[str, Any] | None
    index: Literal[False] | list[str] | None = None
    ttl: float | None = None


class _Condition(BaseModel):
    match_type: Literal["prefix", "suffix"]
    path: list[str]


class _List(BaseModel):
    op: Literal["list"]
    match_conditions: list[_Condition] = []
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


WireOp = _Get | _Search | _Put | _List
"""One operation as JSON."""


class StoreBatch(BaseModel):
    """A batch of LangGraph store operations, run as ``MembrainStore.batch`` runs them."""

    ops: list[Annotated[WireOp, Field(discriminator="op")]] = Field(max_length=MAX_OPS)


_FLOAT = "$float"
"""A filter operand JSON has no number for (``inf``, ``-inf``, ``nan``) is sent as
``{"$float": "inf"}``; no filter holds that key (``$``-keys are operators, and this is none)."""


def _encode_floats(value: Any) -> Any:
    """``value`` with its non-finite floats as ``{"$float": repr}`` (JSON has none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {_FLOAT: repr(value)}
    if isinstance(value, dict):
        return {k: _encode_floats(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode_floats(v) for v in value]
    return value


def _decode_floats(value: Any) -> Any:
    """The inverse of :func:`_encode_floats`."""
    if isinstance(value, dict):
        if set(value) == {_FLOAT} and value[_FLOAT] in ("inf", "-inf", "nan"):
            return float(value[_FLOAT])
        return {k: _decode_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_floats(v) for v in value]
    return value


def op_json(op: Op) -> dict[str, Any]:
    """The JSON of one LangGraph operation."""
    if isinstance(op, GetOp):
        return {
            "op": "get",
            "namespace": list(op.namespace),
            "key": op.key,
            "refresh_ttl": op.refresh_ttl,
        }
    if isinstance(op, SearchOp):
        return {
            "op": "search",
            "namespace_prefix": list(op.namespace_prefix),
            "query": op.query,
            "filter": _encode_floats(op.filter),
            "limit": op.limit,
            "offset": op.offset,
            "refresh_ttl": op.refresh_ttl,
            "similar": isinstance(op, SimilaritySearch),
        }
    if isinstance(op, PutOp):
        index = list(op.index) if isinstance(op.index, list) else op.index
        return {
            "op": "put",
            "namespace": list(op.namespace),
            "key": op.key,
            "value": op.value,
            "index": index,
            "ttl": op.ttl,
        }
    if isinstance(op, ListNamespacesOp):
        conditions = [
            {"match_type": c.match_type, "path": list(c.path)} for c in op.match_conditions or ()
        ]
        return {
            "op": "list",
            "match_conditions": conditions,
            "max_depth": op.max_depth,
            "limit": op.limit,
            "offset": op.offset,
        }
    raise ConfigurationError(f"unknown store operation {type(op).__name__}")


def op_of(wire: WireOp) -> Op:
    """The LangGraph operation of its JSON."""
    if isinstance(wire, _Get):
        return GetOp(tuple(wire.namespace), wire.key, wire.refresh_ttl)
    if isinstance(wire, _Search):
        return (SimilaritySearch if wire.similar else SearchOp)(
            tuple(wire.namespace_prefix),
            _decode_floats(wire.filter),
            wire.limit,
            wire.offset,
            wire.query,
            wire.refresh_ttl,
        )
    if isinstance(wire, _Put):
        return PutOp(tuple(wire.namespace), wire.key, wire.value, wire.index, wire.ttl)
    conditions = tuple(MatchCondition(c.match_type, tuple(c.path)) for c in wire.match_conditions)
    return ListNamespacesOp(conditions or None, wire.max_depth, wire.limit, wire.offset)


def _item_json(item: Item) -> dict[str, Any]:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
        "score": item.score if isinstance(item, SearchItem) else None,
    }


def result_json(result: Result) -> Any:
    """The JSON of one operation's result."""
    if isinstance(result, Item):
        return _item_json(result)
    if isinstance(result, list):
        return [_item_json(r) if isinstance(r, Item) else list(r) for r in result]
    return None


def result_of(op: Op, body: Any) -> Result:
    """The LangGraph result of ``op`` from its JSON."""
    if isinstance(op, GetOp):
        return None if body is None else Item(**_item_fields(body))
    if isinstance(op, SearchOp):
        return [SearchItem(**_item_fields(b), score=b.get("score")) for b in body]
    if isinstance(op, ListNamespacesOp):
        return [tuple(ns) for ns in body]
    return None


def _item_fields(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "namespace": tuple(body["namespace"]),
        "key": body["key"],
        "value": body["value"],
        "created_at": datetime.fromisoformat(body["created_at"]),
        "updated_at": datetime.fromisoformat(body["updated_at"]),
    }


def _raise_namespace_error(response: httpx.Response) -> None:
    """Raise the ``InvalidNamespaceError`` the server answered, as the embedded store does."""
    if response.status_code != 422:
        return
    try:
        body = response.json()
    except ValueError:
        return
    if isinstance(body, dict) and body.get("type") == "InvalidNamespaceError":
        raise InvalidNamespaceError(str(body.get("error", "invalid namespace")))


# -- the client --------------------------------------------------------------------------------
class RemoteMembrainStore(BaseStore):
    """The LangGraph store a MemBrain server serves (``membrain serve``), over HTTP.

    Items and their query search are the server's :class:`~.store.MembrainStore`, shared by
    every process that talks to it.

    Args:
        url: The server's base URL (``http://host:9574``).
        api_key: A key from the server's keys file (``None`` for a server run without keys).
        index: LangGraph's ``IndexConfig``, kept as ``index_config``: its ``fields`` are sent
            as the index paths of puts that name none; the server embeds with its own encoder
            (``embed`` must be that model).
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` for puts that give none,
            ``refresh_on_read`` for reads; the server sweeps on its own timer
            (:meth:`sweep_ttl` asks it now, with an admin key).
        timeout: Seconds to wait for each answer.
        retries: Requests sent again after no answer or a 502/503/504 (every operation is
            safe to repeat: a put writes the same value again).
        transport: An ``httpx`` transport (tests).

    Example:
        >>> store = RemoteMembrainStore("http://127.0.0.1:9574", "mb_...")  # doctest: +SKIP
        >>> store.put(("sara", "prefs"), "pet", {"text": "I have a cat named Miso."})
        ... # doctest: +SKIP
    """

    supports_ttl = True

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        timeout: float = 30.0,
        retries: int = RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.index_config = None if index is None else index.copy()
        self._fields = None if index is None else index.get("fields")
        self.embeddings: Any = None if index is None else index.get("embed")
        self.ttl_config = check_ttl_config(ttl)
        self._sweeper = Sweeper(self.sweep_ttl)
        self.url, auth = connection(url)  # a user and password in it: basic auth, never shown
        self._retries = retries
        self._client = httpx.Client(
            base_url=self.url,
            headers=headers(api_key),
            auth=auth,
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        """Stop the TTL sweeper and close the connection pool."""
        self.stop_ttl_sweeper()
        self._client.close()

    def __enter__(self) -> RemoteMembrainStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Send the operations in one request; the results in the same order."""
        ops = list(ops)
        if not ops:
            return []
        for op in ops:  # refused here as the embedded store refuses it, before sending
            check_op(op)
        if self.index_config is not None:  # the server's store has no index: say what it is
            ops = [self._indexed(op) for op in ops]
        call = Call("POST", STORE_BATCH, {"ops": [op_json(op) for op in ops]})
        response = send(self._client, self.url, self._retries, call)
        _raise_namespace_error(response)
        return answer(
            response, lambda bodies: [result_of(o, b) for o, b in zip(ops, bodies, strict=True)]
        )

    def _indexed(self, op: Op) -> Op:
        """``op`` as this client's index config makes it.

        Puts name the index's fields; query searches rank every item by similarity.
        """
        if isinstance(op, PutOp) and op.index is None and op.value is not None and self._fields:
            return op._replace(index=list(self._fields))
        if isinstance(op, SearchOp) and op.query and not isinstance(op, SimilaritySearch):
            return SimilaritySearch(*op)
        return op

    def sweep_ttl(self) -> int:
        """Have the server delete the items whose TTL ran out; the number deleted."""
        response = send(self._client, self.url, self._retries, Call("POST", STORE_SWEEP, {}))
        return answer(response, lambda body: int(body["deleted"]))

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> SweeperFuture:
        """Ask the server to sweep every ``sweep_interval_minutes``, from a daemon thread.

        Default: the ``ttl`` config's ``sweep_interval_minutes``, else 5. The server also
        sweeps on its own timer. An async caller may ``await`` it, as with the store.
        """
        config = self.ttl_config or {}
        return self._sweeper.start(sweep_interval_minutes or config.get("sweep_interval_minutes"))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it stopped within ``timeout`` seconds."""
        return self._sweeper.stop(timeout)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))
