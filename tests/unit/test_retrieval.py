from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from store_templates import EmptyStores, copy_store

from membrain import ConfigurationError, Fact, Memory, Message, RetrievalMode, Scope
from membrain.api.path_names import FORMER_NAMES
from membrain.api.tokens import count_tokens
from membrain.extraction.llm import LLMClient
from membrain.knowledge.facts import entity_id
from membrain.retrieval.base import Ranked, SearchContext
from membrain.retrieval.rewrite import Rewrites, deterministic_rewrites, llm_rewrites
from membrain.retrieval.search import Searcher, rrf
from membrain.retrieval.vector_paths import vector_paths
from membrain.testing import HashingEncoder

CHAT = [
    {
        "speaker": "Sara",
        "text": "I went hiking in the Alps in May 2023.",
        "timestamp": "2023-06-02T10:00:00Z",
        "id": "h1",
    },
    {
        "speaker": "Sara",
        "text": "I adopted a grey cat named Miso.",
        "timestamp": "2023-06-02T10:01:00Z",
        "id": "c1",
    },
    {
        "speaker": "Nate",
        "text": "I bake sourdough bread at my bakery every Tuesday.",
        "timestamp": "2023-06-02T10:02:00Z",
        "id": "b1",
    },
    {
        "speaker": "Nate",
        "text": "I visited Lisbon in March 2023 for a pastry course.",
        "timestamp": "2023-06-02T10:03:00Z",
        "id": "l1",
    },
    {
        "speaker": "Sara",
        "text": "My sister Lina plays the violin in an orchestra.",
        "timestamp": "2023-06-02T10:04:00Z",
        "id": "v1",
    },
]


# A question whose answer shares none of its words: the reply that follows it.
ASKED_AND_ANSWERED = [
    {
        "speaker": "Nate",
        "text": "Which city do you miss most?",
        "timestamp": "2023-06-03T09:00:00Z",
        "id": "q",
    },
    {
        "speaker": "Sara",
        "text": "Porto, since I left.",
        "timestamp": "2023-06-03T09:00:30Z",
        "id": "a",
    },
]


def _source(hit: object) -> str:
    return hit.sources[0].source_id  # type: ignore[attr-defined, no-any-return]


@pytest.fixture(scope="module")
def chat_store(
    tmp_path_factory: pytest.TempPathFactory, empty_stores: EmptyStores, scope: Scope
) -> Path:
    """A closed store holding ``CHAT``, made once for the module."""
    path = empty_stores.memory(tmp_path_factory.mktemp("chat") / "store")
    with Memory(path=path, dense=HashingEncoder(dim=64)) as memory:
        memory.add(CHAT, scope=scope)
    return path


@pytest.fixture
def loaded(chat_store: Path, tmp_path: Path) -> Iterator[Memory]:
    """A Memory holding ``CHAT``: a copy of the module's store, for one test."""
    with Memory(path=copy_store(chat_store, tmp_path / "store"), dense=HashingEncoder(64)) as mem:
        yield mem


def test_hits_explain_paths_ranks_and_scores(loaded: Memory, scope: Scope) -> None:
    for mode, allowed in [
        (RetrievalMode.FAST, {"bm25", "dense"}),
        (RetrievalMode.EXPAND, {"bm25", "dense", "hyde", "event", "turn", "reply"}),
    ]:
        hits = loaded.search("Who plays the violin?", scope=scope, mode=mode, k=3, rerank=False)
        assert _source(hits[0]) == "v1"
        assert hits[0].paths and set(hits[0].paths) <= allowed
        assert all(rank >= 1 for hit in hits for rank in hit.paths.values())
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    expand = loaded.search("Who plays the violin?", scope=scope, mode="expand", k=1)[0]
    assert {"hyde", "event"} & set(expand.paths)


def test_time_in_question_boosts_facts_valid_then(loaded: Memory, scope: Scope) -> None:
    hits = loaded.search("What did they do in March 2023?", scope=scope, mode="fast", k=5)
    by_source = {_source(h): h for h in hits}
    assert "time" in by_source["l1"].paths
    assert "time" not in by_source.get("h1", by_source["l1"]).paths or _source(hits[0]) == "l1"
    assert _source(hits[0]) == "l1"
    assert all("time" not in h.paths for h in hits if _source(h) != "l1")


