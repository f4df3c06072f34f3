"""PLACEHOLDER so the package imports while the temporal module is being written; overwrite me."""

import re
from datetime import datetime
from typing import Any


def annotate(text: str, reference: datetime) -> str:
    return text


def find_annotations(text: str, strict: bool = True) -> list[Any]:
    return []


def plain_text(text: str) -> str:
    return re.sub(r"\[([^\[\]]*?)(?:::[^\[\]]*)?\]", r"\1", text)
