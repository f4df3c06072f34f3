from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import MockLLM
from llama_index.core.memory import Memory as ChatMemory
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import (
    ExactMatchFilter,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from store_templates import copy_store

import llama_index_membrain
from llama_index_membrain import MembrainMemoryBlock, MembrainRetriever, membrain_filters
from membrain import ConfigurationError, Memory, RetrievalMode, Scope, ScopeError
from membrain.aio import AsyncMemory
from membrain.api.tokens import count_tokens
from membrain.background import BackgroundWriter
from membrain.binding import DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME
from membrain.testing import HashingEncoder

CHAT = [
    {"speaker": "Sara", "text": "Hey Nate!", "timestamp": "2024-03-15T14:00:00Z", "id": "m0"},
    {
        "speaker": "Sara",
        "text": "I adopted a grey cat named Miso yesterday.",
        "timestamp": "2024-03-15T14:01:00Z",
        "source_id": "m1",
    },
    {
        "speaker": "Nate",
        "text": "I bake croissants at my bakery every Tuesday.",
        "timestamp": "2024-03-15T14:02:00Z",
        "source_id": "m2",
    },
    {
        "speaker": "Sara",
        "text": "My sister Lina moved to Lisbon in 2021.",
        "timestamp": "2024-03-15T14:03:00Z",
        "source_id": "m3",
    },
]
QUESTION = "What is the name of Sara's cat?"


@pytest.fixture(scope="module")
def chat_store(tmp_path_factory: pytest.TempPathFactory, scope: Scope) -> Path:
    """A closed store holding ``CHAT``, made once for the module."""
    path = tmp_path_factory.mktemp("chat") / "store"
    with Memory(path=path, dense=HashingEncoder(dim=64)) as memory:
        memory.add(CHAT, scope=scope)
    return path


@pytest.fixture
def filled(chat_store: Path, tmp_path: Path) -> Iterator[Memory]:
    """A Memory holding ``CHAT``: a copy of the module's store, for one test."""
    store = copy_store(chat_store, tmp_path / "store")
    with Memory(path=store, dense=HashingEncoder(dim=64)) as memory:
        yield memory


@pytest.fixture
def engine() -> Iterator[AsyncEngine]:
    """The chat store's database, disposed of on the loop the sync API ran it on."""
    db = create_async_engine("sqlite+aiosqlite:///:memory:")
    yield db
    asyncio_run(db.dispose())


def _ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def _section(messages: list[ChatMessage], name: str) -> str:
    system = [m for m in messages if m.role == "system"]
    assert system, "no memory was inserted"
    found = re.search(rf"<{name}>\n(.*?)\n</{name}>", system[0].content or "", re.S)
    assert found, system[0].content
    return found.group(1)


def _fact_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- ")]


# -- public API --------------------------------------------------------------------------------
def test_public_api() -> None:
    assert sorted(llama_index_membrain.__all__) == [
        "MembrainMemoryBlock",
        "MembrainRetriever",
        "hit_metadata",
        "hit_to_node",
        "membrain_filters",
    ]
    for name in llama_index_membrain.__all__:
        assert getattr(llama_index_membrain, name) is not None


# -- retriever ---------------------------------------------------------------------------------
def test_retriever_returns_facts_as_nodes_with_exact_metadata(filled: Memory, scope: Scope) -> None:
    retriever = MembrainRetriever(memory=filled, scope=scope, k=3, mode="fast")
    nodes = retriever.retrieve(QUESTION)
    hits = filled.search(QUESTION, scope=scope, k=3, mode="fast")
    assert _ids(nodes) == [h.fact.id for h in hits]
    assert len(nodes) == 3

    top = nodes[0]
    assert isinstance(top.node, TextNode)
    assert top.node.text == "Sara adopted a grey cat named Miso yesterday."
    assert top.score == hits[0].relevance  # in [0, 1], falling with the order
    assert top.node.metadata == {
        "fact_id": hits[0].fact.id,
        "text": "[Sara] adopted a grey cat named [Miso] [yesterday::2024-03-14].",
        "entities": ["Sara", "Miso"],
        "valid_from": "2024-03-14T00:00:00+00:00",
        "valid_to": "2024-03-15T00:00:00+00:00",
        "sources": ["m1"],
        "score": hits[0].score,
        "relevance": hits[0].relevance,
        "paths": hits[0].paths,
        "rerank": hits[0].rerank,
        "scope": "sara/assistant",
        "session": None,
        "status": "active",
        "trust": "stated",
        "superseded_by": [],
        "superseded_at": None,
        "author": None,
        "metadata": {},
    }
    assert top.node.metadata["paths"]  # some path found it
    by_text = {n.node.text: n.node.metadata for n in nodes}
    nate = by_text["Nate bakes croissants at Nate's bakery every Tuesday."]
    assert nate["valid_from"] is None and nate["valid_to"] is None
    assert nate["sources"] == ["m2"] and nate["entities"] == ["Nate"]
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    floor = (nodes[0].score + nodes[-1].score) / 2  # type: ignore[operator]
    kept = MembrainRetriever(memory=filled, scope=scope, k=3, mode="fast", min_relevance=floor)
    assert _ids(kept.retrieve(QUESTION)) == [n.node.node_id for n in nodes if n.score >= floor]  # type: ignore[operator]


def test_llm_sees_the_fact_with_entities_and_times_not_the_bookkeeping(
    filled: Memory, scope: Scope
) -> None:
    node = (
        MembrainRetriever(memory=filled, scope=scope, k=1, mode="fast").retrieve(QUESTION)[0].node
    )
    shown = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "Sara adopted a grey cat named Miso yesterday." in shown
    assert "valid_from: 2024-03-14T00:00:00+00:00" in shown
    assert "entities: ['Sara', 'Miso']" in shown
    for hidden in ("fact_id", "paths", "score", "session", "sara/assistant", "[yesterday::"):
        assert hidden not in shown
    # empty metadata is left out of what the model reads, and kept for programs
    assert node.metadata["superseded_by"] == [] and node.metadata["author"] is None
    for empty in ("superseded_by", "superseded_at", "author", "None", "[]"):
        assert empty not in shown


@pytest.mark.asyncio
async def test_async_retrieve_matches_sync(filled: Memory, scope: Scope) -> None:
    retriever = MembrainRetriever(
        memory=AsyncMemory.from_memory(filled), scope=scope, k=3, mode="fast"
    )
    assert retriever.memory is filled  # an AsyncMemory is unwrapped
    sync_nodes = retriever.retrieve(QueryBundle(QUESTION))
    async_nodes = await retriever.aretrieve(QUESTION)
    assert _ids(async_nodes) == _ids(sync_nodes)
    assert [n.node.metadata for n in async_nodes] == [n.node.metadata for n in sync_nodes]
    assert await retriever.aretrieve("   ") == []


def test_retriever_scope_arguments(filled: Memory, scope: Scope) -> None:
    by_parts = MembrainRetriever(memory=filled, dataset="sara", task="assistant", k=2, mode="fast")
    assert by_parts.scope == scope
    assert _ids(by_parts.retrieve(QUESTION)) == _ids(
        MembrainRetriever(memory=filled, scope=scope, k=2, mode="fast").retrieve(QUESTION)
    )
    other = MembrainRetriever(memory=filled, dataset="sara", task="elsewhere", k=2)
    assert other.retrieve(QUESTION) == []  # no read crosses the tenant key
    with pytest.raises(ScopeError, match="not both"):
        MembrainRetriever(memory=filled, scope=scope, dataset="sara")
    with pytest.raises(ScopeError, match="needs a scope"):
        MembrainRetriever(memory=filled, dataset="sara")
    with pytest.raises(ConfigurationError, match="unknown retrieval mode"):
        MembrainRetriever(memory=filled, scope=scope, mode="telepathy")
    with pytest.raises(TypeError):
        MembrainRetriever(filled, scope=scope)  # type: ignore[misc]


TAGGED = [
    {
        "speaker": "Sara",
        "text": "I adopted a grey cat named Miso yesterday.",
        "timestamp": "2024-03-15T14:01:00Z",
        "source_id": "t1",
        "metadata": {"project": "home", "tags": ["pets", "family"]},
    },
    {
        "speaker": "Sara",
        "text": "I run a bakery in Porto with my brother.",
        "timestamp": "2024-03-15T14:03:00Z",
        "source_id": "t2",
        "metadata": {"project": "work", "year": 2024},
    },
]


def test_retriever_takes_similarity_top_k_and_metadata_filters(memory: Memory) -> None:
    scope = Scope(dataset="sara", task="tagged")
    memory.add(TAGGED, scope=scope)

    def sources(**kwargs: object) -> list[list[str]]:
        retriever = MembrainRetriever(memory=memory, scope=scope, mode="fast", **kwargs)  # type: ignore[arg-type]
        return sorted(n.node.metadata["sources"] for n in retriever.retrieve("Sara"))

    assert len(sources(similarity_top_k=1)) == 1
    assert MembrainRetriever(memory=memory, scope=scope, similarity_top_k=1).similarity_top_k == 1
    eq = MetadataFilters(filters=[MetadataFilter(key="project", value="work")])
    assert sources(filters=eq) == [["t2"]]
    assert sources(filters=MetadataFilters(filters=[ExactMatchFilter(key="year", value=2024)])) == [
        ["t2"]
    ]
    one_of = MetadataFilter(key="project", value=["home", "work"], operator=FilterOperator.IN)
    assert sources(filters=MetadataFilters(filters=[one_of])) == [["t1"], ["t2"]]
    contains = MetadataFilter(key="tags", value="pets", operator=FilterOperator.CONTAINS)
    assert sources(filters=MetadataFilters(filters=[contains])) == [["t1"]]
    either = MetadataFilters(
        filters=[
            MetadataFilter(key="project", value="home"),
            MetadataFilter(key="project", value="x"),
        ],
        condition=FilterCondition.OR,
    )
    assert sources(filters=either) == [["t1"]]
    both = MetadataFilters(filters=[contains, MetadataFilters(filters=[eq.filters[0]])])
    assert sources(filters=both) == []  # and: the work fact has no pets tag


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ([MetadataFilter(key="year", value=2020, operator=FilterOperator.GT)], "operator '>'"),
        ([MetadataFilter(key="project", value="x", operator=FilterOperator.NE)], "operator '!='"),
        ([MetadataFilter(key="tags", value=["a"], operator=FilterOperator.NIN)], "'nin'"),
        ([MetadataFilter(key="score", value=0.5)], "strings and integers"),
        ([MetadataFilter(key="a", value="x"), MetadataFilter(key="a", value="y")], "two different"),
    ],
)
def test_filters_membrain_cannot_evaluate_are_clear_errors(
    memory: Memory, scope: Scope, filters: list[MetadataFilter], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MembrainRetriever(memory=memory, scope=scope, filters=MetadataFilters(filters=filters))


def test_filter_conditions_membrain_cannot_evaluate_are_clear_errors(
    memory: Memory, scope: Scope
) -> None:
    pair = [MetadataFilter(key="a", value="x"), MetadataFilter(key="b", value="y")]
    with pytest.raises(ConfigurationError, match="'or' across keys"):
        membrain_filters(MetadataFilters(filters=pair, condition=FilterCondition.OR))
    with pytest.raises(ConfigurationError, match="'not'"):
        membrain_filters(MetadataFilters(filters=pair, condition=FilterCondition.NOT))
    with pytest.raises(ConfigurationError, match="not both"):
        MembrainRetriever(memory=memory, scope=scope, k=2, similarity_top_k=2)
    with pytest.raises(ConfigurationError, match="positive integer"):
        MembrainRetriever(memory=memory, scope=scope, similarity_top_k=0)
    with pytest.raises(ConfigurationError, match="min_relevance"):
        MembrainRetriever(memory=memory, scope=scope, min_relevance=1.5)
    assert membrain_filters(None) is None
    assert membrain_filters(MetadataFilters(filters=[])) is None


@pytest.mark.asyncio
async def test_memory_block_quotes_the_assistants_earlier_replies(memory: Memory) -> None:
    scope = Scope(dataset="sara", task="capitals")
    block = MembrainMemoryBlock(memory=memory, scope=scope)
    await block.aput(
        [
            ChatMessage(role="user", content="What's the capital of France?"),
            ChatMessage(role="assistant", content="The capital of France is Paris."),
            ChatMessage(role="user", content="What about Germany?"),
            ChatMessage(role="assistant", content="The capital of Germany is Berlin."),
        ]
    )
    assert memory.facts(scope=scope) == []  # an assistant's own words are never facts
    text = await block.aget([ChatMessage(role="user", content="Tell me about Paris.")])
    assert text == (
        "Earlier replies (quoted from the conversation; not facts):\n"
        "- Assistant: The capital of France is Paris."
    )
    # A reply still in the prompt is not quoted again; a question sharing no word quotes none.
    shown = ChatMessage(role="assistant", content="The capital of France is Paris.")
    asked = ChatMessage(role="user", content="Tell me about Paris.")
    assert await block.aget([shown, asked]) == ""
    assert await block.aget([ChatMessage(role="user", content="Any news on Lisbon?")]) == ""
    quiet = MembrainMemoryBlock(memory=memory, scope=scope, replies=0)
    assert await quiet.aget([ChatMessage(role="user", content="Tell me about Paris.")]) == ""


@pytest.mark.asyncio
async def test_memory_block_drops_the_replies_first_when_truncated(memory: Memory) -> None:
    scope = Scope(dataset="okabe", task="replies")
    block = MembrainMemoryBlock(memory=memory, scope=scope, user_name="Okabe", min_relevance=0)
    await block.aput(
        [
            ChatMessage(role="user", content="I keep my lab notes in a red notebook."),
            ChatMessage(role="assistant", content="A red notebook is easy to find in the lab."),
        ]
    )
    text = await block.aget([ChatMessage(role="user", content="Where is the red notebook?")])
    facts, replies = text.split("\n\nEarlier replies", 1)
    assert "Okabe keeps Okabe's lab notes in a red notebook." in facts
    assert "- Assistant: A red notebook is easy to find in the lab." in replies
    assert await block.atruncate(text, 5) == facts
    assert await block.atruncate([], 5) is None  # LlamaIndex's placeholder for an empty block


def test_memory_block_refuses_unknown_arguments(memory: Memory, scope: Scope) -> None:
    with pytest.raises(ValidationError, match="similarity_top_k"):
        MembrainMemoryBlock(memory=memory, scope=scope, similarity_top_k=2)  # type: ignore[call-arg]


def test_memory_block_defaults_and_mode(memory: Memory) -> None:
    scope = Scope(dataset="okabe", task="defaults")
    block = MembrainMemoryBlock(memory=memory, scope=scope, mode="expand")
    assert block.mode is RetrievalMode.EXPAND
    assert (block.user_name, block.assistant_name) == (DEFAULT_USER_NAME, DEFAULT_ASSISTANT_NAME)
    with pytest.raises(ValidationError, match="unknown retrieval mode 'telepathy'"):
        MembrainMemoryBlock(memory=memory, scope=scope, mode="telepathy")


def test_retriever_with_a_session(memory: Memory) -> None:
    session = Scope(dataset="sara", task="assistant", session="s1")
    memory.add(CHAT, scope=session)
    memory.add(
        [{"speaker": "Sara", "text": "I sold my bike.", "timestamp": "2024-03-16T09:00:00Z"}],
        scope=session.model_copy(update={"session": "s2"}),
    )
    nodes = MembrainRetriever(
        memory=memory, dataset="sara", task="assistant", session="s1"
    ).retrieve("What did Sara sell?")
    assert nodes and all(n.node.metadata["session"] == "s1" for n in nodes)
    assert {n.node.metadata["scope"] for n in nodes} == {"sara/assistant"}
    assert "bike" not in " ".join(n.node.get_content() for n in nodes)
    everything = MembrainRetriever(memory=memory, dataset="sara", task="assistant", k=10)
    sessions = {n.node.metadata["session"] for n in everything.retrieve("What did Sara sell?")}
    assert sessions == {"s1", "s2"}


def test_retriever_in_a_query_engine_returns_the_source_nodes(filled: Memory, scope: Scope) -> None:
    retriever = MembrainRetriever(memory=filled, scope=scope, k=2, mode="fast")
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    assert _ids(response.source_nodes) == _ids(retriever.retrieve(QUESTION))
    assert response.source_nodes[0].node.metadata["sources"] == ["m1"]
    # MockLLM echoes its prompt: the fact reached the LLM.
    assert "Sara adopted a grey cat named Miso yesterday." in str(response)


@pytest.mark.asyncio
async def test_retriever_in_an_async_query_engine(filled: Memory, scope: Scope) -> None:
    retriever = MembrainRetriever(memory=filled, scope=scope, k=2, mode="fast")
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = await engine.aquery(QUESTION)
    assert _ids(response.source_nodes) == _ids(retriever.retrieve(QUESTION))


# -- memory block ------------------------------------------------------------------------------
def test_memory_block_recalls_facts_from_earlier_turns(memory: Memory, engine: AsyncEngine) -> None:
    scope = Scope(dataset="okabe", task="lab_chat")
    block = MembrainMemoryBlock(memory=memory, scope=scope, max_tokens=300)
    # A tiny short-term budget: earlier turns leave the FIFO and waterfall into the block.
    chat = ChatMemory.from_defaults(
        session_id="s1",
        memory_blocks=[block],
        token_limit=1000,
        chat_history_token_ratio=0.02,
        token_flush_size=10,
        async_engine=engine,
    )
    assert chat.get("What is my cat called?") == []  # nothing stored, nothing recalled yet

    chat.put(ChatMessage(role="user", content="I adopted a grey cat named Miso."))
    chat.put(
        ChatMessage(
            role="assistant",
            content="Congratulations on Miso!",
            additional_kwargs={"id": "reply-1"},
        )
    )
    # Nothing was read since: the block has seen only the question asked before the turns.
    assert [m.message.text for m in memory.messages(scope=scope)] == ["What is my cat called?"]
    chat.put(ChatMessage(role="user", content="My sister Lina lives in Lisbon."))

    stored = [m for m in memory.messages(scope=scope) if m.message.text != "What is my cat called?"]
    assert [(m.message.speaker, m.message.role.value) for m in stored] == [
        ("User", "user"),
        ("Assistant", "assistant"),
    ]
    assert stored[0].message.timestamp < stored[1].message.timestamp
    assert stored[0].message.source_id.startswith("llamaindex:")  # type: ignore[union-attr]
    assert stored[1].message.source_id == "reply-1"

    messages = chat.get("What is my cat called?")
    section = _section(messages, "membrain")
    assert "User adopted a grey cat named Miso." in section
    assert messages[-1].content == "My sister Lina lives in Lisbon."  # the short-term queue


def test_memory_block_writes_each_message_so_the_next_session_remembers(
    memory: Memory, engine: AsyncEngine
) -> None:
    scope = Scope(dataset="okabe", task="short_chats")
    block = MembrainMemoryBlock(memory=memory, scope=scope, user_name="Okabe")
    first = ChatMemory.from_defaults(session_id="s1", memory_blocks=[block], async_engine=engine)
    first.put(ChatMessage(role="user", content="I adopted a grey cat named Miso."))
    first.put(ChatMessage(role="assistant", content="Congratulations!"))
    first.get()  # a short session: nothing ever leaves the short-term FIFO
    first.get()  # seen again: written once
    stored = memory.messages(scope=scope)
    assert [m.message.text for m in stored] == [
        "I adopted a grey cat named Miso.",
        "Congratulations!",
    ]
    assert BackgroundWriter.for_memory(memory).flush(scope, timeout=30)
    assert any("Miso" in f.text for f in memory.facts(scope=scope))

    second = ChatMemory.from_defaults(session_id="s2", memory_blocks=[block], async_engine=engine)
    section = _section(second.get("What is my cat called?"), "membrain")
    assert "Okabe adopted a grey cat named Miso." in section

    reader = MembrainMemoryBlock(memory=memory, scope=scope, user_name="Okabe", record_reads=False)
    third = ChatMemory.from_defaults(session_id="s3", memory_blocks=[reader], async_engine=engine)
    assert "Miso" in _section(third.get("Tell me about my cat Miso"), "membrain")
    assert "Tell me about my cat Miso" not in [m.message.text for m in memory.messages(scope=scope)]


@pytest.mark.asyncio
async def test_memory_block_put_and_get(memory: Memory) -> None:
    scope = Scope(dataset="okabe", task="lab_chat")
    block = MembrainMemoryBlock(
        memory=memory,
        scope=scope,
        user_name="Okabe",
        assistant_name="Kurisu",
        name="longterm",
        min_relevance=0,  # every fact: this test is about what is written and read
    )
    assert (block.name, block.priority, block.mode.value, block.max_tokens) == (
        "longterm",
        1,
        "fast",
        1000,
    )
    assert await block.aget([]) == ""
    await block.aput(
        [
            ChatMessage(role="system", content="You are Kurisu."),
            ChatMessage(role="user", content="I bought a microwave for the lab."),
            ChatMessage(role="assistant", content="   "),
            ChatMessage(role="assistant", content="I keep my notes in a red notebook."),
        ]
    )
    await block.aput([ChatMessage(role="user", content="I moved to Akihabara.")])
    stored = memory.messages(scope=scope)
    assert [m.message.speaker for m in stored] == ["Okabe", "Kurisu", "Okabe"]  # no system
    times = [m.message.timestamp for m in stored]
    assert times == sorted(times) and len(set(times)) == 3
    assert len(memory.facts(scope=scope)) == 3

    text = await block.aget(
        [
            ChatMessage(role="user", content="Where do I live?"),
            ChatMessage(role="assistant", content="Let me think."),
        ]
    )
    pending = [m.message.text for m in memory.messages(scope=scope) if m.status.value == "pending"]
    assert pending == ["Where do I live?", "Let me think."]  # evidence now, facts in background
    facts = [line.split(": ", 1)[1].rsplit(" [", 1)[0] for line in _fact_lines(text)]
    assert sorted(facts) == [
        "Kurisu keeps Kurisu's notes in a red notebook.",
        "Okabe bought a microwave for the lab.",
        "Okabe moved to Akihabara.",
    ]
    assert "## Okabe" in text and "## Kurisu" in text
    assert count_tokens(text) <= 1000


MANY = [
    "I adopted a grey cat named Miso.",
    "I bake sourdough bread every Sunday morning.",
    "My sister Lina moved to Lisbon to study architecture.",
    "I play the cello in a community orchestra on Thursdays.",
    "I am training for the Berlin marathon in September.",
    "My favourite restaurant is a small ramen shop near the station.",
]


def _seed(memory: Memory, scope: Scope) -> None:
    memory.add(
        [
            {
                "speaker": "User",
                "text": text,
                "timestamp": f"2024-03-15T14:0{i}:00Z",
                "source_id": f"t{i}",
            }
            for i, text in enumerate(MANY)
        ],
        scope=scope,
    )


@pytest.mark.asyncio
async def test_truncate_reassembles_whole_facts_within_the_smaller_budget(memory: Memory) -> None:
    scope = Scope(dataset="u1", task="chat")
    _seed(memory, scope)
    # Every fact, however loosely it answers: this test is about the budget.
    block = MembrainMemoryBlock(memory=memory, scope=scope, max_tokens=400, min_relevance=0)
    full = await block.aget([ChatMessage(role="user", content="Tell me about my hobbies")])
    full_lines = _fact_lines(full)
    assert len(full_lines) == len(MANY)

    size = count_tokens(full)
    shorter = await block.atruncate(full, 40)
    assert shorter is not None
    assert count_tokens(shorter) <= size - 40
    lines = _fact_lines(shorter)
    assert 0 < len(lines) < len(full_lines)
    assert set(lines) <= set(full_lines)  # whole facts kept, none cut mid-line
    # The shortened block can itself be shortened again.
    again = await block.atruncate(shorter, 30)
    assert again is not None
    assert count_tokens(again) <= count_tokens(shorter) - 30
    assert 0 < len(_fact_lines(again)) < len(lines)
    assert set(_fact_lines(again)) <= set(lines)

    assert await block.atruncate(full, 0) == full
    assert await block.atruncate(full, size) is None  # nothing fits
    assert await block.atruncate("text this block never produced", 5) is None


def test_memory_trims_the_block_instead_of_dropping_it(memory: Memory, engine: AsyncEngine) -> None:
    scope = Scope(dataset="u2", task="chat")
    _seed(memory, scope)
    question = "Tell me about my hobbies"
    block = MembrainMemoryBlock(memory=memory, scope=scope, max_tokens=400, min_relevance=0)
    full = memory.context(question, scope=scope, max_tokens=400, mode="fast", min_relevance=0)
    assert len(_fact_lines(full.text)) == len(MANY)

    chat = ChatMemory.from_defaults(
        session_id="s2",
        memory_blocks=[block],
        token_limit=full.tokens,  # the chat history pushes the block over the limit
        async_engine=engine,
    )
    chat.put(ChatMessage(role="user", content="Hi there, how are you doing today?"))
    section = _section(chat.get(question), "membrain")
    lines = _fact_lines(section)
    assert 0 < len(lines) < len(MANY)
    assert set(lines) <= set(_fact_lines(full.text))

    # Priority 0 blocks are never truncated by the framework.
    fixed = MembrainMemoryBlock(
        memory=memory, scope=scope, max_tokens=400, priority=0, min_relevance=0
    )
    chat.memory_blocks = [fixed]
    assert len(_fact_lines(_section(chat.get(question), "membrain"))) == len(MANY)


def test_memory_model_calls_are_spans_under_the_retriever(tmp_path: Path) -> None:
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    handler = SimpleSpanHandler()
    dispatcher = get_dispatcher()
    dispatcher.add_span_handler(handler)
    try:
        scope = Scope(dataset="sara", task="traced")
        with Memory(tmp_path, dense=HashingEncoder(dim=32), llm=MockLLM()) as mem:
            mem.add("I have a cat.", scope=scope, user_name="Sara", extract=False)
            MembrainRetriever(memory=mem, scope=scope, mode="expand").retrieve("Sara's pet?")
    finally:
        dispatcher.span_handlers.remove(handler)
    parents = {span.id_: span.parent_id for span in handler.completed_spans}
    chats = [i for i in parents if i.startswith("MockLLM.chat")]
    assert chats, "the query rewrite called the model"
    assert all((parents[c] or "").startswith("MembrainRetriever._retrieve") for c in chats)


@pytest.mark.asyncio
async def test_memory_block_opens_with_the_profile_and_keeps_it_when_truncated(
    memory: Memory,
) -> None:
    scope = Scope(dataset="okabe", task="profiled_chat")
    block = MembrainMemoryBlock(
        memory=memory, scope=scope, user_name="Okabe", max_tokens=400, profile_ratio=0.3
    )
    await block.aput([ChatMessage(role="user", content="I live in Akihabara.")])
    await block.aput([ChatMessage(role="user", content="I keep a red notebook in the lab.")])
    text = await block.aget([ChatMessage(role="user", content="Where is the red notebook?")])
    assert text.startswith("## Profile\n- basic_info/residence: Okabe lives in Akihabara.")
    smaller = await block.atruncate(text, 20)
    assert smaller is not None and smaller.startswith("## Profile\n")
