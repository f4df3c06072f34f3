"""Server extensions: the entry points of group ``membrain.server`` that `membrain serve` loads."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter

from membrain import ConfigurationError, Memory
from membrain.server import run
from membrain.testing import HashingEncoder


@dataclass
class _Point:
    name: str
    target: Any

    def load(self) -> Any:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


def test_the_langgraph_store_is_an_installed_extension() -> None:
    from importlib import metadata

    names = {p.name: p.value for p in metadata.entry_points(group=run.EXTENSIONS)}
    assert names["langgraph-store"] == "langchain_membrain.langgraph.served:store_routes"


def test_extensions_that_cannot_serve_are_left_out_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    router = APIRouter()

    def refuses(memory: Memory) -> APIRouter:
        raise ConfigurationError("needs a folder")

    points = [
        _Point("missing-framework", ImportError("No module named 'langgraph'")),
        _Point("refuses", refuses),
        _Point("not-for-this-memory", lambda memory: None),
        _Point("good", lambda memory: router),
    ]
    monkeypatch.setattr(run.metadata, "entry_points", lambda group: points)
    with Memory(tmp_path, dense=HashingEncoder(32)) as memory, caplog.at_level(logging.INFO):
        assert run.extensions(memory) == [router]
    assert "'missing-framework' is off" in caplog.text and "'refuses' is off" in caplog.text
    assert "'good' is on" in caplog.text


def test_the_store_extension_creates_its_file_on_first_use_only(tmp_path: Path) -> None:
    from langchain_membrain.langgraph.served import store_routes
    from langchain_membrain.langgraph.sidecar import SIDECAR_NAME

    with Memory(tmp_path, dense=HashingEncoder(32)) as memory:
        router = store_routes(memory)
        assert router is not None
        assert sorted(r.path for r in router.routes) == ["/api/store/batch", "/api/store/sweep"]
        assert not (tmp_path / SIDECAR_NAME).exists()