def test_when_questions_favour_facts_with_times(loaded: Memory, scope: Scope) -> None:
    hits = loaded.search("When did Sara go hiking?", scope=scope, mode="fast", k=5)
    assert _source(hits[0]) == "h1"
    assert "when" in hits[0].paths
    assert all("when" not in h.paths for h in hits if not h.fact.times)


def test_relative_question_times_use_the_reference(loaded: Memory, scope: Scope) -> None:
    june = datetime(2023, 6, 15, tzinfo=UTC)
    hits = loaded.search("What happened last month?", scope=scope, mode="fast", k=5, reference=june)
    assert any("time" in h.paths for h in hits)
    (hiking,) = [h for h in hits if _source(h) == "h1"]
    assert "time" in hiking.paths


def test_auto_mode_and_unknown_modes(loaded: Memory, scope: Scope) -> None:
    hits = loaded.search("Who plays the violin?", scope=scope, mode="auto", k=3)
    assert _source(hits[0]) == "v1" and hits.mode is RetrievalMode.FAST  # the best fact tells
    assert hits.requested is RetrievalMode.AUTO and not hits.escalated
    assert hits.paths == ("bm25", "dense")
    assert all(set(h.paths) <= {"bm25", "dense"} for h in hits)
    # the best fact asks: the answer is in the reply, which expand's follow-up brings
    loaded.add(ASKED_AND_ANSWERED, scope=scope)
    fast = loaded.search("Which city does Sara miss most?", scope=scope, mode="fast", k=2)
    assert _source(fast[0]) == "q"
    hits = loaded.search("Which city does Sara miss most?", scope=scope, mode="auto", k=2)
    assert hits.mode is RetrievalMode.EXPAND and hits.escalated
    assert hits.paths == ("bm25", "dense", "hyde", "event", "asked", "turn", "reply", "answers")
    # the reply comes with the question it answers
    assert {_source(h) for h in hits} == {"a", "q"}
    assert next(h for h in hits if _source(h) == "a").paths.get("answers") == 1
    kept = loaded.search(
        "Which city does Sara miss most?", scope=scope, mode="auto", k=2, rerank=False
    )
    assert [_source(h) for h in kept] == ["q", "a"] and kept[1].paths.get("answers") == 1
    with pytest.raises(ConfigurationError):
        loaded.search("x", scope=scope, mode="telepathic")


def test_exclude_paths(loaded: Memory, scope: Scope) -> None:
    hits = loaded.search(
        "Who plays the violin?", scope=scope, mode="expand", exclude_paths=("hyde", "event", "turn")
    )
    assert hits.paths[:2] == ("bm25", "dense") and not {"hyde", "event", "turn"} & set(hits.paths)
    assert all(not {"hyde", "event", "turn"} & set(h.paths) for h in hits)


@pytest.mark.parametrize(
    ("mode", "ran"),
    [
        ("fast", ("bm25", "dense")),
        ("expand", ("bm25", "dense", "hyde", "event", "asked", "turn", "reply", "answers")),
        (
            "deep",
            ("bm25", "dense", "hyde", "event", "entity_tree", "boolean")
            + ("asked", "turn", "reply", "answers"),
        ),
        ("auto", ("bm25", "dense")),
    ],
)
def test_each_mode_names_its_paths(
    loaded: Memory, scope: Scope, mode: str, ran: tuple[str, ...]
) -> None:
    hits = loaded.search("Who plays the violin?", scope=scope, mode=mode, k=5)
    assert hits.paths == ran
    assert hits and all(h.paths and set(h.paths) <= set(ran) for h in hits)
    assert not set(FORMER_NAMES) & {p for h in hits for p in h.paths}


