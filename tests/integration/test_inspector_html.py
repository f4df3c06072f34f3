"""The inspector's pages as HTML, in process (``TestClient``): edges of input, failures, marks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from membrain import Memory, Scope
from membrain.api.requests import CONTEXT_MIN_RELEVANCE
from membrain.files.transfer import export_scope, import_scope
from membrain.server import create_app
from membrain.server.inspector import SECURITY_HEADERS
from membrain.testing import HashingEncoder

SARA = Scope(dataset="sara", task="assistant")
CHAT = [
    {"speaker": "Sara", "text": "I adopted a cat named Miso.", "timestamp": "2024-03-15T14:01Z"},
    {"speaker": "Sara", "text": "I live in Lisbon.", "timestamp": "2024-03-15T14:03Z"},
]


class Rows(HTMLParser):
    """The event rows of ``table.events``: each row's text and the classes of its badges."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, set[str]]] = []
        self._in_table = False
        self._row: list[str] | None = None
        self._badges: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "table" and "events" in classes:
            self._in_table = True
        elif tag == "tr" and self._in_table and any(c.startswith("action-") for c in classes):
            self._row, self._badges = [], set()
        elif tag == "span" and self._row is not None and "badge" in classes:
            self._badges |= classes - {"badge"}

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False
        elif tag == "tr" and self._row is not None:
            self.rows.append((" ".join("".join(self._row).split()), self._badges))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None:
            self._row.append(data)


def event_rows(html: str) -> list[tuple[str, set[str]]]:
    parser = Rows()
    parser.feed(html)
    return parser.rows


def secured(response: Any) -> bool:  # an httpx (or httpx2) response, as TestClient uses
    headers = response.headers
    return all(headers.get(name) == value for name, value in SECURITY_HEADERS.items())


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with Memory(tmp_path_factory.mktemp("inspector") / "store", dense=HashingEncoder(64)) as mem:
        mem.add(CHAT, scope=SARA)
        yield mem


@pytest.fixture(scope="module")
def client(memory: Memory) -> Iterator[TestClient]:
    # a server without keys answers loopback hosts only
    with TestClient(create_app(memory, keys=None), base_url="http://localhost") as served:
        yield served


def audit(client: TestClient, **query: str) -> Any:
    return client.get("/ui/audit", params={"dataset": SARA.dataset, "task": SARA.task, **query})


# -- dates at the calendar's edges -------------------------------------------------------------
@pytest.mark.parametrize(
    "query",
    [
        {"until": "9999-12-31"},
        {"until": "9999-12-31T23:00-05:00"},
        {"since": "0001-01-01T00:00+01:00"},
        {"since": "9999-12-31", "until": "9999-12-31"},
        {"since": "0001-01-01", "until": "0001-01-01"},
    ],
)
def test_a_date_at_the_calendars_edge_is_that_edge(
    client: TestClient, query: dict[str, str]
) -> None:
    response = audit(client, **query)
    assert response.status_code == 200, response.text
    assert secured(response)


def test_until_the_calendars_last_day_keeps_every_event(client: TestClient) -> None:
    every = event_rows(audit(client).text)
    assert every
    assert event_rows(audit(client, until="9999-12-31").text) == every
    assert event_rows(audit(client, since="9999-12-31").text) == []


