"""Erasure receipts: a purge or a deletion returns one, the store verifies it, restarts keep it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from qdrant_client import QdrantClient
from store_templates import EmptyStores

from membrain import ErasureReceipt, InputError, Memory, NotFoundError, PurgeResult, Scope
from membrain.api.erasure import ErasureKind, salted, terms
from membrain.backends.client import QdrantClientBackend
from membrain.testing import HashingEncoder

SARA = Scope(dataset="sara", task="assistant")
TOM = Scope(dataset="tom", task="assistant")
SECRET_TEXT = "I keep my Zorblaxian diary hidden under the floorboards in Quokkaville."
SECRET_WORDS = ("zorblaxian", "quokkaville", "floorboards")
TURNS = [
    {"speaker": "Sara", "text": SECRET_TEXT, "timestamp": "2024-03-15T14:01:00Z"},
    {"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-16T09:00:00Z"},
    {
        "speaker": "Sara",
        "text": "I keep my bike in the garage.",
        "timestamp": "2024-03-17T09:00:00Z",
    },
]


def open_memory(path: Path) -> Memory:
    return Memory(path=path, dense=HashingEncoder(dim=64))


@pytest.fixture
def store(tmp_path: Path, empty_stores: EmptyStores) -> Path:
    path = empty_stores.memory(tmp_path / "store", dim=64)
    with open_memory(path) as mem:
        mem.add(TURNS, scope=SARA)
        mem.add([{**TURNS[1], "speaker": "Tom", "text": "Tom adopted a dog."}], scope=TOM)
    return path


def secret_fact(mem: Memory) -> str:
    (fact,) = [f for f in mem.facts(scope=SARA) if "Zorblaxian" in f.text]
    return fact.id


def purge_secret(mem: Memory) -> ErasureReceipt:
    result = mem.purge(secret_fact(mem), scope=SARA, messages=True, reason="GDPR request 17")
    assert result.receipt is not None
    return result.receipt


@pytest.fixture(scope="module")
def purged(
    tmp_path_factory: pytest.TempPathFactory, empty_stores: EmptyStores
) -> Iterator[tuple[Memory, PurgeResult]]:
    """One store, read by the tests that change nothing: the secret purged by ``ana``."""
    path = empty_stores.memory(tmp_path_factory.mktemp("purged") / "store", dim=64)
    with open_memory(path) as mem:
        mem.add(TURNS, scope=SARA)
        result = mem.purge(secret_fact(mem), scope=SARA, messages=True, by="ana")
        yield mem, result


def test_a_purge_returns_a_receipt_that_verifies(purged: tuple[Memory, PurgeResult]) -> None:
    mem, result = purged
    receipt = result.receipt
    assert receipt is not None
    check = mem.verify_erasure(receipt)
    assert check.ok, check.findings
    assert receipt.kind is ErasureKind.PURGE and receipt.dataset == "sara"
    assert receipt.facts == result.fact_ids and receipt.messages == result.message_ids
    assert set(result.entity_ids) == set(receipt.entities) and receipt.entities
    assert str(receipt.by) == "api:ana"
    assert {"facts", "messages", "lexical"} <= set(receipt.erased_from)
    assert check.files_checked > 0 and not check.note
    assert {"facts", "messages", "entities", "tree", "profile", "lexical"} <= set(check.checked)
    assert mem.receipts("sara") == [receipt]


def test_only_distinctive_terms_are_fingerprinted(purged: tuple[Memory, PurgeResult]) -> None:
    receipt = purged[1].receipt
    assert receipt is not None
    hashes = set(receipt.term_hashes)
    for word in SECRET_WORDS:  # in the erased message alone
        assert salted(receipt.salt, word) in hashes
    for word in ("keep", "sara"):  # still said by other messages: not expected gone
        assert salted(receipt.salt, word) not in hashes
    assert salted(receipt.salt, SECRET_TEXT) in receipt.content_hashes


def test_the_receipt_holds_no_content(purged: tuple[Memory, PurgeResult]) -> None:
    mem, result = purged
    assert result.receipt is not None
    audit = json.dumps([e.model_dump(mode="json") for e in mem.audit(scope=SARA)]).lower()
    exported = result.receipt.model_dump_json().lower()
    assert SECRET_TEXT.lower() not in exported
    for word in terms(SECRET_TEXT):
        assert word not in exported and word not in audit
    assert result.receipt.id in audit  # the purge's events name their receipt


def test_a_forged_receipt_is_refused(purged: tuple[Memory, PurgeResult]) -> None:
    mem, result = purged
    receipt = result.receipt
    assert receipt is not None
    with pytest.raises(InputError, match="differs"):
        mem.verify_erasure(receipt.model_copy(update={"term_hashes": ()}))
    with pytest.raises(NotFoundError):
        mem.verify_erasure(receipt.model_copy(update={"dataset": "tom"}))
    with pytest.raises(NotFoundError):
        mem.verify_erasure(receipt.model_copy(update={"id": "not-a-receipt"}))
    with pytest.raises(InputError, match="dataset"):
        mem.verify_erasure(receipt, dataset="tom")


def test_what_is_left_fails_and_is_named(store: Path) -> None:
    with open_memory(store) as mem:
        fact = mem.get(secret_fact(mem), scope=SARA)
        receipt = purge_secret(mem)
        left = store / "facts" / "stray.bin"
        left.write_bytes(b"\x00\x01jZORBLAXIANgaliases\x00")  # framed as a binary record is
        check = mem.verify_erasure(receipt)
        assert not check.ok
        (finding,) = check.findings
        assert finding.where == "facts/stray.bin" and finding.terms == 1 and not finding.record
        assert "zorblaxian" not in check.model_dump_json().lower()
        left.unlink()
        assert mem.verify_erasure(receipt).ok
        # A record put back under an erased id: in the collection and the lexical index.
        back = fact.model_copy(update={"text": "Sara has a diary."})
        mem.store.put_facts(SARA, [back], participants=["Sara"])
        found = {(f.where, f.record) for f in mem.verify_erasure(receipt).findings}
    assert {("facts", fact.id), ("lexical", fact.id)} <= found


def test_receipts_outlive_a_restart_and_the_dataset(store: Path) -> None:
    with open_memory(store) as mem:
        purged = purge_secret(mem)
        mem.delete_scope(TOM)
    with open_memory(store) as mem:
        assert mem.receipts("sara") == [purged]
        (deleted_tom,) = mem.receipts("tom")
        again = mem.purge(purged.facts, scope=SARA)  # idempotent: nothing new, no receipt
        assert again.receipt is None and again.fact_ids == purged.facts
        assert mem.delete_dataset("sara") == [SARA]
        earlier, receipt = mem.receipts("sara")  # the erasure log outlives the dataset
        assert earlier == purged
        assert receipt.kind is ErasureKind.SCOPES and receipt.scopes[0].task == "assistant"
        assert receipt.messages and receipt.facts and receipt.term_hashes
        assert not {*purged.facts, *purged.messages} & {*receipt.facts, *receipt.messages}
        for each in (purged, receipt, deleted_tom):
            assert mem.verify_erasure(each).ok
        assert mem.scopes() == []


def test_retention_erasures_get_receipts(store: Path) -> None:
    with Memory(path=store, dense=HashingEncoder(dim=64), keep_messages=timedelta(days=1)) as mem:
        result = mem.apply_retention(scope=SARA, at=datetime(2024, 3, 17, 12, tzinfo=UTC))
        assert result.message_ids and result.receipt is not None
        assert result.receipt.messages == result.message_ids
        assert str(result.receipt.by) == "system:retention"
        assert mem.verify_erasure(result.receipt).ok


def test_a_store_without_local_files_checks_its_records_and_says_so() -> None:
    backend = QdrantClientBackend(QdrantClient(location=":memory:"))
    with Memory(backend=backend, dense=HashingEncoder(dim=64)) as mem:
        mem.add(TURNS, scope=SARA)
        receipt = purge_secret(mem)
        assert receipt.term_hashes  # fingerprinted from the records all the same
        check = mem.verify_erasure(receipt)
    assert check.ok and check.files_checked == 0 and "not local" in check.note
    assert "lexical" in check.checked
