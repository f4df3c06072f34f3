"""The memory stacks ``benchmarks.peers`` compares, behind one small interface.

Each system stores LoCoMo turns in one store, one namespace per conversation, and answers a
question with a ranked list of hits, each given as the dialogue ids it cites. Every system embeds
with the same dense encoder object; the peers that rank by keywords too use MemBrain's BM25
(:class:`membrain.embeddings.Bm25Encoder`, Qdrant's built-in English BM25) where their own BM25
model would have to be downloaded.

* ``membrain``: :class:`membrain.Memory` on a temporary folder, default offline extractor; one
  ``add`` per conversation (the Memory batches it), ``optimize()`` once after the last; searched
  in each MemBrain mode asked for. A hit is a fact and cites the turns in ``MemoryHit.sources``.
* ``langchain-qdrant``: ``QdrantVectorStore`` in ``RetrievalMode.HYBRID`` on an in-memory Qdrant;
  dense = the encoder as a LangChain ``Embeddings``, sparse = ``FastEmbedSparse`` when its BM25
  model is in the local fastembed cache, otherwise the BM25 adapter; one document per turn.
* ``mem0``: ``mem0.Memory`` (OSS) with ``infer=False`` (each turn stored verbatim, no LLM call),
  the encoder through mem0's ``langchain`` embedder provider, its Qdrant store in memory; one
  ``add`` per turn (a turn's dia_id rides in its metadata). mem0's Qdrant store loads its BM25
  model from the model hub on first insert; it is given the BM25 adapter instead, so its
  keyword scoring runs and nothing is downloaded. Telemetry is off (``MEM0_TELEMETRY=False``).
* ``llamaindex``: ``VectorStoreIndex`` over the default in-memory store, the encoder as a
  LlamaIndex ``BaseEmbedding`` (batches of 64, as MemBrain's encoder runs), one ``TextNode`` per
  turn, retrieved with ``similarity_top_k=k`` and a filter on the conversation.

A peer document is the turn as an agent's prompt would hold it: ``speaker: text [image: caption]``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from benchmarks.locomo_eval import normalize_dia_id, render_turn_line
from benchmarks.locomo_retrieval import conversation_scope
from membrain import Memory
from membrain.api.models import Message, Scope
from membrain.embeddings import Bm25Encoder, DenseEncoder
from membrain.retrieval.rerank import Reranker

Ranking = list[tuple[str, ...]]
"""The dia_ids each hit cites, in rank order."""

SYSTEMS = ("membrain", "langchain-qdrant", "mem0", "llamaindex")
PEER_MODULES: dict[str, tuple[str, ...]] = {
    "langchain-qdrant": ("langchain_qdrant", "langchain_core"),
    "mem0": ("mem0", "langchain"),  # mem0's ``langchain`` embedder imports ``langchain``
    "llamaindex": ("llama_index.core",),
}
"""The modules each peer needs (MemBrain needs none beyond the package itself)."""
INSTALL_HINT = "pip install '.[bench]'"
WARM_UP_NAMESPACE = "warm-up"
_META_KEYS = ["dia_id", "conversation"]
_COLLECTION = "turns"


def missing_modules(system: str) -> list[str]:
    """The modules ``system`` needs that cannot be imported here."""
    missing = []
    for name in PEER_MODULES.get(system, ()):
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a missing parent package
            found = False
        if not found:
            missing.append(name)
    return missing


def turn_text(message: Message) -> str:
    """A turn as a peer stores it: ``speaker: text [image: caption]``."""
    return render_turn_line(message.speaker, message.text, message.caption, ())


def turn_dia_id(message: Message) -> str:
    """The turn's canonical dia_id ("" when it has none)."""
    return normalize_dia_id(message.source_id or "") or ""


def _cites(dia_id: object) -> tuple[str, ...]:
    return (dia_id,) if isinstance(dia_id, str) and dia_id else ()


