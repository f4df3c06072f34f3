"""Bring your own embeddings: LangChain, LlamaIndex and fastembed names as dense encoders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: TID251
from llama_index.core import MockEmbedding  # noqa: TID251

from membrain import Memory, Scope
from membrain.api.errors import ConfigurationError
from membrain.embeddings import DenseEncoder, FastEmbedEncoder, as_dense_encoder
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant")
MISO = {
    "speaker": "Sara",
    "text": "I adopted a grey cat named Miso.",
    "timestamp": "2024-03-15T14:01:00Z",
}


def _langchain() -> DenseEncoder:
    return as_dense_encoder(DeterministicFakeEmbedding(size=48))


def _llamaindex() -> DenseEncoder:
    return as_dense_encoder(MockEmbedding(embed_dim=40))


def test_langchain_embeddings_adapted() -> None:
    enc = _langchain()
    assert isinstance(enc, DenseEncoder)
    assert enc.name == "langchain:DeterministicFakeEmbedding"
    assert enc.dim == 48
    docs = enc.embed_documents(["a cat", "a dog"])
    assert len(docs) == 2 and all(len(v) == 48 for v in docs)
    assert all(type(x) is float for v in docs for x in v)
    query = enc.embed_query("a cat")
    assert len(query) == 48 and all(type(x) is float for x in query)
    assert query == docs[0]  # deterministic per text
    assert enc.embed_documents([]) == []


def test_llamaindex_embedding_adapted() -> None:
    enc = _llamaindex()
    assert isinstance(enc, DenseEncoder)
    assert enc.name == "llamaindex:MockEmbedding:unknown"
    assert enc.dim == 40
    docs = enc.embed_documents(["a cat", "a dog"])
    assert len(docs) == 2 and all(len(v) == 40 for v in docs)
    assert all(type(x) is float for v in docs for x in v)
    assert len(enc.embed_query("a cat")) == 40
    assert enc.embed_documents([]) == []


def test_names_are_stable_and_carry_the_model() -> None:
    assert _langchain().name == _langchain().name

    class OpenAIEmbeddings:  # a LangChain-shaped model with a ``model`` attribute
        model = "text-embedding-3-small"

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [1.0, 0.0]

    enc = as_dense_encoder(OpenAIEmbeddings())
    assert enc.name == "langchain:OpenAIEmbeddings:text-embedding-3-small"
    assert enc.dim == 2

    named = MockEmbedding(embed_dim=8, model_name="mock-8")
    assert as_dense_encoder(named).name == "llamaindex:MockEmbedding:mock-8"


def test_dim_probed_once_and_documents_batched() -> None:
    class CountingEmbedding(MockEmbedding):
        queries: int = 0
        batches: int = 0

        def get_query_embedding(self, query: str) -> Any:
            self.queries += 1
            return super().get_query_embedding(query)

        def get_text_embedding_batch(self, texts: list[str], **kwargs: Any) -> Any:
            self.batches += 1
            return super().get_text_embedding_batch(texts, **kwargs)

    model = CountingEmbedding(embed_dim=16)
    enc = as_dense_encoder(model)
    assert model.queries == 0  # nothing is embedded until the dimension is needed
    assert enc.dim == 16 and enc.dim == 16
    assert model.queries == 1
    assert len(enc.embed_documents([f"text {i}" for i in range(5)])) == 5
    assert model.batches == 1


def test_dense_encoder_returned_as_is() -> None:
    enc = HashingEncoder(dim=32)
    assert as_dense_encoder(enc) is enc


@pytest.mark.parametrize(
    "value",
    [None, 42, object(), DeterministicFakeEmbedding, ["not", "an", "encoder"]],
    ids=["none", "int", "object", "class-not-instance", "list"],
)
def test_bad_value_is_a_configuration_error(value: object) -> None:
    with pytest.raises(ConfigurationError, match="LangChain Embeddings") as info:
        as_dense_encoder(value)
    message = str(info.value)
    assert "DenseEncoder" in message and "LlamaIndex BaseEmbedding" in message
    assert "fastembed model name" in message


@pytest.mark.parametrize("make", [_langchain, _llamaindex], ids=["langchain", "llamaindex"])
def test_memory_with_framework_embeddings(tmp_path: Path, make: Any) -> None:
    enc = make()
    with Memory(tmp_path, dense=enc) as mem:
        result = mem.add([MISO], scope=SCOPE)
        assert result.messages_stored == 1
        hits = mem.search("What is the cat called?", scope=SCOPE, k=3)
        assert any("Miso" in hit.fact.text for hit in hits)
        # The dense path alone finds the message: same text, same vector.
        dense_hits = mem.search_messages(MISO["text"], scope=SCOPE, k=1, paths=("dense",))
        assert dense_hits[0].message.text == MISO["text"]
    # Reopened with an equal configuration: accepted, and the data is there.
    with Memory(tmp_path, dense=make()) as mem:
        assert [m.message.text for m in mem.messages(scope=SCOPE)] == [MISO["text"]]


@pytest.mark.parametrize(
    ("first", "second"),
    [(_langchain, _llamaindex), (_llamaindex, _langchain)],
    ids=["langchain-then-llamaindex", "llamaindex-then-langchain"],
)
def test_reopening_with_another_encoder_is_refused(tmp_path: Path, first: Any, second: Any) -> None:
    built, other = first(), second()
    with Memory(tmp_path, dense=built) as mem:
        mem.add([MISO], scope=SCOPE)
    with pytest.raises(ConfigurationError) as info:
        Memory(tmp_path, dense=other)
    message = str(info.value)
    assert built.name in message
    assert other.name in message


def test_same_class_other_model_is_refused(tmp_path: Path) -> None:
    with Memory(tmp_path, dense=as_dense_encoder(MockEmbedding(embed_dim=40))) as mem:
        mem.add([MISO], scope=SCOPE)
    other = as_dense_encoder(MockEmbedding(embed_dim=40, model_name="mock-b"))
    with pytest.raises(ConfigurationError, match="llamaindex:MockEmbedding:mock-b"):
        Memory(tmp_path, dense=other)


def test_unknown_fastembed_name_fails_fast() -> None:
    with pytest.raises(ConfigurationError, match="no-such/model") as info:
        as_dense_encoder("no-such/model")
    assert "list_supported_models" in str(info.value)


def test_fastembed_download_failure_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A known model that cannot be downloaded (no hub here): fastembed retries for ~40 s and
    raises ValueError, so the download is stubbed to fail at once."""
    import fastembed

    class Unreachable:
        list_supported_models = staticmethod(fastembed.TextEmbedding.list_supported_models)

        def __init__(self, **kwargs: Any) -> None:
            raise ValueError(f"Could not load model {kwargs['model_name']} from any source.")

    monkeypatch.setattr(fastembed, "TextEmbedding", Unreachable)
    with pytest.raises(ConfigurationError, match="needs network") as info:
        as_dense_encoder("BAAI/bge-small-en-v1.5")
    assert "BAAI/bge-small-en-v1.5" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)


def test_packaged_model_name_loads_offline() -> None:
    enc = as_dense_encoder("membrain/all-MiniLM-L6-v2-int8")
    assert isinstance(enc, FastEmbedEncoder)
    assert enc.name == "membrain/all-MiniLM-L6-v2-int8"
    assert enc.dim == 384


def test_memory_takes_framework_embeddings_directly(tmp_path: Path) -> None:
    with Memory(tmp_path, dense=DeterministicFakeEmbedding(size=32)) as mem:
        assert (mem.store.dense.name, mem.store.dense.dim) == (
            "langchain:DeterministicFakeEmbedding",
            32,
        )
        scope = Scope(dataset="sara", task="assistant")
        mem.add("I adopted a grey cat named Miso.", scope=scope, user_name="Sara")
        assert "Miso" in mem.search("cat", scope=scope, k=1, mode="fast")[0].fact.text
