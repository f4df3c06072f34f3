"""The profile block that opens a context: the user's stable entries, within their share.

:func:`profile_block` takes the profile's entries in block order (preferred topics first, see
:meth:`membrain.Memory.profile`) and keeps them in that order while the block fits its budget
(an entry that does not fit is skipped, a later, shorter one still tried). The same entries
give the same block, byte for byte, so a prompt prefix cache can reuse it across turns.
Stale entries are left out. Each line cites the facts the entry summarises::

    ## Profile
    - work/occupation: Sara works as a teacher. [fact 437d8fba]
    - basic_info/residence: Sara lives in Berlin. [fact 1c0e9a55; fact 77b2d410]
"""

from __future__ import annotations

from collections.abc import Sequence

from membrain.api.profile import ProfileEntry
from membrain.api.tokens import count_tokens

__all__ = ["PROFILE_HEADER", "profile_block"]

PROFILE_HEADER = "## Profile"
_SEP = "\n"


def _line(entry: ProfileEntry) -> str:
    cited = "; ".join(f"fact {i[:8]}" for i in entry.fact_ids)
    text = " ".join(entry.text.split())
    return f"- {entry.topic}/{entry.subtopic}: {text}" + (f" [{cited}]" if cited else "")


def profile_block(
    entries: Sequence[ProfileEntry], budget: int
) -> tuple[str, tuple[ProfileEntry, ...]]:
    """The block of ``entries`` that fits ``budget`` tokens, and the entries it holds.

    Returns ``("", ())`` when no entry fits (or none is current).
    """
    current = [e for e in entries if not e.stale and not e.removed]
    if budget <= 0 or not current:
        return "", ()
    chosen: list[ProfileEntry] = []
    lines = [PROFILE_HEADER]
    for entry in current:
        candidate = _SEP.join([*lines, _line(entry)])
        if count_tokens(candidate) <= budget:
            lines.append(_line(entry))
            chosen.append(entry)
    if not chosen:
        return "", ()
    return _SEP.join(lines), tuple(chosen)
