"""Scope isolation at the backend: no read or write ever crosses a (dataset, task).

The same keys and texts are written under several scopes. Ids are derived from the scope
(``Scope.record_id``), as the library does, so each scope has its own points.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from membrain.api.models import Scope
from membrain.backends.base import DENSE, SPARSE, Backend, Collection, ScoredPoint, VectorQuery

from .conftest import DENSE_ENCODER, SPARSE_ENCODER, keys, make_point

FACTS = Collection.FACTS
A = Scope(dataset="a", task="t")
B = Scope(dataset="b", task="t")
C = Scope(dataset="a", task="u")
A_S1 = Scope(dataset="a", task="t", session="s1")
A_S2 = Scope(dataset="a", task="t", session="s2")
WRITTEN = {"A": A, "B": B, "C": C, "A_S1": A_S1}

TEXTS = {
    "cat": "the cat sat on the mat",
    "dog": "dogs bark loudly at night",
    "fish": "the fish swims in the blue sea",
}


def owner_key(owner: str, key: str) -> str:
    # Session is not part of the id (ids are per tenant), so session points get their own keys.
    return f"s1-{key}" if owner == "A_S1" else key


@pytest.fixture
def shared(backend: Backend) -> Backend:
    for owner, scope in WRITTEN.items():
        points = [
            make_point(scope, owner_key(owner, k), t, {"owner": owner, "status": "active"})
            for k, t in TEXTS.items()
        ]
        for collection in (FACTS, Collection.MESSAGES):
            backend.upsert(collection, scope, points)
    return backend


# What each reading scope must see, by the `owner` payload field.
VISIBLE = {
    "A": {"A", "A_S1"},  # no session: every session of (a, t)
    "A_S1": {"A_S1"},
    "A_S2": set(),
    "B": {"B"},
    "C": {"C"},
}
READERS = {"A": A, "A_S1": A_S1, "A_S2": A_S2, "B": B, "C": C}
ALL_IDS = [scope.record_id(owner_key(owner, k)) for owner, scope in WRITTEN.items() for k in TEXTS]


def check(points: list[ScoredPoint], reader: str) -> None:
    scope = READERS[reader]
    owners = {p.payload["owner"] for p in points}
    assert owners <= VISIBLE[reader], f"{reader} saw points of {owners - VISIBLE[reader]}"
    for p in points:
        assert p.payload["tenant"] == scope.key
        if scope.session:
            assert p.payload["session"] == scope.session


def queries() -> dict[str, list[VectorQuery]]:
    text = "the cat and the dog and the fish"
    sparse = VectorQuery(SPARSE, SPARSE_ENCODER.embed_query(text), limit=50)
    dense = VectorQuery(DENSE, DENSE_ENCODER.embed_query(text), limit=50)
    return {"dense": [dense], "sparse": [sparse], "fused": [sparse, dense]}


def test_every_read_stays_in_its_scope(shared: Backend) -> None:
    for reader in READERS:
        check_reads(shared, reader)


def check_reads(shared: Backend, reader: str) -> None:
    scope = READERS[reader]
    expected = len(VISIBLE[reader]) * len(TEXTS)
    for collection in (FACTS, Collection.MESSAGES):
        found = shared.retrieve(collection, scope, ALL_IDS)
        check(found, reader)
        assert len(found) == expected

        page, offset = shared.scroll(collection, scope, limit=100)
        assert offset is None
        check(page, reader)
        assert len(page) == expected
        paged: list[ScoredPoint] = []
        offset = None
        while True:
            chunk, offset = shared.scroll(collection, scope, limit=2, offset=offset)
            check(chunk, reader)
            paged.extend(chunk)
            if offset is None:
                break
        assert sorted(p.id for p in paged) == sorted(p.id for p in page)

        filtered, _ = shared.scroll(collection, scope, where={"status": "active"}, limit=100)
        check(filtered, reader)
        assert len(filtered) == expected

        assert shared.count(collection, scope) == expected
        assert shared.count(collection, scope, where={"status": "active"}) == expected

        for name, qs in queries().items():
            hits = shared.query(collection, scope, qs, limit=100)
            check(hits, reader)
            assert len(hits) == expected, name
            hits = shared.query(collection, scope, qs, limit=100, where={"status": "active"})
            check(hits, reader)
            assert len(hits) == expected, name


def test_where_cannot_widen_the_scope(shared: Backend) -> None:
    for reader in READERS:
        check_where(shared, reader)


def check_where(shared: Backend, reader: str) -> None:
    scope = READERS[reader]
    for where in (
        {"tenant": "b/t"},
        {"tenant": ["a/t", "b/t", "a/u"]},
        {"session": ["", "s1", "s2"]},
        {"owner": ["A", "B", "C", "A_S1"]},
    ):
        page, _ = shared.scroll(FACTS, scope, where=where, limit=100)
        check(page, reader)
        assert shared.count(FACTS, scope, where=where) == len(page)
        for qs in queries().values():
            check(shared.query(FACTS, scope, qs, limit=100, where=where), reader)
            per_query = [VectorQuery(q.using, q.vector, limit=q.limit, where=where) for q in qs]
            check(shared.query(FACTS, scope, per_query, limit=100), reader)


def test_session_reads(shared: Backend) -> None:
    a_all = shared.scroll(FACTS, A, limit=100)[0]
    assert {p.payload["session"] for p in a_all} == {"", "s1"}
    s1 = shared.scroll(FACTS, A_S1, limit=100)[0]
    assert sorted(keys(s1)) == sorted(f"s1-{k}" for k in TEXTS)
    assert shared.scroll(FACTS, A_S2, limit=100)[0] == []
    # a session scope reads its own ids, not the session-less ones of its tenant
    assert shared.retrieve(FACTS, A_S1, [A.record_id("cat")]) == []
    assert keys(shared.retrieve(FACTS, A, [A.record_id("s1-cat")])) == ["s1-cat"]


WRONG_SCOPE_WRITES: dict[str, Callable[[Backend, Scope, list[str]], Any]] = {
    "delete": lambda b, s, ids: b.delete(FACTS, s, ids),
    "set_payload": lambda b, s, ids: b.set_payload(FACTS, s, ids, {"owner": "hijacked"}),
}


def test_another_scopes_ids_are_out_of_reach(shared: Backend) -> None:
    a_ids = [A.record_id(k) for k in TEXTS]
    s1_ids = [A.record_id(f"s1-{k}") for k in TEXTS]
    for write in WRONG_SCOPE_WRITES.values():
        for wrong in (B, C, A_S1, A_S2):
            assert shared.retrieve(FACTS, wrong, a_ids) == []
            write(shared, wrong, a_ids)
        for wrong in (B, C, A_S2):
            assert shared.retrieve(FACTS, wrong, s1_ids) == []
            write(shared, wrong, s1_ids)
    intact = shared.retrieve(FACTS, A, a_ids + s1_ids)
    assert [p.id for p in intact] == a_ids + s1_ids
    assert {p.payload["owner"] for p in intact} == {"A", "A_S1"}
    for reader in ("A", "B", "C"):
        assert shared.count(FACTS, READERS[reader]) == len(VISIBLE[reader]) * len(TEXTS)


def test_delete_scope_leaves_other_scopes(shared: Backend) -> None:
    shared.delete_scope(A_S1)
    assert shared.count(FACTS, A_S1) == 0
    assert shared.count(Collection.MESSAGES, A_S1) == 0
    assert shared.count(FACTS, A) == len(TEXTS)
    shared.delete_scope(B)
    for collection in (FACTS, Collection.MESSAGES):
        assert shared.count(collection, B) == 0
        assert shared.count(collection, A) == len(TEXTS)
        assert shared.count(collection, C) == len(TEXTS)
        assert {p.payload["owner"] for p in shared.scroll(collection, C)[0]} == {"C"}


def test_one_id_under_two_scopes_is_one_point_owned_by_the_last_writer(backend: Backend) -> None:
    # Qdrant ids are global: writing A's id under B moves the point to B. The library never
    # does this (ids come from Scope.record_id), but even then A must not read B's payload.
    shared_id = A.record_id("cat")
    backend.upsert(FACTS, A, [make_point(A, "cat", TEXTS["cat"], {"owner": "A"})])
    point = make_point(A, "cat", TEXTS["cat"], {"owner": "B"})
    backend.upsert(FACTS, B, [point])
    assert backend.retrieve(FACTS, A, [shared_id]) == []
    assert backend.count(FACTS, A) == 0
    assert backend.query(FACTS, A, queries()["fused"], limit=10) == []
    [moved] = backend.retrieve(FACTS, B, [shared_id])
    assert moved.payload["owner"] == "B"
    assert moved.payload["tenant"] == "b/t"
