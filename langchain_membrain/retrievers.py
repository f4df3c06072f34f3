"""A LangChain retriever over MemBrain facts.

Each retrieved :class:`~langchain_core.documents.Document` is one fact: its ``page_content`` is
the fact as a reader should see it (entities under their canonical names, times as written), its
``id`` the fact id, and its metadata carries the evidence: the raw fact text, the entities, the
validity window, the cited source messages, the fused score and the paths that found it.

The scope is fixed (``scope=Scope(...)``) or a template resolved at every call from the run's
``config["configurable"]`` (``namespace=("memories", "{user_id}")``, or any
:class:`~membrain.binding.ScopeBinding` such as ``ScopeBinding(dataset="{user_id}", ...)``), the
same mechanism the tools and the LangGraph nodes use: one retriever serves every user of a chain.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, ensure_config
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from langchain_membrain._runs import run_of
from membrain import ConfigurationError, InputError, MemoryHit, RetrievalMode, Scope, ScopeError
from membrain.api.metadata import metadata_filter
from membrain.binding import ScopeBinding
from membrain.extraction.llm import llm_callbacks
from membrain.remote import MemoryLike

__all__ = ["SEARCH_KWARGS", "MembrainRetriever", "hit_to_document"]

SEARCH_KWARGS = ("k", "filter", "mode", "min_relevance")
"""The keys ``search_kwargs`` (and a call) may set."""

_SOURCE = "config['configurable']"
_HINT = "pass it when invoking, e.g. retriever.invoke(query, {'configurable': {{key}: ...}})"
_RUN_VALUES: ContextVar[Mapping[str, Any] | None] = ContextVar("membrain_run_values", default=None)


def hit_to_document(hit: MemoryHit) -> Document:
    """Convert a :class:`~membrain.MemoryHit` into a LangChain ``Document``.

    Metadata: :meth:`membrain.MemoryHit.metadata` (fact id, raw text, canonical entity names,
    valid time, sources, fused score, paths and ranks, scope and session).
    """
    return Document(page_content=hit.text or hit.fact.text, metadata=hit.metadata(), id=hit.fact.id)


class MembrainRetriever(BaseRetriever):
    """Retrieve MemBrain facts as LangChain documents.

    **Where it searches.** Give one of: a fixed ``scope``; its parts ``dataset`` and ``task``
    (optionally ``session``), taken literally; a langmem ``namespace`` template such as
    ``("memories", "{user_id}")`` (the user is the dataset, the literal labels the task:
    :meth:`membrain.binding.ScopeBinding.from_namespace`, as
    :func:`~langchain_membrain.create_memory_tools` reads it); or a ``scope_template``
    (:class:`~membrain.binding.ScopeBinding`, e.g. ``ScopeBinding(dataset="{user_id}",
    task="assistant", session=None)``). Templates are resolved at every call from the
    run's ``config["configurable"]``: ``chain.invoke(q, {"configurable": {"user_id": "sara"}})``
    reads Sara's memory, so one retriever serves every user. A missing value raises
    :class:`~membrain.ScopeError`.

    **What it returns.** ``search_kwargs`` sets the search as vector-store retrievers take it
    (``as_retriever(search_kwargs={"k": 4})``): ``k``, ``filter`` (MemBrain's metadata filters,
    ``{"project": "apollo"}`` or ``{"project": {"in": ["apollo", "zeus"]}}``:
    :mod:`membrain.api.metadata`), ``mode`` and ``min_relevance`` (only hits whose
    ``relevance``, in [0, 1], reaches it). Each may also be passed per call:
    ``retriever.invoke("question", k=3, filter={...})``; a call's value wins, then
    ``search_kwargs``, then the ``k`` and ``mode`` fields.

    Args:
        memory: The memory to search: a :class:`~membrain.Memory`, or a
            :class:`~membrain.RemoteMemory` of a served memory.
        scope: Where to search.
        dataset: Scope dataset (instead of ``scope``).
        task: Scope task (instead of ``scope``).
        session: Scope session (instead of ``scope``; optional).
        namespace: A langmem namespace template instead of ``scope``.
        scope_template: A :class:`~membrain.binding.ScopeBinding` instead of ``scope``.
        search_kwargs: ``k``, ``filter``, ``mode``, ``min_relevance``; any other key is an
            error.
        k: How many facts to return (without ``max_tokens``), or to search (with it).
        mode: Retrieval mode (``fast``, ``expand``, ``deep``, ``auto``).
        max_tokens: Return the facts of ``Memory.context`` within this budget (cl100k tokens)
            instead of the ``k`` best.
        profile_ratio: With ``max_tokens``: the user profile's share of it. The first
            document is then the profile block (``metadata["kind"] == "profile"``, the entry and
            fact ids it holds), the same every turn.

    Raises:
        ScopeError: No scope, more than one way of giving it, an invalid part, or (at a call)
            a value a template needs missing from ``config["configurable"]``.
        ValidationError: An unknown ``search_kwargs`` key, a bad mode, ``k`` or filter.

    Example:
        >>> from membrain import Memory, Scope
        >>> mem = Memory(path="/tmp/mem")  # doctest: +SKIP
        >>> retriever = MembrainRetriever(memory=mem, namespace=("memories", "{user_id}"))
        ... # doctest: +SKIP
        >>> docs = retriever.invoke(
        ...     "What is Sara's cat called?", {"configurable": {"user_id": "sara"}}
        ... )  # doctest: +SKIP
        >>> docs[0].metadata["sources"]  # doctest: +SKIP
        ['m1']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: MemoryLike  # a Memory, or a RemoteMemory of a server
    scope: Scope | None = None
    dataset: str | None = None
    task: str | None = None
    session: str | None = None
    namespace: tuple[str, ...] | None = None
    scope_template: ScopeBinding | None = None
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    k: int = Field(default=10, ge=1)
    mode: str = RetrievalMode.EXPAND.value
    max_tokens: int | None = Field(default=None, ge=1)
    profile_ratio: float = Field(default=0.0, ge=0, le=1)

    _binding: ScopeBinding = PrivateAttr()

    @model_validator(mode="after")
    def _resolve_scope(self) -> MembrainRetriever:
        self._binding = self._make_binding()
        scope = self._binding.scope
        self.scope = scope
        if scope is not None:
            self.dataset, self.task, self.session = scope.dataset, scope.task, scope.session
        if self.profile_ratio and self.max_tokens is None:
            raise ValueError("profile_ratio takes a share of max_tokens: give max_tokens too")
        return self

    def _make_binding(self) -> ScopeBinding:
        parts = (self.dataset, self.task, self.session)
        # A fixed scope's parts are copied onto the retriever: seeing them again is no conflict.
        copied = self.scope is not None and parts == _parts(self.scope)
        ways = {
            "scope": self.scope is not None,
            "dataset/task/session": any(p is not None for p in parts) and not copied,
            "namespace": self.namespace is not None,
            "scope_template": self.scope_template is not None,
        }
        given = [name for name, used in ways.items() if used]
        if len(given) > 1:
            raise ScopeError(f"pass one of {' or '.join(given)}, not both")
        if self.namespace is not None:
            return ScopeBinding.from_namespace(self.namespace)
        if self.scope_template is not None:
            return self.scope_template
        if self.scope is not None:
            return ScopeBinding.fixed(self.scope)
        return ScopeBinding.of(
            dataset=self.dataset, task=self.task, session=self.session, owner="MembrainRetriever"
        )

    @field_validator("namespace", mode="before")
    @classmethod
    def _check_namespace(cls, value: Sequence[str] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        if isinstance(value, str):
            raise ScopeError(f"namespace is a tuple of labels, like ('memories', {value!r})")
        return tuple(value)

    @field_validator("mode", mode="before")
    @classmethod
    def _check_mode(cls, value: RetrievalMode | str) -> str:
        # ConfigurationError is a ValueError: pydantic reports it as a validation error.
        return RetrievalMode.parse(value).value

    @field_validator("search_kwargs", mode="before")
    @classmethod
    def _check_search_kwargs(cls, value: Mapping[str, Any] | None) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ConfigurationError("search_kwargs must be a dict such as {'k': 4}")
        return _checked(dict(value), "search_kwargs")

    # -- scope of a call ------------------------------------------------------------------
    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Retrieve for ``input``; templates read ``config["configurable"]`` (see the class)."""
        config = ensure_config(config)
        token = _RUN_VALUES.set(config.get("configurable") or {})
        try:
            return super().invoke(input, config, **kwargs)
        finally:
            _RUN_VALUES.reset(token)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Retrieve for ``input`` without blocking the loop (see :meth:`invoke`)."""
        config = ensure_config(config)
        token = _RUN_VALUES.set(config.get("configurable") or {})
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            _RUN_VALUES.reset(token)

    def scope_for(self, config: RunnableConfig | Mapping[str, Any] | None = None) -> Scope:
        """The scope a call with ``config`` (or its ``configurable`` values) searches.

        Raises:
            ScopeError: A value the scope's template needs is missing.
        """
        values = config.get("configurable") if config and "configurable" in config else config
        return self._binding.resolve(values or {}, source=_SOURCE, hint=_HINT)

    # -- search -----------------------------------------------------------------------------
    def _search(
        self, query: str, scope: Scope, options: dict[str, Any], run: dict[str, Any]
    ) -> list[Document]:
        chosen = {**self.search_kwargs, **_checked(options, "the call")}
        k = chosen.get("k") or self.k
        mode = RetrievalMode.parse(chosen.get("mode") or self.mode)
        extra: dict[str, Any] = dict(run)
        if chosen.get("filter") is not None:
            extra["filters"] = chosen["filter"]
        if chosen.get("min_relevance") is not None:
            extra["min_relevance"] = chosen["min_relevance"]
        if self.max_tokens is None:
            found = self.memory.search(query, scope=scope, mode=mode, k=k, **extra)
            return [hit_to_document(hit) for hit in found]
        context = self.memory.context(
            query,
            scope=scope,
            mode=mode,
            k=k,
            max_tokens=self.max_tokens,
            profile_ratio=self.profile_ratio,
            **extra,
        )
        documents = [hit_to_document(hit) for hit in context.hits]
        if not context.profile:
            return documents
        block = context.text.split("\n\n", 1)[0]
        metadata = {
            "kind": "profile",
            "entry_ids": [e.id for e in context.profile],
            "fact_ids": [i for e in context.profile for i in e.fact_ids],
        }
        return [Document(page_content=block, metadata=metadata), *documents]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        scope = self.scope_for(_RUN_VALUES.get())
        run = _run(run_manager)
        with llm_callbacks(run_manager.get_child()):  # MemBrain's model calls: child runs
            return self._search(query, scope, options, run)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        scope = self.scope_for(_RUN_VALUES.get())
        run = _run(run_manager)
        with llm_callbacks(run_manager.get_child()):  # copied into the worker thread
            return await asyncio.to_thread(self._search, query, scope, options, run)


def _run(manager: CallbackManagerForRetrieverRun | AsyncCallbackManagerForRetrieverRun) -> Any:
    """The run a retrieval serves (:mod:`langchain_membrain._runs`), for the recall trace."""
    config = {"configurable": _RUN_VALUES.get(), "metadata": manager.metadata}
    return run_of(
        config, run_id=manager.run_id, parent_run_id=manager.parent_run_id, tags=manager.tags
    )


def _parts(scope: Scope) -> tuple[str | None, str | None, str | None]:
    return scope.dataset, scope.task, scope.session


def _checked(options: dict[str, Any], where: str) -> dict[str, Any]:
    """``options`` whose keys are :data:`SEARCH_KWARGS`, their values checked."""
    unknown = sorted(set(options) - set(SEARCH_KWARGS))
    if unknown:
        raise ConfigurationError(
            f"{where} has the unknown key {unknown[0]!r}; MembrainRetriever takes "
            f"{', '.join(SEARCH_KWARGS)} (MemBrain's metadata filters go under 'filter')"
        )
    k = options.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigurationError(f"k must be a positive integer, got {k!r}")
    if options.get("mode") is not None:
        options["mode"] = RetrievalMode.parse(options["mode"]).value
    if options.get("filter") is not None:
        try:
            metadata_filter(options["filter"])
        except InputError as exc:
            raise ConfigurationError(f"{where}: filter: {exc}") from None
    relevance = options.get("min_relevance")
    if relevance is not None and (
        isinstance(relevance, bool)
        or not isinstance(relevance, int | float)
        or not 0 <= relevance <= 1
    ):
        raise ConfigurationError(f"min_relevance is a number in [0, 1], got {relevance!r}")
    return options
