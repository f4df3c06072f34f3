"""Derived indexes are reconciled with the record store by content version, not by counting.

A write can reach Qdrant and not the lexical index (a kill between the two), and a ``Memory``
sharing a backend with another hears only its own writes: the boolean path must still serve the
store's current state.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from membrain import Memory, Scope
from membrain.api.models import FactStatus
from membrain.backends.client import QdrantClientBackend
from membrain.backends.lexical import LexicalIndex
from membrain.retrieval.tree import EntityTree
from membrain.testing import HashingEncoder

SCOPE = Scope(dataset="sara", task="assistant")
REX = "I adopted a golden retriever named Rex."
NURSE = "I work as a nurse at the Lisbon hospital."


def _say(mem: Memory, text: str, minute: int) -> None:
    mem.add(
        [{"speaker": "Sara", "text": text, "timestamp": f"2024-03-15T10:{minute:02d}:00Z"}],
        scope=SCOPE,
    )


def _fact_id(mem: Memory, word: str) -> str:
    return next(f.id for f in mem.facts(scope=SCOPE) if word in f.text)


def _lexical(mem: Memory, query: str) -> list[str]:
    """Ids the boolean path finds for ``query`` (after reconciling, as a deep search does)."""
    index: LexicalIndex = mem._lexical
    mem._searcher._extra["boolean"].sync(SCOPE)  # type: ignore[attr-defined]
    return [i for i, _ in index.search(SCOPE, query, limit=10)]


class _Killed(BaseException):
    """Stands for the process dying: nothing after it runs."""


def _die_in(
    monkeypatch: pytest.MonkeyPatch,
    listener: type,
    event: str,
    mem: Memory,
    write: Callable[[], object],
) -> None:
    """Run ``write`` with ``listener.event`` dying, then close ``mem`` (as a restart would)."""

    def killed(self: object, scope: Scope, records: object) -> None:
        raise _Killed

    monkeypatch.setattr(listener, event, killed)
    with pytest.raises(_Killed):
        write()
    monkeypatch.undo()
    mem.close()


def test_forget_interrupted_before_the_lexical_write_is_repaired_on_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = Memory(tmp_path, dense=HashingEncoder(64))
    _say(mem, REX, 0)
    _say(mem, NURSE, 1)
    rex = _fact_id(mem, "Rex")
    assert rex in _lexical(mem, "retriever")

    _die_in(monkeypatch, LexicalIndex, "facts_written", mem, lambda: mem.forget([rex], scope=SCOPE))

    with Memory(tmp_path, dense=HashingEncoder(64)) as reopened:
        stored = reopened.facts(scope=SCOPE, include_inactive=True)
        assert next(f for f in stored if f.id == rex).status is FactStatus.FORGOTTEN
        # The index itself is repaired (not only filtered at read time) ...
        assert rex not in _lexical(reopened, "retriever")
        assert _fact_id(reopened, "nurse") in _lexical(reopened, "nurse")
        # ... and no read serves the forgotten fact.
        for mode in ("fast", "expand", "deep"):
            hits = reopened.search("golden retriever Rex", scope=SCOPE, mode=mode)
            assert rex not in [h.fact.id for h in hits]
        assert "Rex" not in reopened.context("golden retriever Rex", scope=SCOPE, mode="deep").text


def test_add_interrupted_before_the_lexical_write_is_indexed_on_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = Memory(tmp_path, dense=HashingEncoder(64))
    _say(mem, NURSE, 0)
    assert _lexical(mem, "nurse")

    _die_in(monkeypatch, LexicalIndex, "facts_written", mem, lambda: _say(mem, REX, 1))

    with Memory(tmp_path, dense=HashingEncoder(64)) as reopened:
        reopened.extract_pending(scope=SCOPE)
        rex = _fact_id(reopened, "Rex")
        assert _lexical(reopened, "retriever") == [rex]
        hits = reopened.search("golden retriever", scope=SCOPE, mode="deep")
        assert "boolean" in next(h.paths for h in hits if h.fact.id == rex)


def test_two_memories_on_one_backend_see_each_others_writes_on_path_d() -> None:
    backend = QdrantClientBackend(QdrantClient(location=":memory:"))
    writer = Memory(backend=backend, dense=HashingEncoder(64))
    reader = Memory(backend=backend, dense=HashingEncoder(64))
    try:
        _say(writer, REX, 0)
        rex = _fact_id(writer, "Rex")
        assert _lexical(reader, "retriever") == [rex]  # the reader's index was built

        writer.forget([rex], scope=SCOPE)  # a status change only: the counts still match
        assert _lexical(reader, "retriever") == []
        hits = reader.search("golden retriever Rex", scope=SCOPE, mode="deep")
        assert rex not in [h.fact.id for h in hits]

        _say(writer, NURSE, 1)  # a new fact, written by the other memory
        nurse = _fact_id(writer, "nurse")
        hits = reader.search("nurse at the hospital", scope=SCOPE, mode="deep")
        assert "boolean" in next(h.paths for h in hits if h.fact.id == nurse)
    finally:
        reader.close()
        writer.close()


def test_a_stale_index_entry_is_never_served(tmp_path: Path) -> None:
    """Even before reconciling, a hit is re-checked against the store's status."""
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        _say(mem, REX, 0)
        rex = _fact_id(mem, "Rex")
        forgotten = mem.forget([rex], scope=SCOPE)[0]
        index: LexicalIndex = mem._lexical
        index.add(SCOPE, [forgotten.model_copy(update={"status": FactStatus.ACTIVE})])
        mem._searcher._extra["boolean"].sync = None  # type: ignore[attr-defined]
        assert index.search(SCOPE, "retriever", limit=5)  # the index is stale ...
        hits = mem.search("golden retriever Rex", scope=SCOPE, mode="deep")
        assert rex not in [h.fact.id for h in hits]  # ... and the read is not


