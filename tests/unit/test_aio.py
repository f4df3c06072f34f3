from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from membrain import (
    ConfigurationError,
    InputError,
    MembrainSettings,
    Memory,
    MessageStatus,
    Scope,
    ScopeError,
)
from membrain.aio import AsyncMemory
from membrain.testing import HashingEncoder

CHAT = [
    {"speaker": "Sara", "text": "Hey Nate!", "timestamp": "2024-03-15T14:00:00Z", "id": "m0"},
    {
        "speaker": "Sara",
        "text": "I adopted a grey cat named Miso.",
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
        "text": "My sister Lina lives in Lisbon.",
        "timestamp": "2024-03-15T14:03:00Z",
        "source_id": "m3",
    },
]


@pytest.fixture
def amem(memory: Memory) -> AsyncMemory:
    return AsyncMemory.from_memory(memory)  # the `memory` fixture closes the store


def test_every_public_method_of_memory_is_mirrored_as_a_coroutine() -> None:
    public = {
        name
        for name, member in inspect.getmembers(Memory)
        if not name.startswith("_") and inspect.isfunction(member)
    }
    assert public >= {"add", "search", "context", "close", "delete_scope"}
    for name in public:
        mirrored = getattr(AsyncMemory, name)
        assert inspect.iscoroutinefunction(mirrored), name
        sync_params = list(inspect.signature(getattr(Memory, name)).parameters.values())
        async_params = list(inspect.signature(mirrored).parameters.values())
        assert [(p.name, p.kind, p.default) for p in async_params] == [
            (p.name, p.kind, p.default) for p in sync_params
        ], name
    init = inspect.signature(AsyncMemory.__init__).parameters
    assert list(init) == list(inspect.signature(Memory.__init__).parameters)


@pytest.mark.asyncio
async def test_add_search_and_context(amem: AsyncMemory, scope: Scope) -> None:
    progress: list[int] = []
    result = await amem.add(CHAT, scope=scope, on_progress=progress.append)
    assert result.messages_stored == 4
    assert len(result.fact_ids) == 3
    assert sum(progress) == 4

    hits = await amem.search("Where does Lina live?", scope=scope, k=2, mode="fast")
    assert "Lisbon" in hits[0].fact.text
    assert hits[0].source_ids == ("m3",)
    same = amem.memory.search("Where does Lina live?", scope=scope, k=2, mode="fast")
    assert [h.fact.id for h in hits] == [h.fact.id for h in same]

    context = await amem.context("Where does Lina live?", scope=scope, max_tokens=200)
    assert "Lisbon" in context.text
    assert 0 < context.tokens <= 200


@pytest.mark.asyncio
async def test_store_then_extract_pending(amem: AsyncMemory, scope: Scope) -> None:
    stored = await amem.add(CHAT, scope=scope, extract=False)
    assert stored.messages_stored == 4 and stored.fact_ids == ()
    assert {m.status for m in await amem.messages(scope=scope)} == {MessageStatus.PENDING}
    done = await amem.extract_pending(scope=scope)
    assert len(done.fact_ids) == 3
    messages = await amem.messages(scope=scope)
    assert [m.message.text for m in messages][0] == "Hey Nate!"
    assert {m.status for m in messages} == {MessageStatus.PROCESSED}


@pytest.mark.asyncio
async def test_listing_evidence_search_optimize_and_delete(amem: AsyncMemory, scope: Scope) -> None:
    await amem.add(CHAT, scope=scope)
    facts = await amem.facts(scope=scope, include_inactive=True)
    assert len(facts) == 3
    names = {e.name for e in await amem.entities(scope=scope)}
    assert {"Sara", "Nate", "Miso", "Lina"} <= names

    found = await amem.search_messages("croissants bakery", scope=scope, k=1, paths=["sparse"])
    assert found[0].message.source_id == "m2"

    await amem.optimize()
    assert (await amem.search("grey cat", scope=scope, k=1))[0].fact.text.count("Miso") == 1

    await amem.delete_scope(scope)
    assert await amem.facts(scope=scope) == []
    assert await amem.messages(scope=scope) == []


