"""The HTTP server, driven over a real socket: endpoints, per-dataset keys, error bodies."""

from __future__ import annotations

import json
import logging
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastapi.routing
import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from membrain import BackendError, ConfigurationError, Memory, Scope, StoreInUseError
from membrain.api.operations import OPERATIONS
from membrain.background import BackgroundWriter
from membrain.server import Access, KeyRing, add_key, create_app, serve, serve_in_thread
from membrain.server.app import route_role
from membrain.server.keys import Forbidden, Unauthenticated, hash_key
from membrain.server.run import check_host
from membrain.testing import HashingEncoder

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
SARA = {"dataset": "sara", "task": "assistant"}
REFERENCE_BODY = {
    "dataset": "sara",
    "task": "assistant",
    "question": "What is the cat called?",
    "mode": "fast",
}


@dataclass
class Served:
    url: str
    app: FastAPI
    memory: Memory
    writer: BackgroundWriter
    keys: dict[str, str]

    def client(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.keys[key]}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("server")
    keys_file = root / "keys.toml"
    keys = {
        "sara-writer": add_key(keys_file, ["sara"], Access.WRITE, name="sara-writer"),
        "sara-reader": add_key(keys_file, ["sara"], "read", name="sara-reader"),
        "admin": add_key(keys_file, ["*"], "admin", name="admin"),
        "tom-writer": add_key(keys_file, ["tom"], "write", name="tom-writer"),
    }
    memory = Memory(root / "store", dense=HashingEncoder(dim=64))
    writer = BackgroundWriter(memory, idle_seconds=30.0)
    app = create_app(memory, keys=KeyRing.load(keys_file), writer=writer, close_memory=True)
    with serve_in_thread(app) as url:
        state = Served(url=url, app=app, memory=memory, writer=writer, keys=keys)
        with state.client("sara-writer") as client:
            response = client.post("/api/memory/add", json={**SARA, "messages": CONVERSATION})
            assert response.status_code == 200, response.text
        yield state
    assert not writer.alive  # the app's shutdown stopped the writer


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The error body of ``response``, checked: the status, one line, no traceback."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "type"}
    assert body["error"] and "\n" not in body["error"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    return body


def seed(served: Served, task: str, messages: list[dict[str, Any]]) -> list[str]:
    with served.client("sara-writer") as client:
        response = client.post(
            "/api/memory/add", json={"dataset": "sara", "task": task, "messages": messages}
        )
    assert response.status_code == 200, response.text
    ids: list[str] = response.json()["fact_ids"]
    return ids


# -- happy paths ---------------------------------------------------------------------------------
def test_health_needs_no_key(served: Served) -> None:
    response = httpx.get(f"{served.url}/api/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_the_reference_search_body_works_verbatim(served: Served) -> None:
    with served.client("sara-reader") as client:
        response = client.post("/api/memory/search", json=REFERENCE_BODY)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"question", "requested", "hits", "mode", "paths", "escalated"}
    assert body["mode"] == "fast"
    assert body["paths"] and all(isinstance(p, str) for p in body["paths"])
    top = body["hits"][0]
    assert "Miso" in top["text"]
    assert top["fact"]["scope"]["dataset"] == "sara"
    assert [m["source_id"] for m in top["sources"]] == ["m1"]


def test_search_answers_name_paths_and_still_read_their_letters(served: Served) -> None:
    body = {**REFERENCE_BODY, "mode": "expand"}
    with served.client("sara-reader") as client:
        full = client.post("/api/memory/search", json=body).json()
        named = client.post("/api/memory/search", json={**body, "exclude_paths": ["hyde"]})
        lettered = client.post("/api/memory/search", json={**body, "exclude_paths": ["B2"]})
    assert full["paths"][:4] == ["bm25", "dense", "hyde", "event"]
    assert {p for h in full["hits"] for p in h["paths"]} <= set(full["paths"])
    assert lettered.status_code == named.status_code == 200, lettered.text
    assert lettered.json() == named.json() and "hyde" not in named.json()["paths"]


def test_add_reports_what_it_stored_and_the_audit_names_the_key(served: Served) -> None:
    message = {
        "id": "a1",
        "speaker": "Sara",
        "text": "My sister Ana moved to Lisbon last month.",
        "timestamp": "2024-04-01T10:00:00Z",
    }
    with served.client("sara-writer") as client:
        body = {"dataset": "sara", "task": "adds", "messages": [message]}
        first = client.post("/api/memory/add", json=body).json()
        again = client.post("/api/memory/add", json=body).json()
    assert first["messages_stored"] == 1 and first["fact_ids"] and first["errors"] == []
    assert first["scheduled"] is False
    assert again["messages_stored"] == 0 and again["messages_skipped"] == 1
    with served.client("sara-reader") as client:
        events = client.get(
            "/api/memory/audit", params={"dataset": "sara", "task": "adds", "actions": "stored"}
        ).json()
    assert [e["actor"] for e in events] == [{"kind": "api", "name": "sara-writer"}]


def test_add_without_extraction_hands_it_to_the_writer(served: Served) -> None:
    message = {
        "id": "b1",
        "speaker": "Sara",
        "text": "I bought a red bicycle on Monday.",
        "timestamp": "2024-05-06T09:00:00Z",
    }
    scope = {"dataset": "sara", "task": "later"}
    with served.client("sara-writer") as client:
        added = client.post(
            "/api/memory/add", json={**scope, "messages": [message], "extract": False}
        ).json()
        assert added["scheduled"] is True and added["fact_ids"] == []
        stored = client.get("/api/memory/messages", params=scope).json()
        assert [m["status"] for m in stored] == ["pending"]
        assert served.writer.flush(timeout=30.0)
        assert [m["status"] for m in client.get("/api/memory/messages", params=scope).json()] == [
            "processed"
        ]
        facts = client.get("/api/memory/facts", params=scope).json()
    assert any("bicycle" in f["text"] for f in facts)


def test_extract_runs_the_pending_messages_now(served: Served) -> None:
    message = {
        "id": "e1",
        "speaker": "Sara",
        "text": "I started learning the violin in May.",
        "timestamp": "2024-06-02T09:00:00Z",
    }
    scope = {"dataset": "sara", "task": "extract-now"}
    with served.client("sara-writer") as client:
        client.post("/api/memory/add", json={**scope, "messages": [message], "extract": False})
        extracted = client.post("/api/memory/extract", json=scope)
        again = client.post("/api/memory/extract", json=scope).json()
        stored = client.get("/api/memory/messages", params={**scope, "ids": ["e1", "nope"]})
    assert extracted.status_code == 200, extracted.text
    assert extracted.json()["fact_ids"] and extracted.json()["errors"] == []
    assert again["fact_ids"] == []  # never extracted twice
    assert [m["status"] for m in stored.json()] == ["processed"]
    with served.client("sara-reader") as client:  # extraction writes: a read key may not
        assert "write" in error_of(client.post("/api/memory/extract", json=scope), 403)["error"]


def test_an_add_of_too_many_messages_is_refused_whole(served: Served) -> None:
    message = {"speaker": "Sara", "text": "hi", "timestamp": "2024-03-15T14:01:00Z"}
    scope = {"dataset": "sara", "task": "flood"}
    with served.client("sara-writer") as client:
        response = client.post("/api/memory/add", json={**scope, "messages": [message] * 5001})
        stored = client.get("/api/memory/messages", params=scope).json()
    assert "5000" in error_of(response, 422)["error"] and stored == []


def test_a_message_id_reused_for_another_text_is_409(served: Served) -> None:
    changed = {**CONVERSATION[0], "text": "I adopted a dog named Rex."}
    with served.client("sara-writer") as client:
        response = client.post("/api/memory/add", json={**SARA, "messages": [changed]})
        stored = client.get("/api/memory/messages", params={**SARA, "ids": "m1"}).json()
    body = error_of(response, 409)
    assert body["type"] == "ConflictError" and "m1" in body["error"]
    assert [m["message"]["text"] for m in stored] == [CONVERSATION[0]["text"]]


def test_review_and_purge_over_http(served: Served) -> None:
    cat, _ = seed(served, "review-http", CONVERSATION)
    scope = {"dataset": "sara", "task": "review-http"}
    with served.client("sara-writer") as client:
        item = client.post("/api/memory/dispute", json={**scope, "fact_ids": [cat]}).json()
        queue = client.get("/api/memory/review", params=scope).json()
        resolved = client.post(
            "/api/memory/review/resolve", json={**scope, "item_id": item["id"], "accept": True}
        )
        refused = client.post("/api/memory/purge", json={**scope, "fact_ids": [cat]})
    assert [q["id"] for q in queue] == [item["id"]] and item["fact_ids"] == [cat]
    assert resolved.status_code == 200, resolved.text
    assert "admin" in error_of(refused, 403)["error"]
    with served.client("admin") as client:
        purged = client.post(
            "/api/memory/purge", json={**scope, "fact_ids": [cat], "sources": True}
        ).json()
        both = client.post(
            "/api/memory/purge",
            json={**scope, "fact_ids": [cat], "sources": True, "message_ids": ["x"]},
        )
        messages = client.get("/api/memory/messages", params=scope).json()
    assert purged["fact_ids"] == [cat] and len(purged["message_ids"]) == 1
    assert [m["message"]["source_id"] for m in messages] == ["m2"]
    assert "not both" in error_of(both, 422)["error"]


@pytest.mark.parametrize(
    ("route", "extra"),
    [
        ("/api/memory/purge", {"sources": True}),
        ("/api/memory/forget", {}),
        ("/api/memory/dispute", {}),
    ],
)
def test_a_change_with_a_reason_it_cannot_record_is_a_422_and_changes_nothing(
    served: Served, route: str, extra: dict[str, Any]
) -> None:
    """A lone surrogate in the reason: refused before anything is written, retried cleanly."""
    task = f"surrogate-{route.rsplit('/', 1)[-1]}"
    cat, _ = seed(served, task, CONVERSATION)
    scope = {"dataset": "sara", "task": task}
    body = {**scope, "fact_ids": [cat], **extra}
    raw = json.dumps({**body, "reason": "x"}).replace('"reason": "x"', '"reason": "x\\ud800"')
    with served.client("admin") as client:
        refused = client.post(route, content=raw, headers={"content-type": "application/json"})
        facts = client.get("/api/memory/facts", params=scope).json()
        audit = client.get("/api/memory/audit", params=scope).json()
        retried = client.post(route, json={**body, "reason": "asked to"})
    assert "reason" in error_of(refused, 422)["error"]
    assert cat in [f["id"] for f in facts] and {f["trust"] for f in facts} == {"stated"}
    assert {e["action"] for e in audit} == {"stored", "processed", "created"}
    assert retried.status_code == 200, retried.text


def test_message_search_and_derived_facts(served: Served) -> None:
    body = {**SARA, "question": "bakery in Porto", "k": 1, "paths": ["sparse"]}
    with served.client("sara-reader") as client:
        found = client.post("/api/memory/messages/search", json=body)
        bad = client.post("/api/memory/messages/search", json={**body, "paths": ["C"]})
        derived = client.get("/api/memory/facts", params={**SARA, "derived_from": "m2"}).json()
    assert found.status_code == 200, found.text
    [hit] = found.json()
    assert hit["message"]["source_id"] == "m2" and hit["score"] > 0
    assert "sparse" in error_of(bad, 422)["error"]
    assert len(derived) == 1 and "bakery" in derived[0]["text"]


def test_context_fits_the_budget_and_cites(served: Served) -> None:
    body = {**SARA, "question": "Where is the bakery?", "mode": "fast", "max_tokens": 300}
    with served.client("sara-reader") as client:
        response = client.post("/api/memory/context", json=body)
    assert response.status_code == 200, response.text
    context = response.json()
    assert 0 < context["tokens"] <= 300 and context["max_tokens"] == 300
    assert "Porto" in context["text"] and context["hits"]


def test_facts_and_messages_list_the_scope(served: Served) -> None:
    with served.client("sara-reader") as client:
        facts = client.get("/api/memory/facts", params=SARA).json()
        messages = client.get("/api/memory/messages", params=SARA).json()
    assert {f["scope"]["task"] for f in facts} == {"assistant"}
    assert any("Miso" in f["text"] for f in facts)
    assert [m["message"]["source_id"] for m in messages] == ["m1", "m2"]
    assert {m["status"] for m in messages} == {"processed"}


def test_forget_then_history_and_audit_tell_who_and_why(served: Served) -> None:
    (fact_id,) = seed(
        served,
        "forgetting",
        [{"speaker": "Sara", "text": "I play chess on Sundays.", "timestamp": "2024-03-10T08:00Z"}],
    )
    scope = {"dataset": "sara", "task": "forgetting"}
    with served.client("sara-writer") as client:
        forgotten = client.post(
            "/api/memory/forget", json={**scope, "fact_ids": [fact_id], "reason": "wrong"}
        )
        assert forgotten.status_code == 200, forgotten.text
        assert [f["status"] for f in forgotten.json()] == ["forgotten"]
        assert client.get("/api/memory/facts", params=scope).json() == []
        every = client.get("/api/memory/facts", params={**scope, "include_inactive": True}).json()
        assert [f["id"] for f in every] == [fact_id]
        history = client.get("/api/memory/history", params={**scope, "fact_id": fact_id}).json()
        audit = client.get("/api/memory/audit", params={**scope, "actions": "forgotten"}).json()
    assert history["fact_id"] == fact_id
    assert [e["action"] for e in history["events"]][-1] == "forgotten"
    assert [(e["actor"]["name"], e["reason"], e["targets"]) for e in audit] == [
        ("sara-writer", "wrong", [fact_id])
    ]


def test_supersede_keeps_the_old_fact_and_links_the_new(served: Served) -> None:
    old, new = seed(
        served,
        "moves",
        [
            {"speaker": "Sara", "text": "I live in Berlin.", "timestamp": "2023-01-01T00:00Z"},
            {"speaker": "Sara", "text": "I live in Madrid now.", "timestamp": "2024-01-01T00:00Z"},
        ],
    )[:2]
    body = {"dataset": "sara", "task": "moves", "old_fact_id": old, "new_fact_ids": [new]}
    with served.client("sara-writer") as client:
        response = client.post("/api/memory/supersede", json={**body, "reason": "moved"})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "superseded"
    assert response.json()["superseded_by"] == [new]


def test_an_admin_deletes_a_scope_a_writer_cannot(served: Served) -> None:
    seed(served, "doomed", [CONVERSATION[0]])
    scope = {"dataset": "sara", "task": "doomed"}
    with served.client("sara-writer") as client:
        refused = client.delete("/api/memory/scope", params=scope)
    assert error_of(refused, 403)["type"] == "Forbidden"
    with served.client("admin") as client:
        assert client.get("/api/memory/facts", params=scope).json() != []
        deleted = client.delete("/api/memory/scope", params=scope)
        assert deleted.json() == {**scope, "session": None}
        assert client.get("/api/memory/facts", params=scope).json() == []
        assert client.get("/api/memory/messages", params=scope).json() == []


def test_the_openapi_document_lists_the_routes_and_their_roles(served: Served) -> None:
    document = httpx.get(f"{served.url}/openapi.json").json()
    search = document["paths"]["/api/memory/search"]["post"]
    assert search["x-membrain-role"] == "read"
    assert document["paths"]["/api/memory/scope"]["delete"]["x-membrain-role"] == "admin"
    assert httpx.get(f"{served.url}/docs").status_code == 200


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({**SARA, "question": "   "}, "InputError"),
        ({**SARA, "question": "cat?", "k": 0}, "InputError"),
        ({**SARA, "question": "cat?", "mode": "psychic"}, "ConfigurationError"),
        ({**SARA, "question": "cat?", "colour": "red"}, "InputError"),
        ({"dataset": "sara", "task": "", "question": "cat?"}, "ScopeError"),
        ({"task": "assistant", "question": "cat?"}, "ScopeError"),
        ({**SARA}, "InputError"),
    ],
)
def test_bad_input_is_a_422_with_one_line(served: Served, body: dict[str, Any], kind: str) -> None:
    with served.client("sara-reader") as client:
        response = client.post("/api/memory/search", json=body)
    assert error_of(response, 422)["type"] == kind


