"""The facts an application states itself: each message it stores comes with its fact.

:meth:`membrain.Memory.update` stores the caller's statement as a message (the evidence) and
writes the fact it gives through the same write path as extracted facts (entity resolution,
indexes, audit), with this extractor: no model, no rules, the fact as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from membrain.api.models import Message
from membrain.extraction.base import ExtractionBatch, FactDraft, KnownFact, KnownLookup

__all__ = ["StatedFacts"]


class StatedFacts:
    """Extracts, from each message whose stored id it knows, the fact text given for it.

    Args:
        texts: Stored message id -> the fact text (fact format) the message states.
    """

    id = "stated"
    wants_known_facts = False
    speakers_take_part = False
    """The messages are the application's statements, not turns: their speaker takes no part."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self._texts = dict(texts)

    def extract(
        self,
        target: Sequence[Message],
        context: Sequence[Message],
        participants: Sequence[str],
        known: Sequence[KnownFact] | KnownLookup = (),
    ) -> ExtractionBatch:
        """One fact per message it knows, citing it, stated at its time (``known`` unused)."""
        return ExtractionBatch(
            facts=[
                FactDraft(text=self._texts[m.id], sources=(m.id,), stated_at=m.timestamp)
                for m in target
                if m.id is not None and m.id in self._texts
            ]
        )
