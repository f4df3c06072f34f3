"""The recall trace as each surface's users meet it: a LangGraph agent, LangChain, LlamaIndex,
a served memory, the async facade and the command line."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from integration.served import CONVERSATION, serving
from langchain_membrain import MembrainRetriever
from langchain_membrain.langgraph.example import build_example_graph
from llama_index_membrain import MembrainRetriever as LlamaRetriever
from membrain import AsyncMemory, AsyncRemoteMemory, Memory, Scope
from membrain.api.indexing import render_fact
from membrain.background import BackgroundWriter
from membrain.cli import app as cli_app
from membrain.server import Access
from membrain.testing import HashingEncoder

SARA = Scope(dataset="sara", task="assistant")


@pytest.fixture
def traced(tmp_path: Path, empty_stores: Any) -> Iterator[Memory]:
    store = empty_stores.memory(tmp_path / "store", dim=64)
    with Memory(path=store, dense=HashingEncoder(dim=64), trace_recalls=True) as mem:
        yield mem


class RecordingChatModel(GenericFakeChatModel):
    """A fake chat model that keeps the messages of every call."""

    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def test_a_langgraph_thread_s_trace_is_exactly_what_its_prompts_held(traced: Memory) -> None:
    replies = iter([AIMessage("Noted."), AIMessage("Noted too."), AIMessage("Miso, in Dublin.")])
    model = RecordingChatModel(messages=replies, seen=[])
    with BackgroundWriter(traced, idle_seconds=60) as writer:
        graph = build_example_graph(
            memory=traced, model=model, writer=writer, checkpointer=InMemorySaver()
        )
        config: RunnableConfig = {"configurable": {"user_id": "sara", "thread_id": "t-42"}}
        for said in (
            "I adopted a grey cat named Miso.",
            "I work at Stripe in Dublin.",
            "What is my cat called, and where do I work?",
        ):
            graph.invoke({"messages": [HumanMessage(said)]}, config)
            assert writer.flush(timeout=30)
    recalls = traced.trace("t-42", scope=Scope(dataset="sara", task="assistant"))
    # one recall per turn that had a question to read with; prompts hold what each was told
    prompts = [m[0].content for m in model.seen if isinstance(m[0], SystemMessage)]
    told = [r for r in recalls if r.facts]
    assert len(told) == len(prompts) >= 2
    for recall, prompt in zip(told, prompts, strict=True):
        assert isinstance(prompt, str)
        lines = [line for line in prompt.splitlines() if line.startswith("- ")]
        assert len(lines) == len(recall.facts)
        for given in recall.facts:
            assert given.fact is not None
            assert render_fact(given.fact.text, {}) in prompt
            cited = {m.id[:8] for m in traced.messages(scope=given.fact.scope)} & set(
                re.findall(r"msg ([0-9a-f]{8})", prompt)
            )
            assert cited
        assert any(tag.startswith("checkpoint_id:") for tag in recall.tags)
    assert any("Miso" in render_fact(f.fact.text, {}) for f in told[-1].facts if f.fact)


def test_langchain_runs_are_the_thread_else_the_run_id(traced: Memory) -> None:
    traced.add(CONVERSATION, scope=SARA)
    retriever = MembrainRetriever(memory=traced, scope=SARA, k=2)
    docs = retriever.invoke("What is the cat called?", {"configurable": {"thread_id": "lc-t"}})
    (recall,) = traced.trace("lc-t", scope=SARA)
    assert [d.id for d in docs] == list(recall.fact_ids)

    run_id = uuid.uuid4()
    chain = RunnableLambda(lambda q: q) | retriever
    chain.invoke("Where is the bakery?", {"run_id": run_id, "tags": ["eval"]})
    (in_chain,) = traced.trace(str(run_id), scope=SARA)
    assert in_chain.query == "Where is the bakery?"
    assert "eval" in in_chain.tags


def test_llama_index_retriever_records_its_run(traced: Memory) -> None:
    traced.add(CONVERSATION, scope=SARA)
    nodes = LlamaRetriever(memory=traced, scope=SARA, similarity_top_k=2, run="li-1").retrieve(
        "What is the cat called?"
    )
    (recall,) = traced.trace("li-1", scope=SARA)
    assert [n.node.node_id for n in nodes] == list(recall.fact_ids)


async def test_async_facade_reads_the_trace(traced: Memory) -> None:
    traced.add(CONVERSATION, scope=SARA)
    facade = AsyncMemory(traced)
    found = await facade.search("What is the cat called?", scope=SARA, k=1, run="a-1")
    (recall,) = await facade.trace("a-1", scope=SARA)
    assert recall.fact_ids == (found[0].fact.id,)
    assert [r.run for r in await facade.recalls(found[0].fact.id, scope=SARA)] == ["a-1"]


def test_a_served_memory_traces_and_answers_both_reads(tmp_path: Path) -> None:
    keys = {"sara-writer": (["sara"], Access.WRITE), "kim-reader": (["kim"], Access.READ)}
    with serving(tmp_path, keys) as served:
        served.memory.trace_recalls = True
        with served.remote() as remote:
            remote.add(CONVERSATION, scope=SARA)
            found = remote.search("What is the cat called?", scope=SARA, k=2, run="srv")
            context = remote.context("Tell me about the bakery.", scope=SARA, run="srv")
            recalls = remote.trace("srv", scope=SARA)
            assert [r.operation for r in recalls] == ["search", "context"]
            assert recalls[0].fact_ids == tuple(h.fact.id for h in found)
            assert recalls[1].fact_ids == tuple(h.fact.id for h in context.hits)
            assert recalls[0].facts[0].fact == found[0].fact
            used = remote.recalls(found[0].fact.id[:8], scope=SARA)
            assert {r.run for r in used} == {"srv"}
        with served.remote("kim-reader") as other:
            from membrain import RemoteAccessError

            with pytest.raises(RemoteAccessError):
                other.trace("srv", scope=SARA)


async def test_async_remote_reads_the_trace(tmp_path: Path) -> None:
    keys = {"sara-writer": (["sara"], Access.WRITE)}
    with serving(tmp_path, keys) as served:
        served.memory.trace_recalls = True
        served.memory.add(CONVERSATION, scope=SARA)
        async with AsyncRemoteMemory(served.url, served.keys["sara-writer"]) as remote:
            await remote.search("What is the cat called?", scope=SARA, k=1, run="ar")
            (recall,) = await remote.trace("ar", scope=SARA)
            assert recall.facts and recall.facts[0].sources


def test_the_command_line_searches_under_a_run_and_shows_its_trace(
    traced: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "cli-store"
    runner = CliRunner()
    monkeypatch.setenv("MEMBRAIN_TRACE_RECALLS", "true")
    data = tmp_path / "chat.json"
    data.write_text(__import__("json").dumps(CONVERSATION))
    args = ["-d", "sara", "-t", "assistant", "--path", str(store)]
    assert runner.invoke(cli_app, ["ingest", str(data), *args]).exit_code == 0
    searched = runner.invoke(cli_app, ["search", "cat name", *args, "--run", "cli-1"])
    assert searched.exit_code == 0, searched.output
    shown = runner.invoke(cli_app, ["trace", "cli-1", *args])
    assert shown.exit_code == 0, shown.output
    assert "search run cli-1: cat name" in shown.output and "Miso" in shown.output
    listed = runner.invoke(cli_app, ["trace", "cli-1", *args, "--json"])
    fact_id = __import__("json").loads(listed.output.splitlines()[0])["facts"][0]["fact_id"]
    used = runner.invoke(cli_app, ["recalls", fact_id[:8], *args])
    assert used.exit_code == 0 and "run cli-1" in used.output
    missing = runner.invoke(cli_app, ["trace", "nobody", *args])
    assert missing.exit_code == 0 and "(no recalls)" in missing.output


def test_a_graph_s_store_search_is_traced_under_its_thread(traced: Memory, tmp_path: Path) -> None:
    from typing import TypedDict

    from langgraph.graph import StateGraph

    from langchain_membrain.langgraph import MembrainStore

    class State(TypedDict):
        found: list[str]

    with MembrainStore(memory=traced, path=tmp_path / "kv.sqlite") as store:
        store.put(("memories", "sara"), "cat", {"text": "Sara adopted a cat named Miso."})
        scope = store.scope_for(("memories", "sara"))
        traced.extract_pending(scope=scope)

        def look(state: State) -> State:
            items = store.search(("memories", "sara"), query="What is the cat called?")
            return {"found": [i.key for i in items]}

        graph = StateGraph(State)
        graph.add_node("look", look)
        graph.set_entry_point("look")
        graph.set_finish_point("look")
        result = graph.compile(store=store).invoke(
            {"found": []}, {"configurable": {"thread_id": "store-t"}}
        )
        assert result["found"] == ["cat"]
        (recall,) = traced.trace("store-t", scope=scope.without_session())
        texts = [given.fact.text for given in recall.facts if given.fact]
        assert texts and "Miso" in texts[0]
        store.search(("memories", "sara"), query="cat")  # outside a graph: no run named
        assert len(traced.trace("store-t", scope=scope.without_session())) == 1