def test_an_unknown_audit_action_is_a_422(served: Served) -> None:
    with served.client("sara-reader") as client:
        response = client.get("/api/memory/audit", params={**SARA, "actions": "exploded"})
    assert error_of(response, 422)["type"] == "ConfigurationError"


def test_openai_style_messages_are_accepted(served: Served) -> None:
    scope = {"dataset": "sara", "task": "openai"}
    chat = [{"role": "user", "content": "I adopted a dog named Rex."}]
    with served.client("sara-writer") as client:
        added = client.post("/api/memory/add", json={**scope, "messages": chat})
        assert added.status_code == 200, added.text
        stored = client.get("/api/memory/messages", params=scope).json()
    assert [m["message"]["text"] for m in stored] == ["I adopted a dog named Rex."]


def test_a_malformed_message_is_a_422_and_stores_nothing(served: Served) -> None:
    scope = {"dataset": "sara", "task": "malformed"}
    bad = {"speaker": "Sara", "text": " ", "timestamp": "2024-03-15T14:01:00Z"}
    with served.client("sara-writer") as client:
        response = client.post("/api/memory/add", json={**scope, "messages": [bad]})
        assert "neither text nor caption" in error_of(response, 422)["error"]
        assert client.get("/api/memory/messages", params=scope).json() == []


