"""Tools for tests, yours and ours: a hashing embedder, a scripted chat model, a file scanner.

:func:`files_holding` checks an erasure the way an auditor would: it reads every file of a
store folder for bytes that must be gone after a purge.

Example:
    >>> enc = HashingEncoder(dim=32)
    >>> len(enc.embed_query("hello world"))
    32
    >>> model = ScriptedChatModel(entities=['{"entities": ["Sara"]}'], facts=['{"facts": []}'])
    >>> model.generate("system", "List the entities mentioned ...")
    '{"entities": ["Sara"]}'
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from membrain.retrieval.rerank import Reranker, packaged_reranker

__all__ = [
    "HashingEncoder",
    "ScriptedChatModel",
    "any_encoder_reranker",
    "file_extents",
    "files_holding",
    "files_holding_text",
    "tantivy_term",
]

_WORD = re.compile(r"[a-z0-9]+")


def any_encoder_reranker() -> Reranker:
    """The packaged reranker's trees, applied whatever the dense encoder.

    The packaged trees order nothing for a memory searching with another encoder than theirs
    (:meth:`~membrain.retrieval.rerank.Reranker.fits`); a test on :class:`HashingEncoder` that
    exercises the reranker passes these as ``Memory(reranker=...)``. The order they give there
    means nothing; only that the reranker runs is tested.
    """
    packaged = packaged_reranker()
    return Reranker(
        packaged.feature, packaged.threshold, packaged.left, packaged.right, packaged.value
    )


class HashingEncoder:
    """A dense encoder that hashes lowercase words into ``dim`` buckets (L2-normalised).

    Texts sharing words get positive cosine similarity; it needs no model and no network, so
    tests of storage and retrieval logic run in milliseconds.

    Args:
        dim: Vector dimension.
    """

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim

    @property
    def name(self) -> str:
        """Identifier stored with collections built by this encoder."""
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self._dim
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dim
            sign = 1.0 if digest[4] & 1 else -1.0
            vector[bucket] += sign
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return [x / norm for x in vector]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts to be stored."""
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        return self._embed(text)


Reply = str | BaseException | Callable[[str, str], str]


class ScriptedChatModel:
    """A chat model (MemBrain's ``generate`` protocol) that answers from a script.

    Replies are queued per extraction step, recognised from the prompt: entity extraction, fact
    generation, entity disambiguation (``same``), the profile's changes (``profile``) and the
    facts a supersession knocks on (``knock_on``, :mod:`membrain.extraction.knock_on`). Each
    queued reply is a string, an exception to raise (e.g. ``TimeoutError()``), or a function of
    ``(system, prompt)``. When a queue runs out its last reply repeats. Every prompt is recorded
    in ``calls``.

    Args:
        entities: Replies to entity-extraction prompts.
        facts: Replies to fact-generation prompts.
        same: Replies to same-entity questions.
        profile: Replies to profile-update prompts (by default: no change).
        knock_on: Replies to knock-on review prompts (by default: no fact depends).
        delay: Seconds to sleep before each reply (to simulate a slow model).
    """

    def __init__(
        self,
        *,
        entities: Sequence[Reply] = ('{"entities": []}',),
        facts: Sequence[Reply] = ('{"facts": []}',),
        same: Sequence[Reply] = ('{"same": []}',),
        profile: Sequence[Reply] = ('{"profile": []}',),
        delay: float = 0.0,
        knock_on: Sequence[Reply] = ('{"dependent": []}',),
    ) -> None:
        self._queues = {
            "entities": list(entities),
            "facts": list(facts),
            "same": list(same),
            "profile": list(profile),
            "knock_on": list(knock_on),
        }
        self._delay = delay
        self._lock = threading.Lock()
        self.calls: list[tuple[str, str, str]] = []
        """(step, system, prompt) of every call, in order."""

    @staticmethod
    def step_of(prompt: str) -> str:
        """Which extraction step a prompt belongs to."""
        if '"dependent"' in prompt:
            return "knock_on"
        if '"profile"' in prompt:
            return "profile"
        if '"same"' in prompt:
            return "same"
        if '"facts"' in prompt:
            return "facts"
        return "entities"

    def generate(self, system: str, prompt: str) -> str:
        """Answer with the next scripted reply for the prompt's step."""
        if self._delay:
            time.sleep(self._delay)
        step = self.step_of(prompt)
        with self._lock:
            self.calls.append((step, system, prompt))
            queue = self._queues[step]
            reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(system, prompt)
        return reply


