"""The inspector in a real headless Chromium against a real ``membrain serve``.

One server process (the command line's ``serve``, with a keys file) and one browser serve the
whole module; the memory is seeded over the HTTP API. Every page visited is photographed at a
laptop and a phone width under the module's temporary folder (``screens``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait
from unit.writer_clock import wait_until

from membrain import RemoteMemory, Scope
from membrain.server import add_key

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTHS = {"laptop": 1280, "phone": 390}

HOME = Scope(dataset="sara", task="assistant")
SUPPORT = Scope(dataset="sara", task="support")
OTHER = Scope(dataset="ana", task="assistant")


@dataclass
class Site:
    """The served memory: its URL, keys by name, seeded fact ids and the screenshots folder."""

    url: str
    keys: dict[str, str]
    facts: dict[str, str]
    screens: Path

    def remote(self, name: str = "admin") -> RemoteMemory:
        return RemoteMemory(self.url, self.keys[name])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _said(text: str, at: str) -> list[dict[str, str]]:
    return [{"speaker": "Sara", "text": text, "timestamp": at}]


def _seed(site: Site) -> None:
    with site.remote() as mem:
        (lisbon,) = mem.add(
            _said("I live in Lisbon with my partner Joao.", "2023-01-10T10:00:00Z"), scope=HOME
        ).fact_ids
        (berlin,) = mem.add(
            _said("Big news: I moved to Berlin last month.", "2024-05-02T10:00:00Z"), scope=HOME
        ).fact_ids
        (miso,) = mem.add(
            _said("I adopted a cat named Miso.", "2024-06-01T09:00:00Z"), scope=SUPPORT
        ).fact_ids
        (nurse,) = mem.add(
            _said("I work as a nurse at the children's hospital.", "2024-06-02T09:00:00Z"),
            scope=SUPPORT,
        ).fact_ids
        mem.dispute([miso], scope=SUPPORT, reason="no cat in the adoption records")
        mem.dispute([nurse], scope=SUPPORT, reason="she said teacher last week")
        mem.add(_said("I run a bakery in Porto.", "2024-05-02T10:00:00Z"), scope=OTHER)
    site.facts.update(lisbon=lisbon, berlin=berlin, miso=miso, nurse=nurse)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("inspector")
    keys_file = root / "keys.toml"
    keys = {
        "admin": add_key(keys_file, ["*"], "admin", name="admin"),
        "ana": add_key(keys_file, ["sara"], "write", name="ana"),
        "reader": add_key(keys_file, ["sara"], "read", name="reader"),
    }
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRAIN_")}
    command = [sys.executable, "-m", "membrain.cli", "serve", "--path", str(root / "store")]
    command += ["--keys", str(keys_file), "--port", str(port), "--log-level", "warning"]
    with (root / "serve.log").open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            url = f"http://127.0.0.1:{port}"

            def answers() -> bool:
                assert server.poll() is None, (root / "serve.log").read_text()
                try:
                    return httpx.get(f"{url}/api/health", timeout=2).status_code == 200
                except httpx.TransportError:
                    return False

            if not wait_until(answers, timeout=120):  # a hang guard, not a speed check
                pytest.fail("membrain serve did not answer /api/health")
            screens = root / "screens"
            screens.mkdir()
            served = Site(url=url, keys=keys, facts={}, screens=screens)
            _seed(served)
            yield served
        finally:
            server.terminate()
            server.wait(timeout=90)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={WIDTHS['laptop']},900")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


# -- helpers -------------------------------------------------------------------------------------
def until_url(browser: WebDriver, part: str) -> None:
    """Wait for the page a click or a form led to."""
    WebDriverWait(browser, 15).until(expected_conditions.url_contains(part))


def until_shown(browser: WebDriver, css: str, words: str) -> None:
    """Wait until the element ``css`` of the new page holds ``words``."""
    located = (By.CSS_SELECTOR, css)
    WebDriverWait(browser, 15).until(
        expected_conditions.text_to_be_present_in_element(located, words)
    )


def shoot(browser: WebDriver, site: Site, name: str) -> None:
    """Photograph the whole page at a laptop and a phone width."""
    for label, width in WIDTHS.items():
        browser.set_window_size(width, 900)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(width, min(int(height) + 140, 4000))
        assert browser.save_screenshot(str(site.screens / f"{name}-{label}.png"))
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, f"{name} scrolls sideways at {width}px"
    browser.set_window_size(WIDTHS["laptop"], 900)


def sign_in(browser: WebDriver, site: Site, name: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{site.url}/ui/")
    assert "/ui/signin" in browser.current_url
    browser.find_element(By.ID, "key").send_keys(site.keys[name])
    browser.find_element(By.CSS_SELECTOR, "form.signin button").click()
    until_shown(browser, ".who", f"signed in as {name}")


def page(browser: WebDriver, site: Site, path: str, scope: Scope, **query: str) -> None:
    params = "&".join(f"{k}={v}" for k, v in {"dataset": scope.dataset, "task": scope.task}.items())
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    browser.get(f"{site.url}/ui/{path}?{params}{extra}")


def text(browser: WebDriver, css: str = "main") -> str:
    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def session_client(browser: WebDriver, site: Site) -> httpx.Client:
    """An HTTP client holding the browser's cookies (to read statuses the browser hides)."""
    jar = {c["name"]: c["value"] for c in browser.get_cookies()}
    return httpx.Client(base_url=site.url, cookies=jar, follow_redirects=False)


