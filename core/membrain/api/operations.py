"""Every operation of a memory, declared once: its request, result, access and exposure.

An :class:`Operation` names the method every surface has (:class:`~membrain.Memory`, the
async facade, both remote clients), the request model that holds its parameters, defaults,
limits and documentation (:mod:`membrain.api.requests`), the type of its result, the access an API
key needs, and how it is exposed: an HTTP route under ``/api/memory``, a ``membrain``
command, an MCP tool. Every surface is made from :data:`OPERATIONS`: a method builds the
request and hands it to the surface's one ``execute``; the server serves each route with the
request model as its body or query; the MCP tools and the commands read their parameters from
it. Adding an operation is one :class:`Operation` here and its implementation on
:class:`~membrain.Memory` (a method ``_run_<name>`` taking the request).

Defined below the engine, so a caller of a served memory reads it without loading one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any, overload

from pydantic import TypeAdapter

from membrain.api.audit import AuditEvent, FactHistory, ReviewItem
from membrain.api.erasure import ErasureCheck, ErasureReceipt
from membrain.api.models import Context, Entity, Fact, SearchResult, StoredMessage
from membrain.api.profile import ProfileEntry
from membrain.api.recalls import Recall
from membrain.api.requests import (
    AddRequest,
    ApplyRetentionRequest,
    AuditRequest,
    ConfirmRequest,
    ContextRequest,
    DeleteDatasetRequest,
    DeleteScopeRequest,
    DismissFailedRequest,
    DisputeRequest,
    EntitiesRequest,
    ExpireRequest,
    ExtendExpiryRequest,
    ExtractPendingRequest,
    FactsRequest,
    ForgetRequest,
    GetRequest,
    HistoryRequest,
    MessagesRequest,
    OperationRequest,
    OptimizeRequest,
    ParticipantsRequest,
    ProfileForgetRequest,
    ProfileHistoryRequest,
    ProfilePutRequest,
    ProfileRequest,
    PurgeRequest,
    RecallsRequest,
    ReceiptsRequest,
    ResolveRequest,
    RetryFailedRequest,
    ReviewQueueRequest,
    ScopesRequest,
    SearchMessagesRequest,
    SearchRequest,
    SupersedeRequest,
    TraceRequest,
    UpdateRequest,
    VerifyErasureRequest,
)
from membrain.api.results import AddResult, EvidenceHit, PurgeResult
from membrain.api.scope import STORED, Scope

__all__ = ["OPERATIONS", "Access", "Operation", "OperationTable", "operation"]


class Access(StrEnum):
    """The access an API key needs to call an operation (each includes the ones before it)."""

    READ = "read"
    """Searches, listings, history and audit."""
    WRITE = "write"
    """Adding messages and changing facts (forget, supersede, confirm, dispute, review)."""
    ADMIN = "admin"
    """Erasure and the whole store: purge, retention, deleting a scope, compaction."""

    def includes(self, needed: Access) -> bool:
        """Whether this access may do what ``needed`` may."""
        order = list(Access)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of a memory."""

    name: str
    """The method of every surface that runs it."""
    summary: str
    """What it does, in one line."""
    request: type[OperationRequest]
    """Its parameters: fields, defaults, limits and documentation."""
    result: Any
    """The type of what it returns."""
    role: Access
    """The access a served memory requires of the caller's API key."""
    route: tuple[str, str]
    """HTTP method and path under ``/api/memory``."""
    cli: str | None = None
    """The ``membrain`` command that runs it, if any."""
    mcp: str | None = None
    """The MCP tool that runs it, if any."""
    reviewer: bool = False
    """A person's decision: a served memory records the key's holder as a reviewer."""

    @property
    def mutates(self) -> bool:
        """Whether it changes what is stored (every write and admin operation)."""
        return self.role is not Access.READ

    def dump_result(self, value: Any) -> Any:
        """A result as JSON data, as a served memory answers it."""
        return _adapter(self.result).dump_python(value, mode="json")

    def dump_result_json(self, value: Any) -> bytes:
        """A result as JSON text, encoded once (what a served memory sends)."""
        return _adapter(self.result).dump_json(value)

    def load_result(self, data: Any) -> Any:
        """The result a served memory answered as ``data`` (its scopes read as stored parts)."""
        return _adapter(self.result).validate_python(data, context=STORED)


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


