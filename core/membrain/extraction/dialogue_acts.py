"""Dialogue acts the offline extractor discards, and coordinated clauses it splits.

The acts below are discarded in a chat with an assistant: a message of role ``assistant`` or a
speaker named "User" or "Assistant" among the messages or participants (:func:`agent_chat`),
and always in an assistant's own message (:func:`is_assistant`).
Between named people (LoCoMo-style chats between friends) only the filler rules of the offline
extractor apply: there a question is often what the answer follow-up of retrieval needs to find
the reply, and a reaction ("That photo is stunning!") is often the turn a question's evidence
names; discarding them measurably lowered LoCoMo evidence recall. In a chat with an assistant a
sentence is chatter, not evidence, when it is

* a question, a user's question about themselves too ("Should I tell my boss I'm moving?"): it
  asks, it does not state, and the stored message keeps it as evidence. A statement before a
  question tail is kept ("I'm lactose intolerant, any tips?" keeps "I'm lactose intolerant.");
* an assistant's own words (:func:`assistant_reason`): advice, remarks, empathy, offers ("I can
  help you find one"), whatever it says to the user ("Your hard work paid off."). Memories of the
  user come from what the user states; an assistant's sentence is kept only when it restates
  the user ("You mentioned your sister is a nurse", stored as what it restates:
  :func:`restatement`), reports an action it took ("I booked a table for Friday"), or is a
  persona's statement about itself ("I keep my notes in a red notebook.": a character, not a
  generic assistant, see :data:`GENERIC_ASSISTANTS`);
* a request ("Tell me more!", "Let me know ...", "Rest up"): an imperative addressed to the other;
* a greeting, thanks or backchannel ("Long time no see.", "Got it", "Will do, thx");
* an answer fragment opening a user's turn (:func:`fragment`): hedges, quantities and times
  with no subject ("About three years." before the content of the turn, "Not yet, maybe next
  summer." alone);
* empathy or a compliment without content ("That must be demanding.", "Congrats on the move!",
  "Biscuit sounds adorable.", "You two will have fun."): no first-person words, and an
  evaluation of something or a wish for the other.

A sentence that also carries first-person content is kept whatever it starts with ("Wow, I
finally got the job!").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from membrain.api.models import Message, Role

__all__ = [
    "GENERIC_ASSISTANTS",
    "agent_chat",
    "assistant_reason",
    "chatter_reason",
    "fragment",
    "is_assistant",
    "lead_in",
    "question_statement",
    "restatement",
    "short_reply",
    "split_clauses",
    "user_turns",
]

GENERIC_ASSISTANTS = frozenset({"assistant", "ai", "bot", "chatbot", "ai assistant", "agent"})
"""Speaker names of an assistant that is not a character: nothing it says of itself is kept."""

_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_FIRST_PERSON = frozenset(
    "i i'm i've i'll i'd my me mine myself we we're we've we'll our us".split()
)
_AGENT_NAMES = frozenset({"assistant", "user"})
_REQUEST_VERBS = frozenset(
    """
    tell let remind please go rest bring check try hang start pack enjoy keep imagine guess
    look consider send show share give take stay don't dont make be have
    """.split()
)
_ACK = frozenset(
    """
    thanks thank you thx ty though then lol haha ha ok okay always exactly lesson learned one
    good yes yeah no really too totally sure so much that it
    """.split()
)
_GREETING = re.compile(
    r"^(?:(?:hi|hey|hello|heya|hiya|howdy|yo|hej|servus|bonsoir|bonjour|cheers|bye|goodbye|salut"
    r"|coucou|ciao|hola|hallo|ahoj|merci|gracias|danke|grazie|obrigad[oa])\b"
    r"|good (?:morning|afternoon|evening|night)\b|morning\b|evening\b|long time\b"
    r"|welcome back\b|talk soon\b|see you\b)",
    re.IGNORECASE,
)
_LAUGH = re.compile(r"^(?:(?:ha)+h?|(?:he)+|lol|lmao|jk|nah|nope|oh well)\b[,!.]*\s*", re.I)
_THANKS = re.compile(r"\b(?:thanks|thank you|thx|ty|much appreciated)\b", re.IGNORECASE)
_BACKCHANNEL = re.compile(
    r"^(?:(?:ha)+|lol|ok(?:ay)?|yeah|yes|yep|no|nope|sure|true|same|noted|of course|i see"
    r"|got it|will do|pretty (?:well|good)|much better|not (?:much|bad)|it did|it's fine"
    r"|good (?:to know|idea|call|point)|makes sense|fair enough|no worries"
    r"|not (?:yet|really)|me too|i'm (?:here|all ears|listening)|go on|go ahead|guess what"
    r"|just kidding|quick (?:update|question)|small update|lots of news|it's me|sounds good"
    r"|totally understandable|completely understandable|so glad to hear it)\b",
    re.IGNORECASE,
)
_REACTION_START = re.compile(
    r"^(?:(?:wow|oh|aww*|ugh|yay|haha|ooh|oh no|nice|fancy|fun|amazing|exciting)[,!.]?\s+)*"
    r"(?:that(?:'s|’s| is| was| must| sounds| seems| looks| makes)\b|what an?\b|how \w+[!.]"
    r"|so glad\b|glad\b|i'm sorry\b|sorry\b|poor\b|congrat|welcome to\b|welcome,)",
    re.IGNORECASE,
)
_EVALUATIVE = frozenset(
    """
    adorable great lovely amazing stunning beautiful magical gorgeous wonderful fantastic
    impressive exciting cool fun nice heroes hero soulful brutal exhausting frustrating
    annoying stressful intense rough tough hard demanding thoughtful romantic special
    incredible awesome perfect best classic character dream wise smart brave inspiring cute
    sweet kind charming hit heals excellent listeners straight priorities bold tasty
    delicious
    """.split()
)
_EVAL_VERB = re.compile(
    r"\b(?:sounds?|looks?|seems?)\b(?: like)?|\bmust be\b|\bis (?:such )?a\b|\bare\b|\bis\b",
    re.IGNORECASE,
)
_REPLY_WORDS = frozenset(
    """
    maybe perhaps probably possibly likely hopefully honestly definitely absolutely totally
    certainly basically kinda sorta kind sort of a bit little lot lots loads tons heaps plenty
    much many few some most mostly mainly partly slowly quickly steadily gradually rarely
    seldom sometimes often usually always never occasionally hardly barely nearly almost too
    quite pretty fairly rather very so really super still yet soon later already not no yes
    yeah yep yup nope nah course well fine good great okay ok alright decent grand sound
    brilliant lovely nice fab awesome amazing fantastic terrible awful rough hard tough crazy
    mad insane wild hectic chaotic busy quiet slow slowly stalled stuck tired exhausted
    knackered shattered wrecked drained sick freezing boiling cold hot warm wet sunny rainy
    better worse best worst same ish will won't wont try trying sadly luckily unfortunately
    thankfully surprisingly anyway though but and or then either neither both all none
    nothing everything something meh ugh hmm um uh er oh ah haha lol right true exactly sure
    indeed seriously literally actually depends getting going it it's that's hanging there
    in progress on off track
    """.split()
)
_SMALL_TALK = re.compile(
    r"^(?:so |okay |ok |well |oh |and )?(?:i(?:'ve|’ve| have)? got|i have|got|have) (?:(?:some|big"
    r"|exciting|great|good|bad|huge|more|a bit of) )*(?:news|updates?)\W*$"
    r"|^(?:i |i'd |i’d )?(?:need|want|would like|'d like|like) (?:some |a little |your |a bit of "
    r")?(?:help|advice|tips|ideas|suggestions|input)\b"
    r"|^i hope i(?: am not|'m not|’m not| do not| don't| don’t| won't| won’t) (?:disturb|bother"
    r"|interrupt)",
    re.IGNORECASE,
)
_SMALL_TALK_WORDS = 10
_SECOND_WISH = re.compile(
    r"^(?:i )?hope (?:you|you're|you’re|you are|all|everything|things|it|that)\b"
    r"|^(?:you|you two|you both|your \w+)(?: \w+)? (?:will|must|should|might|'ll|’ll)\b"
    r"|^you(?:'|’)ll\b|^you(?:'|’)re (?:going to|gonna) love\b",
    re.IGNORECASE,
)
_PLAIN = frozenset(
    """
    a an the and or but of to in on at for with is are was be been so such very really just
    like that this it its as by from his her their he she they them has have his
    """.split()
)
_QUESTION_WORDS = frozenset(
    """
    what which who whom whose how why when where do does did is are was were have has had can
    could would will should shall may might any anything
    """.split()
)
_CLAUSE = re.compile(
    r",?\s+and\s+(?=(?:I(?:'|’)(?:m|ve|ll|d)\b|I\b|(?P<verb>[a-z]+)\b))",
)
_CLAUSE_VERBS = frozenset(
    """
    live work love like teach play have own run study volunteer bake paint cook write read
    train collect coach manage drive ride go enjoy hate speak
    """.split()
)


def is_assistant(message: Message) -> bool:
    """Whether ``message`` is an assistant's: its role, or a speaker named "Assistant"."""
    return message.role is Role.ASSISTANT or message.speaker.casefold() == "assistant"


