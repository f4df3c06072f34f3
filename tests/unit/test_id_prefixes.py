"""Ids a person can use: 8 hex digits name a fact everywhere a fact id is taken."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from store_templates import copy_store
from typer.testing import CliRunner

import membrain.cli as cli
from langchain_membrain.tools import create_memory_tools
from membrain import InputError, Memory, MessageStatus, NotFoundError, Scope
from membrain.backends.base import Collection, Point
from membrain.extraction.offline import OfflineExtractor
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="chat")
CHAT = [
    {"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-15T14:01Z"},
    {"speaker": "Sara", "text": "I live in Lisbon.", "timestamp": "2024-03-15T14:03Z"},
    {"speaker": "Sara", "text": "I moved to Berlin.", "timestamp": "2024-05-02T09:00Z"},
]


@pytest.fixture(scope="module")
def chat_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store holding ``CHAT``, made once for the module."""
    path = tmp_path_factory.mktemp("chat") / "store"
    with Memory(path, dense=HashingEncoder(64)) as memory:
        memory.add(CHAT, scope=SCOPE)
    return path


@pytest.fixture
def mem(chat_store: Path, tmp_path: Path) -> Iterator[Memory]:
    """A Memory holding ``CHAT``: a copy of the module's store, for one test."""
    with Memory(copy_store(chat_store, tmp_path / "store"), dense=HashingEncoder(64)) as memory:
        yield memory


def fact_about(mem: Memory, word: str) -> str:
    (fact,) = [f for f in mem.facts(scope=SCOPE, include_inactive=True) if word in f.text]
    return fact.id


def test_every_call_taking_fact_ids_takes_an_8_digit_prefix(mem: Memory) -> None:
    cat, lisbon, berlin = (fact_about(mem, w) for w in ("Miso", "Lisbon", "Berlin"))
    assert [f.id for f in mem.facts(scope=SCOPE, ids=[cat[:8]])] == [cat]
    assert [f.id for f in mem.facts(scope=SCOPE, ids=[cat[:13].upper()])] == [cat]  # dash, case
    old = mem.supersede(lisbon[:8], [berlin[:8]], scope=SCOPE)
    assert old.id == lisbon and old.superseded_by == (berlin,)
    assert mem.history(lisbon[:8], scope=SCOPE).fact_id == lisbon
    (disputed,) = mem.dispute([cat[:10]], scope=SCOPE).fact_ids
    assert disputed == cat
    assert [f.id for f in mem.confirm([cat[:8]], scope=SCOPE)] == [cat]
    assert [f.id for f in mem.forget([cat[:8]], scope=SCOPE)] == [cat]
    assert mem.purge([berlin[:8]], scope=SCOPE).fact_ids == (berlin,)


def test_a_prefix_too_short_or_naming_nothing_is_not_a_fact(mem: Memory) -> None:
    cat = fact_about(mem, "Miso")
    assert mem.facts(scope=SCOPE, ids=[cat[:7]]) == []
    with pytest.raises(NotFoundError, match=cat[:7]):
        mem.forget([cat[:7]], scope=SCOPE)
    unknown = "0" * 8 if not cat.startswith("0" * 8) else "f" * 8
    with pytest.raises(NotFoundError, match=unknown):
        mem.forget([unknown], scope=SCOPE)
    other = Scope(dataset="tom", task="chat")
    with pytest.raises(NotFoundError):  # a prefix never reaches another scope's facts
        mem.forget([cat[:8]], scope=other)


def test_an_ambiguous_prefix_names_its_candidates(mem: Memory) -> None:
    twins = ["abcdef01-0000-4000-8000-000000000001", "abcdef01-9999-4000-8000-000000000002"]
    mem.store.backend.upsert(Collection.FACTS, SCOPE, [Point(i, {"status": "x"}) for i in twins])
    with pytest.raises(InputError, match="several") as refused:
        mem.forget(["abcdef01"], scope=SCOPE)
    assert not isinstance(refused.value, NotFoundError)
    assert twins[0] in str(refused.value) and twins[1] in str(refused.value)
    assert mem.store.full_ids(Collection.FACTS, SCOPE, ["abcdef01-9"]) == [twins[1]]


