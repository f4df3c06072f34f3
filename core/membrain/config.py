"""Settings read from the environment (``MEMBRAIN_*``) by :meth:`membrain.Memory.from_settings`.

Nothing in MemBrain reads the environment at import time or in ``Memory()``; only
``Memory.from_settings()`` does.

Example:
    >>> settings = MembrainSettings(path="/tmp/mem")
    >>> settings.batch_size
    32
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["MembrainSettings"]


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
    keep_messages: timedelta | None = None
    """How long raw messages are kept once extracted: ``None`` (the default) keeps them forever.

    A duration (``MEMBRAIN_KEEP_MESSAGES=P30D`` or seconds) makes
    :meth:`membrain.Memory.apply_retention` erase the processed messages said longer ago than
    that, from every index and the store's files. The facts extracted from them stay and then
    cite evidence that no longer exists.
    """
