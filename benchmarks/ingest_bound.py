"""Offline ingest against the encoder bound: how close ``Memory.add`` runs to its embedding model.

Usage (from the repository root)::

    python -m benchmarks.ingest_bound --data ../shared/data/locomo/locomo10_dev.json \
        [--conversations 0] [--repeats 3] [--hashing-encoder] [--json OUT]

What it does, per conversation and repeat (repeats alternate, so a busy spell of this shared
machine weighs on both measurements alike):

1. Adds the conversation's turns, in one ``Memory.add`` call, to a fresh temporary embedded store
   with the default offline extractor and encoders. The dense encoder is wrapped to record every
   text it is asked to embed as a document, and the time spent inside it.
2. Embeds exactly those texts again with the same encoder, alone, in one call (sorted by length
   into batches, as the encoder does): the **encoder bound** is the ingest's turns divided by
   that time, the rate ingest would reach if embedding were all it did.

Reported: turns, dense texts embedded per turn (and how many were distinct), ingest turns/s,
the encoder's texts/s alone, the bound (turns/s), the **ratio** ingest / bound, and the share of
the ingest's wall time spent inside the encoder (the rest is extraction, entity resolution, the
sparse and lexical indexes, Qdrant writes and the audit). Medians over the repeats.

``--hashing-encoder`` swaps the real model for :class:`membrain.testing.HashingEncoder` (smoke
runs only: its figures say nothing about real ingest).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.locomo_eval import format_table
from benchmarks.wrapped import WrappedEncoder
from membrain import Memory, Scope
from membrain.embeddings import DenseEncoder
from membrain.files.loaders import Conversation, load_conversations
from membrain.testing import HashingEncoder

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo"
DEFAULT_DATA = DEFAULT_DATA / "locomo10_dev.json"


class RecordingEncoder(WrappedEncoder):
    """A dense encoder that records the documents it embeds and the time it takes."""

    def __init__(self, inner: DenseEncoder) -> None:
        super().__init__(inner)
        self.texts: list[str] = []
        self.seconds = 0.0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed, recording the texts and the time."""
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts.extend(texts)


def ingest_once(conversation: Conversation, encoder: DenseEncoder) -> dict[str, float]:
    """One timed ingest of ``conversation`` and the encoder-alone pass over its texts."""
    recording = RecordingEncoder(encoder)
    scope = Scope(dataset="ingest", task="bench")
    with (
        tempfile.TemporaryDirectory(prefix="ingest-bound-") as folder,
        Memory(path=Path(folder) / "store", dense=recording) as mem,
    ):
        started = time.perf_counter()
        mem.add(conversation.messages, scope=scope)
        ingest_s = time.perf_counter() - started
    started = time.perf_counter()
    encoder.embed_documents(recording.texts)
    alone_s = time.perf_counter() - started
    turns = len(conversation.messages)
    return {
        "turns": turns,
        "texts": len(recording.texts),
        "distinct_texts": len(set(recording.texts)),
        "ingest_s": ingest_s,
        "encoder_in_ingest_s": recording.seconds,
        "encoder_alone_s": alone_s,
        "ingest_turns_per_s": turns / ingest_s,
        "encoder_texts_per_s": len(recording.texts) / alone_s if alone_s else float("nan"),
        "bound_turns_per_s": turns / alone_s if alone_s else float("nan"),
        "ratio": alone_s / ingest_s,
        "encoder_share": recording.seconds / ingest_s,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure, under stable keys."""
    conversations = load_conversations(args.data)
    chosen = [conversations[i] for i in args.conversations]
    encoder: DenseEncoder
    if args.hashing_encoder:
        encoder = HashingEncoder(dim=64)
    else:
        from membrain.embeddings import default_dense_encoder

        encoder = default_dense_encoder()
    encoder.embed_documents(["warm up"])
    runs: dict[str, list[dict[str, float]]] = {str(c.name): [] for c in chosen}
    for _ in range(args.repeats):
        for conversation in chosen:
            runs[str(conversation.name)].append(ingest_once(conversation, encoder))
    medians = {
        name: {key: statistics.median(r[key] for r in found) for key in found[0]}
        for name, found in runs.items()
    }
    return {
        "encoder": encoder.name,
        "repeats": args.repeats,
        "conversations": medians,
        "runs": runs,
    }


def format_report(report: dict[str, Any]) -> str:
    """The printed table of a :func:`run` report."""
    header = [
        "conversation",
        "turns",
        "texts/turn",
        "distinct",
        "ingest turns/s",
        "encoder texts/s",
        "bound turns/s",
        "ingest / bound",
        "in encoder",
    ]
    rows = [
        [
            name,
            f"{m['turns']:.0f}",
            f"{m['texts'] / m['turns']:.2f}",
            f"{m['distinct_texts'] / m['texts']:.0%}",
            f"{m['ingest_turns_per_s']:.1f}",
            f"{m['encoder_texts_per_s']:.0f}",
            f"{m['bound_turns_per_s']:.1f}",
            f"{m['ratio']:.2f}x",
            f"{m['encoder_share']:.0%}",
        ]
        for name, m in report["conversations"].items()
    ]
    return "\n".join(
        [
            f"Offline ingest against the encoder bound ({report['encoder']}), median of "
            f"{report['repeats']} alternated repeats",
            format_table(header, rows),
        ]
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ingest_bound",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON file")
    parser.add_argument("--conversations", nargs="+", type=int, default=[0], metavar="I")
    parser.add_argument("--repeats", type=int, default=3, metavar="R")
    parser.add_argument("--hashing-encoder", action="store_true", help="smoke runs only")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write ``--json``; return every figure."""
    args = parse_args(argv)
    report = run(args)
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
