"""Every operation of the table has its guarantee measured by a benchmark.

An operation that changes the store (role write or admin) must have a row in the crash-recovery
benchmark (``benchmarks.fault_injection``: killed mid-call, the store must recover); one that
reads must have a leak probe in the negative-recall benchmark (``benchmarks.negative_recall``:
it must not serve what was forgotten, superseded, purged, rejected or deleted). Both are keyed
by the operation's name in :data:`membrain.api.operations.OPERATIONS`, so a new operation fails
here until its guarantee is measured.
"""

from __future__ import annotations

import pytest

from benchmarks.fault_injection_ops import OPERATIONS as FAULT_ROWS
from benchmarks.negative_recall_probes import READ_PROBES, READS
from membrain.api import operations
from membrain.api.models import Fact
from membrain.api.operations import Access, Operation
from membrain.api.requests import OperationRequest, ScopeField

EXTRA_ROWS = {"import", "purge_receipt"}
"""Fault rows of what is no operation of a memory (``membrain.files.transfer.import_scope``),
or of one checked further (a purge's erasure receipts)."""


def unmeasured() -> list[str]:
    """The operations of the table (as it is when called) whose guarantee no benchmark measures."""
    missing = []
    for op in operations.OPERATIONS:
        if op.role is not Access.READ and op.name not in FAULT_ROWS:
            missing.append(f"{op.name} changes the store but has no fault_injection row")
        if op.role is Access.READ and op.name not in READ_PROBES:
            missing.append(f"{op.name} reads but has no negative_recall leak probe")
    return missing


def check_every_operation_is_measured() -> None:
    missing = unmeasured()
    assert not missing, "; ".join(missing)


def test_every_operation_of_the_table_is_measured() -> None:
    check_every_operation_is_measured()


def test_the_benchmarks_name_only_operations_of_the_table() -> None:
    changing = {op.name for op in operations.OPERATIONS if op.role is not Access.READ}
    reading = {op.name for op in operations.OPERATIONS if op.role is Access.READ}
    assert set(FAULT_ROWS) == changing | EXTRA_ROWS  # a row per change, none per read
    assert set(READ_PROBES) == set(READS) == reading
    assert all(surfaces for surfaces in READS.values())


def test_an_operation_added_without_its_guarantee_fails_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    teleport = Operation(
        "teleport", "Move every fact to another scope.", TeleportRequest, None, Access.ADMIN,
        ("POST", "/tp"),
    )  # fmt: skip
    peek = Operation(
        "peek", "A glance at one fact.", PeekRequest, Fact, Access.READ, ("GET", "/peek")
    )
    with operations.OPERATIONS.declared(teleport), operations.OPERATIONS.declared(peek):
        with pytest.raises(AssertionError, match="teleport changes the store") as failed:
            check_every_operation_is_measured()
        assert str(failed.value).split("\n")[0].split("; ") == [
            "teleport changes the store but has no fault_injection row",
            "peek reads but has no negative_recall leak probe",
        ]

        # Its row and its probe are what it takes.
        monkeypatch.setattr(f"{__name__}.FAULT_ROWS", (*FAULT_ROWS, "teleport"))
        monkeypatch.setitem(READ_PROBES, "peek", READ_PROBES["get"])
        check_every_operation_is_measured()
    check_every_operation_is_measured()  # the toys are gone with their declarations


class TeleportRequest(OperationRequest):
    """Move every fact of a scope to another."""

    scope: ScopeField
    to: ScopeField


class PeekRequest(OperationRequest):
    """A glance at one fact."""

    fact_id: str
    scope: ScopeField
