"""The LlamaIndex and LangChain adapters over a served memory (a RemoteMemory)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from langchain_core.messages import ToolMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import QueryBundle

from integration.served import CONVERSATION, Served, serving
from langchain_membrain import create_memory_tools
from llama_index_membrain import MembrainMemoryBlock, MembrainRetriever
from membrain import Scope
from membrain.background import BackgroundWriter
from membrain.remote import RemoteMemory
from membrain.server import Access

CAT = "What is Sara's cat called?"

_counter = itertools.count()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {"sara-writer": (["sara"], Access.WRITE)}
    with serving(tmp_path_factory.mktemp("remote-adapters"), keys, writer=True) as state:
        yield state


@pytest.fixture
def remote(served: Served) -> Iterator[RemoteMemory]:
    with served.remote() as mem:
        yield mem


@pytest.fixture
def scope(remote: RemoteMemory) -> Scope:
    scope = Scope(dataset="sara", task=f"adapters{next(_counter)}")
    remote.add(CONVERSATION, scope=scope)
    return scope


# -- LlamaIndex retriever ----------------------------------------------------------------------
def test_llama_index_retriever_finds_a_seeded_fact(
    served: Served, remote: RemoteMemory, scope: Scope
) -> None:
    retriever = MembrainRetriever(memory=remote, scope=scope, k=1)
    assert retriever.memory is remote
    [node] = retriever.retrieve(CAT)
    [hit] = served.memory.search(CAT, scope=scope, k=1)
    assert node.node.node_id == hit.fact.id
    assert node.node.get_content() == "Sara adopted a cat named Miso yesterday."
    assert node.node.metadata["sources"] == ["m1"]
    assert retriever.retrieve("   ") == []


async def test_llama_index_retriever_async(remote: RemoteMemory, scope: Scope) -> None:
    retriever = MembrainRetriever(memory=remote, dataset=scope.dataset, task=scope.task, k=2)
    nodes = await retriever.aretrieve(QueryBundle(CAT))
    assert nodes[0].node.get_content() == "Sara adopted a cat named Miso yesterday."
    assert await retriever.aretrieve(QueryBundle("  ")) == []


# -- LlamaIndex memory block -------------------------------------------------------------------
async def test_llama_index_memory_block_stores_and_recalls(
    served: Served, remote: RemoteMemory
) -> None:
    scope = Scope(dataset="sara", task=f"block{next(_counter)}")
    block = MembrainMemoryBlock(memory=remote, scope=scope, user_name="Sara")
    assert block.memory is remote
    assert await block.aget([]) == ""
    await block.aput(
        [
            ChatMessage(role="system", content="You are helpful."),
            ChatMessage(role="user", content="I adopted a cat named Miso yesterday."),
        ]
    )
    stored = remote.messages(scope=scope)
    assert [m.message.text for m in stored] == ["I adopted a cat named Miso yesterday."]
    [fact] = remote.facts(scope=scope)  # extracted at once: the messages left the FIFO
    assert fact.text.startswith("[Sara] adopted a cat named")

    text = await block.aget(
        [
            ChatMessage(role="user", content="I run a bakery in Porto with my brother."),
            ChatMessage(role="user", content="What is my cat called?"),
        ]
    )
    assert "Miso" in text
    texts = [m.message.text for m in remote.messages(scope=scope)]
    assert texts[1:] == ["I run a bakery in Porto with my brother.", "What is my cat called?"]
    # The messages a read sees are stored as pending evidence; the server's writer extracts them.
    assert BackgroundWriter.for_memory(served.memory).flush(scope, timeout=30)
    assert all(m.status.value != "pending" for m in remote.messages(scope=scope))
    assert any("bakery" in f.text for f in remote.facts(scope=scope))


# -- LangChain tools ---------------------------------------------------------------------------
def test_langchain_search_tool(served: Served, remote: RemoteMemory, scope: Scope) -> None:
    search, _ = create_memory_tools(memory=remote, scope=scope)
    out = search.invoke({"query": CAT, "limit": 1})
    [hit] = served.memory.search(CAT, scope=scope, k=1)
    assert out == f"[{hit.fact.id[:8]}] Sara adopted a cat named Miso yesterday. (sources: m1)"
    message = search.invoke(
        {"type": "tool_call", "id": "c1", "name": "search_memory", "args": {"query": "bakery"}}
    )
    assert isinstance(message, ToolMessage)
    assert message.artifact[0]["sources"][0]["source_id"] == "m2"


def test_langchain_manage_tool_creates_updates_and_deletes(
    served: Served, remote: RemoteMemory, scope: Scope
) -> None:
    search, manage = create_memory_tools(memory=remote, scope=scope, speaker="Amadeus")
    created = manage.invoke({"content": "Sara's favourite colour is teal."})
    assert created.startswith("created memory ")
    shown = created.removeprefix("created memory ")
    found = search.invoke({"query": "favourite colour teal", "limit": 1})
    assert found.startswith(f"[{shown}] Sara's favourite colour is teal.")

    updated = manage.invoke(
        {"action": "update", "id": shown, "content": "Sara's favourite colour is now orange."}
    )
    assert updated.endswith(f"it supersedes memory {shown} (kept, no longer returned)")
    (old_id,) = [f.id for f in remote.facts(scope=scope, ids=[shown], include_inactive=True)]
    everything = {f.id: f for f in served.memory.facts(scope=scope, include_inactive=True)}
    assert everything[old_id].status.value == "superseded"
    assert "No memory with id 'nope'" in manage.invoke(
        {"action": "update", "id": "nope", "content": "Sara likes tea."}
    )

    target = next(f for f in remote.facts(scope=scope) if "Miso" in f.text)
    assert manage.invoke({"action": "delete", "id": target.id}) == f"forgot memory {target.id[:8]}"
    assert target.id not in {f.id for f in remote.facts(scope=scope)}
    assert "No memory with id 'nope'" in manage.invoke({"action": "delete", "id": "nope"})


async def test_langchain_tools_async(remote: RemoteMemory, scope: Scope) -> None:
    search, manage = create_memory_tools(memory=remote, scope=scope)
    created = await manage.ainvoke({"content": "Sara plays the cello on Fridays."})
    fact_id = created.removeprefix("created memory ")
    found = await search.ainvoke({"query": "cello Fridays", "limit": 1})
    assert found.startswith(f"[{fact_id}] Sara plays the cello on Fridays.")


async def test_llama_index_memory_block_quotes_earlier_replies(remote: RemoteMemory) -> None:
    scope = Scope(dataset="sara", task=f"block{next(_counter)}")
    block = MembrainMemoryBlock(memory=remote, scope=scope)
    await block.aput(
        [
            ChatMessage(role="user", content="What's the capital of France?"),
            ChatMessage(role="assistant", content="The capital of France is Paris."),
        ]
    )
    text = await block.aget([ChatMessage(role="user", content="Tell me about Paris.")])
    assert "- Assistant: The capital of France is Paris." in text
