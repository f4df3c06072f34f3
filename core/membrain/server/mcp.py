"""An MCP server that gives an agent host one memory scope (the ``mcp`` extra).

One tool per operation of :data:`membrain.api.operations.OPERATIONS` that names one (``mcp``):
``search_memory``, ``add_memory``, ``get_context`` and ``forget_memory``, written for a model
(few arguments, a compact answer); an operation declared with a tool and no such writing gets
one made from its request. The reads are recorded under one run per server (``mcp-`` and an
id) by a memory that traces recalls; ``trace_memory`` lists what that run was told. The scope
is fixed when the server starts (``--dataset --task [--session]``): no tool takes a dataset or
a task, so the model an agent host drives can read and write this memory and no other.

Run it over stdio (what desktop agent hosts launch) or streamable HTTP::

    python -m membrain.server.mcp --path .membrain --dataset sara --task assistant

A :class:`~membrain.api.errors.MembrainError` a tool raises reaches the model as a tool error with
its one-line message, never a traceback; so do arguments that do not fit a tool's input
schema (``limit: Input should be greater than or equal to 1``), never pydantic's report.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from membrain.api.checks import MAX_MESSAGE_CHARS, MAX_QUESTION_CHARS, MAX_REASON_CHARS, is_loopback
from membrain.api.config import MembrainSettings, settings_for
from membrain.api.errors import (
    ConfigurationError,
    InputError,
    MembrainError,
    MissingDependencyError,
)
from membrain.api.indexing import render_fact
from membrain.api.models import MemoryHit, Scope
from membrain.api.operations import OPERATIONS, Operation
from membrain.api.requests import CONTEXT_MIN_RELEVANCE, LOCAL
from membrain.memory import Memory
from membrain.remote import MemoryLike, RemoteMemory
from membrain.remote.protocol import actor_for

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations

__all__ = [
    "AddedMemory",
    "FoundFact",
    "ForgetOutcome",
    "Recalled",
    "build_server",
    "main",
    "run",
]

DEFAULT_PORT = 9575
API_KEY_VARIABLE = "MEMBRAIN_API_KEY"
"""The environment variable holding the API key of a served memory (``--url``)."""
MAX_LIMIT = 50
"""Most facts one ``search_memory`` call returns."""
MAX_ERROR_CHARS = 300
"""A tool error is cut to this length (it may quote the model's arguments)."""
AGENT = "agent:mcp"
"""Who the audit log names for what the server's tools change."""

Transport = Literal["stdio", "http"]

INSTRUCTIONS = """\
Long-term memory of one user, kept across conversations: facts stated in earlier \
conversations, each with when it was said and the message it came from. Search it before \
answering anything that may depend on what the user told you before; add what the user says \
about themselves, their plans and their preferences; forget facts the user asks you to drop."""


class Recalled(BaseModel):
    """One read ``trace_memory`` lists."""

    query: str = Field(description="What was asked.")
    at: str = Field(description="When (ISO 8601, UTC).")
    facts: list[str] = Field(description="The facts given, in order, as sentences.")
    fact_ids: list[str] = Field(description="Their ids, in the same order.")


class FoundFact(BaseModel):
    """A fact ``search_memory`` returns."""

    id: str = Field(description="Fact id; pass it to forget_memory to forget the fact.")
    text: str = Field(description="The fact, as a sentence.")
    stated_at: str = Field(description="When it was said (ISO 8601, UTC).")
    valid_from: str | None = Field(None, description="When it became true, if known.")
    valid_to: str | None = Field(None, description="When it stopped being true, if known.")
    sources: list[str] = Field(description="Ids of the messages the fact was taken from.")
    relevance: float = Field(
        0.0, description="How likely the fact answers the query, 0-1 (never above the one before)."
    )


class AddedMemory(BaseModel):
    """What ``add_memory`` stored and extracted."""

    stored: bool = Field(description="False when the same message was already stored.")
    facts: list[str] = Field(description="The facts extracted from the message.")
    fact_ids: list[str] = Field(description="Their ids, in the same order.")
    pending: str | None = Field(
        None, description="Why extraction did not finish (the message stays stored)."
    )


class ForgetOutcome(BaseModel):
    """What ``forget_memory`` did with one fact."""

    id: str
    status: str = Field(description="'forgotten', or the unchanged status if held for review.")


SEARCH = """\
Search the user's long-term memory for facts that answer a question.

Call it before answering anything that may depend on what the user said in earlier \
conversations: their name, people, pets, plans, preferences, past events. Ask a full question \
("What is the user's cat called?"); relative times ("last summer") are read from now.

Returns the best facts first, each with its id, its text, when it was stated (ISO 8601), when \
it was true if known, and the ids of its source messages. An empty list means nothing is \
known."""

ADD = """\
Store something the user said now in long-term memory, and extract facts from it.

Call it when the user tells you something worth remembering across conversations: facts about \
themselves or people they know, decisions, plans, preferences, corrections of earlier facts. \
Pass the user's statement in their own words (first person is fine: "I adopted a cat named \
Miso."). A newer fact supersedes the one it contradicts; nothing is stored twice.

Returns the facts extracted (text and id); an empty list means nothing durable was found."""

CONTEXT = """\
Get a ready-to-read memory briefing for a question: the relevant facts grouped by the people \
and things they are about, in time order, each citing its source, within a token budget.

Call it once at the start of a task that needs background on the user, instead of several \
searches. Returns plain text (empty of facts when nothing relevant is known)."""

TRACE = """\
What this session was told from long-term memory: each search or briefing, oldest first, with \
the facts it returned in order.

Call it when the user asks what you knew or relied on earlier in this session, or to check \
which memories an answer was based on. It lists only what the memory recorded: nothing when \
the memory does not trace recalls."""

FORGET = """\
Forget facts in long-term memory, by the ids search_memory returned.

Call it when the user asks you to forget something, or a fact is wrong and the user confirms \
it. Forgotten facts are never returned by a search again (they stay in the audit log). Give \
the user's reason when there is one.

Returns each fact's status: 'forgotten', or its unchanged status when a person must review \
the request first."""


def build_server(
    memory: MemoryLike,
    *,
    scope: Scope,
    k: int = 5,
    max_tokens: int = 1500,
    run: str | None = None,
) -> MCPServer[object]:
    """An MCP server whose tools read and write ``scope`` of ``memory``.

    The caller keeps ownership of ``memory`` (it closes it). Tool calls run one at a time.

    Args:
        memory: An open memory: embedded, or a served one (:class:`~membrain.RemoteMemory`,
            whose server records its API key as the author of changes).
        scope: The only scope the tools use; no tool argument can change it.
        k: Facts ``search_memory`` returns unless the model asks for another number.
        max_tokens: Budget of ``get_context`` unless the model asks for another one.
        run: The run the reads serve, which a memory tracing recalls records them under
            (``trace(run)``); default ``mcp-`` and a new id per server (one agent session).

    Raises:
        MissingDependencyError: the ``mcp`` package is not installed.
        ConfigurationError: ``k`` or ``max_tokens`` below 1.
    """
    server_class, tool_error, tool_annotations = _sdk()
    if not 1 <= k <= MAX_LIMIT or max_tokens < 1:
        raise ConfigurationError(f"k must be 1-{MAX_LIMIT} and max_tokens >= 1")
    server = server_class("membrain", instructions=INSTRUCTIONS, log_level="WARNING")
    run_name = run or f"mcp-{uuid.uuid4().hex[:12]}"
    lock = threading.Lock()  # the SDK runs sync tools in worker threads

    @contextmanager
    def calling() -> Iterator[None]:
        with lock:
            try:
                yield
            except MembrainError as exc:
                raise tool_error(_one_line(exc)) from None

    def search_memory(
        query: Annotated[
            str | None,
            Field(max_length=MAX_QUESTION_CHARS, description="What to look for, as a question."),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="How many facts.")] = k,
        question: Annotated[
            str | None,
            Field(max_length=MAX_QUESTION_CHARS, description="Deprecated name of query."),
        ] = None,
        min_relevance: Annotated[
            float | None,
            Field(ge=0, le=1, description="Leave out facts less relevant than this (0-1)."),
        ] = None,
    ) -> list[FoundFact]:
        with calling():
            hits = memory.search(
                _query(query, question),
                scope=scope,
                k=limit,
                min_relevance=min_relevance,
                run=run_name,
            )
        return [_found(hit) for hit in hits]

    def add_memory(
        text: Annotated[
            str,
            Field(max_length=MAX_MESSAGE_CHARS, description="What the user said, in their words."),
        ],
        speaker: Annotated[str, Field(description="The user's name, if known.")] = "User",
        expires_in_seconds: Annotated[
            float | None,
            Field(
                gt=0,
                description="Forget it after this many seconds (a one-time code, a booking); "
                "default: keep it.",
            ),
        ] = None,
    ) -> AddedMemory:
        with calling():
            result = memory.add(
                text,
                scope=scope,
                user_name=speaker,
                by=actor_for(memory, AGENT),
                ttl=expires_in_seconds,
            )
            facts = memory.facts(scope=scope, ids=result.fact_ids, include_inactive=True)
        return AddedMemory(
            stored=result.messages_stored > 0,
            facts=[render_fact(fact.text, {}) for fact in facts],
            fact_ids=[fact.id for fact in facts],
            pending=_one_line(result.errors[0]) if result.errors else None,
        )

    def get_context(
        query: Annotated[
            str | None,
            Field(max_length=MAX_QUESTION_CHARS, description="The task or question to brief for."),
        ] = None,
        max_tokens: Annotated[
            int | None, Field(ge=1, description="Token budget (default the server's).")
        ] = None,
        question: Annotated[
            str | None,
            Field(max_length=MAX_QUESTION_CHARS, description="Deprecated name of query."),
        ] = None,
        min_relevance: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Leave out facts less relevant than this (0-1; default "
                f"{CONTEXT_MIN_RELEVANCE} with the packaged encoder, none with another).",
            ),
        ] = None,
    ) -> str:
        with calling():
            found = memory.context(
                _query(query, question),
                scope=scope,
                max_tokens=max_tokens or budget,
                min_relevance=min_relevance,
                run=run_name,
            )
        return found.text

    def forget_memory(
        fact_ids: Annotated[list[str], Field(min_length=1, description="Ids of the facts.")],
        reason: Annotated[
            str, Field(max_length=MAX_REASON_CHARS, description="Why, in the user's words.")
        ] = "",
    ) -> list[ForgetOutcome]:
        with calling():
            facts = memory.forget(fact_ids, scope=scope, by=actor_for(memory, AGENT), reason=reason)
        return [ForgetOutcome(id=fact.id, status=fact.status.value) for fact in facts]

    def trace_memory(
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="The latest reads.")] = 10,
    ) -> list[Recalled]:
        with calling():
            recalls = memory.trace(run_name, scope=scope)[-limit:]
        return [
            Recalled(
                query=r.query,
                at=r.at.isoformat(),
                facts=[render_fact(f.fact.text, {}) for f in r.facts if f.fact is not None],
                fact_ids=[f.fact_id for f in r.facts if f.fact is not None],
            )
            for r in recalls
        ]

    budget = max_tokens
    read_only = tool_annotations(readOnlyHint=True, openWorldHint=False)
    changes = tool_annotations(readOnlyHint=False, destructiveHint=True)
    # Operations whose tool is written for a model: fewer arguments, a compact answer.
    written: dict[str, tuple[Callable[..., object], str, ToolAnnotations]] = {
        "search": (search_memory, SEARCH, read_only),
        "add": (add_memory, ADD, tool_annotations(readOnlyHint=False, idempotentHint=True)),
        "context": (get_context, CONTEXT, read_only),
        "forget": (forget_memory, FORGET, changes),
        "trace": (trace_memory, TRACE, read_only),
    }
    for op in OPERATIONS:
        if op.mcp is None:
            continue
        fn, description, hints = written.get(op.name) or (
            _tool(op, memory, scope, calling),
            inspect.cleandoc(op.request.__doc__ or op.summary),
            changes if op.mutates else read_only,
        )
        server.add_tool(fn, name=op.mcp, description=description, annotations=hints)
    return server


