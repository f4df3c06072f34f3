"""Supersession end to end: the model's ``replaces``, ``Memory.supersede``, chains, ``as_of``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from accountability_fixtures import (
    MODES,
    SwitchModel,
    Turn,
    fact_prompts,
    fact_reply,
    fresh_scope,
    open_memory,
    ref_for,
    steps,
    story_model,
)

from membrain import (
    AuditAction,
    FactStatus,
    InputError,
    Memory,
    MessageStatus,
    Scope,
)
from membrain.api.models import now
from membrain.testing import ScriptedChatModel

LISBON_TEXT = "[Sara] lives in [Lisbon] with her partner [Joao]."
BERLIN_TEXT = "[Sara] moved to [Berlin] [last month::2024-04] and lives there now."
ZALANDO_TEXT = "[Sara] has a new job at [Zalando]."


def berlin_facts(prompt: str) -> list[Any]:
    """The second message's facts; the replaced fact's K-number is read from the prompt."""
    return [
        {"text": BERLIN_TEXT, "replaces": [ref_for(prompt, "[Lisbon]")]},
        ZALANDO_TEXT,
    ]


LISBON = Turn(
    "Sara",
    "I live in Lisbon with my partner Joao.",
    "2023-01-10T10:00:00Z",
    ["Sara", "Lisbon", "Joao"],
    [LISBON_TEXT],
)
BERLIN = Turn(
    "Sara",
    "Big news: I moved to Berlin last month, new job at Zalando.",
    "2024-05-02T09:00:00Z",
    ["Sara", "Berlin", "Zalando"],
    berlin_facts,
)


@pytest.fixture(scope="module")
def switch() -> SwitchModel:
    return SwitchModel()


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, switch: SwitchModel) -> Iterator[Memory]:
    """One store for the module; every test works in its own scope."""
    with open_memory(tmp_path_factory.mktemp("supersession") / "store", switch) as memory:
        yield memory


@pytest.fixture
def scope() -> Scope:
    return fresh_scope()


@dataclass
class Story:
    mem: Memory
    scope: Scope
    model: ScriptedChatModel
    lisbon: str
    berlin: str
    zalando: str
    between: datetime
    """Wall-clock time after the first add, before the second."""
    after: datetime
    """Wall-clock time after the second add."""
    second_calls: list[str]
    second_llm_calls: int


@pytest.fixture
def story(mem: Memory, switch: SwitchModel, scope: Scope) -> Story:
    model = switch.current = story_model(LISBON, BERLIN)
    (lisbon,) = mem.add([LISBON.message()], scope=scope).fact_ids
    before = len(model.calls)
    between = now()
    result = mem.add([BERLIN.message()], scope=scope)
    after = now()
    assert not result.errors
    berlin, zalando = result.fact_ids
    return Story(
        mem,
        scope,
        model,
        lisbon,
        berlin,
        zalando,
        between,
        after,
        steps(model, before),
        result.llm_calls,
    )


def fact(mem: Memory, scope: Scope, fact_id: str) -> Any:
    (found,) = mem.store.get_facts(scope, [fact_id])
    return found


def ids(result: Any) -> list[str]:
    return [hit.fact.id for hit in result]


# -- 1. the Lisbon -> Berlin story -----------------------------------------------------------------
def test_the_model_replaces_lisbon_by_berlin_in_two_extraction_calls(story: Story) -> None:
    mem = story.mem
    assert story.second_calls == ["entities", "facts", "profile"]  # the profile follows the move
    assert story.second_llm_calls == 3
    (prompt,) = fact_prompts(story.model)[1:]
    assert f"{ref_for(prompt, '[Lisbon]')}: {LISBON_TEXT} (stated 2023-01-10)" in prompt

    lisbon, berlin = fact(mem, story.scope, story.lisbon), fact(mem, story.scope, story.berlin)
    assert lisbon.text == LISBON_TEXT and berlin.text == BERLIN_TEXT
    assert lisbon.status is FactStatus.SUPERSEDED
    assert lisbon.superseded_by == (story.berlin,)
    assert lisbon.superseded_at is not None
    assert story.between <= lisbon.superseded_at <= story.after
    assert lisbon.valid_to == datetime(2024, 4, 1, tzinfo=UTC)
    assert berlin.status is FactStatus.ACTIVE and berlin.supersedes == (story.lisbon,)
    assert fact(mem, story.scope, story.zalando).supersedes == ()
    assert {f.id for f in mem.facts(scope=story.scope)} == {story.berlin, story.zalando}


@pytest.mark.parametrize("mode", MODES)
def test_where_does_sara_live_finds_berlin_and_not_lisbon(story: Story, mode: str) -> None:
    found = ids(story.mem.search("Where does Sara live?", scope=story.scope, mode=mode))
    assert found[0] == story.berlin
    assert story.lisbon not in found


def test_history_of_berlin_shows_the_replacement(story: Story) -> None:
    history = story.mem.history(story.berlin, scope=story.scope)
    assert [f.id for f in history.facts] == [story.lisbon, story.berlin]
    assert history.fact is not None and history.fact.id == story.berlin
    (superseded,) = [e for e in history if e.action is AuditAction.SUPERSEDED]
    assert superseded.targets == (story.lisbon,)
    assert superseded.details["superseded_by"] == [story.berlin]
    assert str(superseded.actor) == "extractor:llm-membrain-p3"
    created = [e.targets for e in history if e.action is AuditAction.CREATED]
    assert (story.lisbon,) in created and (story.berlin,) in created
    text = history.text()
    assert f"superseded {story.lisbon}" in text and f"by {story.berlin}" in text


def test_as_of_between_the_adds_reads_the_old_belief(story: Story) -> None:
    found = ids(story.mem.search("Where does Sara live?", scope=story.scope, as_of=story.between))
    assert story.lisbon in found
    assert story.berlin not in found and story.zalando not in found
    later = ids(story.mem.search("Where does Sara live?", scope=story.scope, as_of=story.after))
    assert story.berlin in later and story.lisbon not in later


def test_questions_about_2023_find_lisbon(story: Story) -> None:
    mem = story.mem
    found = ids(mem.search("Where did Sara live in 2023?", scope=story.scope))
    assert found[0] == story.lisbon
    june = datetime(2023, 6, 1, tzinfo=UTC)
    assert story.lisbon in ids(
        mem.search("Where does Sara live?", scope=story.scope, valid_at=june)
    )
    # A valid time after the move does not bring Lisbon back.
    later = datetime(2024, 4, 15, tzinfo=UTC)
    assert story.lisbon not in ids(
        mem.search("Where does Sara live?", scope=story.scope, valid_at=later)
    )

    context = mem.context("Where did Sara live in 2023?", scope=story.scope)
    (line,) = [ln for ln in context.text.splitlines() if "Lisbon" in ln]
    day = fact(mem, story.scope, story.lisbon).superseded_at.strftime("%Y-%m-%d")
    assert f"(superseded {day} by fact {story.berlin[:8]})" in line
    (berlin_line,) = [ln for ln in context.text.splitlines() if "Berlin" in ln]
    assert "superseded" not in berlin_line


# -- 2. and 3. references the model gets wrong -----------------------------------------------------
def _bad_berlin(replaces: Any) -> str:
    item = {"text": BERLIN_TEXT, "fact_ts": BERLIN.ts, "replaces": replaces}
    return json.dumps({"facts": [item, {"text": ZALANDO_TEXT, "fact_ts": BERLIN.ts}]})


def _run_second(
    mem: Memory, switch: SwitchModel, scope: Scope, second: list[Any]
) -> tuple[ScriptedChatModel, Any, int]:
    model = switch.current = story_model(LISBON, BERLIN, facts=[fact_reply([LISBON]), *second])
    mem.add([LISBON.message()], scope=scope)
    before = len(model.calls)
    result = mem.add([BERLIN.message()], scope=scope)
    return model, result, before


@pytest.mark.parametrize(
    "bad",
    [["K9"], {"K1": True}, 1.5],
    ids=["unknown-K9", "dict", "float"],
)
def test_a_bad_reference_is_fed_back_and_the_retry_is_stored(
    mem: Memory, switch: SwitchModel, scope: Scope, bad: Any
) -> None:
    model, result, before = _run_second(
        mem, switch, scope, [_bad_berlin(bad), fact_reply([LISBON, BERLIN])]
    )
    assert steps(model, before) == ["entities", "facts", "facts", "profile"]
    assert result.llm_calls == 4
    first, retry = fact_prompts(model, before)
    assert "could not be used" not in first
    feedback = retry.split("Your previous answer could not be used:", 1)[1]
    feedback = feedback.split("Answer again", 1)[0]
    assert "fact 1" in feedback and "replaces" in feedback
    if bad == ["K9"]:
        assert '"K9" is not a known fact (K1)' in feedback
    assert not result.errors
    berlin, zalando = result.fact_ids
    lisbon = next(
        f for f in mem.facts(scope=scope, include_inactive=True) if f.id not in (berlin, zalando)
    )
    assert lisbon.status is FactStatus.SUPERSEDED and lisbon.superseded_by == (berlin,)
    assert all(m.status is MessageStatus.PROCESSED for m in mem.messages(scope=scope))


@pytest.mark.parametrize("bad", [["K9"], {"K1": True}, 1.5], ids=["unknown-K9", "dict", "float"])
def test_three_bad_references_leave_the_messages_pending(
    mem: Memory, switch: SwitchModel, scope: Scope, bad: Any
) -> None:
    model, result, before = _run_second(mem, switch, scope, [_bad_berlin(bad)])
    assert steps(model, before) == ["entities", "facts", "facts", "facts"]
    (error,) = result.errors
    assert "3 attempts" in str(error) and "replaces" in str(error)
    assert result.fact_ids == ()
    berlin_message = next(m for m in mem.messages(scope=scope) if "Berlin" in m.message.text)
    assert berlin_message.status is MessageStatus.PENDING
    assert berlin_message.error and "replaces" in berlin_message.error
    assert error.message_ids == (berlin_message.id,)
    (lisbon,) = mem.facts(scope=scope, include_inactive=True)
    assert lisbon.status is FactStatus.ACTIVE and lisbon.superseded_by == ()
    assert mem.audit(scope=scope, actions=["superseded"]) == []
    failed = mem.audit(scope=scope, actions=["extraction_failed"])
    assert [e.targets for e in failed] == [(berlin_message.id,)]


# -- 4. Memory.supersede rules -----------------------------------------------------------------
def test_superseding_an_already_superseded_fact_keeps_its_first_times(story: Story) -> None:
    mem = story.mem
    first = fact(mem, story.scope, story.lisbon)
    old = mem.supersede(story.lisbon, [story.zalando], scope=story.scope, by="reviewer:ana")
    assert old.id == story.lisbon
    assert old.superseded_by == (story.berlin, story.zalando)
    again = fact(mem, story.scope, story.lisbon)
    assert again.superseded_by == (story.berlin, story.zalando)
    assert again.superseded_at == first.superseded_at
    assert again.valid_to == first.valid_to == datetime(2024, 4, 1, tzinfo=UTC)
    assert again.status is FactStatus.SUPERSEDED
    assert fact(mem, story.scope, story.zalando).supersedes == (story.lisbon,)
    last = mem.audit(scope=story.scope, actions=["superseded"])[-1]
    assert str(last.actor) == "reviewer:ana" and last.targets == (story.lisbon,)
    assert last.details["superseded_by"] == [story.zalando]


def test_supersede_refuses_retracted_self_and_unknown_facts(story: Story) -> None:
    mem = story.mem
    item = mem.dispute([story.zalando], scope=story.scope, reason="not true", by="ana")
    mem.resolve(item.id, scope=story.scope, accept=False)
    assert fact(mem, story.scope, story.zalando).status is FactStatus.RETRACTED

    def snapshot() -> tuple[list[Any], int]:
        facts = sorted(mem.facts(scope=story.scope, include_inactive=True), key=lambda f: f.id)
        return facts, len(mem.audit(scope=story.scope))

    before = snapshot()
    with pytest.raises(InputError, match="retracted"):
        mem.supersede(story.zalando, [story.berlin], scope=story.scope)
    with pytest.raises(InputError, match="itself"):
        mem.supersede(story.berlin, [story.berlin], scope=story.scope)
    with pytest.raises(InputError, match="itself"):
        mem.supersede(story.berlin, [story.lisbon, story.berlin], scope=story.scope)
    with pytest.raises(InputError):
        mem.supersede(story.berlin, [], scope=story.scope)
    with pytest.raises(InputError, match="no-such-fact"):
        mem.supersede("no-such-fact", [story.berlin], scope=story.scope)
    with pytest.raises(InputError, match="no-such-fact"):
        mem.supersede(story.berlin, [story.lisbon, "no-such-fact"], scope=story.scope)
    assert snapshot() == before
    assert fact(mem, story.scope, story.berlin).status is FactStatus.ACTIVE


# -- 5. chains ---------------------------------------------------------------------------------
SCOOTER = Turn(
    "Sara",
    "I ride my red Vespa scooter to work.",
    "2023-03-01T08:00:00Z",
    ["Sara"],
    ["[Sara] rides a red Vespa scooter to work."],
)
BIKE = Turn(
    "Sara",
    "Sold the scooter, I cycle now.",
    "2023-09-01T08:00:00Z",
    ["Sara"],
    lambda prompt: [
        {"text": "[Sara] sold it and cycles to the office.", "replaces": [ref_for(prompt, "Vespa")]}
    ],
)
TRAM = Turn(
    "Sara",
    "Too cold for cycling, I take the tram.",
    "2024-01-15T08:00:00Z",
    ["Sara"],
    ["[Sara] commutes by tram since January."],
)


def test_a_chain_a_b_c_by_model_and_by_hand(mem: Memory, switch: SwitchModel, scope: Scope) -> None:
    switch.current = story_model(SCOOTER, BIKE, TRAM)
    (a,) = mem.add([SCOOTER.message()], scope=scope).fact_ids
    (b,) = mem.add([BIKE.message()], scope=scope).fact_ids  # the model: B replaces A
    (c,) = mem.add([TRAM.message()], scope=scope).fact_ids
    mem.supersede(b, [c], scope=scope, reason="tram now")  # by hand: C replaces B

    assert fact(mem, scope, a).superseded_by == (b,) and fact(mem, scope, b).superseded_by == (c,)
    assert fact(mem, scope, c).supersedes == (b,) and fact(mem, scope, b).supersedes == (a,)
    for start in (c, a, b):
        history = mem.history(start, scope=scope)
        assert [f.id for f in history.facts] == [a, b, c], start
        superseded = [e for e in history if e.action is AuditAction.SUPERSEDED]
        assert [(e.targets, e.details["superseded_by"]) for e in superseded] == [
            ((a,), [b]),
            ((b,), [c]),
        ]
        assert [e.at for e in history] == sorted(e.at for e in history)

    for mode in MODES:
        found = ids(mem.search("How does Sara get to work?", scope=scope, mode=mode))
        assert c in found and a not in found and b not in found, mode

    # The question shares its words with A only: the replaced path brings C.
    result = mem.search("red Vespa scooter", scope=scope, mode="fast")
    assert "replaced" in result.paths
    assert ids(result)[0] == c and a not in ids(result) and b not in ids(result)
    assert "replaced" in result[0].paths
    without = mem.search("red Vespa scooter", scope=scope, mode="fast", exclude_paths=["replaced"])
    assert "replaced" not in without.paths
    assert all("replaced" not in hit.paths for hit in without)


# -- 6. as_of reads ----------------------------------------------------------------------------
def test_as_of_reads_forgotten_and_later_facts(story: Story) -> None:
    mem = story.mem
    before_forget = now()
    mem.forget([story.zalando], scope=story.scope, reason="left the job")
    after_forget = now()
    question = "Where does Sara work? new job"

    def found(at: datetime | None) -> list[str]:
        return ids(mem.search(question, scope=story.scope, as_of=at))

    assert story.zalando in found(before_forget)
    assert story.zalando not in found(after_forget)
    assert story.zalando not in found(None)
    # Recorded after the moment: never returned as of it.
    assert story.zalando not in found(story.between)
    assert story.berlin not in found(story.between)

    context = mem.context(question, scope=story.scope, as_of=before_forget)
    (line,) = [ln for ln in context.text.splitlines() if "Zalando" in ln]
    assert "forgotten" in line
    assert story.zalando in [h.fact.id for h in context.hits]
    for at in (after_forget, story.between):
        context = mem.context(question, scope=story.scope, as_of=at)
        assert "Zalando" not in context.text
        assert story.zalando not in [h.fact.id for h in context.hits]
    assert mem.review_queue(scope=story.scope) == []


# -- sessions ----------------------------------------------------------------------------------
def test_a_session_reads_the_supersession_of_its_own_facts(
    mem: Memory, switch: SwitchModel, scope: Scope
) -> None:
    session = scope.model_copy(update={"session": "s1"})
    switch.current = story_model(LISBON, BERLIN)
    (lisbon,) = mem.add([LISBON.message()], scope=session).fact_ids
    berlin, _ = mem.add([BERLIN.message()], scope=session).fact_ids
    assert fact(mem, session, lisbon).superseded_by == (berlin,)
    # Read without the session, the history has the supersession event ...
    whole = mem.history(berlin, scope=scope)
    assert AuditAction.SUPERSEDED in [e.action for e in whole]
    # ... and read in the session where both facts live (and were extracted), too.
    history = mem.history(berlin, scope=session)
    assert [f.id for f in history.facts] == [lisbon, berlin]
    assert AuditAction.SUPERSEDED in [e.action for e in history], [e.action for e in history]
    assert [e.targets for e in mem.audit(scope=session, actions=["superseded"])] == [(lisbon,)]