class OperationTable(Sequence[Operation]):
    """The declared operations, in the order the documentation lists them.

    The surfaces follow it: a method is added to every surface for each operation declared
    (:meth:`declared` adds one for a while, as a test or an extension does).
    """

    def __init__(self, *operations: Operation) -> None:
        self._operations = list(operations)
        self._listeners: list[Callable[[Operation, bool], None]] = []

    @overload
    def __getitem__(self, index: int) -> Operation: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Operation]: ...
    def __getitem__(self, index: int | slice) -> Operation | Sequence[Operation]:
        return self._operations[index]

    def __len__(self) -> int:
        return len(self._operations)

    def named(self, name: str) -> Operation:
        """The operation called ``name``.

        Raises:
            KeyError: there is none.
        """
        for op in self._operations:
            if op.name == name:
                return op
        raise KeyError(name)

    def of(self, request: OperationRequest) -> Operation:
        """The operation ``request`` is for.

        Raises:
            KeyError: no operation takes its type.
        """
        for op in self._operations:
            if type(request) is op.request:
                return op
        raise KeyError(type(request).__name__)

    def listen(self, listener: Callable[[Operation, bool], None]) -> None:
        """Call ``listener(op, True)`` for each operation declared and ``(op, False)`` removed."""
        self._listeners.append(listener)
        for op in self._operations:
            listener(op, True)

    @contextmanager
    def declared(self, op: Operation) -> Iterator[Operation]:
        """``op`` declared while the block runs: every surface has it, then none has."""
        if any(o.name == op.name for o in self._operations):
            raise ValueError(f"an operation {op.name!r} is declared already")
        self._operations.append(op)
        for listener in self._listeners:
            listener(op, True)
        try:
            yield op
        finally:
            self._operations.remove(op)
            for listener in self._listeners:
                listener(op, False)


