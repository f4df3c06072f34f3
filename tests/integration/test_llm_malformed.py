"""What real models return when they go wrong: each output is repaired, or its messages stay
pending with the raw output recorded, and nothing already stored changes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from store_templates import EmptyStores

from membrain import Memory, MessageStatus, TimeCheck, Trust
from membrain.extraction.llm import LLMClient
from membrain.extraction.llm_extractor import LLMExtractor
from membrain.testing import HashingEncoder, ScriptedChatModel

from .test_llm_extraction import FIRST, FIRST_ENTITIES, FIRST_FACTS, SCOPE

NEW = {
    "speaker": "Sara",
    "text": "I adopted a cat named Miso yesterday.",
    "timestamp": "2024-03-20T10:00:00Z",
    "id": "m9",
}
ENTITIES = json.dumps({"entities": ["Sara", "Miso"], "descriptions": {"Miso": "Sara's cat."}})
GOOD_TEXT = "[Sara] adopted a cat named [Miso] [yesterday::2024-03-19]."


def _facts(text: str, fact_ts: str = "2024-03-20T10:00:00Z") -> str:
    return json.dumps({"facts": [{"text": text, "fact_ts": fact_ts}]})


GOOD = _facts(GOOD_TEXT)
WRONG_DAY = _facts("[Sara] adopted a cat named [Miso] [yesterday::2024-03-10].")


@dataclass(frozen=True)
class Case:
    name: str
    facts: list[Any]
    outcome: str  # "repaired", "pending" or "disputed"
    calls: int
    entities: str = ENTITIES


CASES = [
    Case("invalid json", ["{facts: [{text: oops", GOOD], "repaired", 3),
    Case(
        "json in prose",
        ["Sure! Here are the facts:\n" + GOOD + "\nHope this helps."],
        "repaired",
        2,
    ),
    Case("json in a code fence", ["```json\n" + GOOD + "\n```"], "repaired", 2),
    Case("trailing comma", [GOOD[:-2] + ",]}"], "repaired", 2),
    Case("missing key", ['{"items": []}', GOOD], "repaired", 3),
    Case("unknown entity", [_facts("[Sara] adopted [Mr Whiskers]."), GOOD], "repaired", 3),
    Case(
        "entity spelled in another case",
        [_facts(GOOD_TEXT.replace("[Miso]", "[miso]"))],
        "repaired",
        2,
    ),
    Case(
        "broken annotation",
        [_facts("[Sara] adopted [Miso] [yesterday::2024-19-03]."), GOOD],
        "repaired",
        3,
    ),
    Case("time resolved to the wrong day", [WRONG_DAY, GOOD], "repaired", 3),
    Case("fact_ts of no message", [_facts(GOOD_TEXT, "2023-01-01T00:00:00Z"), GOOD], "repaired", 3),
    Case("truncated answer", ['{"facts": [', GOOD], "repaired", 3),
    Case("refusal", ["I'm sorry, but I can't help with that request."], "pending", 4),
    Case("empty answer", ["   "], "pending", 4),
    Case("timeout", [TimeoutError("read timed out")], "pending", 4),
    Case("unknown entity every time", [_facts("[Sara] adopted [Mr Whiskers].")], "pending", 4),
    Case("wrong day every time", [WRONG_DAY], "disputed", 4),
    Case("entity answer is not json", [GOOD], "pending", 3, entities="no idea, sorry"),
]


def _state(mem: Memory) -> tuple[Any, Any, Any]:
    facts = sorted(f.model_dump_json() for f in mem.facts(scope=SCOPE, include_inactive=True))
    entities = sorted(e.model_dump_json() for e in mem.entities(scope=SCOPE))
    messages = sorted(m.model_dump_json() for m in mem.messages(scope=SCOPE))
    return facts, entities, messages


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_output(tmp_path: Path, empty_stores: EmptyStores, case: Case) -> None:
    model = ScriptedChatModel(
        entities=[json.dumps(FIRST_ENTITIES), case.entities],
        facts=[json.dumps(FIRST_FACTS), *case.facts],
        same=['{"same": [false]}'],
    )
    client = LLMClient(model)  # one client: the extractor's calls count in the add's usage
    extractor = LLMExtractor(client, max_attempts=3, backoff=0.0)
    store = empty_stores.memory(tmp_path / "store")
    with Memory(path=store, dense=HashingEncoder(dim=64), llm=client, extractor=extractor) as mem:
        assert mem.add(FIRST, scope=SCOPE).errors == ()
        facts_before, entities_before, messages_before = _state(mem)
        asked = len(model.calls)

        result = mem.add([NEW], scope=SCOPE)

        profile_calls = sum(step == "profile" for step, _, _ in model.calls[asked:])
        assert profile_calls == (case.outcome != "pending")  # one per flush that stored facts
        assert result.llm_calls == case.calls + profile_calls
        facts_after, entities_after, messages_after = _state(mem)
        assert set(facts_before) <= set(facts_after)  # nothing stored before changed
        assert set(messages_before) <= set(messages_after)
        old_entities = {json.loads(e)["id"]: e for e in entities_before}
        for entity in entities_after:
            if json.loads(entity)["id"] in old_entities:
                assert entity == old_entities[json.loads(entity)["id"]]
        (stored,) = [m for m in mem.messages(scope=SCOPE) if m.message.source_id == "m9"]
        new_facts = [f for f in mem.facts(scope=SCOPE) if stored.id in f.sources]
        if case.outcome == "pending":
            assert len(result.errors) == 1
            assert stored.status is MessageStatus.PENDING
            assert stored.error and stored.raw_output == result.errors[0].raw_output
            last = case.facts[-1] if case.entities == ENTITIES else case.entities
            assert stored.raw_output == ("" if isinstance(last, BaseException) else last)
            assert new_facts == []
        else:
            assert result.errors == ()
            assert stored.status is MessageStatus.PROCESSED
            (fact,) = new_facts
            if case.outcome == "repaired":
                assert fact.text == GOOD_TEXT
                assert fact.trust is Trust.STATED and fact.time_check is TimeCheck.AGREES
            else:
                assert fact.trust is Trust.DISPUTED
                assert fact.time_check is TimeCheck.CONTRADICTS


def test_retry_feedback_names_the_problem(tmp_path: Path, empty_stores: EmptyStores) -> None:
    model = ScriptedChatModel(entities=[ENTITIES], facts=[WRONG_DAY, GOOD])
    store = empty_stores.memory(tmp_path / "s")
    with Memory(path=store, dense=HashingEncoder(dim=64), llm=model) as mem:
        mem.add([NEW], scope=SCOPE)
    retry_prompt = [prompt for step, _, prompt in model.calls if step == "facts"][-1]
    assert (
        "[yesterday::2024-03-10] contradicts the message time 2024-03-20T10:00:00Z" in retry_prompt
    )
    assert "which gives 2024-03-19" in retry_prompt
