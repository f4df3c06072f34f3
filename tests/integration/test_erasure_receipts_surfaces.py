"""Erasure receipts on every surface: served (sync and async clients), AsyncMemory, the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import membrain.cli as cli
from integration.served import Served, serving
from membrain import AsyncRemoteMemory, ErasureReceipt, InputError, Memory, Scope
from membrain.aio import AsyncMemory
from membrain.remote import RemoteAccessError
from membrain.server import create_app
from membrain.server.keys import Access
from membrain.testing import HashingEncoder

SARA = Scope(dataset="sara", task="assistant")
SECRET = "I keep my Zorblaxian diary under the floorboards."
TURNS = [
    {"speaker": "Sara", "text": SECRET, "timestamp": "2024-03-15T14:01:00Z"},
    {"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-16T09:00:00Z"},
]
runner = CliRunner()


def secret_fact(facts: list[object]) -> str:
    return next(f.id for f in facts if "Zorblaxian" in f.text)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {
        "sara-admin": (["sara"], Access.ADMIN),
        "sara-reader": (["sara"], Access.READ),
        "tom-reader": (["tom"], Access.READ),
    }
    with serving(tmp_path_factory.mktemp("receipts-served"), keys) as state:
        state.memory.add(TURNS, scope=SARA)
        yield state


@pytest.fixture(scope="module")
def receipt(served: Served) -> ErasureReceipt:
    """The receipt of a purge made over HTTP by the dataset's admin."""
    with served.remote("sara-admin") as admin:
        fact = secret_fact(admin.facts(scope=SARA))
        result = admin.purge(fact, scope=SARA, messages=True, reason="GDPR")
    assert result.receipt is not None and result.receipt.facts == (fact,)
    return result.receipt


def test_a_reader_of_the_dataset_lists_and_verifies_receipts(
    served: Served, receipt: ErasureReceipt
) -> None:
    with served.remote("sara-reader") as reader:
        assert reader.receipts("sara") == [receipt]
        check = reader.verify_erasure(receipt)
    assert check.ok and check.files_checked > 0  # the server's store is local to it
    assert str(receipt.by).startswith("api:") and receipt.reason == "GDPR"
    assert served.memory.receipts("sara") == [receipt]


def test_a_key_verifies_only_the_receipts_of_its_datasets(
    served: Served, receipt: ErasureReceipt
) -> None:
    with served.remote("tom-reader") as tom:
        with pytest.raises(RemoteAccessError):
            tom.receipts("sara")
        with pytest.raises(RemoteAccessError):
            tom.verify_erasure(receipt)
        with pytest.raises(InputError, match="dataset"):
            tom.verify_erasure(receipt, dataset="tom")
        assert tom.receipts("tom") == []
    # Sent by hand, naming the key's dataset beside another's receipt: refused.
    body = {"receipt": receipt.model_dump(mode="json"), "dataset": "tom"}
    answer = httpx.post(
        f"{served.url}/api/memory/receipts/verify",
        json=body,
        headers={"Authorization": f"Bearer {served.keys['tom-reader']}"},
    )
    assert answer.status_code in (400, 422) and "dataset" in answer.text


async def test_the_async_client_lists_and_verifies(served: Served, receipt: ErasureReceipt) -> None:
    async with AsyncRemoteMemory(served.url, served.keys["sara-reader"]) as reader:
        assert await reader.receipts("sara") == [receipt]
        assert (await reader.verify_erasure(receipt)).ok


async def test_async_memory_purges_lists_and_verifies(tmp_path: Path) -> None:
    async with AsyncMemory(path=tmp_path / "store", dense=HashingEncoder(dim=64)) as mem:
        await mem.add(TURNS, scope=SARA)
        fact = secret_fact(await mem.facts(scope=SARA))
        result = await mem.purge(fact, scope=SARA, messages=True)
        assert result.receipt is not None
        assert await mem.receipts("sara") == [result.receipt]
        assert (await mem.verify_erasure(result.receipt)).ok


def test_the_cli_and_the_inspector_export_and_verify_a_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    monkeypatch.delenv("MEMBRAIN_PATH", raising=False)
    monkeypatch.delenv("MEMBRAIN_QDRANT_URL", raising=False)
    store = tmp_path / "store"
    with Memory(path=store, dense=HashingEncoder(dim=64)) as mem:
        mem.add(TURNS, scope=SARA)
        mem.purge(secret_fact(mem.facts(scope=SARA)), scope=SARA, messages=True)
    out = tmp_path / "receipts.json"
    written = runner.invoke(
        cli.app, ["receipts", "-d", "sara", "--path", str(store), "-o", str(out)]
    )
    assert written.exit_code == 0, written.output
    (exported,) = json.loads(out.read_text())
    assert "zorblaxian" not in out.read_text().lower()
    one = tmp_path / "one.json"
    one.write_text(json.dumps(exported))
    verified = runner.invoke(cli.app, ["verify-erasure", str(one), "--path", str(store)])
    assert verified.exit_code == 0, verified.output
    assert f"verified: receipt {exported['id']}" in verified.stdout
    (store / "stray.txt").write_text("zorblaxian was here")
    failed = runner.invoke(cli.app, ["verify-erasure", str(one), "--path", str(store)])
    assert failed.exit_code == 1 and "stray.txt" in failed.stdout
    assert "zorblaxian" not in failed.stdout.lower()
    out.write_text(json.dumps([exported, exported]))
    several = runner.invoke(cli.app, ["verify-erasure", str(out), "--path", str(store)])
    assert several.exit_code == 1 and "2 receipts" in several.output

    # The inspector's receipts page lists it; its verify button shows the verdict.
    with (
        Memory(path=store, dense=HashingEncoder(dim=64)) as mem,
        TestClient(create_app(mem, keys=None), base_url="http://localhost") as client,
    ):
        page = client.get("/ui/receipts", params={"dataset": "sara", "task": "assistant"})
        assert page.status_code == 200 and f'data-receipt="{exported["id"]}"' in page.text
        query = {"dataset": "sara", "verify": exported["id"]}
        failed_page = client.get("/ui/receipts", params=query)
        assert "Not erased" in failed_page.text and "stray.txt" in failed_page.text
        (store / "stray.txt").unlink()
        verified_page = client.get("/ui/receipts", params=query)
        assert verified_page.status_code == 200 and "Verified" in verified_page.text
        assert "zorblaxian" not in verified_page.text.lower()
        assert client.get("/ui/receipts", params={**query, "verify": "nope"}).status_code == 404