@pytest.mark.asyncio
async def test_errors_propagate_unchanged(amem: AsyncMemory, scope: Scope) -> None:
    with pytest.raises(InputError):
        await amem.search("   ", scope=scope)
    with pytest.raises(ScopeError):
        await amem.facts(scope=None)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_async_context_manager_closes_the_store(tmp_path: Path, scope: Scope) -> None:
    async with AsyncMemory(tmp_path / "store", dense=HashingEncoder(dim=64)) as mem:
        await mem.add(CHAT[:2], scope=scope)
        assert len(await mem.facts(scope=scope)) == 1
    # The path is released: a new owner can open it and sees what was written.
    mem2 = AsyncMemory.from_memory(Memory(tmp_path / "store", dense=HashingEncoder(dim=64)))
    try:
        assert [f.text for f in await mem2.facts(scope=scope)] == [
            "[Sara] adopted a grey cat named [Miso]."
        ]
    finally:
        await mem2.close()


async def test_an_open_memory_is_wrapped_and_shared(memory: Memory, scope: Scope) -> None:
    amem = AsyncMemory(memory)
    assert amem.memory is memory
    assert AsyncMemory(path=memory).memory is memory
    await amem.add(CHAT[:2], scope=scope)
    assert [f.text for f in memory.facts(scope=scope)] == [
        "[Sara] adopted a grey cat named [Miso]."
    ]
    with pytest.raises(ConfigurationError, match="takes no other argument"):
        AsyncMemory(memory, dense=HashingEncoder(dim=64))


async def test_closing_the_wrapper_closes_the_shared_store_once(
    tmp_path: Path, scope: Scope
) -> None:
    with Memory(tmp_path / "store", dense=HashingEncoder(dim=64)) as mem:
        async with AsyncMemory(mem) as amem:
            await amem.add(CHAT[:2], scope=scope)
    # Both closed it; the second close is harmless and the path is free for a new owner.
    with Memory(tmp_path / "store", dense=HashingEncoder(dim=64)) as again:
        assert len(again.facts(scope=scope)) == 1


@pytest.mark.asyncio
async def test_from_settings(tmp_path: Path, scope: Scope) -> None:
    mem = AsyncMemory.from_settings(MembrainSettings(path=tmp_path / "store"))
    try:
        assert isinstance(mem.memory, Memory)
        assert await mem.facts(scope=scope) == []
    finally:
        await mem.aclose()
    assert (tmp_path / "store").is_dir()


@pytest.mark.asyncio
async def test_calls_run_off_the_event_loop_thread(amem: AsyncMemory, scope: Scope) -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []
    await amem.add(CHAT, scope=scope, on_progress=lambda _: seen.append(threading.get_ident()))
    assert seen and loop_thread not in seen


@pytest.mark.asyncio
async def test_concurrent_searches_and_adds_on_different_scopes(amem: AsyncMemory) -> None:
    base = Scope(dataset="sara", task="assistant")
    await amem.add(CHAT, scope=base)
    people = [f"Person{i}" for i in range(20)]
    scopes = [Scope(dataset=f"user{i}", task="assistant") for i in range(20)]

    async def write(i: int) -> int:
        message = {
            "speaker": people[i],
            "text": f"I adopted a dog named Rex{i}.",
            "timestamp": "2024-03-15T14:01:00Z",
            "source_id": f"w{i}",
        }
        return len((await amem.add([message], scope=scopes[i])).fact_ids)

    async def read(_: int) -> str:
        hits = await amem.search("Where does Lina live?", scope=base, k=1)
        return hits[0].fact.text

    results = await asyncio.gather(*(write(i) for i in range(20)), *(read(i) for i in range(20)))
    assert results[:20] == [1] * 20
    assert all("Lisbon" in text for text in results[20:])
    for i, scope in enumerate(scopes):  # every write landed in its own scope, and only there
        facts = await amem.facts(scope=scope)
        assert [f.text for f in facts] == [f"[{people[i]}] adopted a dog named [Rex{i}]."]
        assert [m.message.source_id for m in await amem.messages(scope=scope)] == [f"w{i}"]
    assert len(await amem.facts(scope=base)) == 3


@pytest.mark.asyncio
async def test_an_iterator_argument_is_read_on_the_loop(amem: AsyncMemory, scope: Scope) -> None:
    result = await amem.add(CHAT, scope=scope)
    read_on: list[int] = []

    def ids() -> Iterator[str]:
        read_on.append(threading.get_ident())
        yield from result.fact_ids

    found = await amem.facts(scope=scope, ids=ids())
    assert {f.id for f in found} == set(result.fact_ids)
    assert read_on == [threading.get_ident()]  # before the call left for a worker thread
    assert (await amem.scopes()) == [scope.without_session()]
