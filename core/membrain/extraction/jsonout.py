"""Getting one JSON object out of what chat models really return.

Models wrap JSON in code fences, put prose around it, leave trailing commas, use single quotes,
or stop mid-answer. :func:`parse_json_object` finds the object in two phases:

1. Strict: ``json.loads`` of each candidate (a fenced block, or the whole answer), then
   ``json.JSONDecoder.raw_decode`` at every top-level ``{`` (and ``[``) so prose around the
   JSON does not matter.
2. Repair, only when the strict phase found nothing usable: ``json_repair`` on the text from a
   top-level bracket that plausibly opens JSON (``{"``, ``{'``, ``{key:``, ``[{``, ``["``), so
   prose is never "repaired" into a string or an empty object.

Failures raise :class:`MalformedOutput` with a short ``reason`` ("empty answer", "refusal",
"missing key 'facts'", "not JSON") that the extractor turns into a retry or an
:class:`membrain.api.errors.ExtractionError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import json_repair

__all__ = ["MalformedOutput", "looks_like_refusal", "parse_json_object"]


class MalformedOutput(ValueError):
    """The model output holds no usable JSON object (an internal signal, not a MembrainError).

    Args:
        reason: Why, in a few words: ``"empty answer"``, ``"refusal"``, ``"not JSON"`` or
            ``"missing key 'facts'"``.
        raw: The model output, verbatim.
    """

    def __init__(self, reason: str, raw: str) -> None:
        super().__init__(f"malformed model output ({reason}): {raw[:200]!r}")
        self.reason = reason
        self.raw = raw


# A fenced block: ```json ... ``` (the closing fence may be missing when the answer was cut).
_FENCE = re.compile(r"```[ \t]*(?:[A-Za-z0-9_+-]+)?[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)
# Reasoning models put their thinking before the answer; it may contain braces.
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
# Openings that plausibly start JSON, for the repair phase.
_OBJECT_START = re.compile(r"\{\s*(?:[\"'}]|[A-Za-z_][\w-]*\s*:)")
_LIST_START = re.compile(r"\[\s*[{\"'\]]")
_REFUSAL = re.compile(
    r"\b(?:i'?m sorry|i am sorry|i apologi[sz]e|i can(?:not|'t)|i'?m (?:not )?(?:able|unable)"
    r"|i am (?:not )?(?:able|unable)|i won't|i will not|i must decline|as an ai"
    r"|as a language model)\b",
    re.IGNORECASE,
)
_MAX_REPAIRS = 3
_DECODER = json.JSONDecoder()


def looks_like_refusal(raw: str) -> bool:
    """Whether ``raw`` reads like a model declining to answer, with no JSON in it.

    Example:
        >>> looks_like_refusal("I'm sorry, but I can't help with that.")
        True
        >>> looks_like_refusal('{"facts": ["[Sara] is sorry she cannot come."]}')
        False
    """
    text = _THINK.sub("", raw).replace("\u2019", "'").strip()
    if not text or "{" in text or text.startswith(("[", "```")):
        return False
    return _REFUSAL.search(text[:300]) is not None


def parse_json_object(raw: str, *, required_key: str | None = None) -> dict[str, Any]:
    r"""The JSON object in a model answer.

    Args:
        raw: The model output, verbatim.
        required_key: A key the object must have. A top-level JSON list is then accepted and
            wrapped as ``{required_key: list}``.

    Returns:
        The object.

    Raises:
        MalformedOutput: The answer is empty, a refusal, not JSON, or lacks ``required_key``.

    Example:
        >>> parse_json_object('Sure! ```json\n{"facts": ["a",]}\n``` Anything else?')
        {'facts': ['a']}
        >>> parse_json_object('["a", "b"]', required_key="facts")
        {'facts': ['a', 'b']}
    """
    if not raw.strip():
        raise MalformedOutput("empty answer", raw)
    texts = _candidate_texts(raw)
    missing_key = False
    # Phase 1: strict decoding only.
    for text in texts:
        for value in _strict_values(text):
            result = _accept(value, required_key)
            if result is not None:
                return result
            missing_key = missing_key or isinstance(value, dict)
    if looks_like_refusal(raw):
        raise MalformedOutput("refusal", raw)
    # Phase 2: repair, from openings that plausibly start JSON (objects first).
    for text in texts:
        for value in _repaired_values(text, lists=required_key is not None):
            result = _accept(value, required_key)
            if result is not None:
                if required_key is not None and not result[required_key]:
                    # "{"facts": [" repairs to an empty list: a cut-off answer, not "nothing".
                    raise MalformedOutput(f"truncated answer (empty {required_key!r})", raw)
                return result
            missing_key = missing_key or isinstance(value, dict)
    if missing_key and required_key is not None:
        raise MalformedOutput(f"missing key {required_key!r}", raw)
    raise MalformedOutput("not JSON", raw)


def _candidate_texts(raw: str) -> list[str]:
    """Fenced blocks that hold brackets, else the whole answer (thinking removed)."""
    text = _THINK.sub("", raw)
    fenced = [m.group(1) for m in _FENCE.finditer(text) if re.search(r"[{\[]", m.group(1))]
    return fenced or [text]


def _accept(value: object, required_key: str | None) -> dict[str, Any] | None:
    if isinstance(value, dict):
        if required_key is None or required_key in value:
            return {str(key): item for key, item in value.items()}
        return None
    if isinstance(value, list) and required_key is not None:
        return {required_key: value}
    return None


def _top_level_openings(text: str) -> Iterator[int]:
    """Positions of ``{`` and ``[`` at bracket depth 0 (a naive count that ignores strings)."""
    depth = 0
    for index, char in enumerate(text):
        if char in "{[":
            if depth == 0:
                yield index
            depth += 1
        elif char in "}]":
            depth = max(depth - 1, 0)


def _strict_values(text: str) -> Iterator[object]:
    try:
        whole: object = json.loads(text.strip())
    except (ValueError, RecursionError):
        pass
    else:
        yield whole
    for index in _top_level_openings(text):
        try:
            value, _ = _DECODER.raw_decode(text, index)
        except (ValueError, RecursionError):
            continue
        yield value


def _repaired_values(text: str, *, lists: bool) -> Iterator[object]:
    openings = list(_top_level_openings(text))
    starts = [i for i in openings if _OBJECT_START.match(text, i)][:_MAX_REPAIRS]
    if lists:
        starts += [i for i in openings if _LIST_START.match(text, i)][:_MAX_REPAIRS]
    for index in starts:
        value = _repair(text[index:])
        if text[index] == "{" and isinstance(value, list) and value:
            # json_repair returns a list when prose after the object holds more brackets.
            value = value[0]
        if text[index] == "{" and (not isinstance(value, dict) or not value):
            continue  # an empty object is never a repair worth having
        if text[index] == "[" and not isinstance(value, list):
            continue
        yield value


def _repair(fragment: str) -> object:
    try:
        return json_repair.repair_json(fragment, return_objects=True, skip_json_loads=True)
    except Exception:  # json_repair may fail in many ways on hostile input; treat as unusable.
        return None
