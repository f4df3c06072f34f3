"""MembrainRetriever: langchain-tests' standard suite, exact metadata, async, scope rules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import ValidationError

from integration.served import serving
from langchain_membrain import MembrainRetriever
from membrain import ConfigurationError, Memory, Scope, ScopeError
from membrain.binding import ScopeBinding
from membrain.server import Access
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant", session="s1")
CONVERSATION = [
    {
        "id": "m1",
        "speaker": "Sara",
        "text": "I adopted a cat named Miso yesterday.",
        "timestamp": "2024-03-15T14:01:00Z",
    },
    {
        "id": "m2",
        "speaker": "Nate",
        "text": "My sister Ana moved to Lisbon last month.",
        "timestamp": "2024-03-15T14:02:00Z",
    },
    {
        "id": "m3",
        "speaker": "Sara",
        "text": "I run a bakery in Porto with my brother.",
        "timestamp": "2024-03-15T14:03:00Z",
    },
    {
        "id": "m4",
        "speaker": "Nate",
        "text": "I play the cello in a jazz band on Fridays.",
        "timestamp": "2024-03-15T14:04:00Z",
    },
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path: Path = tmp_path_factory.mktemp("retriever") / "store"
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        result = mem.add(CONVERSATION, scope=SCOPE)
        assert len(result.fact_ids) == 4
        yield mem


class TestMembrainRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's own retriever contract."""

    memory: Memory

    @pytest.fixture(autouse=True)
    def _bind_store(self, store: Memory) -> None:
        self.memory = store

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return MembrainRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self.memory, "scope": SCOPE, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "What pet did Sara adopt?"


def test_document_metadata_is_exact(store: Memory) -> None:
    retriever = MembrainRetriever(memory=store, scope=SCOPE, k=4)
    docs = retriever.invoke("What is the name of Sara's cat?")
    hits = {h.fact.id: h for h in store.search("What is the name of Sara's cat?", scope=SCOPE, k=4)}
    cat = next(d for d in docs if "Miso" in d.page_content)
    hit = hits[cat.metadata["fact_id"]]
    assert cat.id == hit.fact.id
    assert cat.page_content == "Sara adopted a cat named Miso yesterday."
    assert cat.metadata == {
        "fact_id": hit.fact.id,
        "text": "[Sara] adopted a cat named [Miso] [yesterday::2024-03-14].",
        "entities": ["Sara", "Miso"],
        "valid_from": "2024-03-14T00:00:00+00:00",
        "valid_to": "2024-03-15T00:00:00+00:00",
        "sources": ["m1"],
        "score": hit.score,
        "relevance": hit.relevance,
        "paths": hit.paths,
        "rerank": hit.rerank,
        "scope": "sara/assistant",
        "session": "s1",
        "status": "active",
        "trust": "stated",
        "superseded_by": [],
        "superseded_at": None,
        "author": None,
        "metadata": {},
    }
    assert cat.metadata["paths"], "every hit says which paths found it"


def test_fact_without_time_has_no_validity(store: Memory) -> None:
    docs = MembrainRetriever(memory=store, scope=SCOPE).invoke("bakery in Porto")
    bakery = next(d for d in docs if "bakery" in d.page_content)
    assert bakery.page_content == "Sara runs a bakery in Porto with Sara's brother."
    assert bakery.metadata["valid_from"] is None
    assert bakery.metadata["valid_to"] is None
    assert bakery.metadata["sources"] == ["m3"]
    assert bakery.metadata["entities"] == ["Sara", "Porto", "Sara's brother"]


def test_documents_follow_core_ranking(store: Memory) -> None:
    question = "Who plays the cello?"
    docs = MembrainRetriever(memory=store, scope=SCOPE, k=3, mode="fast").invoke(question)
    hits = store.search(question, scope=SCOPE, k=3, mode="fast")
    assert [d.id for d in docs] == [h.fact.id for h in hits]
    assert [d.metadata["score"] for d in docs] == [h.score for h in hits]
    assert all(isinstance(d, Document) for d in docs)


