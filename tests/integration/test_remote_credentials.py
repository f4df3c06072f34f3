"""A user and password in a server URL are sent as basic auth and never shown."""

from __future__ import annotations

import base64
import logging

import httpx
import pytest
from typer.testing import CliRunner

import membrain.cli as cli
from langchain_membrain.langgraph.remote_store import RemoteMembrainStore
from membrain import AsyncRemoteMemory, BackendError, ConfigurationError, RemoteMemory, Scope

SECRET = "s3cr3t-pw"
URL = f"http://ana:{SECRET}@127.0.0.1:1"
SARA = Scope(dataset="sara", task="assistant")


def failing(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500, text="the server broke")

    return httpx.MockTransport(handler)


def basic(request: httpx.Request) -> str:
    return base64.b64decode(request.headers["Authorization"].removeprefix("Basic ")).decode()


def test_the_cli_never_prints_the_password() -> None:
    result = CliRunner().invoke(cli.app, ["scopes"], env={"MEMBRAIN_URL": URL})
    assert result.exit_code == 1, result.output
    assert "cannot reach" in result.output and "127.0.0.1:1" in result.output
    assert SECRET not in result.output


def test_the_client_sends_the_password_and_shows_it_nowhere(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[httpx.Request] = []
    caplog.set_level(logging.DEBUG)
    with RemoteMemory(URL, transport=failing(seen), retries=0) as remote:
        with pytest.raises(BackendError) as failed:
            remote.facts(scope=SARA)
        shown = [str(failed.value), repr(remote), remote.url, caplog.text]
    assert basic(seen[0]) == f"ana:{SECRET}"  # still sent, as basic auth
    assert all(SECRET not in text for text in shown), shown
    assert "127.0.0.1:1" in str(failed.value)
    with RemoteMemory(URL, retries=0) as remote, pytest.raises(BackendError) as unreachable:
        remote.scopes()
    assert "cannot reach" in str(unreachable.value) and SECRET not in str(unreachable.value)


async def test_the_async_client_shows_it_nowhere() -> None:
    async with AsyncRemoteMemory(URL, retries=0) as remote:
        with pytest.raises(BackendError) as failed:
            await remote.scopes()
        assert SECRET not in str(failed.value) and SECRET not in repr(remote)


def test_the_store_client_shows_it_nowhere() -> None:
    seen: list[httpx.Request] = []
    with RemoteMembrainStore(URL, transport=failing(seen), retries=0) as store:
        with pytest.raises(BackendError) as failed:
            store.get(("sara", "prefs"), "pet")
        assert SECRET not in str(failed.value) and SECRET not in store.url
    assert basic(seen[0]) == f"ana:{SECRET}"


def test_a_url_of_another_scheme_is_refused_without_its_password() -> None:
    with pytest.raises(ConfigurationError) as refused:
        RemoteMemory(f"ftp://ana:{SECRET}@example.org")
    assert SECRET not in str(refused.value) and "ftp://" in str(refused.value)
