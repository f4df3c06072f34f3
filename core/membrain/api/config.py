"""Settings read from the environment (``MEMBRAIN_*``) by :meth:`membrain.Memory.from_settings`.

Nothing in MemBrain reads the environment at import time or in ``Memory()``; only
``Memory.from_settings()`` and ``BackgroundWriter.from_settings()`` do.

Example:
    >>> settings = MembrainSettings(path="/tmp/mem")
    >>> settings.batch_size
    32
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from membrain.api.errors import ConfigurationError
from membrain.api.expiry import DEFAULT_EXPIRY_GRACE, ExpiryRule

__all__ = ["DEFAULT_MAX_BODY_BYTES", "MembrainSettings", "settings_for"]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest request body ``membrain serve`` reads by default (4 MiB)."""


class MembrainSettings(BaseSettings):
    """Configuration of a :class:`membrain.Memory`.

    Every field can be set as an environment variable with the ``MEMBRAIN_`` prefix, e.g.
    ``MEMBRAIN_QDRANT_URL=http://localhost:6333``.
    """

    model_config = SettingsConfigDict(env_prefix="MEMBRAIN_", extra="ignore", frozen=True)

    path: Path = Path(".membrain")
    """Folder of the embedded store (ignored when ``qdrant_url`` is set)."""
    qdrant_url: str | None = None
    """A Qdrant server or cluster to use instead of the embedded store."""
    qdrant_api_key: str | None = None
    dense_model: str | None = None
    """A fastembed model name (needs network on first use); default: the packaged offline model."""
    batch_size: int = Field(default=32, ge=1)
    """Messages per extraction call."""
    context_window: int = Field(default=6, ge=0)
    """Preceding messages given to the extractor as context."""
    llm: str | None = None
    """The extraction model, as ``module:attribute``: a chat model object (LangChain, LlamaIndex,
    or one with ``generate(system, prompt)``), or a function or class called with no argument
    to make one (``MEMBRAIN_LLM=myapp.models:extraction_model``). Default: offline extraction.
    """
    keep_messages: timedelta | None = None
    """How long raw messages are kept once extracted: ``None`` (the default) keeps them forever.

    A duration (``MEMBRAIN_KEEP_MESSAGES=P30D`` or seconds) makes
    :meth:`membrain.Memory.apply_retention` erase the processed messages said longer ago than
    that, from every index and the store's files. The facts extracted from them stay and then
    cite evidence that no longer exists.
    """
    trace_recalls: bool = False
    """Record what each read gives an agent (``MEMBRAIN_TRACE_RECALLS=true``): the recall trace
    that :meth:`membrain.Memory.trace` and :meth:`membrain.Memory.recalls` read."""
    keep_recalls: timedelta | None = None
    """How long recalls are kept: ``None`` (the default) keeps them until their facts are purged;
    a duration (``MEMBRAIN_KEEP_RECALLS=P90D``) makes :meth:`membrain.Memory.apply_retention`
    erase older ones."""
    writer_idle_seconds: float = Field(default=5.0, gt=0)
    """Seconds a scope stays quiet before the background writer extracts it.

    Read by :meth:`membrain.background.BackgroundWriter.from_settings`
    (``MEMBRAIN_WRITER_IDLE_SECONDS=2``). Shorter: a follow-up question finds the facts of
    the previous turn sooner, at the cost of smaller extraction batches.
    """
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1)
    """The largest request body ``membrain serve`` reads; a larger one answers 413."""
    expiry: list[ExpiryRule] = Field(default_factory=list)
    """When messages and their facts expire by their metadata (:mod:`membrain.api.expiry`), as
    JSON: ``MEMBRAIN_EXPIRY='[{"metadata": {"kind": "otp"}, "after": 600}]'`` (``after`` in
    seconds or ISO 8601, from the message's timestamp; the first matching rule wins).
    """
    expiry_grace: timedelta = DEFAULT_EXPIRY_GRACE
    """How long expired facts and messages stay before retention erases them
    (``MEMBRAIN_EXPIRY_GRACE=P7D``, the default)."""


def settings_for(
    settings: MembrainSettings | None = None,
    *,
    path: str | Path | None = None,
    qdrant_url: str | None = None,
    llm: str | None = None,
) -> MembrainSettings:
    """``settings`` (default: read from ``MEMBRAIN_*``) with its store and model overridden.

    ``path`` names an embedded store, ``qdrant_url`` a Qdrant server; either replaces the
    store ``settings`` name. ``llm`` (``module:attribute``) replaces its extraction model.

    Raises:
        ConfigurationError: both ``path`` and ``qdrant_url``, or an invalid ``MEMBRAIN_*``.
    """
    if path is not None and qdrant_url is not None:
        raise ConfigurationError("pass either path (embedded) or qdrant_url (server), not both")
    if settings is None:
        try:
            settings = MembrainSettings()
        except ValidationError as exc:
            raise ConfigurationError(f"invalid MEMBRAIN_* setting: {exc}") from None
    update: dict[str, object] = {"llm": llm} if llm else {}
    if qdrant_url is not None:
        update["qdrant_url"] = qdrant_url
    elif path is not None:
        update.update(path=Path(path), qdrant_url=None)
    return settings.model_copy(update=update) if update else settings
