"""The expiry command: mark the facts past their expiry ``expired`` (``membrain expire``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from membrain.api.models import Scope
from membrain.cli.common import JsonOption, PathOption, app, failures, json_line, open_memory, out

__all__ = ["expire"]


@app.command()
def expire(
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", "-d", help="Whose memory (default: every dataset)."),
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", "-t", help="Which agent or application.")
    ] = None,
    at: Annotated[
        datetime | None, typer.Option(help="The time expiries are compared to (default now).")
    ] = None,
    path: PathOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mark the facts past their expiry as expired (every scope without --dataset)."""
    with failures():
        scope = None
        if dataset is not None:
            scope = Scope(dataset=dataset, task=task) if task else Scope(dataset=dataset)
        with open_memory(path) as memory:
            marked = memory.expire(scope=scope, at=at)
        if as_json:
            json_line({"expired": marked})
        else:
            out.print(f"{len(marked)} facts expired", highlight=False)
