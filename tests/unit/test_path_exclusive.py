"""Each Qdrant path (bm25, dense, hyde, event) finds an answer that the other three miss.

SPEC asks for a small hand-made conversation per path where that path, and only that path, finds
the answer (``entity_tree`` and ``boolean`` have theirs in ``test_path_entity.py`` and
``test_path_boolean.py``).
Every case runs the real :func:`~membrain.retrieval.vector_paths.vector_paths` with the packaged
dense model (all-MiniLM-L6-v2, offline) and Qdrant Edge's BM25, and asserts both sides: the path
ranks the answer first, and each of the other three ranks at least two other facts above it.

What separates the paths is what they embed (see :mod:`membrain.retrieval.rewrite`; participants'
names read "they" in every dense text):

* **bm25**: BM25 terms of the question — exact words, names included;
* **dense**: the question itself, question word and all ("When did they go hiking?");
* **hyde**: the declarative stem ("they went hiking");
* **event**: the bare event words ("go hiking"), among the facts of the participant the question
  names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import pytest

from membrain.api.models import Scope
from membrain.backends.edge import open_edge_backend
from membrain.embeddings import Bm25Encoder, FastEmbedEncoder
from membrain.extraction.base import FactDraft
from membrain.knowledge.facts import build_facts
from membrain.records import RecordStore
from membrain.retrieval.base import SearchContext
from membrain.retrieval.rewrite import deterministic_rewrites
from membrain.retrieval.vector_paths import vector_paths

T0 = datetime(2024, 3, 1, tzinfo=UTC)
PARTICIPANTS = ("Sara",)
PATHS = ("bm25", "dense", "hyde", "event")
# The other paths must rank at least this many facts above the answer.
MISSED_BY = 2


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordStore]:
    store = RecordStore(
        open_edge_backend(tmp_path_factory.mktemp("exclusive") / "s"),
        FastEmbedEncoder(),
        Bm25Encoder(),
    )
    yield store
    store.backend.close()


@pytest.fixture
def scope(request: pytest.FixtureRequest) -> Scope:
    return Scope(dataset=re.sub(r"[^\w.-]", "-", request.node.name)[:120], task="exclusive")


def rank_all(
    store: RecordStore, scope: Scope, texts: Sequence[str], question: str
) -> dict[str, list[str]]:
    """Store the facts, run the four paths and return each path's ranking as fact texts."""
    drafts = [FactDraft(text=t, sources=(f"m-{i}",), stated_at=T0) for i, t in enumerate(texts)]
    facts, _ = build_facts(scope, drafts, extractor="test", recorded_at=T0)
    assert len(facts) == len(texts)
    store.put_facts(scope, facts, PARTICIPANTS)
    text_of = {f.id: f.text for f in facts}
    ctx = SearchContext(
        question=question,
        scope=scope,
        store=store,
        participants=PARTICIPANTS,
        limit=10,
    )
    paths = vector_paths(rewritten_keywords=False)
    return {name: [text_of[r.id] for r in paths[name].run(ctx)] for name in PATHS}


def assert_only(path: str, answer: str, ranked: dict[str, list[str]]) -> None:
    """``path`` ranks ``answer`` first; every other path ranks it below ``MISSED_BY`` facts."""
    assert ranked[path][:1] == [answer], f"path {path} missed the answer: {ranked}"
    for other in PATHS:
        if other != path:
            assert answer in ranked[other], f"path {other} lost the fact: {ranked}"
            assert answer not in ranked[other][:MISSED_BY], f"path {other} found it: {ranked}"


def test_only_bm25_finds_the_dogs_trick(store: RecordStore, scope: Scope) -> None:
    """bm25: the dog's name "Pip" is the one link, and BM25 matches it exactly.

    Besides "Pip", the answer shares only the speaker's name with the question ("shake hands" is
    what Sara taught). The dense model reads names as sub-word pieces, so "Pip" sits near "Pippa"
    and "Pippin", and the facts about teaching the niece and the nephew rank above the answer for
    all three dense queries ("they taught Pip", "teach Pip", the question); BM25 gives those facts
    only the name every fact shares ("taught" does not stem to "teach").
    """
    answer = "[Sara]'s dog [Pip] can shake hands now."
    facts = [
        answer,
        "[Sara] taught her niece [Pippa] to swim.",
        "[Sara] taught [Pippa] how to ride a bike.",
        "[Pippa] is learning to read with [Sara]'s help.",
        "[Pippa] learned to tie her shoes from [Sara].",
        "[Sara] taught her nephew [Pippin] to play chess.",
        "[Sara] cooked [lasagna] for dinner.",
        "[Sara] went to the beach with [Tom].",
    ]
    ranked = rank_all(store, scope, facts, "What did Sara teach Pip?")
    assert_only("bm25", answer, ranked)


