"""What the server refuses before the memory sees it: large bodies, long texts, foreign hosts."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from membrain import InputError, Memory, Scope
from membrain.api.checks import MAX_MESSAGE_CHARS, MAX_QUESTION_CHARS, MAX_REASON_CHARS
from membrain.api.config import DEFAULT_MAX_BODY_BYTES, MembrainSettings
from membrain.api.errors import ConfigurationError
from membrain.background import BackgroundWriter
from membrain.remote import RemoteMemory
from membrain.server import KeyRing, create_app, serve_in_thread
from membrain.testing import HashingEncoder

SARA = {"dataset": "sara", "task": "assistant"}
LIMIT = 1000


def unopened(**options: Any) -> FastAPI:
    """The app over a memory never opened: enough for requests refused before a route runs."""
    return create_app(Memory.__new__(Memory), keys=None, **options)


async def asgi(
    app: FastAPI, method: str, path: str, headers: list[tuple[bytes, bytes]], chunks: list[bytes]
) -> tuple[int, dict[str, Any], int]:
    """One request to ``app`` in-process: (status, JSON body, body chunks the app read)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 9574),
    }
    read = 0
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        if read > len(chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunks[read - 1], "more_body": read < len(chunks)}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, httpx.Response(status, content=body).json(), read


async def asgi_post(
    app: FastAPI, chunks: list[bytes], *, length: int | None
) -> tuple[int, dict[str, Any], int]:
    """POST ``chunks`` to ``/api/memory/search`` (``length``: its Content-Length, if any)."""
    headers = [(b"host", b"localhost"), (b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return await asgi(app, "POST", "/api/memory/search", headers, chunks)


async def asgi_get(app: FastAPI, host: bytes | None) -> tuple[int, dict[str, Any]]:
    """GET ``/api/health`` with this ``Host`` header (``None``: none)."""
    status, body, _ = await asgi(app, "GET", "/api/health", [(b"host", host)] if host else [], [])
    return status, body


def refused_as_too_large(status: int, body: dict[str, Any]) -> None:
    assert status == 413
    assert body["type"] == "RequestTooLarge" and f"{LIMIT:,} bytes" in body["error"]


# -- the request body limit ----------------------------------------------------------------------
async def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    status, body, read = await asgi_post(unopened(max_body_bytes=LIMIT), [b"x"], length=LIMIT + 1)
    refused_as_too_large(status, body)
    assert read == 0


async def test_a_streamed_body_is_refused_at_the_first_chunk_past_the_limit() -> None:
    chunks = [b"[" * 100] * 1000  # 100 kB of unknown length
    status, body, read = await asgi_post(unopened(max_body_bytes=LIMIT), chunks, length=None)
    refused_as_too_large(status, body)
    assert read == LIMIT // 100 + 1


async def test_a_body_at_the_limit_is_read() -> None:
    content = b'{"dataset": "sara", "task": "assistant", "k": 0}'
    padded = content[:-1] + b" " * (LIMIT - len(content)) + b"}"
    status, body, _ = await asgi_post(unopened(max_body_bytes=LIMIT), [padded], length=LIMIT)
    assert status == 422 and body["type"] == "InputError"  # read, then found invalid


def test_a_bad_limit_is_a_configuration_error() -> None:
    for bad in (0, -1, True, "4MiB", 1.5):
        with pytest.raises(ConfigurationError, match="largest request body"):
            unopened(max_body_bytes=bad)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with Memory(tmp_path_factory.mktemp("limits") / "store", dense=HashingEncoder(64)) as opened:
        yield opened


@pytest.fixture(scope="module")
def small(memory: Memory) -> Iterator[str]:
    """A keyless server on loopback that reads bodies of at most ``LIMIT`` bytes."""
    with serve_in_thread(create_app(memory, keys=None, max_body_bytes=LIMIT)) as url:
        yield url


@pytest.fixture(scope="module")
def roomy(memory: Memory) -> Iterator[httpx.Client]:
    """A client of a keyless server with the default body limit."""
    with (
        serve_in_thread(create_app(memory, keys=None)) as url,
        httpx.Client(base_url=url, timeout=60.0) as client,
    ):
        yield client


def test_over_a_socket_both_kinds_of_large_body_are_413(small: str) -> None:
    big = b'{"dataset": "sara", "task": "assistant", "question": "' + b"x" * 5000 + b'"}'

    def streamed() -> Iterator[bytes]:
        for start in range(0, len(big), 100):
            yield big[start : start + 100]

    with httpx.Client(base_url=small) as client:
        declared = client.post("/api/memory/search", content=big)
        chunked = client.post("/api/memory/search", content=streamed())
        after = client.post("/api/memory/search", json={**SARA, "question": "cat?"})
    for response in (declared, chunked):
        refused_as_too_large(response.status_code, response.json())
    assert after.status_code == 200, after.text  # the server goes on serving


def test_the_remote_client_reads_a_413_as_an_input_error(small: str) -> None:
    message = {"speaker": "Sara", "text": "I adopted a cat.", "timestamp": "2024-03-15T14:01Z"}
    with RemoteMemory(small) as remote, pytest.raises(InputError, match="larger than 1,000"):
        remote.add([message] * 50, scope=Scope(**SARA))


async def test_the_default_limit_is_4_mib() -> None:
    app = unopened()
    over = DEFAULT_MAX_BODY_BYTES + 1
    status, body, read = await asgi_post(app, [b"x"], length=over)
    assert (status, body["type"], read) == (413, "RequestTooLarge", 0)
    assert DEFAULT_MAX_BODY_BYTES == 4 * 1024 * 1024 == MembrainSettings().max_body_bytes


def test_serve_takes_the_limit_from_the_settings_or_its_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from membrain.server import run

    class Stop(Exception):
        pass

    class Opened:
        def close(self) -> None:
            pass

    limits: list[int] = []

    def recording(memory: object, **options: Any) -> FastAPI:
        limits.append(options["max_body_bytes"])
        raise Stop

    monkeypatch.setattr(run, "create_app", recording)
    monkeypatch.setattr(run, "extensions", lambda memory: [])
    monkeypatch.setattr(Memory, "from_settings", lambda settings: Opened())
    monkeypatch.setattr(BackgroundWriter, "from_settings", lambda memory, settings=None: None)
    monkeypatch.setenv("MEMBRAIN_MAX_BODY_BYTES", "2048")
    with pytest.raises(Stop):
        run.serve(path=tmp_path / "a", port=0)
    with pytest.raises(Stop):
        run.serve(path=tmp_path / "b", port=0, max_body_bytes=512)
    with pytest.raises(ConfigurationError, match="largest request body"):
        run.serve(path=tmp_path / "c", port=0, max_body_bytes=0)
    assert limits == [2048, 512]


def test_membrain_serve_has_a_max_body_option(monkeypatch: pytest.MonkeyPatch) -> None:
    import membrain.server
    from membrain.cli import app

    given: list[dict[str, Any]] = []
    monkeypatch.setattr(membrain.server, "serve", lambda **options: given.append(options))
    runner = CliRunner()
    assert runner.invoke(app, ["serve", "--max-body", "65536"]).exit_code == 0
    assert runner.invoke(app, ["serve"]).exit_code == 0
    assert runner.invoke(app, ["serve", "--max-body", "0"]).exit_code == 2
    assert [options["max_body_bytes"] for options in given] == [65536, None]


# -- length limits ---------------------------------------------------------------------------
def one_line_422(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "type"} and "\n" not in body["error"]
    return body


@pytest.mark.parametrize("path", ["/search", "/context", "/messages/search"])
def test_a_question_longer_than_the_limit_is_a_422(roomy: httpx.Client, path: str) -> None:
    longest = {**SARA, "question": "x" * MAX_QUESTION_CHARS}
    longer = {**SARA, "question": "x" * (MAX_QUESTION_CHARS + 1)}
    assert roomy.post(f"/api/memory{path}", json=longest).status_code == 200
    body = one_line_422(roomy.post(f"/api/memory{path}", json=longer))
    assert body["type"] == "InputError" and "8,000" in body["error"]


@pytest.mark.parametrize(
    "message",
    [
        {"speaker": "Sara", "text": "x" * (MAX_MESSAGE_CHARS + 1), "timestamp": "2024-03-15"},
        {"speaker": "Sara", "text": "hi", "caption": "x" * (MAX_MESSAGE_CHARS + 1), "timestamp": 0},
        {"role": "user", "content": "x" * (MAX_MESSAGE_CHARS + 1)},
    ],
    ids=["text", "caption", "chat content"],
)
def test_a_message_longer_than_the_limit_is_a_422(
    roomy: httpx.Client, message: dict[str, Any]
) -> None:
    scope = {"dataset": "sara", "task": "long-messages"}
    response = roomy.post("/api/memory/add", json={**scope, "messages": [message]})
    assert "100,000" in one_line_422(response)["error"]
    assert roomy.get("/api/memory/messages", params=scope).json() == []


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ("/forget", {"fact_ids": ["f"], "reason": "r"}),
        ("/supersede", {"old_fact_id": "f", "new_fact_ids": ["g"], "reason": "r"}),
        ("/dispute", {"fact_ids": ["f"], "reason": "r"}),
        ("/purge", {"fact_ids": ["f"], "reason": "r"}),
        ("/review/resolve", {"item_id": "i", "note": "r"}),
    ],
)
def test_a_reason_or_note_longer_than_the_limit_is_a_422(
    roomy: httpx.Client, path: str, fields: dict[str, Any]
) -> None:
    named = "note" if "note" in fields else "reason"
    longer = {**SARA, **fields, named: "x" * (MAX_REASON_CHARS + 1)}
    body = one_line_422(roomy.post(f"/api/memory{path}", json=longer))
    assert body["type"] == "InputError" and named in body["error"]
    assert "2,000" in body["error"]


