"""The offline extractor: fact-format facts from chat messages with no LLM.

Rules, applied per message:

* The message is split into sentences; filler that opens or closes one ("Quick update:",
  "btw") is dropped; greetings, thanks and bare reactions ("Wow, that's great!") are discarded
  and, in a chat with an assistant, the other dialogue acts of
  :mod:`membrain.extraction.dialogue_acts` too (questions, requests, backchannels, empathy and
  compliments without content, answer fragments, the assistant's own words unless they restate
  the user, report an action or are a character's statement about itself); each discard is
  recorded with its reason. A message's own role decides: an assistant's message is read as
  one whatever else is in its batch (a reply when a user's turn is in the batch or its context,
  else a note, kept but for its dialogue acts), a user's message as a turn of a chat with an
  assistant when one speaks in the batch, its context or the participants.
* Determinate times are annotated ``[raw::resolved]`` by the deterministic resolver against the
  message timestamp.
* First-person words become the speaker (``I`` -> ``[Sara]``, ``my`` -> ``[Sara]``'s); in a
  two-party chat second-person words become the other participant ("you two" -> ``[Nate] and a
  companion``). "We" becomes ``[Sara] and others`` ("us" too; "our X" is the speaker's X), or
  ``[Sara] and [Joao]`` when the message, or else the speaker's earlier messages of the batch
  and its context, name exactly one partner ("my partner Joao") and the message names no other
  company. A verb after the name agrees ("I walk" -> "[Sara] walks").
  Relational possessives become refs of their own (``my mom`` -> ``[Sara's mom]``).
* Names are bracketed: participants, capitalised names and acronyms; a single capitalised word
  opening a sentence only when the batch also uses it inside one ("my dog Pepper") or it is
  coordinated with a person ("Arjun and I"); leading words ("Also the Lisbon") are left out.
* Coordinated first-person clauses are split ("I live in Lisbon and work as a teacher" -> two
  facts citing the same message); the other kept sentences form facts of at most three
  sentences, each citing its message. An attached
  image caption is evidence too and is stated as what the speaker shared.
* A fact stating a single-valued attribute of a person (:mod:`membrain.extraction.attributes`)
  replaces the known facts that state another value of it for the same person (``replaces``),
  or names them for review when the match is uncertain (``may_replace``); so does a later
  message of the same batch replace an earlier one's fact.
* A character response is split into its layers: the dialogue is treated as above;
  each ``*action*`` and each ``（thought）`` becomes a fact of its own with ``layer`` action or
  thought, a thought worded as "[Name] privately thought: ..." so it never reads as said.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from membrain.api.models import Layer, Message, Role
from membrain.extraction import attributes
from membrain.extraction.attributes import DETECTED
from membrain.extraction.base import (
    Discard,
    ExtractionBatch,
    FactDraft,
    KnownFact,
    KnownLookup,
    draft_ref,
)
from membrain.extraction.character import layer_statements, parse_response
from membrain.extraction.detector import packaged_detector
from membrain.extraction.dialogue_acts import (
    GENERIC_ASSISTANTS,
    agent_chat,
    assistant_reason,
    chatter_reason,
    fragment,
    is_assistant,
    lead_in,
    question_statement,
    restatement,
    short_reply,
    split_clauses,
    user_turns,
)
from membrain.extraction.referents import BASE_VERBS, Referents, about_speaker, implied_speaker
from membrain.temporal import annotate

__all__ = ["OfflineExtractor"]

_SENTENCE = re.compile(r"(?<=[.!?~])\s+(?=[\"'(\[A-Z0-9]|(?:btw|fyi|tbh|ps)\b)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_BRACKETED = re.compile(r"\[[^\[\]]*\]")

_FILLER = frozenset(
    """
    hi hey hello heya hiya yo howdy morning evening afternoon night good bye goodbye later
    see soon take care thanks thank thx ty welcome congrats congratulations wow whoa omg oh
    ooh ah aw aww awww haha hahaha lol lmao yay cool nice great awesome amazing wonderful
    fantastic incredible brilliant lovely sweet beautiful gorgeous glad happy excited
    thrilled proud sorry sure ok okay yeah yes yep yup no nope nah totally absolutely
    definitely exactly indeed true right agreed same too really so very much such just well
    anyway hmm um uh cheers bless appreciate appreciated means lot sounds looks seems feel
    feels inspiring impressive hear cute fun blast luck best wish wishes keep going up it's
    that's what's how's you're i'm hej servus bonsoir bonjour salut coucou ciao hola hallo ahoj
    merci gracias danke grazie obrigado obrigada
    """.split()
)
_STOPWORDS = frozenset(
    """
    a an the and or but if then than of to in on at by for with about from as is are was
    were be been being am do does did have has had it its this that these those there here i
    me my mine myself you your yours yourself we us our ours he him his she her they them
    their what which who whom how why when where can could will would shall should may might
    must not also all any some more most other again ever still even get got let lets go
    going gonna wanna know think thing things stuff one
    """.split()
)
_RELATIONS = frozenset(
    """
    mom mother mum dad father parents parent sister sisters brother brothers sibling
    siblings son sons daughter daughters kid kids child children baby husband wife partner
    spouse boyfriend girlfriend fiance fiancee grandma grandmother grandpa grandfather
    grandparents aunt uncle cousin cousins niece nephew family friend friends bestie
    neighbor neighbors neighbour neighbours boss coworker coworkers colleague colleagues
    team roommate roommates dog dogs cat cats pet pets puppy kitten
    """.split()
)
_NOT_NAMES = frozenset(
    """
    I I'm I've I'll I'd OK Ok Okay Hi Hey Hello Yes No Yeah Wow Oh Thanks Thank Congrats
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April
    May June July August September October November December Mr Mrs Ms Dr Also And But So
    Then Now Plus Still Just Anyway Because The A An Poor Guess Big Huge Well Even Maybe
    Actually Sometimes Always Today Tonight Tomorrow Yesterday Ugh Yay Lol Haha Sadly Luckily
    Finally Honestly Btw Meanwhile It It's It’s That That's That’s There There's There’s Here
    Here's Here’s This What's What’s He's She's They're We're You're
    """.split()
)
_CONNECTORS = frozenset({"the", "of", "de", "and", "&"})

# "I", and a lower-case "i" before a word ("i moved", not "i.e.").
_I = r"(?:\bI\b|\bi(?=\s+[a-z]))"
# First and second person: (pattern, replacement template); {p} is the bracketed person.
_PERSON_RULES: tuple[tuple[str, str], ...] = (
    (r"\b[Ii](?:'|’)m\b|\bI am\b|\b[Ii]m\b", "{p} is"),
    (r"\b[Ii](?:'|’)ve\b|\bI have\b|\b[Ii]ve\b", "{p} has"),
    (r"\bI(?:'|’)ll\b", "{p} will"),
    (r"\bI(?:'|’)d\b", "{p} would"),
    (_I, "{p}"),
    (r"\b[Mm]yself\b", "{p}"),
    (r"\b[Mm]ine\b", "{p}'s"),
    (r"\b[Mm]e\b", "{p}"),
)
_YOU_RULES: tuple[tuple[str, str], ...] = (
    (r"\b[Yy]ou (?:two|both)\b|\bboth of you\b", "{p} and a companion"),
    (r"\b[Yy]ou(?:'|’)re\b|\b[Yy]ou are\b", "{p} is"),
    (r"\b[Yy]ou(?:'|’)ve\b|\b[Yy]ou have\b", "{p} has"),
    (r"\b[Yy]ou(?:'|’)ll\b", "{p} will"),
    (r"\b[Yy]ou(?:'|’)d\b", "{p} would"),
    (r"\b[Yy]ou were\b", "{p} was"),
    (r"\b[Yy]ourself\b", "{p}"),
    (r"\b[Yy]ours\b", "{p}'s"),
    (r"\b[Yy]ou\b", "{p}"),
)
# {o} is who "we" are besides the speaker: "others", or the one partner named nearby.
_WE_RULES: tuple[tuple[str, str], ...] = (
    (r"\b[Ww]e(?:'|’)re\b", "{p} and {o} are"),
    (r"\b[Ww]e(?:'|’)ve\b", "{p} and {o} have"),
    (r"\b[Ww]e(?:'|’)ll\b", "{p} and {o} will"),
    (r"\b[Ww]e(?:'|’)d\b", "{p} and {o} would"),
    (r"\b[Ww]e\b", "{p} and {o}"),
    (r"\b[Oo]urs\b", "{p}'s"),
    (r"\b[Uu]s\b", "{p} and {o}"),
)
_PARTNER = re.compile(
    r"\b(?:[Mm]y|[Oo]ur)\s+(?:(?:new|lovely|wonderful|amazing|dear)\s+)?"
    r"(?:partner|husband|wife|boyfriend|girlfriend|fianc[ée]e?|spouse)\s*,?\s+"
    r"(?P<name>[A-Z][a-zà-ÿ]+(?:-[A-Z][a-zà-ÿ]+)?)\b"
)
_COMPANY = re.compile(
    r"\b(?:[Mm]y|[Oo]ur|the)\s+(?:\w+\s+)?(?:kids?|children|child|sons?|daughters?|family"
    r"|friends?|parents|mom|mum|dad|mother|father|sisters?|brothers?|team|roommates?"
    r"|colleagues?|coworkers?|neighbou?rs?|guests?|group|class)\b|\ball of us\b|\bthe (?:three|four"
    r"|five) of us\b",
    re.IGNORECASE,
)
_OTHERS = "others"
_PERSON = tuple((re.compile(p), t) for p, t in (*_WE_RULES, *_PERSON_RULES))
# A subject pronoun replaced by a name takes the third person: "I love" -> "[Sara] loves".
_THIRD_PERSON = {"have": "has", "do": "does", "go": "goes", "don't": "doesn't"}
_AUXILIARIES = frozenset(
    """
    do does did can could would will should shall might may must to let did don't didn't
    """.split()
)
_GREETINGS = frozenset(
    """
    hi hey hello heya hiya yo howdy thanks thank congrats bye wow
    """.split()
)
_VERBS = BASE_VERBS
_ING_VERBS = frozenset("sing bring ring swing sting cling fling wring spring string sling".split())
_NOT_BASE = frozenset(
    """
    can could will would shall should may might must was were am is are be been being had
    got went took made saw met ate ran did said told found gave came became began bought
    brought caught felt kept left lost paid put read sent sold spent stood taught thought
    understood won wrote broke chose drove flew forgot grew knew rode rose sang spoke swam
    threw woke wore hurt quit cut let set shut split hit heard fell held led meant slept
    built and or but too a an the to of in on at for with about not never myself alone
    personally either neither both only all there here so very really then that this what
    which who how why when where if as like no yes ok okay please sure again always ever guys
    folks yourself yourselves
    """.split()
)
_YOU = tuple((re.compile(p), t) for p, t in _YOU_RULES)
_MY = re.compile(r"\b[Mm]y\b(\s+)([\w-]+)")
_OUR = re.compile(r"\b[Oo]ur\b(\s+)([\w-]+)")
_YOUR = re.compile(r"\b[Yy]our\b(\s+)([\w-]+)")
_CAPITALISED = re.compile(
    r"(?<![\w\[])((?:[A-Z][\w'’&-]*|[A-Z]{2,})(?:\s+(?:of|the|de|and|&)?\s*[A-Z][\w'’&-]*)*)"
)
_SENTENCES_PER_FACT = 3


def _outside_brackets(text: str, transform: re.Pattern[str], replace: object) -> str:
    """Apply ``transform.sub(replace, ...)`` to the parts of ``text`` outside ``[...]``."""
    parts: list[str] = []
    last = 0
    for match in _BRACKETED.finditer(text):
        parts.append(transform.sub(replace, text[last : match.start()]))  # type: ignore[call-overload]
        parts.append(match.group(0))
        last = match.end()
    parts.append(transform.sub(replace, text[last:]))  # type: ignore[call-overload]
    return "".join(parts)


class OfflineExtractor:
    """Rule-based extraction of fact-format facts, with no LLM and no network.

    Example:
        >>> from membrain import Message
        >>> m = Message(id="m1", speaker="Sara", text="I adopted a cat yesterday!",
        ...             timestamp="2024-03-15T14:01:00Z")
        >>> OfflineExtractor().extract([m], [], ["Sara", "Nate"]).facts[0].text
        '[Sara] adopted a cat [yesterday::2024-03-14]!'
    """

    passing_states_discarded = True
    """A user's passing state of the moment in a chat with an assistant ("soaked to the bone",
    :meth:`~membrain.extraction.detector.AttributeDetector.passing_state`) is kept as evidence
    on its message, not as a fact; set to ``False`` to keep it as a fact."""

    known_facts_by = "claim"
    """Known facts are looked up by the attributes a batch states (subject and attribute): all
    the active facts stating a value of one of them, one indexed lookup."""

    @property
    def id(self) -> str:
        """Extractor identity stored on every fact."""
        return "offline-1"

    def extract(
        self,
        target: Sequence[Message],
        context: Sequence[Message],
        participants: Sequence[str],
        known: Sequence[KnownFact] | KnownLookup = (),
    ) -> ExtractionBatch:
        """Facts for every message of ``target``; ``context`` (the turns before) only informs.

        The context says who is addressed, whether a user takes part, who "we" are and who a
        pronoun stands for; it gives no fact.

        A fact stating a single-valued attribute (:mod:`membrain.extraction.attributes`)
        replaces the ``known`` facts that state another value of it for the same subject;
        when the match is uncertain it only names them in ``may_replace``, for review.
        ``known`` is looked up, when it is a function, only for a batch stating one.
        """
        speakers = list(dict.fromkeys([*participants, *(m.speaker for m in (*context, *target))]))
        batch = ExtractionBatch()
        everything = [*context, *target]
        # Each message's role decides how it is read; the batch and its context only say
        # whether a user takes part (an assistant's message with no user's is a note).
        agent = agent_chat(everything, participants)
        replying = user_turns(everything)
        seen = _names_seen(everything)
        people = Referents()
        for message in context:
            for sentence in _sentences(message.text or ""):
                people.resolve(sentence)
        for index, message in enumerate(target):
            own = is_assistant(message)
            turn = _Turn(
                agent=agent or own,
                assistant=own and replying,
                company=_company(message, [*context, *target[:index]]),
            )
            self._extract_message(message, speakers, batch, turn, seen, people)
        batch.facts[:] = _with_replacements(batch.facts, known)
        return batch

    def _extract_message(
        self,
        message: Message,
        speakers: list[str],
        batch: ExtractionBatch,
        turn: _Turn,
        seen: frozenset[str] = frozenset(),
        people: Referents | None = None,
    ) -> None:
        assert message.id is not None, "messages reach the extractor with their stored ids"
        addressee = message.addressee
        if addressee is None:
            others = [s for s in speakers if s != message.speaker]
            addressee = others[0] if len(others) == 1 else None
        if message.role is Role.SYSTEM:
            batch.discarded.append(
                Discard(message.id, "system message, not evidence", message.text)
            )
            return
        names = {message.speaker, *speakers}
        bracketed = names | seen
        groups: list[list[str]] = [[]]
        response = parse_response(message.text)
        dialogue = response.dialogue if response.has_markup else message.text
        agent, assistant = turn.agent, turn.assistant
        sentences = _sentences(dialogue)
        for index, sentence in enumerate(sentences):
            sentence, filler = lead_in(sentence)
            if filler:
                batch.discarded.append(Discard(message.id, "filler words", filler))
            statement = question_statement(sentence) if agent else None
            if statement is not None:
                batch.discarded.append(Discard(message.id, "question", sentence))
                sentence = statement
            if assistant and not sentence.rstrip().endswith("?"):
                restated = restatement(sentence)
                persona = message.speaker.casefold() not in GENERIC_ASSISTANTS
                reason = None if restated else assistant_reason(sentence, persona=persona)
                if reason:
                    batch.discarded.append(Discard(message.id, reason, sentence))
                    continue
                sentence = restated or sentence
            reason = _filler_reason(sentence, names) or (
                chatter_reason(sentence) if agent else None
            )
            if not reason and agent and index == 0 and len(sentences) > 1 and short_reply(sentence):
                reason = "short reply before content"
            if not reason and agent and index == 0 and not is_assistant(message):
                reason = fragment(sentence, alone=len(sentences) == 1)
            if reason:
                batch.discarded.append(Discard(message.id, reason, sentence))
                continue
            if agent and not is_assistant(message):
                said = self._rewrite(sentence, message, addressee, bracketed, turn.company)
                implied = implied_speaker(sentence)
                if implied != sentence:
                    own = self._rewrite(implied, message, addressee, bracketed, turn.company)
                    if packaged_detector().stated(own)[1] >= DETECTED / 2:
                        sentence, said = implied, own
                if self.passing_states_discarded and packaged_detector().passing_state(
                    said, message.speaker
                ):
                    batch.discarded.append(Discard(message.id, "a passing state", sentence))
                    continue
            if people is not None:
                sentence = people.resolve(sentence)
            clauses = split_clauses(sentence)
            if len(clauses) > 1:
                groups.extend(
                    [self._rewrite(c, message, addressee, bracketed, turn.company)] for c in clauses
                )
                groups.append([])
                continue
            if len(groups[-1]) == _SENTENCES_PER_FACT:
                groups.append([])
            groups[-1].append(self._rewrite(sentence, message, addressee, bracketed, turn.company))
        if message.caption and message.caption.strip():
            caption = message.caption.strip().rstrip(".")
            if len(groups[-1]) == _SENTENCES_PER_FACT:
                groups.append([])
            groups[-1].append(f"[{message.speaker}] shared an image: {caption}.")
        for group in groups:
            if group:
                text = " ".join(group)
                if agent and not is_assistant(message):
                    text = about_speaker(text, message.speaker)
                batch.facts.append(FactDraft(text, (message.id,), message.timestamp))
        if response.has_markup:
            for layer, statement in layer_statements(message.speaker, response):
                if layer is not Layer.DIALOGUE:
                    text = annotate(statement, message.timestamp)
                    batch.facts.append(FactDraft(text, (message.id,), message.timestamp, layer))

    def _rewrite(
        self,
        sentence: str,
        message: Message,
        addressee: str | None,
        names: set[str],
        company: str = _OTHERS,
    ) -> str:
        text = annotate(sentence, message.timestamp)
        text = _possessives(text, _MY, message.speaker)
        text = _possessives(text, _OUR, message.speaker)
        text = _persons(text, _PERSON, message.speaker, company)
        if addressee is not None:
            text = _possessives(text, _YOUR, addressee)
            text = _persons(text, _YOU, addressee)
        return _bracket_names(text, names)


@dataclass(frozen=True, slots=True)
class _Turn:
    """How one message is read."""

    agent: bool
    """The dialogue acts of a chat with an assistant are chatter (questions, reactions, ...)."""
    assistant: bool
    """An assistant's reply to a user: its own words are not facts."""
    company: str = _OTHERS
    """Who "we" are besides the speaker: a bracketed partner, or "others"."""


