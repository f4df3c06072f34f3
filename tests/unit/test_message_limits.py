"""A message's text and caption have a size limit, checked where every message is made."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from membrain import InputError, Memory, Message, Scope
from membrain.api.checks import MAX_MESSAGE_CHARS
from membrain.testing import HashingEncoder

WHEN = "2024-03-15T14:01:00Z"
LONG = "x" * (MAX_MESSAGE_CHARS + 1)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """One memory for the module: every add here is refused, so it stays empty."""
    path = tmp_path_factory.mktemp("message-limits") / "store"
    with Memory(path, dense=HashingEncoder(dim=64)) as memory:
        yield memory


def test_a_message_of_the_longest_text_and_caption_is_accepted() -> None:
    longest = "x" * MAX_MESSAGE_CHARS
    message = Message(speaker="Sara", text=longest, caption=longest, timestamp=WHEN)
    assert len(message.text) == len(message.caption or "") == MAX_MESSAGE_CHARS


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"text": LONG}, "message text"),
        ({"text": "", "caption": LONG}, "message caption"),
        ({"text": "hi", "caption": LONG}, "message caption"),
        ({"text": " " * (MAX_MESSAGE_CHARS + 1)}, "message text"),
    ],
)
def test_a_longer_text_or_caption_is_an_input_error(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(InputError, match=f"{named} has 100,001 characters") as raised:
        Message(speaker="Sara", timestamp=WHEN, **fields)
    assert "100,000" in str(raised.value) and "\n" not in str(raised.value)
    assert "xxxxxxxxxx" not in str(raised.value)  # the text is not quoted back


@pytest.mark.parametrize(
    "messages",
    [
        LONG,
        [{"speaker": "Sara", "text": LONG, "timestamp": WHEN}],
        [{"role": "user", "content": LONG}],
        [{"speaker": "Sara", "text": "hi", "caption": LONG, "timestamp": WHEN}],
        [
            {"speaker": "Sara", "text": "I adopted a cat.", "timestamp": WHEN},
            {"speaker": "Sara", "text": "It is called Miso.", "timestamp": WHEN},
            {"speaker": "Sara", "text": LONG, "timestamp": WHEN},
        ],
    ],
    ids=["a string", "a message", "a chat message", "a caption", "the last of three"],
)
def test_an_embedded_add_refuses_it_whole(shared: Memory, messages: Any) -> None:
    scope = Scope(dataset="sara", task="limits")
    with pytest.raises(InputError, match="100,000"):
        shared.add(messages, scope=scope)
    assert shared.messages(scope=scope) == []


def test_a_message_stored_before_the_limit_is_still_read(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written without the limit keeps every message readable and extractable."""
    path = tmp_path_factory.mktemp("older-store") / "store"
    scope = Scope(dataset="sara", task="assistant")
    older = f"I adopted a cat named Miso. {LONG}"
    with Memory(path, dense=HashingEncoder(dim=64)) as memory:
        monkeypatch.setattr("membrain.api.models.MAX_MESSAGE_CHARS", 10 * MAX_MESSAGE_CHARS)
        memory.add([{"speaker": "Sara", "text": older, "timestamp": WHEN}], scope=scope)
        monkeypatch.undo()
    with Memory(path, dense=HashingEncoder(dim=64)) as memory:
        (stored,) = memory.messages(scope=scope)
        assert stored.message.text == older
        assert any("Miso" in f.text for f in memory.facts(scope=scope))
