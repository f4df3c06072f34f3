"""Distinct ids are distinct tenants: one injective encoding of scope parts, and no folding."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membrain import ConfigurationError, Memory, Message, Scope, ScopeError
from membrain.api.scope import STORED, ScopePart, compose_part, dataset_part, scope_part
from membrain.binding import ScopeBinding
from membrain.testing import HashingEncoder

OLD_PART = "auth0_64b7f1-h0965fcf43ca6e13d"
"""What ``"auth0|64b7f1"`` was, and still is, stored as."""


def _scope(value: str) -> Scope | None:
    try:
        return Scope(dataset=value, task=value, session=value)
    except ScopeError:
        return None  # refused, never merged with another value


# -- the collisions ---------------------------------------------------------------------------
def test_a_literal_that_looks_like_an_encoding_is_another_tenant() -> None:
    assert Scope(dataset="auth0|64b7f1").dataset == OLD_PART
    literal = Scope(dataset=OLD_PART)
    assert literal.dataset != OLD_PART
    assert literal != Scope(dataset="auth0|64b7f1")
    assert dataset_part(OLD_PART) != dataset_part("auth0|64b7f1")


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("\u212aevin", "Kevin"),  # KELVIN SIGN: NFC maps it to "K"
        (unicodedata.normalize("NFD", "José"), "José"),
        ("\u212b", "\u00c5"),  # ANGSTROM SIGN and A WITH RING ABOVE
        ("\uf900", "\u8c48"),  # a CJK compatibility ideograph and its unified form
    ],
)
def test_no_unicode_folding_merges_two_ids(one: str, other: str) -> None:
    assert one != other
    assert Scope(dataset=one).dataset != Scope(dataset=other).dataset
    assert Scope(dataset=one, task=one).key != Scope(dataset=other, task=other).key


def test_template_fields_holding_the_separator_stay_apart() -> None:
    binding = ScopeBinding(dataset="{org}:{user_id}", session=None)
    first = binding.resolve({"org": "a:b", "user_id": "c"})
    second = binding.resolve({"org": "a", "user_id": "b:c"})
    assert first.dataset != second.dataset
    assert binding.resolve({"org": "acme", "user_id": "sara"}).dataset == "acme:sara"  # kept


@pytest.mark.parametrize("template", ["{org}{user_id}", "{org}-{user_id}", "{org}_x{user_id}"])
def test_templates_whose_fields_cannot_be_told_apart_are_refused(template: str) -> None:
    with pytest.raises(ConfigurationError, match="separate"):
        ScopeBinding(dataset=template)


@pytest.mark.parametrize("template", ["{user_id:.3}", "{user_id!r}"])
def test_templates_that_change_their_values_are_refused(template: str) -> None:
    with pytest.raises(ConfigurationError, match="format spec"):
        ScopeBinding(dataset=template)


# -- read back: a stored part names its own tenant --------------------------------------------
def test_a_scope_read_back_names_the_same_tenant() -> None:
    scope = Scope(dataset="auth0|64b7f1", task="a/b", session="slack/C1")
    assert isinstance(scope.dataset, ScopePart)
    assert Scope(dataset=scope.dataset, task=scope.task, session=scope.session) == scope
    assert Scope.stored(scope.dataset, scope.task, scope.session) == scope
    assert Scope.model_validate(scope.model_dump(mode="json"), context=STORED) == scope
    assert Scope(dataset=scope_part("auth0|64b7f1")) == Scope(dataset="auth0|64b7f1")
    with pytest.raises(ScopeError):
        Scope.stored("auth0|64b7f1")  # not a stored part


def test_records_written_under_the_old_part_are_read_by_the_raw_id(tmp_path: Path) -> None:
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        old = Scope.stored(OLD_PART, "assistant")  # as the previous release stored the id
        message = Message(speaker="Sara", text="I adopted a cat.", timestamp="2024-03-15T14:00:00Z")
        mem.add([message], scope=old, extract=False)
    with Memory(tmp_path, dense=HashingEncoder(64)) as mem:
        now = Scope(dataset="auth0|64b7f1", task="assistant")
        assert [m.message.text for m in mem.messages(scope=now)] == ["I adopted a cat."]
        assert mem.scopes() == [now]
        assert mem.messages(scope=Scope(dataset=OLD_PART, task="assistant")) == []


# -- the property: distinct inputs, distinct parts ---------------------------------------------
TEXT = st.text(max_size=140) | st.text(alphabet="ab:|_-h0 .é\u0301\u212a", max_size=140)


@settings(max_examples=300)
@given(st.lists(TEXT, min_size=2, max_size=6, unique=True))
def test_distinct_values_are_distinct_parts(values: list[str]) -> None:
    scopes = {value: _scope(value) for value in values}
    accepted = {value: scope for value, scope in scopes.items() if scope is not None}
    parts = {scope.dataset for scope in accepted.values()}
    assert len(parts) == len(accepted)
    assert all(len(p) <= 128 for p in parts)
    assert len({scope_part(v) for v in values}) == len(values)
    for value, scope in accepted.items():  # every field of a scope: the same encoding
        assert scope.dataset == scope.task == scope.session == scope_part(value)


@settings(max_examples=300)
@given(st.lists(st.tuples(TEXT, TEXT), min_size=2, max_size=6, unique=True))
def test_distinct_template_values_are_distinct_parts(pairs: list[tuple[str, str]]) -> None:
    for texts in (["", ":", ""], ["org ", "@", "/x"], ["", " : ", ""]):
        parts = {compose_part(texts, list(pair)) for pair in pairs}
        assert len(parts) == len(pairs)


@settings(max_examples=300)
@given(
    st.lists(st.lists(TEXT, min_size=1, max_size=4).map(tuple), min_size=2, max_size=6, unique=True)
)
def test_distinct_label_lists_are_distinct_joined_parts(labels: list[tuple[str, ...]]) -> None:
    joined = {compose_part(["", *[":"] * (len(ls) - 1), ""], ls, separators=":") for ls in labels}
    assert len(joined) == len(labels)