def _damage(lexical: Path, how: str) -> None:
    if how == "truncated meta.json":
        meta = lexical / "meta.json"
        meta.write_text(meta.read_text()[:20])
    elif how == "missing .term":
        next(lexical.glob("*.term")).unlink()
    else:
        store = next(lexical.glob("*.store"))
        store.write_bytes(b"\0" * store.stat().st_size)


@pytest.mark.parametrize("how", ["truncated meta.json", "missing .term", "zeroed .store"])
def test_a_damaged_lexical_index_is_rebuilt_with_a_warning(tmp_path: Path, how: str) -> None:
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        _say(mem, REX, 0)
        rex = _fact_id(mem, "Rex")
        assert _lexical(mem, "retriever") == [rex]
    _damage(tmp_path / "lexical", how)

    with pytest.warns(RuntimeWarning, match="lexical index .* is damaged"):
        reopened = Memory(tmp_path, dense=HashingEncoder(64))
    with reopened:
        hits = reopened.search("golden retriever", scope=SCOPE, mode="deep")
        assert "boolean" in next(h.paths for h in hits if h.fact.id == rex)


def _killed_mid_commit(lexical: Path) -> None:
    """The files a process killed inside a tantivy commit of deletions leaves behind.

    tantivy registers each segment's new delete file (``<segment>.<opstamp>.del``) and creates
    it before it writes ``meta.json``: killed between the two, the next commit of the same
    opstamp finds the file there and fails with ``FileAlreadyExists``.
    """
    meta = json.loads((lexical / "meta.json").read_text())
    managed_path = lexical / ".managed.json"
    managed = json.loads(managed_path.read_text())
    for segment in meta["segments"]:
        for opstamp in range(meta["opstamp"] + 1, meta["opstamp"] + 9):
            name = f"{segment['segment_id'].replace('-', '')}.{opstamp}.del"
            (lexical / name).write_bytes(b"")
            managed.append(name)
    managed_path.write_text(json.dumps(managed))


def test_a_deletion_killed_inside_the_lexical_commit_leaves_the_store_openable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tom = Scope(dataset="tom", task="assistant")
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        _say(mem, REX, 0)
        said = {"speaker": "Tom", "text": NURSE, "timestamp": "2024-03-15T11:00:00Z"}
        mem.add([said], scope=tom)
        nurse = next(f.id for f in mem.facts(scope=tom))
        for scope in (SCOPE, tom):
            mem.search("what happened", scope=scope, mode="deep")  # the boolean path indexes both

    mem = Memory(tmp_path, dense=HashingEncoder(64))

    def killed(self: object, scope: Scope) -> None:
        raise _Killed

    monkeypatch.setattr(LexicalIndex, "scope_deleted", killed)
    with pytest.raises(_Killed):
        mem.delete_dataset("sara")  # announced; killed inside the lexical commit
    monkeypatch.undo()
    mem.close()
    _killed_mid_commit(tmp_path / "lexical")

    with pytest.warns(RuntimeWarning, match="lexical index .* is damaged"):
        reopened = Memory(tmp_path, dense=HashingEncoder(64))
    with reopened:
        assert reopened.scopes() == [tom]  # the deletion was finished
        hits = reopened.search("nurse at the hospital", scope=tom, mode="deep")
        assert "boolean" in next(h.paths for h in hits if h.fact.id == nurse)
        assert nurse in _lexical_ids(reopened, tom, "nurse AND hospital")
        reopened.forget([nurse], scope=tom)  # and the index takes writes again
        assert _lexical_ids(reopened, tom, "nurse") == []


