"""The :class:`Memory` facade: add conversations, search facts.

Write path: messages are stored first, as pending evidence; then :mod:`membrain.ingest` extracts
them batch by batch and marks them processed once their facts and entities are written. Ids are
deterministic, so adding the same messages again writes nothing twice, and a crash between the
steps leaves the messages pending for the next ``add``. Read path: :mod:`membrain.retrieval`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from membrain.accountable import UPDATE_CHANGE, AccountableMemory
from membrain.arguments import as_ids, renamed
from membrain.audit import Cause, ReviewPolicy
from membrain.checks import unicode_text
from membrain.config import MembrainSettings, settings_for
from membrain.embeddings import (
    Bm25Encoder,
    DenseEncoder,
    FastEmbedEncoder,
    SparseEncoder,
    as_dense_encoder,
    default_dense_encoder,
)
from membrain.entities import EntityResolver
from membrain.errors import ConfigurationError, InputError
from membrain.extraction.base import Extractor
from membrain.extraction.llm import LLMClient, as_llm_client, load_model
from membrain.extraction.llm_extractor import LLMExtractor
from membrain.extraction.offline import OfflineExtractor
from membrain.extraction.profile_writer import LLMProfileWriter
from membrain.extraction.prompts import Prompts
from membrain.ingest import Ingestor, message_id
from membrain.inputs import DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME, as_messages
from membrain.ledger import Ledger
from membrain.metadata import metadata_filter
from membrain.models import (
    Actor,
    ActorKind,
    Context,
    Entity,
    Fact,
    FactStatus,
    Message,
    MessageStatus,
    RetrievalMode,
    Scope,
    SearchResult,
    StoredMessage,
)
from membrain.path_names import BOOLEAN, ENTITY_TREE, current_names
from membrain.profile import DEFAULT_PROFILE_SCHEMA, ProfileSchema
from membrain.profile_ops import ProfileOperations
from membrain.profiling import ProfileBook
from membrain.results import AddResult, EvidenceHit
from membrain.retrieval.base import SearchContext
from membrain.retrieval.boolean import BooleanPath
from membrain.retrieval.context import assemble_context
from membrain.retrieval.entity_path import EntityTreePath
from membrain.retrieval.followup import with_answers
from membrain.retrieval.hits import memory_hits
from membrain.retrieval.rerank import RERANK_DEPTH, Reranker, packaged_reranker
from membrain.retrieval.search import RRF_K, Ranking, Searcher
from membrain.retrieval.tree import EntityTree
from membrain.scope import dataset_part
from membrain.storage import open_backend
from membrain.storage.base import DENSE, SPARSE, Backend, Collection, check_scope, is_point_id
from membrain.storage.lexical import open_lexical_index, release_lexical_index
from membrain.store import FactFilter, LexicalSync, RecordStore
from membrain.surface import MemoryLike

__all__ = ["AddResult", "EvidenceHit", "Memory"]


DEFAULT_PATH = Path(".membrain")


CANDIDATES = 50
"""How many candidates each retrieval path returns (at least ``k``)."""


class Memory(AccountableMemory, ProfileOperations, MemoryLike):
    """Long-term memory for an agent: conversations in, cited facts out.

    Accountable: a changed fact supersedes the old one (both kept, with record and valid time),
    every mutation is audited, facts carry a trust state that people confirm, dispute and review,
    and a purge erases content from every index (see
    :class:`~membrain.accountable.AccountableMemory`).

    Args:
        path: Folder of the embedded store (Qdrant Edge); default ``./.membrain``.
        qdrant_url: Use a Qdrant server or cluster at this URL instead of the embedded store.
        qdrant_api_key: API key for ``qdrant_url``.
        backend: A ready :class:`~membrain.storage.Backend` (overrides ``path``/``qdrant_url``).
        dense: Dense encoder: a :class:`~membrain.embeddings.DenseEncoder`, a LangChain
            ``Embeddings``, a LlamaIndex ``BaseEmbedding``, or a fastembed model name
            (:func:`~membrain.embeddings.as_dense_encoder`); default the packaged offline
            all-MiniLM-L6-v2. A store refuses to open with another encoder than it was built with.
        sparse: Sparse encoder; default Qdrant's English BM25.
        llm: A chat model for extraction: a LangChain ``BaseChatModel``, a LlamaIndex ``LLM``,
            or any object with ``generate(system, prompt)`` (:class:`membrain.ChatModel`).
            Without one, the offline rule-based extractor is used.
        prompts: Prompt templates for LLM extraction (default :mod:`membrain.extraction.prompts`).
        max_attempts: LLM calls per extraction step before the batch is left pending.
        extractor: A custom extractor (overrides ``llm``).
        batch_size: Messages per extraction batch (an LLM batch costs two calls).
        context_window: Preceding messages given to the extractor as context.
        review: Which changes wait for a person (:class:`~membrain.audit.ReviewPolicy`);
            default: none but disputed facts.
        keep_messages: How long after it was said an extracted message is kept (``None``:
            forever, the default); :meth:`apply_retention` erases older ones and facts then
            cite evidence that no longer exists.
        reranker: The model that orders the first results (default: the packaged one,
            :mod:`membrain.retrieval.rerank`; one trained on your own conversations by
            ``benchmarks/train_reranker.py`` is loaded with ``Reranker.from_json``).

    Example:
        >>> from membrain import Memory, Scope
        >>> mem = Memory(path="/tmp/mem")  # doctest: +SKIP
        >>> scope = Scope(dataset="sara", task="assistant")
        >>> mem.add([{"speaker": "Sara", "text": "I adopted a cat named Miso yesterday.",
        ...           "timestamp": "2024-03-15T14:01:00Z"}], scope=scope)  # doctest: +SKIP
        >>> mem.search("What is the cat called?", scope=scope)[0].fact.text  # doctest: +SKIP
        '[Sara] adopted a cat named [Miso] [yesterday::2024-03-14].'
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        qdrant_url: str | None = None,
        qdrant_api_key: str | None = None,
        backend: Backend | None = None,
        dense: DenseEncoder | str | object | None = None,
        sparse: SparseEncoder | None = None,
        llm: object | None = None,
        prompts: Prompts | None = None,
        max_attempts: int = 3,
        extractor: Extractor | None = None,
        batch_size: int = 32,
        context_window: int = 6,
        review: ReviewPolicy | None = None,
        keep_messages: timedelta | None = None,
        reranker: Reranker | None = None,
        profile_schema: ProfileSchema | None = None,
    ) -> None:
        if batch_size < 1 or context_window < 0:
            raise ConfigurationError("batch_size must be >= 1 and context_window >= 0")
        if keep_messages is not None and keep_messages <= timedelta(0):
            raise ConfigurationError("keep_messages must be a positive duration or None")
        self.keep_messages = keep_messages
        dense_encoder = as_dense_encoder(dense) if dense is not None else default_dense_encoder()
        self._backend = backend or open_backend(
            path, qdrant_url, qdrant_api_key, default=DEFAULT_PATH
        )
        embedded = backend is None and qdrant_url is None
        lexical_path = (Path(path) if path is not None else DEFAULT_PATH) / "lexical"
        try:
            self._lexical = open_lexical_index(lexical_path if embedded else None)
            try:
                self._store = RecordStore(self._backend, dense_encoder, sparse or Bm25Encoder())
            except BaseException:
                release_lexical_index(self._lexical)
                raise
        except BaseException:  # a store that cannot open is released, lock and all
            self._backend.close()
            raise
        self.batch_size = batch_size
        self.context_window = context_window
        self._llm: LLMClient | None = as_llm_client(llm) if llm is not None else None
        if extractor is not None:
            self._extractor: Extractor = extractor
        elif self._llm is not None:
            self._extractor = LLMExtractor(self._llm, prompts=prompts, max_attempts=max_attempts)
        else:
            self._extractor = OfflineExtractor()
        self._resolver = EntityResolver(self._store, self._llm)
        self._ledger = Ledger(self._store, review)
        self._profiles = ProfileBook(self._store, profile_schema or DEFAULT_PROFILE_SCHEMA)
        self._tree = EntityTree(self._store, llm=self._llm)
        self._searcher = Searcher(
            rrf_k=RRF_K,
            reranker=reranker or packaged_reranker(),
            extra_paths={
                ENTITY_TREE: EntityTreePath(self._tree),
                BOOLEAN: BooleanPath(self._lexical, sync=LexicalSync(self._store, self._lexical)),
            },
        )
        llm = self._llm
        writer = None if llm is None else LLMProfileWriter(llm, max_attempts=max_attempts)
        self._ingestor = Ingestor(
            self._store,
            self._extractor,
            self._resolver,
            self._llm,
            ledger=self._ledger,
            profiles=self._profiles,
            profile_writer=writer,
            batch_size=batch_size,
            context_window=context_window,
        )
        # The derived indexes and caches hear of every mutation from the record store.
        for listener in (self._lexical, self._tree, self._ingestor):
            self._store.subscribe(listener)
        self._store.on_recover(UPDATE_CHANGE, self._recover_update)
        try:  # a change a killed process left half-applied is settled before anything is served
            self._store.recover()
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_settings(
        cls, settings: MembrainSettings | None = None, *, dense: object | None = None
    ) -> Memory:
        """A Memory configured from ``settings``, or from ``MEMBRAIN_*`` environment variables.

        ``dense`` (an encoder, see ``Memory(dense=...)``) overrides ``settings.dense_model``.

        Example:
            >>> mem = Memory.from_settings(MembrainSettings(path="/tmp/mem"))  # doctest: +SKIP
        """
        settings = settings_for(settings)
        if dense is None and settings.dense_model:
            dense = FastEmbedEncoder(settings.dense_model)
        return cls(
            None if settings.qdrant_url else settings.path,
            qdrant_url=settings.qdrant_url,
            qdrant_api_key=settings.qdrant_api_key,
            dense=dense,
            llm=load_model(settings.llm) if settings.llm else None,
            batch_size=settings.batch_size,
            context_window=settings.context_window,
            keep_messages=settings.keep_messages,
        )

    @property
    def store(self) -> RecordStore:
        """The record store: typed records over the backend, the one door of every mutation.

        For tools that load or inspect records in bulk (benchmarks, migrations); applications
        use the methods of this class.
        """
        return self._store

    # -- lifecycle ---------------------------------------------------------------------------
    before_close: ClassVar[list[Callable[[Memory, float], None]]] = []
    """Called first by :meth:`close`, with ``drain_timeout`` (:mod:`membrain.background`)."""

    def close(self, *, drain_timeout: float = 5.0) -> None:
        """Drain the background writers (``drain_timeout`` s in all), then release the store."""
        for hook in self.before_close:
            hook(self, drain_timeout)
        release_lexical_index(self._lexical)
        self._backend.close()

    def optimize(self) -> None:
        """Build search indexes now (useful after a bulk load)."""
        self._backend.optimize()

    # -- write -------------------------------------------------------------------------------
    def add(
        self,
        messages: str | Iterable[Message | Mapping[str, Any] | object],
        *,
        scope: Scope,
        on_progress: Callable[[int], None] | None = None,
        extract: bool = True,
        by: Actor | str | None = None,
        user_name: str = DEFAULT_USER_NAME,
        assistant_name: str = DEFAULT_ASSISTANT_NAME,
    ) -> AddResult:
        """Store messages as evidence, then extract facts from them.

        Messages already processed are skipped; messages left pending by an earlier failure are
        extracted again. Extraction errors do not raise: the affected messages stay pending with
        the error recorded, and the errors are returned in :attr:`AddResult.errors`.

        Args:
            messages: :class:`Message` objects or dicts with ``speaker``, ``text``, ``timestamp``;
                or a string (one user message, said now); OpenAI-style ``{"role", "content"}``
                dicts; LangChain or LlamaIndex chat messages (see :mod:`membrain.inputs`).
            scope: Where the memory belongs.
            on_progress: Called with the number of messages finished after each batch.
            extract: ``False`` only stores the messages, durably, as pending evidence (for a
                background writer); :meth:`extract_pending` extracts them later.
            by: Who adds them (default the application, ``api``). Facts extracted from what an
                agent adds (``"agent:<name>"``) are ``derived`` and name it as their author.
            user_name: The speaker of user messages that name none (the name facts use).
            assistant_name: The speaker of assistant messages that name none.

        Raises:
            ScopeError: ``scope`` is missing or malformed.
            InputError: a message is malformed (nothing is stored then).
        """
        check_scope(scope)
        incoming = as_messages(messages, user_name=user_name, assistant_name=assistant_name)
        actor = Actor.parse(by, ActorKind.API) if by is not None else None
        return self._ingestor.add(scope, incoming, on_progress, extract=extract, by=actor)

    def extract_pending(
        self, *, scope: Scope, on_progress: Callable[[int], None] | None = None
    ) -> AddResult:
        """Extract every pending message of the scope.

        Pending messages are those ``add(..., extract=False)`` stored and those an earlier
        failure left pending. Safe to call again: processed messages are never extracted twice.
        """
        check_scope(scope)
        return self._ingestor.extract_pending(scope, on_progress)

    def retry_failed(
        self, *, scope: Scope, on_progress: Callable[[int], None] | None = None
    ) -> AddResult:
        """Extract again the scope's messages marked ``failed`` (each failed on its own).

        What fails again stays failed, with the new error recorded.
        """
        check_scope(scope)
        return self._ingestor.retry_failed(scope, on_progress)

    def dismiss_failed(
        self,
        message_ids: Sequence[str] | None = None,
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> list[str]:
        """Give up on failed messages: they stay stored as evidence and are never extracted.

        ``message_ids`` are stored ids (or unique prefixes of 8 or more hex digits) or source
        ids (default: every failed message of the scope). Audited as ``dismissed`` with ``by``
        and ``reason``; returns the ids dismissed.

        Raises:
            InputError: an id names no failed message of ``scope``.
        """
        check_scope(scope)
        failed = {m.id: m for m in self._store.iter_messages(scope, status=MessageStatus.FAILED)}
        if message_ids is None:
            chosen = list(failed)
        else:
            given = as_ids(message_ids, "message ids")
            whole = self._store.full_ids(Collection.MESSAGES, scope, given)
            by_source = {m.message.source_id: i for i, m in failed.items() if m.message.source_id}
            chosen = [
                w if w in failed else by_source.get(g, "")
                for g, w in zip(given, whole, strict=True)
            ]
            unknown = [g for g, i in zip(given, chosen, strict=True) if not i]
            if unknown:
                raise InputError(f"no failed message of {scope.key!r} has id {unknown[0]!r}")
        if chosen:
            cause = Cause.of(by, ActorKind.API, reason)
            self._store.set_message_status(scope, chosen, MessageStatus.DISMISSED, cause=cause)
        return chosen

    # -- read --------------------------------------------------------------------------------
    @renamed("question", "query")
    def search(
        self,
        query: str,
        *,
        scope: Scope,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        k: int = 10,
        reference: datetime | None = None,
        exclude_paths: Sequence[str] = (),
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        rerank: bool = True,
        filters: Mapping[str, object] | None = None,
    ) -> SearchResult:
        """The ``k`` facts that best answer ``query``, with their sources and explanation.

        Args:
            query: What to look for, as a question (``question=`` is still accepted, deprecated).
            scope: Where to look.
            mode: Which paths run (see :class:`RetrievalMode`).
            k: How many facts.
            reference: "Now" for relative times in the question ("last summer"); default the
                current time.
            exclude_paths: Path names the mode would run but should not ("hyde", "time", ...;
                "answers" turns off the answer follow-up of :mod:`membrain.retrieval.followup`).
                The former letters ("A", "B2", ...; :mod:`membrain.path_names`) are read as the
                names they stand for, with a ``DeprecationWarning``. A name no path has leaves
                nothing out.
            as_of: Search what the memory believed at this record time: facts recorded by
                then and not yet superseded, forgotten or retracted then. Default: the
                current beliefs (active facts).
            valid_at: Search the beliefs about this valid time: facts superseded since that
                were true then are included. A time the question names does the same.
            rerank: Order the first results of the answer follow-up (every mode but ``fast``,
                chats between named people) with the packaged reranker
                (:mod:`membrain.retrieval.rerank`); ``False`` keeps the fused order.
            filters: Only facts whose metadata meets these conditions (``{"project":
                "apollo"}``, ``{"project": {"in": ["apollo", "zeus"]}}``; :mod:`membrain.metadata`).

        Returns:
            A :class:`SearchResult`: a sequence of :class:`MemoryHit` (best first) that also
            says which mode ran (``auto`` ends as ``fast`` or ``expand``, ``escalated`` when it
            went on) and which paths. Every hit's ``paths`` maps each path that found the fact
            to its rank there, and ``score`` is the fused score.

        Raises:
            ScopeError: ``scope`` is missing or malformed.
            InputError: empty question or ``k < 1``.
            ConfigurationError: unknown mode.
        """
        requested = RetrievalMode.parse(mode)
        check_scope(scope)
        _check_query(query, k)
        conditions = metadata_filter(filters)
        # The caller is behind the ``renamed`` wrapper: three frames up.
        exclude_paths = current_names(exclude_paths, stacklevel=3)
        ctx = SearchContext.for_question(
            query,
            scope,
            self._store,
            participants=self.participants(scope=scope),
            limit=max(k, CANDIDATES),
            llm=self._llm,
            reference=reference,
            as_of=as_of,
            valid_at=valid_at,
            metadata=conditions,
        )
        # The reranker orders what the answer follow-up returns: without it (``fast``) it
        # gained nothing on LoCoMo dev (benchmarks/train_reranker.py).
        rerank = rerank and "answers" not in exclude_paths and self._searcher.reranks(ctx)
        depth = max(k, RERANK_DEPTH) if rerank else k
        run = self._searcher.search(requested, ctx, k=k, skip=exclude_paths, depth=depth)
        ranked = [(r.fact, r.score, r.paths) for r in run.results if r.fact is not None]
        paths = run.paths
        scored: list[tuple[Ranking, float | None]] = [(r, None) for r in ranked]
        if run.mode is not RetrievalMode.FAST and "answers" not in exclude_paths:
            ranked = with_answers(
                self._store, scope, ranked, k=depth, view=ctx.view, admits=ctx.admits
            )
            paths = (*paths, "answers")
            scored = self._searcher.rerank(ctx, ranked) if rerank else [(r, None) for r in ranked]
        scored = scored[:k]
        reranked = {r[0].id: score for r, score in scored if score is not None}
        return SearchResult(
            question=query,
            hits=tuple(memory_hits(self._store, scope, [r for r, _ in scored], reranked)),
            requested=requested,
            mode=run.mode,
            escalated=run.escalated,
            paths=paths,
        )

    @renamed("question", "query")
    def context(
        self,
        query: str,
        *,
        scope: Scope,
        max_tokens: int = 2000,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        k: int = 50,
        profile_tokens: int = 0,
        reference: datetime | None = None,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        filters: Mapping[str, object] | None = None,
        profile_ratio: float = 0.0,
    ) -> Context:
        """A cited context block for ``query`` that fits ``max_tokens`` (cl100k tokens).

        Facts are searched (``k`` candidates), then as many as fit are grouped under the
        entities they mention (with the entities' latest descriptions), ordered in time, each
        citing its source messages. With ``profile_ratio`` (0-1) the user profile's current
        entries (:meth:`profile`, stale ones left out) open the context within
        ``profile_ratio * max_tokens`` tokens, and the facts get the rest, the profile's unused
        share included. ``profile_tokens`` only reserves budget (no block). ``as_of``,
        ``valid_at`` and ``filters`` read as in :meth:`search`. Lines mark disputed facts,
        facts an agent wrote and superseded facts (when and by which fact).

        Raises:
            InputError: ``max_tokens < 1``, a reserve larger than the budget, a ratio outside
                0-1, or both a ratio and a reserve.
        """
        if isinstance(profile_ratio, bool) or not isinstance(profile_ratio, int | float):
            raise InputError(f"profile_ratio must be a number, got {profile_ratio!r}")
        if not 0 <= profile_ratio <= 1 or (profile_ratio and profile_tokens):
            raise InputError("profile_ratio is between 0 and 1, and excludes profile_tokens")
        entries = self.profile(scope=scope) if profile_ratio else None
        share = int(profile_ratio * max_tokens) if entries is not None else profile_tokens
        hits = self.search(
            query,
            scope=scope,
            mode=mode,
            k=k,
            reference=reference,
            as_of=as_of,
            valid_at=valid_at,
            filters=filters,
        ).hits
        return assemble_context(
            query, hits, max_tokens=max_tokens, profile_tokens=share, profile=entries
        )

    @renamed("question", "query")
    def search_messages(
        self,
        query: str,
        *,
        scope: Scope,
        k: int = 10,
        paths: Sequence[str] = (SPARSE, DENSE),
    ) -> list[EvidenceHit]:
        """Search the raw messages (the evidence) directly, by BM25, dense or both fused."""
        check_scope(scope)
        _check_query(query, k)
        unknown = set(paths) - {SPARSE, DENSE}
        if not paths or unknown:
            raise ConfigurationError(f"paths must be a non-empty subset of {SPARSE!r}, {DENSE!r}")
        found = self._store.search_messages(
            scope, query, using=paths, limit=k, candidates=max(k, CANDIDATES)
        )
        return [EvidenceHit(message=m.message, score=score) for m, score in found]

    def facts(
        self,
        *,
        scope: Scope,
        include_inactive: bool = False,
        derived_from: Sequence[str] = (),
        ids: Sequence[str] | None = None,
        filters: Mapping[str, object] | None = None,
    ) -> list[Fact]:
        """Every fact of the scope (active only unless ``include_inactive``).

        ``derived_from`` keeps the facts citing one of these messages, named by the caller's
        message ids (``Message.source_id``, as :attr:`MemoryHit.source_ids` shows them) or by
        their stored ids (:attr:`StoredMessage.id`, or a unique prefix). ``ids`` keeps only
        these facts, in the order given, each named whole or by a unique prefix of 8 or more
        hex digits (ids that name no fact of the scope are skipped). ``filters`` keeps the facts
        whose metadata meets them (as in :meth:`search`).
        """
        check_scope(scope)
        stored = self._message_ids(scope, derived_from)
        status = None if include_inactive else FactStatus.ACTIVE
        where = FactFilter(status=status, sources=stored, metadata=metadata_filter(filters))
        if ids is not None:
            given = self._store.full_ids(Collection.FACTS, scope, as_ids(ids))
            wanted = [i for i in given if is_point_id(i)]
            found = self._store.get_facts(scope, wanted) if wanted else []
            cited = set(stored)
            return [f for f in found if where.admits(f) and (not cited or cited & set(f.sources))]
        if not include_inactive or stored or where.metadata:
            return list(self._store.iter_facts(scope, where))
        return list(self._store.iter_facts(scope))

    def messages(self, *, scope: Scope, ids: Sequence[str] | None = None) -> list[StoredMessage]:
        """Every stored message of the scope, with its processing status, in time order.

        ``ids`` keeps only these messages, named by the caller's message ids
        (``Message.source_id``) or by their stored ids (:attr:`StoredMessage.id`), whole or by
        a unique prefix of 8 or more hex digits (as a context cites them); ids that name no
        message of the scope are skipped.

        Raises:
            InputError: a prefix names several messages of the scope (the message names them).
        """
        check_scope(scope)
        if ids is None:
            found = list(self._store.iter_messages(scope))
        else:
            wanted = [i for i in self._message_ids(scope, ids) if is_point_id(i)]
            found = self._store.get_messages(scope, wanted) if wanted else []
        return sorted(found, key=lambda m: m.message.timestamp)

    def _message_ids(self, scope: Scope, ids: Sequence[str]) -> tuple[str, ...]:
        """Stored message ids for ids that are stored ids (or unique prefixes) or source ids.

        Raises:
            InputError: ``ids`` is neither a string nor a sequence of strings, or a prefix
                names several messages.
        """
        given = as_ids(ids, "message ids")
        whole = self._store.full_ids(Collection.MESSAGES, scope, given)
        return tuple(
            dict.fromkeys([*whole, *(message_id(scope, source_id) for source_id in given)])
        )

    def entities(self, *, scope: Scope) -> list[Entity]:
        """Every entity of the scope's (dataset, task)."""
        check_scope(scope)
        return list(self._store.iter_entities(scope.without_session()))

    def participants(self, *, scope: Scope) -> list[str]:
        """The speakers of the scope's (dataset, task): whom its first-person facts are about."""
        check_scope(scope)
        return self._ingestor.participants(scope)

    def scopes(self, dataset: str | None = None) -> list[Scope]:
        """The (dataset, task) scopes that hold messages or facts (of ``dataset`` when given).

        Raises:
            ScopeError: ``dataset`` is not a valid scope part.
        """
        if dataset is not None:
            dataset = dataset_part(dataset)
        return self._store.scopes(dataset)


def _check_query(query: str, k: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InputError("the query must be a non-empty string")
    unicode_text(query, "the query")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be an integer of at least 1, got {k!r}")