def _tool(
    op: Operation,
    memory: MemoryLike,
    scope: Scope,
    calling: Callable[[], AbstractContextManager[None]],
) -> Callable[..., object]:
    """The tool of an operation declared with one: its request's fields, the scope bound.

    The model passes every field but the scope (the server's) and the caller's own fields
    (``by``: the server's agent); the answer is the operation's result as JSON data.
    """
    Parameter = inspect.Parameter  # noqa: N806
    taken = [
        Parameter(
            name,
            Parameter.KEYWORD_ONLY,
            default=Parameter.empty if field.is_required() else field.default,
            annotation=Annotated[field.annotation, Field(description=field.description)],
        )
        for name, field in op.request.model_fields.items()
        if name not in (*LOCAL, "scope")
    ]

    def tool(**arguments: Any) -> Any:
        local = {"by": actor_for(memory, AGENT)} if "by" in op.request.model_fields else {}
        bound = {"scope": scope} if "scope" in op.request.model_fields else {}
        with calling():
            request = op.request.of(**arguments, **bound, **local)
            return op.dump_result(memory.execute(request))

    tool.__name__ = op.mcp or op.name
    tool.__signature__ = inspect.Signature(taken, return_annotation=Any)  # type: ignore[attr-defined]
    return tool


def run(
    *,
    path: str | Path | None = None,
    qdrant_url: str | None = None,
    settings: MembrainSettings | None = None,
    url: str | None = None,
    api_key: str | None = None,
    llm: str | None = None,
    dataset: str,
    task: str,
    session: str | None = None,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    dense: object | None = None,
) -> None:
    """Open the memory, serve ``dataset/task[/session]`` over MCP until stopped, then close it.

    Args:
        path: Folder of the embedded store (default ``./.membrain``).
        qdrant_url: Use a Qdrant server instead of the embedded store.
        settings: The memory's settings (default: ``MEMBRAIN_*``: model, encoder, Qdrant
            key...); ``path`` or ``qdrant_url`` override its store.
        url: Serve a served memory's scope instead (``membrain serve``'s URL): the tools call
            it with ``api_key``, so the agent host and your applications share one memory.
        api_key: The key for ``url`` (a key of the scope's dataset, role ``write``); default
            the ``MEMBRAIN_API_KEY`` environment variable, which keeps it out of the host's
            command line.
        llm: The extraction model as ``module:attribute`` (instead of ``MEMBRAIN_LLM``).
        dataset: Whose memory.
        task: Which agent or application.
        session: Optional session within the task.
        transport: ``stdio`` (what agent hosts launch) or ``http`` (streamable HTTP at
            ``http://HOST:PORT/mcp``, loopback only: it asks for no credentials).
        host: Address to bind over HTTP.
        port: Port to bind over HTTP.
        dense: Dense encoder (see :class:`~membrain.Memory`); default the settings' model.

    Raises:
        MissingDependencyError: the ``mcp`` package is not installed.
        ConfigurationError: an unknown transport or a non-loopback host.
        ScopeError: a malformed dataset, task or session.
        StoreInUseError: another process owns the embedded store.
    """
    _sdk()
    if transport not in ("stdio", "http"):
        raise ConfigurationError(f"transport must be 'stdio' or 'http', not {transport!r}")
    if transport == "http" and not is_loopback(host):
        raise ConfigurationError(
            f"refusing to serve MCP on {host!r}: it asks for no credentials; bind to 127.0.0.1"
        )
    scope = Scope(dataset=dataset, task=task, session=session)
    if url is not None and (path, qdrant_url, settings, dense, llm) != (None,) * 5:
        raise ConfigurationError(
            "serve either a store (path, qdrant_url, its settings and model) or a served url"
        )
    memory: Memory | RemoteMemory
    if url is not None:
        memory = RemoteMemory(url, api_key or os.environ.get(API_KEY_VARIABLE) or None)
    else:
        chosen = settings_for(settings, path=path, qdrant_url=qdrant_url, llm=llm)
        memory = Memory.from_settings(chosen, dense=dense)
    with memory:
        server = build_server(memory, scope=scope)
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=port)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m membrain.server.mcp``: serve one scope; a failure is one line on stderr."""
    parser = argparse.ArgumentParser(
        prog="python -m membrain.server.mcp", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--path", help="Folder of the embedded store (default .membrain).")
    parser.add_argument("--qdrant-url", help="Use a Qdrant server instead.")
    parser.add_argument("--dataset", "-d", required=True, help="Whose memory.")
    parser.add_argument("--task", "-t", required=True, help="Which agent or application.")
    parser.add_argument("--session", "-s", help="Optional session within the task.")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="Address to bind over HTTP.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="Port to bind over HTTP.")
    parser.add_argument("--llm", help="Extraction model as module:attribute (or MEMBRAIN_LLM).")
    parser.add_argument("--url", help="A served memory's URL (key in MEMBRAIN_API_KEY).")
    # For tests only: the hashing encoder of membrain.testing instead of the embedding model.
    parser.add_argument("--test-encoder", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    dense: object | None = None
    if args.test_encoder:
        from membrain.testing import HashingEncoder

        dense = HashingEncoder(64)
    try:
        run(
            path=args.path,
            qdrant_url=args.qdrant_url,
            llm=args.llm,
            url=args.url,
            dataset=args.dataset,
            task=args.task,
            session=args.session,
            transport=args.transport,
            host=args.host,
            port=args.port,
            dense=dense,
        )
    except MembrainError as exc:
        parser.exit(1, f"error: {_one_line(exc)}\n")
    except KeyboardInterrupt:
        pass


@functools.cache
def _sdk() -> tuple[type[MCPServer[object]], type[ToolError], type[ToolAnnotations]]:
    """The SDK's server class, tool error and tool annotations, imported on first use."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp.types import ToolAnnotations
    except ImportError:
        raise MissingDependencyError("mcp", "mcp") from None

    class Server(MCPServer[object]):
        """The SDK's server, reporting arguments that fail the input schema in one line."""

        async def call_tool(
            self, name: str, arguments: dict[str, Any], context: Context[object, Any] | None = None
        ) -> CallToolResult | InputRequiredResult:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                bad = exc.__cause__
                raise ToolError(f"Error executing tool {name}: {_invalid(bad)}") from bad

    return Server, ToolError, ToolAnnotations