def _company(message: Message, earlier: Sequence[Message]) -> str:
    """Who "we" are besides the speaker of ``message``: its one partner named nearby, or others.

    The partner is the one "my partner Joao" names in the message, else in the speaker's
    earlier messages of the batch and its context; several partners, or other company named
    in the message ("the kids", "friends"), leave "others".
    """
    text = message.text or ""
    if not re.search(r"\b(?:[Ww]e|[Uu]s)\b|\b[Ww]e(?:'|’)", text) or _COMPANY.search(text):
        return _OTHERS
    named = {m.group("name") for m in _PARTNER.finditer(text)}
    if not named:
        said = [m.text or "" for m in earlier if m.speaker == message.speaker]
        named = {m.group("name") for t in said for m in _PARTNER.finditer(t)}
    named.discard(message.speaker)
    return f"[{named.pop()}]" if len(named) == 1 else _OTHERS


def _names_seen(messages: Sequence[Message]) -> frozenset[str]:
    """Single capitalised words used inside a sentence ("my dog Biscuit"): names.

    The same word opening a sentence ("Biscuit loves the beach.") could be any word.
    """
    seen: set[str] = set()
    for message in messages:
        for sentence in _sentences(message.text or ""):
            words = sentence.split()
            for before, word in zip(words, words[1:], strict=False):
                name = word.strip(".,!?;:\"'()").removesuffix("'s").removesuffix("’s")
                if (
                    name[:1].isupper()
                    and name[1:].islower()
                    and name not in _NOT_NAMES
                    and not before.endswith((".", "!", "?", ":"))
                ):
                    seen.add(name)
    return frozenset(seen)


