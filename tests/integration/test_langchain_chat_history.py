"""MembrainChatMessageHistory: round trips, sessions, clear(), RunnableWithMessageHistory."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from integration.served import Served, serving
from langchain_membrain import MembrainChatMessageHistory, transcript_marker_scope
from membrain import Memory, MemoryLike, MessageStatus, Role, Scope, ScopeError
from membrain.binding import DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME
from membrain.server import Access
from membrain.testing import HashingEncoder

_counter = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path: Path = tmp_path_factory.mktemp("history") / "store"
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        yield mem


@pytest.fixture
def scope() -> Scope:
    """A fresh (dataset, task, session) per test: tests share one store."""
    return Scope(dataset=f"user{next(_counter)}", task="assistant", session="thread-1")


def test_round_trip_human_and_ai(store: Memory, scope: Scope) -> None:
    history = MembrainChatMessageHistory(
        memory=store, scope=scope, user_name="Sara", assistant_name="Amadeus"
    )
    history.add_messages(
        [
            HumanMessage("I adopted a cat named Miso yesterday.", id="h1"),
            AIMessage("Congratulations! How is Miso settling in?"),
        ]
    )
    got = history.messages
    assert [type(m) for m in got] == [HumanMessage, AIMessage]
    assert [m.content for m in got] == [
        "I adopted a cat named Miso yesterday.",
        "Congratulations! How is Miso settling in?",
    ]
    assert got[0].id == "h1"
    assert got[1].id is None  # no id was given: none is made up
    assert all(m.name is None for m in got)  # the configured speakers are not repeated as names
    stored = store.messages(scope=scope)
    assert [(m.message.speaker, m.message.role) for m in stored] == [
        ("Sara", Role.USER),
        ("Amadeus", Role.ASSISTANT),
    ]
    assert stored[0].message.source_id == "h1"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keys = {"writer": (["*"], Access.WRITE)}
    with serving(tmp_path_factory.mktemp("history-served"), keys) as state:
        yield state


@pytest.fixture(params=["embedded", "served"])
def surface(request: pytest.FixtureRequest, store: Memory) -> Iterator[MemoryLike]:
    if request.param == "embedded":
        yield store
        return
    served: Served = request.getfixturevalue("served")
    with served.remote("writer") as remote:
        yield remote


ADDED: list[BaseMessage] = [
    SystemMessage("You are a helpful assistant."),
    HumanMessage("I adopted a cat named Miso yesterday."),
    AIMessage("Congratulations! How is Miso settling in?"),
    HumanMessage("She hides under the sofa.", id="msg-7"),
    HumanMessage("Hi, I am Nate, Sara's brother.", name="Nate"),
    SystemMessage("Keep answers short.", name="policy"),
]


def test_messages_read_back_equal_what_was_added(surface: MemoryLike, scope: Scope) -> None:
    history = MembrainChatMessageHistory(memory=surface, scope=scope)
    for message in ADDED:  # one message per call, as RunnableWithMessageHistory adds them
        history.add_message(message)
    assert history.messages == ADDED
    again = MembrainChatMessageHistory(memory=surface, scope=scope)
    assert again.messages == ADDED
    assert [m.id for m in again.messages] == [None, None, None, "msg-7", None, None]


async def test_messages_read_back_equal_what_was_added_async(
    surface: MemoryLike, scope: Scope
) -> None:
    history = MembrainChatMessageHistory(memory=surface, scope=scope)
    await history.aadd_messages(ADDED[:3])
    assert await history.aget_messages() == ADDED[:3]
    await history.aclear()
    assert await history.aget_messages() == []


def test_messages_are_extracted_synchronously_by_default(store: Memory, scope: Scope) -> None:
    history = MembrainChatMessageHistory(memory=store, scope=scope, user_name="Sara")
    history.add_user_message("I adopted a cat named Miso yesterday.")
    assert {m.status for m in store.messages(scope=scope)} == {MessageStatus.PROCESSED}
    said_at = store.messages(scope=scope)[0].message.timestamp
    day_before = (said_at - timedelta(days=1)).date().isoformat()
    facts = store.facts(scope=scope)
    assert [f.text for f in facts] == [
        f"[Sara] adopted a cat named [Miso] [yesterday::{day_before}]."
    ]
    hits = store.search("Miso", scope=scope, k=1)
    assert hits[0].sources[0].text == "I adopted a cat named Miso yesterday."


def test_timestamps_strictly_increase_within_one_call(store: Memory, scope: Scope) -> None:
    history = MembrainChatMessageHistory(memory=store, scope=scope)
    texts = [f"Message number {i} about topic {i}." for i in range(8)]
    history.add_messages(
        [HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(texts)]
    )
    stamps = [m.message.timestamp for m in store.messages(scope=scope)]
    assert all(a < b for a, b in itertools.pairwise(stamps))
    assert [m.content for m in history.messages] == texts


def test_names_system_and_tool_messages(store: Memory, scope: Scope) -> None:
    history = MembrainChatMessageHistory(memory=store, scope=scope, user_name="Sara")
    history.add_messages(
        [
            SystemMessage("The user is planning a trip."),
            HumanMessage("Hi, I am Nate, Sara's brother.", name="Nate"),
            AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "call1"}]),
            ToolMessage("no results", tool_call_id="call1"),
            ChatMessage(content="Note: the trip is in May.", role="narrator"),
        ]
    )
    got = history.messages
    assert [type(m) for m in got] == [SystemMessage, HumanMessage, ChatMessage]
    assert got[1].name == "Nate"
    assert isinstance(got[2], ChatMessage) and got[2].role == "narrator"
    speakers = [(m.message.speaker, m.message.role) for m in store.messages(scope=scope)]
    assert speakers == [("system", Role.SYSTEM), ("Nate", Role.USER), ("narrator", Role.OTHER)]


def test_persistence_across_history_objects(store: Memory, scope: Scope) -> None:
    first = MembrainChatMessageHistory(memory=store, scope=scope)
    first.add_user_message("My sister Ana moved to Lisbon last month.")
    first.add_ai_message("Lisbon is lovely in spring.")
    second = MembrainChatMessageHistory(
        memory=store, dataset=scope.dataset, task=scope.task, session=scope.session
    )
    assert second.messages == first.messages
    assert [m.content for m in second.messages] == [
        "My sister Ana moved to Lisbon last month.",
        "Lisbon is lovely in spring.",
    ]
    second.add_user_message("She works at a bookshop there.")
    assert [m.content for m in first.messages][-1] == "She works at a bookshop there."


def test_sessions_are_isolated(store: Memory, scope: Scope) -> None:
    one = MembrainChatMessageHistory(memory=store, scope=scope)
    two = MembrainChatMessageHistory(
        memory=store, scope=scope.model_copy(update={"session": "thread-2"})
    )
    one.add_user_message("I play the cello in a jazz band.")
    two.add_user_message("I collect vintage maps.")
    assert [m.content for m in one.messages] == ["I play the cello in a jazz band."]
    assert [m.content for m in two.messages] == ["I collect vintage maps."]


def test_clear_ends_the_transcript_and_forgets_its_facts(store: Memory, scope: Scope) -> None:
    history = MembrainChatMessageHistory(memory=store, scope=scope, user_name="Sara")
    history.add_user_message("I run a bakery in Porto with my brother.")
    facts_before = store.facts(scope=scope)
    assert facts_before
    stored_before = store.messages(scope=scope)

    history.clear()

    assert history.messages == []
    assert (
        MembrainChatMessageHistory(memory=store, scope=scope).messages == []
    )  # persisted for the session
    assert store.facts(scope=scope) == []  # what the cleared messages taught is forgotten
    kept = {f.id: f for f in store.facts(scope=scope, include_inactive=True)}
    assert {f.id for f in facts_before} <= set(kept)
    assert {kept[f.id].status.value for f in facts_before} == {"forgotten"}
    events = store.audit(scope=scope, actions=["forgotten"])
    assert [(str(e.actor), e.reason) for e in events] == [
        ("api:chat-history", "chat history cleared")
    ]
    assert store.messages(scope=scope) == stored_before  # the evidence stays, unmarked
    assert all("bakery" not in h.text for h in store.search("bakery", scope=scope, k=3))

    history.add_user_message("I adopted a cat named Miso.")
    assert [m.content for m in history.messages] == ["I adopted a cat named Miso."]
    # The marker is bookkeeping: never extracted, not in the chat's (dataset, task).
    store.extract_pending(scope=scope.without_session())
    assert all("cleared" not in f.text for f in store.facts(scope=scope.without_session()))
    markers = store.messages(scope=transcript_marker_scope(scope))
    assert len(markers) == 1 and markers[0].message.role is Role.SYSTEM
    assert store.facts(scope=transcript_marker_scope(scope)) == []


def test_clear_extracts_pending_messages_before_forgetting(store: Memory, scope: Scope) -> None:
    scheduled: list[Scope] = []
    history = MembrainChatMessageHistory(
        memory=store, scope=scope, on_added=scheduled.append, extract_in_background=True
    )
    history.add_user_message("I adopted a cat named Miso.")
    assert {m.status for m in store.messages(scope=scope)} == {MessageStatus.PENDING}
    history.clear()
    store.extract_pending(scope=scope)  # a background writer running after the clear
    assert not any("Miso" in f.text for f in store.facts(scope=scope))


def test_delete_scope_deletes_the_clear_markers(store: Memory, scope: Scope) -> None:
    history = MembrainChatMessageHistory(memory=store, scope=scope)
    history.add_user_message("I play the cello in a jazz band.")
    history.clear()
    assert store.messages(scope=transcript_marker_scope(scope))
    store.delete_scope(scope)
    assert store.messages(scope=transcript_marker_scope(scope)) == []
    assert store.messages(scope=scope) == []


def test_clear_in_one_session_leaves_others(store: Memory, scope: Scope) -> None:
    one = MembrainChatMessageHistory(memory=store, scope=scope)
    two = MembrainChatMessageHistory(
        memory=store, scope=scope.model_copy(update={"session": "thread-2"})
    )
    one.add_user_message("I play the cello in a jazz band.")
    two.add_user_message("I collect vintage maps.")
    one.clear()
    assert one.messages == []
    assert [m.content for m in two.messages] == ["I collect vintage maps."]


def test_on_added_takes_over_extraction(store: Memory, scope: Scope) -> None:
    scheduled: list[Scope] = []
    history = MembrainChatMessageHistory(memory=store, scope=scope, on_added=scheduled.append)
    history.add_messages([HumanMessage("I adopted a cat named Miso."), AIMessage("Cute name!")])
    assert scheduled == [scope]
    assert {m.status for m in store.messages(scope=scope)} == {MessageStatus.PENDING}
    assert store.facts(scope=scope) == []
    store.extract_pending(scope=scheduled[0])  # what the background writer does
    assert store.facts(scope=scope)


def test_on_added_is_notified_after_sync_extraction(store: Memory, scope: Scope) -> None:
    statuses: list[set[MessageStatus]] = []

    def notified(added: Scope) -> None:
        statuses.append({m.status for m in store.messages(scope=added)})

    history = MembrainChatMessageHistory(
        memory=store, scope=scope, extract_in_background=False, on_added=notified
    )
    history.add_user_message("I adopted a cat named Miso.")
    assert statuses == [{MessageStatus.PROCESSED}]


def test_nothing_to_store_calls_nothing(store: Memory, scope: Scope) -> None:
    scheduled: list[Scope] = []
    history = MembrainChatMessageHistory(memory=store, scope=scope, on_added=scheduled.append)
    history.add_messages([ToolMessage("42", tool_call_id="c1")])
    assert scheduled == []
    assert store.messages(scope=scope) == []


def test_a_session_is_required(store: Memory) -> None:
    with pytest.raises(ScopeError, match="session"):
        MembrainChatMessageHistory(memory=store, scope=Scope(dataset="sara", task="assistant"))
    with pytest.raises(ScopeError, match="needs a scope"):
        MembrainChatMessageHistory(memory=store)
    with pytest.raises(ScopeError, match="not both"):
        MembrainChatMessageHistory(
            memory=store, scope=Scope(dataset="a", task="b", session="c"), dataset="a"
        )


def test_memory_is_keyword_only(store: Memory, scope: Scope) -> None:
    with pytest.raises(TypeError):
        MembrainChatMessageHistory(store, scope)  # type: ignore[misc]


def test_default_speakers_are_the_shared_ones(store: Memory, scope: Scope) -> None:
    history = MembrainChatMessageHistory(memory=store, scope=scope)
    history.add_messages([HumanMessage("I play the cello."), AIMessage("How lovely!")])
    stored = store.messages(scope=scope)
    assert [m.message.speaker for m in stored] == [DEFAULT_USER_NAME, DEFAULT_ASSISTANT_NAME]
    assert [m.message.speaker for m in stored] == ["User", "Assistant"]
    assert [m.name for m in history.messages] == [None, None]


def test_old_lowercase_speakers_read_back_without_a_name(store: Memory, scope: Scope) -> None:
    said = [
        ("user", "I moved to Porto.", "user"),
        ("assistant", "Porto is lovely.", "assistant"),
        ("Nate", "Sara moved last spring.", "user"),
    ]
    store.add(
        [
            {"speaker": who, "text": text, "role": role, "timestamp": f"2024-03-15T14:0{i}:00Z"}
            for i, (who, text, role) in enumerate(said)
        ],
        scope=scope,
        extract=False,
    )
    history = MembrainChatMessageHistory(memory=store, scope=scope)
    assert [m.name for m in history.messages] == [None, None, "Nate"]


def _chain(
    store: Memory, dataset: str, replies: list[str]
) -> tuple[RunnableWithMessageHistory, list[list[BaseMessage]]]:
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are a helpful assistant."),
            MessagesPlaceholder("history"),
            ("human", "{input}"),
        ]
    )
    seen: list[list[BaseMessage]] = []

    def record(value: PromptValue) -> PromptValue:
        seen.append(value.to_messages())
        return value

    model = GenericFakeChatModel(messages=iter(replies))
    chain: Any = prompt | RunnableLambda(record) | model

    def get_history(session_id: str) -> BaseChatMessageHistory:
        return MembrainChatMessageHistory(
            memory=store,
            scope=Scope(dataset=dataset, task="assistant", session=session_id),
            user_name="Sara",
        )

    runnable = RunnableWithMessageHistory(
        chain,
        get_history,
        input_messages_key="input",
        history_messages_key="history",
    )
    return runnable, seen


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history(store: Memory, scope: Scope) -> None:
    runnable, seen = _chain(store, scope.dataset, ["Nice to meet you, Sara!", "Your cat is Miso."])
    config: Any = {"configurable": {"session_id": "chat-1"}}
    first = runnable.invoke({"input": "I adopted a cat named Miso yesterday."}, config=config)
    assert first.content == "Nice to meet you, Sara!"
    second = runnable.invoke({"input": "What is my cat called?"}, config=config)
    assert second.content == "Your cat is Miso."

    # The second model call saw the first turn, read back from MemBrain.
    assert [m.content for m in seen[1][1:3]] == [
        "I adopted a cat named Miso yesterday.",
        "Nice to meet you, Sara!",
    ]
    chat = Scope(dataset=scope.dataset, task="assistant", session="chat-1")
    history = MembrainChatMessageHistory(memory=store, scope=chat)
    assert [(type(m), m.content) for m in history.messages] == [
        (HumanMessage, "I adopted a cat named Miso yesterday."),
        (AIMessage, "Nice to meet you, Sara!"),
        (HumanMessage, "What is my cat called?"),
        (AIMessage, "Your cat is Miso."),
    ]
    # And the conversation became memory.
    hits = store.search("What is Sara's cat called?", scope=chat.without_session(), k=3)
    assert any("Miso" in h.text and h.sources[0].speaker == "Sara" for h in hits)


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
async def test_runnable_with_message_history_async(store: Memory, scope: Scope) -> None:
    runnable, seen = _chain(store, scope.dataset, ["Hello!", "Porto."])
    config: Any = {"configurable": {"session_id": "chat-async"}}
    await runnable.ainvoke({"input": "I run a bakery in Porto."}, config=config)
    reply = await runnable.ainvoke({"input": "Where is my bakery?"}, config=config)
    assert reply.content == "Porto."
    assert [m.content for m in seen[1][1:3]] == ["I run a bakery in Porto.", "Hello!"]
    chat = Scope(dataset=scope.dataset, task="assistant", session="chat-async")
    assert len(await MembrainChatMessageHistory(memory=store, scope=chat).aget_messages()) == 4


def test_ai_name_is_still_accepted_for_assistant_name(store: Memory) -> None:
    scope = Scope(dataset="renamed", task="chat", session="s")
    with pytest.warns(DeprecationWarning, match="assistant_name"):
        history = MembrainChatMessageHistory(memory=store, scope=scope, ai_name="Amadeus")
    assert history.assistant_name == "Amadeus"
