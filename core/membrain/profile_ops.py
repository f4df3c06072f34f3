"""The profile half of :class:`membrain.Memory`: the stable user profile, read and written.

The profile is selected, not searched: :meth:`ProfileOperations.profile` returns its current
entries and ``Memory.context(..., profile_ratio=r)`` opens the context with them. An
application (or an agent, or a reviewer) writes entries with :meth:`profile_put` and removes
them with :meth:`profile_forget`; each change is a new version, audited, and
:meth:`profile_history` reads them all. Extraction keeps the attribute subtopics up to date
(:mod:`membrain.profiling`).
"""

from __future__ import annotations

from collections.abc import Sequence

from membrain.arguments import as_ids, check_scope
from membrain.audit import Cause
from membrain.models import Actor, ActorKind, Scope
from membrain.profile import ProfileEntry
from membrain.profiling import ProfileBook

__all__ = ["ProfileOperations"]


class ProfileOperations:
    """The user profile of :class:`membrain.Memory` (see the module docstring)."""

    _profiles: ProfileBook

    def profile(self, *, scope: Scope, topics: Sequence[str] | None = None) -> list[ProfileEntry]:
        """The user profile: the current entries of the scope's (dataset, task), in block order.

        Preferred topics (the schema's order) first, then entries backed by more facts; an
        entry citing a fact that is no longer active is returned with ``stale=True`` and is left
        out of :meth:`context` until refreshed. ``topics`` keeps only those topics.

        Raises:
            ScopeError: ``scope`` is missing or malformed.
        """
        check_scope(scope)
        wanted = None if topics is None else as_ids(topics, "topics")
        return self._profiles.current(scope, wanted)

    def profile_put(
        self,
        topic: str,
        subtopic: str,
        text: str,
        *,
        scope: Scope,
        facts: Sequence[str] = (),
        by: Actor | str | None = None,
        reason: str = "",
    ) -> ProfileEntry:
        """Set a profile entry: a new version of ``(topic, subtopic)`` citing ``facts``.

        The previous version stays (see :meth:`profile_history`); the change is audited as
        ``profile_set`` by ``by`` (the application when ``None``). Writing what the entry
        already says changes nothing. ``facts`` are ids (or 8+ hex prefixes) of active facts
        the text summarises.

        Raises:
            InputError: the schema does not admit the subtopic (``strict``), the text is empty
                or longer than 600 characters, the topic is full, or a fact id names no fact
                of the scope.
            ConflictError: a cited fact is not active.
        """
        check_scope(scope)
        cause = Cause.of(by, ActorKind.API, reason)
        return self._profiles.put(scope, topic, subtopic, text, as_ids(facts), cause)

    def profile_forget(
        self,
        topic: str,
        subtopic: str,
        *,
        scope: Scope,
        by: Actor | str | None = None,
        reason: str = "",
    ) -> ProfileEntry:
        """Remove a profile entry; returns the version that removes it (audited).

        Raises:
            NotFoundError: the profile has no such entry.
        """
        check_scope(scope)
        cause = Cause.of(by, ActorKind.API, reason)
        return self._profiles.forget(scope, topic, subtopic, cause)

    def profile_history(self, topic: str, subtopic: str, *, scope: Scope) -> list[ProfileEntry]:
        """Every version of a profile entry, oldest first, each citing its facts.

        Raises:
            NotFoundError: the entry never existed.
        """
        check_scope(scope)
        return self._profiles.history(scope, topic, subtopic)
