"""Reranker files are checked when loaded: any damage is one typed error, never a hang."""

from __future__ import annotations

import copy
import json
import math
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import files
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membrain import InputError
from membrain.api.errors import ModelFileError
from membrain.api.path_names import FORMER_NAMES
from membrain.retrieval.rerank import FEATURES, PATH_FEATURES, Reranker

SHIPPED: dict[str, Any] = json.loads(
    (files("membrain") / "data" / "reranker.json").read_text(encoding="utf-8")
)
FIELDS = ("feature", "threshold", "left", "right", "value")
BOUND = 5.0
"""Seconds after which a load counts as looping forever (the shipped file loads in a fraction)."""


class TookTooLong(Exception):
    pass


@contextmanager
def bounded(seconds: float = BOUND) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (a load that loops forever fails the test)."""

    def stop(signum: int, frame: object) -> None:
        raise TookTooLong(f"the load ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def loads_or_refuses(data: object) -> Reranker | None:
    """The reranker, or ``None`` when refused with :class:`ModelFileError` (else the test fails)."""
    try:
        with bounded():
            model = Reranker.from_json(data)
    except ModelFileError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None
    rows = np.random.default_rng(0).normal(size=(4, len(FEATURES)))
    assert np.isfinite(model.scores(rows)).all()  # a loaded model never scores NaN or inf
    return model


def shipped() -> dict[str, Any]:
    return copy.deepcopy(SHIPPED)


def test_the_shipped_file_loads_and_its_error_is_an_input_error() -> None:
    assert loads_or_refuses(shipped()) is not None
    assert issubclass(ModelFileError, InputError)


def test_a_file_naming_paths_by_their_former_letters_scores_the_same() -> None:
    assert SHIPPED["features"] == list(FEATURES)  # the shipped file names the paths
    assert "rr_bm25" in FEATURES and "rr_entity_tree" in FEATURES
    data = shipped()
    letter = {name: f"rr_{old}" for old, name in FORMER_NAMES.items()}
    data["features"] = [letter.get(f.removeprefix("rr_"), f) for f in data["features"]]
    assert data["features"][:6] == ["rr_A", "rr_B", "rr_B2", "rr_B3", "rr_C", "rr_D"]
    former, current = Reranker.from_json(data), Reranker.from_json(shipped())
    rng = np.random.default_rng(3)
    rows = rng.random((500, len(FEATURES)))
    ranks = (500, len(PATH_FEATURES))  # reciprocal ranks, as searches give them
    rows[:, : ranks[1]] = np.where(rng.random(ranks) < 0.5, 0.0, 1.0 / rng.integers(1, 60, ranks))
    assert former.scores(rows).tobytes() == current.scores(rows).tobytes()
    assert former.to_json() == current.to_json()  # written back with the names


def test_a_node_that_is_its_own_child_is_refused_at_once() -> None:
    data = shipped()
    data["trees"]["left"][0][0] = 0  # the root splits into itself
    assert loads_or_refuses(data) is None
    data = shipped()
    data["trees"]["right"][3][2] = 1  # a child before its parent: a cycle back to node 1
    assert loads_or_refuses(data) is None


def test_nan_and_infinite_numbers_are_refused() -> None:
    for field, text in (("threshold", "NaN"), ("value", "Infinity"), ("value", "-Infinity")):
        data = shipped()
        data["trees"][field][0][0] = json.loads(text)
        assert loads_or_refuses(data) is None, (field, text)
    data = shipped()
    data["trees"]["value"] = [[1e308] * len(row) for row in data["trees"]["value"]]
    assert loads_or_refuses(data) is None  # finite leaves whose sum is not


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("trees"),
        lambda d: d["trees"].pop("left"),
        lambda d: d.update(features="rr_bm25"),
        lambda d: d.update(encoder=3),
        lambda d: d["trees"].update(feature=[]),
        lambda d: d["trees"].update(feature=[[]]),
        lambda d: d["trees"]["feature"][0].pop(),
        lambda d: d["trees"]["left"][0].__setitem__(0, 29),
        lambda d: d["trees"]["left"][0].__setitem__(0, 10**30),
        lambda d: d["trees"]["feature"][0].__setitem__(0, len(FEATURES)),
        lambda d: d["trees"]["feature"][0].__setitem__(0, -2),
        lambda d: d["trees"]["feature"][0].__setitem__(0, True),
        lambda d: d["trees"]["threshold"][0].__setitem__(0, "0.5"),
    ],
)
def test_a_malformed_file_is_a_model_file_error(damage: Any) -> None:
    data = shipped()
    damage(data)
    assert loads_or_refuses(data) is None


def test_a_shared_child_is_walked_once() -> None:
    # Node i splits into node i+1 twice: 2**39 root-to-leaf paths, 40 levels.
    nodes = 40
    feature = [[0] * (nodes - 1) + [-1]]
    children = [[min(i + 1, nodes - 1) if i < nodes - 1 else 0 for i in range(nodes)]]
    data = {
        "features": list(FEATURES),
        "trees": {
            "feature": feature,
            "threshold": [[0.0] * nodes],
            "left": children,
            "right": children,
            "value": [[0.0] * (nodes - 1) + [1.5]],
        },
    }
    model = loads_or_refuses(data)
    assert model is not None
    assert model.scores(np.zeros((1, len(FEATURES)))).tolist() == [1.5]


# -- any damage --------------------------------------------------------------------------------
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 40),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 10**400]),
    st.text(max_size=5),
    st.lists(st.integers(-1, 30), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def damaged(draw: st.DrawFn) -> object:
    """The shipped file with one to three random changes."""
    data: Any = shipped()
    trees = len(SHIPPED["trees"]["feature"])
    nodes = len(SHIPPED["trees"]["feature"][0])
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["node", "self", "row", "field", "top", "drop", "whole"]))
        held = data.get("trees") if isinstance(data, dict) else None
        if not isinstance(held, dict):
            data = draw(JSON_VALUES) if kind == "whole" or not isinstance(data, dict) else data
            continue
        field = draw(st.sampled_from(FIELDS))
        tree, node = draw(st.integers(0, trees - 1)), draw(st.integers(0, nodes - 1))
        rows = held.get(field)
        row = rows[tree] if isinstance(rows, list) and tree < len(rows) else None
        if kind == "node" and isinstance(row, list) and node < len(row):
            row[node] = draw(JSON_VALUES)
        elif kind == "self" and isinstance(row, list) and node < len(row):
            row[node] = draw(st.sampled_from([node, node - 1, 0, nodes - 1, nodes]))
        elif kind == "row" and isinstance(rows, list) and tree < len(rows):
            cut = row[:node] if isinstance(row, list) else []
            rows[tree] = draw(st.one_of(JSON_VALUES, st.just(cut)))
        elif kind == "field":
            cut = rows[:tree] if isinstance(rows, list) else []
            held[field] = draw(st.one_of(JSON_VALUES, st.just(cut)))
        elif kind == "top":
            data[draw(st.sampled_from(["features", "encoder", "trees"]))] = draw(JSON_VALUES)
        elif kind == "drop":
            target = held if draw(st.booleans()) else data
            target.pop(draw(st.sampled_from([*FIELDS, "features", "encoder", "trees"])), None)
        elif kind == "whole":
            data = draw(JSON_VALUES)
    return data


@settings(max_examples=150)
@given(data=damaged())
def test_any_damage_loads_or_is_a_model_file_error_in_bounded_time(data: object) -> None:
    loads_or_refuses(data)
