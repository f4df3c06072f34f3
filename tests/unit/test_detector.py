"""The learned attribute detector: what it reads, what it refuses, and where its output goes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from membrain import Memory, Message, Role, Scope
from membrain.api.errors import ModelFileError
from membrain.api.models import FactStatus
from membrain.extraction import attributes
from membrain.extraction.detector import (
    ATTRIBUTES,
    ENDS,
    NONE,
    PASSING,
    AttributeDetector,
    Detection,
    packaged_detector,
)
from membrain.extraction.offline import OfflineExtractor

START = datetime(2025, 1, 8, 18, 0, tzinfo=UTC)


def _session(mem: Memory, scope: Scope, day: int, *turns: tuple[str, str]) -> None:
    at = START + timedelta(days=day)
    mem.add(
        [
            Message(
                speaker=speaker,
                text=text,
                timestamp=at + timedelta(minutes=i),
                role=Role.ASSISTANT if speaker == "Assistant" else Role.USER,
            )
            for i, (speaker, text) in enumerate(turns)
        ],
        scope=scope,
    )


def test_the_packaged_detector_reads_every_attribute_its_ends_and_passing_states() -> None:
    detector = packaged_detector()
    assert set(detector.classes) == {NONE, PASSING, *ATTRIBUTES, *(a + ENDS for a in ATTRIBUTES)}
    round_trip = AttributeDetector.from_bytes(detector.to_bytes())
    sentence = "[Tunde] resumed at [Flutterwave] on Monday."
    assert round_trip.classify(sentence)[0] == detector.classify(sentence)[0]


@pytest.mark.parametrize("data", [b"", b"not a model", b"PK\x03\x04broken"])
def test_a_malformed_detector_file_is_a_model_file_error(data: bytes) -> None:
    with pytest.raises(ModelFileError):
        AttributeDetector.from_bytes(data)


def test_weights_that_are_not_finite_or_do_not_fit_the_classes_are_refused() -> None:
    classes = [NONE, "residence"]
    good = np.zeros((8, 2))
    with pytest.raises(ModelFileError):
        AttributeDetector(classes, np.full((8, 2), np.nan), np.zeros(2), np.zeros(8), 0.0)
    with pytest.raises(ModelFileError):
        AttributeDetector(classes, np.zeros((8, 3)), np.zeros(2), np.zeros(8), 0.0)
    with pytest.raises(ModelFileError):
        AttributeDetector([NONE, "salary"], good, np.zeros(2), np.zeros(8), 0.0)


@pytest.mark.parametrize(
    ("text", "attribute", "value"),
    [
        ("[Tunde] resumed at [Flutterwave] on Monday.", "employer", "flutterwave"),
        ("[Tunde] is doing a masters at [UCL].", "school", "ucl"),
    ],
)
def test_the_detector_reads_wordings_the_patterns_do_not(
    text: str, attribute: str, value: str
) -> None:
    assert attribute not in {c.attribute for c in attributes.pattern_claims(text)}
    read = {(c.subject, c.attribute, c.value) for c in attributes.claims(text)}
    assert ("tunde", attribute, value) in read


@pytest.mark.parametrize(
    "text",
    [
        "[Tunde] might move to [Porto] next year.",
        "[Tunde] used to live in [Leeds].",
        "[Tunde] loves the vegan place in [Soho].",
    ],
)
def test_plans_past_states_and_other_facts_state_no_attribute(text: str) -> None:
    assert attributes.claims(text) == []


class _Fixed:
    """A detector stand-in that reads one claim at a given confidence."""

    def __init__(self, confidence: float) -> None:
        self.confidence = confidence

    def detect(self, text: str, floor: float = 0.0) -> list[Detection]:
        if self.confidence < floor:
            return []
        if "Ledbury" not in text and "Hereford" not in text:
            return []
        value = "ledbury" if "Ledbury" in text else "hereford"
        return [Detection("rhys", "residence", value, False, self.confidence, text)]


@pytest.fixture
def fixed_detector(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Fixed]:
    fixed = _Fixed(0.6)
    monkeypatch.setattr(attributes, "packaged_detector", lambda: fixed)
    attributes._read.cache_clear()
    yield fixed
    attributes._read.cache_clear()


def test_a_detection_below_the_strong_confidence_only_queues_a_review(
    fixed_detector: _Fixed,
) -> None:
    known = [("k1", "[Rhys] pitched up in [Hereford].", START)]
    later = START + timedelta(days=3)
    fixed_detector.confidence = (attributes.DETECTED + attributes.DETECTED_STRONG) / 2
    weak = attributes.replaced("[Rhys] pitched up in [Ledbury].", later, known)
    assert weak.certain == () and weak.uncertain == ("k1",)
    attributes._read.cache_clear()
    fixed_detector.confidence = attributes.DETECTED_STRONG
    strong = attributes.replaced("[Rhys] pitched up in [Ledbury].", later, known)
    assert strong.certain == ("k1",)
    attributes._read.cache_clear()
    fixed_detector.confidence = attributes.DETECTED / 2
    assert attributes.claims("[Rhys] pitched up in [Ledbury].") == []


def test_a_users_passing_state_is_evidence_not_a_fact(memory: Memory, scope: Scope) -> None:
    _session(
        memory,
        scope,
        0,
        ("Harriet", "Absolutely chucking it down here, I'm soaked to the bone."),
        ("Assistant", "Oh no! Get the kettle on."),
        ("Harriet", "I'm a sous chef at the Crooked Anchor in Bristol."),
    )
    facts = [f.text for f in memory.facts(scope=scope)]
    assert not any("soaked" in f for f in facts)
    assert any("Crooked Anchor" in f for f in facts)
    stored = memory.messages(scope=scope)
    soaked = next(m for m in stored if "soaked" in m.message.text)
    assert any("a passing state" in d for d in soaked.discarded)


def test_a_terse_turn_with_no_subject_is_about_the_user(memory: Memory, scope: Scope) -> None:
    _session(
        memory,
        scope,
        0,
        ("Tunde", "Quick one: I work at Stripe in Dublin."),
        ("Assistant", "Nice, how is it going?"),
    )
    _session(
        memory,
        scope,
        40,
        ("Tunde", "Left Stripe. Started at Cloudflare on Monday."),
        ("Assistant", "Big change! How's the new team?"),
    )
    texts = [f.text for f in memory.facts(scope=scope)]
    assert any("[Tunde] started at [Cloudflare]" in t for t in texts)
    top = memory.search("Where does Tunde work?", scope=scope, k=3).hits[0].fact
    assert "Cloudflare" in top.text and top.status is FactStatus.ACTIVE


@pytest.mark.parametrize(
    ("typed", "fact"),
    [
        ("im workin at greggs now", "[Ciara] is workin at greggs now"),
        ("ive got a new phone", "[Ciara] has got a new phone"),
        ("i moved to leeds, i.e. up north", "[Ciara] moved to leeds, i.e. up north"),
    ],
)
def test_first_person_typed_in_lower_case_is_the_user(typed: str, fact: str) -> None:
    message = Message(id="m1", speaker="Ciara", text=typed, timestamp=START, role=Role.USER)
    batch = OfflineExtractor().extract([message], [], ["Ciara", "Assistant"])
    assert [d.text for d in batch.facts] == [fact]
