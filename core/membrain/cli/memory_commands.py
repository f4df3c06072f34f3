"""The memory commands: ingest, search and inspect, govern and move a memory."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membrain.api.errors import ConfigurationError, InputError, NotFoundError
from membrain.api.models import Fact, FactStatus, MemoryHit, Message, RetrievalMode, Scope
from membrain.api.recalls import Recall
from membrain.cli.common import (
    DatasetOption,
    JsonOption,
    PathOption,
    SessionOption,
    TaskOption,
    app,
    err,
    failures,
    json_line,
    open_memory,
    out,
    say,
)
from membrain.files import transfer
from membrain.files.loaders import load_conversations
from membrain.memory import Memory
from membrain.remote import RemoteMemory
from membrain.retrieval.context import time_label

__all__ = [
    "audit",
    "demo",
    "export",
    "facts",
    "forget",
    "history",
    "import_",
    "ingest",
    "scopes",
    "search",
    "recalls",
    "show",
    "trace",
]


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )


def _ingest(
    memory: Memory | RemoteMemory, messages: list[Message], scope: Scope, label: str
) -> None:
    with _progress() as progress:
        task = progress.add_task(label, total=len(messages))
        if isinstance(memory, Memory):

            def advance(done: int) -> None:
                progress.advance(task, done)

            result = memory.add(messages, scope=scope, on_progress=advance)
        else:  # a served memory reports no progress
            result = memory.add(messages, scope=scope)
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
        reranked = "" if hit.rerank is None else f", reranker {hit.rerank:+.2f}"
        out.print(
            f"     [dim]{when}  relevance {hit.relevance:.2f}  score {hit.score:.3f}"
            f" ({paths}{reranked})  sources: {sources}[/]",
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
    with failures(), tempfile.TemporaryDirectory(prefix="membrain-demo-") as tmp:
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
    path: PathOption = None,
) -> None:
    """Store a file of messages as evidence and extract facts from it.

    A LoCoMo file holds several conversations: each goes to the dataset DATASET-<sample_id>.
    """
    with failures():
        conversations = load_conversations(file)
        with open_memory(path, create=True) as memory:
            for conversation in conversations:
                name = dataset if conversation.name is None else f"{dataset}-{conversation.name}"
                scope = Scope(dataset=name, task=task, session=session)
                _ingest(memory, conversation.messages, scope, f"dataset {name!r}")
            if isinstance(memory, Memory):  # a server keeps its own indexes
                memory.optimize()


@app.command()
def search(
    question: Annotated[str, typer.Argument(help="What to look for.")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    mode: Annotated[RetrievalMode, typer.Option(help="Retrieval mode.")] = RetrievalMode.EXPAND,
    k: Annotated[int, typer.Option("--k", "-k", help="Number of facts.")] = 5,
    path: PathOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as JSON.")] = False,
    run: Annotated[
        str | None, typer.Option(help="The run this search serves (for the recall trace).")
    ] = None,
) -> None:
    """Search the facts of a dataset and task."""
    with failures():
        scope = Scope(dataset=dataset, task=task, session=session)
        with open_memory(path) as memory:
            hits = memory.search(question, scope=scope, mode=mode, k=k, run=run)
        if as_json:
            sys.stdout.write(json.dumps([h.model_dump(mode="json") for h in hits], indent=2) + "\n")
        else:
            _print_hits(hits.hits)


@app.command()
def facts(
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Include superseded, forgotten and retracted facts.")
    ] = False,
    path: PathOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the facts of a dataset and task (active ones unless --all), oldest first."""
    with failures():
        scope = Scope(dataset=dataset, task=task, session=session)
        with open_memory(path) as memory:
            found = memory.facts(scope=scope, include_inactive=everything)
            if not found and scope.without_session() not in memory.scopes(dataset):
                raise NotFoundError(_unknown_scope(scope, memory.scopes(dataset)))
        for fact in sorted(found, key=lambda f: (f.recorded_at, f.id)):
            if as_json:
                json_line(fact.model_dump(mode="json"))
            else:
                say(
                    f"{fact.id}  {fact.status.value:<10} {fact.trust.value:<9} "
                    f"{time_label(fact)}  {fact.text}"
                )
        if not found and not as_json:
            out.print("  (no facts)")