class MemorySystem(Protocol):
    """A memory stack as the benchmark drives it."""

    variants: tuple[str, ...]
    """The ways it is searched (MemBrain modes); ``("",)`` for a single way."""

    def warm_up(self) -> None:
        """One untimed search, so that models and indexes are loaded before timing."""

    def add(self, conversation: str, turns: Sequence[Message]) -> None:
        """Store every turn of ``conversation``."""

    def finish(self) -> None:
        """Whatever the system does once after the last add (MemBrain builds its indexes)."""

    def search(self, conversation: str, question: str, k: int, variant: str) -> Ranking:
        """The top ``k`` hits for ``question`` in ``conversation``."""

    def close(self) -> None:
        """Release the store."""


# -- MemBrain ------------------------------------------------------------------------------------
class MembrainSystem:
    """MemBrain embedded: facts extracted offline, searched in each of ``modes``."""

    def __init__(
        self,
        dense: DenseEncoder,
        folder: Path,
        modes: Sequence[str],
        reranker: Reranker | None = None,
    ) -> None:
        self.variants = tuple(modes)
        self._memory = Memory(path=folder, dense=dense, reranker=reranker)

    @staticmethod
    def scope(conversation: str) -> Scope:
        return conversation_scope(conversation)

    def warm_up(self) -> None:
        for mode in self.variants:
            self._memory.search("warm up", scope=self.scope(WARM_UP_NAMESPACE), mode=mode, k=1)

    def add(self, conversation: str, turns: Sequence[Message]) -> None:
        self._memory.add(turns, scope=self.scope(conversation))

    def finish(self) -> None:
        self._memory.optimize()

    def search(self, conversation: str, question: str, k: int, variant: str) -> Ranking:
        found = self._memory.search(question, scope=self.scope(conversation), mode=variant, k=k)
        ranking = []
        for hit in found.hits:
            ids = (normalize_dia_id(m.source_id or "") for m in hit.sources)
            ranking.append(tuple(dict.fromkeys(i for i in ids if i is not None)))
        return ranking

    def close(self) -> None:
        self._memory.close()


# -- shared adapters -----------------------------------------------------------------------------
def langchain_embeddings(dense: DenseEncoder) -> Any:
    """``dense`` as a LangChain ``Embeddings``."""
    from langchain_core.embeddings import Embeddings  # noqa: TID251 (a benchmark, not the core)

    class EncoderEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return dense.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return dense.embed_query(text)

    return EncoderEmbeddings()


@dataclass(frozen=True, slots=True)
class ArraySparse:
    """A sparse vector shaped as fastembed returns one (numpy ``indices`` and ``values``)."""

    indices: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]


class FastEmbedShapedBm25:
    """MemBrain's BM25 with fastembed's ``SparseTextEmbedding.embed`` interface (for mem0)."""

    def __init__(self) -> None:
        self._bm25 = Bm25Encoder()

    def embed(self, documents: str | Iterable[str], **_: Any) -> Iterable[ArraySparse]:
        texts = [documents] if isinstance(documents, str) else list(documents)
        for vector in self._bm25.embed_documents(texts):
            yield ArraySparse(
                np.asarray(vector.indices, dtype=np.int64),
                np.asarray(vector.values, dtype=np.float64),
            )


