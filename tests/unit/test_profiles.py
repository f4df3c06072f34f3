"""The user profile: versions citing facts, audited, kept up to date, first in the context."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_templates import empty_store

from membrain import ConflictError, InputError, Memory, NotFoundError, Scope
from membrain.api.audit import AuditAction
from membrain.api.models import FactStatus
from membrain.api.profile import DEFAULT_PROFILE_SCHEMA, ProfileSchema
from membrain.api.tokens import count_tokens
from membrain.testing import HashingEncoder, ScriptedChatModel

SCOPE = Scope(dataset="sara", task="assistant")
NURSE = {"speaker": "Sara", "text": "I work as a nurse.", "timestamp": "2024-01-10T10:00:00Z"}
TEACHER = {
    "speaker": "Sara",
    "text": "I quit nursing, I now work as a teacher.",
    "timestamp": "2024-06-10T10:00:00Z",
}
REPLY = {
    "speaker": "Assistant",
    "role": "assistant",
    "text": "Good luck with the new job!",
    "timestamp": "2024-06-10T10:01:00Z",
}
BERLIN = {"speaker": "Sara", "text": "I live in Berlin.", "timestamp": "2024-02-01T10:00:00Z"}


def _memory(path: Path, llm: object | None = None, **options: object) -> Memory:
    """A Memory on ``path``, a copy of an empty store when there is none there yet."""
    store = path if path.exists() else empty_store(path)
    return Memory(path=store, dense=HashingEncoder(dim=64), llm=llm, **options)  # type: ignore[arg-type]


@pytest.fixture
def offline(tmp_path: Path) -> Iterator[Memory]:
    with _memory(tmp_path / "store") as mem:
        yield mem


def _assert_two_versions(mem: Memory) -> None:
    """The job story's profile: two versions of work/occupation, each citing its fact."""
    old, new = mem.profile_history("work", "occupation", scope=SCOPE)
    assert (old.version, new.version) == (1, 2) and not new.removed
    (current,) = [e for e in mem.profile(scope=SCOPE) if e.subtopic == "occupation"]
    assert current == new and not current.stale
    cited_new = mem.get(new.fact_ids[0], scope=SCOPE)
    cited_old = mem.get(old.fact_ids[0], scope=SCOPE)
    assert "teacher" in cited_new.text and cited_new.status is FactStatus.ACTIVE
    assert "nurse" in cited_old.text and cited_old.status is FactStatus.SUPERSEDED
    assert old.stale and "nurse" in old.text and "teacher" in new.text
    events = [e for e in mem.audit(scope=SCOPE) if e.action is AuditAction.PROFILE_SET]
    assert [e.targets for e in events] == [(old.id,), (new.id,)]
    assert [e.details["fact_ids"] for e in events] == [list(old.fact_ids), list(new.fact_ids)]


# -- offline: the single-valued attributes -------------------------------------------------------
def test_offline_a_new_job_adds_a_version_citing_the_new_fact(offline: Memory) -> None:
    offline.add([NURSE], scope=SCOPE)
    offline.add([TEACHER, REPLY], scope=SCOPE)
    _assert_two_versions(offline)
    entry = offline.profile_history("work", "occupation", scope=SCOPE)[-1]
    assert entry.author == "extractor:offline-profile"
    assert "2024" not in entry.text  # times stay on the facts


def test_offline_entries_carry_no_times_and_ignore_the_assistant(offline: Memory) -> None:
    offline.add(
        [
            {
                "speaker": "Sara",
                "text": "I moved to Berlin last month.",
                "timestamp": NURSE["timestamp"],
            },
            {
                "speaker": "Assistant",
                "role": "assistant",
                "text": "I work as a travel guide myself.",
                "timestamp": "2024-01-10T10:01:00Z",
            },
        ],
        scope=SCOPE,
    )
    (entry,) = offline.profile(scope=SCOPE)
    assert (entry.topic, entry.subtopic, entry.text) == (
        "basic_info",
        "residence",
        "Sara moved to Berlin.",
    )


