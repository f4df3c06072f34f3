"""A learned reader of attribute statements: which single-valued attribute a sentence states.

The patterns of :mod:`membrain.extraction.attributes` read the wordings they were written for.
This detector reads the others: two linear models over hashed features of the sentence (words,
word pairs and triples, the same with names masked, letter groups, the words inside names),
fitted on a labelled corpus of what users tell assistants
(``benchmarks/data/attribute_statements/``) by ``benchmarks/train_attribute_detector.py`` and
shipped as data (``membrain/data/attribute_detector.npz``), run in numpy:

* the sentence model gives the probability of each class: no attribute, a passing state of the
  moment ("soaked to the bone", "knackered"), or an attribute stated (``residence``...) or ended
  (``residence/ends``...);
* the value model scores every short span of the sentence as the value of the predicted
  attribute (the words around it, its own words, whether it is a name).

The subject is the name nearest before the value (``[Sara]'s sister [Ana] moved to [Leeds]``
is about Ana; a place after "in" or a make is never one), else the first after it; a long
sentence is read clause by clause, a clause naming nobody being about the last person named
before it, and a text naming nobody states nothing. A value must fit its attribute (no day as
a place, no phone as a car).

Example:
    >>> d = packaged_detector().detect("[Tunde] resumed at [Flutterwave] on Monday.")
    >>> [(x.subject, x.attribute, x.value) for x in d]
    [('tunde', 'employer', 'flutterwave')]
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import numpy as np

from membrain.api.errors import ModelFileError

__all__ = [
    "ATTRIBUTES",
    "NONE",
    "PASSING",
    "RELATIONS",
    "AttributeDetector",
    "Detection",
    "Token",
    "packaged_detector",
    "sentence_features",
    "span_features",
    "spans",
    "tokens",
]

ATTRIBUTES = ("residence", "employer", "occupation", "school", "partner", "diet", "car", "phone")
"""The single-valued attributes the detector reads."""
NONE = "none"
"""The class of a sentence stating no attribute."""
PASSING = "passing"
"""The class of a sentence stating a passing state of the moment (weather, mood, tiredness)."""
ENDS = "/ends"
"""Suffix of the class of a sentence ending a value ("quit my job at Stripe")."""

RELATIONS = frozenset(
    """
    mom mother mum mam mama ma dad father papa pa parents sister sis brother bro sibling son
    daughter kid child baby husband hubby wife wifey partner spouse boyfriend bf girlfriend gf
    fiance fiancé fiancee fiancée grandma gran nan granny grandmother grandpa grandad
    grandfather aunt auntie aunty uncle cousin niece nephew friend bestie mate buddy pal
    neighbor neighbour boss manager colleague coworker roommate flatmate housemate stepdad
    stepmom stepmum in-law ex
    """.split()
)
"""Words for a person named by a relation to someone ("[Aditi]'s bf")."""

PASSING_STATE = 0.9
"""The probability from which a short sentence states a passing state of the moment."""
PASSING_WORDS = 12
"""Words from which a sentence says more than a passing state."""
STATES_NOTHING = 0.1
"""Below this probability of every attribute, a sentence states none (for passing states)."""

PARTNER_WORDS = frozenset(
    "partner husband hubby wife wifey boyfriend bf girlfriend gf fiance fiancé fiancee fiancée "
    "spouse".split()
)
"""Relation words naming a partner."""
VEHICLE_MAKES = frozenset(
    """
    tesla ford toyota honda volkswagen vw bmw audi mercedes mercedes-benz kia hyundai nissan
    mazda subaru volvo fiat renault peugeot skoda jeep chevrolet chevy porsche mini polestar
    rivian lexus prius civic corolla fiesta golf jaguar citroen citroën dacia seat opel suzuki
    mitsubishi byd lamborghini ferrari cadillac dodge vespa yamaha ducati harley kawasaki
    triumph ktm enfield bajaj ather activa trek cannondale brompton vanmoof
    """.split()
)
"""First words of a vehicle's make or model."""
PHONE_MAKES = frozenset(
    """
    iphone galaxy pixel nokia fairphone oneplus xiaomi motorola moto huawei samsung xperia oppo
    blackberry redmi tecno infinix itel realme vivo
    """.split()
)
"""First words of a phone's make or model."""
LONG_SENTENCE = 14
"""Words from which a sentence is read clause by clause."""

