"""The blocking client: :class:`RemoteMemory`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from membrain.arguments import DENSE, SPARSE, as_ids, renamed
from membrain.audit import AuditAction, AuditEvent, FactHistory, ReviewItem
from membrain.errors import InputError
from membrain.inputs import DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME
from membrain.models import (
    Actor,
    Context,
    Entity,
    Fact,
    Message,
    RetrievalMode,
    Scope,
    SearchResult,
    StoredMessage,
)
from membrain.remote.common import (
    API_PREFIX,
    ENTITIES,
    EVENTS,
    FACTS,
    MESSAGES,
    NAMES,
    RETRIES,
    REVIEW_ITEMS,
    SCOPES,
    Call,
    add_call,
    add_result,
    answer,
    audit_call,
    check_url,
    confirm_call,
    dispute_call,
    evidence_hits,
    extract_call,
    facts_call,
    forget_call,
    headers,
    messages_call,
    one_fact_call,
    purge_call,
    purge_result,
    query_body,
    resolve_call,
    scope_fields,
    scope_query,
    search_messages_call,
    search_result,
    send,
    supersede_call,
    unsupported,
    update_call,
)
from membrain.results import AddResult, EvidenceHit, PurgeResult

T = TypeVar("T")

__all__ = ["RemoteMemory"]


class RemoteMemory:
    """A MemBrain server's memory, with :class:`~membrain.Memory`'s methods (blocking).

    Args:
        url: The server's base URL (``http://host:9574``).
        api_key: A key from the server's keys file (``None`` for a server run without keys).
        timeout: Seconds to wait for each answer (an ``add`` that extracts may take long).
        transport: An ``httpx`` transport (tests: ``httpx.MockTransport``).
        retries: How many times a request is sent again when no answer came (connection
            refused or reset) or the answer was 502, 503 or 504, backing off from 0.25 s. A
            read timeout is not retried.

    Example:
        >>> from membrain import Scope
        >>> from membrain.remote import RemoteMemory
        >>> mem = RemoteMemory("http://127.0.0.1:9574", api_key="mbk_...")  # doctest: +SKIP
        >>> scope = Scope(dataset="sara", task="assistant")
        >>> mem.search("What is the cat called?", scope=scope)[0].fact.text  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        retries: int = RETRIES,
    ) -> None:
        self.url = check_url(url)
        self._retries = retries
        self._client = httpx.Client(
            base_url=self.url + API_PREFIX,
            headers=headers(api_key),
            timeout=timeout,
            transport=transport,
        )

    def _send(self, call: Call, reader: Callable[[Any], T]) -> T:
        return answer(send(self._client, self.url, self._retries, call), reader)

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- write -------------------------------------------------------------------------------
    def add(
        self,
        messages: str | Iterable[Message | Mapping[str, Any] | object],
        *,
        scope: Scope,
        on_progress: Callable[[int], None] | None = None,
        extract: bool = True,
        by: Actor | str | None = None,
        user_name: str = DEFAULT_USER_NAME,
        assistant_name: str = DEFAULT_ASSISTANT_NAME,
    ) -> AddResult:
        """Store messages on the server, then extract their facts (see :meth:`Memory.add`).

        With ``extract=False`` the server's background writer extracts them later. Extraction
        errors come back as :class:`~membrain.errors.ExtractionError` carrying the server's
        message only.

        Raises:
            ConfigurationError: ``on_progress`` or ``by`` given (the server supports neither).
            InputError: a message is malformed (nothing is sent then).
            RemoteAccessError: the key may not write to the scope's dataset.
            BackendError: the server cannot be reached or cannot serve.
        """
        call = add_call(messages, scope, on_progress, extract, by, user_name, assistant_name)
        return self._send(call, add_result)

    def extract_pending(
        self, *, scope: Scope, on_progress: Callable[[int], None] | None = None
    ) -> AddResult:
        """Have the server extract the scope's pending messages now; returns when done.

        See :meth:`Memory.extract_pending`.

        Raises:
            ConfigurationError: ``on_progress`` given (the server reports no progress).
        """
        return self._send(extract_call(scope, on_progress), add_result)

    def retry_failed(
        self, *, scope: Scope, on_progress: Callable[[int], None] | None = None
    ) -> AddResult:
        """Have the server extract the scope's failed messages again (``Memory.retry_failed``).

        Raises:
            ConfigurationError: ``on_progress`` given (the server reports no progress).
        """
        unsupported("retry_failed", on_progress=on_progress is not None)
        return self._send(Call("POST", "/retry", scope_fields(scope)), add_result)

    def dismiss_failed(
        self,
        message_ids: Sequence[str] | None = None,
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> list[str]:
        """Give up on failed messages (see :meth:`Memory.dismiss_failed`).

        Raises:
            ConfigurationError: ``by`` given (the server names the API key).
        """
        unsupported("dismiss_failed", by=by is not None)
        ids = None if message_ids is None else as_ids(message_ids, "message ids")
        body = {**scope_fields(scope), "message_ids": ids, "reason": reason}
        return self._send(Call("POST", "/dismiss", body), NAMES.validate_python)

    def forget(
        self,
        fact_ids: Sequence[str],
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> list[Fact]:
        """Tombstone facts (see :meth:`Memory.forget`); returns them as the server updated them.

        Raises:
            ConfigurationError: ``by`` given.
            InputError: an id names no fact of ``scope``.
        """
        call = forget_call(fact_ids, scope, by, reason)
        return self._send(call, FACTS.validate_python)

    def supersede(
        self,
        old_fact_id: str,
        new_fact_ids: Sequence[str],
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> Fact:
        """Record that ``new_fact_ids`` replace ``old_fact_id`` (see :meth:`Memory.supersede`).

        Returns the old fact as updated.

        Raises:
            ConfigurationError: ``by`` given.
            InputError: an id names no fact of ``scope``.
        """
        call = supersede_call(old_fact_id, new_fact_ids, scope, by, reason)
        return self._send(call, Fact.model_validate)

    def update(
        self,
        fact_id: str,
        text: str,
        *,
        scope: Scope,
        reason: str = "",
        by: Actor | str | None = None,
    ) -> Fact:
        """Replace a fact by a new statement of it (see :meth:`Memory.update`).

        Returns the new fact.

        Raises:
            ConfigurationError: ``by`` given (the server names the API key).
            NotFoundError: no fact of ``scope`` has that id.
            ConflictError: the fact is not active.
        """
        call = update_call(fact_id, text, scope, by, reason)
        return self._send(call, Fact.model_validate)

    def delete_dataset(self, dataset: str) -> list[Scope]:
        """Delete every task of ``dataset`` (see :meth:`Memory.delete_dataset`).

        Raises:
            RemoteAccessError: the key is not an ``admin`` key of the dataset.
        """
        if not isinstance(dataset, str):
            raise InputError(f"a dataset is a string, got {dataset!r:.80}")
        call = Call("DELETE", "/dataset", query={"dataset": dataset})
        return self._send(call, SCOPES.validate_python)

    def delete_scope(self, scope: Scope) -> None:
        """Delete everything stored under ``scope`` (all sessions when it has none).

        Raises:
            RemoteAccessError: the key is not an ``admin`` key of the scope's dataset.
        """
        return self._send(Call("DELETE", "/scope", query=scope_query(scope)), _nothing)

    # -- read --------------------------------------------------------------------------------
    @renamed("question", "query")
    def search(
        self,
        query: str,
        *,
        scope: Scope,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        k: int = 10,
        reference: datetime | None = None,
        exclude_paths: Sequence[str] = (),
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        rerank: bool = True,
        filters: Mapping[str, object] | None = None,
    ) -> SearchResult:
        """The ``k`` facts that best answer ``query`` (see :meth:`Memory.search`).

        Raises:
            ConfigurationError: an unknown mode.
            InputError: empty query or ``k`` out of range.
        """
        body = query_body(query, scope, mode, k, reference, as_of, valid_at, filters)
        body["exclude_paths"] = as_ids(exclude_paths, "exclude_paths")
        body["rerank"] = rerank
        return self._send(Call("POST", "/search", body), lambda b: search_result(query, mode, b))

    @renamed("question", "query")
    def context(
        self,
        query: str,
        *,
        scope: Scope,
        max_tokens: int = 2000,
        mode: RetrievalMode | str = RetrievalMode.EXPAND,
        k: int = 50,
        profile_tokens: int = 0,
        reference: datetime | None = None,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
        filters: Mapping[str, object] | None = None,
    ) -> Context:
        """A cited context block for ``query`` within ``max_tokens``.

        See :meth:`Memory.context`.

        Raises:
            ConfigurationError: an unknown mode.
            InputError: a budget too small, or ``profile_tokens`` outside it.
        """
        body = query_body(query, scope, mode, k, reference, as_of, valid_at, filters)
        body.update(max_tokens=max_tokens, profile_tokens=profile_tokens)
        return self._send(Call("POST", "/context", body), Context.model_validate)

    def facts(
        self,
        *,
        scope: Scope,
        include_inactive: bool = False,
        derived_from: Sequence[str] = (),
        ids: Sequence[str] | None = None,
        filters: Mapping[str, object] | None = None,
    ) -> list[Fact]:
        """Every fact of the scope (active only unless ``include_inactive``).

        ``derived_from`` keeps the facts citing one of these messages, ``ids`` only these
        facts (see :meth:`Memory.facts`).
        """
        call = facts_call(scope, include_inactive, derived_from, ids, filters)
        if call is None:
            return []
        return self._send(call, FACTS.validate_python)

    def messages(self, *, scope: Scope, ids: Sequence[str] | None = None) -> list[StoredMessage]:
        """Every stored message of the scope, or those of ``ids`` (see :meth:`Memory.messages`)."""
        call = messages_call(scope, ids)
        if call is None:
            return []
        return self._send(call, MESSAGES.validate_python)

    @renamed("question", "query")
    def search_messages(
        self,
        query: str,
        *,
        scope: Scope,
        k: int = 10,
        paths: Sequence[str] = (SPARSE, DENSE),
    ) -> list[EvidenceHit]:
        """Search the raw messages directly (see :meth:`Memory.search_messages`).

        Raises:
            ConfigurationError: ``paths`` names something other than ``"sparse"``/``"dense"``.
        """
        call = search_messages_call(query, scope, k, paths)
        return self._send(call, evidence_hits)

    # -- accountability ----------------------------------------------------------------------
    def get(self, fact_id: str, *, scope: Scope) -> Fact:
        """One fact by its id (or a unique prefix of it), whatever its status.

        Raises:
            NotFoundError: no fact of ``scope`` has that id (HTTP 404).
        """
        return self._send(one_fact_call("/fact", fact_id, scope), Fact.model_validate)

    def history(self, fact_id: str, *, scope: Scope) -> FactHistory:
        """A fact's life: the facts it replaced and that replaced it, and every event.

        Raises:
            NotFoundError: ``fact_id`` names no fact of ``scope`` (HTTP 404).
        """
        call = one_fact_call("/history", fact_id, scope)
        return self._send(call, FactHistory.model_validate)

    def audit(
        self,
        *,
        scope: Scope,
        since: datetime | None = None,
        actions: Sequence[AuditAction | str] | None = None,
        targets: Sequence[str] = (),
    ) -> list[AuditEvent]:
        """The scope's audit log, oldest first (see :meth:`Memory.audit`)."""
        return self._send(audit_call(scope, since, actions, targets), EVENTS.validate_python)

    def confirm(
        self, fact_ids: Sequence[str], *, scope: Scope, by: Actor | str | None = None
    ) -> list[Fact]:
        """Confirm facts as a person (see :meth:`Memory.confirm`); the key is the reviewer.

        Raises:
            ConfigurationError: ``by`` given.
            InputError: an id names no fact of ``scope`` (:class:`NotFoundError`).
        """
        return self._send(confirm_call(fact_ids, scope, by), FACTS.validate_python)

    def dispute(
        self,
        fact_ids: Sequence[str],
        *,
        scope: Scope,
        reason: str = "",
        by: Actor | str | None = None,
    ) -> ReviewItem:
        """Dispute facts (see :meth:`Memory.dispute`); returns the review item opened."""
        call = dispute_call(fact_ids, scope, reason, by)
        return self._send(call, ReviewItem.model_validate)

    def scopes(self, dataset: str | None = None) -> list[Scope]:
        """The (dataset, task) scopes holding records, of the datasets the key may read."""
        query: dict[str, str | list[str]] = {"dataset": dataset} if dataset is not None else {}
        return self._send(Call("GET", "/scopes", query=query), SCOPES.validate_python)

    def entities(self, *, scope: Scope) -> list[Entity]:
        """The entities of the scope's (dataset, task) (see :meth:`Memory.entities`)."""
        call = Call("GET", "/entities", query=scope_query(scope))
        return self._send(call, ENTITIES.validate_python)

    def participants(self, *, scope: Scope) -> list[str]:
        """The people who speak in the scope's conversations (see ``Memory.participants``)."""
        call = Call("GET", "/participants", query=scope_query(scope))
        return self._send(call, NAMES.validate_python)

    def review_queue(self, *, scope: Scope) -> list[ReviewItem]:
        """The scope's open review items, oldest first (see :meth:`Memory.review_queue`)."""
        call = Call("GET", "/review", query=scope_query(scope))
        return self._send(call, REVIEW_ITEMS.validate_python)

    def resolve(
        self,
        item: ReviewItem | str,
        *,
        accept: bool = True,
        by: Actor | str | None = None,
        note: str = "",
        scope: Scope | None = None,
    ) -> ReviewItem:
        """Accept or reject a review item (see :meth:`Memory.resolve`).

        Raises:
            ScopeError: ``item`` is an id and ``scope`` is not given.
            InputError: no open review item has this id in the scope.
        """
        call = resolve_call(item, accept, by, note, scope)
        return self._send(call, ReviewItem.model_validate)

    def purge(
        self,
        fact_ids: Sequence[str] = (),
        *,
        scope: Scope,
        messages: Sequence[str] | bool = (),
        by: Actor | str | None = None,
        reason: str = "",
    ) -> PurgeResult:
        """Erase content from every index and the server's files (see :meth:`Memory.purge`).

        Raises:
            RemoteAccessError: the key is not an ``admin`` key of the scope's dataset.
            InputError: nothing to purge, or an id names nothing of ``scope``.
        """
        call = purge_call(fact_ids, scope, messages, by, reason)
        return self._send(call, purge_result)


def _nothing(body: Any) -> None:
    """Reads an answer whose content the caller does not need."""
