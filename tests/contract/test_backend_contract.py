"""The storage backend contract: every backend must pass every test here."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient

from membrain.api.errors import BackendError, ConfigurationError, InputError, ScopeError
from membrain.api.models import Scope
from membrain.backends.base import (
    DENSE,
    SPARSE,
    Backend,
    Collection,
    Missing,
    Point,
    VectorQuery,
)
from membrain.backends.client import QdrantClientBackend
from membrain.backends.edge import EdgeBackend, open_edge_backend

from .conftest import DENSE_ENCODER, DIM, SPARSE_ENCODER, ensure, keys, make_point, open_edge

FACTS = Collection.FACTS
SCOPE = Scope(dataset="contract", task="t")
OTHER = Scope(dataset="contract", task="other")

CORPUS: dict[str, tuple[str, dict[str, Any]]] = {
    "cat": ("the cat sat on the mat", {"status": "active", "entity_ids": ["e-cat", "e-mat"]}),
    "dog": ("dogs bark loudly at night", {"status": "active", "entity_ids": ["e-dog"]}),
    "bird": (
        "a small bird sings in the morning",
        {"status": "superseded", "entity_ids": ["e-bird"]},
    ),
    "fish": (
        "the fish swims in the blue sea",
        {"status": "active", "entity_ids": ["e-fish", "e-sea"]},
    ),
    "lecture": ("quantum physics lecture on tuesday", {"status": "forgotten", "entity_ids": []}),
}


def corpus_points(scope: Scope = SCOPE) -> list[Point]:
    return [make_point(scope, key, text, payload) for key, (text, payload) in CORPUS.items()]


@pytest.fixture
def loaded(backend: Backend) -> Backend:
    backend.upsert(FACTS, SCOPE, corpus_points())
    return backend


def dense(text: str, **kwargs: Any) -> VectorQuery:
    return VectorQuery(DENSE, DENSE_ENCODER.embed_query(text), **kwargs)


def sparse(text: str, **kwargs: Any) -> VectorQuery:
    return VectorQuery(SPARSE, SPARSE_ENCODER.embed_query(text), **kwargs)


def scroll_all(backend: Backend, scope: Scope, limit: int = 256, **kwargs: Any) -> list[Any]:
    points: list[Any] = []
    offset: str | None = None
    for _ in range(1000):
        page, offset = backend.scroll(FACTS, scope, limit=limit, offset=offset, **kwargs)
        points.extend(page)
        if offset is None:
            return points
    raise AssertionError("scroll never ended")


# -- upsert / retrieve -------------------------------------------------------------------------
def test_retrieve_returns_payload_with_scope_fields_in_requested_order(loaded: Backend) -> None:
    ids = [SCOPE.record_id(k) for k in ("lecture", "cat", "missing", "dog")]
    found = loaded.retrieve(FACTS, SCOPE, ids)
    assert keys(found) == ["lecture", "cat", "dog"]
    assert [p.id for p in found] == [ids[0], ids[1], ids[3]]
    text, payload = CORPUS["cat"]
    assert found[1].payload == {
        "key": "cat",
        "text": text,
        **payload,
        "tenant": "contract/t",
        "session": "",
    }


def test_retrieve_of_nothing(loaded: Backend) -> None:
    assert loaded.retrieve(FACTS, SCOPE, []) == []
    assert loaded.retrieve(FACTS, SCOPE, [SCOPE.record_id("missing")]) == []


def test_session_scope_is_stored_on_the_point(backend: Backend) -> None:
    session = Scope(dataset="contract", task="t", session="s1")
    backend.upsert(FACTS, session, [make_point(session, "x", "hello there")])
    [point] = backend.retrieve(FACTS, session, [session.record_id("x")])
    assert point.payload["tenant"] == "contract/t"
    assert point.payload["session"] == "s1"


def test_payload_cannot_spoof_the_scope(backend: Backend) -> None:
    point = make_point(SCOPE, "spoof", "hello", {"tenant": "contract/other", "session": "s9"})
    backend.upsert(FACTS, SCOPE, [point])
    [stored] = backend.retrieve(FACTS, SCOPE, [point.id])
    assert stored.payload["tenant"] == "contract/t"
    assert stored.payload["session"] == ""
    assert backend.count(FACTS, OTHER) == 0


def test_upsert_same_id_replaces_payload_and_vectors(loaded: Backend) -> None:
    replacement = make_point(SCOPE, "cat", "violin concerto in the evening", {"status": "new"})
    loaded.upsert(FACTS, SCOPE, [replacement])
    assert loaded.count(FACTS, SCOPE) == len(CORPUS)
    [point] = loaded.retrieve(FACTS, SCOPE, [replacement.id])
    assert point.payload == {
        "key": "cat",
        "text": "violin concerto in the evening",
        "status": "new",
        "tenant": "contract/t",
        "session": "",
    }  # the old entity_ids field is gone: a replace, not a merge
    assert keys(loaded.query(FACTS, SCOPE, [sparse("violin concerto")], limit=5)) == ["cat"]
    assert keys(loaded.query(FACTS, SCOPE, [sparse("cat mat")], limit=5)) == []


def test_collections_are_separate(loaded: Backend) -> None:
    assert loaded.count(Collection.MESSAGES, SCOPE) == 0
    assert loaded.retrieve(Collection.ENTITIES, SCOPE, [SCOPE.record_id("cat")]) == []
    loaded.upsert(Collection.MESSAGES, SCOPE, [make_point(SCOPE, "cat", "a message")])
    assert loaded.count(FACTS, SCOPE) == len(CORPUS)
    [fact] = loaded.retrieve(FACTS, SCOPE, [SCOPE.record_id("cat")])
    assert fact.payload["text"] == CORPUS["cat"][0]


# -- set_payload -------------------------------------------------------------------------------
def test_set_payload_updates_fields_and_keeps_vectors(loaded: Backend) -> None:
    ids = [SCOPE.record_id("cat"), SCOPE.record_id("dog")]
    loaded.set_payload(FACTS, SCOPE, ids, {"status": "superseded", "extra": 7})
    cat, dog = loaded.retrieve(FACTS, SCOPE, ids)
    assert cat.payload["status"] == dog.payload["status"] == "superseded"
    assert cat.payload["extra"] == 7
    assert cat.payload["entity_ids"] == ["e-cat", "e-mat"]  # untouched fields are kept
    assert cat.payload["tenant"] == "contract/t"
    [fish] = loaded.retrieve(FACTS, SCOPE, [SCOPE.record_id("fish")])
    assert fish.payload["status"] == "active"
    assert "extra" not in fish.payload
    assert loaded.count(FACTS, SCOPE, where={"status": "superseded"}) == 3
    # both vectors survived the payload update
    assert keys(loaded.query(FACTS, SCOPE, [dense(CORPUS["cat"][0])], limit=1)) == ["cat"]
    assert keys(loaded.query(FACTS, SCOPE, [sparse("cat mat")], limit=5)) == ["cat"]


def test_set_payload_refuses_scope_fields(loaded: Backend) -> None:
    cat = SCOPE.record_id("cat")
    for values in ({"tenant": "contract/other"}, {"session": "s1"}):
        with pytest.raises(ScopeError):
            loaded.set_payload(FACTS, SCOPE, [cat], values)
    [point] = loaded.retrieve(FACTS, SCOPE, [cat])
    assert point.payload["tenant"] == "contract/t"
    assert point.payload["session"] == ""


# -- scroll / count ----------------------------------------------------------------------------
def test_scroll_pages_through_everything_exactly_once(backend: Backend) -> None:
    points = [make_point(SCOPE, f"p{i}", f"point number {i}") for i in range(12)]
    backend.upsert(FACTS, SCOPE, points)
    backend.upsert(FACTS, OTHER, [make_point(OTHER, "o", "other scope")])
    pages = []
    offset: str | None = None
    while True:
        page, offset = backend.scroll(FACTS, SCOPE, limit=5, offset=offset)
        pages.append(page)
        if offset is None:
            break
        assert len(pages) < 10
    assert [len(p) for p in pages] == [5, 5, 2]
    seen = [p.id for page in pages for p in page]
    assert len(seen) == len(set(seen)) == 12
    assert set(seen) == {p.id for p in points}


def test_scroll_single_page_has_no_next_offset(loaded: Backend) -> None:
    page, offset = loaded.scroll(FACTS, SCOPE, limit=100)
    assert offset is None
    assert sorted(keys(page)) == sorted(CORPUS)
    assert all(p.payload["tenant"] == "contract/t" for p in page)


WHERE_CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"status": "active"}, {"cat", "dog", "fish"}),
    ({"status": ["superseded", "forgotten"]}, {"bird", "lecture"}),
    ({"entity_ids": "e-sea"}, {"fish"}),
    ({"entity_ids": ["e-mat", "e-dog", "e-nobody"]}, {"cat", "dog"}),
    ({"status": "active", "entity_ids": ["e-bird", "e-fish"]}, {"fish"}),
    ({"status": "missing"}, set()),
    ({"key": "bird"}, {"bird"}),
    ({"entity_ids": Missing()}, {"lecture"}),  # an empty list counts as missing
    ({"claims": Missing()}, set(CORPUS)),  # a field no point has
    ({"entity_ids": Missing(), "status": "active"}, set()),
]


def test_scroll_and_count_filter_by_where(loaded: Backend) -> None:
    for where, expected in WHERE_CASES:
        assert set(keys(scroll_all(loaded, SCOPE, limit=2, where=where))) == expected, where
        assert loaded.count(FACTS, SCOPE, where=where) == len(expected), where


def test_count(loaded: Backend) -> None:
    assert loaded.count(FACTS, SCOPE) == len(CORPUS)
    assert loaded.count(FACTS, SCOPE, where={}) == len(CORPUS)
    assert loaded.count(FACTS, SCOPE, where={"status": "active"}) == 3
    assert loaded.count(FACTS, OTHER) == 0
    assert loaded.count(Collection.ENTITIES, SCOPE) == 0


# -- query -------------------------------------------------------------------------------------
def test_dense_query_ranks_nearest_first(loaded: Backend) -> None:
    hits = loaded.query(FACTS, SCOPE, [dense(CORPUS["fish"][0])], limit=3)
    assert len(hits) == 3
    assert hits[0].payload["key"] == "fish"
    assert math.isclose(hits[0].score, 1.0, abs_tol=1e-4)
    assert hits[0].payload["tenant"] == "contract/t"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    other = loaded.query(FACTS, SCOPE, [dense(CORPUS["lecture"][0])], limit=1)
    assert keys(other) == ["lecture"]


def test_sparse_query_ranks_most_matching_first(loaded: Backend) -> None:
    hits = loaded.query(FACTS, SCOPE, [sparse("cat on a mat at night")], limit=10)
    # only points sharing a term are found; the one sharing two terms ranks first
    assert keys(hits) == ["cat", "dog"]
    assert hits[0].score > hits[1].score > 0
    assert keys(loaded.query(FACTS, SCOPE, [sparse("saxophone")], limit=10)) == []


def test_query_of_nothing(loaded: Backend) -> None:
    assert loaded.query(FACTS, SCOPE, [], limit=5) == []


FUSION = {
    "both": "zephyr orchid violet",
    "sparse_only": "zephyr kettle rocket turbine",
    "dense_only": "orchid violet lagoon",
    "filler1": "granite quarry pebble",
    "filler2": "saxophone jazz trumpet",
}


@pytest.fixture
def fusion(backend: Backend) -> Backend:
    backend.upsert(FACTS, SCOPE, [make_point(SCOPE, k, t) for k, t in FUSION.items()])
    return backend


def test_rrf_ranks_points_found_by_both_queries_first(fusion: Backend) -> None:
    sparse_q = sparse("zephyr", limit=10)
    dense_q = dense("orchid violet", limit=2)
    # preconditions: what each lookup finds alone
    assert set(keys(fusion.query(FACTS, SCOPE, [sparse_q], limit=10))) == {"both", "sparse_only"}
    assert set(keys(fusion.query(FACTS, SCOPE, [dense_q], limit=2))) == {"both", "dense_only"}
    hits = fusion.query(FACTS, SCOPE, [sparse_q, dense_q], limit=10)
    assert keys(hits)[0] == "both"
    # each lookup contributes only its own `limit` candidates
    assert set(keys(hits[1:])) == {"sparse_only", "dense_only"}
    assert hits[0].score > hits[1].score >= hits[2].score > 0
    assert len(fusion.query(FACTS, SCOPE, [sparse_q, dense_q], limit=1)) == 1


def test_rrf_weights_change_the_order(fusion: Backend) -> None:
    for weights, winner in (((3.0, 1.0), "sparse_only"), ((1.0, 3.0), "dense_only")):
        queries = [
            sparse("kettle", limit=1, weight=weights[0]),
            dense(FUSION["dense_only"], limit=1, weight=weights[1]),
        ]
        assert keys(fusion.query(FACTS, SCOPE, queries[:1], limit=1)) == ["sparse_only"]
        assert keys(fusion.query(FACTS, SCOPE, queries[1:], limit=1)) == ["dense_only"]
        hits = fusion.query(FACTS, SCOPE, queries, limit=5)
        assert keys(hits)[0] == winner, weights
        assert set(keys(hits)) == {"sparse_only", "dense_only"}
        assert hits[0].score > hits[1].score


def test_query_where_restricts_single_queries(loaded: Backend) -> None:
    for query in (dense("cat fish bird dog"), sparse("the cat and the fish and the bird")):
        hits = loaded.query(FACTS, SCOPE, [query], limit=10, where={"status": "active"})
        assert hits
        assert all(h.payload["status"] == "active" for h in hits)
        assert "bird" not in keys(hits)
    per_query = dense("cat fish bird dog", where={"entity_ids": ["e-bird", "e-fish"]})
    assert set(keys(loaded.query(FACTS, SCOPE, [per_query], limit=10))) == {"bird", "fish"}


def test_query_where_and_per_query_where_both_apply(loaded: Backend) -> None:
    # the two filters are combined (AND): a per-query where never widens the call's where
    q = dense("cat fish bird dog", where={"status": "superseded"})
    assert loaded.query(FACTS, SCOPE, [q], limit=10, where={"status": "active"}) == []
    both = loaded.query(FACTS, SCOPE, [q], limit=10, where={"status": ["active", "superseded"]})
    assert keys(both) == ["bird"]
    fused = [q, sparse("bird cat fish", where={"status": "superseded"})]
    assert loaded.query(FACTS, SCOPE, fused, limit=10, where={"status": "active"}) == []


def test_query_where_restricts_fused_queries(loaded: Backend) -> None:
    queries = [sparse("the cat and the fish and the bird"), dense("cat fish bird dog")]
    unfiltered = loaded.query(FACTS, SCOPE, queries, limit=10)
    assert "bird" in keys(unfiltered)
    hits = loaded.query(FACTS, SCOPE, queries, limit=10, where={"status": "active"})
    assert hits
    assert all(h.payload["status"] == "active" for h in hits)
    # a per-query where restricts only its own lookup
    queries = [
        sparse("the cat and the fish and the bird", where={"entity_ids": "e-bird"}),
        dense(CORPUS["dog"][0], limit=1),
    ]
    assert set(keys(loaded.query(FACTS, SCOPE, queries, limit=10))) == {"bird", "dog"}


# -- delete ------------------------------------------------------------------------------------
def test_delete_removes_only_the_given_ids(loaded: Backend) -> None:
    loaded.upsert(Collection.MESSAGES, SCOPE, [make_point(SCOPE, "cat", "message about a cat")])
    loaded.delete(FACTS, SCOPE, [SCOPE.record_id("cat"), SCOPE.record_id("dog")])
    loaded.delete(FACTS, SCOPE, [SCOPE.record_id("missing")])
    loaded.delete(FACTS, SCOPE, [])
    assert loaded.count(FACTS, SCOPE) == len(CORPUS) - 2
    assert set(keys(scroll_all(loaded, SCOPE))) == {"bird", "fish", "lecture"}
    assert loaded.retrieve(FACTS, SCOPE, [SCOPE.record_id("cat")]) == []
    assert "cat" not in keys(loaded.query(FACTS, SCOPE, [sparse("cat mat")], limit=5))
    # the same id in another collection is untouched
    assert loaded.count(Collection.MESSAGES, SCOPE) == 1


def test_delete_through_another_scope_leaves_the_point(loaded: Backend) -> None:
    cat = SCOPE.record_id("cat")
    loaded.delete(FACTS, OTHER, [cat])
    loaded.delete(FACTS, Scope(dataset="contract", task="t", session="s1"), [cat])
    assert keys(loaded.retrieve(FACTS, SCOPE, [cat])) == ["cat"]
    assert loaded.count(FACTS, SCOPE) == len(CORPUS)


def test_delete_scope_removes_the_scope_in_every_collection(backend: Backend) -> None:
    session = Scope(dataset="contract", task="t", session="s1")
    for collection in Collection:
        for scope in (SCOPE, OTHER, session):
            name = f"{scope.key}-{scope.session}"
            backend.upsert(collection, scope, [make_point(scope, name, "some text")])
    backend.delete_scope(session)  # a session scope deletes only that session
    for collection in Collection:
        assert backend.count(collection, session) == 0
        assert backend.count(collection, SCOPE) == 1
    backend.delete_scope(SCOPE)
    for collection in Collection:
        assert backend.count(collection, SCOPE) == 0
        assert keys(backend.scroll(collection, OTHER)[0]) == ["contract/other-None"]


# -- optimize ----------------------------------------------------------------------------------
def test_optimize_keeps_every_point_queryable(backend: Backend, backend_name: str) -> None:
    n = 400 if backend_name == "edge" else 40
    texts = [f"w{i}alpha w{i}bravo w{i}charlie w{i}delta" for i in range(n)]
    points = [make_point(SCOPE, f"p{i}", t, {"status": "active"}) for i, t in enumerate(texts)]
    for start in range(0, n, 100):
        backend.upsert(FACTS, SCOPE, points[start : start + 100])
    backend.optimize()
    assert backend.count(FACTS, SCOPE) == n
    assert len({p.id for p in scroll_all(backend, SCOPE, limit=128)}) == n
    for i in range(0, n, max(1, n // 20)):
        hits = backend.query(FACTS, SCOPE, [sparse(f"w{i}bravo")], limit=3)
        assert keys(hits) == [f"p{i}"]
        hits = backend.query(FACTS, SCOPE, [dense(texts[i])], limit=5)
        assert math.isclose(hits[0].score, 1.0, abs_tol=1e-4)
        assert f"p{i}" in [h.payload["key"] for h in hits if h.score > 1 - 1e-4]
    backend.upsert(FACTS, SCOPE, [make_point(SCOPE, "late", "written after optimize")])
    assert keys(backend.query(FACTS, SCOPE, [sparse("optimize")], limit=3)) == ["late"]


# -- errors ------------------------------------------------------------------------------------
CALLS: dict[str, Callable[[Backend, Any], object]] = {
    "upsert": lambda b, s: b.upsert(FACTS, s, [make_point(SCOPE, "x", "text")]),
    "retrieve": lambda b, s: b.retrieve(FACTS, s, [SCOPE.record_id("cat")]),
    "scroll": lambda b, s: b.scroll(FACTS, s),
    "count": lambda b, s: b.count(FACTS, s),
    "query": lambda b, s: b.query(FACTS, s, [dense("cat")], limit=3),
    "set_payload": lambda b, s: b.set_payload(FACTS, s, [SCOPE.record_id("cat")], {"a": 1}),
    "delete": lambda b, s: b.delete(FACTS, s, [SCOPE.record_id("cat")]),
    "delete_scope": lambda b, s: b.delete_scope(s),
}


def test_a_non_scope_raises_scope_error(loaded: Backend) -> None:
    for name, call in CALLS.items():
        for bad_scope in (None, "contract/t", {"dataset": "contract", "task": "t"}):
            with pytest.raises(ScopeError):
                call(loaded, bad_scope)
            assert loaded.count(FACTS, SCOPE) == len(CORPUS), name
    CALLS["upsert"](loaded, SCOPE)  # the same calls with a Scope work
    assert loaded.count(FACTS, SCOPE) == len(CORPUS) + 1


BAD_IDS: dict[str, Callable[[Backend], object]] = {
    "upsert": lambda b: b.upsert(
        FACTS, SCOPE, [Point("not-a-uuid", {}, DENSE_ENCODER.embed_query("x"))]
    ),
    "retrieve": lambda b: b.retrieve(FACTS, SCOPE, [SCOPE.record_id("cat"), "not-a-uuid"]),
    "delete": lambda b: b.delete(FACTS, SCOPE, [SCOPE.record_id("cat"), "not-a-uuid"]),
    "set_payload": lambda b: b.set_payload(FACTS, SCOPE, ["not-a-uuid"], {"a": 1}),
    "scroll": lambda b: b.scroll(FACTS, SCOPE, offset="not-a-uuid"),
}


def test_malformed_ids_raise_input_error(loaded: Backend) -> None:
    for name, call in BAD_IDS.items():
        with pytest.raises(InputError):
            call(loaded)
        assert loaded.count(FACTS, SCOPE) == len(CORPUS), name
    assert loaded.count(FACTS, SCOPE, where={"a": 1}) == 0


def test_ids_are_matched_in_any_uuid_spelling(loaded: Backend) -> None:
    cat = SCOPE.record_id("cat")
    assert keys(loaded.retrieve(FACTS, SCOPE, [cat.upper()])) == ["cat"]
    loaded.delete(FACTS, SCOPE, [cat.upper()])
    assert loaded.retrieve(FACTS, SCOPE, [cat]) == []


ENGINE_FAILURES: dict[str, Callable[[Backend], object]] = {
    "upsert-dim": lambda b: b.upsert(FACTS, SCOPE, [Point(str(uuid.uuid4()), {}, [1.0, 0.0])]),
    "query-dim": lambda b: b.query(FACTS, SCOPE, [VectorQuery(DENSE, [1.0, 0.0])], limit=3),
    "query-name": lambda b: b.query(FACTS, SCOPE, [VectorQuery("nope", [0.0] * DIM)], limit=3),
}


def test_engine_failures_raise_backend_error(loaded: Backend) -> None:
    for name, call in ENGINE_FAILURES.items():
        with pytest.raises(BackendError) as info:
            call(loaded)
        assert info.value.__cause__ is not None, name
    assert loaded.count(FACTS, SCOPE) == len(CORPUS)


def test_a_closed_backend_raises_backend_error(backend: Backend, backend_name: str) -> None:
    if backend_name == "client-server":
        pytest.skip("the server fixture's backend does not own its client: close() leaves it open")
    backend.upsert(FACTS, SCOPE, corpus_points())
    backend.close()
    with pytest.raises(BackendError):
        backend.count(FACTS, SCOPE)
    with pytest.raises(BackendError):
        backend.upsert(FACTS, SCOPE, corpus_points())
    with pytest.raises(BackendError):
        backend.query(FACTS, SCOPE, [dense("cat")], limit=3)


def test_ensure_collections_is_idempotent_and_checks_models(loaded: Backend) -> None:
    ensure(loaded)
    assert loaded.count(FACTS, SCOPE) == len(CORPUS)
    for dim, model, sparse_model in [
        (DIM + 1, DENSE_ENCODER.name, SPARSE_ENCODER.name),
        (DIM, "another-model", SPARSE_ENCODER.name),
        (DIM, DENSE_ENCODER.name, "another-sparse"),
    ]:
        with pytest.raises(ConfigurationError):
            loaded.ensure_collections(dense_dim=dim, dense_model=model, sparse_model=sparse_model)
    assert loaded.count(FACTS, SCOPE) == len(CORPUS)


def test_calls_before_ensure_collections_raise_backend_error(tmp_path: Path) -> None:
    edge = open_edge_backend(tmp_path / "fresh")
    memory = QdrantClientBackend(QdrantClient(location=":memory:"))
    try:
        for backend in (edge, memory):
            with pytest.raises(BackendError):
                backend.count(FACTS, SCOPE)
    finally:
        edge.close()
        memory.close()


# -- Edge: one owner per path, reopen ----------------------------------------------------------
def test_edge_reopen_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "store"
    first = open_edge(path)
    first.upsert(FACTS, SCOPE, corpus_points())
    first.upsert(Collection.ENTITIES, SCOPE, [make_point(SCOPE, "e", "entity", dense=False)])
    first.set_payload(FACTS, SCOPE, [SCOPE.record_id("cat")], {"status": "superseded"})
    first.delete(FACTS, SCOPE, [SCOPE.record_id("dog")])
    first.close()
    with pytest.raises(BackendError):
        first.count(FACTS, SCOPE)

    second = open_edge(path)
    try:
        assert second is not first
        assert second.count(FACTS, SCOPE) == len(CORPUS) - 1
        assert second.count(Collection.ENTITIES, SCOPE) == 1
        [cat] = second.retrieve(FACTS, SCOPE, [SCOPE.record_id("cat")])
        assert cat.payload["status"] == "superseded"
        assert keys(second.query(FACTS, SCOPE, [sparse("fish sea")], limit=3)) == ["fish"]
        assert keys(second.query(FACTS, SCOPE, [dense(CORPUS["bird"][0])], limit=1)) == ["bird"]
        assert second.retrieve(FACTS, SCOPE, [SCOPE.record_id("dog")]) == []
    finally:
        second.close()


def test_edge_one_owner_per_path(tmp_path: Path) -> None:
    path = tmp_path / "store"
    first = open_edge(path)
    second = open_edge(tmp_path / "." / "store")
    assert first is second
    first.upsert(FACTS, SCOPE, corpus_points())
    first.close()  # one user leaves; the other keeps a working backend
    assert second.count(FACTS, SCOPE) == len(CORPUS)
    second.upsert(FACTS, SCOPE, [make_point(SCOPE, "more", "one more")])
    assert second.count(FACTS, SCOPE) == len(CORPUS) + 1
    second.close()
    with pytest.raises(BackendError):
        second.count(FACTS, SCOPE)


def test_edge_extra_close_does_not_close_a_newer_owner(tmp_path: Path) -> None:
    path = tmp_path / "store"
    old = open_edge(path)
    old.close()
    new = open_edge(path)
    try:
        old.close()  # a second close of a closed backend must not touch the new owner
        assert open_edge_backend(path) is new
        new.close()
        new.upsert(FACTS, SCOPE, corpus_points())
        assert new.count(FACTS, SCOPE) == len(CORPUS)
    finally:
        new.close()


def test_edge_ensure_collections_after_close_raises(tmp_path: Path) -> None:
    edge = open_edge(tmp_path / "store")
    edge.close()
    with pytest.raises(BackendError):
        ensure(edge)
    again = open_edge(tmp_path / "store")  # the folder was not grabbed by the closed object
    again.close()


def test_edge_refuses_a_store_built_with_other_models(tmp_path: Path) -> None:
    path = tmp_path / "store"
    open_edge(path).close()
    for kwargs in (
        {"dense_dim": DIM * 2, "dense_model": DENSE_ENCODER.name},
        {"dense_dim": DIM, "dense_model": "another-model"},
    ):
        edge = open_edge_backend(path)
        try:
            with pytest.raises(ConfigurationError):
                edge.ensure_collections(sparse_model=SPARSE_ENCODER.name, **kwargs)
        finally:
            edge.close()
    edge = open_edge(path)  # the matching models still open it
    edge.close()


def test_edge_auto_optimizes_past_the_threshold(tmp_path: Path) -> None:
    edge = open_edge_backend(tmp_path / "store", optimize_threshold=50)
    assert isinstance(edge, EdgeBackend)
    ensure(edge)
    try:
        points = [make_point(SCOPE, f"p{i}", f"point w{i}x") for i in range(120)]
        for start in range(0, 120, 30):
            edge.upsert(FACTS, SCOPE, points[start : start + 30])
        assert edge.count(FACTS, SCOPE) == 120
        assert keys(edge.query(FACTS, SCOPE, [sparse("w77x")], limit=3)) == ["p77"]
    finally:
        edge.close()


def test_boolean_filters_are_refused_not_silently_empty(loaded: Backend) -> None:
    # Qdrant Edge matches nothing on an unindexed boolean field: a boolean condition is an error.
    for collection in (Collection.FACTS,):
        with pytest.raises(InputError, match="boolean"):
            loaded.count(collection, SCOPE, where={"flag": True})  # type: ignore[dict-item]
        with pytest.raises(InputError, match="boolean"):
            loaded.scroll(collection, SCOPE, where={"flag": False})  # type: ignore[dict-item]