def user_turns(messages: Sequence[Message]) -> bool:
    """Whether a user's message is among ``messages`` (then an assistant's one is a reply)."""
    assistants = {m.speaker for m in messages if is_assistant(m)}
    return any(m.role is Role.USER and m.speaker not in assistants for m in messages)


def agent_chat(messages: Sequence[Message], participants: Sequence[str]) -> bool:
    """Whether the messages are a chat between a user and an assistant.

    A user's message must be among them: an assistant's note on its own (a memory written through
    a tool) is a statement to keep, not a chat.
    """
    names = {*participants, *(m.speaker for m in messages)}
    assistants = {m.speaker for m in messages if m.role is Role.ASSISTANT}
    assistants |= {n for n in names if n.casefold() == "assistant"}
    if not assistants and not any(n.casefold() == "user" for n in names):
        return False
    return any(m.speaker not in assistants and m.role is Role.USER for m in messages)


def chatter_reason(sentence: str) -> str | None:
    """Why ``sentence`` (of a chat with an assistant) is chatter; ``None`` when it states something.

    An assistant's sentence is first passed through :func:`restatement` and
    :func:`assistant_reason`.
    """
    text = sentence.strip().strip("\"'“”").strip()
    words = [w.casefold().replace("’", "'") for w in _WORD.findall(text)]
    if not words:
        return None
    first_person = any(w in _FIRST_PERSON for w in words)
    if text.rstrip(" )").endswith("?"):
        return "question"
    backchannel = _BACKCHANNEL.match(text)
    if backchannel and all(
        w[:1].isupper() or w.casefold() in _ACK for w in _WORD.findall(text[backchannel.end() :])
    ):
        return "backchannel"
    names = [
        w for w in _WORD.findall(text)[1:] if w[:1].isupper() and w.casefold() not in _FIRST_PERSON
    ]
    laugh = _LAUGH.match(text)
    if laugh and not first_person and not names and len(_WORD.findall(text[laugh.end() :])) <= 4:
        return "reaction without content"
    if _GREETING.match(text) and not first_person and len(words) <= 6:
        return "greeting"
    if _THANKS.search(text) and not first_person:
        return "thanks"
    if _SMALL_TALK.match(text) and not names and len(words) <= _SMALL_TALK_WORDS:
        return "announcement or request without content"
    stating = any(w in _FIRST_PERSON and w not in ("me", "us") for w in words)
    if stating and not re.match(r"^i(?:'m| am) (?:sorry|so sorry|here)\b", text, re.I):
        return None
    if words[0] in _REQUEST_VERBS and not text.rstrip().endswith("?"):
        return "request or advice to the other"
    if _REACTION_START.match(text):
        return "empathy or compliment without content"
    if _SECOND_WISH.match(text):
        return "wish or prediction for the other"
    if _EVAL_VERB.search(text) and any(w in _EVALUATIVE for w in words):
        rest = [w for w in words if w not in _EVALUATIVE and w not in _PLAIN and len(w) > 2]
        if len(rest) <= 3:
            return "empathy or compliment without content"
    return None