def test_only_dense_finds_the_hike_date(store: RecordStore, scope: Scope) -> None:
    """dense: the question word "When" pulls the one hiking fact that carries a date.

    hyde ("they went hiking") has no question word and prefers the plain accounts of hikes (the
    lake, the mountains); event ("go hiking") prefers the general facts about hiking. BM25 ranks
    "wants to go hiking" first, the one fact with the question's rare "go" (the answer says
    "went").
    """
    answer = "[Sara] went hiking on 14 May 2023."
    facts = [
        answer,
        "[Sara] went hiking in the mountains with friends.",
        "[Sara] went hiking near the lake.",
        "[Sara] goes hiking to relax.",
        "Hiking is [Sara]'s favourite way to relax.",
        "[Sara] wants to go hiking more often.",
        "[Tom] goes hiking every weekend.",
        "[Sara] bought new boots for hiking.",
        "[Sara] plays tennis with [Tom].",
    ]
    ranked = rank_all(store, scope, facts, "When did Sara go hiking?")
    assert_only("dense", answer, ranked)


def test_only_hyde_finds_the_support_group_visit(store: RecordStore, scope: Scope) -> None:
    """hyde: the HyDE statement "they went to the support group" is nearly the answer's wording.

    The answer's time is in its metadata, not its text. dense embeds the question "When did they go
    to the support group?", which sits nearer the facts about asking when to go and when the group
    meets; event ("go support group", among Sara's facts) sits nearer the facts about her group;
    BM25 ranks the facts with "go"/"going" first (the answer says "went").
    """
    question = "When did Sara go to the support group?"
    assert deterministic_rewrites(question, PARTICIPANTS).hypothetical == (
        "Sara went to the support group"
    )
    answer = "[Sara] went to an LGBTQ support group."
    facts = [
        answer,
        "[Tom] asked when [Sara] could go to the support group.",
        "[Sara]'s support group meets on Tuesdays.",
        "[Sara]'s support group meets every Tuesday at 7 pm.",
        "[Sara] says going to a support group helps people heal.",
        "[Sara]'s support group meetings go on for two hours.",
        "[Sara] volunteers at an animal shelter.",
        "[Sara] cooked [lasagna] for dinner.",
        "[Sara] went to the beach with [Tom].",
    ]
    ranked = rank_all(store, scope, facts, question)
    assert_only("hyde", answer, ranked)


def test_only_event_finds_the_love_of_mountains(store: RecordStore, scope: Scope) -> None:
    """event: the event "enjoy trip mountains" drops the hypothetical "would likely" framing.

    dense ("Would they likely enjoy a trip to the mountains?") and hyde ("they would likely enjoy
    a trip to the mountains") keep it, so the facts phrased the same way about other trips (the
    countryside, the coast, a road trip) rank above the answer; BM25 matches "likely", "enjoy"
    and "trip" in those same facts, while the answer shares only the name with the question.
    """
    question = "Would Sara likely enjoy a trip to the mountains?"
    assert deterministic_rewrites(question, PARTICIPANTS).event == "enjoy trip mountains"
    answer = "[Sara] loves hiking in the [Alps]."
    facts = [
        answer,
        "[Sara] would likely enjoy a trip to the countryside.",
        "[Sara] would likely enjoy a trip to the coast.",
        "[Sara] would likely enjoy a road trip.",
        "[Sara] would enjoy a trip to the beach.",
        "[Sara] would not enjoy a long flight.",
        "[Sara] plays tennis with [Tom].",
        "[Sara] cooked [lasagna] for dinner.",
    ]
    ranked = rank_all(store, scope, facts, question)
    assert_only("event", answer, ranked)
