"""``membrain op NAME``: every operation of the table as a command, made from its request.

Each operation of :data:`membrain.api.operations.OPERATIONS` is a command of the ``op`` group
(``search_messages`` is ``membrain op search-messages``). Its arguments are the request's
positional fields, its options the others (a list option is repeated: ``--ids a --ids b``; an
object is JSON text: ``--filters '{"project": "apollo"}'``), and the scope is ``--dataset``,
``--task`` and ``--session``. The request model checks every value, with the same limits and
errors as every other surface; the result is printed as JSON, as a served memory answers it.
An operation declared later (an extension's) is a command as soon as it is declared.

Example::

    membrain op search "Where does Sara live?" -d sara -t assistant --k 3
    membrain op forget 1f0c2a9e -d sara -t assistant --reason "asked to"
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from membrain.api.operations import OPERATIONS, Operation
from membrain.api.requests import OperationRequest
from membrain.api.scope import Scope
from membrain.cli.common import PathOption, failures, open_memory

__all__ = ["command_name", "op_app"]

op_app = typer.Typer(
    help="Run any operation of the memory by its name; the result is printed as JSON.",
    no_args_is_help=True,
)
_SCOPE = {
    "dataset": typer.Option("--dataset", "-d", help="Whose memory (user, persona)."),
    "task": typer.Option("--task", "-t", help="Which agent or application."),
    "session": typer.Option("--session", "-s", help="Optional session within the task."),
}
_NOT_ON_THE_COMMAND_LINE = ("on_progress",)


def command_name(op: Operation) -> str:
    """The command of ``op`` in the ``op`` group."""
    return op.name.replace("_", "-")


def _kind(op: Operation, name: str) -> Any:
    """The type a command-line value of field ``name`` is read as (the request checks it)."""
    annotation = op.request.model_fields[name].annotation
    if op.request.many(name):
        return list[str]
    if annotation is bool:
        return bool
    if annotation is int:
        return int
    if annotation is float or annotation == float | None:  # min_relevance: 0 keeps every hit
        return float
    return str


def _parameters(op: Operation) -> list[inspect.Parameter]:
    Parameter = inspect.Parameter  # noqa: N806
    model = op.request
    found: list[inspect.Parameter] = []
    for name, field in model.model_fields.items():
        if name in _NOT_ON_THE_COMMAND_LINE:
            continue
        if name == "scope":
            required = field.is_required()
            for part, option in _SCOPE.items():
                kind = str if required and part != "session" else str | None
                default = Parameter.empty if kind is str else None
                found.append(
                    Parameter(
                        part,
                        Parameter.KEYWORD_ONLY,
                        default=default,
                        annotation=Annotated[kind, option],
                    )
                )
            continue
        kind = _kind(op, name)
        help = (field.description or "").replace("``", "")
        if name in model.positional:
            marker: Any = typer.Argument(help=help, show_default=False)
        else:
            flag = f"--{name.replace('_', '-')}"
            marker = (
                typer.Option(f"{flag}/--no-{name.replace('_', '-')}", help=help)
                if kind is bool
                else typer.Option(flag, help=help, show_default=False)
            )
        default = (
            Parameter.empty if field.is_required() else (field.default if kind is bool else None)
        )
        shown = kind if default is Parameter.empty or kind is bool else kind | None
        annotation = Annotated[shown, marker]  # type: ignore[valid-type]
        found.append(
            Parameter(name, Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    found.append(Parameter("path", Parameter.KEYWORD_ONLY, default=None, annotation=PathOption))
    positional = [p for p in found if p.name in model.positional]
    positional.sort(key=lambda p: model.positional.index(p.name))
    return [*positional, *(p for p in found if p.name not in model.positional)]


def _request(op: Operation, values: dict[str, Any]) -> OperationRequest:
    scoped = "scope" in op.request.model_fields
    fields = {k: v for k, v in values.items() if v is not None and not (scoped and k in _SCOPE)}
    scope = None
    if scoped and values.get("dataset") is not None:
        scope = Scope(dataset=values["dataset"], task=values["task"], session=values["session"])
    return op.request.from_wire(fields, scope)


def _command(op: Operation) -> Any:
    def run(**values: Any) -> None:
        path: Path | None = values.pop("path", None)
        with failures():
            request = _request(op, values)
            with open_memory(path, create=op.mutates) as memory:
                result = memory.execute(request)
            data = op.dump_result(result)
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")

    run.__name__ = op.name
    run.__doc__ = f"{op.summary}\n\n{inspect.cleandoc(op.request.__doc__ or '')}"
    run.__signature__ = inspect.Signature(_parameters(op))  # type: ignore[attr-defined]
    return run


def _install(op: Operation, declared: bool) -> None:
    name = command_name(op)
    op_app.registered_commands[:] = [c for c in op_app.registered_commands if c.name != name]
    if declared:
        op_app.command(name, help=f"{op.summary}")(_command(op))


OPERATIONS.listen(_install)