async def test_async_retrieval_matches_sync(store: Memory) -> None:
    retriever = MembrainRetriever(memory=store, scope=SCOPE, k=4)
    sync_docs = retriever.invoke("Where did Ana move?")
    async_docs = await retriever.ainvoke("Where did Ana move?")
    assert [d.id for d in async_docs] == [d.id for d in sync_docs]
    assert async_docs[0].metadata == sync_docs[0].metadata
    assert len(await retriever.ainvoke("Where did Ana move?", k=2)) == 2


def test_per_call_k_and_mode(store: Memory) -> None:
    retriever = MembrainRetriever(memory=store, scope=SCOPE, k=4)
    assert len(retriever.invoke("Sara", k=2)) == 2
    assert len(retriever.invoke("Sara")) == 4
    fast = retriever.invoke("Who plays the cello?", k=2, mode="fast")
    assert [d.id for d in fast] == [
        h.fact.id for h in store.search("Who plays the cello?", scope=SCOPE, k=2, mode="fast")
    ]
    with pytest.raises(ConfigurationError):
        retriever.invoke("Sara", mode="psychic")


def test_scope_parts_build_the_scope(store: Memory) -> None:
    by_parts = MembrainRetriever(memory=store, dataset="sara", task="assistant", session="s1")
    assert by_parts.scope == SCOPE
    by_scope = MembrainRetriever(memory=store, scope=SCOPE)
    assert (by_scope.dataset, by_scope.task, by_scope.session) == ("sara", "assistant", "s1")
    assert [d.id for d in by_parts.invoke("Miso")] == [d.id for d in by_scope.invoke("Miso")]


def test_other_scope_sees_nothing(store: Memory) -> None:
    other = MembrainRetriever(memory=store, dataset="nate", task="assistant")
    assert other.invoke("What pet did Sara adopt?") == []


def test_scope_is_required(store: Memory) -> None:
    with pytest.raises(ScopeError, match="needs a scope"):
        MembrainRetriever(memory=store)
    with pytest.raises(ScopeError, match="needs a scope"):
        MembrainRetriever(memory=store, dataset="sara")
    with pytest.raises(ScopeError, match="not both"):
        MembrainRetriever(memory=store, scope=SCOPE, dataset="sara", task="assistant")
    with pytest.raises(ScopeError):
        MembrainRetriever(memory=store, dataset="", task="assistant")
    raw = MembrainRetriever(memory=store, dataset="sara/raw", task="assistant")
    assert raw.scope == Scope(dataset="sara/raw", task="assistant")  # encoded alike


def test_invalid_settings_are_rejected(store: Memory) -> None:
    with pytest.raises(ValidationError, match="unknown retrieval mode"):
        MembrainRetriever(memory=store, scope=SCOPE, mode="psychic")
    with pytest.raises(ValidationError):
        MembrainRetriever(memory=store, scope=SCOPE, k=0)


def test_memory_model_calls_are_child_runs_of_the_retriever(tmp_path: Path) -> None:
    from uuid import UUID

    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.seen: list[tuple[str, UUID, UUID | None]] = []

        def on_retriever_start(self, serialized: Any, query: str, **kw: Any) -> None:
            self.seen.append(("retriever", kw["run_id"], kw.get("parent_run_id")))

        def on_chat_model_start(self, serialized: Any, messages: Any, **kw: Any) -> None:
            self.seen.append(("chat", kw["run_id"], kw.get("parent_run_id")))

    rewrite = AIMessage('{"keywords": "cat", "hypothetical": "Sara has a cat.", "event": "cat"}')
    model = GenericFakeChatModel(messages=iter([rewrite] * 5))
    scope = Scope(dataset="sara", task="traced")
    with Memory(tmp_path, dense=HashingEncoder(dim=32), llm=model) as mem:
        mem.add("I have a cat.", scope=scope, user_name="Sara", extract=False)
        runs = Runs()
        MembrainRetriever(memory=mem, scope=scope, mode="expand").invoke(
            "What pet does Sara have?", config={"callbacks": [runs]}
        )
    (retriever,) = [run for kind, run, _ in runs.seen if kind == "retriever"]
    chats = [parent for kind, _, parent in runs.seen if kind == "chat"]
    assert chats and set(chats) == {retriever}  # the rewrite call is traced under the retriever