# -- with a model: one call per flush ------------------------------------------------------------
def _ref(prompt: str, fragment: str) -> str:
    (ref,) = re.findall(rf"^(F\d+): [^\n]*{fragment}", prompt, flags=re.MULTILINE)
    return ref


def _profile_reply(text: str, fragment: str):  # type: ignore[no-untyped-def]
    def reply(system: str, prompt: str) -> str:
        change = {"topic": "work", "subtopic": "occupation", "text": text}
        return json.dumps({"profile": [{**change, "facts": [_ref(prompt, fragment)]}]})

    return reply


def _job_model() -> ScriptedChatModel:
    def facts(system: str, prompt: str) -> str:
        if "teacher" in prompt.split("Messages:")[-1]:
            known = re.search(r"^(K\d+): [^\n]*nurse", prompt, flags=re.MULTILINE)
            item = {"text": "[Sara] works as a teacher.", "fact_ts": TEACHER["timestamp"]}
            return json.dumps({"facts": [{**item, "replaces": [known.group(1)] if known else []}]})
        return json.dumps(
            {"facts": [{"text": "[Sara] works as a nurse.", "fact_ts": NURSE["timestamp"]}]}
        )

    return ScriptedChatModel(
        entities=['{"entities": ["Sara"]}'],
        facts=[facts],
        profile=[
            _profile_reply("Sara is a nurse.", "nurse"),
            _profile_reply("Sara is a teacher.", "teacher"),
        ],
    )


def test_a_scripted_model_changes_the_job_in_two_versions(tmp_path: Path) -> None:
    model = _job_model()
    with _memory(tmp_path / "store", model) as mem:
        first = mem.add([NURSE], scope=SCOPE)
        second = mem.add([TEACHER, REPLY], scope=SCOPE)
        assert first.errors == second.errors == ()
        _assert_two_versions(mem)
        assert [e.text for e in mem.profile_history("work", "occupation", scope=SCOPE)] == [
            "Sara is a nurse.",
            "Sara is a teacher.",
        ]
        assert mem.profile(scope=SCOPE)[0].author == "extractor:llm-profile:profile-1"
    steps = [step for step, _, _ in model.calls]
    assert steps.count("profile") == 2  # one per flush


def test_a_model_that_answers_badly_leaves_the_profile_and_says_why(tmp_path: Path) -> None:
    model = _job_model()
    with _memory(tmp_path / "store", model) as mem:
        mem.add([NURSE], scope=SCOPE)
        before = mem.profile_history("work", "occupation", scope=SCOPE)
        bad = json.dumps(
            {"profile": [{"topic": "work", "subtopic": "salary", "text": "x", "facts": ["F9"]}]}
        )
        model._queues["profile"] = [bad]  # every attempt: an unknown subtopic, an unknown fact
        result = mem.add([TEACHER], scope=SCOPE)
        assert mem.profile_history("work", "occupation", scope=SCOPE) == [
            e.model_copy(update={"stale": True}) for e in before
        ]
        (error,) = result.errors
        assert "profile left unchanged" in str(error) and "not a subtopic" in str(error)
        assert all(m.status.value == "processed" for m in mem.messages(scope=SCOPE))
    prompts = [p for step, _, p in model.calls if step == "profile"]
    assert len(prompts) == 1 + 3 and "could not be used" in prompts[-1]