def _unknown_scope(scope: Scope, known: Sequence[Scope]) -> str:
    tasks = ", ".join(repr(s.task) for s in known)
    if tasks:
        return f"no task {scope.task!r} in dataset {scope.dataset!r} (its tasks: {tasks})"
    return f"no dataset {scope.dataset!r} in this memory (`membrain scopes` lists them)"


def _fact(memory: Memory | RemoteMemory, scope: Scope, fact_id: str) -> Fact:
    found = memory.facts(scope=scope, ids=[fact_id], include_inactive=True)
    if not found:
        raise NotFoundError(f"no fact {fact_id!r} in {scope.key!r}")
    return found[0]


@app.command()
def show(
    fact_id: Annotated[str, typer.Argument(help="The fact id (facts or search --json show it).")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    path: PathOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """One fact with every field, the messages it was extracted from and its entities."""
    with failures():
        scope = Scope(dataset=dataset, task=task, session=session)
        with open_memory(path) as memory:
            fact = _fact(memory, scope, fact_id)
            sources = memory.messages(scope=scope, ids=list(fact.sources)) if fact.sources else []
            named = set(fact.entity_ids)
            entities = [e for e in memory.entities(scope=scope) if e.id in named]
        if as_json:
            json_line(
                {
                    "fact": fact.model_dump(mode="json"),
                    "sources": [m.model_dump(mode="json", exclude={"scope"}) for m in sources],
                    "entities": [
                        {"id": e.id, "name": e.name, "description": e.description} for e in entities
                    ],
                }
            )
            return
        for name, value in fact.model_dump(mode="json", exclude={"scope"}).items():
            if value not in (None, [], ()):
                say(f"{name}: {value}")
        say(f"when: {time_label(fact)}")
        say("sources:" if sources else "sources: (none stored)")
        for m in sources:
            said = f"{m.message.timestamp:%Y-%m-%d %H:%M}"
            say(f"  {m.message.speaker} ({said}, {m.message.source_id or m.id}): {m.message.text}")
        say("entities:" if entities else "entities: (none)")
        for e in entities:
            say(f"  {e.name}: {e.description}" if e.description else f"  {e.name}")


@app.command()
def forget(
    fact_ids: Annotated[list[str], typer.Argument(help="Ids of the facts to forget.")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    reason: Annotated[str, typer.Option(help="Why, for the audit log.")] = "",
    by: Annotated[
        str | None,
        typer.Option(
            help="Who forgets them: api (the default), reviewer:NAME or agent:NAME; a served "
            "memory names the API key instead."
        ),
    ] = None,
    path: PathOption = None,
) -> None:
    """Forget facts: they stay, with their sources, for audit, but no search returns them."""
    with failures():
        scope = Scope(dataset=dataset, task=task, session=session)
        with open_memory(path) as memory:
            changed = memory.forget(fact_ids, scope=scope, by=by, reason=reason)
        for fact in changed:
            state = "forgotten" if fact.status is FactStatus.FORGOTTEN else "queued for review"
            say(f"{state}: {fact.id}  {fact.text}")


@app.command()
def scopes(
    path: PathOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the (dataset, task) scopes of the store."""
    with failures(), open_memory(path) as memory:
        found = memory.scopes()
    for scope in found:
        if as_json:
            json_line({"dataset": scope.dataset, "task": scope.task})
        else:
            sys.stdout.write(f"{scope.dataset}\t{scope.task}\n")


@app.command()
def export(
    dataset: DatasetOption,
    task: TaskOption,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here (default: stdout).")
    ] = None,
    path: PathOption = None,
) -> None:
    """Write every message, entity and fact of a dataset and task as JSON Lines."""
    with failures():
        scope = Scope(dataset=dataset, task=task)
        with open_memory(path) as memory:
            records = transfer.export_scope(memory, scope)
            lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
        if output is None:
            sys.stdout.writelines(lines)
        else:
            try:
                output.write_text("".join(lines), encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot write {output}: {exc.strerror}") from None
        err.print(f"exported {len(lines) - 1} records of {scope.key!r}", highlight=False)


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="A file written by export.")],
    dataset: Annotated[
        str | None, typer.Option("--dataset", "-d", help="Whose memory (default: the export's).")
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", "-t", help="Which agent (default: the export's).")
    ] = None,
    path: PathOption = None,
) -> None:
    """Load an export into an empty dataset and task (another than the export's: a copy).

    Every id is derived for the dataset and task (a copy's are its own; its audit log records
    which exported id each one replaces). Run again after an interruption, it completes the
    import.
    """
    with failures():
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {file}: {exc}") from None
        source = transfer.header_scope(lines)
        scope = Scope(dataset=dataset or source.dataset, task=task or source.task)
        with open_memory(path, create=True) as memory:
            if not isinstance(memory, Memory):
                raise ConfigurationError(
                    "import writes a store directly: run it where the store is (--path), "
                    "or on the server's machine"
                )
            counts = transfer.import_scope(memory, scope, lines)
            memory.optimize()
        say(
            f"imported into {scope.key!r}: {counts['message']} messages, "
            f"{counts['entity']} entities, {counts['fact']} facts, "
            f"{counts['profile']} profile versions"
        )


@app.command()
def profile(
    dataset: DatasetOption,
    task: TaskOption,
    path: PathOption = None,
    as_json: JsonOption = False,
) -> None:
    """The user profile: its current entries, preferred topics first (stale ones marked)."""
    with failures():
        scope = Scope(dataset=dataset, task=task)
        with open_memory(path) as memory:
            entries = memory.profile(scope=scope)
        for entry in entries:
            if as_json:
                json_line(entry.model_dump(mode="json"))
            else:
                cited = ", ".join(i[:8] for i in entry.fact_ids)
                mark = " (stale)" if entry.stale else ""
                say(
                    f"{entry.topic}/{entry.subtopic} v{entry.version}{mark}: {entry.text} [{cited}]"
                )
        if not entries and not as_json:
            out.print("  (no profile)")


@app.command()
def history(
    fact_id: Annotated[str, typer.Argument(help="The fact id (search shows it with --json).")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    path: PathOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the history as JSON.")] = False,
) -> None:
    """Why the memory believes a fact: what it replaced, what replaced it, who changed it."""
    with failures():
        scope = Scope(dataset=dataset, task=task, session=session)
        with open_memory(path) as memory:
            found = memory.history(fact_id, scope=scope)
        if not found.facts and not found.events:
            raise NotFoundError(f"no fact {fact_id!r} and no event about it in {scope.key!r}")
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
    path: PathOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
) -> None:
    """The audit log of a dataset and task, oldest first: every change, who made it and why."""
    with failures():
        scope = Scope(dataset=dataset, task=task, session=session)
        with open_memory(path) as memory:
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


def _print_recalls(recalls: Sequence[Recall], as_json: bool, *, about: str | None = None) -> None:
    for recall in recalls:
        if as_json:
            sys.stdout.write(recall.model_dump_json() + "\n")
            continue
        run = f" run {recall.run}" if recall.run else ""
        out.print(
            f"{recall.at:%Y-%m-%dT%H:%M:%SZ} {recall.operation}{run}: {recall.query}",
            highlight=False,
            soft_wrap=True,
        )
        for given in recall.facts:
            if about is not None and not given.fact_id.startswith(about):
                continue
            text = given.fact.text if given.fact is not None else "(no longer stored)"
            cites = ", ".join(m.source_id or "?" for m in given.sources) or "no kept source"
            out.print(
                f"  {given.rank}. [{given.relevance:.2f}] {text}  ({given.fact_id[:8]}; {cites})",
                highlight=False,
                soft_wrap=True,
            )
    if not recalls and not as_json:
        out.print("  (no recalls)")


@app.command()
def trace(
    run: Annotated[str, typer.Argument(help="The run (a thread id, a run id) the reads served.")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    path: PathOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print recalls as JSON lines.")] = False,
) -> None:
    """What a run was told: each read's facts in the order given, with their sources."""
    with failures():
        scope = Scope(dataset=dataset, task=task, session=session)
        with open_memory(path) as memory:
            found = memory.trace(run, scope=scope)
        _print_recalls(found, as_json)


@app.command()
def recalls(
    fact_id: Annotated[str, typer.Argument(help="The fact id or a unique prefix.")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    path: PathOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print recalls as JSON lines.")] = False,
) -> None:
    """Which runs were given a fact, when, and at which rank."""
    with failures():
        scope = Scope(dataset=dataset, task=task, session=session)
        with open_memory(path) as memory:
            found = memory.recalls(fact_id, scope=scope)
        _print_recalls(found, as_json, about=fact_id.strip().lower())
