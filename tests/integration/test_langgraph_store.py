"""MembrainStore: differential tests against LangGraph's InMemoryStore, and hybrid query search."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

import numpy as np
import pytest
from langgraph.graph import START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
    get_text_at_path,
)
from langgraph.store.memory import InMemoryStore

from langchain_membrain.langgraph import MembrainStore, scope_for_namespace
from membrain import ConfigurationError, InputError, Memory, MessageStatus, Scope
from membrain.background import BackgroundWriter
from membrain.binding import DEFAULT_USER_NAME
from membrain.testing import HashingEncoder

NAMESPACES = [
    ("users", "u1", "prefs"),
    ("users", "u1", "memories"),
    ("users", "u2"),
    ("users", "u2", "memories"),
    ("docs",),
    ("docs", "v1", "drafts"),
    ("docs", "v2", "drafts", "old"),
]


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("store") / "membrain"
    with Memory(path=path, dense=HashingEncoder(dim=64)) as mem:
        yield mem


@pytest.fixture
def stores(shared_memory: Memory, tmp_path: Path) -> Iterator[tuple[MembrainStore, InMemoryStore]]:
    # no extraction: these tests are about the key-value half (a fresh sidecar per test)
    with MembrainStore(memory=shared_memory, path=tmp_path / "kv.sqlite", extract=False) as ours:
        yield ours, InMemoryStore()


def normal(result: Any) -> Any:
    """Results without timestamps (and scores, which are None without a query)."""
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        return [normal(r) for r in result]
    return result


def both(stores: tuple[BaseStore, BaseStore], ops: Sequence[Any]) -> list[Any]:
    ours, theirs = stores
    mine = ours.batch(ops)
    reference = theirs.batch(ops)
    assert normal(mine) == normal(reference), ops
    return mine


def item(i: int) -> dict[str, Any]:
    return {
        "text": f"note {i}",
        "n": i,
        "color": ["red", "green", "blue"][i % 3],
        "meta": {"kind": "a" if i % 2 else "b", "tags": ["x", str(i % 4)]},
    }


def test_put_get_overwrite_delete_match_inmemory(
    stores: tuple[MembrainStore, InMemoryStore],
) -> None:
    puts = [PutOp(ns, f"k{i}", item(i)) for i, ns in enumerate(NAMESPACES * 2)]
    both(stores, puts)
    both(stores, [GetOp(ns, f"k{i}") for i, ns in enumerate(NAMESPACES * 2)])
    both(stores, [GetOp(NAMESPACES[0], "missing"), GetOp(NAMESPACES[0], "k0")])
    # overwrite keeps the item's place; delete and re-put moves it to the end
    both(stores, [PutOp(NAMESPACES[0], "k0", {"text": "changed", "n": 100})])
    both(stores, [PutOp(NAMESPACES[1], "k1", None)])
    both(stores, [PutOp(NAMESPACES[1], "k1", item(1))])
    both(stores, [SearchOp(("users",), limit=100)])
    both(stores, [SearchOp((), limit=100), GetOp(NAMESPACES[0], "k0")])
    # one batch: reads see the store as it was; the last put of a key wins
    both(
        stores,
        [
            PutOp(("docs",), "new", {"v": 1}),
            GetOp(("docs",), "new"),
            PutOp(("docs",), "new", {"v": 2}),
            SearchOp(("docs",), limit=100),
            ListNamespacesOp(),
        ],
    )
    both(stores, [GetOp(("docs",), "new"), SearchOp(("docs",), limit=100)])
    # the high-level API
    ours, theirs = stores
    for store in (ours, theirs):
        store.put(("docs",), "api", {"a": [1, 2]})
        store.delete(("docs",), "k4")
    assert normal(ours.get(("docs",), "api")) == normal(theirs.get(("docs",), "api"))
    assert ours.get(("docs",), "k4") is None
    assert normal(ours.search(("docs",))) == normal(theirs.search(("docs",)))


def test_search_filters_limits_offsets_match_inmemory(
    stores: tuple[MembrainStore, InMemoryStore],
) -> None:
    both(stores, [PutOp(ns, f"k{i}", item(i)) for i, ns in enumerate(NAMESPACES * 3)])
    filters: list[dict[str, Any] | None] = [
        None,
        {"color": "red"},
        {"color": "red", "meta": {"kind": "a"}},
        {"meta": {"tags": ["x", "1"]}},
        {"meta": {"tags": ["x"]}},
        {"n": {"$gt": 5}},
        {"n": {"$gte": 5, "$lt": 12}},
        {"n": {"$lte": 3}},
        {"n": {"$ne": 4}, "color": {"$eq": "blue"}},
        {"color": {"$ne": "red"}},
        {"nothing": "here"},
    ]
    for prefix in [(), ("users",), ("users", "u2"), ("docs", "v2"), ("nope",)]:
        for filter_ in filters:
            for limit, offset in [(10, 0), (3, 0), (3, 2), (100, 5), (0, 0), (2, 50)]:
                both(stores, [SearchOp(prefix, filter=filter_, limit=limit, offset=offset)])


def test_list_namespaces_matches_inmemory(stores: tuple[MembrainStore, InMemoryStore]) -> None:
    both(stores, [PutOp(ns, "k", {"i": i}) for i, ns in enumerate(NAMESPACES)])
    prefix = MatchCondition("prefix", ("users",))
    cases = [
        ListNamespacesOp(),
        ListNamespacesOp(match_conditions=(prefix,)),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("users", "*", "memories")),)),
        ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("memories",)),)),
        ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("*", "drafts")),)),
        ListNamespacesOp(match_conditions=(prefix, MatchCondition("suffix", ("memories",)))),
        ListNamespacesOp(max_depth=1),
        ListNamespacesOp(max_depth=2),
        ListNamespacesOp(match_conditions=(prefix,), max_depth=2),
        ListNamespacesOp(limit=2),
        ListNamespacesOp(limit=3, offset=2),
        ListNamespacesOp(max_depth=2, limit=2, offset=1),
        ListNamespacesOp(offset=100),
    ]
    for op in cases:
        both(stores, [op])
    ours, theirs = stores
    cases_api: list[dict[str, Any]] = [
        {"prefix": ("docs",)},
        {"suffix": ("drafts",)},
        {"prefix": ("users",), "max_depth": 2, "limit": 1, "offset": 1},
    ]
    for kwargs in cases_api:
        assert ours.list_namespaces(**kwargs) == theirs.list_namespaces(**kwargs)


@pytest.mark.parametrize("seed", range(4))
def test_random_operation_sequences_match_inmemory(
    stores: tuple[MembrainStore, InMemoryStore], seed: int
) -> None:
    rng = random.Random(seed)
    live: dict[tuple[str, ...], set[str]] = {}

    def random_op() -> Any:
        roll = rng.random()
        ns = rng.choice(NAMESPACES)
        key = f"k{rng.randrange(6)}"
        if roll < 0.45 or not live:
            live.setdefault(ns, set()).add(key)
            return PutOp(ns, key, item(rng.randrange(20)))
        ns = rng.choice(sorted(live))
        if roll < 0.55 and len(live[ns]) > 1:  # never empty a namespace (see divergence test)
            gone = rng.choice(sorted(live[ns]))
            live[ns].discard(gone)
            return PutOp(ns, gone, None)
        if roll < 0.7:
            return GetOp(ns, key)
        if roll < 0.9:
            prefix = ns[: rng.randrange(len(ns) + 1)]
            filter_ = rng.choice(
                [None, {"color": "green"}, {"n": {"$gte": 10}}, {"meta": {"kind": "a"}}]
            )
            return SearchOp(
                prefix, filter=filter_, limit=rng.randrange(1, 8), offset=rng.randrange(4)
            )
        return ListNamespacesOp(
            max_depth=rng.choice([None, 1, 2, 3]),
            limit=rng.randrange(1, 10),
            offset=rng.randrange(3),
        )

    for _ in range(40):
        both(stores, [random_op() for _ in range(rng.randrange(1, 4))])


def test_documented_divergences_from_inmemory(stores: tuple[MembrainStore, InMemoryStore]) -> None:
    ours, theirs = stores
    for store in (ours, theirs):
        store.put(("a", "b"), "k", {"n": 1})
        store.put(("c",), "k", {"n": "many"})
        store.delete(("a", "b"), "k")
        store.get(("never", "written"), "k")
    # only namespaces that hold items are listed (like PostgresStore)
    assert ours.list_namespaces() == [("c",)]
    assert theirs.list_namespaces() == [("a", "b"), ("c",), ("never", "written")]
    # a comparison with a missing or non-numeric value is false instead of a TypeError
    assert ours.search((), filter={"missing": {"$gt": 0}}) == []
    assert ours.search((), filter={"n": {"$gt": 0}}) == []
    with pytest.raises((TypeError, ValueError)):
        theirs.search((), filter={"missing": {"$gt": 0}})
    # created_at survives an overwrite
    first = ours.get(("c",), "k")
    ours.put(("c",), "k", {"n": 2})
    second = ours.get(("c",), "k")
    assert first is not None and second is not None
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    # an unknown operator is an InputError (InMemoryStore: ValueError), though no item reaches it
    with pytest.raises(InputError, match="Unsupported operator"):
        ours.search((), filter={"n": {"$in": [1]}})
    with pytest.raises(InputError, match="Unsupported operator"):
        ours.search(("nothing", "here"), filter={"a": {"b": [{"$bogus": 1}]}})


def test_namespace_rules(stores: tuple[MembrainStore, InMemoryStore]) -> None:
    ours, _ = stores
    for bad in [(), ("langgraph", "x"), ("a.b",), ("a", ""), ("\ud800",)]:
        with pytest.raises(InvalidNamespaceError):
            ours.put(bad, "k", {"v": 1})
        if bad != ("langgraph", "x"):
            with pytest.raises(InvalidNamespaceError):
                ours.batch([PutOp(bad, "k", {"v": 1})])
    for key in ("\ud800", None):
        with pytest.raises(InputError, match="item key"):
            ours.batch([PutOp(("a",), key, {"v": 1})])  # type: ignore[arg-type]
    assert ours.search(("a",)) == []
    # the root "langgraph" is put's rule, not the batch's (as LangGraph's stores do)
    ours.batch([PutOp(("langgraph", "x"), "k", {"v": 1})])
    assert ours.get(("langgraph", "x"), "k") is not None


def test_labels_are_whole_labels_whatever_they_hold(
    stores: tuple[MembrainStore, InMemoryStore],
) -> None:
    # characters that mean something to the sidecar's encoding, or to a naive one
    odd = [("a",), ("a", "b"), ('a","b',), ("a,b",), ('a"',), ("a]",), ("[a",), ("a\\",)]
    odd += [("a/b",), ("a|b",), ("a:b",), ("a\u2024b",), ("ａ",), ("a", "b,c"), ("a b",)]
    both(stores, [PutOp(ns, "k", {"ns": list(ns)}) for ns in odd])
    for ns in odd:
        both(stores, [GetOp(ns, "k"), SearchOp(ns, limit=100)])
        both(stores, [ListNamespacesOp((MatchCondition("prefix", ns),), limit=100)])
        both(stores, [ListNamespacesOp((MatchCondition("suffix", ns),), limit=100)])
    both(stores, [SearchOp((), limit=100), ListNamespacesOp(limit=100)])


def test_a_dotted_label_never_addresses_the_labels_it_joins(
    stores: tuple[MembrainStore, InMemoryStore],
) -> None:
    ours, _ = stores
    ours.put(("bob", "x"), "secret", {"text": "Bob's"})
    # LangGraph's store methods refuse such labels; a raw batch is refused the same way
    for op in (
        GetOp(("bob.x",), "secret"),
        SearchOp(("bob.x",)),
        SearchOp(("bob.x",), query="Bob"),
        ListNamespacesOp((MatchCondition("prefix", ("bob.x",)),)),
        PutOp(("bob.x",), "secret", None),
    ):
        with pytest.raises(InvalidNamespaceError, match="periods"):
            ours.batch([op])
    assert ours.get(("bob", "x"), "secret") is not None


def test_a_bad_operation_fails_its_whole_batch(stores: tuple[MembrainStore, InMemoryStore]) -> None:
    ours, _ = stores
    ours.put(("a",), "k", {"text": "kept"})
    bad: list[tuple[Any, type[Exception]]] = [
        (SearchOp(("a",), {"text": {"$bogus": 1}}), InputError),
        (SearchOp(("a",), None, 10, 0, "x\ud800"), InputError),
        (GetOp(("x\ud800",), "k"), InvalidNamespaceError),
        (GetOp(("a",), "k\ud800"), InputError),
        (SearchOp(("a", "x\ud800")), InvalidNamespaceError),
        (ListNamespacesOp((MatchCondition("suffix", ("x\ud800",)),)), InvalidNamespaceError),
        (ListNamespacesOp((MatchCondition("infix", ("a",)),)), InputError),  # type: ignore[arg-type]
        (PutOp(("a",), "v", {"text": "x\ud800"}), InputError),
        (PutOp(("a",), "v", {"when": object()}), InputError),
    ]
    for op, error in bad:
        with pytest.raises(error):
            ours.batch([PutOp(("a",), "k", {"text": "overwritten"}), PutOp(("b",), "k", {}), op])
        assert [(i.namespace, i.value) for i in ours.search((), limit=10)] == [
            (("a",), {"text": "kept"})
        ]


def _old_sidecar(path: Path, rows: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
    """A sidecar as the first layout wrote it: namespaces joined by ".", user_version 0."""
    import json
    import sqlite3

    from langchain_membrain.langgraph.sidecar import SCHEMA

    conn = sqlite3.connect(path)
    with conn:
        conn.executescript(SCHEMA)
        for seq, (ns, key, value) in enumerate(rows, 1):
            conn.execute("INSERT OR IGNORE INTO namespaces VALUES (?, ?)", (ns, seq))
            conn.execute(
                "INSERT INTO items (ns, key, value, created_at, updated_at) VALUES (?,?,?,?,?)",
                (
                    ns,
                    key,
                    json.dumps(value),
                    "2024-01-01T00:00:00+00:00",
                    "2024-01-01T00:00:00+00:00",
                ),
            )
    conn.close()


def test_a_sidecar_of_the_first_layout_is_converted_once(
    shared_memory: Memory, tmp_path: Path
) -> None:
    import sqlite3

    from langchain_membrain.langgraph.sidecar import FORMAT

    path = tmp_path / "old.sqlite"
    # '["a","b"]' was a legal label then (no dot): its new form is what ("a", "b") becomes
    _old_sidecar(
        path,
        [
            ("users.u1.prefs", "k1", {"n": 1}),
            ("users.u1", "k2", {"n": 2}),
            ('["a","b"]', "k3", {"n": 3}),
            ("a.b", "k4", {"n": 4}),
            ("ｂｏｂ", "k5", {"n": 5}),
        ],
    )
    for _ in range(2):  # opened again: already converted, unchanged
        with MembrainStore(memory=shared_memory, path=path, extract=False) as store:
            assert [(i.namespace, i.key) for i in store.search((), limit=10)] == [
                (("users", "u1", "prefs"), "k1"),
                (("users", "u1"), "k2"),
                (('["a","b"]',), "k3"),
                (("a", "b"), "k4"),
                (("ｂｏｂ",), "k5"),
            ]
            assert [i.key for i in store.search(("users", "u1"))] == ["k1", "k2"]
            assert [i.key for i in store.search(("a",))] == ["k4"]
            assert store.list_namespaces(prefix=("users",), max_depth=2) == [("users", "u1")]
            got = store.get(("a", "b"), "k4")
            assert got is not None and got.value == {"n": 4}
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (FORMAT,)
    conn.execute(f"PRAGMA user_version = {FORMAT + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(ConfigurationError, match="newer"):
        MembrainStore(memory=shared_memory, path=path, extract=False)


def test_scope_for_namespace() -> None:
    assert scope_for_namespace(("sara",)) == Scope(dataset="sara", task="store")
    assert scope_for_namespace(("sara", "tutor")) == Scope(dataset="sara", task="tutor")
    assert scope_for_namespace(("sara", "tutor", "t1")) == Scope(
        dataset="sara", task="tutor", session="t1"
    )
    assert scope_for_namespace(("sara", "tutor", "a", "b")).session == "a:b"
    # every label is encoded as membrain.Scope encodes a value: the same tenant as Scope's
    odd = scope_for_namespace(("user/42#x", "t"))
    assert odd == Scope(dataset="user/42#x", task="t") == scope_for_namespace(("user/42#x", "t"))
    assert scope_for_namespace(("x" * 128, "a b")) == Scope(dataset="x" * 128, task="a b")
    for label in ("x" * 129, " lead", "h-1", "auth0|64b7f1"):
        assert scope_for_namespace((label,)).dataset == Scope(dataset=label).dataset
    with pytest.raises(InvalidNamespaceError):
        scope_for_namespace(())


def test_store_takes_memory_by_keyword_and_shares_the_defaults(shared_memory: Memory) -> None:
    with pytest.raises(TypeError):
        MembrainStore(shared_memory)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="unknown retrieval mode"):
        MembrainStore(memory=shared_memory, mode="psychic")
    namespace = (f"speaker-{next(_counter)}", "assistant")
    with MembrainStore(memory=shared_memory, extract=False) as store:
        store.put(namespace, "tea", {"text": "Sara drinks green tea every morning."})
        [hit] = store.search(namespace, query="green tea every morning")
        [stored] = shared_memory.messages(scope=store.scope_for(namespace))
    assert stored.message.speaker == DEFAULT_USER_NAME == "User"
    # the score is the similarity of the query and the item, as LangGraph's stores give it:
    # the cosine of their vectors by the memory's encoder (the whole value, without fields)
    dense = shared_memory.store.dense
    query = np.asarray(dense.embed_query("green tea every morning"))
    [text] = get_text_at_path({"text": "Sara drinks green tea every morning."}, "$")
    item = np.asarray(dense.embed_documents([text])[0])
    cosine = float(query @ item / (np.linalg.norm(query) * np.linalg.norm(item)))
    assert hit.key == "tea" and hit.score == pytest.approx(cosine)


def test_abatch_and_persistence(shared_memory: Memory, tmp_path: Path) -> None:
    path = tmp_path / "items.sqlite"
    with MembrainStore(memory=shared_memory, path=path, extract=False) as store:
        asyncio.run(store.aput(("p", "q"), "k", {"text": "kept across restarts"}))
        got = asyncio.run(store.aget(("p", "q"), "k"))
        assert got is not None and got.value == {"text": "kept across restarts"}
        found = asyncio.run(store.asearch(("p",)))
        assert [i.key for i in found] == ["k"]
    with MembrainStore(memory=shared_memory, path=path, extract=False) as store:
        again = store.get(("p", "q"), "k")
        assert again is not None and again.value == got.value
        assert again.created_at == got.created_at
        assert store.list_namespaces() == [("p", "q")]


# -- query search ------------------------------------------------------------------------------
ITEMS = {
    "pets": {"text": "Sara adopted a grey cat named Miso.", "kind": "pet"},
    "family": {"text": "Sara's sister Lina lives in Lisbon.", "kind": "family"},
    "food": {"text": "Sara bakes croissants every Tuesday.", "kind": "hobby"},
    "music": {"text": "Sara's brother Tom plays the cello.", "kind": "family"},
}


class QueryStore(NamedTuple):
    store: MembrainStore
    writer: BackgroundWriter
    sara: tuple[str, ...]
    nate: tuple[str, ...]


_counter = itertools.count()


@pytest.fixture
def query_store(shared_memory: Memory, tmp_path: Path) -> Iterator[QueryStore]:
    task = f"assistant-{next(_counter)}"  # a tenant of its own in the module's memory
    sara, nate = (task, "Sara"), (task, "Nate")  # the user is the dataset
    with (
        BackgroundWriter(shared_memory, idle_seconds=60) as writer,
        MembrainStore(
            memory=shared_memory, writer=writer, speaker="Sara", path=tmp_path / "q.sqlite"
        ) as store,
    ):
        for key, value in ITEMS.items():
            store.put(sara, key, value)
        store.put(nate, "pets", {"text": "Nate owns a dog named Rex."})
        store.put(sara, "secret", {"text": "Sara has a cat allergy."}, index=False)
        yield QueryStore(store, writer, sara, nate)


def test_query_search_finds_the_right_item_before_and_after_extraction(
    query_store: QueryStore, shared_memory: Memory
) -> None:
    store, writer, sara, nate = query_store
    # before extraction: the evidence path (BM25 + dense over the items' messages)
    hits = store.search(sara, query="What is the name of the cat?")
    assert hits[0].key == "pets" and hits[0].namespace == sara
    assert hits[0].score is not None and hits[0].score > 0
    assert hits[0].value == ITEMS["pets"]
    assert "secret" not in {h.key for h in hits}  # index=False: never found by a query
    assert all(h.namespace == sara for h in hits)  # other tenants stay out

    assert writer.flush(timeout=20)
    scope = store.scope_for(sara)
    assert all(m.status is MessageStatus.PROCESSED for m in shared_memory.messages(scope=scope))
    assert any("Miso" in f.text for f in shared_memory.facts(scope=scope))
    # after extraction: facts cite the items' messages, fused with the evidence ranking
    hits = store.search(sara, query="Where does Lina live?", limit=2)
    assert hits[0].key == "family" and len(hits) == 2
    assert hits[0].score is not None and hits[0].score >= (hits[1].score or 0)
    # filter, offset and limit apply to the ranked items
    filtered = store.search(sara, query="Who plays the cello?", filter={"kind": "family"})
    assert filtered[0].key == "music" and {h.key for h in filtered} <= {"music", "family"}
    page = store.search(sara, query="Who plays the cello?", filter={"kind": "family"}, offset=1)
    assert [h.key for h in page] == [h.key for h in filtered[1:]]
    # a query across every tenant
    everywhere = store.search((), query="dog named Rex")
    assert (everywhere[0].namespace, everywhere[0].key) == (nate, "pets")


def test_query_search_returns_only_current_items(
    query_store: QueryStore,
) -> None:
    store, writer, sara, _ = query_store
    store.put(sara, "pets", {"text": "Sara sold her old bicycle.", "kind": "pet"})
    store.delete(sara, "food")
    writer.flush(timeout=20)
    hits = store.search(sara, query="cat named Miso", limit=20)
    keys = [h.key for h in hits]
    assert "food" not in keys and len(keys) == len(set(keys))
    for hit in hits:  # the old text may still rank, but only the current value is returned
        assert hit.value == store.get(hit.namespace, hit.key).value  # type: ignore[union-attr]
    assert store.search(sara, query="bicycle")[0].key == "pets"


class _State(TypedDict):
    text: str
    found: list[str]


def test_store_in_a_graph(query_store: QueryStore) -> None:
    store, _, sara, _ = query_store

    def remember(state: _State, *, store: BaseStore) -> dict[str, Any]:
        store.put(sara, "graph", {"text": state["text"]})
        return {}

    def look_up(state: _State, *, store: BaseStore) -> dict[str, Any]:
        return {"found": [h.key for h in store.search(sara, query="violin lessons")]}

    builder = StateGraph(_State)
    builder.add_node("remember", remember)
    builder.add_node("look_up", look_up)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "look_up")
    graph = builder.compile(store=store)
    result = graph.invoke({"text": "Sara takes violin lessons on Fridays.", "found": []})
    assert result["found"][0] == "graph"


def test_overwrite_and_delete_retire_the_old_facts_as_the_store_agent(
    query_store: QueryStore, shared_memory: Memory
) -> None:
    store, writer, sara, _ = query_store
    scope = store.scope_for(sara)
    assert writer.flush(timeout=20)
    miso = [f for f in shared_memory.facts(scope=scope) if "Miso" in f.text]
    assert miso and all(f.author == "agent:langgraph-store" for f in miso)
    assert {f.trust.value for f in miso} == {"derived"}
    store.put(sara, "pets", {"text": "Sara sold her old bicycle.", "kind": "pet"})
    store.delete(sara, "food")
    current = shared_memory.facts(scope=scope)
    assert not any("Miso" in f.text for f in current)  # the overwritten value's facts
    everything = {f.id: f for f in shared_memory.facts(scope=scope, include_inactive=True)}
    assert all(everything[f.id].status.value == "forgotten" for f in miso)
    forgotten = shared_memory.audit(scope=scope, actions=["forgotten"])
    assert forgotten and {str(e.actor) for e in forgotten} == {"agent:langgraph-store"}
    assert {f.id for f in miso} <= {t for e in forgotten for t in e.targets}
    hits = shared_memory.search("What is the name of Sara's cat?", scope=scope, k=20)
    assert not any(h.fact.id in {f.id for f in miso} for h in hits)


def test_overwriting_an_item_not_yet_extracted_never_brings_its_facts_back(
    shared_memory: Memory,
) -> None:
    namespace = ("Sara", f"pending-{next(_counter)}")
    with (
        BackgroundWriter(shared_memory, idle_seconds=60) as writer,
        MembrainStore(memory=shared_memory, writer=writer, speaker="Sara") as store,
    ):
        store.put(namespace, "pet", {"text": "I adopted a cat named Miso."})
        store.put(namespace, "pet", {"text": "I adopted a parrot named Kiwi."})
        assert writer.flush(timeout=20)
        scope = store.scope_for(namespace)
    texts = [f.text for f in shared_memory.facts(scope=scope)]
    assert any("Kiwi" in t for t in texts)
    assert not any("Miso" in t for t in texts)


# -- durability, index config, own task, user name ---------------------------------------------
def test_items_survive_a_restart_by_default(tmp_path: Path) -> None:
    folder = tmp_path / "membrain"
    namespace = ("Sara", "assistant")
    with (
        Memory(path=folder, dense=HashingEncoder(dim=64)) as mem,
        MembrainStore(memory=mem, extract=False) as store,
    ):
        # the sidecar is a file in the memory's folder, not RAM
        assert store.path == str(folder / "langgraph-store.sqlite")
        store.put(namespace, "pets", {"text": "Sara adopted a grey cat named Miso."})
        store.put(namespace, "food", {"text": "Sara bakes croissants every Tuesday."})
    assert (folder / "langgraph-store.sqlite").exists()
    with (
        Memory(path=folder, dense=HashingEncoder(dim=64)) as mem,
        MembrainStore(memory=mem, extract=False) as store,
    ):
        again = store.get(namespace, "pets")
        assert again is not None and again.value == {"text": "Sara adopted a grey cat named Miso."}
        hits = store.search(namespace, query="What is the name of the grey cat?")
        assert hits and hits[0].key == "pets" and hits[0].namespace == namespace
        assert store.list_namespaces() == [namespace]


def test_in_memory_sidecar_only_when_asked_and_server_memories_need_a_path(
    tmp_path: Path,
) -> None:
    from qdrant_client import QdrantClient

    from membrain.backends.client import QdrantClientBackend

    folder = tmp_path / "membrain"
    with Memory(path=folder, dense=HashingEncoder(dim=64)) as mem:
        with MembrainStore(memory=mem, path=":memory:", extract=False) as store:
            store.put(("a",), "k", {"text": "fleeting"})
        with MembrainStore(memory=mem, path=":memory:", extract=False) as store:
            assert store.get(("a",), "k") is None
    assert not (folder / "langgraph-store.sqlite").exists()
    backend = QdrantClientBackend(QdrantClient(location=":memory:"))
    with Memory(backend=backend, dense=HashingEncoder(dim=64)) as server:
        with pytest.raises(ConfigurationError, match="has no folder; pass path="):
            MembrainStore(memory=server)
        with MembrainStore(memory=server, path=tmp_path / "items.sqlite", extract=False) as store:
            store.put(("a",), "k", {"text": "kept in a file"})
        with MembrainStore(memory=server, path=tmp_path / "items.sqlite", extract=False) as store:
            assert store.get(("a",), "k") is not None


def test_langgraph_index_config(shared_memory: Memory, tmp_path: Path) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    namespace = (f"index-{next(_counter)}", "notes")
    path = tmp_path / "kv.sqlite"
    dense = shared_memory.store.dense
    # fields map onto index_fields; dims and embed may name the memory's own encoder
    for embed in (None, dense, dense.name):
        config: dict[str, Any] = {"dims": 64, "fields": ["text"]}
        if embed is not None:
            config["embed"] = embed
        MembrainStore(memory=shared_memory, path=path, index=config).close()  # type: ignore[arg-type]
    with MembrainStore(
        memory=shared_memory, path=path, extract=False, index={"dims": 64, "fields": ["text"]}
    ) as store:
        store.put(namespace, "k", {"text": "Sara plays chess.", "other": "zebra"})
        store.put(namespace, "all", {"text": "Sara sings.", "other": "loudly"}, index=["$"])
        texts = sorted(
            m.message.text for m in shared_memory.messages(scope=store.scope_for(namespace))
        )
        assert texts == ["Sara plays chess.", "Sara sings.\nloudly"]
        assert store.search(namespace, query="chess")[0].key == "k"
    bad: list[tuple[dict[str, Any], str]] = [
        ({"dims": 32}, "dims"),
        ({"dims": 64, "embed": DeterministicFakeEmbedding(size=64)}, "memory's own dense encoder"),
        ({"embed": "openai:text-embedding-3-small"}, "memory's own dense encoder"),
        ({"embed": lambda texts: [[0.0] * 64 for _ in texts]}, "memory's own dense encoder"),
        ({"fields": "text"}, "list of JSON paths"),
        ({"dimensions": 64}, "unknown keys"),
    ]
    for config, message in bad:
        with pytest.raises(ConfigurationError, match=message):
            MembrainStore(memory=shared_memory, path=path, index=config)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="disagree"):
        MembrainStore(memory=shared_memory, path=path, index={"fields": ["a"]}, index_fields=["b"])


def test_index_embed_may_be_the_langchain_model_the_memory_uses(tmp_path: Path) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    model = DeterministicFakeEmbedding(size=16)
    with Memory(path=tmp_path / "m", dense=model) as mem:
        config: Any = {"dims": 16, "embed": model, "fields": ["text"]}
        with MembrainStore(memory=mem, index=config, extract=False) as store:
            store.put(("Sara",), "k", {"text": "Sara plays chess."})
            assert store.search(("Sara",), query="chess")[0].key == "k"
        with pytest.raises(ConfigurationError, match="embed"):
            MembrainStore(memory=mem, index={"embed": DeterministicFakeEmbedding(size=16)})


def test_items_stay_out_of_the_chat_scope_by_default(shared_memory: Memory, tmp_path: Path) -> None:
    dataset = f"Mira{next(_counter)}"
    namespace = ("memories", dataset)
    chat = Scope(dataset=dataset, task="assistant")
    shared_memory.add(
        [{"speaker": "Mira", "text": "I adopted a dog named Pixel.", "timestamp": "2024-03-15"}],
        scope=chat,
    )
    with (
        BackgroundWriter(shared_memory, idle_seconds=60) as writer,
        MembrainStore(
            memory=shared_memory, writer=writer, user_name="Mira", path=tmp_path / "kv.sqlite"
        ) as store,
    ):
        # the user is the dataset, the collection label the task: apart from the chat's
        assert store.scope_for(namespace) == Scope(dataset=dataset, task="memories")
        store.put(namespace, "key", {"text": "I keep my spare key under the blue flowerpot."})
        assert writer.flush(timeout=20)
        assert store.search(namespace, query="spare key flowerpot")[0].key == "key"
        assert any(
            "flowerpot" in f.text for f in shared_memory.facts(scope=store.scope_for(namespace))
        )
    for question in ("Where is the spare key?", "blue flowerpot"):
        for mode in ("fast", "expand"):
            hits = shared_memory.search(question, scope=chat, mode=mode, k=20)
            assert not any("flowerpot" in h.fact.text for h in hits)
    assert not any("flowerpot" in f.text for f in shared_memory.facts(scope=chat))
    assert any("Pixel" in f.text for f in shared_memory.facts(scope=chat))
    # another task, or the chat-sharing mapping, on request
    other = MembrainStore(memory=shared_memory, path=":memory:", task="notes")
    chat_namespace = (dataset, "assistant")
    assert other.scope_for(chat_namespace) == Scope(
        dataset=dataset, task="notes", session="assistant"
    )
    shared = MembrainStore(
        memory=shared_memory, path=":memory:", namespace_to_scope=scope_for_namespace
    )
    assert shared.scope_for(chat_namespace) == chat
    other.close()
    shared.close()
    with pytest.raises(ConfigurationError, match="task or namespace_to_scope"):
        MembrainStore(
            memory=shared_memory, path=":memory:", task="x", namespace_to_scope=scope_for_namespace
        )
    with pytest.raises(ConfigurationError, match="not a valid task"):
        MembrainStore(memory=shared_memory, path=":memory:", task="")


def test_items_are_spoken_by_the_users_display_name(shared_memory: Memory, tmp_path: Path) -> None:
    dataset = f"names-{next(_counter)}"
    with (
        BackgroundWriter(shared_memory, idle_seconds=60) as writer,
        MembrainStore(
            memory=shared_memory,
            writer=writer,
            user_name=lambda namespace: namespace[1].title(),
            path=tmp_path / "kv.sqlite",
        ) as store,
    ):
        store.put((dataset, "sara"), "home", {"text": "I live in Porto."})
        store.put((dataset, "sara"), "work", {"text": "I work in Braga.", "user_name": "Nate"})
        assert writer.flush(timeout=20)
        messages = {
            m.message.source_id: m.message
            for ns in [(dataset, "sara")]
            for m in shared_memory.messages(scope=store.scope_for(ns))
        }
        speakers = sorted((m.speaker, m.text) for m in messages.values())
        assert speakers == [("Nate", "I work in Braga."), ("Sara", "I live in Porto.")]
        facts = [f.text for f in shared_memory.facts(scope=store.scope_for((dataset, "sara")))]
    porto = [t for t in facts if "Porto" in t]
    braga = [t for t in facts if "Braga" in t]
    assert porto and all("Sara" in t and "User" not in t for t in porto)
    assert braga and all("Nate" in t and "User" not in t for t in braga)
    with MembrainStore(
        memory=shared_memory, path=":memory:", user_name="Sara", extract=False
    ) as store:
        store.put((dataset, "x"), "k", {"text": "I swim."})
        [stored] = shared_memory.messages(scope=store.scope_for((dataset, "x")))
        assert stored.message.speaker == "Sara"
    with MembrainStore(memory=shared_memory, path=":memory:", extract=False) as store:
        store.put((dataset, "y"), "k", {"text": "I run."})
        [stored] = shared_memory.messages(scope=store.scope_for((dataset, "y")))
        assert stored.message.speaker == DEFAULT_USER_NAME
    with pytest.raises(ConfigurationError, match="user_name or speaker"):
        MembrainStore(memory=shared_memory, path=":memory:", user_name="A", speaker="B")
