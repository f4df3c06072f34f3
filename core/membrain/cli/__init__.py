"""The ``membrain`` command: ingest, search and inspect, govern, move and serve a memory.

Every command opens the memory from ``MembrainSettings`` (``MEMBRAIN_*`` environment
variables), with ``--path`` overriding ``MEMBRAIN_PATH``. Errors MemBrain raises on purpose are
printed as one line naming the problem, with exit code 1.
"""

from __future__ import annotations

import sys

from membrain.cli import (
    expiry_commands,
    memory_commands,
    operation_commands,
    receipt_commands,
    serving,
)
from membrain.cli.common import app, fail

__all__ = [
    "app",
    "expiry_commands",
    "main",
    "memory_commands",
    "operation_commands",
    "receipt_commands",
    "serving",
]

app.add_typer(operation_commands.op_app, name="op")


def main() -> None:
    """Entry point of the membrain script: a failure is one line on stderr, never a traceback.

    ``membrain --debug COMMAND`` prints the traceback as well.
    """
    try:
        app()
    except Exception as exc:  # what no command caught: still one line
        sys.exit(fail(exc).exit_code)
