"""The worked product recipes under ``examples/`` load and run offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrain import ConfigurationError, ContextRecipe, Memory, Scope
from membrain.api.tokens import count_tokens
from membrain.testing import HashingEncoder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RECIPES = sorted(EXAMPLES.glob("*.toml"))
TURNS = [
    ("I work as a nurse at the city hospital.", "2024-01-10T10:00:00Z"),
    ("I live in Porto now, near the river.", "2024-01-11T10:00:00Z"),
    ("My sister Ana visited and we baked bread together.", "2024-02-03T10:00:00Z"),
]


def test_three_recipes_ship() -> None:
    assert [p.stem for p in RECIPES] == ["assistant", "companion", "tutor"]


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_a_recipe_runs_offline(tmp_path: Path, path: Path) -> None:
    recipe = ContextRecipe.load(path)
    assert recipe.name == path.stem and recipe.profile_ratio > 0
    scope = Scope(dataset="sara", task=recipe.name)
    turns = [{"speaker": "Sara", "text": t, "timestamp": at} for t, at in TURNS]
    with Memory(
        path=tmp_path / "m", dense=HashingEncoder(64), profile_schema=recipe.profile
    ) as mem:
        mem.add(turns, scope=scope)
        occupation = mem.profile_history("work", "occupation", scope=scope)
        context = mem.context("What did Sara bake?", scope=scope, **recipe.context_arguments())
    assert [e.text for e in occupation] == ["Sara works as a nurse at the city hospital."]
    assert context.text.startswith("## Profile\n") and "bread" in context.text
    assert context.tokens == count_tokens(context.text) <= recipe.max_tokens
    assert context.profile_tokens == int(recipe.profile_ratio * recipe.max_tokens)


def test_a_broken_recipe_says_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[context]\nname = "x"\nprofile_ratio = 2\n')
    with pytest.raises(ConfigurationError, match="not a context recipe"):
        ContextRecipe.load(bad)
    with pytest.raises(ConfigurationError, match="cannot read"):
        ContextRecipe.load(tmp_path / "missing.toml")