# -- langchain-qdrant ----------------------------------------------------------------------------
def langchain_sparse(try_fastembed: bool = True) -> tuple[Any, str]:
    """``FastEmbedSparse`` if its BM25 model loads from the local cache, else the BM25 adapter.

    Returns the sparse embeddings and a label saying which one.
    """
    from langchain_qdrant import FastEmbedSparse, SparseEmbeddings, SparseVector

    if try_fastembed:
        try:  # the local cache only: never a download
            return FastEmbedSparse(model_name="Qdrant/bm25", local_files_only=True), "fastembed"
        except (ValueError, OSError):
            pass
    bm25 = Bm25Encoder()

    class Bm25Sparse(SparseEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[SparseVector]:
            return [
                SparseVector(indices=list(v.indices), values=list(v.values))
                for v in bm25.embed_documents(texts)
            ]

        def embed_query(self, text: str) -> SparseVector:
            vector = bm25.embed_query(text)
            return SparseVector(indices=list(vector.indices), values=list(vector.values))

    return Bm25Sparse(), "membrain-bm25"


class LangChainQdrantSystem:
    """``QdrantVectorStore`` hybrid (dense + BM25, RRF) on an in-memory Qdrant."""

    variants: tuple[str, ...] = ("",)

    def __init__(self, dense: DenseEncoder, *, fastembed_sparse: bool = True) -> None:
        from langchain_qdrant import QdrantVectorStore, RetrievalMode
        from qdrant_client import QdrantClient, models

        self._models = models
        sparse, self.sparse = langchain_sparse(fastembed_sparse)
        self._client = QdrantClient(location=":memory:")
        self._client.create_collection(
            _COLLECTION,
            vectors_config={
                QdrantVectorStore.VECTOR_NAME: models.VectorParams(
                    size=dense.dim, distance=models.Distance.COSINE
                )
            },
            # BM25 weights are term frequencies: Qdrant applies the IDF at query time.
            sparse_vectors_config={
                QdrantVectorStore.SPARSE_VECTOR_NAME: models.SparseVectorParams(
                    modifier=models.Modifier.IDF
                )
            },
        )
        self._store = QdrantVectorStore(
            client=self._client,
            collection_name=_COLLECTION,
            embedding=langchain_embeddings(dense),
            retrieval_mode=RetrievalMode.HYBRID,
            sparse_embedding=sparse,
        )

    def _filter(self, conversation: str) -> Any:
        models = self._models
        match = models.MatchValue(value=conversation)
        return models.Filter(must=[models.FieldCondition(key="metadata.conversation", match=match)])

    def warm_up(self) -> None:
        self._store.similarity_search("warm up", k=1, filter=self._filter(WARM_UP_NAMESPACE))

    def add(self, conversation: str, turns: Sequence[Message]) -> None:
        self._store.add_texts(
            [turn_text(m) for m in turns],
            metadatas=[{"dia_id": turn_dia_id(m), "conversation": conversation} for m in turns],
        )

    def finish(self) -> None:
        pass

    def search(self, conversation: str, question: str, k: int, variant: str) -> Ranking:
        docs = self._store.similarity_search(question, k=k, filter=self._filter(conversation))
        return [_cites(d.metadata.get("dia_id")) for d in docs]

    def close(self) -> None:
        self._client.close()


# -- mem0 ----------------------------------------------------------------------------------------
def import_mem0() -> Any:
    """The ``mem0`` package, imported with its telemetry off (it reads the switch on import).

    Raises:
        RuntimeError: ``mem0`` was already imported with its telemetry on.
    """
    os.environ["MEM0_TELEMETRY"] = "False"
    # mem0 makes this folder on import (default ~/.mem0); the history database goes elsewhere.
    os.environ.setdefault("MEM0_DIR", str(Path(tempfile.gettempdir()) / "membrain-peers-mem0"))
    module = importlib.import_module("mem0")
    if importlib.import_module("mem0.memory.telemetry").MEM0_TELEMETRY:
        raise RuntimeError("mem0 was imported with telemetry on; set MEM0_TELEMETRY=False")
    return module


class Mem0System:
    """mem0 OSS storing turns verbatim (``infer=False``) in its in-memory Qdrant store."""

    variants: tuple[str, ...] = ("",)

    def __init__(self, dense: DenseEncoder, folder: Path) -> None:
        mem0 = import_mem0()
        folder.mkdir(parents=True, exist_ok=True)
        config = {
            "embedder": {
                "provider": "langchain",
                "config": {"model": langchain_embeddings(dense), "embedding_dims": dense.dim},
            },
            "vector_store": {
                "provider": "qdrant",
                # A path makes mem0 open a local client; ":memory:" keeps it in memory.
                "config": {
                    "collection_name": _COLLECTION,
                    "embedding_model_dims": dense.dim,
                    "path": ":memory:",
                },
            },
            # Never called with infer=False; the client is only constructed.
            "llm": {"provider": "openai", "config": {"api_key": "unused-with-infer-false"}},
            "history_db_path": str(folder / "mem0-history.db"),
        }
        self._memory = mem0.Memory.from_config(config)
        # Its store would download fastembed's Qdrant/bm25 on first insert.
        self._memory.vector_store._bm25_encoder = FastEmbedShapedBm25()

    def warm_up(self) -> None:
        self.search(WARM_UP_NAMESPACE, "warm up", 1, "")

    def add(self, conversation: str, turns: Sequence[Message]) -> None:
        for turn in turns:
            self._memory.add(
                [{"role": "user", "content": turn_text(turn), "name": turn.speaker}],
                user_id=conversation,
                metadata={"dia_id": turn_dia_id(turn)},
                infer=False,
            )

    def finish(self) -> None:
        pass

    def search(self, conversation: str, question: str, k: int, variant: str) -> Ranking:
        # threshold=0: every system returns its k best, whatever their scores.
        found = self._memory.search(
            question, top_k=k, filters={"user_id": conversation}, threshold=0.0
        )
        return [_cites((hit.get("metadata") or {}).get("dia_id")) for hit in found["results"]]

    def close(self) -> None:
        self._memory.close()


# -- LlamaIndex ----------------------------------------------------------------------------------
def llama_index_embedding(dense: DenseEncoder, batch_size: int = 64) -> Any:
    """``dense`` as a LlamaIndex ``BaseEmbedding``."""
    from llama_index.core.embeddings import BaseEmbedding  # noqa: TID251 (not the core)

    class EncoderEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return dense.embed_query(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return dense.embed_query(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return dense.embed_documents([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return dense.embed_documents(texts)

    return EncoderEmbedding(model_name=dense.name, embed_batch_size=batch_size)


class LlamaIndexSystem:
    """A ``VectorStoreIndex`` over LlamaIndex's default in-memory vector store."""

    variants: tuple[str, ...] = ("",)

    def __init__(self, dense: DenseEncoder) -> None:
        from llama_index.core import VectorStoreIndex  # noqa: TID251 (not the core)

        self._index = VectorStoreIndex(nodes=[], embed_model=llama_index_embedding(dense))

    def warm_up(self) -> None:
        self.search(WARM_UP_NAMESPACE, "warm up", 1, "")

    def add(self, conversation: str, turns: Sequence[Message]) -> None:
        from llama_index.core.schema import TextNode  # noqa: TID251 (not the core)

        nodes = [
            TextNode(
                id_=f"{conversation}/{index}",
                text=turn_text(turn),
                metadata={"dia_id": turn_dia_id(turn), "conversation": conversation},
                # The ids are for scoring, not for the embedding.
                excluded_embed_metadata_keys=_META_KEYS,
                excluded_llm_metadata_keys=_META_KEYS,
            )
            for index, turn in enumerate(turns)
        ]
        self._index.insert_nodes(nodes)

    def finish(self) -> None:
        pass

    def search(self, conversation: str, question: str, k: int, variant: str) -> Ranking:
        from llama_index.core.vector_stores import (  # noqa: TID251 (not the core)
            MetadataFilter,
            MetadataFilters,
        )

        filters = MetadataFilters(filters=[MetadataFilter(key="conversation", value=conversation)])
        retriever = self._index.as_retriever(similarity_top_k=k, filters=filters)
        return [_cites(found.node.metadata.get("dia_id")) for found in retriever.retrieve(question)]

    def close(self) -> None:
        pass


def open_system(
    name: str,
    dense: DenseEncoder,
    folder: Path,
    *,
    membrain_modes: Sequence[str] = ("fast", "expand"),
    reranker: Reranker | None = None,
    fastembed_sparse: bool = True,
) -> MemorySystem:
    """A fresh, empty store of system ``name`` (its files, if any, under ``folder``).

    ``reranker`` replaces MemBrain's packaged one; the peers have none.
    """
    if name == "membrain":
        return MembrainSystem(dense, folder / "membrain", membrain_modes, reranker)
    if name == "langchain-qdrant":
        return LangChainQdrantSystem(dense, fastembed_sparse=fastembed_sparse)
    if name == "mem0":
        return Mem0System(dense, folder)
    if name == "llamaindex":
        return LlamaIndexSystem(dense)
    raise ValueError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}")