# -- written by the application -------------------------------------------------------------------
def test_put_forget_and_history_are_checked_and_audited(offline: Memory) -> None:
    (nurse,) = offline.add([NURSE], scope=SCOPE).fact_ids
    entry = offline.profile_put(
        "preferences", "communication", "Sara likes short answers.", scope=SCOPE, facts=[nurse[:8]]
    )
    assert entry.fact_ids == (nurse,) and entry.author == "api" and entry.version == 1
    same = offline.profile_put(
        "preferences", "communication", "Sara likes  short answers.", scope=SCOPE, facts=[nurse]
    )
    assert same == entry  # saying it again writes nothing
    with pytest.raises(InputError, match="no preferences/salary"):
        offline.profile_put("preferences", "salary", "x", scope=SCOPE)
    with pytest.raises(InputError, match="needs a text"):
        offline.profile_put("preferences", "communication", "  ", scope=SCOPE)
    with pytest.raises(InputError, match="no fact"):
        offline.profile_put("preferences", "communication", "x", scope=SCOPE, facts=["nope"])
    offline.forget([nurse], scope=SCOPE)
    with pytest.raises(ConflictError, match="forgotten"):
        offline.profile_put("preferences", "interests", "Hospitals.", scope=SCOPE, facts=[nurse])
    (stale,) = [e for e in offline.profile(scope=SCOPE) if e.topic == "preferences"]
    assert stale.stale  # a cited fact was forgotten: out of the context until refreshed
    removed = offline.profile_forget("preferences", "communication", scope=SCOPE, by="agent:x")
    assert removed.removed and removed.version == 2 and removed.author == "agent:x"
    assert all(e.topic != "preferences" for e in offline.profile(scope=SCOPE))
    with pytest.raises(NotFoundError):
        offline.profile_forget("preferences", "communication", scope=SCOPE)
    versions = offline.profile_history("preferences", "communication", scope=SCOPE)
    assert [v.version for v in versions] == [1, 2]
    actions = [e.action for e in offline.audit(scope=SCOPE, targets=[v.id for v in versions])]
    assert actions == [AuditAction.PROFILE_SET, AuditAction.PROFILE_REMOVED]


def test_a_topic_holds_at_most_its_cap(tmp_path: Path) -> None:
    schema = ProfileSchema.model_validate(
        {"strict": False, "topics": [{"name": "notes", "cap": 2}]}
    )
    with _memory(tmp_path / "store", profile_schema=schema) as mem:
        mem.profile_put("notes", "a", "One.", scope=SCOPE)
        mem.profile_put("notes", "b", "Two.", scope=SCOPE)
        with pytest.raises(InputError, match="holds its 2 entries"):
            mem.profile_put("notes", "c", "Three.", scope=SCOPE)
        mem.profile_put("notes", "a", "One again.", scope=SCOPE)  # a new version fits
        with pytest.raises(InputError, match="topics: notes"):
            mem.profile_put("other", "a", "x", scope=SCOPE)


def test_a_purged_fact_takes_the_entries_citing_it(offline: Memory) -> None:
    (nurse,) = offline.add([NURSE], scope=SCOPE).fact_ids
    assert offline.profile(scope=SCOPE)
    offline.purge([nurse], scope=SCOPE, messages=True)
    assert offline.profile(scope=SCOPE) == []
    with pytest.raises(NotFoundError):
        offline.profile_history("work", "occupation", scope=SCOPE)


# -- the context: profile first, one budget ---------------------------------------------------
@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with _memory(tmp_path_factory.mktemp("profiled") / "store") as mem:
        mem.add([NURSE, BERLIN, TEACHER], scope=SCOPE)
        mem.add(
            [
                {
                    "speaker": "Sara",
                    "text": f"On day {n} I walked my dog Rex in the park.",
                    "timestamp": f"2024-03-{n:02d}T09:00:00Z",
                }
                for n in range(1, 25)
            ],
            scope=SCOPE,
        )
        mem.profile_put("preferences", "communication", "Sara wants short answers.", scope=SCOPE)
        yield mem


