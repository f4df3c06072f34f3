"""``MemoryHit.relevance`` and ``min_relevance``: one calibrated scale, monotone, everywhere."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import membrain.cli as cli
from membrain import AsyncMemory, AsyncRemoteMemory, Memory, RemoteMemory, Scope
from membrain.api.errors import InputError, ModelFileError
from membrain.api.requests import CONTEXT_MIN_RELEVANCE
from membrain.embeddings import default_dense_encoder
from membrain.retrieval.context import NOTHING_RELEVANT
from membrain.retrieval.relevance import (
    LEXICAL,
    Evidence,
    RelevanceModel,
    capped,
    list_features,
    packaged_relevance,
)
from membrain.server.app import API_PREFIX, create_app
from membrain.server.mcp import build_server
from membrain.testing import HashingEncoder

PETS = Scope(dataset="pets", task="chat")
CONVERSATION = [
    ("Sara", "I adopted a cat named Miso last spring."),
    ("Nate", "Nice! My dog Rex is a golden retriever, he turned five in May."),
    ("Sara", "Miso hates the vet, she hid under the bed before her vaccination."),
    ("Nate", "Rex eats grain-free kibble because of his allergies."),
    ("Sara", "I bought Miso a scratching post and a feather toy."),
    ("Nate", "We walk Rex along the river every morning before work."),
    ("Sara", "My neighbour feeds Miso when I travel for work."),
    ("Nate", "Rex learned to fetch the newspaper last week."),
]
MESSAGES = [
    {"speaker": who, "text": text, "timestamp": f"2024-03-{10 + i:02d}T10:00:00Z"}
    for i, (who, text) in enumerate(CONVERSATION)
]
ABSENT = "What is quantum chromodynamics?"
ON_TOPIC = "What does Rex eat?"
WORDS = "what does rex eat miso cat dog vet river walk who feeds work toy quantum".split()
QUESTIONS = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(
    lambda w: " ".join(w).capitalize() + "?"
)
MODES = st.sampled_from(["fast", "expand", "deep", "auto"])


def _monotone(values: Sequence[float]) -> None:
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def _pets(path: Path, **options: Any) -> Memory:
    memory = Memory(path, **options)
    memory.add(MESSAGES, scope=PETS)
    return memory


@pytest.fixture(scope="module")
def pets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """The pets chat in a memory with the hashing encoder (the lexical calibration)."""
    with _pets(tmp_path_factory.mktemp("pets") / "store", dense=HashingEncoder(dim=64)) as memory:
        yield memory


@pytest.fixture(scope="module")
def remote(pets: Memory) -> Iterator[RemoteMemory]:
    """A remote client of the pets memory, over HTTP into the app."""
    with TestClient(create_app(pets, keys=None), base_url="http://127.0.0.1") as client:

        def send(request: httpx.Request) -> httpx.Response:
            url = str(request.url).removeprefix("http://127.0.0.1")
            answer = client.request(
                request.method, url, content=request.content, headers=dict(request.headers)
            )
            return httpx.Response(answer.status_code, content=answer.content)

        with RemoteMemory("http://127.0.0.1", transport=httpx.MockTransport(send)) as memory:
            yield memory


# -- the model ---------------------------------------------------------------------------------
@given(st.lists(st.floats(-5, 5, allow_nan=False)))
def test_capping_gives_a_non_increasing_list_in_the_unit_interval(values: list[float]) -> None:
    out = capped(values)
    assert len(out) == len(values)
    _monotone(out)


def test_the_packaged_file_calibrates_the_packaged_encoder_and_a_lexical_fallback() -> None:
    model = packaged_relevance()
    assert model.calibrated(default_dense_encoder().name)
    assert not model.calibrated(HashingEncoder(dim=64).name)
    assert not model.calibrated(LEXICAL)


def test_an_encoder_without_a_calibration_reads_no_cosine() -> None:
    model = packaged_relevance()
    hits = [Evidence(cos=0.9, overlap=0.5), Evidence(cos=0.1, overlap=0.0)]
    same_words = [Evidence(cos=-0.3, overlap=0.5), Evidence(cos=0.7, overlap=0.0)]
    assert model.probabilities("someone/else", hits) == model.probabilities(
        "someone/else", same_words
    )
    calibrated = default_dense_encoder().name
    assert model.probabilities(calibrated, hits) != model.probabilities(calibrated, same_words)


def test_list_features_read_the_hits_from_each_one_on() -> None:
    rows = list_features([Evidence(0.2, 0.0, 1.0), Evidence(0.6, 0.5), Evidence(0.1, 0.0)])
    assert [r["rest_cos"] for r in rows] == [0.6, 0.6, 0.1]
    assert [r["best_margin"] for r in rows] == [1.0] * 3
    assert rows[1]["rest_margin"] < rows[0]["rest_margin"] == 1.0


@pytest.mark.parametrize(
    "data",
    [
        {"encoders": {}},
        {"encoders": {LEXICAL: {"reranked": {}, "plain": {}}}},
        "not a file",
    ],
    ids=["no-lexical", "malformed", "not-fields"],
)
def test_a_malformed_relevance_file_is_a_model_file_error(data: object) -> None:
    with pytest.raises(ModelFileError):
        RelevanceModel.from_json(data)


def test_a_lexical_model_reading_a_cosine_is_refused() -> None:
    logistic = {"features": ["best_cos"], "coef": [1.0], "intercept": 0.0}
    pair = {"topic": logistic, "rest": logistic}
    with pytest.raises(ModelFileError, match="cosine"):
        RelevanceModel.from_json({"encoders": {LEXICAL: {"reranked": pair, "plain": pair}}})


# -- properties, embedded and remote -----------------------------------------------------------
@settings(max_examples=25)
@given(question=QUESTIONS, mode=MODES, k=st.integers(1, 12))
def test_relevance_never_rises_down_a_search_or_a_context(
    pets: Memory, remote: RemoteMemory, question: str, mode: str, k: int
) -> None:
    for memory in (pets, remote):
        found = memory.search(question, scope=PETS, mode=mode, k=k)
        _monotone([h.relevance for h in found.hits])
        context = memory.context(question, scope=PETS, mode=mode, k=k, min_relevance=0)
        _monotone([h.relevance for h in context.hits])


@settings(max_examples=15)
@given(question=QUESTIONS, floor=st.floats(0, 1))
def test_min_relevance_keeps_exactly_the_hits_at_or_above_it(
    pets: Memory, remote: RemoteMemory, question: str, floor: float
) -> None:
    everything = pets.search(question, scope=PETS, mode="fast", k=8)
    expected = [h for h in everything.hits if h.relevance >= floor]
    for memory in (pets, remote):
        kept = memory.search(question, scope=PETS, mode="fast", k=8, min_relevance=floor)
        assert list(kept.hits) == expected


# -- every surface ----------------------------------------------------------------------------
def _floor(pets: Memory) -> tuple[float, int]:
    """A floor that keeps some hits of ON_TOPIC but not all, and how many it keeps."""
    hits = pets.search(ON_TOPIC, scope=PETS, mode="fast", k=6).hits
    values = sorted({h.relevance for h in hits}, reverse=True)
    assert len(values) >= 2, values
    floor = values[1]
    return floor, sum(h.relevance >= floor for h in hits)


def test_min_relevance_drops_alike_on_every_surface(
    pets: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    floor, kept = _floor(pets)
    assert 0 < kept < 6
    asked: dict[str, Any] = {"scope": PETS, "mode": "fast", "k": 6, "min_relevance": floor}
    counts = {"memory": len(pets.search(ON_TOPIC, **asked).hits)}
    counts["async"] = len(asyncio.run(AsyncMemory.from_memory(pets).search(ON_TOPIC, **asked)))
    app = create_app(pets, keys=None)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        body = {"query": ON_TOPIC, "dataset": "pets", "task": "chat", "mode": "fast", "k": 6}
        raw = client.post(API_PREFIX + "/search", json={**body, "min_relevance": floor})
        assert raw.status_code == 200, raw.text
        hits = raw.json()["hits"]
        counts["http"] = len(hits)
        _monotone([h["relevance"] for h in hits])
        bad = client.post(API_PREFIX + "/search", json={**body, "min_relevance": 1.5})
        assert bad.status_code == 422 and bad.json()["type"] == "InputError"

    async def served_async() -> int:
        transport = httpx.ASGITransport(app=app)
        async with AsyncRemoteMemory("http://127.0.0.1", transport=transport) as aremote:
            return len(await aremote.search(ON_TOPIC, **asked))

    counts["async remote"] = asyncio.run(served_async())
    server = build_server(pets, scope=PETS)
    called = asyncio.run(
        server.call_tool("search_memory", {"query": ON_TOPIC, "limit": 6, "min_relevance": floor})
    )
    assert called.structured_content is not None
    found = called.structured_content["result"]
    _monotone([f["relevance"] for f in found])
    counts["mcp"] = len(found)

    store = tmp_path / "store"
    monkeypatch.setattr("membrain.memory.default_dense_encoder", lambda: HashingEncoder(dim=64))
    _pets(store, dense=HashingEncoder(dim=64)).close()
    result = CliRunner().invoke(
        cli.app,
        [
            "op",
            "search",
            ON_TOPIC,
            "-d",
            "pets",
            "-t",
            "chat",
            "--mode",
            "fast",
            "--k",
            "6",
            f"--min-relevance={floor}",
            "--path",
            str(store),
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    counts["cli"] = len(json.loads(result.stdout)["hits"])
    assert counts == dict.fromkeys(counts, kept)
    with pytest.raises(InputError):
        pets.search(ON_TOPIC, scope=PETS, min_relevance=-0.1)


def test_hit_metadata_carries_the_relevance(pets: Memory) -> None:
    hit = pets.search(ON_TOPIC, scope=PETS, k=1).hits[0]
    assert hit.metadata()["relevance"] == hit.relevance > 0


# -- an absent topic --------------------------------------------------------------------------
def _nothing_for_an_absent_topic(memory: Memory, **floor: float) -> None:
    assert memory.search(ABSENT, scope=PETS, k=5).hits, "search keeps every hit by default"
    for mode in ("fast", "expand"):
        context = memory.context(ABSENT, scope=PETS, mode=mode, **floor)
        assert context.hits == () and context.nothing_relevant
        assert context.text == NOTHING_RELEVANT
        on_topic = memory.context(ON_TOPIC, scope=PETS, mode=mode, **floor)
        assert on_topic.hits and not on_topic.nothing_relevant
        assert all(h.relevance >= CONTEXT_MIN_RELEVANCE for h in on_topic.hits)
        assert "kibble" in on_topic.text


def test_an_absent_topic_gets_nothing_from_context_with_the_lexical_fallback(
    pets: Memory, remote: RemoteMemory
) -> None:
    floor = CONTEXT_MIN_RELEVANCE
    _nothing_for_an_absent_topic(pets, min_relevance=floor)
    assert remote.context(ABSENT, scope=PETS, min_relevance=floor).nothing_relevant
    mcp = build_server(pets, scope=PETS)
    called = asyncio.run(mcp.call_tool("get_context", {"query": ABSENT, "min_relevance": floor}))
    assert NOTHING_RELEVANT in json.dumps(called.model_dump(mode="json"))


def test_without_a_calibrated_encoder_context_has_no_default_floor(
    pets: Memory, remote: RemoteMemory
) -> None:
    # word overlap alone cannot tell a vague question from an absent topic: no floor unless asked
    for surface in (pets, remote):
        kept = surface.context(ABSENT, scope=PETS, mode="fast")
        assert kept.hits and not kept.nothing_relevant


@pytest.mark.slow
def test_an_absent_topic_gets_nothing_from_context_with_the_packaged_encoder(
    tmp_path: Path,
) -> None:
    with _pets(tmp_path / "store") as memory:
        _nothing_for_an_absent_topic(memory)


def test_no_floor_keeps_every_hit_in_context(pets: Memory) -> None:
    kept = pets.context(ABSENT, scope=PETS, mode="fast", min_relevance=0)
    assert kept.hits and not kept.nothing_relevant


def test_a_budget_too_small_for_the_note_leaves_the_text_empty(pets: Memory) -> None:
    tiny = pets.context(ABSENT, scope=PETS, max_tokens=3, min_relevance=CONTEXT_MIN_RELEVANCE)
    assert tiny.nothing_relevant and tiny.text == "" and tiny.tokens == 0


def test_an_empty_memory_gets_an_empty_context_without_the_note(memory: Memory) -> None:
    empty = memory.context(ON_TOPIC, scope=PETS)
    assert empty.nothing_relevant and empty.text == "" and empty.hits == ()