_RESTATEMENT = re.compile(
    r"^(?:(?:as|like) )?you(?:'ve|’ve| have| had)? (?:mentioned|said|told me|noted|shared|wrote"
    r"|brought up)(?: (?:earlier|before|last time|once))?,?(?: that)?\s+",
    re.IGNORECASE,
)
_ACTION = re.compile(
    r"^(?:[\w’']+[,!]\s+)*i(?:'ve|’ve| have)?(?: just| already)? (?:booked|scheduled|set up|set"
    r"|added|ordered|sent|created|saved|cancel(?:l)?ed|moved|reserved|updated|paid|emailed"
    r"|called|noted down|logged|renewed|rescheduled)\b",
    re.IGNORECASE,
)
_SELF_TALK = re.compile(
    r"\bi(?:'m|’m| am)? (?:so |really |very )?(?:glad|happy|sorry|thrilled|delighted|here"
    r"|listening|all ears|curious)\b"
    r"|\bi(?: can| could| will| would|'ll|’ll|'d|’d) (?:help|keep|remember|look|find|suggest"
    r"|recommend|note|be happy|be glad|love|let|make sure|check|bet)\b"
    r"|\bi (?:love|like|hope|think|bet|guess|wish|believe|agree|understand|see|know)\b",
    re.IGNORECASE,
)