# -- MCP tool errors -----------------------------------------------------------------------------
MCP_BAD: list[tuple[str, dict[str, Any], str]] = [
    ("search_memory", {"question": "cat?", "limit": 0}, "limit"),
    ("search_memory", {"question": 5, "limit": "many"}, "question"),
    ("search_memory", {}, "question"),
    ("search_memory", {"question": "x" * (MAX_QUESTION_CHARS + 1)}, "8000"),
    ("get_context", {"question": "cat?", "max_tokens": -1}, "max_tokens"),
    ("forget_memory", {"fact_ids": []}, "fact_ids"),
    ("forget_memory", {"fact_ids": "abc", "reason": {"a": 1}}, "fact_ids"),
    ("forget_memory", {"fact_ids": ["f"], "reason": "x" * (MAX_REASON_CHARS + 1)}, "reason"),
    ("add_memory", {"text": "x" * (MAX_MESSAGE_CHARS + 1)}, "text"),
    ("add_memory", {"text": "I adopted a cat.\ud800"}, "text"),
    ("add_memory", {"text": "   "}, "neither text nor caption"),
]


async def test_mcp_tool_errors_are_one_readable_line(memory: Memory) -> None:
    from mcp import Client

    from membrain.server.mcp import build_server

    server = build_server(memory, scope=Scope(dataset="sara", task="mcp-errors"))
    async with Client(server) as client:
        for tool, arguments, named in MCP_BAD:
            result = await client.call_tool(tool, arguments)
            text = " ".join(getattr(part, "text", "") for part in result.content)
            assert result.is_error, (tool, arguments)
            assert named in text and "\n" not in text and len(text) <= 300, text
            for leak in ("input_value", "pydantic.dev", "Traceback", "{'a'", "\\ud800", "xxxxx"):
                assert leak not in text, text


