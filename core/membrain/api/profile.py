"""The user profile's records: entries, versions and the topic schema they follow.

A profile is what stays true of the user between conversations, kept per (dataset, task) as
``(topic, subtopic) → text``: a few sentences, each entry citing the facts it summarises. An
entry is never rewritten: a change adds a version (the previous one stays, readable through
``Memory.profile_history``), a removal adds a version marked ``removed``. Times stay structured
on the cited facts, never inside the text.

:class:`ProfileSchema` lists the topics, their subtopics and what belongs there. ``strict``
admits only the listed subtopics; otherwise new subtopics may be added under a listed topic.
``cap`` bounds how many entries a topic holds. Load one from TOML or YAML with
:meth:`ProfileSchema.load`, or use :data:`DEFAULT_PROFILE_SCHEMA` (a general assistant).

Example:
    >>> DEFAULT_PROFILE_SCHEMA.admits("work", "occupation")
    True
    >>> DEFAULT_PROFILE_SCHEMA.admits("work", "salary")
    False
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from membrain.api.checks import MAX_REASON_CHARS, UtcDatetime
from membrain.api.errors import ConfigurationError, InputError
from membrain.api.scope import Record, Scope

__all__ = [
    "DEFAULT_PROFILE_SCHEMA",
    "ContextRecipe",
    "MAX_PROFILE_TEXT",
    "ProfileEntry",
    "ProfileSchema",
    "ProfileSubtopic",
    "ProfileTopic",
]

MAX_PROFILE_TEXT = 600
"""The most characters of an entry's text (a few sentences)."""
_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}\Z")


def _check_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise InputError(
            f"a profile {what} is 1-48 lowercase letters, digits or '_', got {value!r:.60}"
        )
    return value


TopicName = Annotated[str, AfterValidator(lambda value: _check_name(value, "topic"))]
SubtopicName = Annotated[str, AfterValidator(lambda value: _check_name(value, "subtopic"))]


class ProfileEntry(Record):
    """One version of one ``(topic, subtopic)`` of the user's profile.

    ``version`` counts from 1 per subtopic; the highest is the current one unless it is
    ``removed``. ``fact_ids`` are the facts the text summarises; an entry whose cited facts are
    no longer all active is ``stale`` (:meth:`membrain.Memory.profile` says so) and stays out of
    the context until it is refreshed. ``author`` is who wrote it (``extractor:offline``,
    ``api``, ``agent:<name>``, ``reviewer:<name>``).
    """

    id: str
    scope: Scope
    topic: str
    subtopic: str
    text: str = Field(min_length=1, max_length=MAX_PROFILE_TEXT)
    fact_ids: tuple[str, ...] = ()
    version: int = Field(ge=1)
    recorded_at: UtcDatetime
    author: str
    removed: bool = False
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    stale: bool = False
    """Set on reading: a cited fact is superseded, forgotten or gone."""

    @staticmethod
    def id_for(scope: Scope, topic: str, subtopic: str, version: int) -> str:
        """The id of a version of an entry (the same in every store)."""
        return scope.without_session().record_id("profile", topic, subtopic, str(version))

    @property
    def key(self) -> tuple[str, str]:
        """``(topic, subtopic)``."""
        return (self.topic, self.subtopic)


