"""The ``membrain`` command: ingest, search and inspect, govern and move a memory.

Every command opens the memory from ``MembrainSettings`` (``MEMBRAIN_*`` environment
variables), with ``--path`` overriding ``MEMBRAIN_PATH``. Errors MemBrain raises on purpose are
printed as one line naming the problem, with exit code 1.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membrain import transfer
from membrain.config import MembrainSettings, settings_for
from membrain.errors import ConfigurationError, InputError, MembrainError, NotFoundError
from membrain.loaders import load_conversations
from membrain.memory import Memory
from membrain.models import Fact, FactStatus, MemoryHit, Message, RetrievalMode, Scope
from membrain.retrieval.context import time_label
from membrain.storage.base import Collection
from membrain.storage.edge import holds_store

__all__ = ["app", "main"]

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


_debug = {"on": False}
"""``--debug``: print the traceback of a failure too."""


def _fail(exc: Exception) -> typer.Exit:
    """Print ``exc`` as one line; the exit to raise (1: refused on purpose, 2: unexpected)."""
    if _debug["on"]:
        err.print_exception(show_locals=False)
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, MembrainError):
        code = 1
    else:
        first, code = f"unexpected {type(exc).__name__}: {first}", 2
        if not _debug["on"]:
            first += " (run again with --debug for the traceback)"
    err.print(f"[bold red]error:[/] {escape(first)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise _fail(exc) from None


def _settings(path: Path | None) -> MembrainSettings:
    return settings_for(path=path)


def _open(path: Path | None, *, create: bool = False) -> Memory:
    """The memory the settings name: ``--path`` when given, else ``MEMBRAIN_*``."""
    settings = _settings(path)
    if not create and settings.qdrant_url is None and not holds_store(settings.path):
        raise InputError(f"no store at {settings.path}; ingest something first or pass --path")
    return Memory.from_settings(settings)


def _say(text: str) -> None:
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def _json_line(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")


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
) -> None:
    """Options that apply before any command."""
    _debug["on"] = debug


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
    path: PathOption = None,
) -> None:
    """Store a file of messages as evidence and extract facts from it.

    A LoCoMo file holds several conversations: each goes to the dataset DATASET-<sample_id>.
    """
    with _errors():
        conversations = load_conversations(file)
        with _open(path, create=True) as memory:
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
    mode: Annotated[RetrievalMode, typer.Option(help="Retrieval mode.")] = RetrievalMode.EXPAND,
    k: Annotated[int, typer.Option("--k", "-k", help="Number of facts.")] = 5,
    path: PathOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as JSON.")] = False,
) -> None:
    """Search the facts of a dataset and task."""
    with _errors():
        scope = Scope(dataset=dataset, task=task, session=session)
        with _open(path) as memory:
            hits = memory.search(question, scope=scope, mode=mode, k=k)
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
    with _errors():
        scope = Scope(dataset=dataset, task=task, session=session)
        with _open(path) as memory:
            found = memory.facts(scope=scope, include_inactive=everything)
        for fact in sorted(found, key=lambda f: (f.recorded_at, f.id)):
            if as_json:
                _json_line(fact.model_dump(mode="json"))
            else:
                _say(
                    f"{fact.id}  {fact.status.value:<10} {fact.trust.value:<9} "
                    f"{time_label(fact)}  {fact.text}"
                )
        if not found and not as_json:
            out.print("  (no facts)")


def _fact(memory: Memory, scope: Scope, fact_id: str) -> Fact:
    found = memory.store.get_facts(scope, [fact_id])
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
    with _errors():
        scope = Scope(dataset=dataset, task=task, session=session)
        with _open(path) as memory:
            fact = _fact(memory, scope, fact_id)
            sources = memory.store.get_messages(scope, fact.sources)
            entities = memory.store.get_entities(scope.without_session(), fact.entity_ids)
        if as_json:
            _json_line(
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
                _say(f"{name}: {value}")
        _say(f"when: {time_label(fact)}")
        _say("sources:" if sources else "sources: (none stored)")
        for m in sources:
            said = f"{m.message.timestamp:%Y-%m-%d %H:%M}"
            _say(f"  {m.message.speaker} ({said}, {m.message.source_id or m.id}): {m.message.text}")
        _say("entities:" if entities else "entities: (none)")
        for e in entities:
            _say(f"  {e.name}: {e.description}" if e.description else f"  {e.name}")


@app.command()
def forget(
    fact_ids: Annotated[list[str], typer.Argument(help="Ids of the facts to forget.")],
    dataset: DatasetOption,
    task: TaskOption,
    session: SessionOption = None,
    reason: Annotated[str, typer.Option(help="Why, for the audit log.")] = "",
    by: Annotated[
        str, typer.Option(help="Who forgets them: api, reviewer:NAME or agent:NAME.")
    ] = "api",
    path: PathOption = None,
) -> None:
    """Forget facts: they stay, with their sources, for audit, but no search returns them."""
    with _errors():
        scope = Scope(dataset=dataset, task=task, session=session)
        with _open(path) as memory:
            changed = memory.forget(fact_ids, scope=scope, by=by, reason=reason)
        for fact in changed:
            state = "forgotten" if fact.status is FactStatus.FORGOTTEN else "queued for review"
            _say(f"{state}: {fact.id}  {fact.text}")


@app.command()
def scopes(
    path: PathOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the (dataset, task) scopes of the store."""
    with _errors(), _open(path) as memory:
        backend = memory.store.backend
        found = {
            (s.dataset, s.task)
            for collection in (Collection.MESSAGES, Collection.FACTS)
            for s in backend.tenants(collection)
            if not s.is_bookkeeping
        }
    for dataset, task in sorted(found):
        if as_json:
            _json_line({"dataset": dataset, "task": task})
        else:
            sys.stdout.write(f"{dataset}\t{task}\n")


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
    with _errors():
        scope = Scope(dataset=dataset, task=task)
        with _open(path) as memory:
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
    """Load an export into an empty dataset and task of this store (a move between stores)."""
    with _errors():
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {file}: {exc}") from None
        source = transfer.header_scope(lines)
        scope = Scope(dataset=dataset or source.dataset, task=task or source.task)
        with _open(path, create=True) as memory:
            counts = transfer.import_scope(memory, scope, lines)
            memory.optimize()
        _say(
            f"imported into {scope.key!r}: {counts['message']} messages, "
            f"{counts['entity']} entities, {counts['fact']} facts"
        )


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
    with _errors():
        scope = Scope(dataset=dataset, task=task, session=session)
        with _open(path) as memory:
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
    with _errors():
        scope = Scope(dataset=dataset, task=task, session=session)
        with _open(path) as memory:
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
) -> None:
    """Serve the memory over HTTP (the `server` extra): one process owns the store."""
    with _errors():
        from membrain.server import serve as run_server

        run_server(
            host=host,
            port=port,
            keys_file=keys,
            log_level=log_level,
            settings=_served_settings(path, qdrant_url, llm),
        )


