"""Supersession inside the fact call: known facts are listed as K1..Kn, and a new fact may say
which of them it makes no longer true (``replaces``), validated and repaired like entities."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from membrain.api.errors import ExtractionError
from membrain.api.models import Message
from membrain.extraction.base import ExtractionBatch, KnownFact
from membrain.extraction.llm import as_llm_client
from membrain.extraction.llm_extractor import LLMExtractor
from membrain.extraction.offline import OfflineExtractor
from membrain.extraction.prompts import FACT_SCHEMA, PROMPT_VERSION, Prompts
from membrain.testing import ScriptedChatModel

TS = "2024-05-02T10:00:00Z"
MESSAGE = Message(
    speaker="Sara",
    text="Big news: I moved to Porto, Joao stayed behind.",
    timestamp=TS,
    id="m1",
)
KNOWN = [
    KnownFact(
        id="fact-lisbon",
        text="[Sara] lives in [Lisbon] with [Joao].",
        stated_at=datetime(2023, 1, 10, 9, 30, tzinfo=UTC),
    ),
    KnownFact(
        id="fact-nurse",
        text="[Sara]  works as a nurse\nat [St. Mary's hospital].",
        stated_at=datetime(2023, 2, 1, 23, 59, tzinfo=UTC),
    ),
]
ENTITIES = json.dumps({"entities": ["Sara", "Porto", "Joao"]})
MOVED = "[Sara] moved to [Porto] and [Joao] stayed behind."


def _facts(*items: dict[str, Any]) -> str:
    return json.dumps({"facts": [{"fact_ts": TS, **item} for item in items]})


def _moved(replaces: Any = None, **extra: Any) -> str:
    item: dict[str, Any] = {"text": MOVED, **extra}
    if replaces is not None:
        item["replaces"] = replaces
    return _facts(item)


def _run(
    facts: list[Any],
    known: list[KnownFact] | None = None,
    *,
    prompts: Prompts | None = None,
) -> tuple[ExtractionBatch, ScriptedChatModel]:
    model = ScriptedChatModel(entities=[ENTITIES], facts=facts)
    extractor = LLMExtractor(as_llm_client(model), prompts=prompts, backoff=0.0)
    if known is None:
        batch = extractor.extract([MESSAGE], [], ["Sara"])
    else:
        batch = extractor.extract([MESSAGE], [], ["Sara"], known=known)
    return batch, model


def _fact_prompts(model: ScriptedChatModel) -> list[str]:
    return [prompt for step, _, prompt in model.calls if step == "facts"]


def test_fact_prompt_lists_known_facts_and_states_the_rule() -> None:
    batch, model = _run([_moved(["K1"])], KNOWN)

    assert [step for step, _, _ in model.calls] == ["entities", "facts"]
    (prompt,) = _fact_prompts(model)
    assert (
        "Known facts:\n"
        "K1: [Sara] lives in [Lisbon] with [Joao]. (stated 2023-01-10)\n"
        "K2: [Sara] works as a nurse at [St. Mary's hospital]. (stated 2023-02-01)\n"
    ) in prompt
    rules = " ".join(prompt.split())
    assert (
        'Give a new fact "replaces": ["K3", ...] only when it makes those known facts no '
        "longer true from some time on" in rules
    )
    assert "do not write them again as new facts" in rules
    assert "Never replace a known fact with an additional detail, a repetition" in rules
    assert "true at the same time" in rules
    assert '"replaces": ["K1", ...]' in prompt  # the JSON shape
    entity_prompt = model.calls[0][2]
    assert "K1:" not in entity_prompt and "Known facts" not in entity_prompt

    (fact,) = batch.facts
    assert fact.text == MOVED and fact.sources == ("m1",)
    assert fact.replaces == ("fact-lisbon",)


@pytest.mark.parametrize(
    ("replaces", "expected"),
    [
        (["k1"], ("fact-lisbon",)),
        ([" K1 "], ("fact-lisbon",)),
        (["1"], ("fact-lisbon",)),
        ([1], ("fact-lisbon",)),
        ("K1", ("fact-lisbon",)),
        (2, ("fact-nurse",)),
        (["K1", "k1", 1, "1"], ("fact-lisbon",)),
        (["K2", "K1"], ("fact-nurse", "fact-lisbon")),
        ([], ()),
        ("", ()),
    ],
    ids=[
        "lowercase",
        "spaces",
        "bare-digit-string",
        "integer",
        "single-string",
        "single-integer",
        "duplicates",
        "order-kept",
        "empty-list",
        "empty-string",
    ],
)
def test_references_are_repaired_into_stored_ids(replaces: Any, expected: tuple[str, ...]) -> None:
    batch, model = _run([_moved(replaces)], KNOWN)
    assert len(model.calls) == 2  # no retry
    (fact,) = batch.facts
    assert fact.replaces == expected


def test_null_and_absent_replaces_give_nothing() -> None:
    batch, model = _run([_facts({"text": MOVED, "replaces": None}, {"text": "[Joao] stayed."})])
    assert len(model.calls) == 2
    assert [f.replaces for f in batch.facts] == [(), ()]


def test_unknown_reference_is_fed_back_and_the_retry_is_used() -> None:
    bad = _facts({"text": "[Sara] is happy in [Porto]."}, {"text": MOVED, "replaces": ["K7"]})
    batch, model = _run([bad, _moved(["K1"])], KNOWN)

    first, retry = _fact_prompts(model)
    problem = 'fact 2: replaces "K7" is not a known fact (K1-K2)'
    assert problem not in first
    assert problem in retry and "Your previous answer could not be used" in retry
    assert len(model.calls) == 3
    (fact,) = batch.facts
    assert fact.text == MOVED and fact.replaces == ("fact-lisbon",)


def test_unknown_reference_every_time_leaves_the_batch_pending() -> None:
    bad = _moved(["K1", "K9"])
    with pytest.raises(ExtractionError) as raised:
        _run([bad], KNOWN)
    error = raised.value
    assert error.raw_output == bad
    assert error.message_ids == ("m1",)
    assert "K9" in str(error) and "3 attempts" in str(error)


@pytest.mark.parametrize(
    "malformed",
    [{"K1": True}, 1.5, True, [{"id": "K1"}], [None], ["the old one"]],
    ids=["dict", "float", "bool", "list-of-dicts", "list-of-null", "prose"],
)
def test_malformed_replaces_is_retried(malformed: Any) -> None:
    batch, model = _run([_moved(malformed), _moved(["K2"])], KNOWN)
    first, retry = _fact_prompts(model)
    assert "fact 1:" in retry and "replaces" in retry.split("could not be used")[1]
    assert "could not be used" not in first
    (fact,) = batch.facts
    assert fact.replaces == ("fact-nurse",)


def test_a_fact_does_not_replace_the_same_text() -> None:
    # Restating K1 word for word (case and spacing aside) is not a change: the ref is dropped.
    batch, model = _run(
        [_facts({"text": "[sara]  lives in [Lisbon] with [Joao].", "replaces": ["K1", "K2"]})],
        KNOWN,
    )
    assert len(model.calls) == 2
    (fact,) = batch.facts
    assert fact.text == "[Sara] lives in [Lisbon] with [Joao]."
    assert fact.replaces == ("fact-nurse",)


def test_names_bracketed_in_known_facts_may_be_used() -> None:
    left = {"text": "[Sara] left [lisbon].", "replaces": ["K1"]}
    batch, model = _run([_facts(left)], KNOWN)
    assert len(model.calls) == 2
    (fact,) = batch.facts
    assert fact.text == "[Sara] left [Lisbon]."  # spelled as in the known fact

    # Without known facts [Lisbon] is not a listed entity: fed back and retried.
    _, model = _run([_facts({"text": "[Sara] left [Lisbon]."}), _moved()])
    assert "[Lisbon] is not in the entity list" in _fact_prompts(model)[1]


def test_without_known_facts_the_prompt_says_none() -> None:
    batch, model = _run([_moved()])
    (prompt,) = _fact_prompts(model)
    assert "Known facts:\n(none)\n" in prompt
    assert "{known}" not in prompt and "K1:" not in prompt
    (fact,) = batch.facts
    assert fact.replaces == ()

    # A reference with nothing listed is an unknown reference like any other.
    _, model = _run([_moved(["K1"]), _moved()], [])
    assert (
        'replaces "K1" is not a known fact (no known facts are listed)' in (_fact_prompts(model)[1])
    )


def test_extractor_id_and_schema_carry_the_new_prompt_version() -> None:
    extractor = LLMExtractor(as_llm_client(ScriptedChatModel()))
    assert PROMPT_VERSION == "3"
    assert extractor.id == "llm-membrain-p3"
    item = FACT_SCHEMA["properties"]["facts"]["items"]
    assert item["properties"]["replaces"]["type"] == "array"
    assert item["properties"]["replaces"]["items"] == {"type": "string"}
    assert item["required"] == ["text", "fact_ts"]


def test_an_old_custom_fact_template_without_known_still_works() -> None:
    old = (
        'HOUSE RULES. Write facts below "{divider}".\nEntities:\n{entities}\n'
        'Answer with {{"facts": [{{"text": "...", "fact_ts": "..."}}]}}\n{feedback}\n'
        "Messages:\n{window}\n"
    )
    batch, model = _run([_moved()], KNOWN, prompts=Prompts(facts=old))
    (prompt,) = _fact_prompts(model)
    assert prompt.startswith("HOUSE RULES") and "- Porto" in prompt
    assert "K1:" not in prompt and "Known facts" not in prompt
    assert [f.text for f in batch.facts] == [MOVED]


def test_offline_extractor_replaces_the_known_value_of_the_same_attribute() -> None:
    without = OfflineExtractor().extract([MESSAGE], [], ["Sara"])
    with_known = OfflineExtractor().extract([MESSAGE], [], ["Sara"], known=KNOWN)
    assert [f.text for f in with_known.facts] == [f.text for f in without.facts]
    assert all(f.replaces == () for f in without.facts)
    (moved,) = [f for f in with_known.facts if "Porto" in f.text]
    assert moved.replaces == ("fact-lisbon",)  # the residence; the job is another attribute
    looked_up: list[list[str]] = []
    lookup = OfflineExtractor().extract(
        [MESSAGE], [], ["Sara"], known=lambda keys: looked_up.append(list(keys)) or KNOWN
    )
    # looked up by the attribute the batch states (subject|attribute), one indexed lookup
    assert looked_up == [["sara|residence"]] and lookup.facts == with_known.facts
