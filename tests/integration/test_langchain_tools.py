"""Agent memory tools: LangMem-compatible names and arguments over MemBrain."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from langchain_membrain import create_memory_tools
from membrain import ConfigurationError, Memory, Scope, ScopeError
from membrain.binding import DEFAULT_ASSISTANT_NAME, scope_part
from membrain.testing import HashingEncoder

_counter = itertools.count()

CONVERSATION = [
    {
        "id": "m1",
        "speaker": "Sara",
        "text": "I adopted a cat named Miso yesterday.",
        "timestamp": "2024-03-15T14:01:00Z",
    },
    {
        "id": "m2",
        "speaker": "Sara",
        "text": "I run a bakery in Porto with my brother.",
        "timestamp": "2024-03-15T14:03:00Z",
    },
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path: Path = tmp_path_factory.mktemp("tools") / "store"
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        yield mem


@pytest.fixture
def scope(store: Memory) -> Scope:
    scope = Scope(dataset=f"agent{next(_counter)}", task="assistant")
    store.add(CONVERSATION, scope=scope)
    return scope


@pytest.fixture
def tools(store: Memory, scope: Scope) -> dict[str, BaseTool]:
    return {t.name: t for t in create_memory_tools(memory=store, scope=scope, speaker="Amadeus")}


class _StandardToolTests:
    """Binds a tool built on the test's own scope for langchain-tests' tool suites."""

    name: str
    built: BaseTool

    @pytest.fixture(autouse=True)
    def _bind_tool(self, tools: dict[str, BaseTool]) -> None:
        self.built = tools[self.name]

    @property
    def tool_constructor(self) -> BaseTool:
        return self.built


class _SearchMemory(_StandardToolTests):
    name = "search_memory"

    @property
    def tool_invoke_params_example(self) -> dict[str, object]:
        return {"query": "What is Sara's cat called?", "limit": 2}


class _ManageMemory(_StandardToolTests):
    name = "manage_memory"

    @property
    def tool_invoke_params_example(self) -> dict[str, object]:
        return {"content": "Sara drinks green tea every morning.", "action": "create"}


class TestSearchMemoryIntegration(_SearchMemory, ToolsIntegrationTests):
    pass


class TestSearchMemoryUnit(_SearchMemory, ToolsUnitTests):
    pass


class TestManageMemoryIntegration(_ManageMemory, ToolsIntegrationTests):
    pass


class TestManageMemoryUnit(_ManageMemory, ToolsUnitTests):
    pass


def test_names_and_arguments_match_langmem(tools: dict[str, BaseTool]) -> None:
    assert sorted(tools) == ["manage_memory", "search_memory"]
    assert set(tools["search_memory"].args) == {"query", "limit"}
    assert set(tools["manage_memory"].args) == {"content", "action", "id"}
    assert tools["manage_memory"].args["action"]["enum"] == ["create", "update", "delete"]
    assert "supersedes the old one" in tools["manage_memory"].description
    assert "forgets a memory" in tools["manage_memory"].description


def test_search_finds_a_fact(store: Memory, scope: Scope, tools: dict[str, BaseTool]) -> None:
    out = tools["search_memory"].invoke({"query": "What is Sara's cat called?", "limit": 1})
    [hit] = store.search("What is Sara's cat called?", scope=scope, k=1)
    assert out == f"[{hit.fact.id[:8]}] Sara adopted a cat named Miso yesterday. (sources: m1)"


def test_search_limit_and_artifact(tools: dict[str, BaseTool]) -> None:
    assert len(tools["search_memory"].invoke({"query": "Sara", "limit": 2}).splitlines()) == 2
    message = tools["search_memory"].invoke(
        {
            "type": "tool_call",
            "id": "call1",
            "name": "search_memory",
            "args": {"query": "bakery"},
        }
    )
    assert isinstance(message, ToolMessage)
    assert (
        message.artifact[0]["fact"]["text"]
        == "[Sara] runs a bakery in [Porto] with [Sara's brother]."
    )
    assert message.artifact[0]["sources"][0]["source_id"] == "m2"


def test_search_of_an_empty_scope(store: Memory) -> None:
    [search, _] = create_memory_tools(memory=store, scope=Scope(dataset="nobody", task="assistant"))
    assert search.invoke({"query": "cat"}) == "No memories found."


def test_create_then_search_finds_the_new_fact(
    store: Memory, scope: Scope, tools: dict[str, BaseTool]
) -> None:
    out = tools["manage_memory"].invoke({"content": "Sara's favourite colour is teal."})
    assert out.startswith("created memory ")
    fact_id = out.removeprefix("created memory ")
    found = tools["search_memory"].invoke({"query": "favourite colour teal", "limit": 1})
    assert found.startswith(f"[{fact_id}] Sara's favourite colour is teal.")
    [hit] = store.search("favourite colour teal", scope=scope, k=1)
    assert hit.sources[0].speaker == "Amadeus"
    assert hit.fact.id.startswith(fact_id) and len(fact_id) == 8  # the short id, taken back
    cited = found.split("(sources: ")[1].rstrip(")")  # the tool's generated message id: short
    assert "membrain:tool:" not in found and len(cited) == 8
    assert [m.id for m in store.messages(scope=scope, ids=[cited])] == [hit.sources[0].id]


def test_update_supersedes_and_keeps_the_old_fact(
    store: Memory, scope: Scope, tools: dict[str, BaseTool]
) -> None:
    created = tools["manage_memory"].invoke({"content": "Sara's favourite colour is teal."})
    shown = created.removeprefix("created memory ")
    out = tools["manage_memory"].invoke(
        {"action": "update", "id": shown, "content": "Sara's favourite colour is now orange."}
    )
    assert out.endswith(f"it supersedes memory {shown} (kept, no longer returned)")
    (old_id,) = [f.id for f in store.facts(scope=scope, ids=[shown], include_inactive=True)]
    active = {f.id: f for f in store.facts(scope=scope)}
    everything = {f.id: f for f in store.facts(scope=scope, include_inactive=True)}
    assert old_id not in active
    assert everything[old_id].text == "[Sara]'s favourite colour is teal."
    assert everything[old_id].status.value == "superseded"
    (new,) = [f for f in active.values() if "orange" in f.text]
    assert new.supersedes == (old_id,)
    found = tools["search_memory"].invoke({"query": "favourite colour", "limit": 5})
    assert "orange" in found and "teal" not in found


def test_update_needs_a_known_id(tools: dict[str, BaseTool]) -> None:
    manage = tools["manage_memory"]
    assert "Pass the `id`" in manage.invoke({"action": "update", "content": "x is y."})
    assert "No memory with id 'nope'" in manage.invoke(
        {"action": "update", "id": "nope", "content": "Sara likes tea."}
    )


def test_delete_forgets_with_a_tombstone(
    store: Memory, scope: Scope, tools: dict[str, BaseTool]
) -> None:
    before = store.facts(scope=scope)
    target = before[0]
    message = tools["manage_memory"].invoke(
        {
            "type": "tool_call",
            "id": "call2",
            "name": "manage_memory",
            "args": {"action": "delete", "id": target.id},
        }
    )
    assert isinstance(message, ToolMessage)
    assert message.status == "success" and message.content == f"forgot memory {target.id[:8]}"
    assert target.id not in {f.id for f in store.facts(scope=scope)}
    tombstone = {f.id: f for f in store.facts(scope=scope, include_inactive=True)}[target.id]
    assert tombstone.status.value == "forgotten" and tombstone.text == target.text
    hits = store.search(target.text, scope=scope, mode="deep", k=50)
    assert target.id not in {h.fact.id for h in hits}
    unknown = tools["manage_memory"].invoke(
        {
            "type": "tool_call",
            "id": "c3",
            "name": "manage_memory",
            "args": {"action": "delete", "id": "nope"},
        }
    )
    assert unknown.status == "error" and "No memory with id 'nope'" in unknown.content


def test_create_rejects_bad_arguments(
    store: Memory, scope: Scope, tools: dict[str, BaseTool]
) -> None:
    manage = tools["manage_memory"]
    before = store.messages(scope=scope)
    assert "Do not pass an id" in manage.invoke({"content": "Sara likes tea.", "id": "x"})
    assert "Pass the memory to store" in manage.invoke({"content": "   "})
    assert store.messages(scope=scope) == before


def test_content_without_facts_is_reported(tools: dict[str, BaseTool]) -> None:
    out = tools["manage_memory"].invoke({"content": "Thanks, great!"})
    assert "no fact could be extracted" in out


async def test_async_tools(store: Memory, scope: Scope, tools: dict[str, BaseTool]) -> None:
    created = await tools["manage_memory"].ainvoke({"content": "Sara plays the cello on Fridays."})
    fact_id = created.removeprefix("created memory ")
    found = await tools["search_memory"].ainvoke({"query": "cello Fridays", "limit": 1})
    assert found.startswith(f"[{fact_id}] Sara plays the cello on Fridays.")


def test_memory_is_keyword_only_and_the_default_speaker_is_shared(
    store: Memory, scope: Scope
) -> None:
    with pytest.raises(TypeError):
        create_memory_tools(store, scope)  # type: ignore[misc]
    with pytest.raises(ConfigurationError, match="unknown retrieval mode"):
        create_memory_tools(memory=store, scope=scope, mode="psychic")
    [_, manage] = create_memory_tools(memory=store, scope=scope)
    manage.invoke({"content": "Sara's favourite colour is teal."})
    [note] = [m for m in store.messages(scope=scope) if m.message.text.endswith("teal.")]
    assert note.message.speaker == DEFAULT_ASSISTANT_NAME == "Assistant"


def test_a_namespace_template_resolves_the_scope_per_call(store: Memory) -> None:
    search, manage = create_memory_tools(memory=store, namespace=("memories", "{user_id}"))
    assert set(search.args) == {"query", "limit"}  # the run's config is no argument
    for user, pet in (("auth0|ana", "Miso"), ("bo", "Rex")):
        config = {"configurable": {"user_id": user}}
        created = manage.invoke(
            {"content": f"The user adopted a cat named {pet}.", "action": "create"}, config
        )
        assert created.startswith("created")
    ana = search.invoke({"query": "cat", "limit": 5}, {"configurable": {"user_id": "auth0|ana"}})
    bo = search.invoke({"query": "cat", "limit": 5}, {"configurable": {"user_id": "bo"}})
    assert "Miso" in ana and "Rex" not in ana
    assert "Rex" in bo and "Miso" not in bo
    users = {s.dataset for s in store.scopes() if s.task == "memories"}
    assert users == {scope_part("auth0|ana"), "bo"}  # encoded as the other adapters encode it
    missing = search.invoke({"query": "cat"}, {"configurable": {}})  # handled: the model sees it
    assert "user_id" in missing


def test_scope_or_namespace_not_both(store: Memory) -> None:
    with pytest.raises(ScopeError):
        create_memory_tools(memory=store)
    with pytest.raises(ScopeError):
        create_memory_tools(
            memory=store, scope=Scope(dataset="a"), namespace=("memories", "{user_id}")
        )