def file_extents(path: Path, *, piece: int = 64 << 20) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of a file's data, in pieces of at most ``piece`` bytes.

    Holes are skipped where the OS can tell (they read as zeros): Qdrant Edge preallocates
    32 MiB log and page files that are mostly holes.
    """
    if not hasattr(os, "SEEK_DATA"):
        yield 0, path.read_bytes()
        return
    with path.open("rb") as f:
        fd, pos, end = f.fileno(), 0, path.stat().st_size
        while pos < end:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # only a hole is left
                return
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            while start < pos:
                size = min(pos - start, piece)
                yield start, os.pread(fd, size, start)
                start += size


def files_holding(root: str | Path, needle: str | bytes) -> list[Path]:
    """Every file under ``root`` whose bytes hold ``needle``.

    A string is searched as UTF-8, ignoring the case of ASCII letters; bytes as given. A
    needle spanning two pieces of a file is found too.

    Example:
        >>> mem.purge([fact.id], scope=scope, messages=True); mem.close()  # doctest: +SKIP
        >>> files_holding("./.membrain", "Zorblaxian")  # doctest: +SKIP
        []
    """
    fold = isinstance(needle, str)  # ASCII case folded, as bytes.lower() does: fast
    raw = needle.encode().lower() if isinstance(needle, str) else needle
    overlap = len(raw)
    found = []
    for path in sorted(Path(root).rglob("*")):
        if not path.is_file():
            continue
        tail, tail_end = b"", -1
        for offset, chunk in file_extents(path):
            data = (tail if offset == tail_end else b"") + (chunk.lower() if fold else chunk)
            if raw in data:
                found.append(path)
                break
            tail, tail_end = data[-overlap:], offset + len(chunk)
    return found


_FST_INPUTS = (
    b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHGWUV,YKJZXQ;)(~[]$!'*@"
)


def tantivy_term(token: str) -> bytes:
    """The bytes tantivy's term dictionary (an FST) writes for the inside of ``token``.

    The FST holds no term as a contiguous string: each node with a single transition is one
    byte, ``0b11`` plus the input's rank among common bytes (fst's ``COMMON_INPUTS``), and the
    nodes of a term's tail come in reverse order. The first letters branch from shared nodes and
    the last ones may share a suffix, so the inside of a long unusual lowercase token (its
    letters from the third to the fourth-last) is what a probe looks for.

    Raises:
        ValueError: ``token`` is shorter than 8 characters or holds an uncommon byte.
    """
    inside = token[2:-3].encode()
    if len(token) < 8 or any(c not in _FST_INPUTS for c in inside):
        raise ValueError(f"probe a long token of common lowercase letters, not {token!r}")
    return bytes(0xC0 | (_FST_INPUTS.index(c) + 1) for c in reversed(inside))


def files_holding_text(root: str | Path, word: str) -> list[Path]:
    """Every file under ``root`` holding ``word``: as text, or as a term of a tantivy index.

    A plain scan misses tantivy, which keeps its terms compressed in ``.term`` files: this
    also looks for :func:`tantivy_term` of the lowercased word.

    Example:
        >>> mem.purge([fact.id], scope=scope, messages=True); mem.close()  # doctest: +SKIP
        >>> files_holding_text("./.membrain", "Zorblaxian")  # doctest: +SKIP
        []
    """
    found = set(files_holding(root, word))
    found |= set(files_holding(root, tantivy_term(word.lower())))
    return sorted(found)
