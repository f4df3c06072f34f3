"""The memory inspector: review queue, belief timelines and audit in the browser, at ``/ui``.

Served by the same application as the HTTP API (:func:`mount_inspector`, called by
:func:`membrain.server.create_app`), so ``membrain serve`` serves it with the same keys. Pages
are rendered on the server from Jinja templates (autoescaped); the CSS is the package's own,
served under ``/ui/static``: nothing is fetched from elsewhere, and the pages work offline.

Sign-in: a person types an API key once; it is exchanged for a random session token kept in an
``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` over https), and the key stays on the
server, in memory, so a key removed from the keys file signs its sessions out at their next
request. Every change (sign-in, sign-out, a review decision) is a POST carrying the session's
CSRF token (the sign-in form's token is bound to a short-lived cookie instead); a POST without
it answers 403. The key's datasets decide which scopes are listed and which pages answer (403
for another dataset), its role whether the review buttons exist (``write`` or ``admin``) and
whether a decision is accepted. A server run without keys (loopback only) shows the inspector
without sign-in; its changes are still checked against the CSRF token.
"""

from __future__ import annotations

import hmac
import logging
import math
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Message as AsgiMessage
from starlette.types import Scope as AsgiScope

from membrain.api.audit import AuditAction
from membrain.api.errors import MembrainError, NotFoundError
from membrain.api.expiry import has_expired
from membrain.api.models import Actor, ActorKind, Fact, Scope
from membrain.api.requests import CONTEXT_MIN_RELEVANCE
from membrain.api.scope import dataset_part
from membrain.memory import Memory
from membrain.server.guards import status_of
from membrain.server.inspector_pages import (
    PREFIX,
    audit_page,
    moment,
    parse_moment,
    plain,
    safe_next,
    scope_counts,
    short,
    timeline,
    trust_note,
    url,
)
from membrain.server.keys import Access, Forbidden, Grant, KeyRing, Unauthenticated

__all__ = ["PREFIX", "SESSION_COOKIE", "Sessions", "mount_inspector"]


log = logging.getLogger("membrain.server")