def _lexical_ids(mem: Memory, scope: Scope, query: str) -> list[str]:
    mem._searcher._extra["boolean"].sync(scope)  # type: ignore[attr-defined]
    return [i for i, _ in mem._lexical.search(scope, query, limit=10)]


def test_an_entity_the_tree_never_heard_of_is_placed_on_the_next_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = Memory(tmp_path, dense=HashingEncoder(64))
    _say(mem, NURSE, 0)
    mem.search("Where does Sara work?", scope=SCOPE, mode="deep")  # the tree is built

    _die_in(monkeypatch, EntityTree, "entities_written", mem, lambda: _say(mem, REX, 1))

    with Memory(tmp_path, dense=HashingEncoder(64)) as reopened:
        reopened.extract_pending(scope=SCOPE)
        rex = next(e for e in reopened.entities(scope=SCOPE) if e.name == "Rex")
        assert rex.id not in reopened.store.tree_ids(SCOPE)  # the write stopped before the tree
        hits = reopened.search("golden retriever Rex", scope=SCOPE, mode="deep")
        assert rex.id in reopened.store.tree_ids(SCOPE)
        assert "entity_tree" in next(h.paths for h in hits if "Rex" in h.fact.text)


def _sync(mem: Memory) -> int:
    """Reconcile the boolean path's index for SCOPE as a deep search does; facts re-read."""
    return int(mem._searcher._extra["boolean"].sync(SCOPE))  # type: ignore[attr-defined]


def test_writes_the_index_heard_are_not_read_back(tmp_path: Path) -> None:
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        _say(mem, NURSE, 0)
        assert _sync(mem) == 1  # a new index: built from the store
        _say(mem, REX, 1)
        rex = _fact_id(mem, "Rex")
        mem.forget([_fact_id(mem, "nurse")], scope=SCOPE)
        index: LexicalIndex = mem._lexical
        mark = index.mark(SCOPE)
        assert _sync(mem) == 0  # every change since reached it as a listener
        assert index.mark(SCOPE) == mark  # and no commit just to move a recent mark
        assert _lexical(mem, "retriever") == [rex]
        assert _lexical(mem, "nurse") == []


def test_a_failed_index_write_makes_the_next_reconciliation_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        _say(mem, NURSE, 0)
        _sync(mem)

        def broken(*_: object, **__: object) -> int:
            raise RuntimeError("disk full")

        monkeypatch.setattr(LexicalIndex, "_stage", broken)
        with pytest.raises(Exception, match="disk full"):
            _say(mem, REX, 1)
        monkeypatch.undo()
        mem.extract_pending(scope=SCOPE)
        assert _sync(mem) == 2  # rebuilt: nothing it missed is trusted
        assert _lexical(mem, "retriever") == [_fact_id(mem, "Rex")]


def test_a_fact_write_failing_midway_makes_the_next_reconciliation_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        _say(mem, REX, 0)
        _say(mem, NURSE, 1)
        _sync(mem)
        backend = mem.store.backend
        real = type(backend).set_payload
        calls = 0

        def second_fails(self: object, *args: object, **kwargs: object) -> None:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise RuntimeError("engine stopped")
            real(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(type(backend), "set_payload", second_fails)
        ids = [_fact_id(mem, "Rex"), _fact_id(mem, "nurse")]
        with pytest.raises(Exception, match="engine stopped"):
            mem.forget(ids, scope=SCOPE)
        monkeypatch.undo()
        stored = {f.id: f.status for f in mem.facts(scope=SCOPE, include_inactive=True)}
        assert _sync(mem) == len(stored)  # rebuilt from the store, whatever landed
        for word, fact_id in (("retriever", ids[0]), ("nurse", ids[1])):
            found = fact_id in _lexical(mem, word)
            assert found is (stored[fact_id] is FactStatus.ACTIVE), word