def test_path_letters_are_deprecated_aliases(loaded: Memory, scope: Scope) -> None:
    question = "Who plays the violin?"
    named = loaded.search(question, scope=scope, mode="expand", exclude_paths=["hyde"])
    with pytest.warns(DeprecationWarning, match="'B2' is now 'hyde'") as caught:
        lettered = loaded.search(question, scope=scope, mode="expand", exclude_paths=["B2"])
    assert lettered == named and "hyde" not in lettered.paths and "event" in lettered.paths
    assert all("hyde" not in h.paths for h in lettered)
    [warning] = caught  # one warning, pointing at the caller
    assert warning.filename == __file__
    with pytest.warns(DeprecationWarning, match="'B2' is now 'hyde', 'C' is now 'entity_tree'"):
        several = loaded.search(question, scope=scope, mode="deep", exclude_paths=["B2", "C"])
    assert not {"hyde", "entity_tree"} & set(several.paths)
    assert {"bm25", "dense", "event", "boolean"} <= set(several.paths)


def test_unknown_path_names_leave_nothing_out(loaded: Memory, scope: Scope) -> None:
    question = "Who plays the violin?"
    full = loaded.search(question, scope=scope, mode="expand")
    # neither a name no path has, nor a path the mode does not run, nor a letter's lower case
    for unknown in (["telepathy"], ["boolean"], ["b2"], ["E"]):
        assert loaded.search(question, scope=scope, mode="expand", exclude_paths=unknown) == full


def test_a_searcher_reads_path_letters_as_names(loaded: Memory, scope: Scope) -> None:
    class Fixed:
        name = "boolean"

        def run(self, ctx: SearchContext) -> list[Ranked]:
            return [Ranked(loaded.facts(scope=scope)[0].id, 1.0)]

    with pytest.warns(DeprecationWarning, match="'B2' is now 'hyde', 'D' is now 'boolean'") as w:
        searcher = Searcher(weights={"B2": 0.8}, extra_paths={"D": Fixed()})
    assert [c.filename for c in w] == [__file__]
    assert searcher.weights(deterministic_rewrites("What does Nate bake?"))["hyde"] == 0.8
    ctx = _ctx(loaded, scope, "Who plays the violin?", limit=10)
    with pytest.warns(DeprecationWarning, match="'C' is now 'entity_tree'") as w:
        run = searcher.search(RetrievalMode.DEEP, ctx, k=3, skip=("C",))
    assert [c.filename for c in w] == [__file__]
    assert "boolean" in run.paths and "entity_tree" not in run.paths


def test_context_fits_the_budget_and_cites(loaded: Memory, scope: Scope) -> None:
    context = loaded.context("Tell me about Sara's cat", scope=scope, max_tokens=60)
    assert context.tokens == count_tokens(context.text) <= 60
    assert "Miso" in context.text and "[msg c1]" in context.text
    big = loaded.context("Tell me about Sara's cat", scope=scope, max_tokens=4000)
    assert len(big.hits) == 5 and big.tokens <= 4000
    assert all(f"[msg {m['id']}]" in big.text for m in CHAT)
    tiny = loaded.context("cat", scope=scope, max_tokens=1)
    assert tiny.text == "" and tiny.tokens == 0


def test_rrf_matches_qdrant_formula() -> None:
    fused = rrf(
        {"bm25": [Ranked("x", 1.0), Ranked("y", 0.5)], "dense": [Ranked("y", 0.9)]},
        {"bm25": 1.0, "dense": 2.0},
        k=2,
    )
    assert [f.id for f in fused] == ["y", "x"]
    assert fused[0].score == pytest.approx(1 / (2 / 1 + 1) + 1 / (1 / 2 + 1))
    assert fused[0].paths == {"bm25": 2, "dense": 1}


def test_deterministic_rewrites() -> None:
    rewrites = deterministic_rewrites(
        "When did Caroline go to the LGBTQ support group?", ["Caroline"]
    )
    assert rewrites.hypothetical == "Caroline went to the LGBTQ support group"
    assert rewrites.event == "go LGBTQ support group"
    assert "When" not in rewrites.keywords and "Caroline" in rewrites.keywords
    assert deterministic_rewrites("What does Nate bake?").hypothetical == "Nate bakes"


@pytest.mark.parametrize(
    ("question", "statement"),
    [
        ("What kind of music does Sara like?", "Sara likes music"),
        ("What pets does Sara have?", "Sara has pets"),
        ("Did Sara ever paint a sunset?", "Sara painted a sunset"),
        ("Why did Sara quit her job?", "Sara quit her job"),
        ("When did Sara move to Paris?", "Sara moved to Paris"),
        ("What is Caroline's identity?", "Caroline's identity is"),
        ("Where was Sara born?", "Sara was born"),
        ("What LGBTQ+ events has Caroline joined?", "Caroline has joined LGBTQ events"),
        ("Is Sara going to the party?", "Sara is going to the party"),
        ("Who painted the sunset?", "painted the sunset"),
    ],
)
def test_hypothetical_statements(question: str, statement: str) -> None:
    assert deterministic_rewrites(question, ["Sara"]).hypothetical == statement


