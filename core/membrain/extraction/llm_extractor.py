"""LLM extraction: two calls per batch (entities, then facts), validated and repaired.

What models really return is checked before anything is stored:

* the JSON (fences, prose around it, trailing commas, a bare list… are recovered by
  :func:`~membrain.extraction.jsonout.parse_json_object`);
* entity fidelity: every ``[ref]`` must name a listed entity (a difference of case or spacing is
  repaired in place);
* the annotation grammar of every ``[raw::resolved]``;
* every resolved time against the deterministic resolver at the message time: a span that does not
  overlap the resolver's is a contradiction;
* facts without content are discarded, and the discard recorded;
* every ``replaces`` reference must name a listed known fact (``K3``; ``k3``, ``"3"``, ``3`` and a
  bare string instead of a list are repaired); references become the known facts' stored ids.

A failed check is fed back to the model and the call retried (``max_attempts`` in all, with
:mod:`tenacity`). When attempts run out the batch raises
:class:`~membrain.api.errors.ExtractionError` carrying the last raw output, so the messages stay
pending, except for time contradictions: those facts are kept, flagged ``trust=disputed`` and
``time_check=contradicts``, never silently accepted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from membrain.api.errors import AnnotationError
from membrain.api.models import Layer, Message, Role, utc
from membrain.extraction.asking import Invalid, ask
from membrain.extraction.base import (
    Discard,
    EntityDraft,
    ExtractionBatch,
    FactDraft,
    KnownFact,
    KnownLookup,
    entity_refs,
    normalize_name,
)
from membrain.extraction.character import parse_response
from membrain.extraction.llm import LLMClient
from membrain.extraction.prompts import (
    DIVIDER,
    ENTITY_SCHEMA,
    FACT_SCHEMA,
    NO_KNOWN_FACTS,
    PROMPT_VERSION,
    Prompts,
)
from membrain.temporal import check_times, find_annotations, find_times, format_resolved

__all__ = ["LLMExtractor", "render_known", "render_window"]


_THOUGHT_MARK = "privately thought"


def _stamp(moment: datetime) -> str:
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def _line(head: str, text: str) -> str:
    """One message line; its own line breaks become indented continuation lines.

    So no text can start a line of its own: it cannot pass for another speaker's message or
    for the divider.
    """
    first, *rest = [part for part in text.splitlines() if part.strip()] or [""]
    return "\n".join([f"{head}: {first}", *(f"    {part}" for part in rest)])


def _lines(message: Message) -> list[str]:
    if message.role is Role.SYSTEM:  # instructions to a model, not something anyone said
        return []
    head = f"[{_stamp(message.timestamp)}] {' '.join(message.speaker.split())}"
    parsed = parse_response(message.text)
    if not parsed.has_markup:
        lines = [_line(head, message.text)] if message.text.strip() else []
    else:
        lines = [_line(head, parsed.dialogue)] if parsed.dialogue else []
        lines += [_line(f"{head} (action)", action) for action in parsed.actions]
        lines += [_line(f"{head} (private thought)", thought) for thought in parsed.thoughts]
    if message.caption:
        lines.append(_line(f"{head} (shared an image)", message.caption))
    return lines


def render_window(target: Sequence[Message], context: Sequence[Message]) -> str:
    """Messages as the prompts show them: context, the divider, then the target."""
    lines = [line for m in context for line in _lines(m)]
    if lines:
        lines.append(DIVIDER)
    lines += [line for m in target for line in _lines(m)]
    return "\n".join(lines)


def render_known(known: Sequence[KnownFact]) -> str:
    """Known facts as the fact prompt shows them: ``K<n>: <text> (stated <date>)``, from K1."""
    if not known:
        return NO_KNOWN_FACTS
    return "\n".join(
        f"K{n}: {' '.join(k.text.split())} (stated {utc(k.stated_at).date().isoformat()})"
        for n, k in enumerate(known, 1)
    )


@dataclass
class _FactCheck:
    facts: list[FactDraft]
    discarded: list[Discard]
    problems: list[str]
    contradictions: list[str]


class LLMExtractor:
    """Extraction of fact-format facts by a chat model.

    Args:
        client: The model, wrapped (see :func:`membrain.extraction.llm.as_llm_client`).
        prompts: Prompt templates.
        max_attempts: Calls per step before giving up (the first call included).
        backoff: Seconds to wait before retrying after the model itself failed (timeouts, rate
            limits); doubled per attempt. Validation retries do not wait.
    """

    def __init__(
        self,
        client: LLMClient,
        *,
        prompts: Prompts | None = None,
        max_attempts: int = 3,
        backoff: float = 0.5,
    ) -> None:
        self.client = client
        self.prompts = prompts or Prompts()
        self._max_attempts = max_attempts
        self._backoff = backoff

    @property
    def id(self) -> str:
        """Extractor identity stored on every fact."""
        return f"llm-{self.client.kind}-p{PROMPT_VERSION}"

    @property
    def prompt_version(self) -> str:
        """Version of the prompts (recorded in the audit of every fact written)."""
        return PROMPT_VERSION

    def extract(
        self,
        target: Sequence[Message],
        context: Sequence[Message],
        participants: Sequence[str],
        known: Sequence[KnownFact] | KnownLookup = (),
    ) -> ExtractionBatch:
        """Entities, then facts, for ``target``; raises ExtractionError when unrepairable.

        ``known`` facts are listed in the fact prompt as K1..Kn; a new fact naming some of them
        in ``replaces`` gets their stored ids in :attr:`FactDraft.replaces`. A lookup is called
        between the two calls, with the names of the entities found and the participants.
        """
        ids = tuple(m.id or "" for m in target)
        window = render_window(target, context)
        entities, entity_discards = self._call(
            "entity",
            self.prompts.entity_system,
            lambda feedback: self.prompts.entities.format(
                window=window, divider=DIVIDER, feedback=feedback
            ),
            lambda data, raw, final: self._check_entities(data, target),
            ids,
        )
        names = list(dict.fromkeys([*(e.name for e in entities), *participants]))
        names += [m.speaker for m in target if m.speaker not in names]
        listing = "\n".join(f"- {n}" for n in names)
        known = tuple(known(names) if callable(known) else known)
        known_listing = render_known(known)
        # Names bracketed in known facts are existing entities: a new fact may use them too.
        in_known = [ref for k in known for ref in entity_refs(k.text)]
        check: _FactCheck = self._call(
            "fact",
            self.prompts.fact_system,
            lambda feedback: self.prompts.facts.format(
                window=window,
                divider=DIVIDER,
                entities=listing,
                known=known_listing,
                feedback=feedback,
            ),
            lambda data, raw, final: self._check_facts(
                data, raw, target, names, in_known, known, final
            ),
            ids,
        )
        return ExtractionBatch(
            facts=check.facts, discarded=entity_discards + check.discarded, entities=entities
        )

    # -- the retry loop ----------------------------------------------------------------------
    def _call(
        self,
        step: str,
        system: str,
        prompt: Callable[[str], str],
        check: Callable[[dict[str, Any], str, bool], Any],
        message_ids: tuple[str, ...],
    ) -> Any:
        return ask(
            self.client,
            system,
            prompt,
            check,
            key="entities" if step == "entity" else "facts",
            schema=ENTITY_SCHEMA if step == "entity" else FACT_SCHEMA,
            what=f"{step} extraction",
            attempts=self._max_attempts,
            backoff=self._backoff,
            message_ids=message_ids,
        )

    # -- checks ------------------------------------------------------------------------------
    def _check_entities(
        self, data: dict[str, Any], target: Sequence[Message]
    ) -> tuple[list[EntityDraft], list[Discard]]:
        items = data["entities"]
        if not isinstance(items, list):
            raise Invalid(["'entities' must be a list of names"], str(data))
        described = data.get("descriptions")
        descriptions = described if isinstance(described, dict) else {}
        first = target[0].id or "" if target else ""
        reference = target[-1].timestamp if target else datetime.now()
        drafts: dict[str, EntityDraft] = {}
        discards: list[Discard] = []
        for item in items:
            name = item.get("name") if isinstance(item, dict) else item
            if not isinstance(name, str) or not name.strip():
                continue
            name = " ".join(name.split())
            if find_times(name, reference):
                discards.append(Discard(first, "time expression inside an entity name", name))
                continue
            description = descriptions.get(name)
            if isinstance(item, dict) and isinstance(item.get("description"), str):
                description = item["description"]
            drafts.setdefault(
                normalize_name(name),
                EntityDraft(name, description.strip() if isinstance(description, str) else ""),
            )
        return list(drafts.values()), discards

    def _check_facts(
        self,
        data: dict[str, Any],
        raw: str,
        target: Sequence[Message],
        names: Sequence[str],
        in_known: Sequence[str],
        known_facts: Sequence[KnownFact],
        final: bool,
    ) -> _FactCheck:
        items = data["facts"]
        if not isinstance(items, list):
            raise Invalid(["'facts' must be a list of {text, fact_ts} objects"], raw)
        known = {normalize_name(n): n for n in names}
        for name in in_known:  # the listed spelling wins over a known fact's
            known.setdefault(normalize_name(name), name)
        result = _FactCheck([], [], [], [])
        for number, item in enumerate(items, 1):
            self._check_fact(number, item, target, known, known_facts, result)
        if result.problems or (result.contradictions and not final):
            raise Invalid(result.problems + result.contradictions, raw)
        return result

    def _check_fact(
        self,
        number: int,
        item: object,
        target: Sequence[Message],
        known: dict[str, str],
        known_facts: Sequence[KnownFact],
        result: _FactCheck,
    ) -> None:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            result.problems.append(f"fact {number} is not an object with a 'text' string")
            return
        text = " ".join(item["text"].split())
        sources = _sources(item.get("fact_ts"), target)
        if sources is None:
            stamps = ", ".join(sorted({_stamp(m.timestamp) for m in target}))
            result.problems.append(
                f"fact {number}: fact_ts {item.get('fact_ts')!r} is not one of the message times "
                f"({stamps})"
            )
            return
        message_ids = tuple(m.id or "" for m in sources)
        if not text or not any(c.isalnum() for c in text):
            result.discarded.append(Discard(message_ids[0], "fact without content", text))
            return
        for ref in entity_refs(text):
            canonical = known.get(normalize_name(ref))
            if canonical is None:
                result.problems.append(
                    f"fact {number}: [{ref}] is not in the entity list; use only listed names"
                )
            elif canonical != ref:
                text = text.replace(f"[{ref}]", f"[{canonical}]")
        replaces = _replaces(number, item.get("replaces"), text, known_facts, result.problems)
        try:
            annotations = find_annotations(text)
        except AnnotationError as exc:
            result.problems.append(f"fact {number}: {exc}")
            return
        stated_at = sources[0].timestamp
        check, contradictions = check_times(annotations, stated_at)
        for annotation, expected in contradictions:
            result.contradictions.append(
                f"fact {number}: [{annotation.raw}::{annotation.resolved}] contradicts the "
                f"message time {_stamp(stated_at)}, which gives {format_resolved(expected)}"
            )
        layer = Layer.THOUGHT if _THOUGHT_MARK in text.casefold() else Layer.DIALOGUE
        result.facts.append(FactDraft(text, message_ids, stated_at, layer, check, replaces))


def _reference(item: object) -> int | None:
    """The number of a known-fact reference: ``K3``, ``k3``, `` K3 ``, ``"3"`` or ``3``."""
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, str):
        token = item.strip()
        if token[:1] in ("K", "k"):
            token = token[1:].strip()
        if token.isdigit():
            return int(token)
    return None


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _replaces(
    number: int,
    value: object,
    text: str,
    known_facts: Sequence[KnownFact],
    problems: list[str],
) -> tuple[str, ...]:
    """The stored ids of the known facts a fact's ``replaces`` names; problems are appended."""
    if value is None:
        return ()
    if isinstance(value, str | int) and not isinstance(value, bool):
        value = [value]  # a single reference instead of a list
    if not isinstance(value, list):
        problems.append(
            f'fact {number}: "replaces" must be a list of known-fact references like ["K1"], '
            f"not {_shown(value)}"
        )
        return ()
    span = f"K1-K{len(known_facts)}" if len(known_facts) > 1 else "K1"
    listed = f"({span})" if known_facts else "(no known facts are listed)"
    same_text = " ".join(text.split()).casefold()
    ids: dict[str, None] = {}
    for item in value:
        if isinstance(item, str) and not item.strip():
            continue
        n = _reference(item)
        if n is None or not 1 <= n <= len(known_facts):
            problems.append(f"fact {number}: replaces {_shown(item)} is not a known fact {listed}")
            continue
        replaced = known_facts[n - 1]
        if " ".join(replaced.text.split()).casefold() == same_text:
            continue  # a fact does not replace itself
        ids.setdefault(replaced.id)
    return tuple(ids)


def _sources(value: object, target: Sequence[Message]) -> list[Message] | None:
    """The target messages a fact_ts points at: exact time, else the latest message before it."""
    if not isinstance(value, str) or not target:
        return None
    try:
        moment = utc(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
    except ValueError:
        return None
    exact = [
        m for m in target if m.timestamp.replace(microsecond=0) == moment.replace(microsecond=0)
    ]
    if exact:
        return exact
    earlier = [m for m in target if m.timestamp <= moment]
    return [earlier[-1]] if earlier else None
