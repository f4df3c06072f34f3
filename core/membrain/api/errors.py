"""Errors raised by MemBrain.

Every error the library raises on purpose derives from :class:`MembrainError`::

    MembrainError
    ├── ConfigurationError       a setting or argument that cannot work
    │   └── MissingDependencyError   an optional package is not installed
    ├── ScopeError               a missing or malformed scope
    ├── InputError               a message, file or record that cannot be accepted
    │   └── ModelFileError       a model file (reranker trees) that cannot be loaded
    ├── AnnotationError          a ``[raw::resolved]`` annotation that does not parse
    ├── ExtractionError          extraction failed; carries the raw model output
    └── BackendError             the storage engine failed; wraps the engine error
        └── StoreInUseError      another process owns the embedded store
"""

from __future__ import annotations


class MembrainError(Exception):
    """Root of every error MemBrain raises on purpose."""


class ConfigurationError(MembrainError, ValueError):
    """A setting or argument that cannot work; the message says how to fix it."""


class MissingDependencyError(ConfigurationError, ImportError):
    """An optional dependency is missing.

    Args:
        package: The importable module that is missing.
        extra: The ``membrain-memory`` extra that installs it.
    """

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{package!r} is not installed; install it with: pip install 'membrain-memory[{extra}]'"
        )


class ScopeError(MembrainError):
    """A scope is missing or malformed. Every read and write needs one."""


class InputError(MembrainError):
    """Input that cannot be accepted: a bad message, file or record.

    Not a ``ValueError`` on purpose: pydantic would wrap it, and callers should see this type.
    """


class ModelFileError(InputError):
    """A model file that cannot be loaded: malformed, out of range or not finite.

    Raised by :meth:`membrain.retrieval.rerank.Reranker.from_json` for reranker trees.
    """


class NotFoundError(InputError):
    """An id that names nothing in the scope: a fact, a message, a review item (HTTP 404)."""


class ConflictError(InputError):
    """A request that contradicts what is stored (HTTP 409).

    A message id already naming another text, or a change the fact's state forbids
    (superseding a retracted fact).
    """


class AnnotationError(InputError):
    """A ``[raw::resolved]`` time annotation whose resolved part is not valid ISO 8601."""


class ExtractionError(MembrainError):
    """Extraction failed; the source messages stay pending.

    Args:
        message: What went wrong.
        raw_output: The model or extractor output that could not be used, verbatim.
        message_ids: The source messages that remain pending.
        retryable: A later attempt may succeed (the default: the model failed, or answered
            badly after every retry): the messages stay pending. ``False``: the messages
            themselves cannot be extracted; they are tried one by one and those that fail alone
            are marked failed, so the rest of the scope goes on.
    """

    def __init__(
        self,
        message: str,
        *,
        raw_output: str = "",
        message_ids: tuple[str, ...] = (),
        retryable: bool = True,
    ) -> None:
        super().__init__(message)
        self.raw_output = raw_output
        self.message_ids = message_ids
        self.retryable = retryable


class BackendError(MembrainError):
    """The storage engine failed; the engine's exception is chained as ``__cause__``."""


class StoreInUseError(BackendError):
    """Another process owns the embedded store; the message names it."""