def _with_replacements(
    drafts: list[FactDraft], known: Sequence[KnownFact] | KnownLookup
) -> list[FactDraft]:
    """``drafts`` with the known facts each one replaces (see :func:`attributes.replaced`)."""
    keys = {
        attributes.claim_key(c.subject, c.attribute)
        for d in drafts
        for c in attributes.claims(d.text)
    }
    if not keys:
        return drafts
    facts = known(sorted(keys)) if callable(known) else known
    pairs = [(k.id, k.text, k.stated_at) for k in facts]
    held = [set(attributes.held_keys(d.text)) for d in drafts]
    out = []
    for index, draft in enumerate(drafts):
        said = {attributes.claim_key(c.subject, c.attribute) for c in attributes.claims(draft.text)}
        # An earlier message of the same batch is replaced as a stored fact would be.
        earlier = [
            (draft_ref(j), d.text, d.stated_at)
            for j, d in enumerate(drafts[:index])
            if said & held[j]
        ]
        found = attributes.replaced(draft.text, draft.stated_at, [*pairs, *earlier])
        out.append(replace(draft, replaces=found.certain, may_replace=found.uncertain))
    return out


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def _filler_reason(sentence: str, names: set[str]) -> str | None:
    lowered_names = {n.casefold() for n in names}
    original = _WORD.findall(sentence)
    words = [w.casefold().replace("’", "'") for w in original]
    content = [
        w
        for w, o in zip(words, original, strict=True)
        if w not in _FILLER and w not in _STOPWORDS and w not in lowered_names and len(w) > 1
    ]
    if not words:
        return "no words"
    if not content:
        return "greeting, thanks or reaction without content"
    capitalised = {w for w, o in zip(words, original, strict=True) if o[:1].isupper()}
    if words[0] in _GREETINGS and all(w in capitalised for w in content):
        return "greeting addressed by name"
    return None


