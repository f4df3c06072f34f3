"""The core ``Memory`` API over the Qdrant client backend, in qdrant-client's ``:memory:`` mode.

A memory on a Qdrant server (``qdrant_url=``) runs the same backend code, so these tests run it
without a server: add, every retrieval mode and every search path, supersede, forget, purge and
``as_of`` reads. With ``QDRANT_URL`` set they run on that server too (see ``conftest.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from membrain import AuditAction, FactStatus, Memory, MessageStatus, RetrievalMode, Scope
from membrain.api.models import now
from membrain.backends.base import Backend
from membrain.backends.client import QdrantClientBackend

from .conftest import DENSE_ENCODER, SPARSE_ENCODER

MODES = [mode.value for mode in RetrievalMode]
SEARCH_PATHS = ("bm25", "dense", "hyde", "event", "entity_tree", "boolean")
ALL_PATHS = (
    *SEARCH_PATHS,
    "replaced",
    "asked",
    "turn",
    "reply",
    "time",
    "stated",
    "when",
    "answers",
)

CHAT = [
    {"speaker": "Sara", "text": "Hey Nate!", "timestamp": "2024-03-15T14:00:00Z", "id": "m0"},
    {
        "speaker": "Sara",
        "text": "I adopted a grey cat named Miso.",
        "timestamp": "2024-03-15T14:01:00Z",
        "id": "m1",
    },
    {
        "speaker": "Nate",
        "text": "I bake croissants at my bakery every Tuesday.",
        "timestamp": "2024-03-15T14:02:00Z",
        "id": "m2",
    },
    {
        "speaker": "Sara",
        "text": "My sister Lina lives in Lisbon.",
        "timestamp": "2024-03-15T14:03:00Z",
        "id": "m3",
    },
]
CAT = "[Sara] adopted a grey cat named [Miso]."
CAT_QUESTION = "Which cat did Sara adopt?"

_scopes = itertools.count()


@pytest.fixture(params=["client-memory", "client-server"])
def backend_name(request: pytest.FixtureRequest) -> str:
    """The client backends of ``conftest.backend`` (the server one needs ``QDRANT_URL``)."""
    return str(request.param)


@pytest.fixture
def memory(backend: Backend) -> Iterator[Memory]:
    """A memory over a fresh client backend, with the suite's fast encoders."""
    with Memory(backend=backend, dense=DENSE_ENCODER, sparse=SPARSE_ENCODER) as mem:
        yield mem


@pytest.fixture
def scope() -> Scope:
    return Scope(dataset="sara", task=f"client-{next(_scopes)}")


def hit_ids(result: Any) -> list[str]:
    return [hit.fact.id for hit in result]


def fact_id(memory: Memory, scope: Scope, text: str) -> str:
    (found,) = [f.id for f in memory.facts(scope=scope, include_inactive=True) if f.text == text]
    return found


def finders(memory: Memory, scope: Scope, question: str, wanted: str, **options: Any) -> list[str]:
    """Which modes, and which search paths alone, return the fact ``wanted``."""
    found = [
        mode
        for mode in MODES
        if wanted in hit_ids(memory.search(question, scope=scope, mode=mode, **options))
    ]
    for path in SEARCH_PATHS:
        others = [p for p in ALL_PATHS if p != path]
        alone = memory.search(question, scope=scope, mode="deep", exclude_paths=others, **options)
        assert alone.paths == (path,)
        if wanted in hit_ids(alone):
            found.append(path)
    return found


def test_the_memory_runs_on_the_client_backend(memory: Memory) -> None:
    assert isinstance(memory.store.backend, QdrantClientBackend)


def test_add_stores_messages_and_cited_facts(memory: Memory, scope: Scope) -> None:
    result = memory.add(CHAT, scope=scope)
    assert result.messages_stored == 4 and not result.errors
    stored = memory.messages(scope=scope)
    assert all(m.status is MessageStatus.PROCESSED for m in stored)
    facts = memory.facts(scope=scope)
    assert len(facts) == len(result.fact_ids) == 3
    cat = next(f for f in facts if f.text == CAT)
    assert [m.message.source_id for m in stored if m.id in cat.sources] == ["m1"]
    assert memory.add(CHAT, scope=scope).messages_stored == 0  # nothing is written twice
    assert set(memory.participants(scope=scope)) == {"Sara", "Nate"}


