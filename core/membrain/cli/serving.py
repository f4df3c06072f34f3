"""The serving commands: ``serve`` (HTTP), ``mcp`` (an agent host) and ``keys``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from membrain.api.errors import ConfigurationError
from membrain.cli.common import (
    DatasetOption,
    JsonOption,
    LlmOption,
    PathOption,
    SessionOption,
    TaskOption,
    app,
    failures,
    say,
)

__all__ = ["keys_add", "keys_list", "keys_revoke", "mcp_command", "serve"]


@app.command()
def serve(
    path: PathOption = None,
    qdrant_url: Annotated[
        str | None, typer.Option("--qdrant-url", help="Serve a Qdrant server's memory instead.")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless --keys).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to bind.")] = 9574,
    keys: Annotated[
        Path | None, typer.Option("--keys", help="API keys file (TOML, see `membrain keys`).")
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
    llm: LlmOption = None,
    max_body: Annotated[
        int | None,
        typer.Option(
            "--max-body",
            min=1,
            help="Largest request body in bytes; larger ones answer 413 "
            "(default MEMBRAIN_MAX_BODY_BYTES, else 4 MiB).",
        ),
    ] = None,
) -> None:
    """Serve the memory over HTTP (the `server` extra): one process owns the store."""
    with failures():
        from membrain.server import serve as run_server

        run_server(
            host=host,
            port=port,
            keys_file=keys,
            log_level=log_level,
            path=path,
            qdrant_url=qdrant_url,
            llm=llm,
            max_body_bytes=max_body,
        )


@app.command("mcp")
def mcp_command(
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    path: PathOption = None,
    qdrant_url: Annotated[
        str | None, typer.Option("--qdrant-url", help="Serve a Qdrant server's memory instead.")
    ] = None,
    transport: Annotated[
        str, typer.Option(help="stdio (what agent hosts launch) or http (streamable HTTP).")
    ] = "stdio",
    host: Annotated[str, typer.Option(help="Address to bind over HTTP (loopback only).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to bind over HTTP.")] = 9575,
    llm: LlmOption = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="Serve a scope of a served memory (`membrain serve`) instead of a store; "
            "its API key is read from MEMBRAIN_API_KEY.",
        ),
    ] = None,
) -> None:
    """Serve one memory scope to an agent host over MCP (the `mcp` extra)."""
    with failures():
        from membrain.server.mcp import run as run_mcp

        if transport not in ("stdio", "http"):
            raise ConfigurationError(f"--transport must be stdio or http, not {transport!r}")
        mode: Literal["stdio", "http"] = "http" if transport == "http" else "stdio"
        run_mcp(
            path=path,
            qdrant_url=qdrant_url,
            llm=llm,
            url=url,
            dataset=dataset,
            task=task,
            session=session,
            transport=mode,
            host=host,
            port=port,
        )


keys_app = typer.Typer(help="API keys of `membrain serve`: each bound to datasets and a role.")
app.add_typer(keys_app, name="keys")


@keys_app.command("add")
def keys_add(
    keys: Annotated[Path, typer.Option("--keys", help="The keys file (created if missing).")],
    dataset: Annotated[
        list[str], typer.Option("--dataset", "-d", help="A dataset the key may use ('*': all).")
    ],
    role: Annotated[str, typer.Option(help="read, write or admin.")] = "read",
    name: Annotated[str | None, typer.Option(help="Who the audit log names for it.")] = None,
) -> None:
    """Create a key and print it once: the file keeps only its hash."""
    with failures():
        from membrain.server import add_key

        say(add_key(keys, dataset, role, name))


@keys_app.command("list")
def keys_list(
    keys: Annotated[Path, typer.Option("--keys", help="The keys file.")],
    as_json: JsonOption = False,
) -> None:
    """List the keys by name, role and datasets (never a key or its hash)."""
    with failures():
        from membrain.server import KeyRing

        grants = KeyRing.load(keys).grants
        for grant in grants:
            datasets = sorted(grant.datasets)
            if as_json:
                row = {"name": grant.name, "role": grant.role.value, "datasets": datasets}
                sys.stdout.write(json.dumps(row) + "\n")
            else:
                say(f"{grant.name}  {grant.role.value}  {', '.join(datasets)}")
        if not grants and not as_json:
            say("(no keys)")


@keys_app.command("revoke")
def keys_revoke(
    name: Annotated[str, typer.Argument(help="The name of the key(s) to remove.")],
    keys: Annotated[Path, typer.Option("--keys", help="The keys file.")],
) -> None:
    """Remove a key: a running server refuses it from its next request."""
    with failures():
        from membrain.server import revoke_key

        removed = revoke_key(keys, name)
        say(f"removed {removed} key{'s' if removed != 1 else ''} named {name!r}")