MAX_SPAN = 5
"""Words a value may hold."""

_TOKEN = re.compile(r"\[[^\[\]]*\]|[A-Za-zÀ-ÿ0-9][\w'’&.-]*|[^\w\s]")
_ANNOTATION = re.compile(r"^\[(?P<raw>[^\[\]]*?)::[^\[\]]*\]$")
_PRONOUNS = {
    "i": "i",
    "i'm": "i be",
    "im": "i be",
    "me": "i",
    "my": "my",
    "we": "i",
    "we're": "i be",
}
_PLACED = frozenset("in at to from of for near on into onto with by".split())
_JOINS = frozenset("but so because while though although whereas".split())
_TIMES = frozenset(
    """
    monday mondays tuesday tuesdays wednesday wednesdays thursday thursdays friday fridays
    saturday saturdays sunday sundays january february march april may june july august
    september october november december today tonight tomorrow yesterday week weekend month
    year morning evening night christmas easter
    """.split()
)
_VEHICLE_WORDS = frozenset(
    """
    car cars bike motorbike motorcycle scooter moped van truck ute bakkie jeep suv ride wheels
    e-bike ebike hatchback sedan pickup drive drives driving drove rides riding rode
    """.split()
)
_PHONE_WORDS = frozenset("phone mobile handset cell smartphone".split())
_BREAK = frozenset('.,;:!?()"')
_VALUE_STOP = frozenset(
    """
    a an the and or but of to in on at by for with from as is are was were be been am has have
    had do does did it its this that there here he she they him her his their them i me my we
    us our you your now just so very really too then also still since last next new old
    there here
    """.split()
)


@dataclass(frozen=True, slots=True)
class Token:
    """One word of a sentence: as written, folded for features, and whether it is a name."""

    text: str
    key: str
    name: bool


@dataclass(frozen=True, slots=True)
class Detection:
    """An attribute a sentence states (or ends) of a subject, and how sure the detector is."""

    subject: str
    """The subject's name, case-folded."""
    attribute: str
    """One of :data:`ATTRIBUTES`."""
    value: str
    """The value, case-folded, articles dropped ("" for an end naming none)."""
    ends: bool
    """The sentence ends the value instead of stating one."""
    confidence: float
    """The sentence model's probability of this attribute (and polarity)."""
    said: str = ""
    """The words of the statement: the sentence up to the end of the value."""


def tokens(sentence: str) -> list[Token]:
    """The words of a sentence, a bracketed name or time annotation as one word.

    A time annotation keeps its raw words; a bracketed ref and a capitalised word inside the
    sentence are names.
    """
    out: list[Token] = []
    for index, match in enumerate(_TOKEN.finditer(sentence)):
        raw = match.group(0)
        if raw.startswith("["):
            annotation = _ANNOTATION.match(raw)
            inner = (annotation.group("raw") if annotation else raw[1:-1]).strip()
            if annotation:
                out.extend(Token(w, _fold(w), False) for w in inner.split())
            elif inner and inner.casefold() in _TIMES:
                out.append(Token(inner, _fold(inner), False))
            elif inner:
                out.append(Token(inner, "<name>", True))
            continue
        folded = _fold(raw)
        capital = (
            raw[:1].isupper()
            and index > 0
            and folded not in _PRONOUNS
            and raw.casefold() not in _TIMES
        )
        out.append(Token(raw, folded, capital))
    return out


