"""The facts a statement may replace are found by an index of the attributes facts state.

Offline supersession used to read every fact about the subject (the latest 2,000 of them); it now
asks the store for the facts stating the same attribute of the same subject, one indexed lookup
that finds an old fact however many facts came after it, and that also covers facts written
before the index existed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from membrain import Memory, Message, Scope
from membrain.api.models import FactStatus
from membrain.backends.base import Collection, Missing, Point
from membrain.extraction.attributes import claim_key, held_keys
from membrain.extraction.base import FactDraft
from membrain.knowledge.facts import build_facts
from membrain.records.filters import NO_CLAIMS, fact_payload

START = datetime(2024, 1, 8, 18, 0, tzinfo=UTC)


def _put(memory: Memory, scope: Scope, texts: list[str], *, day: int = 0) -> list[str]:
    drafts = [
        FactDraft(
            text=t,
            sources=(scope.record_id("message", f"{day}-{i}"),),
            stated_at=START + timedelta(days=day, minutes=i),
        )
        for i, t in enumerate(texts)
    ]
    facts, _ = build_facts(scope, drafts, extractor="test", recorded_at=START)
    memory.store.put_facts(scope, facts, ["Maya"])
    return [f.id for f in facts]


def test_held_keys_name_the_subject_and_attribute_of_stated_values() -> None:
    assert held_keys("[Maya] lives in [Toronto] and works as a nurse.") == [
        claim_key("maya", "residence"),
        claim_key("maya", "occupation"),
    ]
    assert held_keys("[Maya] quit her job.") == []  # an end states no value to replace later
    assert held_keys("[Maya] adopted a cat.") == []


def test_the_lookup_returns_only_the_facts_stating_the_attribute(
    memory: Memory, scope: Scope
) -> None:
    lives, works, cat, other = _put(
        memory,
        scope,
        [
            "[Maya] lives in [Toronto].",
            "[Maya] works as a nurse.",
            "[Maya] adopted a cat.",
            "[Ana] lives in [Ottawa].",
        ],
    )
    found = memory.store.facts_claiming(scope, [claim_key("maya", "residence")])
    assert [f.id for f in found] == [lives]
    both = memory.store.facts_claiming(
        scope, [claim_key("maya", "residence"), claim_key("ana", "residence")]
    )
    assert {f.id for f in both} == {lives, other}
    assert memory.store.facts_claiming(scope, []) == []
    # every fact holds its keys, the sentinel when it states none
    payloads = {
        p.id: p.payload
        for p in memory.store.backend.retrieve(Collection.FACTS, scope, [cat, works])
    }
    assert payloads[cat]["claims"] == [NO_CLAIMS]
    assert payloads[works]["claims"] == [claim_key("maya", "occupation")]


def test_an_old_fact_is_replaced_however_many_facts_followed_it(
    memory: Memory, scope: Scope
) -> None:
    (toronto,) = _put(memory, scope, ["[Maya] lives in [Toronto]."])
    # more facts about Maya than the former lookup read (the latest 2,000)
    _put(memory, scope, [f"[Maya] read book number {n}." for n in range(2_100)], day=1)
    memory.add(
        [
            Message(
                speaker="Maya",
                text="I moved to Vancouver last week.",
                timestamp=START + timedelta(days=30),
            )
        ],
        scope=scope,
    )
    old = memory.store.get_facts(scope, [toronto])[0]
    assert old.status is FactStatus.SUPERSEDED
    current = memory.store.facts_claiming(scope, [claim_key("maya", "residence")])
    assert len(current) == 1 and "[Vancouver]" in current[0].text


def test_facts_written_before_the_index_existed_are_indexed_when_first_looked_up(
    tmp_path: Path, scope: Scope
) -> None:
    from membrain.testing import HashingEncoder

    with Memory(path=tmp_path / "store", dense=HashingEncoder(dim=64)) as memory:
        source = scope.record_id("message", "0")
        drafts = [
            FactDraft(text="[Maya] lives in [Toronto].", sources=(source,), stated_at=START),
            FactDraft(text="[Maya] adopted a cat.", sources=(source,), stated_at=START),
        ]
        facts, _ = build_facts(scope, drafts, extractor="test", recorded_at=START)
        legacy = []
        for fact in facts:  # as an older version stored them: no ``claims`` field
            payload = {k: v for k, v in fact_payload(fact).items() if k != "claims"}
            vector = memory.store.dense.embed_documents([fact.text])[0]
            legacy.append(
                Point(fact.id, payload, vector, memory.store.sparse.embed_query(fact.text))
            )
        memory.store.backend.upsert(Collection.FACTS, scope, legacy)
        missing = {"claims": Missing()}
        assert memory.store.backend.count(Collection.FACTS, scope, where=missing) == 2

        found = memory.store.facts_claiming(scope, [claim_key("maya", "residence")])

        assert [f.text for f in found] == ["[Maya] lives in [Toronto]."]
        assert memory.store.backend.count(Collection.FACTS, scope, where=missing) == 0
        cat = memory.store.backend.retrieve(Collection.FACTS, scope, [facts[1].id])[0]
        assert cat.payload["claims"] == [NO_CLAIMS]
