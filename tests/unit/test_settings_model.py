"""The extraction model named in the settings (``MEMBRAIN_LLM`` / ``--llm``), and the settings
a served memory is opened with."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from membrain import ConfigurationError, Memory, Scope
from membrain.api.config import MembrainSettings, settings_for
from membrain.extraction.llm import load_model
from membrain.testing import HashingEncoder, ScriptedChatModel

SCOPE = Scope(dataset="sara", task="assistant")
MODELS = """
from membrain.testing import ScriptedChatModel

ready = ScriptedChatModel(facts=['{"facts": []}'])


def extraction_model():
    return ScriptedChatModel(
        entities=['{"entities": ["Sara", "Miso"]}'],
        facts=[%r],
    )


def broken():
    raise RuntimeError("no API key in the environment")


class Holder:
    model = ready
"""


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    said = {"text": "[Sara] adopted a cat named [Miso].", "fact_ts": "2024-03-15T14:01:00Z"}
    fact = json.dumps({"facts": [said]})
    name = f"app_models_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODELS % fact))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_model_object_a_factory_and_a_class_are_loaded(models: str) -> None:
    ready = load_model(f"{models}:ready")
    assert ready is sys.modules[models].ready  # an object is used as it is
    made = load_model(f"{models}:extraction_model")
    assert isinstance(made, ScriptedChatModel) and made is not load_model(
        f"{models}:extraction_model"
    )  # a function is called, each time
    assert isinstance(load_model("membrain.testing:ScriptedChatModel"), ScriptedChatModel)
    assert load_model(f"{models}:Holder.model") is ready  # dotted attributes


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_colon_here", "module:attribute"),
        (":ready", "module:attribute"),
        ("a_module_that_does_not_exist_x:model", "cannot import"),
        ("{models}:missing", "has no"),
        ("{models}:broken", "no API key"),
    ],
)
def test_a_bad_model_name_is_a_configuration_error(models: str, spec: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        load_model(spec.format(models=models))


def test_the_settings_model_extracts(models: str, tmp_path: Path) -> None:
    settings = MembrainSettings(path=tmp_path / "store", llm=f"{models}:extraction_model")
    with Memory.from_settings(settings, dense=HashingEncoder(64)) as mem:
        result = mem.add(
            [{"speaker": "Sara", "text": "I got a cat.", "timestamp": "2024-03-15T14:01:00Z"}],
            scope=SCOPE,
        )
        assert result.llm_calls >= 2
        [fact] = mem.facts(scope=SCOPE)
    assert fact.text == "[Sara] adopted a cat named [Miso]."


def test_the_settings_name_the_store_and_overrides_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMBRAIN_QDRANT_URL", "http://qdrant.example:6333")
    monkeypatch.setenv("MEMBRAIN_BATCH_SIZE", "7")
    from_env = settings_for()
    assert from_env.qdrant_url == "http://qdrant.example:6333" and from_env.batch_size == 7
    local = settings_for(path=tmp_path)
    assert (local.path, local.qdrant_url, local.batch_size) == (tmp_path, None, 7)
    modelled = settings_for(path=tmp_path, llm="app:model")
    assert (modelled.path, modelled.llm, modelled.batch_size) == (tmp_path, "app:model", 7)
    other = settings_for(from_env, qdrant_url="http://other:6333")
    assert other.qdrant_url == "http://other:6333" and other.batch_size == 7
    with pytest.raises(ConfigurationError, match="not both"):
        settings_for(path=tmp_path, qdrant_url="http://other:6333")
    monkeypatch.setenv("MEMBRAIN_BATCH_SIZE", "zero")
    with pytest.raises(ConfigurationError, match="MEMBRAIN_"):
        settings_for()


def test_serve_opens_the_memory_with_the_settings(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from membrain.server import serve

    settings = MembrainSettings(llm="a_module_that_does_not_exist_x:model")
    with pytest.raises(ConfigurationError, match="cannot import"):
        serve(path=tmp_path / "store", port=0, settings=settings)
    # nothing was left holding the store
    with Memory(tmp_path / "store", dense=HashingEncoder(64)) as mem:
        assert mem.facts(scope=SCOPE) == []
