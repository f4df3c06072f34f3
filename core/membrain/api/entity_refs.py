"""Entity names in fact text: the ``[Name]`` refs a fact mentions and the key of a name.

The lowest layer of the package: storage, extraction and retrieval all read refs the same way.
"""

from __future__ import annotations

import re

__all__ = ["entity_refs", "normalize_name"]

# A bracketed ref: "[Tom]" but not an annotation "[raw::resolved]".
_REF = re.compile(r"\[([^\[\]:]+(?::(?!:)[^\[\]:]*)*)\]")


def entity_refs(text: str) -> list[str]:
    """The distinct entity refs written as ``[Name]`` in a fact, in order of first mention."""
    seen: dict[str, None] = {}
    for match in _REF.finditer(text):
        ref = match.group(1).strip()
        if ref and "::" not in ref:
            seen.setdefault(ref, None)
    return list(seen)


_SPACES = re.compile(r"\s+")


def normalize_name(name: str) -> str:
    """Case- and space-insensitive key of a name (the basis of entity identity)."""
    return _SPACES.sub(" ", name.strip().casefold())