def _served_settings(
    path: Path | None, qdrant_url: str | None, llm: str | None
) -> MembrainSettings:
    """``MEMBRAIN_*`` with the command's ``--path`` or ``--qdrant-url`` and ``--llm``."""
    if qdrant_url is not None:
        settings = settings_for(qdrant_url=qdrant_url)
    else:
        settings = settings_for(path=path)
    return settings.model_copy(update={"llm": llm}) if llm else settings


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
    with _errors():
        from membrain.mcp_server import run as run_mcp

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
    with _errors():
        from membrain.server import add_key

        _say(add_key(keys, dataset, role, name))


@keys_app.command("list")
def keys_list(
    keys: Annotated[Path, typer.Option("--keys", help="The keys file.")],
    as_json: JsonOption = False,
) -> None:
    """List the keys by name, role and datasets (never a key or its hash)."""
    with _errors():
        from membrain.server import KeyRing

        grants = KeyRing.load(keys).grants
        for grant in grants:
            datasets = sorted(grant.datasets)
            if as_json:
                row = {"name": grant.name, "role": grant.role.value, "datasets": datasets}
                sys.stdout.write(json.dumps(row) + "\n")
            else:
                _say(f"{grant.name}  {grant.role.value}  {', '.join(datasets)}")
        if not grants and not as_json:
            _say("(no keys)")


@keys_app.command("revoke")
def keys_revoke(
    name: Annotated[str, typer.Argument(help="The name of the key(s) to remove.")],
    keys: Annotated[Path, typer.Option("--keys", help="The keys file.")],
) -> None:
    """Remove a key: a running server refuses it from its next request."""
    with _errors():
        from membrain.server import revoke_key

        removed = revoke_key(keys, name)
        _say(f"removed {removed} key{'s' if removed != 1 else ''} named {name!r}")


def main() -> None:
    """Entry point of the membrain script: a failure is one line on stderr, never a traceback.

    ``membrain --debug COMMAND`` prints the traceback as well.
    """
    try:
        app()
    except Exception as exc:  # what no command caught: still one line
        sys.exit(_fail(exc).exit_code)


if __name__ == "__main__":
    main()