class ProfileSubtopic(BaseModel):
    """A subtopic: its name and what belongs there (shown to a model that writes entries)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: SubtopicName
    description: str = ""


class ProfileTopic(BaseModel):
    """A topic, its subtopics, and how many entries it may hold (``cap``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: TopicName
    description: str = ""
    subtopics: tuple[ProfileSubtopic, ...] = ()
    cap: int = Field(default=8, ge=1, le=100)


class ProfileSchema(BaseModel):
    """The topics a profile holds, in order of preference (the first fill the budget first)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topics: tuple[ProfileTopic, ...] = Field(min_length=1)
    strict: bool = True
    """Only the listed subtopics; otherwise new subtopics may be added under a listed topic."""

    def topic(self, name: str) -> ProfileTopic | None:
        """The topic called ``name``, if listed."""
        return next((t for t in self.topics if t.name == name), None)

    def admits(self, topic: str, subtopic: str) -> bool:
        """Whether an entry may be written under ``(topic, subtopic)``."""
        found = self.topic(topic)
        if found is None or not _NAME.match(subtopic or ""):
            return False
        return not self.strict or any(s.name == subtopic for s in found.subtopics)

    def check(self, topic: str, subtopic: str) -> None:
        """Refuse a ``(topic, subtopic)`` the schema does not admit.

        Raises:
            InputError: naming what the schema admits.
        """
        _check_name(topic, "topic")
        _check_name(subtopic, "subtopic")
        if not self.admits(topic, subtopic):
            found = self.topic(topic)
            listed = (
                ", ".join(t.name for t in self.topics)
                if found is None
                else ", ".join(s.name for s in found.subtopics) or "(any, not strict)"
            )
            where = "topics" if found is None else f"subtopics of {topic!r}"
            raise InputError(f"the profile schema has no {topic}/{subtopic}; its {where}: {listed}")

    def order(self, topic: str) -> int:
        """The preference of ``topic``: its place in the schema."""
        return next((i for i, t in enumerate(self.topics) if t.name == topic), len(self.topics))

    @classmethod
    def load(cls, path: str | Path) -> ProfileSchema:
        """A schema read from a TOML (``.toml``) or YAML (``.yaml``/``.yml``) file.

        The file holds ``strict`` and a list of ``topics``, each with ``name``,
        ``description``, ``cap`` and ``subtopics`` (each a ``name`` and ``description``). A
        file may also hold other tables (a product configuration): only ``[profile]`` is read
        when present.

        Raises:
            ConfigurationError: the file cannot be read or is not a valid schema.
        """
        data = _read(Path(path))
        if isinstance(data, dict) and isinstance(data.get("profile"), dict):
            data = data["profile"]
        return _valid(cls, data, path, "a profile schema")


def _topic(name: str, description: str, *subtopics: tuple[str, str], cap: int = 8) -> ProfileTopic:
    return ProfileTopic(
        name=name,
        description=description,
        subtopics=tuple(ProfileSubtopic(name=n, description=d) for n, d in subtopics),
        cap=cap,
    )


DEFAULT_PROFILE_SCHEMA = ProfileSchema(
    topics=(
        _topic(
            "basic_info",
            "Who the user is.",
            ("name", "What the user is called."),
            ("residence", "Where the user lives now."),
            ("age", "The user's age or birth year."),
            ("language", "Languages the user speaks."),
        ),
        _topic(
            "work",
            "The user's work and studies.",
            ("occupation", "What the user does for a living."),
            ("employer", "Who the user works for."),
            ("education", "What and where the user studies or studied."),
        ),
        _topic(
            "relationships",
            "The people in the user's life.",
            ("partner", "The user's partner."),
            ("family", "Parents, children, siblings."),
            ("pets", "The user's animals."),
        ),
        _topic(
            "lifestyle",
            "How the user lives.",
            ("diet", "What the user eats or avoids."),
            ("health", "Conditions, allergies, fitness."),
            ("hobbies", "What the user does for fun."),
        ),
        _topic(
            "possessions",
            "What the user owns and uses.",
            ("vehicle", "The car, bike or scooter the user rides."),
            ("phone", "The user's phone."),
        ),
        _topic(
            "preferences",
            "How the user likes to be helped.",
            ("communication", "Tone, length, format the user prefers."),
            ("interests", "Topics the user wants to hear about."),
        ),
    )
)
"""The schema of a general assistant's user profile."""


class ContextRecipe(BaseModel):
    """A product's memory settings: its profile schema and how its context is assembled.

    A file holds a ``[context]`` table (``name``, ``description``, ``mode``, ``max_tokens``,
    ``profile_ratio``, ``k``) and a ``[profile]`` table (a :class:`ProfileSchema`). The worked
    recipes ship under ``examples/`` (companion, tutor, assistant).

    Example:
        >>> recipe = ContextRecipe.load("examples/companion.toml")  # doctest: +SKIP
        >>> memory = Memory(profile_schema=recipe.profile)  # doctest: +SKIP
        >>> memory.context(question, scope=scope, **recipe.context_arguments())  # doctest: +SKIP
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    mode: str = "expand"
    max_tokens: int = Field(default=2000, ge=1)
    profile_ratio: float = Field(default=0.0, ge=0, le=1)
    k: int = Field(default=50, ge=1)
    profile: ProfileSchema = DEFAULT_PROFILE_SCHEMA

    def context_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``Memory.context`` this recipe sets."""
        return {
            "mode": self.mode,
            "max_tokens": self.max_tokens,
            "profile_ratio": self.profile_ratio,
            "k": self.k,
        }

    @classmethod
    def load(cls, path: str | Path) -> ContextRecipe:
        """A recipe read from a TOML or YAML file (see the class docstring).

        Raises:
            ConfigurationError: the file cannot be read or is not a valid recipe.
        """
        data = _read(Path(path))
        if not isinstance(data, dict):
            raise ConfigurationError(f"{path} is not a context recipe: not a table")
        fields = {**(data.get("context") or {}), "profile": data.get("profile")}
        if fields["profile"] is None:
            del fields["profile"]
        return _valid(cls, fields, path, "a context recipe")


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".yaml", ".yml"):
            import yaml  # type: ignore[import-untyped,unused-ignore]  # only YAML needs it

            return yaml.safe_load(text)
        return tomllib.loads(text)
    except (OSError, ValueError, ImportError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from None


_M = TypeVar("_M", bound=BaseModel)


def _valid(model: type[_M], data: Any, path: str | Path, what: str) -> _M:
    try:
        return model.model_validate(data)
    except (ValidationError, InputError) as exc:
        first = str(exc).splitlines()[0]
        raise ConfigurationError(f"{path} is not {what}: {first}") from None