def test_a_budget_returns_the_context_and_the_profile_first(tmp_path: Path) -> None:
    scope = Scope(dataset="sara", task="profiled")
    with Memory(path=tmp_path / "m", dense=HashingEncoder(dim=64)) as mem:
        mem.add(
            [{"speaker": "Sara", "text": "I live in Porto.", "timestamp": "2024-01-02T10:00:00Z"}],
            scope=scope,
        )
        retriever = MembrainRetriever(
            memory=mem, scope=scope, max_tokens=300, profile_ratio=0.3, mode="fast"
        )
        profile, *facts = retriever.invoke("Where does Sara live?")
        (entry,) = mem.profile(scope=scope)
    assert profile.metadata == {
        "kind": "profile",
        "entry_ids": [entry.id],
        "fact_ids": list(entry.fact_ids),
    }
    assert profile.page_content.startswith("## Profile\n- basic_info/residence: Sara lives in")
    assert [d.id for d in facts] == list(entry.fact_ids)
    with pytest.raises(ValidationError, match="give max_tokens"):
        MembrainRetriever(memory=mem, scope=scope, profile_ratio=0.3)


# -- search_kwargs, as vector-store retrievers take them ----------------------------------------
TAGGED = Scope(dataset="sara", task="projects")
TAGGED_CHAT = [
    {
        "id": "p1",
        "speaker": "Sara",
        "text": "I adopted a cat named Miso yesterday.",
        "timestamp": "2024-03-15T14:01:00Z",
        "metadata": {"project": "home"},
    },
    {
        "id": "p2",
        "speaker": "Sara",
        "text": "I run a bakery in Porto with my brother.",
        "timestamp": "2024-03-15T14:03:00Z",
        "metadata": {"project": "work"},
    },
]


@pytest.fixture(scope="module")
def tagged(store: Memory) -> Memory:
    if not store.facts(scope=TAGGED):
        store.add(TAGGED_CHAT, scope=TAGGED)
    return store


def test_search_kwargs_set_k_mode_and_filter(store: Memory, tagged: Memory) -> None:
    two = MembrainRetriever(memory=store, scope=SCOPE, search_kwargs={"k": 2, "mode": "fast"})
    assert len(two.invoke("Sara")) == 2
    assert [d.id for d in two.invoke("Who plays the cello?")] == [
        h.fact.id for h in store.search("Who plays the cello?", scope=SCOPE, k=2, mode="fast")
    ]
    assert len(two.invoke("Sara", k=1)) == 1  # a call's value wins
    work = MembrainRetriever(
        memory=tagged, scope=TAGGED, search_kwargs={"filter": {"project": "work"}}
    )
    assert [d.metadata["sources"] for d in work.invoke("What does Sara do?")] == [["p2"]]
    both = {"project": {"in": ["home", "work"]}}
    assert len(work.invoke("Sara", filter=both)) == 2
    assert (
        MembrainRetriever(memory=tagged, scope=TAGGED).invoke("Sara", filter={"project": "x"}) == []
    )


def test_unknown_or_bad_search_kwargs_are_errors(store: Memory) -> None:
    with pytest.raises(ValidationError, match="unknown key 'top_k'"):
        MembrainRetriever(memory=store, scope=SCOPE, search_kwargs={"top_k": 2})
    with pytest.raises(ValidationError, match="k must be a positive integer"):
        MembrainRetriever(memory=store, scope=SCOPE, search_kwargs={"k": 0})
    with pytest.raises(ValidationError, match="filter"):
        MembrainRetriever(memory=store, scope=SCOPE, search_kwargs={"filter": {"a.b": 1}})
    with pytest.raises(ValidationError, match="min_relevance"):
        MembrainRetriever(memory=store, scope=SCOPE, search_kwargs={"min_relevance": 2})
    retriever = MembrainRetriever(memory=store, scope=SCOPE)
    with pytest.raises(ConfigurationError, match="unknown key 'score_threshold'"):
        retriever.invoke("Sara", score_threshold=0.5)