def test_an_unknown_fact_id_is_a_404(served: Served) -> None:
    unknown = str(uuid.uuid4())
    with served.client("sara-writer") as client:
        forget = client.post("/api/memory/forget", json={**SARA, "fact_ids": [unknown]})
        history = client.get("/api/memory/history", params={**SARA, "fact_id": unknown})
        supersede = client.post(
            "/api/memory/supersede",
            json={**SARA, "old_fact_id": unknown, "new_fact_ids": [str(uuid.uuid4())]},
        )
    assert unknown in error_of(forget, 404)["error"]
    assert error_of(history, 404)["type"] == "FactNotFound"
    assert error_of(supersede, 404)["type"] == "NotFoundError"


def test_missing_or_unknown_keys_are_401_and_logged(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="membrain.server")
    with served.client(None) as client:
        missing = client.post("/api/memory/search", json=REFERENCE_BODY)
        unknown = client.post(
            "/api/memory/search",
            json=REFERENCE_BODY,
            headers={"Authorization": "Bearer mb_not-a-key"},
        )
        basic = client.get("/api/memory/facts", params=SARA, headers={"Authorization": "Basic x"})
    for response in (missing, unknown, basic):
        assert error_of(response, 401)["type"] == "Unauthenticated"
    refused = [r for r in caplog.records if r.name == "membrain.server" and "refused" in r.message]
    assert len(refused) == 3
    assert "mb_not-a-key" not in caplog.text