def _persons(
    text: str,
    rules: tuple[tuple[re.Pattern[str], str], ...],
    person: str,
    company: str = _OTHERS,
) -> str:
    ref = f"[{person}]"
    for pattern, template in rules:
        replacement = template.format(p=ref, o=company).replace("\\", "\\\\")
        if template == "{p}" and pattern.pattern in (_I, r"\b[Yy]ou\b"):
            text = _subject(text, pattern, ref)
        text = _outside_brackets(text, pattern, replacement)
    return text


def _subject(text: str, pattern: re.Pattern[str], ref: str) -> str:
    """Replace a subject pronoun followed by a base-form verb, conjugating the verb.

    One adverb may come between ("I also walk" -> "[Sara] also walks"); a modal, a past form or
    a word the rules do not take for a verb is left as it is.
    """
    subject = re.compile(
        pattern.pattern + r" ((?:[a-z]+ly |also |just |still |now |even |so |never |always |often "
        r"|sometimes |totally |kinda |really )?)"
        r"([a-z]+(?:'t)?)\b"
    )

    def replace(match: re.Match[str]) -> str:
        adverb, verb = match.group(1), match.group(2)
        before = match.string[: match.start()].split()
        if before and before[-1].casefold() in _AUXILIARIES:
            return match.group(0)
        if verb not in _VERBS and not _base_form(verb):
            return match.group(0)
        return f"{ref} {adverb}{_third_person(verb)}"

    return _outside_brackets(text, subject, replace)