def test_the_context_opens_with_the_profile_and_gives_its_rest_to_the_facts(
    profiled: Memory,
) -> None:
    plain = profiled.context("Where does Sara walk Rex?", scope=SCOPE, max_tokens=1000)
    with_profile = profiled.context(
        "Where does Sara walk Rex?", scope=SCOPE, max_tokens=1000, profile_ratio=0.3
    )
    assert with_profile.text.startswith("## Profile\n- basic_info/residence: Sara lives in Berlin.")
    assert [e.subtopic for e in with_profile.profile] == [
        "residence",
        "occupation",
        "communication",
    ]
    assert with_profile.tokens <= 1000 and with_profile.profile_tokens == 300
    block = with_profile.text.split("\n\n", 1)[0]
    assert count_tokens(block) < 300  # the unused share went to the facts
    assert len(with_profile.hits) >= len(plain.hits) - 3
    other = profiled.context("What is Sara's job?", scope=SCOPE, max_tokens=1000, profile_ratio=0.3)
    assert other.text.split("\n\n", 1)[0] == block  # the same block every turn: a cacheable prefix


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(budget=st.integers(min_value=1, max_value=1500), ratio=st.floats(min_value=0, max_value=1))
def test_the_context_never_exceeds_its_budget(profiled: Memory, budget: int, ratio: float) -> None:
    found = profiled.context(
        "Rex in the park", scope=SCOPE, max_tokens=budget, profile_ratio=ratio, mode="fast"
    )
    assert found.tokens == count_tokens(found.text) <= budget
    if found.profile:
        assert found.text.startswith("## Profile\n")
        assert count_tokens(found.text.split("\n\n", 1)[0]) <= int(ratio * budget)


def test_bad_ratios_are_refused(profiled: Memory) -> None:
    for bad in (-0.1, 1.5, True, "0.3"):
        with pytest.raises(InputError):
            profiled.context("x", scope=SCOPE, profile_ratio=bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="excludes profile_tokens"):
        profiled.context("x", scope=SCOPE, profile_ratio=0.2, profile_tokens=10)


# -- the schema ----------------------------------------------------------------------------------
def test_a_schema_loads_from_toml_and_yaml(tmp_path: Path) -> None:
    toml = tmp_path / "schema.toml"
    toml.write_text(
        'strict = false\n[[topics]]\nname = "study"\ncap = 3\n'
        '[[topics.subtopics]]\nname = "subject"\ndescription = "What is studied."\n'
    )
    yaml = tmp_path / "schema.yaml"
    yaml.write_text(
        "strict: false\ntopics:\n  - name: study\n    cap: 3\n    subtopics:\n"
        "      - {name: subject, description: What is studied.}\n"
    )
    assert ProfileSchema.load(toml) == ProfileSchema.load(yaml)
    schema = ProfileSchema.load(toml)
    assert schema.admits("study", "deadline") and not schema.admits("work", "occupation")
    assert DEFAULT_PROFILE_SCHEMA.strict and not DEFAULT_PROFILE_SCHEMA.admits("work", "deadline")
    broken = tmp_path / "broken.toml"
    broken.write_text('[[topics]]\nname = "Bad Name"\n')
    with pytest.raises(Exception, match="not a profile schema"):
        ProfileSchema.load(broken)


def test_a_bulk_import_shows_the_model_only_the_latest_facts(tmp_path: Path) -> None:
    turns = [
        {"speaker": "Sara", "text": f"Note {n}.", "timestamp": f"2024-01-01T10:{n:02d}:00Z"}
        for n in range(45)
    ]

    def facts(system: str, prompt: str) -> str:
        notes = re.findall(r"Sara: Note (\d+)\.", prompt.split("Messages:")[-1].split("---")[-1])
        items = [{"text": f"[Sara] wrote note {n}.", "fact_ts": NURSE["timestamp"]} for n in notes]
        return json.dumps({"facts": items})

    model = ScriptedChatModel(entities=['{"entities": ["Sara"]}'], facts=[facts])
    with _memory(tmp_path / "store", model, batch_size=50) as mem:
        assert len(mem.add(turns, scope=SCOPE).fact_ids) == 45
    (prompt,) = [p for step, _, p in model.calls if step == "profile"]
    shown = re.findall(r"^F\d+: Sara wrote note (\d+)\.", prompt, flags=re.MULTILINE)
    assert sorted(map(int, shown)) == list(range(15, 45))  # the latest 30