def test_every_mode_and_every_path_finds_the_fact(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    cat = fact_id(memory, scope, CAT)
    assert finders(memory, scope, CAT_QUESTION, cat) == [*MODES, *SEARCH_PATHS]
    for mode in MODES:
        result = memory.search("Where does Lina live?", scope=scope, mode=mode, k=3)
        assert "Lisbon" in result[0].fact.text, mode
        assert [m.source_id for m in result[0].sources] == ["m3"]
    other = Scope(dataset="nate", task=scope.task)
    assert not memory.search(CAT_QUESTION, scope=other, mode="deep")  # no read crosses scopes


def test_supersede_replaces_a_belief_and_as_of_reads_the_old_one(
    memory: Memory, scope: Scope
) -> None:
    memory.add(CHAT, scope=scope)
    cat = fact_id(memory, scope, CAT)
    before = now()
    memory.add(
        [
            {
                "speaker": "Sara",
                "text": "I adopted a black cat named Tofu.",
                "timestamp": "2024-04-02T09:00:00Z",
                "id": "m4",
            }
        ],
        scope=scope,
    )
    tofu = fact_id(memory, scope, "[Sara] adopted a black cat named [Tofu].")
    old = memory.supersede(cat, [tofu], scope=scope, by="ana", reason="a new cat")
    assert old.status is FactStatus.SUPERSEDED and old.superseded_by == (tofu,)
    assert {f.id: f for f in memory.facts(scope=scope)}[tofu].supersedes == (cat,)
    assert cat not in {f.id for f in memory.facts(scope=scope)}
    for mode in MODES:
        found = hit_ids(memory.search(CAT_QUESTION, scope=scope, mode=mode))
        assert tofu in found and cat not in found, mode
    past = hit_ids(memory.search(CAT_QUESTION, scope=scope, as_of=before))
    assert cat in past and tofu not in past
    (event,) = memory.audit(scope=scope, actions=["superseded"], targets=[cat])
    assert event.actor.name == "ana"


def test_forget_leaves_every_search_but_not_the_past(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    cat = fact_id(memory, scope, CAT)
    before = now()
    (gone,) = memory.forget([cat], scope=scope, reason="asked to")
    assert gone.status is FactStatus.FORGOTTEN
    assert finders(memory, scope, CAT_QUESTION, cat) == []
    assert cat in {f.id for f in memory.facts(scope=scope, include_inactive=True)}
    past = finders(memory, scope, CAT_QUESTION, cat, as_of=before)
    assert past[: len(MODES)] == MODES and {"bm25", "dense"} <= set(past)


def test_purge_erases_the_fact_and_its_message(memory: Memory, scope: Scope) -> None:
    memory.add(CHAT, scope=scope)
    cat = fact_id(memory, scope, CAT)
    before = now()
    assert finders(memory, scope, CAT_QUESTION, cat) == [*MODES, *SEARCH_PATHS]
    result = memory.purge([cat], scope=scope, messages=True, by="ana", reason="asked to")
    assert result.fact_ids == (cat,) and len(result.message_ids) == 1
    assert finders(memory, scope, CAT_QUESTION, cat) == []
    assert cat not in hit_ids(memory.search(CAT_QUESTION, scope=scope, as_of=before))
    assert memory.store.get_facts(scope, [cat]) == []
    assert "Miso" not in " ".join(m.message.text for m in memory.messages(scope=scope))
    assert "Miso" not in memory.context(CAT_QUESTION, scope=scope).text
    assert [e.action for e in memory.history(cat, scope=scope)][-1] is AuditAction.PURGED
    assert len(memory.facts(scope=scope)) == 2  # the other facts stay