# -- failures ----------------------------------------------------------------------------------
def test_an_unexpected_failure_answers_the_error_page_with_the_security_headers(
    client: TestClient, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the disk caught fire at /secret/path")

    monkeypatch.setattr(memory, "audit", broken)
    response = audit(client)
    assert response.status_code == 500
    assert secured(response)
    assert response.headers["content-type"].startswith("text/html")
    assert "Cannot show this page" in response.text
    assert "/secret/path" not in response.text
    assert "Traceback" not in response.text


def test_the_frameworks_own_answers_carry_the_security_headers(client: TestClient) -> None:
    assert secured(client.get("/ui/no-such-page"))
    assert secured(audit(client, page="not a number"))
    assert secured(client.get("/ui/static/inspector.css"))


# -- imported events ---------------------------------------------------------------------------
def test_imported_events_are_marked_on_the_fact_and_audit_pages(tmp_path: Path) -> None:
    with Memory(tmp_path / "source", dense=HashingEncoder(dim=64)) as source:
        source.add(CHAT, scope=SARA)
        lisbon = next(f.id for f in source.facts(scope=SARA) if "Lisbon" in f.text)
        source.forget([lisbon], scope=SARA, by="reviewer:ana", reason="she moved")
        lines = [json.dumps(record) for record in export_scope(source, SARA)]
    with Memory(tmp_path / "copy", dense=HashingEncoder(dim=64)) as copy:
        import_scope(copy, SARA, lines)
        copy.forget(
            [next(f.id for f in copy.facts(scope=SARA) if "Miso" in f.text)],
            scope=SARA,
            by="reviewer:tom",
            reason="asked to",
        )
        with TestClient(create_app(copy, keys=None), base_url="http://localhost") as client:
            pages = {
                "audit": audit(client).text,
                "fact": client.get(
                    "/ui/fact", params={"dataset": "sara", "task": "assistant", "id": lisbon}
                ).text,
            }
    for name, html in pages.items():
        rows = event_rows(html)
        (forgotten,) = [r for r in rows if "reviewer:ana" in r[0]]
        assert "imported" in forgotten[1] and "imported" in forgotten[0], (name, forgotten)
        assert any("sara/assistant" not in r[0] and "imported" in r[1] for r in rows), name
    rows = event_rows(pages["audit"])
    (here,) = [r for r in rows if "reviewer:tom" in r[0]]  # written in this store: no mark
    assert "imported" not in here[1]
    assert all("imported" not in r[1] for r in rows if "api:import" in r[0])


# -- relevance on the search page --------------------------------------------------------------
def search_page(client: TestClient, **query: str) -> Any:
    params = {"dataset": SARA.dataset, "task": SARA.task, **query}
    return client.get("/ui/search", params=params)


def test_the_search_page_shows_relevance_and_takes_a_minimum(
    client: TestClient, memory: Memory
) -> None:
    question = "What is the cat called?"
    hits = memory.search(question, scope=SARA, k=8).hits
    shown = search_page(client, q=question)
    assert shown.status_code == 200 and secured(shown)
    assert shown.text.count('class="relevance"') == len(hits) > 0
    assert f"relevance {hits[0].relevance:.2f}" in shown.text
    assert 'name="min_relevance"' in shown.text
    floor = hits[0].relevance
    kept = sum(h.relevance >= floor for h in hits)
    strict = search_page(client, q=question, min_relevance=str(floor))
    assert strict.text.count('class="relevance"') == kept
    assert f'value="{floor:g}"' in strict.text
    # the hashing encoder has no relevance calibration: no default floor, so one is given
    absent = "What is quantum chromodynamics?"
    nothing = search_page(client, q=absent, min_relevance=str(CONTEXT_MIN_RELEVANCE))
    assert "nothing relevant" in nothing.text
    for odd in ("abc", "nan", "7"):  # not a number: no minimum; out of range: clamped
        assert search_page(client, q=question, min_relevance=odd).status_code == 200


# -- the recall trace --------------------------------------------------------------------------
def test_a_fact_page_lists_its_runs_and_a_run_page_what_it_was_told(tmp_path: Path) -> None:
    with Memory(tmp_path / "store", dense=HashingEncoder(dim=64), trace_recalls=True) as mem:
        mem.add(CHAT, scope=SARA)
        hits = mem.search("Where does Sara live?", scope=SARA, k=2, run="thread-<9>")
        mem.search("Anything else?", scope=SARA, k=1, run="other")
        first = hits[0].fact
        scoped = {"dataset": SARA.dataset, "task": SARA.task}
        with TestClient(create_app(mem, keys=None), base_url="http://localhost") as client:
            fact_html = client.get("/ui/fact", params={**scoped, "id": first.id}).text
            run = client.get("/ui/run", params={**scoped, "id": "thread-<9>"})
            nameless = client.get("/ui/run", params={**scoped, "id": " "})
    assert "Runs it was given to" in fact_html
    assert "thread-&lt;9&gt;" in fact_html and "<9>" not in fact_html  # escaped
    assert "/ui/run?dataset=sara&amp;task=assistant&amp;id=thread-%3C9%3E" in fact_html
    assert run.status_code == 200 and secured(run)
    assert "Where does Sara live?" in run.text and "Anything else?" not in run.text
    shown = [h.fact.id for h in hits]
    positions = [run.text.index(f"id={fact_id}") for fact_id in shown]
    assert positions == sorted(positions)  # in the order they were given
    assert nameless.status_code == 400
