"""Modes, planning and fusion: which paths a search runs and how their rankings combine.

* ``fast``: ``bm25`` and ``dense``; no LLM call.
* ``expand`` (default): ``bm25`` on the keyword rewrite, ``dense``, ``hyde`` (hypothetical
  fact), ``event`` (event focus); one rewrite call when an LLM is configured.
* ``deep``: all six, those four, ``entity_tree`` (entity tree) and ``boolean`` (boolean tantivy
  query); the rewrite call and the boolean path's query call.
* ``auto``: ``fast``, escalating to ``expand`` when the first results are weak.

The path names, and the letters that named them before, are in :mod:`membrain.api.path_names`.

Every mode but ``fast`` also follows retrieved questions to the replies that answered them
(:mod:`.followup`), reads whole turns and the replies to them (:mod:`.turn_paths`), and has the
first results ordered by the reranker (:mod:`.rerank`).

Every mode adds the time boosts of :mod:`.vector_paths` when the question names a time or asks
when. *Weak* (``auto``): the best fused fact asks rather than tells (it holds a question mark):
the answer is then elsewhere, usually in the reply, which ``expand``'s answer follow-up brings.
On the LoCoMo dev split (offline, 997 questions) this escalated 35.9% of the questions and raised
recall@10 from 71.8 (``fast``) to 75.8, against 77.4 when every question runs ``expand``. The
first rule tried, BM25 and dense agreeing on fewer than 2 of their top ten, escalated 15.3% for
+0.1: the questions it picks are hard for every mode (``expand`` 63.2 against ``fast`` 62.6
there). Escalating to ``deep`` instead gave 75.5.

Fusion is weighted reciprocal rank fusion with Qdrant's formula
(``1 / ((rank + 1) / weight + k - 1)``) over the union of every path's candidates, computed here
over the per-path lists. Every result must say at which rank each path found it, so the per-path
lists are needed anyway; sending Qdrant the fused request as well ran every query twice (fast-mode
p95 300 ms at 10,000 facts, ``benchmarks/search_latency.py``). The ``entity_tree`` and
``boolean`` paths are not Qdrant queries in any case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from membrain.api.models import Fact, RetrievalMode
from membrain.api.path_names import (
    BM25,
    BOOLEAN,
    DENSE,
    ENTITY_TREE,
    EVENT,
    HYDE,
    current_keys,
    current_names,
)
from membrain.backends.base import RRF_K
from membrain.records import RecordStore, ScoredFact
from membrain.retrieval.asked import AskedPath
from membrain.retrieval.base import Ranked, RetrievalPath, SearchContext
from membrain.retrieval.current import asks_now, current_first
from membrain.retrieval.followup import asks
from membrain.retrieval.replaced import ReplacedPath, SupersededScopes
from membrain.retrieval.rerank import RERANK_DEPTH, Candidate, Reranker, applies_to
from membrain.retrieval.rewrite import Rewrites, deterministic_rewrites, llm_rewrites
from membrain.retrieval.signals import turn_signals
from membrain.retrieval.turn_paths import TurnPath
from membrain.retrieval.turns import Timeline
from membrain.retrieval.vector_paths import PathQuery, run_queries, vector_paths

__all__ = [
    "MODE_PATHS",
    "RRF_K",
    "Fused",
    "RetrievalMode",
    "SearchRun",
    "Searcher",
    "one_per_message",
    "rrf",
]


T = TypeVar("T")
_BOOSTS = ("time", "stated", "when")
_RAW_QUESTION = ("asked", "turn", "reply")
"""Paths whose message lookups embed the question as asked (messages keep their names)."""
Ranking = tuple[Fact, float, dict[str, int]]
"""A result as the reranker and the answer follow-up read it: fact, fused score, path ranks."""
CURRENT_WINDOW = 10
"""Results read past ``k`` for the current-beliefs-first reordering."""


MODE_PATHS: dict[RetrievalMode, tuple[str, ...]] = {
    RetrievalMode.FAST: (BM25, DENSE),
    RetrievalMode.EXPAND: (BM25, DENSE, HYDE, EVENT),
    RetrievalMode.DEEP: (BM25, DENSE, HYDE, EVENT, ENTITY_TREE, BOOLEAN),
}


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused result: the fact id, its fused score, the rank (1-based) per path, the fact."""

    id: str
    score: float
    paths: dict[str, int] = field(default_factory=dict)
    fact: Fact | None = None
    """The fact, once read (:meth:`Searcher.search` reads those it returns)."""
    found: ScoredFact | None = None
    """The store's hit behind it, when a path read one."""


