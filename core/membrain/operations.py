"""Every operation of a memory, declared once: what it does, the role it needs, where it is served.

:class:`~membrain.Memory` executes the operations; its method of the same name holds the
parameters and the full documentation. The other surfaces follow this table:
:class:`~membrain.aio.AsyncMemory` is generated from it (each operation awaits the memory's
method in a worker thread), the server serves each operation that has a ``route`` under
``/api/memory`` with the declared role, the remote clients send those routes, and the command
line and the MCP tools name the operation they run. ``tests/unit/test_operations.py`` holds
every surface to the table (same parameters as :class:`~membrain.Memory`, same role), and the
documentation's "Operations" table is generated from it.

Defined below the engine, so a caller of a served memory reads it without loading one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["OPERATIONS", "Access", "Operation", "operation"]


class Access(StrEnum):
    """The role an API key needs to call an operation (each includes the ones before it)."""

    READ = "read"
    """Searches, listings, history and audit."""
    WRITE = "write"
    """Adding messages and changing facts (forget, supersede, confirm, dispute, review)."""
    ADMIN = "admin"
    """Erasure and the whole store: purge, retention, deleting a scope, compaction."""

    def includes(self, needed: Access) -> bool:
        """Whether this role may do what ``needed`` may."""
        order = list(Access)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of a memory."""

    name: str
    """The method of :class:`~membrain.Memory` (and of every surface) that runs it."""
    summary: str
    """What it does, in one line."""
    role: Access
    """The role a served memory requires of the caller's API key."""
    route: tuple[str, str] | None = None
    """HTTP method and path under ``/api/memory`` (``None``: only on an embedded memory)."""
    cli: str | None = None
    """The ``membrain`` command that runs it, if any."""
    mcp: str | None = None
    """The MCP tool that runs it, if any."""


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "add",
        "Store messages as evidence, then extract facts from them.",
        Access.WRITE,
        ("POST", "/add"),
        cli="ingest",
        mcp="add_memory",
    ),
    Operation(
        "extract_pending",
        "Extract the messages stored without extraction.",
        Access.WRITE,
        ("POST", "/extract"),
    ),
    Operation(
        "retry_failed",
        "Extract again the messages whose extraction failed.",
        Access.WRITE,
        ("POST", "/retry"),
    ),
    Operation(
        "dismiss_failed",
        "Give up on messages whose extraction failed.",
        Access.WRITE,
        ("POST", "/dismiss"),
    ),
    Operation(
        "search",
        "The facts that answer a question, best first.",
        Access.READ,
        ("POST", "/search"),
        cli="search",
        mcp="search_memory",
    ),
    Operation(
        "context",
        "A cited briefing for a question, within a token budget.",
        Access.READ,
        ("POST", "/context"),
        mcp="get_context",
    ),
    Operation(
        "search_messages",
        "The stored messages (the evidence) that match a question.",
        Access.READ,
        ("POST", "/messages/search"),
    ),
    Operation(
        "facts",
        "The facts of a scope, by id or by source.",
        Access.READ,
        ("GET", "/facts"),
        cli="facts",
    ),
    Operation(
        "get",
        "One fact by its id, whatever its status.",
        Access.READ,
        ("GET", "/fact"),
        cli="show",
    ),
    Operation("messages", "The stored messages of a scope.", Access.READ, ("GET", "/messages")),
    Operation("entities", "The entities of a scope.", Access.READ, ("GET", "/entities")),
    Operation(
        "participants",
        "The people who speak in a scope's conversations.",
        Access.READ,
        ("GET", "/participants"),
    ),
    Operation(
        "scopes",
        "The (dataset, task) scopes that hold records (served: of the key's datasets).",
        Access.READ,
        ("GET", "/scopes"),
        cli="scopes",
    ),
    Operation(
        "forget",
        "Take facts out of every search; they stay, with their sources, for audit.",
        Access.WRITE,
        ("POST", "/forget"),
        cli="forget",
        mcp="forget_memory",
    ),
    Operation(
        "supersede",
        "Record that new facts replace an old one (both kept).",
        Access.WRITE,
        ("POST", "/supersede"),
    ),
    Operation(
        "update",
        "Replace a fact by a new statement of it (stored as evidence; the old one superseded).",
        Access.WRITE,
        ("POST", "/update"),
    ),
    Operation(
        "confirm", "Mark facts as confirmed by a person.", Access.WRITE, ("POST", "/confirm")
    ),
    Operation(
        "dispute",
        "Dispute facts: a review item is opened.",
        Access.WRITE,
        ("POST", "/dispute"),
    ),
    Operation("review_queue", "The open review items.", Access.READ, ("GET", "/review")),
    Operation(
        "resolve",
        "Accept or reject a review item.",
        Access.WRITE,
        ("POST", "/review/resolve"),
    ),
    Operation(
        "history",
        "Why the memory believes a fact: what it replaced, what replaced it, who changed it.",
        Access.READ,
        ("GET", "/history"),
        cli="history",
    ),
    Operation(
        "audit",
        "The audit log: every change, who made it and why.",
        Access.READ,
        ("GET", "/audit"),
        cli="audit",
    ),
    Operation(
        "profile",
        "The user profile: its current entries, preferred topics first.",
        Access.READ,
        ("GET", "/profile"),
        cli="profile",
    ),
    Operation(
        "profile_put",
        "Set a profile entry (a new version, citing facts; the old one kept).",
        Access.WRITE,
        ("POST", "/profile"),
    ),
    Operation(
        "profile_forget",
        "Remove a profile entry (a last version marks it removed).",
        Access.WRITE,
        ("POST", "/profile/forget"),
    ),
    Operation(
        "profile_history",
        "Every version of a profile entry, each citing its facts.",
        Access.READ,
        ("GET", "/profile/history"),
    ),
    Operation(
        "purge",
        "Erase facts (and their messages) from every index and from disk.",
        Access.ADMIN,
        ("POST", "/purge"),
    ),
    Operation("apply_retention", "Erase the messages older than the retention.", Access.ADMIN),
    Operation(
        "delete_scope",
        "Delete everything stored under a scope.",
        Access.ADMIN,
        ("DELETE", "/scope"),
    ),
    Operation(
        "delete_dataset",
        "Delete every task of a dataset (a whole user).",
        Access.ADMIN,
        ("DELETE", "/dataset"),
    ),
    Operation("optimize", "Build the search indexes now (after a bulk load).", Access.ADMIN),
)
"""Every operation, in the order the documentation lists them."""

_BY_NAME = {op.name: op for op in OPERATIONS}


def operation(name: str) -> Operation:
    """The operation called ``name``.

    Raises:
        KeyError: there is none.
    """
    return _BY_NAME[name]