def _fold(word: str) -> str:
    word = word.casefold().replace("’", "'")
    if word.isdigit():
        return "0"
    for suffix in ("'s", "ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _hash(feature: str, buckets: int) -> int:
    return zlib.crc32(feature.encode()) % buckets


def sentence_features(words: Sequence[Token], buckets: int) -> list[int]:
    """Hashed features of a sentence: words, pairs and triples, masked and not, letter groups."""
    keys = [_PRONOUNS.get(t.key, t.key) for t in words]
    masked = ["<n>" if t.name else k for t, k in zip(words, keys, strict=True)]
    padded = ["<s>", *keys, "</s>"]
    shape = ["<s>", *masked, "</s>"]
    found: list[str] = []
    found.extend(f"w:{k}" for k in keys)
    found.extend(f"b:{a} {b}" for a, b in zip(padded, padded[1:], strict=False))
    found.extend(f"m:{a} {b}" for a, b in zip(shape, shape[1:], strict=False))
    found.extend(f"t:{a} {b} {c}" for a, b, c in zip(shape, shape[1:], shape[2:], strict=False))
    for word in words:
        if word.name:
            found.extend(f"nw:{part.casefold()}" for part in word.text.split()[1:])
            found.extend(f"nw:{part.casefold()}" for part in word.text.split()[-1:])
            continue
        letters = f"<{word.text.casefold()}>"
        found.extend(f"c:{letters[i : i + 4]}" for i in range(max(1, len(letters) - 3)))
    found.append(f"n:{min(len(words), 30) // 5}")
    return sorted({_hash(f, buckets) for f in found})


def spans(words: Sequence[Token]) -> Iterator[tuple[int, int]]:
    """Candidate value spans ``(start, end)``.

    Up to :data:`MAX_SPAN` words, no punctuation, neither end a function word.
    """
    for start, first in enumerate(words):
        if first.key in _BREAK or first.key in _VALUE_STOP:
            continue
        for end in range(start + 1, min(len(words), start + MAX_SPAN) + 1):
            last = words[end - 1]
            if last.key in _BREAK:
                break
            if last.key in _VALUE_STOP:
                continue
            yield start, end


def span_features(
    words: Sequence[Token], start: int, end: int, label: str, buckets: int
) -> list[int]:
    """Hashed features of one candidate value span for the class ``label``."""
    inside = words[start:end]
    before = [w.key for w in words[max(0, start - 3) : start]]
    after = [w.key for w in words[end : end + 2]]
    prev = before[-1] if before else "<s>"
    prev2 = " ".join(before[-2:]) if len(before) >= 2 else "<s> " + prev
    nxt = after[0] if after else "</s>"
    attribute = label.removesuffix(ENDS)
    found = [
        f"p:{prev}",
        f"p2:{prev2}",
        f"pp:{' '.join(before)}",
        f"x:{nxt}",
        f"f:{inside[0].key}",
        f"l:{inside[-1].key}",
        f"len:{end - start}",
        f"name:{all(w.name for w in inside)}",
        f"onename:{end - start == 1 and inside[0].name}",
        f"cap:{inside[0].text[:1].isupper()}",
        f"digit:{any(ch.isdigit() for w in inside for ch in w.text)}",
        f"startname:{start > 0 and words[start - 1].name}",
        f"first:{start == 0}",
    ]
    found.extend(f"in:{w.key}" for w in inside)
    found.extend(f"c:{w.text.casefold()[-3:]}" for w in inside if not w.name)
    crossed = [f"{attribute}|{f}" for f in found]
    return sorted({_hash(f, buckets) for f in [*found, *crossed]})


class AttributeDetector:
    """The two linear models and the classes they score (see the module doc)."""

    def __init__(
        self,
        classes: Sequence[str],
        sentence_weights: np.ndarray,
        sentence_bias: np.ndarray,
        span_weights: np.ndarray,
        span_bias: float,
    ) -> None:
        sentence_weights = np.asarray(sentence_weights, dtype=np.float32)
        span_weights = np.asarray(span_weights, dtype=np.float32).reshape(-1)
        if sentence_weights.ndim != 2 or sentence_weights.shape[1] != len(classes):
            raise ModelFileError("sentence weights must have one column per class")
        if np.asarray(sentence_bias).shape != (len(classes),):
            raise ModelFileError("sentence bias must have one value per class")
        allowed = {NONE, PASSING, *ATTRIBUTES, *(a + ENDS for a in ATTRIBUTES)}
        if set(classes) - allowed or NONE not in classes:
            raise ModelFileError(f"unknown detector classes: {sorted(set(classes) - allowed)}")
        for array in (sentence_weights, sentence_bias, span_weights, np.asarray(span_bias)):
            if not np.all(np.isfinite(array)):
                raise ModelFileError("detector weights must be finite")
        self.classes = tuple(classes)
        self._sentence_weights = sentence_weights
        self._sentence_bias = np.asarray(sentence_bias, dtype=np.float32)
        self._span_weights = span_weights
        self._span_bias = float(span_bias)

    @property
    def buckets(self) -> int:
        """Hashed feature buckets of the sentence model."""
        return int(self._sentence_weights.shape[0])

    @property
    def span_buckets(self) -> int:
        """Hashed feature buckets of the value model."""
        return int(self._span_weights.shape[0])

    def probabilities(self, words: Sequence[Token]) -> np.ndarray:
        """The sentence model's probability of each of :attr:`classes`."""
        index = sentence_features(words, self.buckets)
        logits = self._sentence_weights[index].sum(axis=0) + self._sentence_bias
        logits = logits - logits.max()
        odds = np.exp(logits)
        return np.asarray(odds / odds.sum())

    def span_score(self, words: Sequence[Token], start: int, end: int, label: str) -> float:
        """The value model's log-odds that ``words[start:end]`` is the value of ``label``."""
        index = span_features(words, start, end, label, self.span_buckets)
        return float(self._span_weights[index].sum() + self._span_bias)

    def stated(self, sentence: str) -> tuple[str, float]:
        """The most probable attribute class of one sentence (never none), its probability."""
        probabilities = self.probabilities(tokens(sentence))
        stated = [i for i, c in enumerate(self.classes) if c not in (NONE, PASSING)]
        best = max(stated, key=lambda i: probabilities[i])
        return self.classes[best], float(probabilities[best])

    def classify(self, sentence: str) -> tuple[str, float]:
        """The most probable class of one sentence, and its probability."""
        probabilities = self.probabilities(tokens(sentence))
        best = int(np.argmax(probabilities))
        return self.classes[best], float(probabilities[best])

    def passing(self, sentence: str) -> float:
        """The probability that ``sentence`` states a passing state of the moment."""
        if PASSING not in self.classes:
            return 0.0
        return float(self.probabilities(tokens(sentence))[self.classes.index(PASSING)])

    def passing_state(self, sentence: str, speaker: str | None = None) -> bool:
        """Whether ``sentence`` only states a passing state of the moment (weather, mood).

        Short (at most :data:`PASSING_WORDS` words), naming the ``speaker`` (when given) and
        nobody else (a place, a pet, a brand is content), read as one from
        :data:`PASSING_STATE`, and stating no attribute (each below :data:`STATES_NOTHING`).
        """
        words = tokens(sentence)
        if PASSING not in self.classes or len(words) > PASSING_WORDS:
            return False
        own = (speaker or "").casefold()
        if any(w.name and w.text.casefold() != own for w in words):
            return False
        if own and not any(w.name for w in words):
            return False  # the user's state: "[Sara] is soaked", not "the plates are for her"
        probabilities = self.probabilities(words)
        stated = [
            p for c, p in zip(self.classes, probabilities, strict=True) if c not in (NONE, PASSING)
        ]
        return bool(
            probabilities[self.classes.index(PASSING)] >= PASSING_STATE
            and max(stated) < STATES_NOTHING
        )

    def detect(self, text: str, floor: float = 0.0) -> list[Detection]:
        """What each clause of ``text`` states (one detection per clause at most).

        A clause whose likeliest attribute is below ``floor`` gives none (and costs less).

        A sentence longer than :data:`LONG_SENTENCE` words is read clause by clause (the corpus
        is of clauses); a clause naming nobody is about the last name before it in ``text``.
        """
        found = []
        before: str | None = None
        for sentence in re.split(r"(?<=[.!?;])\s+", text.strip()):
            words = tokens(sentence)
            if not words or sentence.rstrip().endswith("?"):
                continue
            for clause in _clauses(words):
                detection = self._detect_clause(clause, before, floor)
                if detection is not None:
                    found.append(detection)
                named = _people(clause)
                before = _name(clause[named[-1]].text) if named else before
        return found

    def _span_scores(
        self, words: Sequence[Token], candidates: Sequence[tuple[int, int]], label: str
    ) -> np.ndarray:
        rows = [span_features(words, a, b, label, self.span_buckets) for a, b in candidates]
        starts = np.cumsum([0, *(len(r) for r in rows[:-1])])
        gathered = self._span_weights[np.fromiter((i for r in rows for i in r), dtype=np.int64)]
        return np.add.reduceat(gathered, starts)

    def _detect_clause(
        self, words: Sequence[Token], before: str | None, floor: float
    ) -> Detection | None:
        probabilities = self.probabilities(words)
        stated = [i for i, c in enumerate(self.classes) if c not in (NONE, PASSING)]
        best = max(stated, key=lambda i: probabilities[i])
        label = self.classes[best]
        attribute, ends = label.removesuffix(ENDS), label.endswith(ENDS)
        if probabilities[best] < floor:
            return None
        candidates = list(spans(words))
        value_span: tuple[int, int] | None = None
        if candidates:
            value_span = candidates[int(np.argmax(self._span_scores(words, candidates, label)))]
        if value_span is None and not ends:
            return None
        subject = _subject(words, value_span, attribute) or before
        if subject is None:
            return None
        inside = [] if value_span is None else list(words[value_span[0] : value_span[1]])
        value = _value(inside)
        if (not value and not ends) or value == subject:
            return None
        if inside and not _plausible(attribute, inside, words):
            return None
        stop = len(words) if value_span is None else value_span[1]
        said = " ".join(w.text for w in words[:stop])
        return Detection(subject, attribute, value, ends, float(probabilities[best]), said)

    def to_bytes(self) -> bytes:
        """The detector as a compressed numpy archive, weights as int8 with a scale per column."""
        sentence, sentence_scale = _quantised(self._sentence_weights)
        span, span_scale = _quantised(self._span_weights.reshape(-1, 1))
        buffer = io.BytesIO()
        np.savez_compressed(
            buffer,
            classes=np.array(self.classes),
            sentence_weights=sentence,
            sentence_scale=sentence_scale,
            sentence_bias=self._sentence_bias,
            span_weights=span[:, 0],
            span_scale=span_scale,
            span_bias=np.array([self._span_bias], dtype=np.float32),
        )
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> AttributeDetector:
        """A detector read from :meth:`to_bytes` output; :class:`ModelFileError` if malformed."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
                sentence_scale = arrays["sentence_scale"].astype(np.float32)
                span_scale = arrays["span_scale"].astype(np.float32)
                if sentence_scale.shape != (arrays["sentence_weights"].shape[-1],):
                    raise ModelFileError("sentence scales must have one value per class")
                return cls(
                    [str(c) for c in arrays["classes"]],
                    arrays["sentence_weights"].astype(np.float32) * sentence_scale,
                    arrays["sentence_bias"],
                    arrays["span_weights"].astype(np.float32) * span_scale[0],
                    float(arrays["span_bias"][0]),
                )
        except (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile) as exc:
            raise ModelFileError(f"not an attribute detector file: {exc}") from exc


def _quantised(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``weights`` as int8 and the scale of each column that restores them."""
    scale = np.abs(weights).max(axis=0) / 127
    scale[scale == 0] = 1.0
    return np.round(weights / scale).astype(np.int8), scale.astype(np.float32)


def _subject(
    words: Sequence[Token], value: tuple[int, int] | None, attribute: str = ""
) -> str | None:
    """The name nearest before the value, else the first after it (never one after "in").

    With the relation that follows it: "[Aditi]'s bf" is the bf; but the partner named after
    "[Tom]'s partner" is Tom's, and "[Tom's partner] [Jana]" states Tom's partner.
    """
    start, end = value if value is not None else (len(words), len(words))
    people = _people(words)
    before = [i for i in people if i < start]
    after = [i for i in people if i >= end]
    if not before and not after:
        return None
    at = before[-1] if before else after[0]
    name = _name(words[at].text)
    owner, _, relation = name.partition("'s ")
    if attribute == "partner" and relation in PARTNER_WORDS:
        return owner
    if [w.key for w in words[at + 1 : at + 3]] == ["'", "s"]:
        for index in range(at + 3, min(at + 6, start)):
            word = words[index].text.casefold()
            if word in PARTNER_WORDS and attribute == "partner":
                return name
            if word in RELATIONS:
                return f"{name}'s {word}"
    return name


def _people(words: Sequence[Token]) -> list[int]:
    """Where the names that may be a subject are: not a place ("in [Leeds]"), not a make."""
    return [
        i
        for i, w in enumerate(words)
        if w.name
        and (i == 0 or words[i - 1].key not in _PLACED)
        and w.text.casefold().split()[0] not in VEHICLE_MAKES | PHONE_MAKES
    ]


def _clauses(words: Sequence[Token]) -> Iterator[Sequence[Token]]:
    """A long sentence's clauses: cut at a comma or a joining word, at least 3 words each."""
    if len(words) <= LONG_SENTENCE:
        yield words
        return
    start = 0
    for index, word in enumerate(words):
        cut = word.key in (",", ";", ":") or (
            word.key in _JOINS and index > start and words[index - 1].key != ","
        )
        if cut and index - start >= 3 and len(words) - index > 3:
            yield words[start:index]
            start = index + 1 if word.key in (",", ";", ":") else index
    yield words[start:]


def _named_relation(first: Token, words: Sequence[Token]) -> bool:
    """Whether ``first`` names the relation just before it ("[Jonas's sister] [Lena]")."""
    at = next(i for i, w in enumerate(words) if w is first)
    if at == 0 or not words[at - 1].name:
        return False
    relation = words[at - 1].text.casefold().rpartition(" ")[2]
    return relation in RELATIONS and relation not in PARTNER_WORDS


def _plausible(attribute: str, value: Sequence[Token], words: Sequence[Token]) -> bool:
    """Whether a value can be one of ``attribute``.

    No time, vehicle or phone as a place, employer, school, role or partner; no phone as a
    vehicle nor a vehicle as a phone; no relation word (or the person a relation names) as a
    partner.
    """
    folded = [part for w in value for part in w.text.casefold().split()]
    first = folded[0]
    said = {w.text.casefold() for w in words}
    if set(folded) <= _TIMES:
        return False
    if attribute == "partner" and (set(folded) & RELATIONS or _named_relation(value[0], words)):
        return False
    if attribute in ("residence", "employer", "school", "partner", "occupation"):
        return first not in VEHICLE_MAKES and first not in PHONE_MAKES
    if attribute == "car":
        return first not in PHONE_MAKES and (first in VEHICLE_MAKES or not said & _PHONE_WORDS)
    if attribute == "phone":
        return first not in VEHICLE_MAKES and (first in PHONE_MAKES or not said & _VEHICLE_WORDS)
    return True


def _name(text: str) -> str:
    return text.replace("’", "'").casefold().strip()


def _value(words: Sequence[Token]) -> str:
    kept = [w.text for w in words if w.key not in ("a", "an", "the")]
    return " ".join(kept).replace("’", "'").casefold().strip(".,!;:")


@cache
def packaged_detector() -> AttributeDetector:
    """The detector shipped in ``membrain/data/attribute_detector.npz``."""
    data = files("membrain").joinpath("data", "attribute_detector.npz").read_bytes()
    return AttributeDetector.from_bytes(data)
