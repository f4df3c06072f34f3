from __future__ import annotations

from typing import Any

import pytest

from membrain.extraction.jsonout import MalformedOutput, looks_like_refusal, parse_json_object

PARSED: list[tuple[str, str, str | None, dict[str, Any]]] = [
    # (case id, raw model output, required key, expected object)
    ("plain", '{"facts": ["[Sara] has a cat."]}', "facts", {"facts": ["[Sara] has a cat."]}),
    ("plain-no-key", '{"a": 1, "b": [true, null]}', None, {"a": 1, "b": [True, None]}),
    ("whitespace-around", '\n\n  {"facts": []}  \n', "facts", {"facts": []}),
    ("json-fence", '```json\n{"facts": ["a"]}\n```', "facts", {"facts": ["a"]}),
    ("bare-fence", '```\n{"facts": ["a"]}\n```', "facts", {"facts": ["a"]}),
    (
        "fence-in-prose",
        'Here are the facts:\n```json\n{"facts": ["a"]}\n```\nHope this helps!',
        "facts",
        {"facts": ["a"]},
    ),
    ("unclosed-fence", '```json\n{"facts": ["a", "b"]}\n', "facts", {"facts": ["a", "b"]}),
    (
        "prose-around",
        'Sure! Here you go: {"facts": ["[Tom] likes tea."]} Let me know if you need more.',
        "facts",
        {"facts": ["[Tom] likes tea."]},
    ),
    (
        "bracket-refs-in-prose-before",
        '[Tom] and [Ann] are mentioned. {"facts": ["[Tom] met [Ann]."]}',
        "facts",
        {"facts": ["[Tom] met [Ann]."]},
    ),
    (
        "second-object-after",
        'Result: {"facts": ["a"]}\nAlso {"note": 1}',
        "facts",
        {"facts": ["a"]},
    ),
    (
        "thinking-block",
        '<think>Should I use {"facts": 0}? No.</think>\n{"facts": ["a"]}',
        "facts",
        {"facts": ["a"]},
    ),
    ("trailing-commas", '{"facts": ["a", "b",],}', "facts", {"facts": ["a", "b"]}),
    ("single-quotes", "{'facts': ['a', 'b']}", "facts", {"facts": ["a", "b"]}),
    ("unquoted-keys", '{facts: ["a"], discarded: []}', "facts", {"facts": ["a"], "discarded": []}),
    ("truncated-brackets", '{"facts": ["a", "b"', "facts", {"facts": ["a", "b"]}),
    (
        "truncated-nested",
        '{"facts": [{"text": "x", "sources": ["m1"]}, {"text": "y"',
        "facts",
        {"facts": [{"text": "x", "sources": ["m1"]}, {"text": "y"}]},
    ),
    (
        "truncated-in-fence",
        '```json\n{"facts": ["a", "b"\n',
        "facts",
        {"facts": ["a", "b"]},
    ),
    (
        "repair-with-prose-after",
        "Here: {'facts': ['a',]} -- done {ok}",
        "facts",
        {"facts": ["a"]},
    ),
    ("nested-single-quotes", "{'a': {\"b\": 1}}", None, {"a": {"b": 1}}),
    ("top-level-list", '["a", "b"]', "facts", {"facts": ["a", "b"]}),
    (
        "top-level-list-of-objects",
        'Facts:\n[{"text": "x"}, {"text": "y"}]',
        "facts",
        {"facts": [{"text": "x"}, {"text": "y"}]},
    ),
    ("top-level-list-repaired", '[{"text": "x"},', "facts", {"facts": [{"text": "x"}]}),
    ("empty-list", "[]", "facts", {"facts": []}),
    (
        "apology-then-json",
        'I\'m sorry for the delay. {"facts": []}',
        "facts",
        {"facts": []},
    ),
]


@pytest.mark.parametrize(
    ("raw", "key", "expected"), [case[1:] for case in PARSED], ids=[case[0] for case in PARSED]
)
def test_parse_json_object(raw: str, key: str | None, expected: dict[str, Any]) -> None:
    assert parse_json_object(raw, required_key=key) == expected


MALFORMED: list[tuple[str, str, str | None, str]] = [
    # (case id, raw model output, required key, expected reason)
    ("empty", "", "facts", "empty answer"),
    ("whitespace", " \n\t ", "facts", "empty answer"),
    ("missing-key", '{"fact": ["a"]}', "facts", "missing key 'facts'"),
    ("missing-key-repaired", "{'fact': ['a',]}", "facts", "missing key 'facts'"),
    ("missing-key-fenced", '```json\n{"items": []}\n```', "facts", "missing key 'facts'"),
    ("refusal-sorry", "I'm sorry, but I can't help with that.", "facts", "refusal"),
    ("refusal-curly-apostrophe", "I\u2019m sorry, I can\u2019t do that.", "facts", "refusal"),
    ("refusal-as-an-ai", "As an AI, I do not store personal details.", "facts", "refusal"),
    ("refusal-cannot", "I cannot extract facts from this conversation.", None, "refusal"),
    ("refusal-with-bracket-ref", "I cannot discuss [Tom] here.", "facts", "refusal"),
    ("prose", "The conversation has no facts worth keeping.", "facts", "not JSON"),
    ("prose-no-key", "hello world", None, "not JSON"),
    ("prose-with-brace-word", "Use the {name} placeholder here.", None, "not JSON"),
    ("lone-brace", "{ sorry, nothing", None, "not JSON"),
    ("list-without-key", '["a", "b"]', None, "not JSON"),
    ("scalar", '"just a string"', "facts", "not JSON"),
    ("number", "42", None, "not JSON"),
    ("bracket-ref-only", "[Tom] said nothing new.", "facts", "not JSON"),
    ("fence-without-json", "```\nno json here\n```", "facts", "not JSON"),
]


@pytest.mark.parametrize(
    ("raw", "key", "reason"), [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED]
)
def test_malformed_output(raw: str, key: str | None, reason: str) -> None:
    with pytest.raises(MalformedOutput) as info:
        parse_json_object(raw, required_key=key)
    assert info.value.reason == reason
    assert info.value.raw == raw


def test_malformed_output_is_a_value_error_not_a_membrain_error() -> None:
    from membrain.api.errors import MembrainError

    error = MalformedOutput("not JSON", "x")
    assert isinstance(error, ValueError)
    assert not isinstance(error, MembrainError)
    assert "not JSON" in str(error)


def test_repair_runs_only_after_strict_parsing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import json_repair

    calls: list[str] = []

    def spy(text: str, **kwargs: Any) -> Any:
        calls.append(text)
        return {"spy": True}

    monkeypatch.setattr(json_repair, "repair_json", spy)
    assert parse_json_object('ok: {"facts": []} bye', required_key="facts") == {"facts": []}
    assert calls == []
    assert parse_json_object("{'facts': []}") == {"spy": True}
    assert calls == ["{'facts': []}"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("I'm sorry, I can't help with that.", True),
        ("I am unable to comply.", True),
        ("As a language model I cannot store this.", True),
        ("  i apologize, but no.", True),
        ('I\'m sorry: {"facts": []}', False),
        ('["I cannot swim"]', False),
        ("Sara is sorry about the cat.", False),
        ("", False),
    ],
)
def test_looks_like_refusal(raw: str, expected: bool) -> None:
    assert looks_like_refusal(raw) is expected