# -- the scope of each call ---------------------------------------------------------------------
def test_a_namespace_template_reads_the_user_of_each_call(tmp_path: Path) -> None:
    with Memory(path=tmp_path / "store", dense=HashingEncoder(dim=64)) as mem:
        mem.add(CONVERSATION[:1], scope=Scope(dataset="sara", task="memories"))
        mem.add(CONVERSATION[3:], scope=Scope(dataset="nate", task="memories"))
        retriever = MembrainRetriever(memory=mem, namespace=("memories", "{user_id}"))
        assert retriever.scope is None
        for_sara = retriever.invoke("pet", {"configurable": {"user_id": "sara"}})
        for_nate = retriever.invoke("pet", {"configurable": {"user_id": "nate"}})
        assert [d.metadata["sources"] for d in for_sara] == [["m1"]]
        assert [d.metadata["sources"] for d in for_nate] == [["m4"]]
        assert retriever.scope_for({"configurable": {"user_id": "sara"}}) == Scope(
            dataset="sara", task="memories"
        )
        with pytest.raises(ScopeError, match="'user_id'"):
            retriever.invoke("pet")


async def test_one_retriever_in_a_chain_serves_every_user(tmp_path: Path) -> None:
    from langchain_core.runnables import RunnableLambda

    with Memory(path=tmp_path / "store", dense=HashingEncoder(dim=64)) as mem:
        mem.add(CONVERSATION[:1], scope=Scope(dataset="sara", task="assistant"))
        mem.add(CONVERSATION[3:], scope=Scope(dataset="nate", task="assistant"))
        template = ScopeBinding(dataset="{user_id}", task="assistant", session=None)
        retriever = MembrainRetriever(memory=mem, scope_template=template)
        chain = (
            RunnableLambda(lambda q: q)
            | retriever
            | RunnableLambda(lambda docs: [d.metadata["sources"] for d in docs])
        )
        assert chain.invoke("hobby", {"configurable": {"user_id": "sara"}}) == [["m1"]]
        assert await chain.ainvoke("hobby", {"configurable": {"user_id": "nate"}}) == [["m4"]]
        literal = MembrainRetriever(memory=mem, dataset="{user_id}", task="assistant")
        assert literal.scope == Scope(dataset="{user_id}", task="assistant")  # parts are literal
        by_template = MembrainRetriever(memory=mem, scope_template=template)
        assert by_template.invoke("pet", {"configurable": {"user_id": "nate"}})[0].metadata[
            "sources"
        ] == ["m4"]
        with pytest.raises(ScopeError, match="not both"):
            MembrainRetriever(memory=mem, scope=SCOPE, namespace=("memories", "{user_id}"))


def test_a_served_memory_takes_the_same_search_kwargs(tmp_path: Path) -> None:
    keys = {"writer": (["*"], Access.WRITE)}
    with serving(tmp_path, keys) as served, served.remote("writer") as remote:
        remote.add(TAGGED_CHAT, scope=Scope(dataset="sara", task="memories"))
        retriever = MembrainRetriever(
            memory=remote,
            namespace=("memories", "{user_id}"),
            search_kwargs={"k": 1, "filter": {"project": "work"}},
        )
        docs = retriever.invoke("Sara", {"configurable": {"user_id": "sara"}})
        assert [d.metadata["sources"] for d in docs] == [["p2"]]
        assert retriever.invoke("Sara", {"configurable": {"user_id": "nate"}}) == []


def test_min_relevance_keeps_the_relevant_documents(store: Memory) -> None:
    retriever = MembrainRetriever(memory=store, scope=SCOPE, k=4)
    docs = retriever.invoke("Who plays the cello?")
    relevance = [d.metadata["relevance"] for d in docs]
    assert relevance == sorted(relevance, reverse=True) and all(0 <= r <= 1 for r in relevance)
    threshold = (relevance[0] + relevance[-1]) / 2
    kept = retriever.invoke("Who plays the cello?", min_relevance=threshold)
    assert [d.id for d in kept] == [d.id for d in docs if d.metadata["relevance"] >= threshold]
    assert 0 < len(kept) < len(docs)
    strict = MembrainRetriever(memory=store, scope=SCOPE, search_kwargs={"min_relevance": 1.0})
    assert len(strict.invoke("Who plays the cello?")) <= 1
