"""The LLM cost benchmark (``benchmarks.llm_cost``) on a tiny LoCoMo-shaped conversation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks import llm_cost as bench

_TURNS_1 = [
    ("Caroline", "Hey Mel! I went to a support group yesterday and it was so powerful.", None),
    ("Melanie", "That's great, Caroline! I took the kids to Lake Tahoe last week.", None),
    ("Caroline", "Here is the [poster] from the group.", "a poster with a rainbow flag"),
    ("Melanie", "Love it. My book club is reading Little Women.", None),
    ("Caroline", "I plan to apply to the counseling program next month.", None),
]
_TURNS_2 = [
    ("Melanie", "I finished a pottery class on Friday.", None),
    ("Caroline", "So cool! Did you bring the bowl home?", None),
    ("Melanie", "Yes, my daughter painted it.\nShe loved it.", "a blue clay bowl"),
]


def _session(turns: list[tuple[str, str, str | None]], number: int) -> list[dict[str, Any]]:
    out = []
    for index, (speaker, text, caption) in enumerate(turns, 1):
        turn: dict[str, Any] = {"speaker": speaker, "dia_id": f"D{number}:{index}", "text": text}
        if caption:
            turn["blip_caption"] = caption
        out.append(turn)
    return out


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    data = [
        {
            "sample_id": "tiny-1",
            "conversation": {
                "speaker_a": "Caroline",
                "speaker_b": "Melanie",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": _session(_TURNS_1, 1),
                "session_2_date_time": "10:37 am on 27 June, 2023",
                "session_2": _session(_TURNS_2, 2),
            },
            "qa": [],
        },
        {
            "sample_id": "tiny-2",
            "conversation": {
                "speaker_a": "Jon",
                "speaker_b": "Gina",
                "session_1_date_time": "4:04 pm on 20 January, 2023",
                "session_1": [
                    {"speaker": "Jon", "dia_id": "D1:1", "text": "I lost my job at the bank."},
                    {"speaker": "Gina", "dia_id": "D1:2", "text": "Oh no! I opened a shop."},
                    {"speaker": "Jon", "dia_id": "D1:3", "text": "I want a dance studio."},
                ],
            },
            "qa": [],
        },
    ]
    path = tmp_path / "tiny_locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_main_reports_consistent_figures(locomo_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    report = bench.main(["--data", str(locomo_file), "--batch-size", "4", "2", "--json", str(out)])

    assert report["turns"] == len(_TURNS_1) + len(_TURNS_2) + 3
    assert json.loads(out.read_text(encoding="utf-8"))["batch_size"].keys() == {"2", "4"}
    for size in (2, 4):
        f = report["batch_size"][str(size)]
        assert f["batches"] == math.ceil(len(_TURNS_1 + _TURNS_2) / size) + math.ceil(3 / size)
        assert f["llm_calls"] == 2 * f["batches"] + f["profile_calls"]
        assert f["profile_calls"] <= 2  # one per add (a conversation) that stored facts
        assert f["extraction_calls"] == 2 * f["batches"]
        assert f["disambiguation_calls"] == 0
        assert f["retries"] == 0
        assert f["errors"] == 0
        assert f["input_tokens"] > 0 and f["output_tokens"] > 0
        assert f["facts"] > 0
        assert f["calls_per_100_turns"] == pytest.approx(100 * f["llm_calls"] / report["turns"])
        assert f["input_tokens_per_call"] == pytest.approx(f["input_tokens"] / f["llm_calls"])

    single = report["one_at_a_time"]
    assert single["conversation"] == "tiny-1"
    one = single["figures"]
    assert one["batches"] == one["turns"] == len(_TURNS_1) + len(_TURNS_2)
    assert one["llm_calls"] == 2 * one["batches"] + one["profile_calls"]
    assert one["errors"] == 0
    profile = report["profile"]  # flushes of 20 turns: at most one profile call each
    assert profile["flushes"] == 2 and profile["turns"] == report["turns"]
    assert 0 < profile["profile_calls_per_100_turns"] <= 100 * 2 / report["turns"]
    assert profile["profile_input_tokens_per_100_turns"] > 0
    assert profile["extraction_calls_per_100_turns"] > profile["profile_calls_per_100_turns"]
    # Batching sends fewer, larger prompts than one message at a time.
    batched = single["comparison"]["4"]
    assert batched["llm_calls"] < one["llm_calls"]
    assert batched["input_tokens"] < one["input_tokens"]
    assert batched["input_tokens_per_call"] > one["input_tokens_per_call"]


def test_scripted_facts_pass_the_extractors_checks() -> None:
    from membrain.extraction.prompts import DIVIDER, FACT_PROMPT

    window = "\n".join(
        [
            "[2023-05-08T13:56:00Z] Caroline: Hi Mel!",
            DIVIDER,
            "[2023-05-08T13:56:01Z] Melanie: I saw [Caroline] and Lake Tahoe yesterday.",
            "[2023-05-08T13:56:01Z] Melanie (shared an image): a lake",
        ]
    )
    prompt = FACT_PROMPT.format(
        window=window, divider=DIVIDER, entities="- Melanie\n- Caroline", feedback="", known=""
    )
    facts = json.loads(bench.PromptDerivedModel().generate("system", prompt))["facts"]
    assert [f["fact_ts"] for f in facts] == ["2023-05-08T13:56:01Z"] * 2
    assert facts[0]["text"] == (
        "[Melanie] said: I saw [Caroline] and Lake Tahoe [yesterday::2023-05-07]."
    )
    assert facts[1]["text"] == "[Melanie] shared an image: a lake"