OPERATIONS = OperationTable(
    Operation(
        "add",
        "Store messages as evidence, then extract facts from them.",
        AddRequest,
        AddResult,
        Access.WRITE,
        ("POST", "/add"),
        cli="ingest",
        mcp="add_memory",
    ),
    Operation(
        "extract_pending",
        "Extract the messages stored without extraction.",
        ExtractPendingRequest,
        AddResult,
        Access.WRITE,
        ("POST", "/extract"),
    ),
    Operation(
        "retry_failed",
        "Extract again the messages whose extraction failed.",
        RetryFailedRequest,
        AddResult,
        Access.WRITE,
        ("POST", "/retry"),
    ),
    Operation(
        "dismiss_failed",
        "Give up on messages whose extraction failed.",
        DismissFailedRequest,
        list[str],
        Access.WRITE,
        ("POST", "/dismiss"),
    ),
    Operation(
        "search",
        "The facts that answer a question, best first.",
        SearchRequest,
        SearchResult,
        Access.READ,
        ("POST", "/search"),
        cli="search",
        mcp="search_memory",
    ),
    Operation(
        "context",
        "A cited briefing for a question, within a token budget.",
        ContextRequest,
        Context,
        Access.READ,
        ("POST", "/context"),
        mcp="get_context",
    ),
    Operation(
        "search_messages",
        "The stored messages (the evidence) that match a question.",
        SearchMessagesRequest,
        list[EvidenceHit],
        Access.READ,
        ("POST", "/messages/search"),
    ),
    Operation(
        "facts",
        "The facts of a scope, by id or by source.",
        FactsRequest,
        list[Fact],
        Access.READ,
        ("GET", "/facts"),
        cli="facts",
    ),
    Operation(
        "get",
        "One fact by its id, whatever its status.",
        GetRequest,
        Fact,
        Access.READ,
        ("GET", "/fact"),
        cli="show",
    ),
    Operation(
        "messages",
        "The stored messages of a scope.",
        MessagesRequest,
        list[StoredMessage],
        Access.READ,
        ("GET", "/messages"),
    ),
    Operation(
        "entities",
        "The entities of a scope.",
        EntitiesRequest,
        list[Entity],
        Access.READ,
        ("GET", "/entities"),
    ),
    Operation(
        "participants",
        "The people who speak in a scope's conversations.",
        ParticipantsRequest,
        list[str],
        Access.READ,
        ("GET", "/participants"),
    ),
    Operation(
        "scopes",
        "The (dataset, task) scopes that hold records (served: of the key's datasets).",
        ScopesRequest,
        list[Scope],
        Access.READ,
        ("GET", "/scopes"),
        cli="scopes",
    ),
    Operation(
        "forget",
        "Take facts out of every search; they stay, with their sources, for audit.",
        ForgetRequest,
        list[Fact],
        Access.WRITE,
        ("POST", "/forget"),
        cli="forget",
        mcp="forget_memory",
    ),
    Operation(
        "supersede",
        "Record that new facts replace an old one (both kept).",
        SupersedeRequest,
        Fact,
        Access.WRITE,
        ("POST", "/supersede"),
    ),
    Operation(
        "update",
        "Replace a fact by a new statement of it (stored as evidence; the old one superseded).",
        UpdateRequest,
        Fact,
        Access.WRITE,
        ("POST", "/update"),
    ),
    Operation(
        "confirm",
        "Mark facts as confirmed by a person.",
        ConfirmRequest,
        list[Fact],
        Access.WRITE,
        ("POST", "/confirm"),
        reviewer=True,
    ),
    Operation(
        "dispute",
        "Dispute facts: a review item is opened.",
        DisputeRequest,
        ReviewItem,
        Access.WRITE,
        ("POST", "/dispute"),
        reviewer=True,
    ),
    Operation(
        "review_queue",
        "The open review items.",
        ReviewQueueRequest,
        list[ReviewItem],
        Access.READ,
        ("GET", "/review"),
    ),
    Operation(
        "resolve",
        "Accept or reject a review item.",
        ResolveRequest,
        ReviewItem,
        Access.WRITE,
        ("POST", "/review/resolve"),
        reviewer=True,
    ),
    Operation(
        "history",
        "Why the memory believes a fact: what it replaced, what replaced it, who changed it.",
        HistoryRequest,
        FactHistory,
        Access.READ,
        ("GET", "/history"),
        cli="history",
    ),
    Operation(
        "audit",
        "The audit log: every change, who made it and why.",
        AuditRequest,
        list[AuditEvent],
        Access.READ,
        ("GET", "/audit"),
        cli="audit",
    ),
    Operation(
        "trace",
        "What a run was told: the facts each read gave it, in order, with their sources.",
        TraceRequest,
        list[Recall],
        Access.READ,
        ("GET", "/trace"),
        cli="trace",
        mcp="trace_memory",
    ),
    Operation(
        "recalls",
        "Which runs were given a fact, and at which rank.",
        RecallsRequest,
        list[Recall],
        Access.READ,
        ("GET", "/recalls"),
        cli="recalls",
    ),
    Operation(
        "profile",
        "The user profile: its current entries, preferred topics first.",
        ProfileRequest,
        list[ProfileEntry],
        Access.READ,
        ("GET", "/profile"),
        cli="profile",
    ),
    Operation(
        "profile_put",
        "Set a profile entry (a new version, citing facts; the old one kept).",
        ProfilePutRequest,
        ProfileEntry,
        Access.WRITE,
        ("POST", "/profile"),
    ),
    Operation(
        "profile_forget",
        "Remove a profile entry (a last version marks it removed).",
        ProfileForgetRequest,
        ProfileEntry,
        Access.WRITE,
        ("POST", "/profile/forget"),
    ),
    Operation(
        "profile_history",
        "Every version of a profile entry, each citing its facts.",
        ProfileHistoryRequest,
        list[ProfileEntry],
        Access.READ,
        ("GET", "/profile/history"),
    ),
    Operation(
        "purge",
        "Erase facts (and their messages) from every index and from disk.",
        PurgeRequest,
        PurgeResult,
        Access.ADMIN,
        ("POST", "/purge"),
    ),
    Operation(
        "apply_retention",
        "Erase the messages older than the retention.",
        ApplyRetentionRequest,
        PurgeResult,
        Access.ADMIN,
        ("POST", "/retention"),
    ),
    Operation(
        "delete_scope",
        "Delete everything stored under a scope.",
        DeleteScopeRequest,
        Scope,
        Access.ADMIN,
        ("DELETE", "/scope"),
    ),
    Operation(
        "delete_dataset",
        "Delete every task of a dataset (a whole user).",
        DeleteDatasetRequest,
        list[Scope],
        Access.ADMIN,
        ("DELETE", "/dataset"),
    ),
    Operation(
        "receipts",
        "The erasure receipts of a dataset (ids and salted hashes, no content).",
        ReceiptsRequest,
        list[ErasureReceipt],
        Access.READ,
        ("GET", "/receipts"),
        cli="receipts",
    ),
    Operation(
        "verify_erasure",
        "Check an erasure receipt: nothing it erased is left in the store or its files.",
        VerifyErasureRequest,
        ErasureCheck,
        Access.READ,
        ("POST", "/receipts/verify"),
        cli="verify-erasure",
    ),
    Operation(
        "expire",
        "Mark the facts past their expiry as expired.",
        ExpireRequest,
        list[str],
        Access.WRITE,
        ("POST", "/expire"),
        cli="expire",
    ),
    Operation(
        "extend_expiry",
        "Move the expiry of current, expiring facts later (a refreshed time to live).",
        ExtendExpiryRequest,
        list[str],
        Access.WRITE,
        ("POST", "/expiry"),
    ),
    Operation(
        "optimize",
        "Build the search indexes now (after a bulk load).",
        OptimizeRequest,
        None,
        Access.ADMIN,
        ("POST", "/optimize"),
    ),
)
"""Every operation, in the order the documentation lists them."""


def operation(name: str) -> Operation:
    """The operation called ``name``.

    Raises:
        KeyError: there is none.
    """
    return OPERATIONS.named(name)