def test_context_lines_mark_message_citations_and_fact_ids(mem: Memory) -> None:
    lisbon, berlin = fact_about(mem, "Lisbon"), fact_about(mem, "Berlin")
    mem.supersede(lisbon, [berlin], scope=SCOPE)
    march = datetime(2024, 3, 20, tzinfo=UTC)
    text = mem.context("Where did Sara live?", scope=SCOPE, valid_at=march).text
    (line,) = [line for line in text.splitlines() if "Lisbon" in line]
    assert f"by fact {berlin[:8]})" in line  # a fact id, said to be one
    assert line.endswith("]") and "[msg " in line  # the evidence, said to be messages
    assert mem.facts(scope=SCOPE, ids=[line.split("by fact ")[1][:8]])[0].id == berlin


def test_the_cli_and_the_langchain_tool_take_the_id_they_show(
    mem: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, lisbon = fact_about(mem, "Miso"), fact_about(mem, "Lisbon")
    _, manage = create_memory_tools(memory=mem, scope=SCOPE)
    updated = manage.invoke(
        {"action": "update", "id": lisbon[:8], "content": "Sara lives in Porto now."}
    )
    assert f"supersedes memory {lisbon[:8]}" in updated
    assert manage.invoke({"action": "delete", "id": cat[:8]}) == f"forgot memory {cat[:8]}"
    mem.close()
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    where = ("-d", "sara", "-t", "chat", "--path", str(tmp_path / "store"))
    shown = CliRunner().invoke(cli.app, ["show", lisbon[:8], *where])
    assert shown.exit_code == 0, shown.output
    assert f"id: {lisbon}" in shown.stdout and "status: superseded" in shown.stdout


def test_an_unknown_prefix_in_history_is_not_found_everywhere(mem: Memory) -> None:
    from fastapi.testclient import TestClient

    from membrain.server import create_app

    cat = fact_about(mem, "Miso")
    unknown = "0" * 8 if not cat.startswith("0" * 8) else "f" * 8
    for given in (unknown, unknown.upper() + "-0f"):  # dashes and case ignored, as for facts
        with pytest.raises(NotFoundError, match="no fact"):
            mem.history(given, scope=SCOPE)
    with pytest.raises(InputError) as malformed:
        mem.history("not-an-id", scope=SCOPE)
    assert not isinstance(malformed.value, NotFoundError)
    with TestClient(create_app(mem, keys=None), base_url="http://localhost") as client:
        where = {"dataset": SCOPE.dataset, "task": SCOPE.task}
        answer = client.get("/api/memory/history", params={**where, "fact_id": unknown})
        assert answer.status_code == 404, answer.text
        assert answer.json()["type"] == "NotFoundError"
        assert client.get("/api/memory/history", params={**where, "fact_id": cat[:8]}).is_success
        bad = client.get("/api/memory/history", params={**where, "fact_id": "not-an-id"})
        assert bad.status_code == 422, bad.text


# -- message ids ---------------------------------------------------------------------------------
def cited(text: str, word: str) -> list[str]:
    """The message ids the context line holding ``word`` cites."""
    (line,) = [line for line in text.splitlines() if word in line]
    return line.rsplit("[msg ", 1)[1].rstrip("]").split("; ")


def test_the_message_ids_a_context_cites_are_taken_back(mem: Memory) -> None:
    text = mem.context("What is Sara's cat called?", scope=SCOPE).text
    (short,) = cited(text, "Miso")
    (stored,) = [m for m in mem.messages(scope=SCOPE) if "Miso" in m.message.text]
    assert len(short) == 8 and stored.id.startswith(short)
    for given in (short, short.upper(), stored.id[:13], stored.id):  # dashes and case ignored
        assert [m.id for m in mem.messages(scope=SCOPE, ids=[given])] == [stored.id]
    assert [f.text for f in mem.facts(scope=SCOPE, derived_from=[short])] == [
        f.text for f in mem.facts(scope=SCOPE) if "Miso" in f.text
    ]
    from fastapi.testclient import TestClient

    from membrain.server import create_app

    with TestClient(create_app(mem, keys=None), base_url="http://localhost") as client:
        where = {"dataset": SCOPE.dataset, "task": SCOPE.task}
        answer = client.get("/api/memory/messages", params={**where, "ids": short})
        assert [m["id"] for m in answer.json()] == [stored.id], answer.text


def test_an_unknown_or_ambiguous_message_prefix_is_treated_as_for_facts(mem: Memory) -> None:
    stored = [m.id for m in mem.messages(scope=SCOPE)]
    unknown = next(p for p in ("00000000", "ffffffff") if not any(i.startswith(p) for i in stored))
    assert mem.messages(scope=SCOPE, ids=[unknown]) == []
    assert mem.facts(scope=SCOPE, derived_from=[unknown]) == []
    with pytest.raises(NotFoundError, match=unknown):
        mem.purge(messages=[unknown], scope=SCOPE)
    assert sorted(m.id for m in mem.messages(scope=SCOPE)) == sorted(stored)  # nothing lost
    twins = ["abcdef01-0000-4000-8000-000000000001", "abcdef01-9999-4000-8000-000000000002"]
    mem.store.backend.upsert(Collection.MESSAGES, SCOPE, [Point(i, {"status": "x"}) for i in twins])
    for call in (
        lambda: mem.messages(scope=SCOPE, ids=["abcdef01"]),
        lambda: mem.facts(scope=SCOPE, derived_from=["ABCDEF01"]),
        lambda: mem.purge(messages=["abcdef01"], scope=SCOPE),
    ):
        with pytest.raises(InputError, match="several") as refused:
            call()
        assert not isinstance(refused.value, NotFoundError)
        assert twins[0] in str(refused.value) and twins[1] in str(refused.value)


class _FailsOnBroken(OfflineExtractor):
    """Writes a malformed annotation for a message saying BROKEN: that message fails."""

    def extract(self, target, context, participants, known=()):  # type: ignore[no-untyped-def]
        batch = super().extract(target, context, participants, known)
        facts = [
            replace(f, text=f"{f.text} [x::not-a-date]") if "BROKEN" in f.text else f
            for f in batch.facts
        ]
        return replace(batch, facts=facts)


def test_a_failed_message_is_dismissed_by_its_short_id(tmp_path: Path) -> None:
    with Memory(tmp_path / "store", dense=HashingEncoder(64), extractor=_FailsOnBroken()) as mem:
        said = {"speaker": "Sara", "timestamp": "2024-03-15T14:00Z"}
        mem.add([{**said, "text": "I went to the BROKEN place."}], scope=SCOPE)
        (failed,) = [m for m in mem.messages(scope=SCOPE) if m.status is MessageStatus.FAILED]
        assert mem.dismiss_failed([failed.id[:8]], scope=SCOPE) == [failed.id]


def test_generated_message_ids_are_cited_short(mem: Memory) -> None:
    _, manage = create_memory_tools(memory=mem, scope=SCOPE)
    manage.invoke({"content": "Sara's favourite colour is green."})
    digest = "llamaindex:" + "0123456789abcdef01234567"
    said = {"speaker": "Sara", "timestamp": "2024-06-01T10:00Z", "id": digest}
    mem.add([{**said, "text": "I play the cello on Fridays."}], scope=SCOPE)
    berlin = fact_about(mem, "Berlin")  # the current home: Lisbon was superseded by it
    mem.update(berlin, "Sara lives in Porto.", scope=SCOPE)
    text = mem.context("Sara colour cello lives", scope=SCOPE, max_tokens=2000).text
    for word in ("green", "cello", "Porto"):
        (label,) = cited(text, word)
        assert len(label) == 8, (word, text)  # the stored id's first 8 digits, nothing longer
        assert len(mem.messages(scope=SCOPE, ids=[label])) == 1
        assert any(word in f.text for f in mem.facts(scope=SCOPE, derived_from=[label]))
    assert "membrain:tool:" not in text and "llamaindex:" not in text and "update:" not in text
    # the caller's own ids stay as they are
    mem.add([{**said, "text": "I met Ana at the market.", "id": "D1:3"}], scope=SCOPE)
    assert cited(mem.context("Who did Sara meet?", scope=SCOPE).text, "Ana") == ["D1:3"]