def _ctx(memory: Memory, scope: Scope, question: str, limit: int = 1) -> SearchContext:
    participants = memory.participants(scope=scope)
    return SearchContext.for_question(
        question, scope, memory.store, participants=participants, limit=limit
    )


@pytest.mark.parametrize(
    ("path", "question", "expected"),
    [
        # BM25 stems "baking" to the fact's "bake"; the hashing dense vectors do not.
        ("bm25", "baking", "b1"),
        ("dense", "Nate's grey cat Miso?", "c1"),
        # The declarative rewrite turns "did ... go" into "went", the fact's own word.
        ("hyde", "Where did Lina go hiking?", "h1"),
    ],
)
def test_each_vector_path_alone(
    loaded: Memory, scope: Scope, path: str, question: str, expected: str
) -> None:
    ctx = _ctx(loaded, scope, question)
    facts = {f.id: f for f in loaded.facts(scope=scope)}
    messages = {m.id: m.message.source_id for m in loaded.messages(scope=scope)}
    tops = {}
    for name, candidate in vector_paths(rewritten_keywords=False).items():
        if name in ("bm25", "dense", "hyde", "event"):
            found = candidate.run(ctx)
            tops[name] = messages[facts[found[0].id].sources[0]] if found else None
    assert tops[path] == expected


def test_searcher_plan_adds_boosts_only_when_asked(loaded: Memory, scope: Scope) -> None:
    searcher = Searcher()
    plain = _ctx(loaded, scope, "Who plays the violin?")
    dated = _ctx(loaded, scope, "When did Nate visit Lisbon in March 2023?")
    assert searcher.plan(RetrievalMode.FAST, plain) == ("bm25", "dense")
    assert searcher.plan(RetrievalMode.DEEP, dated) == (
        "bm25",
        "dense",
        "hyde",
        "event",
        "entity_tree",
        "boolean",
        "time",
        "stated",
        "when",
        "asked",
        "turn",
        "reply",
    )


def test_deterministic_rewrites_weigh_less_than_the_models() -> None:
    searcher = Searcher()
    offline = searcher.weights(deterministic_rewrites("What does Nate bake?"))
    by_model = searcher.weights(Rewrites("bake", "Nate bakes bread.", "baking", by_llm=True))
    assert offline["hyde"] == offline["event"] == 0.25
    assert by_model["hyde"] == by_model["event"] == 0.5
    chosen = Searcher(weights={"hyde": 0.8}).weights(deterministic_rewrites("What does Nate bake?"))
    assert chosen["hyde"] == 0.8 and chosen["event"] == 0.25  # a caller's weight always wins


def test_event_path_keeps_to_the_one_participant_named(loaded: Memory, scope: Scope) -> None:
    event = vector_paths(rewritten_keywords=False)["event"]
    facts = {f.id: f for f in loaded.facts(scope=scope)}
    nate = entity_id(scope, "Nate")

    def run(question: str) -> list[Fact]:
        ctx = _ctx(loaded, scope, question, limit=10)
        return [facts[r.id] for r in event.run(ctx)]

    found = run("What does Nate enjoy baking?")
    assert found and all(nate in f.entity_ids for f in found) and len(found) < len(facts)
    assert len(run("What does anyone enjoy baking?")) == len(facts)
    assert len(run("Do Nate and Sara enjoy baking?")) == len(facts)


class RewritingModel:
    """A chat model answering rewrite prompts with ``reply``, recording every prompt."""

    def __init__(self, reply: str | BaseException) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    def generate(self, system: str, prompt: str) -> str:
        self.prompts.append(prompt)
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply


REWRITE_REPLY = (
    '{"keywords": "violin orchestra", "hypothetical": "Lina plays the violin in an orchestra.", '
    '"event": "playing the violin"}'
)


