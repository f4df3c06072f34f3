"""What every framework adapter shares: its scope binding, its clock and its speaker names.

- :class:`ScopeBinding` is the one way an adapter gets its :class:`~membrain.Scope`: a fixed
  scope, the scope's parts (``dataset``/``task``/``session``), or templates such as
  ``"{user_id}"`` resolved per run from a mapping of values (LangGraph's
  ``config["configurable"]``, a runtime context).
- :class:`MonotonicClock` stamps the messages adapters write with the current UTC time,
  strictly increasing, so a transcript keeps the order it was written in; :data:`CLOCK` is the
  process-wide instance every adapter uses.
- :func:`scope_part` turns any string (a user id such as ``"auth0|64b7f1"``) into its scope
  part, as :class:`~membrain.Scope` does; :class:`ScopeBinding` applies it to every value it
  resolves (:func:`membrain.api.scope.compose_part`), so ids need not fit the scope alphabet and
  two different values never share a part.
- :data:`DEFAULT_USER_NAME` and :data:`DEFAULT_ASSISTANT_NAME` are the speaker names of user and
  assistant messages when the caller names nobody. A user *id* is never a speaker name: adapters
  take the name from a separate ``user_name``.

Example:
    >>> ScopeBinding().resolve({"user_id": "sara", "thread_id": "t1"})
    Scope(dataset='sara', task='assistant', session='t1')
    >>> ScopeBinding.of(dataset="sara", task="assistant").resolve()
    Scope(dataset='sara', task='assistant', session=None)
    >>> scope_part("auth0|64b7f1")
    'auth0_64b7f1-h0965fcf43ca6e13d'
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from membrain.api.errors import ConfigurationError, ScopeError
from membrain.api.inputs import CLOCK, DEFAULT_ASSISTANT_NAME, DEFAULT_USER_NAME, MonotonicClock
from membrain.api.models import Scope
from membrain.api.scope import ScopePart, compose_part, scope_part, template_separators

__all__ = [
    "CLOCK",
    "DEFAULT_ASSISTANT_NAME",
    "DEFAULT_USER_NAME",
    "MonotonicClock",
    "ScopeBinding",
    "scope_part",
]

_FORMATTER = string.Formatter()


def _pieces(template: str) -> tuple[list[str], list[str]]:
    """A template's literal texts and its field names (one text more than names).

    Raises:
        ConfigurationError: the template does not parse, has a field that is not a key, or one
            with a conversion or format spec (``{user_id!r}``, ``{user_id:.3}``: they change the
            value, so two values could make one part), or fields not told apart (see
            :func:`membrain.api.scope.template_separators`).
    """
    texts, names = [""], []
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError as exc:
        raise ConfigurationError(f"scope template {template!r} does not parse: {exc}") from None
    for literal, name, spec, conversion in parsed:
        texts[-1] += literal
        if name is None:
            continue
        if not name or not name.isidentifier() or spec or conversion:
            raise ConfigurationError(
                f"scope template {template!r} has the field {{{name}}}; fields must name a "
                "value, like {user_id}, without a conversion or format spec"
            )
        names.append(name)
        texts.append("")
    template_separators(texts)
    return texts, names


def _keys(template: str) -> tuple[str, ...]:
    """The value keys a template reads; malformed templates raise ``ConfigurationError``."""
    return tuple(dict.fromkeys(_pieces(template)[1]))


def _fill(template: str, known: Mapping[str, str]) -> str:
    """The part ``template`` names with the values ``known``, each encoded to stay apart."""
    if isinstance(template, ScopePart):  # a stored part (no field): already encoded
        return template
    texts, names = _pieces(template)
    if not names:
        return texts[0]  # a literal: a raw value, which Scope checks and encodes
    return compose_part(texts, [known[name] for name in names])


@dataclass(frozen=True)
class ScopeBinding:
    """Where an adapter's memory lives: a fixed scope, or templates resolved per run.

    Each part is a ``str.format`` template over a mapping of values (``"{user_id}"``); a part
    without fields is literal, and a binding whose parts are all literal is fixed
    (:attr:`scope`). ``defaults`` fill keys the values lack (``None`` and ``""`` count as
    missing). A key that ``dataset`` or ``task`` needs but neither the values nor the defaults
    hold raises :class:`~membrain.ScopeError`; when a key of ``session`` is missing the scope
    has no session (it covers every session of the tenant). ``session=None`` never uses one.

    Every value (and default) is encoded by :func:`scope_part` as it fills a template
    (:func:`membrain.api.scope.compose_part`), so a value may be any string: ``"auth0|64b7f1"``
    resolves to the dataset ``"auth0_64b7f1-h0965fcf43ca6e13d"``, as ``Scope`` stores it, while
    ``"sara@example.com"`` stays as it is. A value holding a separator of its template (``:`` in
    ``"{org}:{user_id}"``) is encoded too, so different values never make one part; fields must
    be told apart by such a separator. A resolved part longer than 128 characters is encoded as
    a whole. The values themselves (the original user id) are left to the caller; they are never
    a speaker name.

    Args:
        dataset: Template of the scope's dataset (whose memory); default ``"{user_id}"``.
        task: Template of the scope's task (which agent); default ``"{assistant_id}"``.
        session: Template of the session, or ``None``; default ``"{thread_id}"``.
        defaults: Values for missing keys; default ``{"assistant_id": "assistant"}``.

    Raises:
        ConfigurationError: A template does not parse, has a field that is not a key (or one
            with a conversion or format spec), or two fields not told apart by a separator.
        ScopeError: A fixed binding's parts do not form a valid scope.

    Example:
        >>> binding = ScopeBinding(dataset="{org}:{user_id}", defaults={"org": "acme"})
        >>> binding.resolve({"user_id": "sara", "assistant_id": "tutor"})
        Scope(dataset='acme:sara', task='tutor', session=None)
        >>> ScopeBinding.fixed(Scope(dataset="sara", task="chat")).scope
        Scope(dataset='sara', task='chat', session=None)
    """

    dataset: str = "{user_id}"
    task: str = "{assistant_id}"
    session: str | None = "{thread_id}"
    defaults: Mapping[str, str] = field(
        default_factory=lambda: {"assistant_id": "assistant"}, hash=False
    )
    _fixed: Scope | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        defaults = {str(k): str(v) for k, v in self.defaults.items()}
        object.__setattr__(self, "defaults", MappingProxyType(defaults))
        templates = (self.dataset, self.task, self.session or "")
        if not any([_keys(t) for t in templates]):
            fixed = Scope(dataset=self.dataset, task=self.task, session=self.session)
            object.__setattr__(self, "_fixed", fixed)

    @classmethod
    def fixed(cls, scope: Scope) -> ScopeBinding:
        """A binding that always resolves to ``scope``."""
        return cls(dataset=scope.dataset, task=scope.task, session=scope.session, defaults={})

    @classmethod
    def of(
        cls,
        scope: Scope | None = None,
        *,
        dataset: str | None = None,
        task: str | None = None,
        session: str | None = None,
        owner: str = "this adapter",
        session_required: bool = False,
    ) -> ScopeBinding:
        """A fixed binding from an adapter's arguments: ``scope``, or its parts (not both).

        Args:
            scope: The scope.
            dataset: Scope dataset (instead of ``scope``).
            task: Scope task (instead of ``scope``).
            session: Scope session (instead of ``scope``).
            owner: Who asks, for the error messages (``"MembrainRetriever"``).
            session_required: The scope must name a session.

        Raises:
            ScopeError: Both or neither were given, a part is not valid, or the session is
                missing when it is required.
        """
        parts = (dataset, task, session)
        if scope is not None:
            if any(part is not None for part in parts):
                raise ScopeError("pass either scope=Scope(...) or dataset/task/session, not both")
        elif dataset is None or task is None:
            if session_required:
                raise ScopeError(
                    f"{owner} needs a scope with a session: pass "
                    "scope=Scope(dataset=..., task=..., session=...) or dataset/task/session"
                )
            raise ScopeError(
                f"{owner} needs a scope: pass scope=Scope(dataset=..., task=...) "
                "or dataset=... and task=... (and optionally session=...)"
            )
        else:
            scope = Scope(dataset=dataset, task=task, session=session)
        if session_required and scope.session is None:
            raise ScopeError(
                f"{owner} needs a scope with a session, e.g. Scope(dataset={scope.dataset!r}, "
                f"task={scope.task!r}, session='thread-1')"
            )
        return cls.fixed(scope)

    @classmethod
    def from_namespace(
        cls,
        namespace: Sequence[str],
        *,
        task: str | None = None,
        session: str | None = None,
        defaults: Mapping[str, str] | None = None,
    ) -> ScopeBinding:
        """A binding from a LangGraph store namespace template, as langmem writes them.

        The labels with a field (``"{user_id}"``) name whose memory it is: they form the
        dataset (joined by ``":"``). The literal labels (``"memories"``) name the collection:
        they form the task (joined by ``":"``) unless ``task`` is given. A namespace spans
        every thread, so the scope has no session unless ``session`` (a template such as
        ``"{thread_id}"``) is given.

        Args:
            namespace: Labels, literal or templates, such as ``("memories", "{user_id}")``.
            task: Template of the task instead of the literal labels (``"{assistant_id}"``).
            session: Template of the session; default none.
            defaults: Values for missing keys; default ``{"assistant_id": "assistant"}``.

        Raises:
            ConfigurationError: No label has a field (nothing says whose memory it is), or the
                task is empty (no literal label and no ``task``), or a label does not parse.

        Example:
            >>> binding = ScopeBinding.from_namespace(("memories", "{user_id}"))
            >>> binding.resolve({"user_id": "auth0|64b7f1", "thread_id": "t1"})
            Scope(dataset='auth0_64b7f1-h0965fcf43ca6e13d', task='memories', session=None)
            >>> ScopeBinding.from_namespace(("memories", "{user_id}"), task="notes").resolve(
            ...     {"user_id": "sara"}
            ... )
            Scope(dataset='sara', task='notes', session=None)
        """
        labels = tuple(namespace)
        templated = [label for label in labels if _keys(label)]
        literal = [label for label in labels if not _keys(label)]
        if not templated:
            raise ConfigurationError(
                f"namespace {labels!r} has no label like '{{user_id}}' to say whose memory it "
                "is; use ScopeBinding.fixed(Scope(...)) for one fixed scope"
            )
        task = task if task is not None else ":".join(literal)
        if not task:
            raise ConfigurationError(
                f"namespace {labels!r} has no literal label to name the task; pass task=..."
            )
        return cls(
            dataset=":".join(templated),
            task=task,
            session=session,
            defaults=defaults if defaults is not None else {"assistant_id": "assistant"},
        )

    @property
    def scope(self) -> Scope | None:
        """The scope of a fixed binding; ``None`` when a part is a template."""
        return self._fixed

    def resolve(
        self,
        values: Mapping[str, object] | None = None,
        *,
        source: str = "the mapping of values",
        hint: str = "",
    ) -> Scope:
        """The scope for ``values`` (a fixed binding ignores them).

        Args:
            values: The run's values (``str()`` of each is used).
            source: Where the values come from, for the error message
                (``"config['configurable']"``).
            hint: How to pass a missing key, for the error message; ``{key}`` stands for the
                quoted key (``"pass it when invoking, e.g. {{{key}: ...}}"``).

        Raises:
            ScopeError: A key that ``dataset`` or ``task`` needs is missing, or a resolved part
                is not a valid scope part.
        """
        if self._fixed is not None:
            return self._fixed
        known = {key: value for key, value in self.defaults.items() if value}
        for key, value in (values or {}).items():
            if value is not None and value != "":
                known[key] = value if isinstance(value, str) else str(value)
        parts: dict[str, str] = {}
        for name, template in (("dataset", self.dataset), ("task", self.task)):
            missing = [key for key in _keys(template) if not known.get(key)]
            if missing:
                key = repr(missing[0])
                how = hint.replace("{key}", key) if hint else f"pass it in {source}"
                raise ScopeError(
                    f"the scope's {name} is {template!r} but {source} has no "
                    f"{', '.join(repr(k) for k in missing)}; {how}, or give the "
                    f"{type(self).__name__} a default for it (defaults={{{key}: ...}})"
                )
            parts[name] = _fill(template, known)
        session: str | None = None
        if self.session is not None and all(known.get(k) for k in _keys(self.session)):
            session = _fill(self.session, known)
        return Scope(dataset=parts["dataset"], task=parts["task"], session=session)