# -- a keyless server answers only loopback host names -------------------------------------------
@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST:9574", True),
        ("127.0.0.1", True),
        ("127.0.0.1:9574", True),
        ("127.0.0.2:80", True),
        ("[::1]", True),
        ("[::1]:9574", True),
        (None, False),
        ("", False),
        ("attacker.example", False),
        ("attacker.example:9574", False),
        ("localhost.attacker.example", False),
        ("127.0.0.1.nip.io:9574", False),
        ("localhost:port", False),
        ("127.0.0.1:", False),
        ("::1", False),
        ("[::1", False),
        ("[::1]x", False),
        ("[127.0.0.1]", False),
        ("10.0.0.1:9574", False),
        ("0.0.0.0:9574", False),
    ],
)
def test_loopback_host_names(host: str | None, loopback: bool) -> None:
    from membrain.server.app import is_loopback_host

    assert is_loopback_host(host.encode() if host is not None else None) is loopback


async def test_a_keyless_server_refuses_another_host_name() -> None:
    keyless = unopened()
    for host in (b"attacker.example", b"attacker.example:9574", None):
        status, body = await asgi_get(keyless, host)
        assert (status, body["type"]) == (403, "Forbidden")
        assert "without API keys" in body["error"] and "\n" not in body["error"]
    for host in (b"localhost:9574", b"127.0.0.1", b"[::1]:9574"):
        assert (await asgi_get(keyless, host))[0] == 200


async def test_a_server_with_keys_answers_any_host_name() -> None:
    keyed = create_app(Memory.__new__(Memory), keys=KeyRing())
    for host in (b"attacker.example", b"memory.example.org:443", b"localhost"):
        assert (await asgi_get(keyed, host))[0] == 200


def test_over_a_socket_a_rebound_name_is_refused(small: str) -> None:
    port = small.rsplit(":", 1)[1]
    body = {**SARA, "question": "cat?"}
    with httpx.Client(base_url=small) as client:
        rebound = client.post(
            "/api/memory/search", json=body, headers={"Host": f"attacker.example:{port}"}
        )
        named = client.post("/api/memory/search", json=body, headers={"Host": f"localhost:{port}"})
    assert rebound.status_code == 403 and rebound.json()["type"] == "Forbidden"
    assert named.status_code == 200, named.text
