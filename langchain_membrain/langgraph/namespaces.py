"""Store namespaces written by a convention, mapped onto MemBrain scopes.

langmem and many LangGraph apps key their store by ``("memories", "{user_id}")``: the user is
in the second label. :func:`namespace_scopes` turns such a template into the
``namespace_to_scope`` function of :class:`~langchain_membrain.langgraph.MembrainStore`, so the
user becomes the dataset (whose memory) and the literal labels the task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from membrain import Scope, ScopeError
from membrain.binding import ScopeBinding

__all__ = ["namespace_scopes"]

_FIELD = re.compile(r"^\{(\w+)\}$")


def namespace_scopes(
    template: Sequence[str], *, task: str | None = None, session: str | None = None
) -> Callable[[tuple[str, ...]], Scope]:
    """A namespace → scope mapping for namespaces shaped like ``template``.

    Each label of ``template`` is a literal the namespace must repeat, or a whole-label field
    (``"{user_id}"``) whose value the namespace gives; the scope is
    :meth:`ScopeBinding.from_namespace` of the template resolved with those values (ids that do
    not fit a scope are encoded, see :func:`membrain.binding.scope_part`).

    Raises:
        ConfigurationError: the template names nobody (see ``ScopeBinding.from_namespace``).

    Example:
        >>> to_scope = namespace_scopes(("memories", "{user_id}"))
        >>> to_scope(("memories", "sara"))
        Scope(dataset='sara', task='memories', session=None)
    """
    labels = tuple(template)
    binding = ScopeBinding.from_namespace(labels, task=task, session=session)

    def to_scope(namespace: tuple[str, ...]) -> Scope:
        if len(namespace) != len(labels):
            raise ScopeError(f"namespace {namespace!r} does not have the shape {labels!r}")
        values: dict[str, str] = {}
        for label, value in zip(labels, namespace, strict=True):
            field = _FIELD.match(label)
            if field is not None:
                values[field.group(1)] = value
            elif label != value:
                raise ScopeError(f"namespace {namespace!r} does not match {labels!r}")
        return binding.resolve(values)

    return to_scope