def _base_form(word: str) -> bool:
    """Whether ``word``, after a subject pronoun, reads as a verb's base form."""
    return not (
        word in _NOT_BASE
        or (word.endswith("ing") and word not in _ING_VERBS)
        or word.endswith(("ed", "ly", "'t"))
        or (word.endswith("s") and not word.endswith("ss"))
    )


def _third_person(verb: str) -> str:
    if verb == "am":
        return "is"
    if verb in _THIRD_PERSON:
        return _THIRD_PERSON[verb]
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    if verb.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    return verb + "s"


def _possessives(text: str, pattern: re.Pattern[str], person: str) -> str:
    def replace(match: re.Match[str]) -> str:
        noun = match.group(2)
        if noun.casefold() in _RELATIONS:
            return f"[{person}'s {noun}]"
        return f"[{person}]'s{match.group(1)}{noun}"

    return _outside_brackets(text, pattern, replace)


def _bracket_names(text: str, names: set[str]) -> str:
    known = {n.casefold() for n in names}

    def replace(match: re.Match[str]) -> str:
        candidate = match.group(1).rstrip("'’")
        suffix = match.group(1)[len(candidate) :]
        if candidate.endswith(("'s", "’s")):
            candidate, suffix = candidate[:-2], candidate[-2:] + suffix
        words = candidate.split()
        while words and (words[0] in _NOT_NAMES or words[0] in _CONNECTORS):
            words.pop(0)
        if not words:
            return match.group(0)
        head = candidate[: len(candidate) - len(" ".join(words))]
        name = " ".join(words)
        start = match.start(1) + len(head)
        at_sentence_start = start == 0 or text[:start].rstrip().endswith((".", "!", "?", ":"))
        single_unknown = name.casefold() not in known and len(words) == 1
        coordinated = text[match.end() :].startswith((" and [", " & ["))
        if at_sentence_start and single_unknown and not name.isupper() and not coordinated:
            return match.group(0)
        if len(name) < 2:
            return match.group(0)
        return f"{head}[{name}]{suffix}"

    return _outside_brackets(text, _CAPITALISED, replace)