@dataclass(frozen=True, slots=True)
class SearchRun:
    """The fused results of one search and how they came about."""

    results: list[Fused]
    """The top results, best first, each with its (active) fact."""
    mode: RetrievalMode
    """The mode that produced them (``auto`` ends as ``fast`` or ``expand``)."""
    escalated: bool
    """``auto`` escalated to ``expand``."""
    paths: tuple[str, ...]
    """The paths that ran, in order."""


def rrf(
    rankings: Mapping[str, Sequence[Ranked]], weights: Mapping[str, float], k: int
) -> list[Fused]:
    """Weighted reciprocal rank fusion over the union of ``rankings`` (Qdrant's formula)."""
    scores: dict[str, float] = {}
    paths: dict[str, dict[str, int]] = {}
    found: dict[str, ScoredFact] = {}
    for name, ranked in rankings.items():
        weight = weights.get(name, 1.0)
        if weight <= 0:
            continue
        for position, item in enumerate(ranked):
            scores[item.id] = scores.get(item.id, 0.0) + 1.0 / ((position + 1) / weight + k - 1)
            paths.setdefault(item.id, {})[name] = position + 1
            if item.found is not None:
                found.setdefault(item.id, item.found)
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return [Fused(i, scores[i], paths[i], found=found.get(i)) for i in order]


def one_per_message(items: Sequence[T], sources: Callable[[T], Iterable[str]]) -> list[T]:
    """``items`` with every one citing a message no item above it cites first, then the rest.

    Both parts keep their order. The facts of one turn share its evidence, so a second fact of
    a turn already shown yields its place to a fact from another turn rather than leave the
    result (LoCoMo dev, ``expand``: recall@10 +0.6 to +1.0, ``benchmarks/train_reranker.py``).
    """
    seen: set[str] = set()
    first: list[T] = []
    rest: list[T] = []
    for item in items:
        cited = set(sources(item))
        (first if not cited or cited - seen else rest).append(item)
        seen |= cited
    return first + rest


