"""Extraction: from chat messages to fact-format facts."""

from membrain.extraction.base import (
    Discard,
    ExtractionBatch,
    Extractor,
    FactDraft,
    entity_refs,
    normalize_name,
)
from membrain.extraction.offline import OfflineExtractor

__all__ = [
    "Discard",
    "ExtractionBatch",
    "Extractor",
    "FactDraft",
    "OfflineExtractor",
    "entity_refs",
    "normalize_name",
]