def test_a_read_key_cannot_write(served: Served) -> None:
    with served.client("sara-reader") as client:
        add = client.post("/api/memory/add", json={**SARA, "messages": CONVERSATION})
        forget = client.post("/api/memory/forget", json={**SARA, "fact_ids": ["x"]})
    assert "read" in error_of(add, 403)["error"]
    assert error_of(forget, 403)["type"] == "Forbidden"


@pytest.mark.parametrize("error", [BackendError("engine down"), StoreInUseError("pid 42")])
def test_a_failing_store_is_a_503(
    served: Served, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(served.memory, "_run_search", fail)
    with served.client("sara-reader") as client:
        response = client.post("/api/memory/search", json=REFERENCE_BODY)
    assert error_of(response, 503)["type"] == type(error).__name__


def test_an_unexpected_error_is_a_generic_500(
    served: Served, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret detail at /srv/data")

    monkeypatch.setattr(served.memory, "_run_facts", fail)
    with served.client("sara-reader") as client:
        response = client.get("/api/memory/facts", params=SARA)
        after = client.get("/api/memory/messages", params=SARA)
    body = error_of(response, 500)
    assert body == {"error": "internal server error", "type": "InternalError"}
    assert "secret" not in response.text
    assert "secret detail" in caplog.text  # the operator's log has it
    assert after.status_code == 200  # the server keeps serving


# -- every scoped route checks the key's dataset -------------------------------------------------
def memory_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path) of every route under /api/memory, whatever kind of route it is."""
    # Recent FastAPI keeps an included router as one entry; iter_route_contexts opens it.
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    routes = contexts(app.routes) if contexts is not None else app.routes
    return sorted(
        (method, route.path)
        for route in routes
        if (route.path or "").startswith("/api/memory")
        for method in route.methods or ("ANY",)
    )


# The routes are declared without touching the memory: an unopened one lists them.
ROUTES = memory_routes(create_app(Memory.__new__(Memory), keys=None))


def test_the_route_list_is_the_served_one(served: Served) -> None:
    assert memory_routes(served.app) == ROUTES
    assert len(ROUTES) == len(OPERATIONS)


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_key_for_another_dataset_is_refused_on_every_route(
    served: Served, method: str, path: str
) -> None:
    scope = {"dataset": "sara", "task": "probe"}
    query = {**scope, "fact_id": str(uuid.uuid4())}
    kwargs: dict[str, Any] = {"json": scope} if method == "POST" else {"params": query}
    with served.client("tom-writer") as client:
        refused = client.request(method, path, **kwargs)
    assert "tom-writer" in error_of(refused, 403)["error"]
    with served.client("admin") as client:  # the same request passes the check with a sara key
        allowed = client.request(method, path, **kwargs)
    assert allowed.status_code not in (401, 403), allowed.text


def test_a_route_that_declares_no_role_needs_admin() -> None:
    route = APIRoute("/api/memory/new", endpoint=lambda: None)
    assert route_role(route) is Access.ADMIN
    assert route_role(None) is Access.ADMIN


# -- keys and serving ----------------------------------------------------------------------------
def test_add_key_stores_only_the_hash_in_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    key = add_key(path, ["sara", "tom"], "write", name="app")
    assert key.startswith("mb_") and len(key) > 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key not in path.read_text() and hash_key(key) in path.read_text()
    ring = KeyRing.load(path)
    grant = ring.authorize(key, "tom", Access.READ)
    assert (grant.name, grant.role) == ("app", Access.WRITE)
    with pytest.raises(Forbidden):
        ring.authorize(key, "sara", Access.ADMIN)
    with pytest.raises(Forbidden):
        ring.authorize(key, "ana", Access.READ)
    with pytest.raises(Unauthenticated):
        ring.authorize(key + "x", "sara", Access.READ)
    second = add_key(path, ["*"], "read")
    assert KeyRing.load(path).authorize(second, "anyone", Access.READ).name.startswith("key-")


@pytest.mark.parametrize(
    "text",
    [
        "[[key]\n",
        '[[key]]\nhash = "abc"\ndatasets = ["sara"]\nrole = "read"\n',
        f'[[key]]\nhash = "{"a" * 64}"\ndatasets = ["sara"]\nrole = "owner"\n',
        f'[[key]]\nhash = "{"a" * 64}"\ndatasets = "sara"\nrole = "read"\n',
        f'[[key]]\nhash = "{"a" * 64}"\ndatasets = [""]\nrole = "read"\n',
        f'[[key]]\nhash = "{"a" * 64}"\ndatasets = ["sara"]\nrole = "read"\nsecret = 1\n',
    ],
)
def test_a_malformed_keys_file_is_a_configuration_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "keys.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError):
        KeyRing.load(path)
    with pytest.raises(ConfigurationError):
        add_key(path, ["sara"], "read")  # never appends to a broken file
    assert path.read_text() == text


def test_the_server_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with pytest.raises(ConfigurationError, match="without API keys"):
        serve(path=store, host="0.0.0.0", port=0)
    assert not store.exists()  # refused before opening anything
    for host in ("127.0.0.1", "localhost", "::1"):
        check_host(host, None)
    for host in ("0.0.0.0", "::", "10.1.2.3", "example.org"):
        with pytest.raises(ConfigurationError):
            check_host(host, None)
    check_host("0.0.0.0", KeyRing())
    with pytest.raises(ConfigurationError, match="does not exist"):
        serve(path=store, host="0.0.0.0", port=0, keys_file=tmp_path / "missing.toml")
    assert not store.exists()


def test_shutdown_flushes_the_writer_and_closes_the_memory(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "store", dense=HashingEncoder(dim=64))
    writer = BackgroundWriter(memory, idle_seconds=60.0)
    app = create_app(memory, keys=None, writer=writer, close_memory=True)
    scope = {"dataset": "sara", "task": "shutdown"}
    with serve_in_thread(app) as url:
        response = httpx.post(
            f"{url}/api/memory/add", json={**scope, "messages": CONVERSATION, "extract": False}
        )
        assert response.json()["scheduled"] is True
    assert not writer.alive
    with Memory(tmp_path / "store", dense=HashingEncoder(dim=64)) as reopened:  # lock released
        facts = reopened.facts(scope=Scope(**scope))
    assert len(facts) == 2
