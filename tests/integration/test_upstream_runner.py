"""The runner of the frameworks' published tests (tests/upstream): its data and its substitutes."""

from __future__ import annotations

import io
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.upstream import runner, substitutes

ROOT = Path(__file__).resolve().parents[2]


def test_every_deselection_names_a_test_of_a_suite_with_a_reason() -> None:
    entries = runner.deselections()
    assert entries  # parsed, and checked: a suite the runner has, a node id, a one-line reason
    for suite, tests in entries.items():
        assert suite in {s.name for s in runner.SUITES}
        assert all("::" in node and reason.strip() for node, reason in tests.items())


@pytest.mark.parametrize(
    "text",
    [
        '[langchain-core]\n"tests/x.py::test_a" = ""\n',
        '[langchain-core]\n"tests/x.py::test_a" = "two\\nlines"\n',
        '[langchain-core]\n"tests/x.py" = "a file, not a test"\n',
        '[no-such-suite]\n"tests/x.py::test_a" = "reason"\n',
    ],
)
def test_a_deselection_without_reason_or_suite_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "deselected.toml"
    path.write_text(text)
    with pytest.raises(ValueError):
        runner.deselections(path)


def test_the_docs_page_lists_every_deselection() -> None:
    page = runner.DOCS_PAGE.read_text()
    assert runner.docs_with_table(page) == page, "run: python -m tests.upstream --write-docs"
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "guides/conformance.md" in nav


def test_the_conformance_extra_pins_the_versions_the_runner_downloads() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["conformance"]
    for suite in runner.SUITES:
        if suite.version is not None:
            assert f"{suite.name}=={suite.version}" in extra


def test_only_the_tests_folder_is_extracted(tmp_path: Path) -> None:
    archive = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("pkg-1.0/tests/test_a.py", "pkg-1.0/src/pkg.py", "pkg-1.0/setup.py"):
            info = tarfile.TarInfo(name)
            info.size = 4
            tar.addfile(info, io.BytesIO(b"x=1\n"))
    out = runner.extract_tests(archive, tmp_path / "out")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.py")) == ["tests/test_a.py"]


def test_a_counted_failure_fails_the_run_and_a_missing_checkout_does_not() -> None:
    passed = {"outcome": "passed", "exercised": True, "message": ""}
    helper_failed = {"outcome": "failed", "exercised": False, "message": "x"}
    ok = runner.Result("langgraph-checkpoint", "embedded", tests={"a": passed, "b": helper_failed})
    assert ok.ok and ok.counted("passed") == ["a"] and ok.not_exercising == ["b"]
    failed = {"outcome": "failed", "exercised": True, "message": "AssertionError"}
    bad = runner.Result("langgraph-checkpoint", "served", tests={"a": passed, "c": failed})
    assert not bad.ok and "c: AssertionError" in runner.failures([bad])
    llama = runner.Result("llama-index-core", "embedded", not_run="not run: no local checkout")
    missing = runner.Result("langchain-core", "embedded", not_run="not run: x not installed")
    assert llama.ok and not missing.ok and not runner.Result("langchain-core", "served").ok
    summary = runner.table([ok, bad, llama])
    assert "not run: no local checkout" in summary and "served" in summary


@pytest.fixture
def variant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("MEMBRAIN_UPSTREAM_VARIANT", request.param)
    yield request.param
    substitutes.remove_folders()


@pytest.mark.parametrize("variant", substitutes.VARIANTS, indirect=True)
def test_the_store_substitute_is_a_working_membrain_store(variant: str) -> None:
    from langchain_membrain.langgraph import MembrainStore, RemoteMembrainStore

    before = substitutes.BUILT[0]
    store = substitutes.store_class("InMemoryStore")()
    assert substitutes.BUILT[0] == before + 1
    assert isinstance(store, MembrainStore if variant == "embedded" else RemoteMembrainStore)
    store.put(("sara", "prefs"), "pet", {"text": "I adopted a cat named Miso."})
    item = store.get(("sara", "prefs"), "pet")
    assert item is not None and item.value == {"text": "I adopted a cat named Miso."}
    assert [i.key for i in store.search(("sara",), query="cat named Miso")] == ["pet"]
    substitutes.close_built()


def test_a_sql_backend_index_is_read_as_langgraph_s() -> None:
    embed = object()
    sqlite = {"dims": 3, "embed": embed, "text_fields": ["text"], "distance_type": "cosine"}
    assert substitutes._backend_index(sqlite) == {"dims": 3, "embed": embed, "fields": ["text"]}
    postgres = {"dims": 3, "embed": embed, "ann_index_config": {}, "fields": None}
    assert substitutes._backend_index(postgres) == {"dims": 3, "embed": embed, "fields": None}


@pytest.mark.parametrize("variant", ["embedded"], indirect=True)
def test_the_history_substitute_holds_its_seed_and_compares_by_messages(variant: str) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    seed = [HumanMessage("I adopted a cat named Miso."), AIMessage("Lovely!")]
    first, second = substitutes.build_history(seed), substitutes.build_history(seed)
    assert [(m.type, m.content) for m in first.messages] == [(m.type, m.content) for m in seed]
    assert first == second and first != substitutes.build_history(seed[:1])
    substitutes.close_built()


def test_the_plugin_is_importable_as_the_runner_loads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(runner.HERE))
    monkeypatch.setitem(sys.modules, "substitutes", substitutes)
    import membrain_upstream_plugin as plugin

    assert plugin._matches("tests/t.py::test_a[x]", "tests/t.py::test_a")
    assert not plugin._matches("tests/t.py::test_ab", "tests/t.py::test_a")
    for targets in plugin.MODULE_OVERRIDES.values():
        assert all(path.startswith("tests/") for path in targets)
