"""What every ``membrain`` command shares: the app, the consoles, the options, failures."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from membrain.api.config import MembrainSettings, settings_for
from membrain.api.errors import ConfigurationError, InputError, MembrainError
from membrain.backends.edge import holds_store
from membrain.memory import Memory
from membrain.remote import RemoteMemory
from membrain.remote.common import redacted

__all__ = [
    "DatasetOption",
    "JsonOption",
    "LlmOption",
    "PathOption",
    "SessionOption",
    "TaskOption",
    "app",
    "err",
    "fail",
    "failures",
    "json_line",
    "open_memory",
    "out",
    "say",
    "settings_of",
    "tracebacks",
]

app = typer.Typer(
    help=(
        "MemBrain: accountable long-term memory for LLM agents.\n\n"
        "The store is the folder MEMBRAIN_PATH names (default .membrain), or the Qdrant server "
        "MEMBRAIN_QDRANT_URL names; --path overrides MEMBRAIN_PATH."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

PathOption = Annotated[
    Path | None,
    typer.Option(
        "--path", help="Folder of the embedded store (default: MEMBRAIN_PATH, else .membrain)."
    ),
]
DatasetOption = Annotated[
    str, typer.Option("--dataset", "-d", help="Whose memory (user, persona).")
]
TaskOption = Annotated[str, typer.Option("--task", "-t", help="Which agent or application.")]
SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Optional session within the task.")
]
LlmOption = Annotated[
    str | None,
    typer.Option(
        "--llm",
        help="Extract with this chat model, as module:attribute (a model, or a function "
        "making one); default MEMBRAIN_LLM, else offline.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (one object per line).")]


tracebacks = {"on": False}
"""``--debug``: print the traceback of a failure too."""


def fail(exc: Exception) -> typer.Exit:
    """Print ``exc`` as one line; the exit to raise (1: refused on purpose, 2: unexpected)."""
    if tracebacks["on"]:
        err.print_exception(show_locals=False)
    text = redacted(str(exc)).strip()  # a URL's user and password never reach the terminal
    first = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, MembrainError):
        code = 1
    else:
        first, code = f"unexpected {type(exc).__name__}: {first}", 2
        if not tracebacks["on"]:
            first += " (run again with --debug for the traceback)"
    err.print(f"[bold red]error:[/] {escape(first)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def failures() -> Iterator[None]:
    """Turn any failure inside into a one-line message and an exit (see :func:`fail`)."""
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise fail(exc) from None


def settings_of(path: Path | None) -> MembrainSettings:
    """The ``MEMBRAIN_*`` settings, with ``--path`` naming the store when given."""
    return settings_for(path=path)


served: dict[str, str | None] = {"url": None}
"""The served memory the commands use (``--url``), when one is named."""


def open_memory(path: Path | None, *, create: bool = False) -> Memory | RemoteMemory:
    """The memory the options name: the served one of ``--url``, else the store of ``--path``.

    Without either, ``MEMBRAIN_URL`` or the ``MEMBRAIN_*`` store settings.

    Raises:
        ConfigurationError: both ``--url`` and ``--path``.
    """
    if served["url"]:
        if path is not None:
            raise ConfigurationError("pass --url (a served memory) or --path (a store), not both")
        return RemoteMemory(served["url"], os.environ.get("MEMBRAIN_API_KEY") or None)
    settings = settings_of(path)
    if not create and settings.qdrant_url is None and not holds_store(settings.path):
        raise InputError(f"no store at {settings.path}; ingest something first or pass --path")
    return Memory.from_settings(settings)


def say(text: str) -> None:
    """Print ``text`` as it is (no markup, no highlighting)."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def json_line(data: Any) -> None:
    """Print ``data`` as one JSON line."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")


def _version(value: bool) -> None:
    if value:
        try:
            version = metadata.version("membrain-memory")
        except metadata.PackageNotFoundError:  # run from a source tree that is not installed
            version = "unknown"
        typer.echo(f"membrain {version}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="On a failure, print its traceback too.")
    ] = False,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="MEMBRAIN_URL",
            help="Use a served memory (`membrain serve`) instead of a store; its API key is "
            "read from MEMBRAIN_API_KEY.",
        ),
    ] = None,
) -> None:
    """Options that apply before any command."""
    tracebacks["on"] = debug
    served["url"] = url
