"""The retrieval paths' names, and their former letters read as deprecated aliases."""

from __future__ import annotations

import warnings

import pytest

from membrain.api.path_names import FORMER_NAMES, current_keys, current_names
from membrain.retrieval.search import MODE_PATHS, RetrievalMode


def test_every_letter_names_a_path_of_deep_mode() -> None:
    assert FORMER_NAMES == {
        "A": "bm25",
        "B": "dense",
        "B2": "hyde",
        "B3": "event",
        "C": "entity_tree",
        "D": "boolean",
    }
    assert tuple(FORMER_NAMES.values()) == MODE_PATHS[RetrievalMode.DEEP]


def test_letters_become_names_with_one_warning_at_the_caller() -> None:
    with pytest.warns(DeprecationWarning, match="'B2' is now 'hyde', 'D' is now 'boolean'") as w:
        names = current_names(["B2", "time", "D", "B2", "nonsense"], stacklevel=1)
    assert names == ("hyde", "time", "boolean", "hyde", "nonsense")
    assert len(w) == 1 and w[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="'C' is now 'entity_tree'"):
        assert current_names("C") == ("entity_tree",)  # one name, not its characters


def test_names_and_unknown_names_pass_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert current_names(["bm25", "answers", "b2", "E"]) == ("bm25", "answers", "b2", "E")
        assert current_names(["A"], warn=False) == ("bm25",)
        assert current_keys({"hyde": 0.8, "turn": 0.1}) == {"hyde": 0.8, "turn": 0.1}


def test_keys_keep_their_order_and_a_name_wins_over_its_letter() -> None:
    with pytest.warns(DeprecationWarning, match="'C' is now 'entity_tree', 'B2' is now 'hyde'"):
        keyed = current_keys({"C": 0.1, "hyde": 0.8, "B2": 0.3, "time": 2.0})
    assert list(keyed.items()) == [("entity_tree", 0.1), ("hyde", 0.8), ("time", 2.0)]
