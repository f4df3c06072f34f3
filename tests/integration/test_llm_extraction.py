"""The LLM extraction pipeline end to end, driven by scripted models of each kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.llms.mock import MockLLM
from store_templates import empty_store

from membrain import Layer, Memory, MessageStatus, Scope, TimeCheck, Trust
from membrain.testing import HashingEncoder, ScriptedChatModel

SCOPE = Scope(dataset="sara", task="assistant")

FIRST = [
    {
        "speaker": "Sara",
        "text": "I just started a new job as a nurse at St. Mary's hospital!",
        "timestamp": "2024-03-15T14:01:00Z",
        "id": "m1",
    },
    {
        "speaker": "Nate",
        "text": "Congrats! My bakery Crumb & Co turned one yesterday.",
        "timestamp": "2024-03-15T14:02:00Z",
        "id": "m2",
    },
]
FIRST_ENTITIES = {
    "entities": ["Sara", "Nate", "St. Mary's hospital", "Crumb & Co"],
    "descriptions": {
        "Sara": "A nurse at St. Mary's hospital.",
        "Nate": "Owner of the bakery Crumb & Co.",
        "St. Mary's hospital": "The hospital where Sara works.",
        "Crumb & Co": "Nate's bakery.",
    },
}
FIRST_FACTS = {
    "facts": [
        {
            "text": "[Sara] started a new job as a nurse at [St. Mary's hospital].",
            "fact_ts": "2024-03-15T14:01:00Z",
        },
        {
            "text": "[Nate]'s bakery [Crumb & Co] turned one year old [yesterday::2024-03-14].",
            "fact_ts": "2024-03-15T14:02:00Z",
        },
    ]
}
SECOND = [
    {
        "speaker": "Sara",
        "text": "Sara Lee is my full name, by the way. I left the hospital and teach biology "
        "at Oak High now.",
        "timestamp": "2024-06-01T09:00:00Z",
        "id": "m3",
    }
]
SECOND_ENTITIES = {
    "entities": ["sara", "Sara Lee", "Oak High"],
    "descriptions": {"Sara Lee": "A biology teacher at Oak High.", "Oak High": "A school."},
}
SECOND_FACTS = {
    "facts": [
        {
            "text": "[Sara Lee] left her hospital job and teaches biology at [Oak High].",
            "fact_ts": "2024-06-01T09:00:00Z",
        }
    ]
}


def _memory(tmp_path: Path, llm: object, **options: Any) -> Memory:
    """A Memory on ``tmp_path / "store"``, a copy of an empty store the first time."""
    path = tmp_path / "store"
    store = path if path.exists() else empty_store(path)
    return Memory(path=store, dense=HashingEncoder(dim=64), llm=llm, **options)


def _scripted(**queues: list[Any]) -> ScriptedChatModel:
    return ScriptedChatModel(
        entities=queues.get("entities", [json.dumps(FIRST_ENTITIES)]),
        facts=queues.get("facts", [json.dumps(FIRST_FACTS)]),
        same=queues.get("same", ['{"same": [true]}']),
    )


def _assert_first_conversation(mem: Memory) -> None:
    facts = sorted(mem.facts(scope=SCOPE), key=lambda f: f.stated_at)
    assert [f.text for f in facts] == [item["text"] for item in FIRST_FACTS["facts"]]
    job, bakery = facts
    assert job.entities == ("Sara", "St. Mary's hospital")
    assert bakery.entities == ("Nate", "Crumb & Co")
    assert (
        bakery.valid_from is not None
        and bakery.valid_from.isoformat() == "2024-03-14T00:00:00+00:00"
    )
    assert (
        bakery.valid_to is not None and bakery.valid_to.isoformat() == "2024-03-15T00:00:00+00:00"
    )
    assert bakery.time_check is TimeCheck.AGREES and bakery.trust is Trust.STATED
    assert job.time_check is None
    stored = {m.message.source_id: m for m in mem.messages(scope=SCOPE)}
    assert [stored["m1"].id] == list(job.sources) and [stored["m2"].id] == list(bakery.sources)
    entities = {e.name: e for e in mem.entities(scope=SCOPE)}
    assert set(entities) == {"Sara", "Nate", "St. Mary's hospital", "Crumb & Co"}
    assert entities["Sara"].participant and not entities["Crumb & Co"].participant
    assert entities["Sara"].description == "A nurse at St. Mary's hospital."
    assert job.entity_ids[0] == entities["Sara"].id


class _ScriptedLlamaIndex(MockLLM):
    """A LlamaIndex LLM answering each extraction step from a canned reply."""

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        step = ScriptedChatModel.step_of(prompt)
        reply = {"entities": FIRST_ENTITIES, "facts": FIRST_FACTS, "profile": {"profile": []}}[step]
        return CompletionResponse(text=json.dumps(reply))


def _langchain_model() -> GenericFakeChatModel:
    replies: Iterator[AIMessage] = iter(
        [
            AIMessage(
                content=json.dumps(FIRST_ENTITIES),
                usage_metadata={"input_tokens": 500, "output_tokens": 80, "total_tokens": 580},
            ),
            AIMessage(
                content="```json\n" + json.dumps(FIRST_FACTS) + "\n```",
                usage_metadata={"input_tokens": 700, "output_tokens": 120, "total_tokens": 820},
            ),
            AIMessage(  # the profile's changes: none
                content='{"profile": []}',
                usage_metadata={"input_tokens": 300, "output_tokens": 10, "total_tokens": 310},
            ),
        ]
    )
    return GenericFakeChatModel(messages=replies)


@pytest.mark.parametrize("kind", ["membrain", "langchain", "llamaindex"])
def test_two_person_conversation_through_every_model_kind(tmp_path: Path, kind: str) -> None:
    llm = {"membrain": _scripted, "langchain": _langchain_model, "llamaindex": _ScriptedLlamaIndex}[
        kind
    ]()
    with _memory(tmp_path, llm) as mem:
        result = mem.add(FIRST, scope=SCOPE)
        assert result.errors == ()
        assert result.llm_calls == 3  # entities, facts, and the profile's changes
        assert result.input_tokens > 0 and result.output_tokens > 0
        if kind == "langchain":
            assert (result.input_tokens, result.output_tokens) == (1500, 210)
        _assert_first_conversation(mem)


def test_aliases_versions_and_canonical_names(tmp_path: Path) -> None:
    model = _scripted(
        entities=[json.dumps(FIRST_ENTITIES), json.dumps(SECOND_ENTITIES)],
        facts=[json.dumps(FIRST_FACTS), json.dumps(SECOND_FACTS)],
    )
    with _memory(tmp_path, model) as mem:
        mem.add(FIRST, scope=SCOPE)
        second = mem.add(SECOND, scope=SCOPE)
        assert second.errors == ()
        # entities, facts, one same-entity question, and the profile's changes (Sara Lee is Sara)
        assert second.llm_calls == 4
        entities = {e.name: e for e in mem.entities(scope=SCOPE)}
        assert "Sara Lee" not in entities  # one person, not two
        sara = entities["Sara"]
        assert set(sara.aliases) == {"sara", "Sara Lee"}
        assert [v.description for v in sara.versions] == [
            "A nurse at St. Mary's hospital.",
            "A nurse at St. Mary's hospital. A biology teacher at Oak High.",
        ]
        assert sara.versions[1].version == 2 and sara.versions[1].fact_ids
        latest = next(f for f in mem.facts(scope=SCOPE) if "Oak High" in f.text)
        assert latest.entities == ("Sara Lee", "Oak High")
        assert latest.entity_ids[0] == sara.id
        hit = mem.search("Where does Sara teach biology?", scope=SCOPE, k=1)[0]
        assert hit.fact.id == latest.id
        assert hit.text == "Sara left her hospital job and teaches biology at Oak High."
        view = next(e for e in hit.entities if e.id == sara.id)
        assert (view.name, view.description) == ("Sara", sara.versions[-1].description)


def test_same_facts_twice_create_no_duplicates(tmp_path: Path) -> None:
    with _memory(tmp_path, _scripted()) as mem:
        mem.add(FIRST, scope=SCOPE)
        facts = {f.id for f in mem.facts(scope=SCOPE)}
        entities = {e.id: e for e in mem.entities(scope=SCOPE)}
        # The same statements arrive again in new messages: same entities, no new entities.
        again = [{**m, "id": f"{m['id']}-again"} for m in FIRST]
        mem.add(again, scope=SCOPE)
        assert {e.id: e.name for e in mem.entities(scope=SCOPE)} == {
            i: e.name for i, e in entities.items()
        }
        assert len(mem.facts(scope=SCOPE)) == 2 * len(facts)  # cited from other messages
        # Re-adding the very same messages writes nothing at all.
        before = {f.id for f in mem.facts(scope=SCOPE)}
        result = mem.add(FIRST, scope=SCOPE)
        assert result.llm_calls == 0 and result.messages_skipped == 2
        assert {f.id for f in mem.facts(scope=SCOPE)} == before


def test_character_thoughts_stay_private(tmp_path: Path) -> None:
    persona = [
        {
            "speaker": "Kurisu",
            "role": "assistant",
            "text": "Sure, whatever. *starts typing then deletes it* （Why did I say that.）",
            "timestamp": "2024-03-15T14:05:00Z",
            "id": "k1",
        }
    ]
    model = _scripted(
        entities=['{"entities": ["Kurisu"]}'],
        facts=[
            json.dumps(
                {
                    "facts": [
                        {
                            "text": "[Kurisu] privately thought that she regretted her answer.",
                            "fact_ts": "2024-03-15T14:05:00Z",
                        }
                    ]
                }
            )
        ],
    )
    with _memory(tmp_path, model) as mem:
        mem.add(persona, scope=SCOPE)
        prompt = model.calls[-1][2]
        assert "Kurisu (private thought): Why did I say that." in prompt
        assert "Kurisu (action): starts typing then deletes it" in prompt
        assert "Kurisu: Sure, whatever." in prompt
        (fact,) = mem.facts(scope=SCOPE)
        assert fact.layer is Layer.THOUGHT


def test_offline_extractor_keeps_layers_apart(tmp_path: Path) -> None:
    persona = [
        {
            "speaker": "Kurisu",
            "text": "*sips coffee* Morning~ I fixed the microwave. （It was Okabe's fault.）",
            "timestamp": "2024-03-15T14:05:00Z",
        }
    ]
    with Memory(path=empty_store(tmp_path / "store"), dense=HashingEncoder(dim=64)) as mem:
        mem.add(persona, scope=SCOPE)
        layers = {f.layer: f.text for f in mem.facts(scope=SCOPE)}
    assert layers[Layer.ACTION] == "[Kurisu] sips coffee."
    assert layers[Layer.THOUGHT] == '[Kurisu] privately thought: "It was Okabe\'s fault."'
    assert "Okabe's fault" not in layers[Layer.DIALOGUE]
    assert layers[Layer.DIALOGUE] == "[Kurisu] fixed the microwave."


def test_pending_messages_survive_a_restart_and_are_extracted_once(tmp_path: Path) -> None:
    failing = _scripted(entities=[TimeoutError("model timed out")])
    with _memory(tmp_path, failing, max_attempts=2) as mem:
        result = mem.add(FIRST, scope=SCOPE)
        assert len(result.errors) == 1 and result.llm_calls == 2
        assert {m.status for m in mem.messages(scope=SCOPE)} == {MessageStatus.PENDING}
    working = _scripted()
    with _memory(tmp_path, working) as mem:
        result = mem.add(FIRST, scope=SCOPE)
        assert result.errors == () and result.messages_stored == 0
        _assert_first_conversation(mem)
        assert mem.add(FIRST, scope=SCOPE).llm_calls == 0


def test_prompts_can_be_overridden_per_memory(tmp_path: Path) -> None:
    from membrain import Prompts
    from membrain.extraction.prompts import FACT_PROMPT

    custom = Prompts(facts="HOUSE RULES: facts only about cats.\n" + FACT_PROMPT)
    model = _scripted()
    with _memory(tmp_path, model, prompts=custom) as mem:
        mem.add(FIRST, scope=SCOPE)
    fact_prompts = [p for step, _, p in model.calls if step == "facts"]
    entity_prompts = [p for step, _, p in model.calls if step == "entities"]
    assert fact_prompts and all(p.startswith("HOUSE RULES") for p in fact_prompts)
    assert entity_prompts and not any("HOUSE RULES" in p for p in entity_prompts)
    assert "--- EXTRACT BELOW ---" not in fact_prompts[0].split("Messages:")[-1]  # no context yet


class _StructuredChat(GenericFakeChatModel):
    """A LangChain model with native structured output: answers are parsed dicts."""

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        from langchain_core.runnables import RunnableLambda

        def answer(messages: Any) -> dict[str, Any]:
            prompt = str(messages[-1][1])
            step = ScriptedChatModel.step_of(prompt)
            parsed = {"facts": FIRST_FACTS, "entities": FIRST_ENTITIES}.get(step, {"profile": []})
            assert schema["title"] in ("EntityList", "FactList", "profile_changes")
            return {"raw": AIMessage(content=""), "parsed": parsed, "parsing_error": None}

        return RunnableLambda(answer)


def test_native_structured_output_is_used_where_supported(tmp_path: Path) -> None:
    model = _StructuredChat(messages=iter([]))
    with _memory(tmp_path, model) as mem:
        result = mem.add(FIRST, scope=SCOPE)
        assert result.errors == () and result.llm_calls == 3  # with the profile's changes
        _assert_first_conversation(mem)