def _found(hit: MemoryHit) -> FoundFact:
    fact = hit.fact
    return FoundFact(
        id=fact.id,
        text=hit.text,
        stated_at=fact.stated_at.isoformat(),
        valid_from=fact.valid_from.isoformat() if fact.valid_from else None,
        valid_to=fact.valid_to.isoformat() if fact.valid_to else None,
        sources=list(hit.source_ids),
        relevance=hit.relevance,
    )


def _query(query: str | None, question: str | None) -> str:
    """The search text of a tool call: ``query``, or the deprecated ``question``.

    Raises:
        InputError: neither was given, or both with different texts.
    """
    if question is not None:
        warnings.warn(
            "the tool argument 'question' is deprecated; pass 'query'", DeprecationWarning, 2
        )
        if query is not None and query != question:
            raise InputError("give query, or the deprecated question, not both")
    text = query if query is not None else question
    if text is None:
        raise InputError("query is required: what to look for, as a question")
    return text


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return _cut(text.splitlines()[0]) if text else type(exc).__name__


def _invalid(exc: ValidationError) -> str:
    """The arguments a tool refused, as one line: ``where: why`` (never the values given)."""
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
        for error in exc.errors(include_url=False, include_input=False)[:3]
    ]
    more = exc.error_count() - len(problems)
    return _cut(
        "invalid arguments: " + "; ".join(problems) + (f" (and {more} more)" if more else "")
    )


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


if __name__ == "__main__":
    main()