class Searcher:
    """Runs a mode's paths for one question and fuses them.

    Args:
        extra_paths: Paths beyond the Qdrant ones, by name (``"entity_tree"``, ``"boolean"``).
        weights: Fusion weight per path name (default 1.0; boosts default ``boost_weight``,
            four times that for ``time`` and ``stated``).
        rrf_k: The RRF constant (:data:`RRF_K`).
        auto_asking_top: ``auto`` escalates when any of its ``fast`` top this many facts asks
            a question.

    The former path letters (:data:`~membrain.api.path_names.FORMER_NAMES`) are still read as
    names, with a ``DeprecationWarning``: as keys of ``extra_paths`` and ``weights``, and in the
    ``skip`` of :meth:`search`.
    """

    def __init__(
        self,
        *,
        extra_paths: Mapping[str, RetrievalPath] | None = None,
        weights: Mapping[str, float] | None = None,
        rrf_k: int = RRF_K,
        boost_weight: float = 0.5,
        auto_asking_top: int = 1,
        reranker: Reranker | None = None,
    ) -> None:
        self._reranker = reranker
        self._timeline: Timeline | None = None
        self._superseded: SupersededScopes | None = None
        current_names([*(weights or {}), *(extra_paths or {})], stacklevel=2)  # warns of letters
        chosen = current_keys(weights or {}, warn=False)
        self._extra: dict[str, RetrievalPath] = {
            "replaced": ReplacedPath(),
            "asked": AskedPath(),
            "turn": TurnPath("turn", self.timeline),
            "reply": TurnPath("reply", self.timeline),
            **current_keys(extra_paths or {}, warn=False),
        }
        # The model's hypothetical fact and event are half-weight signals beside the question.
        # The entity tree at a quarter weight: offline, the tree routes on few non-person entities
        # and at full weight it cost 1.4 points of recall@10 in deep mode (``--ablate``, full dev
        # split). The boolean path at half weight: at full weight it cost 0.7 (deep R@10 76.4;
        # 77.0 without it, 77.2 with it at half weight). The replies to asked questions at a
        # quarter weight: on the agent-chat set (expand, offline) current-belief@1 / stable@1
        # were 93.9 / 80.0 at full weight, 93.9 / 85.0 at half, 97.0 / 87.5 at a quarter, 97.0 /
        # 90.0 without the path.
        defaults = {
            HYDE: 0.5,
            EVENT: 0.5,
            ENTITY_TREE: 0.25,
            BOOLEAN: 0.5,
            "asked": 0.25,
            # Whole turns and the replies to them at a quarter weight each (LoCoMo dev, expand,
            # fused recall@10 78.2 -> 79.8; simulated beforehand: 79.8 at 0.15, 80.1 at 0.25).
            "turn": 0.25,
            "reply": 0.25,
            # A question naming a time shares little else with its answer than that time: the
            # time-filtered paths count like content paths then, 4x the other boosts (LoCoMo
            # dev, expand: recall@10 79.7 -> 80.0, within 1,000 / 2,000 tokens 86.8 / 91.5 ->
            # 87.1 / 91.7).
            **{b: boost_weight * (4.0 if b in ("time", "stated") else 1.0) for b in _BOOSTS},
        }
        self._weights = {**defaults, **chosen}
        # The deterministic rewrites are near-paraphrases of the question, so at half weight they
        # count the question's dense signal twice more: a quarter each (LoCoMo dev, expand,
        # recall@10 77.1 -> 77.8, within 1,000 / 2,000 tokens 86.1 / 91.3 -> 86.2 / 91.2).
        self._offline_weights = {
            **self._weights,
            **{n: 0.25 for n in (HYDE, EVENT) if n not in chosen},
        }
        self._rrf_k = rrf_k
        self._auto_asking_top = auto_asking_top

    def plan(self, mode: RetrievalMode, ctx: SearchContext) -> tuple[str, ...]:
        """The path names ``mode`` runs for this question (boosts included).

        ``replaced`` (:mod:`.replaced`) joins searches of current beliefs in scopes that have
        superseded facts, unless the question is about a past time (the superseded facts that
        were true then are answers themselves); ``asked`` (:mod:`.asked`) joins ``expand`` and
        ``deep``, and so do ``turn`` and ``reply`` (:mod:`.turn_paths`) in chats between named
        people, like the reranker fitted on them: in the agent-chat benchmark
        (``benchmarks/agent_memory.py``, ``expand``) they moved stable@1 by one question each
        way (offline 92.5 -> 95.0, scripted 90.0 -> 87.5).
        """
        base = MODE_PATHS[RetrievalMode.FAST if mode is RetrievalMode.AUTO else mode]
        boosts = [
            b for b in _BOOSTS if (b == "when" and ctx.asks_when) or (b != "when" and ctx.times)
        ]
        if ctx.view.believed_at is None and ctx.past is None and "replaced" not in ctx.extra:
            ctx.extra["replaced"] = self._superseded_in(ctx.store).any(ctx.store, ctx.scope)
        if ctx.extra.get("replaced"):
            boosts.insert(0, "replaced")
        if mode in (RetrievalMode.EXPAND, RetrievalMode.DEEP):
            boosts.append("asked")
            if applies_to(ctx.participants):
                boosts += ["turn", "reply"]
        return (*base, *boosts)

    def rewrites(self, mode: RetrievalMode, ctx: SearchContext) -> Rewrites:
        """Rewrites of the question: by the LLM in ``expand``/``deep`` when one is configured."""
        if ctx.llm is not None and mode in (RetrievalMode.EXPAND, RetrievalMode.DEEP):
            return llm_rewrites(ctx.llm, ctx.question, ctx.participants)
        return deterministic_rewrites(ctx.question, ctx.participants)

    def search(
        self,
        mode: RetrievalMode,
        ctx: SearchContext,
        *,
        k: int,
        skip: Sequence[str] = (),
        depth: int | None = None,
    ) -> SearchRun:
        """The top ``k`` fused results, the mode that produced them and the paths that ran.

        ``skip`` leaves paths out (for ablations; a former letter warns and counts as its name).
        ``depth``: how many results a search that ends in a mode other than ``fast`` returns
        instead of ``k`` (the reranker orders them after the answer follow-up); a search ending
        in ``fast`` reads ``k`` only. Results a path found without reading the fact (the boolean
        path's index holds ids) are read here, in one round trip, and kept only while active: a
        derived index that lags behind the store never brings back a retired fact.
        """
        skip = current_names(skip, stacklevel=2)
        names = [n for n in self.plan(mode, ctx) if n not in skip]
        rewrites = self.rewrites(mode, ctx)
        rankings = self._run(names, ctx, rewrites)
        fused = rrf(rankings, self.weights(rewrites), self._rrf_k)
        deep = max(k, depth or k)
        if mode is not RetrievalMode.AUTO:
            top = self._top(ctx, fused, k if mode is RetrievalMode.FAST else deep)
            return SearchRun(top, mode, False, tuple(rankings))
        if not self._weak(ctx, fused):
            return SearchRun(self._top(ctx, fused, k), RetrievalMode.FAST, False, tuple(rankings))
        rewrites = self.rewrites(RetrievalMode.EXPAND, ctx)
        more = [n for n in self.plan(RetrievalMode.EXPAND, ctx) if n not in (*skip, *rankings)]
        rankings.update(self._run(more, ctx, rewrites))
        fused = rrf(rankings, self.weights(rewrites), self._rrf_k)
        return SearchRun(self._top(ctx, fused, deep), RetrievalMode.EXPAND, True, tuple(rankings))

    def _top(self, ctx: SearchContext, fused: Sequence[Fused], k: int) -> list[Fused]:
        """The first ``k`` results, current beliefs first for a question about now.

        The reordering (:mod:`.current`) looks :data:`CURRENT_WINDOW` results further, so a
        later statement just below the cut can take the place of the one it updates.
        """
        if not self._asks_now(ctx):
            return self._read(ctx, fused, k)
        window = self._read(ctx, fused, k + CURRENT_WINDOW)
        return current_first(window, lambda f: f.fact, ctx.participants, ctx.question)[:k]

    @staticmethod
    def _asks_now(ctx: SearchContext) -> bool:
        now = ctx.view.believed_at is None and ctx.past is None and not ctx.times
        return now and asks_now(ctx.question)

    def reranks(self, ctx: SearchContext) -> bool:
        """Whether the reranker orders this search's results.

        Not without one, nor in a chat with an assistant
        (:func:`~membrain.retrieval.rerank.applies_to`), nor with a dense encoder other than
        the one its trees were trained with (:meth:`~membrain.retrieval.rerank.Reranker.fits`).
        """
        return (
            self._reranker is not None
            and applies_to(ctx.participants)
            and self._reranker.fits(ctx.store.dense.name)
        )

    def rerank(
        self, ctx: SearchContext, ranked: Sequence[Ranking]
    ) -> list[tuple[Ranking, float | None]]:
        """``ranked`` (fact, fused score, path ranks), the first ones in the reranker's order.

        The first :data:`~membrain.retrieval.rerank.RERANK_DEPTH` are scored and ordered; the
        rest follow in their order, unscored (``None``). Then a fact whose messages are all
        cited by a fact above it yields its place: it follows the first fact of every other
        message (:func:`one_per_message`). Current beliefs come first again for a question
        about now. Without a reranker the order is kept.
        """
        if self._reranker is None:
            return [(r, None) for r in ranked]
        head = list(ranked[:RERANK_DEPTH])
        candidates = self.candidates(ctx, head)
        order = self._reranker.order(ctx.question, candidates, ctx.participants)
        out: list[tuple[Ranking, float | None]] = [(head[i], score) for i, score in order]
        out += [(r, None) for r in ranked[RERANK_DEPTH:]]
        out = one_per_message(out, lambda r: r[0][0].sources)
        if self._asks_now(ctx):
            out = current_first(out, lambda r: r[0][0], ctx.participants, ctx.question)
        return out

    def candidates(self, ctx: SearchContext, ranked: Sequence[Ranking]) -> list[Candidate]:
        """What the reranker reads of each result: text, path ranks, fused score, signals."""
        signals = turn_signals(ctx, [f for f, _, _ in ranked], self.timeline(ctx))
        return [
            Candidate(f.id, f.text, paths, score, i, row)
            for i, ((f, score, paths), row) in enumerate(zip(ranked, signals, strict=True))
        ]

    def _superseded_in(self, store: RecordStore) -> SupersededScopes:
        if self._superseded is None:
            self._superseded = SupersededScopes()
            store.subscribe(self._superseded)
        return self._superseded

    def timeline(self, ctx: SearchContext) -> Timeline:
        """The message timeline of the store (one per searcher, told of every change)."""
        if self._timeline is None:
            self._timeline = Timeline(ctx.store)
            ctx.store.subscribe(self._timeline)
        return self._timeline

    @staticmethod
    def _read(ctx: SearchContext, fused: Sequence[Fused], k: int | None = None) -> list[Fused]:
        """The first ``k`` of ``fused`` that the search may return, with their facts read.

        A path that did not read its facts (the boolean path's index holds ids) may be behind the
        store, or blind to the context's view: :meth:`SearchContext.admits` has the last word.
        """
        limit = len(fused) if k is None else k
        out: list[Fused] = []
        start = 0
        while len(out) < limit and start < len(fused):
            chunk = fused[start : start + limit - len(out)]
            start += len(chunk)
            missing = [f.id for f in chunk if f.fact is None and f.found is None]
            read = {f.id: f for f in ctx.store.get_facts(ctx.scope, missing)} if missing else {}
            for item in chunk:
                fact = item.fact or (item.found.fact if item.found else read.get(item.id))
                if fact is not None and ctx.admits(fact):
                    out.append(Fused(item.id, item.score, item.paths, fact, item.found))
        return out

    def weights(self, rewrites: Rewrites) -> dict[str, float]:
        """Fusion weight per path name, for rewrites by the model or deterministic ones."""
        return dict(self._weights if rewrites.by_llm else self._offline_weights)

    def _run(
        self, names: Sequence[str], ctx: SearchContext, rewrites: Rewrites
    ) -> dict[str, list[Ranked]]:
        qdrant = vector_paths(rewritten_keywords=True)
        queries: dict[str, PathQuery | None] = {
            n: qdrant[n].query(ctx, rewrites) for n in names if n in qdrant
        }
        # One model run for every text the paths embed (the paths over messages read the
        # question as asked).
        texts = [q.text for q in queries.values() if q is not None and q.text is not None]
        raw = [ctx.question] if any(n in _RAW_QUESTION for n in names) else []
        ctx.embed_ahead([*texts, *raw])
        # The Qdrant paths as one batch: the engine plans their lookups together.
        batched = run_queries(ctx, {n: q for n, q in queries.items() if q is not None})
        rankings: dict[str, list[Ranked]] = {}
        for name in names:
            if name in queries:
                found = batched.get(name, [])
            elif name in self._extra:
                found = self._extra[name].run(ctx)
            else:
                continue
            # Engines return equal scores in no fixed order; the same search gives the same result.
            rankings[name] = sorted(found, key=lambda r: (-r.score, r.id))
        return rankings

    def _weak(self, ctx: SearchContext, fused: Sequence[Fused]) -> bool:
        """The best results ask rather than tell (see the module docstring)."""
        top = self._read(ctx, fused, self._auto_asking_top)
        return any(f.fact is not None and asks(f.fact.text) for f in top)