@pytest.mark.parametrize(
    ("reply", "by_llm", "hypothetical"),
    [
        (REWRITE_REPLY, True, "Lina plays the violin in an orchestra."),
        ('{"keywords": "violin"}', True, "plays the violin"),  # missing fields: deterministic
        ("Sorry, I cannot help with that.", False, "plays the violin"),
        (TimeoutError("model timed out"), False, "plays the violin"),
    ],
)
def test_llm_rewrites_and_their_fallbacks(
    reply: str | BaseException, by_llm: bool, hypothetical: str
) -> None:
    model = RewritingModel(reply)
    rewrites = llm_rewrites(LLMClient(model), "Who plays the violin?")
    assert rewrites.by_llm is by_llm and rewrites.hypothetical == hypothetical
    assert len(model.prompts) == 1 and "Who plays the violin?" in model.prompts[0]


def test_modes_call_the_model_for_rewrites_only_when_they_expand(
    loaded: Memory, scope: Scope
) -> None:
    loaded.add(ASKED_AND_ANSWERED, scope=scope)
    searcher = Searcher()

    def calls(mode: RetrievalMode, question: str) -> tuple[int, RetrievalMode]:
        model = RewritingModel(REWRITE_REPLY)
        ctx = _ctx(loaded, scope, question, limit=10)
        ctx.llm = LLMClient(model)
        run = searcher.search(mode, ctx, k=3)
        return len(model.prompts), run.mode

    assert calls(RetrievalMode.FAST, "Who plays the violin?") == (0, RetrievalMode.FAST)
    assert calls(RetrievalMode.EXPAND, "Who plays the violin?") == (1, RetrievalMode.EXPAND)
    assert calls(RetrievalMode.AUTO, "Who plays the violin?") == (0, RetrievalMode.FAST)
    escalated = calls(RetrievalMode.AUTO, "Which city does Sara miss most?")
    assert escalated == (1, RetrievalMode.EXPAND)


def test_tied_scores_rank_in_a_fixed_order(loaded: Memory, scope: Scope) -> None:
    first, second, third = sorted(loaded.facts(scope=scope), key=lambda f: f.id)[:3]

    class Tied:
        name = "boolean"

        def run(self, ctx: SearchContext) -> list[Ranked]:
            return [Ranked(f.id, score) for f, score in ((third, 0.5), (first, 0.5), (second, 0.9))]

    searcher = Searcher(extra_paths={"boolean": Tied()})
    ctx = _ctx(loaded, scope, "Who plays the violin?", limit=10)
    others = ("bm25", "dense", "hyde", "event", "entity_tree", "time", "stated", "when", "asked")
    run = searcher.search(RetrievalMode.DEEP, ctx, k=3, skip=(*others, "turn", "reply"))
    assert run.paths == ("boolean",)
    assert [r.id for r in run.results] == [second.id, first.id, third.id]


class _CountingEncoder(HashingEncoder):
    """Counts model runs: one per ``embed_query``, one per ``embed_queries`` batch."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim=dim)
        self.runs: list[list[str]] = []

    def embed_query(self, text: str) -> list[float]:
        self.runs.append([text])
        return super().embed_query(text)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.runs.append(list(texts))
        return [super(_CountingEncoder, self).embed_query(t) for t in texts]


_SAID = datetime(2024, 5, 1, 10, tzinfo=UTC)


def test_an_expand_search_embeds_its_query_texts_once_in_one_batch(tmp_path: Path) -> None:
    encoder = _CountingEncoder(64)
    scope = Scope(dataset="chat", task="t")
    messages = [
        Message(speaker="Maya", text="I adopted a greyhound called Bolt.", timestamp=_SAID),
        Message(speaker="Leo", text="Bolt is a lovely name!", timestamp=_SAID),
    ]
    with Memory(path=tmp_path, dense=encoder) as mem:
        mem.add(messages, scope=scope)
        encoder.runs.clear()
        found = mem.search("When did Maya adopt her dog?", scope=scope, mode="expand", k=3)
    assert found.hits
    assert len(encoder.runs) == 1  # the rewrites and the question as asked, together
    batch = encoder.runs[0]
    assert len(batch) == len(set(batch)) >= 3
    assert "When did Maya adopt her dog?" in batch
