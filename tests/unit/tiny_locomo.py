"""A tiny LoCoMo-shaped file (one conversation, one session) for the benchmarks' smoke tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def write_tiny_locomo(
    path: Path,
    turns: Sequence[tuple[str, str]],
    questions: Sequence[dict[str, Any]] = (),
    *,
    name: str = "tiny",
) -> Path:
    """Write ``turns`` (speaker, text) as one session between their first two speakers."""
    speakers = list(dict.fromkeys(speaker for speaker, _ in turns))
    session = [
        {"speaker": speaker, "dia_id": f"D1:{i}", "text": text}
        for i, (speaker, text) in enumerate(turns, 1)
    ]
    conversation = {
        "speaker_a": speakers[0],
        "speaker_b": speakers[1],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": session,
    }
    data = [{"sample_id": name, "conversation": conversation, "qa": list(questions)}]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
