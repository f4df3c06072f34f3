"""A LlamaIndex retriever over MemBrain facts."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from membrain import ConfigurationError, Memory, MemoryHit, MemoryLike, RetrievalMode, Scope
from membrain.aio import AsyncMemory
from membrain.binding import ScopeBinding

__all__ = ["MembrainRetriever", "hit_metadata", "hit_to_node", "membrain_filters"]

_EQUALS = (FilterOperator.EQ, FilterOperator.CONTAINS)
_ONE_OF = (FilterOperator.IN, FilterOperator.ANY)


def membrain_filters(filters: MetadataFilters | None) -> dict[str, Any] | None:
    """LlamaIndex ``MetadataFilters`` as MemBrain's metadata filters (:mod:`membrain.api.metadata`).

    ``==`` and ``contains`` (a list value holding it) become ``{key: value}``; ``in`` and ``any``
    become ``{key: {"in": values}}``; filters joined by ``and`` must hold together (nested
    ``and`` groups too); filters joined by ``or`` must name one key (``{key: {"in": ...}}``).
    Values are strings or integers.

    Raises:
        ConfigurationError: An operator or condition MemBrain cannot evaluate (``>``, ``!=``,
            ``nin``, ``all``, text match, ``is_empty``, ``not``), ``or`` across keys, two
            different conditions on one key, or a value that is not a string or an integer.

    Example:
        >>> membrain_filters(MetadataFilters(filters=[MetadataFilter(key="project", value="x")]))
        {'project': 'x'}
    """
    if filters is None or not filters.filters:
        return None
    condition = filters.condition or FilterCondition.AND
    if condition is FilterCondition.NOT:
        raise ConfigurationError("MemBrain's filters cannot negate: the 'not' condition is refused")
    if condition is FilterCondition.OR:
        return _any_of(filters)
    found: dict[str, Any] = {}
    for item in filters.filters:
        part = membrain_filters(item) if isinstance(item, MetadataFilters) else _condition(item)
        for key, wanted in (part or {}).items():
            if key in found and found[key] != wanted:
                raise ConfigurationError(
                    f"two different conditions on {key!r}: MemBrain holds one per key"
                )
            found[key] = wanted
    return found


def _condition(item: MetadataFilter) -> dict[str, Any]:
    operator = FilterOperator(item.operator)
    if operator in _EQUALS:
        return {item.key: _value(item.key, item.value)}
    if operator in _ONE_OF:
        given = item.value if isinstance(item.value, list) else [item.value]
        return {item.key: {"in": [_value(item.key, v) for v in given]}}
    raise ConfigurationError(
        f"filter on {item.key!r}: MemBrain cannot evaluate the operator {operator.value!r}; "
        "it takes '==', 'contains', 'in' and 'any'"
    )


def _any_of(filters: MetadataFilters) -> dict[str, Any]:
    keys: set[str] = set()
    values: list[Any] = []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            raise ConfigurationError("MemBrain cannot nest groups under an 'or' condition")
        ((key, wanted),) = _condition(item).items()
        keys.add(key)
        values.extend(wanted["in"] if isinstance(wanted, dict) else [wanted])
    if len(keys) > 1:
        raise ConfigurationError(
            f"'or' across keys ({', '.join(sorted(keys))}) is refused: MemBrain's filters hold "
            "every key's condition; 'or' may join values of one key"
        )
    return {keys.pop(): {"in": list(dict.fromkeys(values))}}


def _value(key: str, value: object) -> str | int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConfigurationError(
            f"filter on {key!r}: MemBrain compares strings and integers, got {value!r:.80}"
        )
    return value


# Kept in the metadata for programs, hidden from the LLM prompt and the embedding text.
_HIDDEN_KEYS = ["fact_id", "text", "sources", "score", "relevance", "paths", "scope", "session"]


def hit_metadata(hit: MemoryHit) -> dict[str, Any]:
    """The metadata of a retrieved fact: :meth:`membrain.MemoryHit.metadata`."""
    return hit.metadata()


def hit_to_node(hit: MemoryHit) -> NodeWithScore:
    """A search hit as a scored LlamaIndex node (id: the fact id; text: the rendered fact)."""
    metadata = hit_metadata(hit)
    # An empty value ("valid_from: None", "superseded_by: []") tells the model nothing.
    hidden = [*_HIDDEN_KEYS, *(k for k, v in metadata.items() if v in (None, "", [], {}, ()))]
    node = TextNode(
        id_=hit.fact.id,
        text=hit.text or hit.fact.text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    return NodeWithScore(node=node, score=hit.relevance)  # in [0, 1], falling with the order


class MembrainRetriever(BaseRetriever):
    """Retrieves MemBrain facts as LlamaIndex nodes.

    Each result is a :class:`~llama_index.core.schema.NodeWithScore` whose node is a
    ``TextNode`` with the fact id as ``id_``, the fact as a reader sees it (canonical names, no
    markup) as ``text``, and :func:`hit_metadata` as metadata; the node's score is the hit's
    ``relevance`` (in [0, 1], falling with the order). ``_aretrieve`` runs the search in a
    worker thread.

    Like ``VectorIndexRetriever`` it takes ``similarity_top_k`` and ``filters``
    (``MetadataFilters``, applied to each fact's metadata, carried from its messages and shown
    as ``node.metadata["metadata"]``; see :func:`membrain_filters` for the operators).

    Args:
        memory: The memory to search: a :class:`membrain.Memory` (an ``AsyncMemory`` is
            unwrapped), or a :class:`~membrain.RemoteMemory` of a served memory.
        scope: Where to search; or give ``dataset`` and ``task`` (and optionally ``session``).
        similarity_top_k: How many facts per query (``k`` is the same).
        filters: Only facts whose metadata meets them.
        k: How many facts per query (instead of ``similarity_top_k``).
        min_relevance: Only facts at least this relevant (0-1; default every fact).
        mode: Retrieval mode (``"fast"``, ``"expand"``, ``"deep"``, ``"auto"``).
        run: The run its searches serve, recorded by a memory that traces recalls
            (``memory.trace(run=...)``).
        callback_manager: LlamaIndex callback manager.
        verbose: LlamaIndex verbose flag.

    Raises:
        ScopeError: Neither or both of ``scope`` and its parts were given, or a part is invalid.
        ConfigurationError: ``mode`` is not a retrieval mode, both ``k`` and
            ``similarity_top_k`` are given, ``k`` is not positive, or a filter cannot be
            evaluated (:func:`membrain_filters`).

    Example:
        >>> from membrain import Memory, Scope
        >>> retriever = MembrainRetriever(
        ...     memory=Memory(path="/tmp/mem"),
        ...     scope=Scope(dataset="sara", task="assistant"),
        ...     similarity_top_k=5,
        ... )  # doctest: +SKIP
        >>> retriever.retrieve("What is Sara's cat called?")[0].node.text  # doctest: +SKIP
        'Sara adopted a grey cat named Miso.'
    """

    def __init__(
        self,
        *,
        memory: MemoryLike | AsyncMemory,
        scope: Scope | None = None,
        dataset: str | None = None,
        task: str | None = None,
        session: str | None = None,
        similarity_top_k: int | None = None,
        filters: MetadataFilters | None = None,
        k: int | None = None,
        min_relevance: float | None = None,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        run: str | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        binding = ScopeBinding.of(
            scope, dataset=dataset, task=task, session=session, owner="MembrainRetriever"
        )
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        sync: MemoryLike = memory.memory if isinstance(memory, AsyncMemory) else memory
        self.memory = sync
        self.scope = binding.resolve()
        if k is not None and similarity_top_k is not None:
            raise ConfigurationError("pass similarity_top_k or k (the same), not both")
        top_k = similarity_top_k if similarity_top_k is not None else k
        self.k = top_k if top_k is not None else 10
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigurationError(f"similarity_top_k must be a positive integer, got {self.k!r}")
        self.filters = filters
        if min_relevance is not None and not 0 <= min_relevance <= 1:
            raise ConfigurationError(f"min_relevance is in [0, 1], got {min_relevance!r}")
        self.min_relevance = min_relevance
        self._filters = membrain_filters(filters)
        self.mode = RetrievalMode.parse(mode)
        if run is not None and not 1 <= len(run) <= 256:
            raise ConfigurationError("run is a name of 1 to 256 characters")
        self.run = run
        self._amemory = AsyncMemory.from_memory(sync) if isinstance(sync, Memory) else None

    @property
    def similarity_top_k(self) -> int:
        """How many facts per query (``k``)."""
        return self.k

    @similarity_top_k.setter
    def similarity_top_k(self, value: int) -> None:
        self.k = value

    def _arguments(self) -> dict[str, Any]:
        arguments: dict[str, Any] = {"scope": self.scope, "mode": self.mode, "k": self.k}
        if self._filters:
            arguments["filters"] = self._filters
        if self.min_relevance is not None:
            arguments["min_relevance"] = float(self.min_relevance)
        if self.run is not None:
            arguments["run"] = self.run
        return arguments

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if not query_bundle.query_str.strip():
            return []
        hits = self.memory.search(query_bundle.query_str, **self._arguments())
        return [hit_to_node(hit) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if not query_bundle.query_str.strip():
            return []
        if self._amemory is not None:
            hits = await self._amemory.search(query_bundle.query_str, **self._arguments())
        else:
            hits = await asyncio.to_thread(
                self.memory.search, query_bundle.query_str, **self._arguments()
            )
        return [hit_to_node(hit) for hit in hits]
