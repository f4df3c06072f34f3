"""The pytest plugin the upstream runner loads into a framework's own test suite.

It replaces the framework's classes with MemBrain's (:mod:`substitutes`) before the tests are
imported, overrides the suite's fixtures that reach another backend (a PostgreSQL
connection), deselects the tests of ``MEMBRAIN_UPSTREAM_DESELECT``, closes what each test built,
and writes each test's outcome, and whether it built a MemBrain object, to
``MEMBRAIN_UPSTREAM_REPORT`` (JSON).
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import substitutes

_outcomes: dict[str, dict[str, Any]] = {}
_deselected: list[str] = []


def _postgres_ttl(module: ModuleType) -> dict[str, Any]:
    minutes = module.TTL_MINUTES
    return {"default_ttl": minutes, "refresh_on_read": True, "sweep_interval_minutes": minutes / 2}


def _postgres_index(embed: Any, fields: list[str] | None) -> dict[str, Any]:
    return {"dims": embed.dims, "embed": embed, "fields": fields}


def _postgres_sync(module: ModuleType) -> dict[str, Any]:
    """``tests/test_store.py``: its stores are made in a new database; ours in a new memory."""

    @pytest.fixture(name="store")
    def store() -> Iterator[Any]:
        with module.PostgresStore.from_conn_string("", ttl=_postgres_ttl(module)) as made:
            yield made

    @contextmanager
    def create(
        vector_type: str,
        distance_type: str,
        fake_embeddings: Any,
        text_fields: list[str] | None = None,
        enable_ttl: bool = True,
    ) -> Iterator[Any]:
        ttl = {"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None
        index = _postgres_index(fake_embeddings, text_fields)
        with module.PostgresStore.from_conn_string("", index=index, ttl=ttl) as made:
            yield made

    return {"store": store, "_create_vector_store": create}


def _postgres_async(module: ModuleType) -> dict[str, Any]:
    """``tests/test_async_store.py``: as :func:`_postgres_sync`, async."""

    @pytest.fixture(name="store")
    async def store() -> AsyncIterator[Any]:
        ttl = _postgres_ttl(module)
        async with module.AsyncPostgresStore.from_conn_string("", ttl=ttl) as made:
            yield made

    @asynccontextmanager
    async def create(
        vector_type: str,
        distance_type: str,
        fake_embeddings: Any,
        text_fields: list[str] | None = None,
    ) -> AsyncIterator[Any]:
        index = _postgres_index(fake_embeddings, text_fields)
        async with module.AsyncPostgresStore.from_conn_string("", index=index) as made:
            yield made

    return {"store": store, "_create_vector_store": create}


CONFTEST_OVERRIDES: dict[str, dict[str, dict[str, Any]]] = {
    "langgraph-checkpoint-postgres": {
        "tests.conftest": {
            "conn": pytest.fixture(name="conn")(lambda: None),
            "clear_test_db": pytest.fixture(autouse=True, name="clear_test_db")(lambda: None),
        },
    },
}
"""Per suite: conftest module, and its fixtures to replace (they reach a database)."""

MODULE_OVERRIDES: dict[str, dict[str, Callable[[ModuleType], dict[str, Any]]]] = {
    "langgraph-checkpoint-postgres": {
        "tests/test_store.py": _postgres_sync,
        "tests/test_async_store.py": _postgres_async,
    },
}
"""Per suite: test module, and what replaces its store fixture and helpers (given the module)."""


def _suite() -> str:
    return os.environ.get("MEMBRAIN_UPSTREAM_SUITE", "")


def pytest_configure(config: pytest.Config) -> None:
    for target, make in substitutes.SUBSTITUTES.get(_suite(), {}).items():
        module_name, attribute = target.split(":")
        module = importlib.import_module(module_name)
        if not hasattr(module, attribute):
            raise pytest.UsageError(f"{target} is gone: the substitution list is out of date")
        setattr(module, attribute, make())


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    if not isinstance(plugin, ModuleType):
        return
    for name, fixture in CONFTEST_OVERRIDES.get(_suite(), {}).get(plugin.__name__, {}).items():
        setattr(plugin, name, fixture)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> Generator[None, pytest.Module | None, pytest.Module | None]:
    collector = yield
    overrides = MODULE_OVERRIDES.get(_suite(), {})
    relative = module_path.relative_to(parent.config.rootpath).as_posix()
    if relative in overrides and isinstance(collector, pytest.Module):
        module = collector.obj  # imported here, before its fixtures are read
        for name, value in overrides[relative](module).items():
            setattr(module, name, value)
    return collector


def _matches(nodeid: str, entry: str) -> bool:
    """``entry`` names this test, or every parametrization of it."""
    return nodeid == entry or nodeid.split("[", 1)[0] == entry


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    entries = json.loads(os.environ.get("MEMBRAIN_UPSTREAM_DESELECT", "{}"))
    keep, drop = [], []
    for item in items:
        (drop if any(_matches(item.nodeid, e) for e in entries) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        _deselected.extend(item.nodeid for item in drop)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    before = substitutes.BUILT[0]
    _outcomes[item.nodeid] = {"outcome": "passed", "exercised": False, "message": ""}
    try:
        return (yield)
    finally:
        _outcomes[item.nodeid]["exercised"] = substitutes.BUILT[0] != before


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    prepare = substitutes.PREPARE.get(_suite())
    if prepare is not None:
        before = substitutes.BUILT[0]
        prepare()
        substitutes.BUILT[0] = before  # made for the test, not by it


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None]:
    buster = getattr(item, "funcargs", {}).get("blockbuster")
    if buster is not None:  # langchain-core's: seeding a history is the test's setup
        substitutes.QUIET.append(lambda: _deactivated(buster))
    try:
        return (yield)
    finally:
        substitutes.QUIET.clear()


@contextmanager
def _deactivated(buster: Any) -> Iterator[None]:
    buster.deactivate()
    try:
        yield
    finally:
        buster.activate()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    try:
        return (yield)
    finally:
        substitutes.close_built()


def _message(report: pytest.TestReport) -> str:
    """The last line of the failure: the exception and its message."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0][:300] if crash.message else ""
    return str(report.longrepr).strip().splitlines()[-1][:300] if report.longrepr else ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _outcomes.setdefault(
        report.nodeid, {"outcome": "passed", "exercised": False, "message": ""}
    )
    if entry["outcome"] == "failed":
        return
    if hasattr(report, "wasxfail"):
        entry["outcome"] = "xfailed" if report.skipped else "xpassed"
    elif report.failed:
        entry["outcome"] = "failed"
        entry["message"] = f"{report.when}: {_message(report)}"
    elif report.skipped:
        entry["outcome"] = "skipped"
        entry["message"] = _message(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    substitutes.remove_folders()
    path = os.environ.get("MEMBRAIN_UPSTREAM_REPORT")
    if path:
        Path(path).write_text(json.dumps({"tests": _outcomes, "deselected": _deselected}))
