"""Every route of the served app, fuzzed: bad input answers a one-line 4xx, never a 500.

The routes come from the app itself (its route table and OpenAPI document), so a route added
later is fuzzed too. Bodies and query values are drawn from ``unit/fuzz_strategies.py``:
any code point (lone surrogates travel as JSON escapes, or percent-encoded in a query),
values of the wrong type, nesting, bodies that are no JSON or no UTF-8.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import fastapi.routing
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from unit import fuzz_strategies as fs

from membrain import Memory, Scope
from membrain.server import Access, KeyRing, add_key, create_app
from membrain.server.run import extensions
from membrain.testing import HashingEncoder

EXAMPLES = 20
"""Examples per route; every route is fuzzed on two servers (with and without keys)."""
FEWER = {"DELETE /api/memory/scope": 6}
"""Routes given fewer examples: a delete compacts the store's files (seconds each)."""
SARA = Scope(dataset="sara", task="fuzz")


@dataclass(frozen=True)
class Operation:
    """One method of one route: its query parameters and its JSON body's fields."""

    method: str
    path: str
    query: tuple[str, ...] = ()
    body: dict[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _resolved(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def operations(app: FastAPI) -> list[Operation]:
    """Every (method, path) the app serves, with what its OpenAPI document says it takes."""
    document = app.openapi()
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    routes = contexts(app.routes) if contexts is not None else app.routes
    found = []
    for route in routes:
        for method in sorted(set(getattr(route, "methods", None) or ()) - {"HEAD"}):
            path = str(getattr(route, "path", ""))
            spec = document["paths"].get(path, {}).get(method.lower(), {})
            query = tuple(p["name"] for p in spec.get("parameters", ()) if p["in"] == "query")
            content = spec.get("requestBody", {}).get("content", {})
            schema = _resolved(content.get("application/json", {}).get("schema", {}), document)
            body = {
                name: _resolved(part, document)
                for name, part in schema.get("properties", {}).items()
            }
            found.append(Operation(method, path, query, body, tuple(schema.get("required", ()))))
    return sorted(found, key=str)


# -- what is sent --------------------------------------------------------------------------------
SCOPE_PARTS = st.sampled_from(("sara", "fuzz")) | fs.scope_part_texts
OP_NAMES = ("get", "search", "put", "list", "list_namespaces", "nope")
NAMESPACE = st.lists(SCOPE_PARTS | fs.ANY_TEXT, max_size=3) | fs.json_junk
OPERATORS = st.dictionaries(
    st.sampled_from(("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nope", "$")),
    fs.json_junk,
    max_size=2,
)
"""A filter's operator conditions (``{"$gt": 3}``), known operators or not."""

store_ops = st.fixed_dictionaries(
    {"op": st.sampled_from(OP_NAMES) | fs.json_junk},
    optional={
        "namespace": NAMESPACE,
        "namespace_prefix": NAMESPACE,
        "key": fs.ANY_TEXT | fs.json_junk,
        "value": st.dictionaries(fs.ANY_TEXT, fs.json_junk, max_size=3) | fs.json_junk,
        "query": fs.texts | fs.json_junk,
        "filter": st.dictionaries(fs.ANY_TEXT, fs.json_junk | OPERATORS, max_size=2) | fs.json_junk,
        "index": st.just(False) | st.lists(fs.ANY_TEXT, max_size=2) | fs.json_junk,
        "limit": st.integers() | fs.json_junk,
        "offset": st.integers() | fs.json_junk,
        "match_conditions": st.lists(
            st.fixed_dictionaries(
                {"match_type": st.sampled_from(("prefix", "suffix")) | fs.json_junk},
                optional={"path": NAMESPACE},
            ),
            max_size=2,
        )
        | fs.json_junk,
        "max_depth": st.integers() | fs.json_junk,
    },
)
"""Operations of the LangGraph store route, well-formed or not."""

SPECIAL: dict[str, st.SearchStrategy[Any]] = {
    "dataset": SCOPE_PARTS,
    "task": SCOPE_PARTS,
    "messages": st.lists(fs.message_dicts | fs.chat_dicts, max_size=3),
    "ops": st.lists(store_ops, max_size=3),
}


def _typed(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the type a field declares (anything for a field it does not describe)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("format") == "date-time":
        return fs.timestamps
    kind = schema.get("type")
    if kind == "string":
        return fs.texts
    if kind == "integer":
        return st.integers(-2, 2000) | st.integers()
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(fs.ANY_TEXT | fs.texts, max_size=3)
    return fs.json_junk


def _field(name: str, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.one_of(SPECIAL.get(name, _typed(schema)), fs.junk, fs.ANY_TEXT)


def _dumps(value: object) -> bytes:
    # JSON escapes carry lone surrogates; NaN and huge numbers go as Python writes them
    return json.dumps(value, default=repr).encode()


def bodies(operation: Operation) -> st.SearchStrategy[bytes]:
    """A JSON object of the operation's fields (often malformed), or bytes that are not one."""
    fields = {name: _field(name, schema) for name, schema in operation.body.items()}
    required = {name: fields[name] for name in operation.required if name in fields}
    optional = {name: part for name, part in fields.items() if name not in required}
    shaped = st.builds(
        lambda known, extra: {**extra, **known},
        st.fixed_dictionaries(required, optional=optional),
        st.dictionaries(fs.ANY_TEXT, fs.json_junk, max_size=2) | st.just({}),
    )
    return st.one_of(shaped.map(_dumps), shaped.map(_dumps), fs.json_junk.map(_dumps), fs.raw_files)


QUERY_VALUES = st.one_of(
    st.sampled_from(("sara", "fuzz", "true", "0", "2024-03-15T14:01:00Z", "forgotten")),
    fs.ANY_TEXT,
    fs.json_junk.map(str),
)
"""Query values: short, as a URL must stay (a server refuses a longer request line itself)."""


def queries(operation: Operation) -> st.SearchStrategy[str]:
    """A query string of the operation's parameters (and unknown ones), values of any text.

    A delete is given valid scopes less often (see :data:`FEWER`).
    """
    names = st.sampled_from(operation.query) if operation.query else st.nothing()
    pairs = st.lists(st.tuples(names | fs.ANY_TEXT, QUERY_VALUES), max_size=6)
    parts = fs.scope_part_texts if operation.method == "DELETE" else SCOPE_PARTS
    scoped = st.fixed_dictionaries({"dataset": parts, "task": parts})
    return st.builds(
        lambda scope, more: urlencode(
            [*scope.items(), *more], encoding="utf-8", errors="surrogatepass"
        ),
        scoped | st.just({}),
        pairs,
    )


CONTENT_TYPES = st.sampled_from(
    ("application/json", "application/json", "text/plain", "", "multipart/form-data; boundary=x")
)


# -- the servers ---------------------------------------------------------------------------------
@dataclass
class Server:
    name: str
    app: FastAPI
    client: TestClient


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with Memory(tmp_path_factory.mktemp("fuzz") / "store", dense=HashingEncoder(64)) as opened:
        opened.add("I adopted a cat named Miso.", scope=SARA, user_name="Sara")
        yield opened


@pytest.fixture(scope="module", params=["no keys", "admin key"])
def server(
    request: pytest.FixtureRequest, memory: Memory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    keys: KeyRing | None = None
    headers: dict[str, str] = {}
    if request.param == "admin key":
        keys_file = tmp_path_factory.mktemp("keys") / "keys.toml"
        headers["Authorization"] = "Bearer " + add_key(keys_file, ["*"], Access.ADMIN, name="fuzz")
        keys = KeyRing.load(keys_file)
    app = create_app(memory, keys=keys, extensions=extensions(memory))
    # in-process: thousands of requests in seconds (a keyless server answers only loopback names)
    with TestClient(app, base_url="http://localhost", headers=headers) as client:
        yield Server(name=request.param.replace(" ", "-"), app=app, client=client)


def checked(response: Any) -> None:  # an httpx (or httpx2) response, as TestClient uses
    """A success, or an error that says what went wrong in one line: never a 500."""
    assert response.status_code < 500, (response.request.url, response.text)
    if response.status_code >= 400 and response.request.url.path.startswith("/api/"):
        body = response.json()
        assert set(body) == {"error", "type"}, body
        assert body["error"] and "\n" not in body["error"]
        assert "Traceback" not in response.text


OPERATIONS = operations(create_app(Memory.__new__(Memory), keys=None, extensions=()))
STORE_BATCH = Operation("POST", "/api/store/batch")
STORE_ROUTES = [STORE_BATCH, Operation("POST", "/api/store/sweep")]
"""The routes of the served LangGraph store (an extension); the sweep reads no body."""


def test_every_route_is_fuzzed(server: Server) -> None:
    served = {str(op) for op in operations(server.app)}
    assert {str(op) for op in [*OPERATIONS, *STORE_ROUTES]} == served
    assert "GET /api/memory/facts" in served and "DELETE /api/memory/scope" in served


@pytest.mark.parametrize("operation", [*OPERATIONS, *STORE_ROUTES], ids=str)
def test_a_route_answers_bad_input_with_a_4xx(server: Server, operation: Operation) -> None:
    served = {str(op): op for op in operations(server.app)}
    full = served[str(operation)]

    @settings(
        max_examples=FEWER.get(str(full), EXAMPLES),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(query=queries(full), body=bodies(full), content_type=CONTENT_TYPES)
    def fuzzed(query: str, body: bytes, content_type: str) -> None:
        headers = {"Content-Type": content_type} if content_type else {}
        sends_body = full.method in ("POST", "PUT", "PATCH")
        response = server.client.request(
            full.method,
            f"{full.path}?{query}",
            content=body if sends_body else None,
            headers=headers,
        )
        checked(response)

    fuzzed()


BROKEN = {
    "invalid JSON": b'{"dataset": "sara", "task": ',
    "invalid UTF-8": b'{"dataset": "sara", "task": "fuzz", "question": "\xff\xfe"}',
    "a lone surrogate in UTF-8": b'{"dataset": "sara", "task": "\xed\xa0\x80"}',
    "nested past the stack": b"[" * 100_000,
    "objects nested past the stack": b'{"a":' * 50_000,
}


@pytest.mark.parametrize("name", list(BROKEN))
@pytest.mark.parametrize(
    "operation",
    [op for op in [*OPERATIONS, STORE_BATCH] if op.method == "POST"],
    ids=str,
)
def test_a_body_that_is_no_json_is_a_422(server: Server, operation: Operation, name: str) -> None:
    headers = {"Content-Type": "application/json"}
    response = server.client.post(operation.path, content=BROKEN[name], headers=headers)
    checked(response)
    assert response.status_code == 422, response.text


def test_a_persons_review_is_recorded_with_or_without_keys(server: Server) -> None:
    scope = {"dataset": "sara", "task": f"review-{server.name}"}
    said = {"role": "user", "content": "My sister Ana moved to Lisbon last week."}
    added = server.client.post("/api/memory/add", json={**scope, "messages": [said]}).json()
    assert added["fact_ids"], added
    item = server.client.post("/api/memory/dispute", json={**scope, "fact_ids": added["fact_ids"]})
    assert item.status_code == 200, item.text
    resolved = server.client.post(
        "/api/memory/review/resolve", json={**scope, "item_id": item.json()["id"], "note": "ok"}
    )
    assert resolved.status_code == 200, resolved.text


def test_an_error_quoting_a_lone_surrogate_is_still_a_json_answer(server: Server) -> None:
    body = b'{"dataset": "sara", "task": "sara", "fact_ids": ["\\ud800"]}'
    headers = {"Content-Type": "application/json"}
    response = server.client.post("/api/memory/dispute", content=body, headers=headers)
    checked(response)
    assert response.status_code == 404 and response.json()["type"] == "NotFoundError"