def post_form(browser: WebDriver, fields: dict[str, str]) -> None:
    """Submit a form to /ui/review from the page, as a forged page would."""
    browser.execute_script(
        """
        const form = document.createElement('form');
        form.method = 'post'; form.action = '/ui/review';
        for (const [name, value] of Object.entries(arguments[0])) {
          const input = document.createElement('input');
          input.type = 'hidden'; input.name = name; input.value = value; form.appendChild(input);
        }
        document.body.appendChild(form); form.submit();
        """,
        fields,
    )


# -- the tests -------------------------------------------------------------------------------------
def test_sign_in_exchanges_the_key_for_a_strict_http_only_cookie(
    browser: WebDriver, site: Site
) -> None:
    browser.delete_all_cookies()
    browser.get(f"{site.url}/ui/")
    assert "/ui/signin" in browser.current_url
    shoot(browser, site, "signin")
    browser.find_element(By.ID, "key").send_keys("mb_not-a-key")
    browser.find_element(By.CSS_SELECTOR, "form.signin button").click()
    until_shown(browser, ".error", "not known")

    sign_in(browser, site, "ana")
    (cookie,) = [c for c in browser.get_cookies() if c["name"] == "membrain_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert site.keys["ana"] not in cookie["value"]
    assert browser.execute_script("return document.cookie") == ""


def test_the_scopes_page_counts_what_the_key_may_see(browser: WebDriver, site: Site) -> None:
    sign_in(browser, site, "ana")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.scopes tbody tr")
    shown = {(r.get_attribute("data-dataset"), r.get_attribute("data-task")): r for r in rows}
    assert set(shown) == {("sara", "assistant"), ("sara", "support")}  # never dataset "ana"

    def count(scope: Scope, label: str) -> str:
        cell = shown[(scope.dataset, scope.task)].find_element(
            By.CSS_SELECTOR, f'td[data-label="{label}"]'
        )
        return str(cell.text)

    assert count(HOME, "Active") == "1" and count(HOME, "Superseded") == "1"
    assert count(SUPPORT, "Open review") == "2" and count(SUPPORT, "Pending") == "0"
    shoot(browser, site, "scopes")


def test_sara_s_timeline_shows_lisbon_replaced_by_berlin(browser: WebDriver, site: Site) -> None:
    sign_in(browser, site, "ana")
    browser.find_element(By.LINK_TEXT, "sara / assistant").click()
    until_url(browser, "/ui/scope")
    shoot(browser, site, "scope")
    browser.find_element(By.LINK_TEXT, "Sara").click()
    until_url(browser, "/ui/entity")
    assert text(browser, "h1") == "Sara"
    rows = browser.find_elements(By.CSS_SELECTOR, "figure.timeline svg g.row")
    assert len(rows) == 2
    by_status = {r.get_attribute("data-status"): r for r in rows}
    assert set(by_status) == {"superseded", "active"}
    assert "Berlin" in by_status["active"].text and "current" in by_status["active"].text
    assert "Lisbon" in by_status["superseded"].text
    bars = {s: r.find_element(By.CSS_SELECTOR, "rect.bar") for s, r in by_status.items()}
    assert "status-active" in str(bars["active"].get_attribute("class"))
    assert "status-superseded" in str(bars["superseded"].get_attribute("class"))
    marks = browser.find_elements(By.CSS_SELECTOR, "g.row .mark")
    assert {m.get_attribute("class") for m in marks} >= {
        "mark mark-recorded",
        "mark mark-superseded",
    }
    shoot(browser, site, "entity")

    link = by_status["superseded"].find_element(By.CSS_SELECTOR, "a")
    target = parse_qs(urlparse(str(link.get_dom_attribute("href"))).query)
    assert target["id"] == [site.facts["berlin"]]  # the superseded bar leads to its replacement
    bars["superseded"].click()
    until_url(browser, site.facts["berlin"])
    assert "moved to Berlin" in text(browser, "h1")
    chain = text(browser, "ol.chain")
    assert "Lisbon" in chain and "replaced by" in chain
    assert "Sara" in text(browser, "ol.sources") and "2024-05-02 10:00 UTC" in text(browser, "main")
    events = text(browser, "table.events")
    assert "created" in events and "superseded" in events
    shoot(browser, site, "fact")


def test_a_reviewer_rejects_a_disputed_fact_and_it_leaves_queue_and_search(
    browser: WebDriver, site: Site
) -> None:
    sign_in(browser, site, "ana")
    page(browser, site, "search", SUPPORT, q="What is the name of Sara's cat?", budget="300")
    hits = browser.find_elements(By.CSS_SELECTOR, "li.hit")
    assert site.facts["miso"] in [h.get_attribute("data-fact") for h in hits]
    assert "score" in hits[0].text and "#" in hits[0].text  # per-path ranks
    assert "Miso" in text(browser, "pre.context")
    shoot(browser, site, "search")

    page(browser, site, "review", SUPPORT)
    items = browser.find_elements(By.CSS_SELECTOR, "li.item")
    assert len(items) == 2
    (miso,) = [i for i in items if "Miso" in i.text]
    shoot(browser, site, "review")
    miso.find_element(By.TAG_NAME, "textarea").send_keys("the shelter has no record of it")
    miso.find_element(By.CSS_SELECTOR, "button.reject").click()
    until_shown(browser, ".notice", "Done: rejected")
    remaining = browser.find_elements(By.CSS_SELECTOR, "li.item")
    assert len(remaining) == 1 and "Miso" not in remaining[0].text

    page(browser, site, "search", SUPPORT, q="What is the name of Sara's cat?", budget="300")
    found = [h.get_attribute("data-fact") for h in browser.find_elements(By.CSS_SELECTOR, "li.hit")]
    assert site.facts["miso"] not in found
    assert "Miso" not in text(browser, "pre.context")
    with site.remote("ana") as mem:
        assert all(
            site.facts["miso"] != hit.fact.id
            for mode in ("fast", "expand")
            for hit in mem.search("Miso the cat", scope=SUPPORT, mode=mode)
        )

    page(browser, site, "audit", SUPPORT, actor="reviewer:ana", action="retracted")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.events tbody tr")
    assert len(rows) == 1
    assert "reviewer:ana" in rows[0].text and "the shelter has no record" in rows[0].text
    shoot(browser, site, "audit")


def test_a_read_key_sees_no_buttons_and_forged_posts_are_refused(
    browser: WebDriver, site: Site
) -> None:
    sign_in(browser, site, "reader")
    page(browser, site, "review", SUPPORT)
    (item,) = browser.find_elements(By.CSS_SELECTOR, "li.item")
    assert "nurse" in item.text
    assert browser.find_elements(By.CSS_SELECTOR, "main button") == []
    shoot(browser, site, "review-read-key")
    item_id = str(item.get_attribute("data-item"))
    fields = {"dataset": "sara", "task": "support", "item": item_id, "decision": "accept"}

    post_form(browser, fields)  # no CSRF token
    until_shown(browser, ".error", "security token")
    assert text(browser, ".error .code") == "403" and "security token" in text(browser, ".error")
    page(browser, site, "review", SUPPORT)
    csrf = browser.find_element(By.CSS_SELECTOR, 'form[action="/ui/signout"] input[name="csrf"]')
    post_form(browser, {**fields, "csrf": str(csrf.get_attribute("value"))})  # its own token
    until_shown(browser, ".error", "role read")
    assert text(browser, ".error .code") == "403" and "role read" in text(browser, ".error")
    with session_client(browser, site) as client:
        refused = client.post("/ui/review", data={**fields, "csrf": "forged"})
        assert refused.status_code == 403

    sign_in(browser, site, "ana")  # a write key: its session's own token but a forged one
    with session_client(browser, site) as client:
        assert client.post("/ui/review", data=fields).status_code == 403
        assert client.post("/ui/signout", data={}).status_code == 403
    page(browser, site, "review", SUPPORT)
    assert len(browser.find_elements(By.CSS_SELECTOR, "li.item")) == 1  # nothing was decided


def test_another_dataset_answers_403(browser: WebDriver, site: Site) -> None:
    sign_in(browser, site, "ana")
    page(browser, site, "scope", OTHER)
    assert text(browser, "h1") == "Not allowed" and text(browser, ".error .code") == "403"
    shoot(browser, site, "forbidden")
    with session_client(browser, site) as client:
        for path in ("scope", "entity", "fact", "review", "search", "audit"):
            query = {"dataset": "ana", "task": "assistant", "id": "x", "q": "bakery"}
            assert client.get(f"/ui/{path}", params=query).status_code == 403, path
        assert client.get("/ui/scope", params={"dataset": "sara", "task": "assistant"}).is_success


def test_pages_are_keyboard_navigable_and_sign_out_ends_the_session(
    browser: WebDriver, site: Site
) -> None:
    sign_in(browser, site, "ana")
    page(browser, site, "scope", HOME)
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    assert browser.switch_to.active_element.text == "Skip to content"
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    for _ in range(12):  # tab on until the first entity link is reached
        browser.switch_to.active_element.send_keys(Keys.TAB)
        if browser.switch_to.active_element.text == "Berlin":
            break
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    until_url(browser, "/ui/entity")
    assert text(browser, "h1") == "Berlin"

    browser.find_element(By.CSS_SELECTOR, 'form[action="/ui/signout"] button').click()
    until_url(browser, "/ui/signin")
    browser.get(f"{site.url}/ui/")
    assert "/ui/signin" in browser.current_url
    names = {p.name for p in site.screens.iterdir()}
    for shot in ("signin", "scopes", "scope", "entity", "fact", "search", "review", "audit"):
        assert {f"{shot}-laptop.png", f"{shot}-phone.png"} <= names
