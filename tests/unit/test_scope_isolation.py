"""Facts added under one scope are never returned under another, for every public read."""

from __future__ import annotations

from membrain import Memory, Scope

ALICE = [
    {
        "speaker": "Alice",
        "text": "I keep a parrot named Kiwi.",
        "timestamp": "2024-01-01T10:00:00Z",
    },
    {
        "speaker": "Alice",
        "text": "I work at the Lighthouse Museum.",
        "timestamp": "2024-01-01T10:01:00Z",
    },
]
BOB = [
    {"speaker": "Bob", "text": "I keep a parrot named Mango.", "timestamp": "2024-01-01T10:00:00Z"},
]


def _everything(mem: Memory, scope: Scope, *, entities: bool = True) -> str:
    parts = [h.fact.text for h in mem.search("parrot named", scope=scope, k=50)]
    parts += [h.message.text for h in mem.search_messages("parrot", scope=scope, k=50)]
    parts += [f.text for f in mem.facts(scope=scope, include_inactive=True)]
    parts += [m.message.text for m in mem.messages(scope=scope)]
    if entities:
        parts += [e.name for e in mem.entities(scope=scope)]
    return " | ".join(parts)


def test_no_public_read_crosses_scopes(memory: Memory) -> None:
    alice = Scope(dataset="alice", task="pets")
    bob = Scope(dataset="bob", task="pets")
    alice_other_task = Scope(dataset="alice", task="work")
    memory.add(ALICE, scope=alice)
    memory.add(BOB, scope=bob)
    seen_by_alice = _everything(memory, alice)
    seen_by_bob = _everything(memory, bob)
    assert "Kiwi" in seen_by_alice and "Mango" not in seen_by_alice
    assert "Mango" in seen_by_bob and "Kiwi" not in seen_by_bob
    assert "Lighthouse" not in seen_by_bob
    assert _everything(memory, alice_other_task) == ""
    assert _everything(memory, Scope(dataset="carol", task="pets")) == ""


def test_sessions_narrow_reads(memory: Memory) -> None:
    s1 = Scope(dataset="alice", task="pets", session="s1")
    s2 = Scope(dataset="alice", task="pets", session="s2")
    memory.add(ALICE[:1], scope=s1)
    memory.add(ALICE[1:], scope=s2)
    only_s1 = _everything(memory, s1, entities=False)
    only_s2 = _everything(memory, s2, entities=False)
    assert "Kiwi" in only_s1 and "Lighthouse" not in only_s1
    assert "Lighthouse" in only_s2 and "Kiwi" not in only_s2
    # Entities belong to the (dataset, task), shared by its sessions.
    assert {e.name for e in memory.entities(scope=s1)} == {
        e.name for e in memory.entities(scope=s2)
    }
    whole = _everything(memory, Scope(dataset="alice", task="pets"))
    assert "Kiwi" in whole and "Lighthouse" in whole


def test_delete_scope_removes_only_that_scope(memory: Memory) -> None:
    alice = Scope(dataset="alice", task="pets")
    bob = Scope(dataset="bob", task="pets")
    memory.add(ALICE, scope=alice)
    memory.add(BOB, scope=bob)
    memory.delete_scope(alice)
    assert _everything(memory, alice) == ""
    assert "Mango" in _everything(memory, bob)
