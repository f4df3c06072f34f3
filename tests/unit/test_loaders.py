from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from membrain import InputError
from membrain.files.loaders import load_conversations, parse_locomo_time

MESSAGE = {"speaker": "Sara", "text": "I adopted a cat.", "timestamp": "2024-03-15T14:01:00Z"}


def test_json_list_object_and_jsonl(tmp_path: Path) -> None:
    as_list = tmp_path / "a.json"
    as_list.write_text(json.dumps([MESSAGE, {**MESSAGE, "id": 7}]))
    as_object = tmp_path / "b.json"
    as_object.write_text(json.dumps({"messages": [MESSAGE]}))
    as_lines = tmp_path / "c.jsonl"
    as_lines.write_text(json.dumps(MESSAGE) + "\n\n" + json.dumps(MESSAGE) + "\n")
    first = load_conversations(as_list)[0].messages
    assert [m.source_id for m in first] == [None, "7"]
    assert len(load_conversations(as_object)[0].messages) == 1
    assert len(load_conversations(as_lines)[0].messages) == 2


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (json.dumps([{"speaker": "Sara", "text": "hi"}]), "item 0: the message has no timestamp"),
        (json.dumps([{**MESSAGE, "timestamp": "yesterday"}]), "timestamp"),
        (json.dumps({"rows": []}), "unknown format"),
        ("{not json\n", "line 1"),
        ("", "holds no messages"),
        (json.dumps(["just a string"]), "must be a JSON object"),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError, match=problem):
        load_conversations(path)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_conversations(tmp_path / "missing.json")


def test_locomo_format(tmp_path: Path) -> None:
    data = [
        {
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Ben",
                "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "Later."}],
                "session_2_date_time": "9:05 am on 3 June, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Ben."},
                    {
                        "speaker": "Ben",
                        "dia_id": "D1:2",
                        "text": "Look.",
                        "blip_caption": "a photo of a dog",
                    },
                ],
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_3_date_time": "1:00 pm on 9 June, 2023",
            },
            "qa": [],
        }
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    (conv,) = load_conversations(path)
    assert conv.name == "conv-x" and conv.speakers == ("Ann", "Ben")
    assert [m.source_id for m in conv.messages] == ["D1:1", "D1:2", "D2:1"]
    assert conv.messages[1].caption == "a photo of a dog"
    assert conv.messages[1].addressee == "Ann"
    assert conv.messages[1].timestamp == datetime(2023, 5, 8, 13, 56, 1, tzinfo=UTC)
    del data[0]["conversation"]["session_2_date_time"]  # type: ignore[attr-defined]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="session_2: the session has no date_time"):
        load_conversations(path)


def test_parse_locomo_time() -> None:
    assert parse_locomo_time("10:37 am on 27 June, 2023") == datetime(2023, 6, 27, 10, 37)
    with pytest.raises(InputError):
        parse_locomo_time("sometime in June")
