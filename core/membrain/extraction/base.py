"""What every extractor takes and returns (names in fact text: :mod:`membrain.api.entity_refs`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from membrain.api.entity_refs import entity_refs, normalize_name
from membrain.api.models import Layer, Message, TimeCheck

__all__ = [
    "Discard",
    "EntityDraft",
    "ExtractionBatch",
    "Extractor",
    "FactDraft",
    "KnownFact",
    "KnownLookup",
    "draft_index",
    "draft_ref",
    "entity_refs",
    "normalize_name",
]


@dataclass(frozen=True, slots=True)
class FactDraft:
    """A fact as an extractor wrote it: fact-format text, the messages it states, their time.

    ``layer`` says whether it was said, done or privately thought; ``time_check`` how
    its time annotations compare with the deterministic resolver, when the extractor checked;
    ``replaces`` the stored ids of the known facts (:class:`KnownFact`) it makes no longer true,
    or :func:`draft_ref` of an earlier draft of the same batch (a later message of one add
    replaces an earlier one as a later add does); ``may_replace`` those it perhaps replaces, for
    a person to review.
    """

    text: str
    sources: tuple[str, ...]
    stated_at: datetime
    layer: Layer = Layer.DIALOGUE
    time_check: TimeCheck | None = None
    replaces: tuple[str, ...] = ()
    may_replace: tuple[str, ...] = ()


DRAFT_REF_PREFIX = "draft:"


def draft_ref(index: int) -> str:
    """How a draft names the draft at ``index`` of its own batch in ``replaces``.

    Example:
        >>> draft_ref(0)
        'draft:0'
    """
    return f"{DRAFT_REF_PREFIX}{index}"


def draft_index(ref: str) -> int | None:
    """The batch index a :func:`draft_ref` names; ``None`` for a stored fact id."""
    if not ref.startswith(DRAFT_REF_PREFIX):
        return None
    number = ref[len(DRAFT_REF_PREFIX) :]
    return int(number) if number.isdigit() else None


@dataclass(frozen=True, slots=True)
class KnownFact:
    """An active fact already in memory, shown to the extractor so a new fact can replace it."""

    id: str
    """The stored fact id."""
    text: str
    """The fact text as stored (with [entity] brackets and [raw::resolved] times)."""
    stated_at: datetime
    """When the fact was stated."""


@dataclass(frozen=True, slots=True)
class EntityDraft:
    """An entity as an extractor named it, with what the messages say it is (may be empty)."""

    name: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class Discard:
    """Content an extractor chose not to keep, and why (nothing is dropped silently)."""

    message_id: str
    reason: str
    text: str


KnownLookup = Callable[[Sequence[str]], Sequence[KnownFact]]
"""The known facts of a batch, looked up from the names of the entities it mentions (or the
attribute keys it states, for an extractor that sets ``known_facts_by = "claim"``)."""


@dataclass(frozen=True, slots=True)
class ExtractionBatch:
    """The result of extracting one batch of messages."""

    facts: list[FactDraft] = field(default_factory=list)
    discarded: list[Discard] = field(default_factory=list)
    entities: list[EntityDraft] = field(default_factory=list)


class Extractor(Protocol):
    """Turns target messages (with preceding context) into facts.

    ``target`` and ``context`` carry stored ids in ``Message.id``; ``participants`` are the known
    speakers of the scope; ``known`` the scope's active facts about the batch's entities, which a
    new fact may replace (:attr:`FactDraft.replaces`), or a :data:`KnownLookup` to call with the
    names of the entities the batch mentions, once found. Raise
    :class:`membrain.api.errors.ExtractionError` to leave the target messages pending.

    The write path looks known facts up only for an extractor whose ``extract`` takes ``known``
    and that does not set a class attribute ``wants_known_facts = False``. By default the lookup
    returns the facts closest to the batch's messages (a short list for a prompt); an extractor
    that sets ``known_facts_by = "entity"`` gets every active fact naming the entities it passes
    (the latest 2,000), to compare with rules; one that sets ``known_facts_by = "claim"`` passes
    attribute keys (:func:`membrain.extraction.attributes.claim_key`, ``"maya|residence"``) and
    gets every active fact stating a value of one of them, from an index.
    """

    @property
    def id(self) -> str:
        """Identifies the extractor and its version; stored on every fact it writes."""
        ...

    def extract(
        self,
        target: Sequence[Message],
        context: Sequence[Message],
        participants: Sequence[str],
        known: Sequence[KnownFact] | KnownLookup = (),
    ) -> ExtractionBatch:
        """Extract facts from ``target``."""
        ...
