"""The ``membrain`` command: ``demo``, ``ingest``, ``search``, ``history`` and ``audit``.

Errors MemBrain raises on purpose are printed as one line naming the problem, with exit code 1.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membrain.errors import MembrainError
from membrain.loaders import load_conversations
from membrain.memory import Memory
from membrain.models import MemoryHit, Message, RetrievalMode, Scope
from membrain.retrieval.context import time_label

__all__ = ["app", "main"]

app = typer.Typer(
    help="MemBrain: accountable long-term memory for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

PathOption = Annotated[
    Path, typer.Option("--path", help="Folder of the embedded store.", show_default=True)
]
DatasetOption = Annotated[
    str, typer.Option("--dataset", "-d", help="Whose memory (user, persona).")
]
TaskOption = Annotated[str, typer.Option("--task", "-t", help="Which agent or application.")]
SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Optional session within the task.")
]


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except MembrainError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )


def _ingest(memory: Memory, messages: list[Message], scope: Scope, label: str) -> None:
    with _progress() as progress:
        task = progress.add_task(label, total=len(messages))
        result = memory.add(messages, scope=scope, on_progress=lambda n: progress.advance(task, n))
        progress.update(task, completed=len(messages))
    out.print(
        f"{label}: {result.messages_stored} messages stored, {result.messages_skipped} already "
        f"known, {len(result.fact_ids)} facts, {len(result.entity_ids)} entities touched, "
        f"{result.discarded} sentences discarded as filler",
        highlight=False,
    )
    for error in result.errors:
        err.print(
            f"[yellow]pending:[/] {len(error.message_ids)} messages: {error}", highlight=False
        )


def _print_hits(hits: Sequence[MemoryHit]) -> None:
    if not hits:
        out.print("  (no facts found)")
    for rank, hit in enumerate(hits, 1):
        out.print(f"  {rank}. {hit.text}", highlight=False, soft_wrap=True)
        sources = ", ".join(
            f"{m.source_id or m.id} ({m.speaker}, {m.timestamp:%Y-%m-%d %H:%M})"
            for m in hit.sources
        )
        paths = " ".join(f"{name}#{position}" for name, position in hit.paths.items())
        when = time_label(hit.fact)
        out.print(
            f"     [dim]{when}  score {hit.score:.3f} ({paths})  sources: {sources}[/]",
            highlight=False,
            soft_wrap=True,
        )


@app.command()
def demo(
    path: Annotated[
        Path | None, typer.Option("--path", help="Keep the demo store here (default: temporary).")
    ] = None,
) -> None:
    """Ingest a bundled sample conversation and answer a few questions, offline."""
    sample = files("membrain") / "data" / "sample_conversation.json"
    questions: list[str] = json.loads(sample.read_text(encoding="utf-8"))["questions"]
    with _errors(), tempfile.TemporaryDirectory(prefix="membrain-demo-") as tmp:
        conversation = load_conversations(Path(str(sample)))[0]
        scope = Scope(dataset="sara-and-nate", task="demo")
        with Memory(path=path or Path(tmp) / "store") as memory:
            _ingest(memory, conversation.messages, scope, "sample conversation")
            for question in questions:
                out.print(f"\n[bold]Q: {question}[/]", highlight=False)
                _print_hits(memory.search(question, scope=scope, k=3).hits)


@app.command()
def ingest(
    file: Annotated[Path, typer.Argument(help="JSON, JSON Lines or LoCoMo file of messages.")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    path: PathOption = Path(".membrain"),
) -> None:
    """Store a file of messages as evidence and extract facts from it.

    A LoCoMo file holds several conversations: each goes to the dataset ``DATASET-<sample_id>``.
    """
    with _errors():
        conversations = load_conversations(file)
        with Memory(path=path) as memory:
            for conversation in conversations:
                name = dataset if conversation.name is None else f"{dataset}-{conversation.name}"
                scope = Scope(dataset=name, task=task, session=session)
                _ingest(memory, conversation.messages, scope, f"dataset {name!r}")
            memory.optimize()


@app.command()
def search(
    question: Annotated[str, typer.Argument(help="What to look for.")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    mode: Annotated[RetrievalMode, typer.Option(help="Retrieval mode.")] = RetrievalMode.FAST,
    k: Annotated[int, typer.Option("--k", "-k", help="Number of facts.")] = 5,
    path: PathOption = Path(".membrain"),
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as JSON.")] = False,
) -> None:
    """Search the facts of a dataset and task."""
    with _errors():
        if not path.exists():
            raise MembrainError(f"no store at {path}; ingest something first or pass --path")
        scope = Scope(dataset=dataset, task=task, session=session)
        with Memory(path=path) as memory:
            hits = memory.search(question, scope=scope, mode=mode, k=k)
        if as_json:
            sys.stdout.write(json.dumps([h.model_dump(mode="json") for h in hits], indent=2) + "\n")
        else:
            _print_hits(hits.hits)


def _open_store(path: Path) -> Memory:
    if not path.exists():
        raise MembrainError(f"no store at {path}; ingest something first or pass --path")
    return Memory(path=path)


@app.command()
def history(
    fact_id: Annotated[str, typer.Argument(help="The fact id (search shows it with --json).")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    path: PathOption = Path(".membrain"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the history as JSON.")] = False,
) -> None:
    """Why the memory believes a fact: what it replaced, what replaced it, who changed it."""
    with _errors():
        scope = Scope(dataset=dataset, task=task, session=session)
        with _open_store(path) as memory:
            found = memory.history(fact_id, scope=scope)
        if not found.facts and not found.events:
            raise MembrainError(f"no fact {fact_id!r} and no event about it in {scope.key!r}")
        if as_json:
            sys.stdout.write(found.model_dump_json(indent=2) + "\n")
        else:
            out.print(found.text(), highlight=False, soft_wrap=True)


@app.command()
def audit(
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    since: Annotated[
        datetime | None, typer.Option(help="Only events from this time on (ISO 8601, UTC).")
    ] = None,
    action: Annotated[
        list[str] | None, typer.Option("--action", "-a", help="Only these actions (repeatable).")
    ] = None,
    path: PathOption = Path(".membrain"),
    as_json: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
) -> None:
    """The audit log of a dataset and task, oldest first: every change, who made it and why."""
    with _errors():
        scope = Scope(dataset=dataset, task=task, session=session)
        with _open_store(path) as memory:
            events = memory.audit(scope=scope, since=since, actions=action)
        for event in events:
            if as_json:
                sys.stdout.write(event.model_dump_json() + "\n")
                continue
            why = f" ({event.reason})" if event.reason else ""
            out.print(
                f"{event.at:%Y-%m-%dT%H:%M:%SZ} {event.action.value} {', '.join(event.targets)} "
                f"by {event.actor}{why}",
                highlight=False,
                soft_wrap=True,
            )
        if not events and not as_json:
            out.print("  (no events)")


def main() -> None:
    """Entry point of the ``membrain`` script."""
    app()