SESSION_COOKIE = "membrain_session"
SIGNIN_COOKIE = "membrain_signin"
HERE = Path(__file__).resolve().parent
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class PageError(Exception):
    """A page that cannot be shown: its HTTP status and a line for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class _Session:
    key: str | None
    csrf: str
    created: float
    seen: float


class Sessions:
    """Signed-in browsers, in memory, by random token; idle and old sessions expire.

    Args:
        idle: Seconds without a request after which a session ends.
        lifetime: Seconds after sign-in after which a session ends anyway.
        limit: The most sessions kept; the least recently used goes first.
    """

    def __init__(
        self, *, idle: float = 8 * 3600, lifetime: float = 24 * 3600, limit: int = 1000
    ) -> None:
        self.idle, self.lifetime, self.limit = idle, lifetime, limit
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def create(self, key: str | None) -> tuple[str, _Session]:
        """A new session for ``key``; its token (the cookie's value) and the session."""
        now = time.monotonic()
        token = secrets.token_urlsafe(32)
        session = _Session(key=key, csrf=secrets.token_urlsafe(32), created=now, seen=now)
        with self._lock:
            while len(self._sessions) >= self.limit:
                oldest = min(self._sessions, key=lambda t: self._sessions[t].seen)
                del self._sessions[oldest]
            self._sessions[token] = session
        return token, session

    def get(self, token: str | None) -> _Session | None:
        """The live session of ``token`` (``None``: unknown or expired)."""
        if not token:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return None
            if now - session.seen > self.idle or now - session.created > self.lifetime:
                del self._sessions[token]
                return None
            session.seen = now
            return session

    def drop(self, token: str | None) -> None:
        """End the session of ``token`` (nothing when there is none)."""
        with self._lock:
            self._sessions.pop(token or "", None)


@dataclass
class Viewer:
    """The person behind a request: their session and what their key may do."""

    token: str
    session: _Session
    grant: Grant | None
    new: bool = False
    flash: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The key's name (empty on a server without keys)."""
        return self.grant.name if self.grant is not None else ""

    @property
    def role(self) -> Access:
        """The key's role (``admin`` on a server without keys)."""
        return self.grant.role if self.grant is not None else Access.ADMIN

    @property
    def csrf(self) -> str:
        """The token every form of the session carries."""
        return self.session.csrf

    @property
    def reviewer(self) -> Actor:
        """Who the audit log records for this person's decisions: ``reviewer:<key name>``."""
        return Actor(kind=ActorKind.REVIEWER, name=self.name)

    def covers(self, dataset: str) -> bool:
        """Whether the key may see ``dataset``."""
        return self.grant is None or self.grant.covers(dataset)

    def may_review(self, dataset: str) -> bool:
        """Whether the key may decide review items of ``dataset``."""
        return self.covers(dataset) and self.role.includes(Access.WRITE)

    def check(self, dataset: str, needs: Access = Access.READ) -> None:
        """Refuse (403) a dataset the key does not cover, or a role above the key's.

        Raises:
            PageError: the key may not do this.
        """
        if self.grant is None:
            return
        try:
            self.grant.check(dataset, needs)
        except Forbidden as exc:
            raise PageError(403, str(exc)) from None


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(moment=moment, short=short, actions=[a.value for a in AuditAction])
    env.filters["moment"] = moment
    env.filters["short"] = short
    env.filters["plain"] = plain
    env.globals["expired"] = has_expired  # whether a fact is past its expiry now
    return env


async def _form(request: Request) -> dict[str, str]:
    """The URL-encoded form of a POST (first value of each field)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {name: values[0] for name, values in parse_qs(body, keep_blank_values=True).items()}


class Inspector:
    """The inspector's state: the memory, the keys, the sessions and the templates."""

    def __init__(self, memory: Memory, keys: KeyRing | None) -> None:
        self.memory = memory
        self.keys = keys
        self.sessions = Sessions()
        self.env = _environment()

    # -- sessions ------------------------------------------------------------------------
    def viewer(self, request: Request) -> Viewer | None:
        """The signed-in person, or ``None`` (a server without keys signs everyone in)."""
        token = request.cookies.get(SESSION_COOKIE)
        session = self.sessions.get(token)
        if self.keys is None:
            if session is None or token is None:
                token, session = self.sessions.create(None)
                return Viewer(token=token, session=session, grant=None, new=True)
            return Viewer(token=token, session=session, grant=None)
        if session is None or token is None:
            return None
        try:
            grant = self.keys.authenticate(session.key)
        except Unauthenticated:
            self.sessions.drop(token)
            return None
        return Viewer(token=token, session=session, grant=grant)

    def require(self, request: Request) -> Viewer:
        """The signed-in person; a request without a session is sent to sign in.

        Raises:
            _SignIn: nobody is signed in.
        """
        viewer = self.viewer(request)
        if viewer is None:
            raise _SignIn(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        return viewer

    async def require_post(self, request: Request) -> tuple[Viewer, dict[str, str]]:
        """The signed-in person and the form of a POST carrying their CSRF token.

        Raises:
            PageError: no session, or the form's token is missing or wrong (403).
        """
        form = await _form(request)
        viewer = self.viewer(request)
        if viewer is None or viewer.new:
            raise PageError(403, "not signed in: sign in again")
        if not hmac.compare_digest(form.get("csrf", ""), viewer.csrf):
            raise PageError(403, "the form's security token is missing or wrong; reload the page")
        return viewer, form

    # -- rendering -----------------------------------------------------------------------
    def render(
        self, request: Request, template: str, viewer: Viewer | None, status: int = 200, **ctx: Any
    ) -> HTMLResponse:
        """The page ``template`` with the context every page gets."""
        page = self.env.get_template(template).render(
            viewer=viewer, url=url, path=request.url.path, open=self.keys is None, **ctx
        )
        response = HTMLResponse(page, status_code=status, headers=SECURITY_HEADERS)
        if viewer is not None and viewer.new:
            self.set_session(request, response, viewer.token)
        return response

    def set_session(self, request: Request, response: Response, token: str) -> None:
        """Hand the browser its session cookie."""
        response.set_cookie(
            SESSION_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=PREFIX,
        )

    def scope(self, viewer: Viewer, dataset: str | None, task: str | None) -> Scope:
        """The scope a page names, once the key may read its dataset.

        Raises:
            PageError: no or a malformed scope (422), a dataset the key does not cover (403).
        """
        if not dataset or not task:
            raise PageError(422, "this page needs a dataset and a task")
        try:
            scope = Scope.stored(dataset, task)  # the pages link stored parts
        except MembrainError as exc:
            raise PageError(422, str(exc)) from None
        viewer.check(scope.dataset)
        return scope


class SecuredPages:
    """The inspector's ASGI wrapper: every answer carries :data:`SECURITY_HEADERS`.

    An unexpected exception of a page answers the error page (500, the traceback in the log)
    with them, not the framework's bare 500; a 404 or 422 of the framework gets them too.
    """

    def __init__(self, app: ASGIApp, inspector: Inspector) -> None:
        self.app = app
        self.inspector = inspector

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:  # noqa: D102
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def secured(message: AsgiMessage) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        try:
            await self.app(scope, receive, secured)
        except Exception:
            log.exception("unexpected error in %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await self.failure(Request(scope))(scope, receive, send)

    def failure(self, request: Request) -> Response:
        """The error page of an unexpected failure (plain text if even that cannot render)."""
        error = PageError(500, "the server failed to show this page; its log says why")
        try:
            return self.inspector.render(
                request, "error.html", None, status=500, status_code=500, error=error
            )
        except Exception:
            log.exception("the error page failed to render")
            return Response(error.message, status_code=500, headers=SECURITY_HEADERS)


class _SignIn(Exception):
    def __init__(self, next_page: str) -> None:
        super().__init__(next_page)
        self.next_page = next_page


def _fact_links(scope: Scope) -> Any:
    return lambda fact_id: url("fact", scope, id=fact_id)


def mount_inspector(app: FastAPI, memory: Memory, keys: KeyRing | None) -> None:
    """Serve the inspector of ``memory`` at ``/ui`` in ``app`` (keys as the API's)."""
    inspector = Inspector(memory, keys)
    app.state.inspector = inspector
    # a mounted application of its own: the API's route list, schema and checks stay the API's
    pages = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    pages.include_router(_routes(inspector))
    pages.mount("/static", StaticFiles(directory=HERE / "static"), name="inspector-static")

    async def page_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageError)
        viewer = inspector.viewer(request)
        return inspector.render(
            request, "error.html", viewer, status=exc.status, status_code=exc.status, error=exc
        )

    async def sign_in(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _SignIn)
        target = url("signin", next=exc.next_page)
        return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)

    pages.add_exception_handler(PageError, page_error)
    pages.add_exception_handler(_SignIn, sign_in)
    pages.add_middleware(SecuredPages, inspector=inspector)
    app.mount(PREFIX, pages, name="inspector")


def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the memory; its errors become pages (not found 404, refused 403, bad input 422)."""
    try:
        return function(*args, **kwargs)
    except MembrainError as exc:
        raise PageError(status_of(exc), str(exc).split("\n", 1)[0]) from None


def _routes(inspector: Inspector) -> APIRouter:  # noqa: C901 - one closure per page
    router = APIRouter(include_in_schema=False)
    memory = inspector.memory

    @router.get("/signin")
    def signin_form(request: Request, next: str = "") -> Response:  # noqa: A002
        if inspector.keys is None:
            return RedirectResponse(safe_next(next), status_code=303)
        token = secrets.token_urlsafe(32)
        response = inspector.render(
            request, "signin.html", None, csrf=token, next=safe_next(next), error=""
        )
        response.set_cookie(
            SIGNIN_COOKIE,
            token,
            max_age=900,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=f"{PREFIX}/signin",
        )
        return response

    @router.post("/signin")
    async def signin(request: Request) -> Response:
        form = await _form(request)
        expected = request.cookies.get(SIGNIN_COOKIE, "")
        if not expected or not hmac.compare_digest(form.get("csrf", ""), expected):
            raise PageError(403, "the sign-in form expired or was not ours; sign in again")
        if inspector.keys is None:
            return RedirectResponse(f"{PREFIX}/", status_code=303)
        key = form.get("key", "").strip()
        try:
            inspector.keys.authenticate(key)
        except Unauthenticated:
            return inspector.render(
                request,
                "signin.html",
                None,
                status=401,
                csrf=expected,
                next=safe_next(form.get("next")),
                error="That key is not known to this server.",
            )
        inspector.sessions.drop(request.cookies.get(SESSION_COOKIE))
        token, _ = inspector.sessions.create(key)
        moved = RedirectResponse(safe_next(form.get("next")), status_code=303)
        inspector.set_session(request, moved, token)
        moved.delete_cookie(SIGNIN_COOKIE, path=f"{PREFIX}/signin", samesite="strict")
        return moved

    @router.post("/signout")
    async def signout(request: Request) -> Response:
        viewer, _ = await inspector.require_post(request)
        inspector.sessions.drop(viewer.token)
        response = RedirectResponse(url("signin"), status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=PREFIX, httponly=True, samesite="strict")
        return response

    @router.get("/")
    def scopes(request: Request) -> Response:
        viewer = inspector.require(request)
        visible = [s for s in _call(memory.scopes) if viewer.covers(s.dataset)]
        counts = [_call(scope_counts, memory, s) for s in visible]
        return inspector.render(request, "scopes.html", viewer, counts=counts)

    @router.get("/scope")
    def scope_page(request: Request, dataset: str = "", task: str = "") -> Response:
        viewer = inspector.require(request)
        scope = inspector.scope(viewer, dataset, task)
        facts: list[Fact] = _call(memory.facts, scope=scope, include_inactive=True)
        entities = sorted(_call(memory.entities, scope=scope), key=lambda e: e.name.lower())
        mentions: dict[str, int] = {}
        for fact in facts:
            for entity_id in fact.entity_ids:
                mentions[entity_id] = mentions.get(entity_id, 0) + 1
        facts.sort(key=lambda f: (f.stated_at, f.recorded_at), reverse=True)
        return inspector.render(
            request,
            "scope.html",
            viewer,
            scope=scope,
            counts=_call(scope_counts, memory, scope),
            entities=entities,
            mentions=mentions,
            facts=facts,
        )

    @router.get("/entity")
    def entity_page(request: Request, dataset: str = "", task: str = "", id: str = "") -> Response:  # noqa: A002
        viewer = inspector.require(request)
        scope = inspector.scope(viewer, dataset, task)
        entity = next((e for e in _call(memory.entities, scope=scope) if e.id == id), None)
        if entity is None:
            raise PageError(404, f"no entity {id!r} in {scope.dataset}/{scope.task}")
        facts = [
            f
            for f in _call(memory.facts, scope=scope, include_inactive=True)
            if entity.id in f.entity_ids
        ]
        drawn = timeline(facts, _fact_links(scope), datetime.now(UTC))
        return inspector.render(
            request, "entity.html", viewer, scope=scope, entity=entity, timeline=drawn
        )

    @router.get("/fact")
    def fact_page(request: Request, dataset: str = "", task: str = "", id: str = "") -> Response:  # noqa: A002
        viewer = inspector.require(request)
        scope = inspector.scope(viewer, dataset, task)
        history = _call(memory.history, id, scope=scope)
        try:
            fact = memory.get(history.fact_id, scope=scope)
        except NotFoundError:
            fact = None
        if fact is None and not history.events:
            raise PageError(404, f"no fact {id!r} in {scope.dataset}/{scope.task}")
        sources = _call(memory.messages, scope=scope, ids=list(fact.sources)) if fact else []
        chain = {f.id: f for f in history.facts}
        entities = {e.id: e for e in _call(memory.entities, scope=scope)}
        return inspector.render(
            request,
            "fact.html",
            viewer,
            scope=scope,
            fact=fact,
            fact_id=history.fact_id,
            history=history,
            chain=chain,
            sources=sources,
            entities=entities,
            trust_note=trust_note(fact) if fact else "",
            recalls=_call(memory.recalls, history.fact_id, scope=scope),
            open_items=[
                item
                for item in _call(memory.review_queue, scope=scope)
                if history.fact_id in item.fact_ids or item.old == history.fact_id
            ],
        )

    @router.get("/run")
    def run_page(request: Request, dataset: str = "", task: str = "", id: str = "") -> Response:  # noqa: A002
        viewer = inspector.require(request)
        scope = inspector.scope(viewer, dataset, task)
        if not id.strip():
            raise PageError(400, "name a run")
        recalls = _call(memory.trace, id, scope=scope)
        return inspector.render(request, "run.html", viewer, scope=scope, run=id, recalls=recalls)

    @router.get("/review")
    def review_page(
        request: Request, dataset: str = "", task: str = "", done: str = ""
    ) -> Response:
        viewer = inspector.require(request)
        scope = inspector.scope(viewer, dataset, task)
        items = _call(memory.review_queue, scope=scope)
        wanted = {i for item in items for i in (*item.fact_ids, *item.new, item.old or "") if i}
        facts = {f.id: f for f in _call(memory.facts, scope=scope, ids=sorted(wanted))}
        return inspector.render(
            request,
            "review.html",
            viewer,
            scope=scope,
            items=items,
            facts=facts,
            done=done,
            can_review=viewer.may_review(scope.dataset),
        )

    @router.post("/review")
    async def resolve(request: Request) -> Response:
        viewer, form = await inspector.require_post(request)
        scope = inspector.scope(viewer, form.get("dataset"), form.get("task"))
        viewer.check(scope.dataset, Access.WRITE)
        decision = form.get("decision")
        if decision not in ("accept", "reject"):
            raise PageError(422, "decide accept or reject")
        note = form.get("note", "").strip()[:2000]
        item = await run_in_threadpool(
            _call,
            memory.resolve,
            form.get("item", ""),
            accept=decision == "accept",
            by=viewer.reviewer,
            note=note,
            scope=scope,
        )
        done = f"{decision}ed {short(item.id)}"
        return RedirectResponse(url("review", scope, done=done), status_code=303)

    @router.get("/search")
    def search_page(
        request: Request,
        dataset: str = "",
        task: str = "",
        q: str = "",
        budget: int = 400,
        min_relevance: str = "",
    ) -> Response:
        viewer = inspector.require(request)
        scope = inspector.scope(viewer, dataset, task)
        budget = min(max(budget, 50), 8000)
        query = q.strip()[:500]
        floor = _relevance_floor(min_relevance)
        # Without a minimum, search keeps every hit and context its default floor.
        chosen = {} if floor is None else {"min_relevance": floor}
        result = _call(memory.search, query, scope=scope, k=8, **chosen) if query else None
        context = (
            _call(memory.context, query, scope=scope, max_tokens=budget, **chosen)
            if query
            else None
        )
        return inspector.render(
            request,
            "search.html",
            viewer,
            scope=scope,
            q=query,
            budget=budget,
            min_relevance="" if floor is None else f"{floor:g}",
            default_floor=CONTEXT_MIN_RELEVANCE,
            result=result,
            context=context,
        )

    @router.get("/audit")
    def audit_view(
        request: Request,
        dataset: str = "",
        task: str = "",
        action: str = "",
        actor: str = "",
        since: str = "",
        until: str = "",
        page: int = 1,
    ) -> Response:
        viewer = inspector.require(request)
        scope = inspector.scope(viewer, dataset, task)
        found = _call(
            audit_page,
            memory,
            scope,
            action=action,
            actor=actor,
            since=parse_moment(since),
            until=parse_moment(until, end=True),
            page=page,
        )
        filters = {"action": action, "actor": actor, "since": since, "until": until}
        known = {f.id for f in _call(memory.facts, scope=scope, include_inactive=True)}
        return inspector.render(
            request,
            "audit.html",
            viewer,
            scope=scope,
            found=found,
            filters=filters,
            facts=known,
        )

    @router.get("/receipts")
    def receipts_page(
        request: Request, dataset: str = "", task: str = "", verify: str = ""
    ) -> Response:
        viewer = inspector.require(request)
        if not dataset:
            raise PageError(422, "this page needs a dataset")
        scope = inspector.scope(viewer, dataset, task) if task else None
        stored = scope.dataset if scope is not None else _call(dataset_part, dataset, True)
        viewer.check(stored)
        receipts = _call(memory.receipts, stored)
        check = None
        if verify:
            chosen = next((r for r in receipts if r.id == verify), None)
            if chosen is None:
                raise PageError(404, f"no erasure receipt {verify[:40]} in {stored!r}")
            check = _call(memory.verify_erasure, chosen)
        return inspector.render(
            request,
            "receipts.html",
            viewer,
            scope=scope,
            dataset=stored,
            receipts=list(reversed(receipts)),
            check=check,
        )

    return router


def _relevance_floor(text: str) -> float | None:
    """The minimum relevance typed in the search form: a number, clamped to 0-1; else none."""
    try:
        value = float(text)
    except ValueError:
        return None
    return min(max(value, 0.0), 1.0) if math.isfinite(value) else None
