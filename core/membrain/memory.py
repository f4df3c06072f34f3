"""The :class:`Memory` facade: add conversations, search facts, account for every change.

Every operation of :data:`membrain.api.operations.OPERATIONS` is a method of :class:`Memory` (made
from its request model by :class:`~membrain.api.surface.MemoryLike`) that checks its arguments into
a request and hands it to :meth:`Memory.execute`, which runs the operation's ``_run_<name>``
below. The parameters, defaults, limits and documentation of each operation live on its request
(:mod:`membrain.api.requests`); what it does lives here.

Write path: messages are stored first, as pending evidence; then :mod:`membrain.ingest` extracts
them batch by batch and marks them processed once their facts and entities are written. Ids are
deterministic, so adding the same messages again writes nothing twice, and a crash between the
steps leaves the messages pending for the next ``add``. Read path: :mod:`membrain.retrieval`.
Changes of belief (forget, supersede, update, trust, review), their history and audit, and
erasure follow the rules of :class:`membrain.knowledge.ledger.Ledger`; every fact id may be given
whole or as a unique prefix of 8 or more hex digits.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from membrain.api import requests as rq
from membrain.api.arguments import as_ids
from membrain.api.audit import (
    AuditAction,
    AuditEvent,
    Cause,
    FactHistory,
    ReviewItem,
    ReviewPolicy,
)
from membrain.api.config import MembrainSettings, settings_for
from membrain.api.erasure import ErasureCheck, ErasureReceipt
from membrain.api.errors import ConfigurationError, ConflictError, InputError, NotFoundError
from membrain.api.expiry import (
    DEFAULT_EXPIRY_GRACE,
    ExpiryRule,
    expiry_rules,
    has_expired,
    message_expiry,
)
from membrain.api.metadata import metadata_filter
from membrain.api.models import (
    Actor,
    ActorKind,
    Context,
    Entity,
    Fact,
    FactStatus,
    Message,
    MessageStatus,
    Scope,
    SearchResult,
    StoredMessage,
    now,
    utc,
)
from membrain.api.operations import OPERATIONS
from membrain.api.path_names import BOOLEAN, ENTITY_TREE
from membrain.api.profile import DEFAULT_PROFILE_SCHEMA, ProfileEntry, ProfileSchema
from membrain.api.recalls import Recall
from membrain.api.results import AddResult, EvidenceHit, PurgeResult
from membrain.api.surface import MemoryLike
from membrain.backends import open_backend
from membrain.backends.base import Backend, Collection, ScoredPoint, is_point_id
from membrain.backends.edge import EdgeBackend
from membrain.backends.lexical import open_lexical_index, release_lexical_index
from membrain.embeddings import (
    Bm25Encoder,
    DenseEncoder,
    FastEmbedEncoder,
    SparseEncoder,
    as_dense_encoder,
    default_dense_encoder,
)
from membrain.extraction.base import Extractor
from membrain.extraction.llm import LLMClient, as_llm_client, load_model
from membrain.extraction.llm_extractor import LLMExtractor
from membrain.extraction.offline import OfflineExtractor
from membrain.extraction.profile_writer import LLMProfileWriter
from membrain.extraction.prompts import Prompts
from membrain.extraction.stated import StatedFacts
from membrain.ingest import Ingestor, message_id
from membrain.knowledge.entities import EntityResolver
from membrain.knowledge.expiry import ExpirySweep
from membrain.knowledge.facts import fact_id_of
from membrain.knowledge.ledger import Ledger
from membrain.knowledge.profiles import ProfileBook
from membrain.knowledge.recall_log import RecallLog
from membrain.records import FactFilter, LexicalSync, RecordStore, erasure
from membrain.records.journal import ERASURES_TASK, Change
from membrain.records.store import id_prefix
from membrain.retrieval.base import SearchContext
from membrain.retrieval.boolean import BooleanPath
from membrain.retrieval.context import assemble_context, nothing_relevant
from membrain.retrieval.entity_path import EntityTreePath
from membrain.retrieval.followup import with_answers
from membrain.retrieval.hits import memory_hits
from membrain.retrieval.relevance import packaged_relevance
from membrain.retrieval.rerank import RERANK_DEPTH, Reranker, packaged_reranker
from membrain.retrieval.search import RRF_K, Ranking, Searcher
from membrain.retrieval.tree import EntityTree
from membrain.temporal import find_annotations

__all__ = ["UPDATE_CHANGE", "AddResult", "EvidenceHit", "Memory", "PurgeResult"]

log = logging.getLogger("membrain")

DEFAULT_PATH = Path(".membrain")

CANDIDATES = 50
"""How many candidates each retrieval path returns (at least ``k``)."""

UPDATE_CHANGE = "update"
"""The announced change of an ``update`` (its finisher's name)."""


class Memory(MemoryLike):
    """Long-term memory for an agent: conversations in, cited facts out.

    Accountable: a changed fact supersedes the old one (both kept, with record and valid time),
    every mutation is audited, facts carry a trust state that people confirm, dispute and review,
    and a purge erases content from every index. Its methods are the operations of
    :data:`membrain.api.operations.OPERATIONS` (see :mod:`membrain.api.requests` for each one's
    parameters); :meth:`execute` runs a request built apart.

    Args:
        path: Folder of the embedded store (Qdrant Edge); default ``./.membrain``.
        qdrant_url: Use a Qdrant server or cluster at this URL instead of the embedded store.
        qdrant_api_key: API key for ``qdrant_url``.
        backend: A ready :class:`~membrain.backends.Backend` (overrides ``path``/``qdrant_url``).
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
        review: Which changes wait for a person (:class:`~membrain.api.audit.ReviewPolicy`);
            default: none but disputed facts.
        keep_messages: How long after it was said an extracted message is kept (``None``:
            forever, the default); :meth:`apply_retention` erases older ones and facts then
            cite evidence that no longer exists.
        reranker: The model that orders the first results (default: the packaged one,
            :mod:`membrain.retrieval.rerank`; one trained on your own conversations by
            ``benchmarks/train_reranker.py`` is loaded with ``Reranker.from_json``).
        profile_schema: The topics of the user profile (default
            :data:`~membrain.api.profile.DEFAULT_PROFILE_SCHEMA`).
        trace_recalls: Record what each ``search`` and ``context`` gives (the recall trace,
            :mod:`membrain.api.recalls`): read back with :meth:`trace` and :meth:`recalls`.
        keep_recalls: How long recalls are kept (``None``: until their facts are purged);
            :meth:`apply_retention` erases older ones.
        expiry: When messages (and their facts) expire by their metadata: an
            :class:`~membrain.api.expiry.ExpiryRule` or a list (the first match wins); an
            add's own ``expires_at``/``ttl`` wins over them. Default: nothing expires.
        expiry_grace: How long expired facts and messages are kept (audit, ``as_of``) before
            :meth:`apply_retention` erases them (default 7 days).

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
        trace_recalls: bool = False,
        keep_recalls: timedelta | None = None,
        expiry: ExpiryRule | Sequence[ExpiryRule] | None = None,
        expiry_grace: timedelta = DEFAULT_EXPIRY_GRACE,
    ) -> None:
        if batch_size < 1 or context_window < 0:
            raise ConfigurationError("batch_size must be >= 1 and context_window >= 0")
        if keep_messages is not None and keep_messages <= timedelta(0):
            raise ConfigurationError("keep_messages must be a positive duration or None")
        if keep_recalls is not None and keep_recalls <= timedelta(0):
            raise ConfigurationError("keep_recalls must be a positive duration or None")
        self.keep_messages = keep_messages
        self.trace_recalls = trace_recalls
        self.keep_recalls = keep_recalls
        self.expiry = expiry_rules(expiry)
        if expiry_grace < timedelta(0):
            raise ConfigurationError("expiry_grace must not be negative")
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
        self._ledger = Ledger(self._store, review, llm=self._llm, max_attempts=max_attempts)
        self._profiles = ProfileBook(self._store, profile_schema or DEFAULT_PROFILE_SCHEMA)
        self._recall_log = RecallLog(self._store)
        self._expiry = ExpirySweep(self._store, self._ledger, expiry_grace)
        self._tree = EntityTree(self._store, llm=self._llm)
        # Relevance reads the packaged reranker's log-odds, which it was calibrated on; with
        # another reranker only the similarities (``membrain.retrieval.relevance``).
        self._relevance = packaged_relevance()
        self._calibrated_margins = reranker is None
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
            trace_recalls=settings.trace_recalls,
            keep_recalls=settings.keep_recalls,
            expiry=settings.expiry,
            expiry_grace=settings.expiry_grace,
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
        self._recall_log.close(drain_timeout)
        release_lexical_index(self._lexical)
        self._backend.close()

    def execute(self, request: rq.OperationRequest) -> Any:
        """Run one checked request: what every operation's method calls.

        Raises:
            KeyError: no operation takes a request of this type.
            ConfigurationError: this memory does not implement the operation.
            MembrainError: the operation's own errors.
        """
        op = OPERATIONS.of(request)
        run: Callable[[Any], Any] | None = getattr(self, f"_run_{op.name}", None)
        if run is None:
            raise ConfigurationError(f"{type(self).__name__} does not implement {op.name!r}")
        return run(request)

    def _fact_ids(self, scope: Scope, value: object) -> list[str]:
        """Fact ids given as a string or a list, prefixes of 8+ hex digits made whole."""
        return self._store.full_ids(Collection.FACTS, scope, as_ids(value))

    def _message_ids(self, scope: Scope, ids: Sequence[str]) -> tuple[str, ...]:
        """Stored message ids for ids that are stored ids (or unique prefixes) or source ids.

        Raises:
            InputError: a prefix names several messages.
        """
        given = as_ids(ids, "message ids")
        whole = self._store.full_ids(Collection.MESSAGES, scope, given)
        return tuple(
            dict.fromkeys([*whole, *(message_id(scope, source_id) for source_id in given)])
        )

    # -- extraction --------------------------------------------------------------------------
    def _run_add(self, r: rq.AddRequest) -> AddResult:
        actor = Actor.parse(r.by, ActorKind.API) if r.by is not None else None
        moment = now()
        expires = [
            message_expiry(m, at=moment, expires_at=r.expires_at, ttl=r.ttl, rules=self.expiry)
            for m in r.messages
        ]
        return self._ingestor.add(
            r.scope, list(r.messages), r.on_progress, extract=r.extract, by=actor, expires=expires
        )

    def _run_extract_pending(self, r: rq.ExtractPendingRequest) -> AddResult:
        return self._ingestor.extract_pending(r.scope, r.on_progress)

    def _run_retry_failed(self, r: rq.RetryFailedRequest) -> AddResult:
        return self._ingestor.retry_failed(r.scope, r.on_progress)

    def _run_dismiss_failed(self, r: rq.DismissFailedRequest) -> list[str]:
        scope = r.scope
        failed = {m.id: m for m in self._store.iter_messages(scope, status=MessageStatus.FAILED)}
        if r.message_ids is None:
            chosen = list(failed)
        else:
            given = list(r.message_ids)
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
            cause = Cause.of(r.by, ActorKind.API, r.reason)
            self._store.set_message_status(scope, chosen, MessageStatus.DISMISSED, cause=cause)
        return chosen

    # -- reading -----------------------------------------------------------------------------
    def _run_search(self, r: rq.SearchRequest) -> SearchResult:
        found = self._search(r)
        if self.trace_recalls:
            self._recall_log.note(
                r.scope, "search", r.query, found.hits, run=r.run, tags=r.run_tags
            )
        return found

    def _search(self, r: rq.SearchRequest) -> SearchResult:
        scope, k, skip = r.scope, r.k, r.exclude_paths
        ctx = SearchContext.for_question(
            r.query,
            scope,
            self._store,
            participants=self._ingestor.participants(scope),
            limit=max(k, CANDIDATES),
            llm=self._llm,
            reference=r.reference,
            as_of=r.as_of,
            valid_at=r.valid_at,
            metadata=metadata_filter(r.filters),
        )
        # The reranker orders what the answer follow-up returns: without it (``fast``) it
        # gained nothing on LoCoMo dev (benchmarks/train_reranker.py).
        rerank = r.rerank and "answers" not in skip and self._searcher.reranks(ctx)
        depth = max(k, RERANK_DEPTH) if rerank else k
        run = self._searcher.search(r.mode, ctx, k=k, skip=skip, depth=depth)
        ranked = [(x.fact, x.score, x.paths) for x in run.results if x.fact is not None]
        paths = run.paths
        scored: list[tuple[Ranking, float | None]] = [(x, None) for x in ranked]
        if run.mode is not run.mode.FAST and "answers" not in skip:
            ranked = with_answers(
                self._store, scope, ranked, k=depth, view=ctx.view, admits=ctx.admits
            )
            paths = (*paths, "answers")
            scored = self._searcher.rerank(ctx, ranked) if rerank else [(x, None) for x in ranked]
        scored = scored[:k]
        reranked = {x[0].id: score for x, score in scored if score is not None}
        margins = reranked if self._calibrated_margins else {}
        relevance = self._relevance.relevance(ctx, [x[0] for x, _ in scored], margins)
        if r.min_relevance is not None:  # relevance never rises down the list: a prefix stays
            kept = sum(p >= r.min_relevance for p in relevance)
            scored, relevance = scored[:kept], relevance[:kept]
        ranked_hits = memory_hits(self._store, scope, [x for x, _ in scored], reranked, relevance)
        return SearchResult(
            question=r.query,
            hits=tuple(ranked_hits),
            requested=r.mode,
            mode=run.mode,
            escalated=run.escalated,
            paths=paths,
        )

    def _run_context(self, r: rq.ContextRequest) -> Context:
        if r.profile_ratio and r.profile_tokens:
            raise InputError("profile_ratio is between 0 and 1, and excludes profile_tokens")
        entries = self._profiles.current(r.scope, None) if r.profile_ratio else None
        share = int(r.profile_ratio * r.max_tokens) if entries is not None else r.profile_tokens
        search = rq.SearchRequest.of(
            query=r.query,
            scope=r.scope,
            mode=r.mode,
            k=r.k,
            reference=r.reference,
            as_of=r.as_of,
            valid_at=r.valid_at,
            filters=r.filters,
        )
        found = self._search(search).hits
        floor = r.min_relevance
        if floor is None and self._relevance.calibrated(self._store.dense.name):
            floor = rq.CONTEXT_MIN_RELEVANCE
        hits = found if floor is None else tuple(h for h in found if h.relevance >= floor)
        context = assemble_context(
            r.query, hits, max_tokens=r.max_tokens, profile_tokens=share, profile=entries
        )
        if self.trace_recalls:  # what the context holds, not every candidate
            self._recall_log.note(
                r.scope, "context", r.query, context.hits, run=r.run, tags=r.run_tags
            )
        # No hit: the note says so when the floor left out what the search found (an empty
        # memory keeps an empty text).
        return context if hits else nothing_relevant(context, note=bool(found))

    def _run_search_messages(self, r: rq.SearchMessagesRequest) -> list[EvidenceHit]:
        found = self._store.search_messages(
            r.scope, r.query, using=r.paths, limit=r.k, candidates=max(r.k, CANDIDATES)
        )
        # an expired message is out of current reads, as its facts are
        return [
            EvidenceHit(message=m.message, score=score) for m, score in found if not has_expired(m)
        ]

    def _run_facts(self, r: rq.FactsRequest) -> list[Fact]:
        scope = r.scope
        stored = self._message_ids(scope, r.derived_from)
        status = None if r.include_inactive else FactStatus.ACTIVE
        where = FactFilter(status=status, sources=stored, metadata=metadata_filter(r.filters))
        if r.ids is not None:
            given = self._store.full_ids(Collection.FACTS, scope, list(r.ids))
            wanted = [i for i in given if is_point_id(i)]
            found = self._store.get_facts(scope, wanted) if wanted else []
            cited = set(stored)
            return [f for f in found if where.admits(f) and (not cited or cited & set(f.sources))]
        if not r.include_inactive or stored or where.metadata:
            return list(self._store.iter_facts(scope, where))
        return list(self._store.iter_facts(scope))

    def _run_get(self, r: rq.GetRequest) -> Fact:
        (whole,) = self._fact_ids(r.scope, r.fact_id)
        (fact,) = self._ledger.facts(r.scope, [whole])
        return fact

    def _run_messages(self, r: rq.MessagesRequest) -> list[StoredMessage]:
        if r.ids is None:
            found = list(self._store.iter_messages(r.scope))
        else:
            wanted = [i for i in self._message_ids(r.scope, r.ids) if is_point_id(i)]
            found = self._store.get_messages(r.scope, wanted) if wanted else []
        return sorted(found, key=lambda m: m.message.timestamp)

    def _run_entities(self, r: rq.EntitiesRequest) -> list[Entity]:
        return list(self._store.iter_entities(r.scope.without_session()))

    def _run_participants(self, r: rq.ParticipantsRequest) -> list[str]:
        return self._ingestor.participants(r.scope)

    def _run_scopes(self, r: rq.ScopesRequest) -> list[Scope]:
        return self._store.scopes(r.dataset)

    def _run_review_queue(self, r: rq.ReviewQueueRequest) -> list[ReviewItem]:
        return self._ledger.review_queue(r.scope)

    def _run_history(self, r: rq.HistoryRequest) -> FactHistory:
        (whole,) = self._fact_ids(r.scope, r.fact_id)
        if not is_point_id(whole) and id_prefix(whole) is not None:
            raise NotFoundError(f"no fact with id {r.fact_id} in scope {r.scope.key!r}")
        return self._ledger.history(r.scope, whole)

    def _run_audit(self, r: rq.AuditRequest) -> list[AuditEvent]:
        try:
            wanted = [AuditAction(a) for a in r.actions or ()]
        except ValueError:
            known = ", ".join(a.value for a in AuditAction)
            raise ConfigurationError(
                f"unknown audit action in {list(r.actions or ())!r}; known: {known}"
            ) from None
        start = utc(r.since) if r.since is not None else None
        return self._store.iter_audit(r.scope, targets=r.targets, actions=wanted, since=start)

    def _run_trace(self, r: rq.TraceRequest) -> list[Recall]:
        return self._recall_log.trace(r.scope, r.run)

    def _run_recalls(self, r: rq.RecallsRequest) -> list[Recall]:
        (whole,) = self._fact_ids(r.scope, r.fact_id)
        if not is_point_id(whole) and id_prefix(whole) is not None:
            raise NotFoundError(f"no fact with id {r.fact_id} in scope {r.scope.key!r}")
        return self._recall_log.recalls(r.scope, whole)

    def _run_profile(self, r: rq.ProfileRequest) -> list[ProfileEntry]:
        wanted = None if r.topics is None else as_ids(r.topics, "topics")
        return self._profiles.current(r.scope, wanted)

    def _run_profile_history(self, r: rq.ProfileHistoryRequest) -> list[ProfileEntry]:
        return self._profiles.history(r.scope, r.topic, r.subtopic)

    # -- changes of belief -------------------------------------------------------------------
    def _run_forget(self, r: rq.ForgetRequest) -> list[Fact]:
        cause = Cause.of(r.by, ActorKind.API, r.reason)
        return self._ledger.forget(r.scope, self._fact_ids(r.scope, r.fact_ids), cause)

    def _run_supersede(self, r: rq.SupersedeRequest) -> Fact:
        cause = Cause.of(r.by, ActorKind.API, r.reason)
        old_id = self._fact_ids(r.scope, r.old_fact_id)
        new_ids = self._fact_ids(r.scope, r.new_fact_ids)
        (old,) = self._ledger.supersede(r.scope, old_id, new_ids, cause)
        return old

    def _run_update(self, r: rq.UpdateRequest) -> Fact:
        scope = r.scope
        old = self._run_get(rq.GetRequest.of(fact_id=r.fact_id, scope=scope))
        if old.status is not FactStatus.ACTIVE:
            raise ConflictError(f"only active facts can be updated; {old.id} is {old.status}")
        said = r.text.strip()
        if not said:
            raise InputError("the new text of a fact is empty")
        stated = _bracketed(said, old.entities)
        find_annotations(stated)  # a malformed time is refused before anything is written
        cause = Cause.of(r.by, ActorKind.API, r.reason)
        moment = now()
        message = Message(
            speaker=str(cause.actor),
            text=said,
            timestamp=moment,
            source_id=f"update:{old.id}:{moment.isoformat()}",
            metadata=old.metadata,  # the new fact keeps what the old one was filed under
        )
        stored_id = message_id(scope, message)
        agent = cause.actor.kind is ActorKind.AGENT
        evidence = StoredMessage(
            id=stored_id,
            scope=scope,
            message=message.model_copy(update={"id": stored_id}),
            # Stored as extracted already: no extraction but this one ever reads it.
            status=MessageStatus.PROCESSED,
            recorded_at=now(),
            added_by=str(cause.actor) if agent else None,
            expires_at=message_expiry(
                message, at=moment, expires_at=r.expires_at, ttl=r.ttl, rules=self.expiry
            ),
        )
        new_id = fact_id_of(scope, StatedFacts.id, (stored_id,), stated)
        # One change: announced first (the supersession's event, pending), then the message,
        # the fact and the supersession; settled when the store opens if a crash stops it.
        intent = self._store.announce(
            scope,
            Cause(cause.actor, r.reason or "updated"),
            Change(
                AuditAction.SUPERSEDED,
                (old.id,),
                {"superseded_by": [new_id]},
                {"change": UPDATE_CHANGE, "message": stored_id, "fact": new_id},
            ),
        )
        try:
            self._store.put_messages(scope, [evidence], cause=Cause(cause.actor))
            self._finish_update(scope, intent)
        except BaseException:
            with suppress(Exception):
                self._abandon_update(scope, intent)
            raise
        return self._run_get(rq.GetRequest.of(fact_id=new_id, scope=scope))

    def _finish_update(self, scope: Scope, intent: ScoredPoint) -> None:
        """Write what an announced update has not written yet, then commit its event.

        Every step is skipped when done already: the message stored, the fact written from it,
        the old fact superseded (a supersession applied again changes nothing).

        Raises:
            MembrainError: a write or the fact's extraction failed (nothing is undone).
        """
        redo = intent.payload["redo"]
        actor = Actor.model_validate(intent.payload["actor"])
        (old_id,) = intent.payload["targets"]
        evidence = self._store.get_messages(scope, [redo["message"]])
        olds = self._store.get_facts(scope, [old_id])
        if not evidence or not olds:  # stopped before the message was stored
            self._store.drop_announced(scope, intent)
            return
        (message,), (old,) = evidence, olds
        new_id = redo["fact"]
        if self._store.get_facts(scope, [new_id]):
            self._store.audit_missing(
                scope, AuditAction.PROCESSED, [message.id], cause=Cause(actor)
            )
        else:
            stated = _bracketed(message.message.text, old.entities)
            result = self._ingestor.extract(
                scope, [message], None, by=actor, extractor=StatedFacts({message.id: stated})
            )
            if result.errors or new_id not in result.fact_ids:
                said = message.message.text
                problem = InputError(f"no fact could be written from {said!r:.80}")
                raise (result.errors or (problem,))[0]
        cause = Cause(actor, str(intent.payload.get("reason") or "updated"))
        self._ledger.supersede(scope, [old.id], [new_id], cause, announced=intent)

    def _abandon_update(self, scope: Scope, intent: ScoredPoint) -> None:
        """Undo an update that wrote no fact: its message is dismissed, never extracted."""
        if self._store.get_facts(scope, [intent.payload["redo"]["fact"]]):
            return  # the fact is written: the update is finished, now or on the next open
        evidence = self._store.get_messages(scope, [intent.payload["redo"]["message"]])
        if evidence and evidence[0].status is not MessageStatus.DISMISSED:
            actor = Actor.model_validate(intent.payload["actor"])
            cause = Cause(actor, "the update it states failed")
            self._store.set_message_status(
                scope, [evidence[0].id], MessageStatus.DISMISSED, cause=cause
            )
        self._store.drop_announced(scope, intent)

    def _recover_update(self, scope: Scope, intent: ScoredPoint) -> None:
        """Settle an update a crash stopped (when the store opens): finish it, or undo it."""
        try:
            self._finish_update(scope, intent)
        except Exception as exc:
            log.warning("an interrupted update in %s could not be finished: %s", scope.key, exc)
            with suppress(Exception):
                self._abandon_update(scope, intent)

    def _run_confirm(self, r: rq.ConfirmRequest) -> list[Fact]:
        cause = Cause.of(r.by, ActorKind.REVIEWER)
        return self._ledger.confirm(r.scope, self._fact_ids(r.scope, r.fact_ids), cause)

    def _run_dispute(self, r: rq.DisputeRequest) -> ReviewItem:
        cause = Cause.of(r.by, ActorKind.REVIEWER, r.reason)
        return self._ledger.dispute(r.scope, self._fact_ids(r.scope, r.fact_ids), cause)

    def _run_resolve(self, r: rq.ResolveRequest) -> ReviewItem:
        scope = r.scope if r.scope is not None else self._ledger.scope_of(r.item)
        cause = Cause.of(r.by, ActorKind.REVIEWER, r.note)
        return self._ledger.resolve(scope, r.item, r.accept, cause)

    def _run_profile_put(self, r: rq.ProfilePutRequest) -> ProfileEntry:
        cause = Cause.of(r.by, ActorKind.API, r.reason)
        return self._profiles.put(r.scope, r.topic, r.subtopic, r.text, list(r.facts), cause)

    def _run_profile_forget(self, r: rq.ProfileForgetRequest) -> ProfileEntry:
        cause = Cause.of(r.by, ActorKind.API, r.reason)
        return self._profiles.forget(r.scope, r.topic, r.subtopic, cause)

    # -- erasure and the store ---------------------------------------------------------------
    def _run_purge(self, r: rq.PurgeRequest) -> PurgeResult:
        scope, messages = r.scope, r.messages
        ids = [] if isinstance(messages, bool) else list(messages)
        ids = self._store.full_ids(Collection.MESSAGES, scope, ids)
        fact_ids = self._fact_ids(scope, r.fact_ids)
        if not fact_ids and not ids:
            raise InputError("purge needs fact ids or message ids")
        cause = Cause.of(r.by, ActorKind.API, r.reason)
        self._recall_log.flush()  # recalls queued before the purge lose its facts too
        facts, erased, entities, receipt = self._ledger.purge(
            scope, fact_ids, ids, cause, sources=messages is True
        )
        return PurgeResult(tuple(facts), tuple(erased), tuple(entities), receipt)

    def _run_apply_retention(self, r: rq.ApplyRetentionRequest) -> PurgeResult:
        moment = utc(r.at) if r.at is not None else now()
        self._drop_old_recalls(r.scope, moment)
        expired = self._sweep_expired(r.scope, moment)
        if self.keep_messages is None:
            return expired
        try:
            cutoff = moment - self.keep_messages
        except OverflowError:
            raise InputError(f"{moment.isoformat()} minus the retention is before year 1") from None
        scopes = [r.scope] if r.scope is not None else self._store.message_tenants()
        cause = Cause(Actor(kind=ActorKind.SYSTEM, name="retention"), "retention policy")
        erased: list[str] = []
        receipts: list[ErasureReceipt | None] = []
        for target in scopes:
            old = [
                m.id
                for m in self._store.iter_messages(target, status=MessageStatus.PROCESSED)
                if m.message.timestamp < cutoff
            ]
            if old:
                receipts.append(self._store.purge(target, messages=old, cause=cause))
                erased.extend(old)
        receipt = receipts[0] if len(receipts) == 1 else None
        if expired.fact_ids or expired.message_ids:
            receipt = None  # the expiry sweep erased too: each erasure has its receipt
        kept = tuple(i for i in expired.message_ids if i not in erased)
        return PurgeResult(expired.fact_ids, (*kept, *erased), expired.entity_ids, receipt=receipt)

    def _sweep_expired(self, scope: Scope | None, moment: datetime) -> PurgeResult:
        """Mark what expired by ``moment``; erase what expired longer than the grace before."""
        scopes = [scope] if scope is not None else self._store.message_tenants()
        self._recall_log.flush()  # recalls queued before the erasure lose its facts too
        facts: list[str] = []
        messages: list[str] = []
        entities: list[str] = []
        for target in scopes:
            self._expiry.mark(target, moment)
            gone = self._expiry.erase(target, moment)
            facts += gone[0]
            messages += gone[1]
            entities += gone[2]
        return PurgeResult(tuple(facts), tuple(messages), tuple(entities))

    def _run_expire(self, r: rq.ExpireRequest) -> list[str]:
        moment = utc(r.at) if r.at is not None else now()
        scopes = [r.scope] if r.scope is not None else self._store.message_tenants()
        return [i for target in scopes for i in self._expiry.mark(target, moment)]

    def _run_extend_expiry(self, r: rq.ExtendExpiryRequest) -> list[str]:
        facts = self._store.full_ids(Collection.FACTS, r.scope, list(r.fact_ids))
        messages = self._message_ids(r.scope, r.message_ids) if r.message_ids else ()
        return self._expiry.extend(
            r.scope,
            [i for i in facts if is_point_id(i)],
            r.expires_at,
            message_ids=[i for i in messages if is_point_id(i)],
        )

    def _drop_old_recalls(self, scope: Scope | None, moment: datetime) -> None:
        if self.keep_recalls is None:
            return
        try:
            cutoff = moment - self.keep_recalls
        except OverflowError:
            raise InputError(f"{moment.isoformat()} minus the retention is before year 1") from None
        scopes = [scope] if scope is not None else self._store.recall_tenants()
        if self._recall_log.drop_before(scopes, cutoff):
            self._store.erase_recalls()

    def _run_delete_scope(self, r: rq.DeleteScopeRequest) -> Scope:
        self._recall_log.flush()  # queued recalls of the scope go with it
        self._store.delete_scope(r.scope, r.scope.bookkeeping())
        return r.scope

    def _run_delete_dataset(self, r: rq.DeleteDatasetRequest) -> list[Scope]:
        self._recall_log.flush()
        every = self._store.scopes(r.dataset, every=True)
        if every:
            self._store.delete_scope(*every)
        return [s for s in every if not s.is_bookkeeping]

    def _run_receipts(self, r: rq.ReceiptsRequest) -> list[ErasureReceipt]:
        log = Scope.stored(r.dataset, ERASURES_TASK)
        return erasure.receipts(self._store.iter_audit(log, actions=[AuditAction.ERASURE_RECEIPT]))

    def _run_verify_erasure(self, r: rq.VerifyErasureRequest) -> ErasureCheck:
        log = Scope.stored(r.receipt.dataset, ERASURES_TASK)
        receipt = erasure.issued(self._backend, log, r.receipt)
        root = self._backend.path if isinstance(self._backend, EdgeBackend) else None
        return erasure.verify(self._backend, receipt, lexical=self._lexical, root=root)

    def _run_optimize(self, r: rq.OptimizeRequest) -> None:
        self._backend.optimize()


def _bracketed(text: str, names: Sequence[str]) -> str:
    """``text`` with each whole word of ``names`` outside brackets put in brackets."""
    if not names:
        return text
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    name = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")
    parts = re.split(r"(\[[^\[\]]*\])", text)  # odd parts: a ref or an annotation already
    return "".join(
        part if i % 2 else name.sub(lambda m: f"[{m.group(0)}]", part)
        for i, part in enumerate(parts)
    )
