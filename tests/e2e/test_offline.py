"""The embedded default works with no network: real model, real engine, sockets disabled."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from membrain import Memory, Scope
from membrain.embeddings import FastEmbedEncoder, packaged_model_path


def test_packaged_model_is_verified_and_semantic(socket_disabled: None) -> None:
    assert packaged_model_path().name == "model.onnx"
    encoder = FastEmbedEncoder()
    assert encoder.dim == 384
    query = encoder.embed_query("A man is eating food.")
    near, far = encoder.embed_documents(
        ["A man is eating a piece of bread.", "The girl is carrying a baby."]
    )

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(query, near) > 0.6 > cos(query, far)
    texts = ["When did they move?", "they moved to Berlin", "move Berlin"]
    batched = encoder.embed_queries(texts)
    assert batched == [encoder.embed_query(t) for t in texts]


def test_ingest_and_search_with_sockets_disabled(socket_disabled: None, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="socket"):
        socket.create_connection(("127.0.0.1", 9))
    scope = Scope(dataset="sara", task="offline")
    messages = [
        {
            "speaker": "Sara",
            "text": "I adopted a grey cat named Miso.",
            "timestamp": "2024-03-15T14:01:00Z",
        },
        {
            "speaker": "Nate",
            "text": "My bakery sells croissants on Tuesdays.",
            "timestamp": "2024-03-15T14:02:00Z",
        },
        {
            "speaker": "Sara",
            "text": "I am training for the Berlin half marathon.",
            "timestamp": "2024-03-15T14:03:00Z",
        },
    ]
    with Memory(path=tmp_path / "store") as mem:
        mem.add(messages, scope=scope)
        hits = mem.search("Who owns a grey kitten?", scope=scope, k=1)
        assert "Miso" in hits[0].fact.text
        hits = mem.search("Where are croissants sold?", scope=scope, k=1)
        assert "croissants" in hits[0].fact.text


def test_onnx_runtime_telemetry_is_off_unless_the_environment_says_otherwise() -> None:
    """ONNX Runtime's telemetry is native code (no socket guard sees it): its switch is checked."""
    code = "import os, membrain.embeddings; print(os.environ['ORT_DISABLE_TELEMETRY'])"
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}

    def seen(environment: dict[str, str]) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], env=environment, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert seen(env) == "1"
    assert seen({**env, "ORT_DISABLE_TELEMETRY": "0"}) == "0"