def short_reply(sentence: str) -> bool:
    """Whether ``sentence`` is a short reply of hedges, moods or degrees, nothing else.

    "Maybe.", "Slowly.", "Freezing, but good.", "Not yet, soon.": before the content of the same
    turn it is chatter. Alone in a turn it may be the answer asked for: the caller decides.
    """
    words = [w.casefold().replace("’", "'") for w in _WORD.findall(sentence)]
    return 0 < len(words) <= _SHORT_REPLY and all(w in _REPLY_WORDS for w in words)


_SHORT_REPLY = 4

_FRAGMENT_WORDS = _REPLY_WORDS | frozenset(
    """
    a an the of to in on at by for from about around roughly nearly over under since until till
    before after ago next last this coming past few couple several half dozen one two three four
    five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred once twice
    second seconds minute minutes hour hours day days week weeks weekend weekends fortnight
    month months year years decade decades time times summer winter spring autumn fall season
    morning afternoon evening night tonight today tomorrow yesterday january february march
    april may june july august september october november december monday tuesday wednesday
    thursday friday saturday sunday
    """.split()
)
_LEAD_IN = re.compile(
    r"^(?:(?:btw|by the way|fyi|tbh|honestly|anyways?|ps|p\.s\.)\b[,:;!.]*\s+"
    r"|(?:(?:quick|small|little|big|huge|some|exciting|good|bad|great|sad|major|latest|fun"
    r"|random|more)\s+)*(?:update|updates|news|changes?|question|confession|fact)\s*[:\-–—]\s+)+",
    re.IGNORECASE,
)
_TRAILER = re.compile(r",?\s+(?:btw|by the way|tbh|fyi|honestly|lol|haha)(?=[.!?]*$)", re.I)


def lead_in(sentence: str) -> tuple[str, str]:
    """``sentence`` without the filler that opens or closes it, and the filler removed.

    "Quick update: I moved to London." -> ("I moved to London.", "Quick update:");
    "btw Mochi loves the park." -> ("Mochi loves the park.", "btw"). A sentence that is only
    filler is returned whole (the chatter rules judge it).
    """
    removed: list[str] = []
    match = _LEAD_IN.match(sentence)
    rest = sentence
    if match is not None and _WORD.search(sentence[match.end() :]):
        removed.append(match.group(0).strip())
        rest = sentence[match.end() :]
        if rest[:1].islower() and not rest[1:2].isupper():
            rest = rest[:1].upper() + rest[1:]
    trailer = _TRAILER.search(rest)
    if trailer is not None and _WORD.search(rest[: trailer.start()]):
        removed.append(trailer.group(0).strip(" ,"))
        rest = rest[: trailer.start()] + rest[trailer.end() :]
    return rest, " ".join(removed)


def fragment(sentence: str, *, alone: bool) -> str | None:
    """Why the opening ``sentence`` of a turn, an answer fragment, is no fact; else ``None``.

    A fragment is hedges, quantities and times, nothing else: no subject, no verb, so what it
    says is in the question it answers. Before the content of its turn ("About three years.
    Mochi loves the park.") it is chatter; ``alone`` in its turn it may be the answer asked for
    ("Rough month."), unless it opens with a refusal or a hedge ("Not yet, maybe next summer."),
    which states nothing without the question. The message keeps it as evidence.
    """
    words = [w.casefold().replace("’", "'") for w in _WORD.findall(sentence)]
    if not words or not all(w in _FRAGMENT_WORDS for w in words):
        return None
    if not alone:
        return "answer fragment before content"
    if _HEDGED.match(sentence.strip()):
        return "answer fragment without a subject"
    return None


_HEDGED = re.compile(
    r"^(?:not (?:yet|really|sure|much|now)|no|nope|nah|maybe|perhaps|probably|possibly"
    r"|hopefully|who knows)\b",
    re.IGNORECASE,
)


def restatement(sentence: str) -> str | None:
    """What an assistant's sentence restates of the user, or ``None``.

    "You mentioned your sister Ana is a nurse." -> "your sister Ana is a nurse."
    """
    match = _RESTATEMENT.match(sentence.strip())
    if match is None or not sentence[match.end() :].strip():
        return None
    rest = sentence.strip()[match.end() :]
    return rest[:1].upper() + rest[1:]


def assistant_reason(sentence: str, *, persona: bool) -> str | None:
    """Why an assistant's sentence (not a restatement) is not kept; ``None`` when it is.

    Kept: an action the assistant reports ("I booked your table for Friday."), and, for a
    ``persona`` (a character, not a generic assistant), what it states about itself that is not
    conversation ("I grew up in Kyoto." is kept, "I'm glad you called." is not).
    """
    text = sentence.strip().strip("\"'“”").strip()
    if _ACTION.match(text) and not text.endswith("?"):
        return None
    words = [w.casefold().replace("’", "'") for w in _WORD.findall(text)]
    stating = any(w in _FIRST_PERSON and w not in ("me", "us") for w in words)
    if persona and stating and not _SELF_TALK.search(text) and not text.endswith("?"):
        return None
    return "the assistant's own words, not something the user stated"


def split_clauses(sentence: str) -> list[str]:
    """Coordinated first-person clauses as sentences of their own, each with the end mark.

    "I live in Lisbon and work as a teacher." -> ["I live in Lisbon.", "I work as a teacher."]
    A clause joined by "and" whose subject is not the speaker stays with the clause before it.
    """
    if not re.match(r"^(?:I\b|I(?:'|’)(?:m|ve|ll|d)\b)", sentence) or sentence.endswith("?"):
        return [sentence]
    end = sentence[-1] if sentence[-1] in ".!" else "."
    rest = sentence.rstrip(".!")
    clauses: list[str] = []
    while True:
        match = next(
            (m for m in _CLAUSE.finditer(rest) if m.group("verb") in (None, *_CLAUSE_VERBS)),
            None,
        )
        if match is None:
            break
        clauses.append(rest[: match.start()])
        rest = ("I " if match.group("verb") else "") + rest[match.end() :]
    clauses.append(rest)
    return [c.strip().rstrip(",") + end for c in clauses if c.strip().rstrip(",")]


def question_statement(sentence: str) -> str | None:
    """The statement before a question tail, or ``None``.

    "Also I'm lactose intolerant, any tips for calcium?" -> "Also I'm lactose intolerant."
    """
    if not sentence.rstrip().endswith("?"):
        return None
    head, sep, tail = sentence.rpartition(", ")
    first = _WORD.findall(head)[:1]
    if not sep or not first or first[0].casefold() in _QUESTION_WORDS:
        return None
    if not _WORD.findall(tail)[:1] or _WORD.findall(tail)[0].casefold() not in _QUESTION_WORDS:
        return None
    return head.rstrip(" ,") + "."
