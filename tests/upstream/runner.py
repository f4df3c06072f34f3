"""Run the frameworks' own published tests against MemBrain's adapters.

For each suite the runner takes the framework's source distribution from PyPI (``pip download
--no-binary :all:``, cached in ``MEMBRAIN_UPSTREAM_CACHE``, default
``~/.cache/membrain-upstream``), extracts its ``tests/`` folder into a temporary folder outside
the repository and runs the suite's test files with pytest and
:mod:`membrain_upstream_plugin`, which puts MemBrain's classes where the tests construct the
framework's (:mod:`substitutes`). ``deselected.toml`` lists the tests left out, each with its
reason. A test counts when it built a MemBrain object; one that did not is reported as not
exercising MemBrain (it still runs).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DESELECTED = HERE / "deselected.toml"
VARIANTS = ("embedded", "served")
LLAMA_INDEX_ENV = "MEMBRAIN_UPSTREAM_LLAMA_INDEX"


@dataclass(frozen=True)
class Suite:
    """A framework's test files run against MemBrain.

    Args:
        name: The distribution whose tests these are (the suite's name).
        files: The test files, relative to the distribution's root.
        version: The version to download; ``None``: the one installed.
        modules: Modules the tests import that only the ``conformance`` extra installs.
        local_env: Instead of downloading: the environment variable naming a local checkout.
    """

    name: str
    files: tuple[str, ...]
    version: str | None = None
    modules: tuple[str, ...] = ()
    local_env: str | None = None
    ini: dict[str, str] = field(default_factory=dict)


SUITES = (
    Suite("langgraph-checkpoint", ("tests/test_store.py",), modules=("pytest_mock",)),
    Suite(
        "langgraph-checkpoint-sqlite",
        ("tests/test_store.py", "tests/test_async_store.py"),
        version="3.1.2",
        modules=("langgraph.store.sqlite", "pytest_mock"),
    ),
    Suite(
        "langgraph-checkpoint-postgres",
        ("tests/test_store.py", "tests/test_async_store.py"),
        version="3.2.0",
        modules=("langgraph.store.postgres", "psycopg", "pytest_mock"),
    ),
    Suite(
        "langchain-core",
        (
            "tests/unit_tests/chat_history/test_chat_history.py",
            "tests/unit_tests/runnables/test_history.py",
        ),
        modules=("blockbuster", "pytest_mock"),
        ini={"filterwarnings": "ignore::langchain_core._api.beta_decorator.LangChainBetaWarning"},
    ),
    Suite(
        "llama-index-core",
        ("tests/memory", "tests/indices/vector_store"),
        local_env=LLAMA_INDEX_ENV,
    ),
)


@dataclass
class Result:
    """One suite in one variant: its tests' outcomes, or why it did not run."""

    suite: str
    variant: str
    tests: dict[str, dict[str, object]] = field(default_factory=dict)
    deselected: list[str] = field(default_factory=list)
    not_run: str | None = None
    log: str = ""
    seconds: float = 0.0

    def counted(self, outcome: str) -> list[str]:
        """The tests that built a MemBrain object and ended with ``outcome``."""
        return sorted(
            n for n, t in self.tests.items() if t["exercised"] and t["outcome"] == outcome
        )

    @property
    def not_exercising(self) -> list[str]:
        return sorted(n for n, t in self.tests.items() if not t["exercised"])

    @property
    def ok(self) -> bool:
        """No counted test failed, and the suite ran (or cannot run here: no local checkout)."""
        if self.not_run is not None:
            return self.not_run.startswith("not run: no local")
        return not self.counted("failed") and bool(self.tests)


def deselections(path: Path = DESELECTED) -> dict[str, dict[str, str]]:
    """``deselected.toml``: per suite, test node id (or its name without parameters) → reason.

    Raises:
        ValueError: an entry without a one-line reason, or of a suite the runner does not have.
    """
    data = tomllib.loads(path.read_text())
    names = {s.name for s in SUITES}
    for suite, entries in data.items():
        if suite not in names:
            raise ValueError(f"{path.name}: no suite {suite!r}")
        for node, reason in entries.items():
            if not isinstance(reason, str) or not reason.strip() or "\n" in reason:
                raise ValueError(f"{path.name}: {suite} {node}: the reason must be one line")
            if "::" not in node:
                raise ValueError(f"{path.name}: {suite} {node!r} is not a test node id")
    return data


def deselected_table(path: Path = DESELECTED) -> str:
    """The deselections as a Markdown table (the conformance page holds it)."""
    rows = ["| Suite | Test | Why it is left out |", "| --- | --- | --- |"]
    for suite, entries in deselections(path).items():
        for node, reason in entries.items():
            rows.append(f"| {suite} | `{node}` | {reason} |")
    return "\n".join(rows)


DOCS_PAGE = ROOT / "docs" / "guides" / "conformance.md"
_TABLE_START, _TABLE_END = "<!-- membrain:deselected -->", "<!-- /membrain:deselected -->"


def docs_with_table(page: str, path: Path = DESELECTED) -> str:
    """``page`` with the deselection table between its markers replaced by the file's."""
    head, rest = page.split(_TABLE_START, 1)
    _, tail = rest.split(_TABLE_END, 1)
    return f"{head}{_TABLE_START}\n{deselected_table(path)}\n{_TABLE_END}{tail}"


def cache_dir() -> Path:
    return Path(
        os.environ.get("MEMBRAIN_UPSTREAM_CACHE", Path.home() / ".cache" / "membrain-upstream")
    )


def version_of(suite: Suite) -> str:
    """The version to test: pinned, or the one installed."""
    return suite.version or importlib.metadata.version(suite.name)


def sdist(name: str, version: str) -> Path:
    """The source distribution of ``name==version``, downloaded into the cache once."""
    cache = cache_dir()
    stem = f"{name.replace('-', '_')}-{version}"
    found = sorted(cache.glob(f"{stem}.tar.gz")) if cache.exists() else []
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    command += ["--no-binary", ":all:", f"{name}=={version}", "--dest", str(cache)]
    subprocess.run(command, check=True)
    found = sorted(cache.glob(f"{stem}.tar.gz"))
    if not found:
        raise FileNotFoundError(f"pip download gave no {stem}.tar.gz in {cache}")
    return found[0]


def extract_tests(archive: Path, into: Path) -> Path:
    """Extract only the ``tests/`` folder of ``archive`` into ``into``; ``into``."""
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) > 2 and parts[1] == "tests" and (member.isfile() or member.isdir()):
                member.name = str(Path(*parts[1:]))
                members.append(member)
        tar.extractall(into, members=members, filter="data")
    return into


def _missing(suite: Suite) -> list[str]:
    missing = []
    for module in suite.modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(module)
    return missing


def _pytest_ini(suite: Suite) -> str:
    lines = ["[pytest]", "asyncio_mode = auto", "asyncio_default_fixture_loop_scope = function"]
    lines += ["markers =", "    requires: needs a library", "    compile: placeholder"]
    lines += [f"{key} = {value}" for key, value in suite.ini.items()]
    return "\n".join(lines) + "\n"


def run_suite(suite: Suite, variant: str, extra: Sequence[str] = ()) -> Result:
    """Run ``suite`` with MemBrain's classes of ``variant``; its outcomes."""
    result = Result(suite.name, variant)
    missing = _missing(suite)
    if missing:
        result.not_run = (
            f"not run: {', '.join(missing)} not installed (pip install -e '.[conformance]')"
        )
        return result
    with tempfile.TemporaryDirectory(prefix=f"membrain-upstream-{suite.name}-") as tmp:
        work = Path(tmp)
        if suite.local_env:
            local = os.environ.get(suite.local_env)
            if not local:
                result.not_run = (
                    f"not run: no local checkout ({suite.local_env} is not set; its published "
                    "distributions hold no tests)"
                )
                return result
            source = Path(local)
            files = [f for f in suite.files if (source / f).exists()]
        else:
            source = extract_tests(sdist(suite.name, version_of(suite)), work / "src")
            files = list(suite.files)
        ini = work / "pytest.ini"  # beside, not in, the tests (a local checkout stays as is)
        ini.write_text(_pytest_ini(suite))
        report = work / "report.json"
        deselect = deselections().get(suite.name, {})
        env = dict(os.environ)
        paths = [str(HERE), str(ROOT), str(ROOT / "core"), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        env.update(
            MEMBRAIN_UPSTREAM_SUITE=suite.name,
            MEMBRAIN_UPSTREAM_VARIANT=variant,
            MEMBRAIN_UPSTREAM_REPORT=str(report),
            MEMBRAIN_UPSTREAM_DESELECT=json.dumps(deselect),
        )
        command = [sys.executable, "-m", "pytest", "-p", "membrain_upstream_plugin"]
        command += ["-p", "no:cacheprovider", "-q", "-rN", "--tb=line", "--no-header"]
        command += ["--rootdir", str(source), "-c", str(ini)]
        command += [*files, *extra]
        started = time.monotonic()
        run = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True)
        result.seconds = time.monotonic() - started
        result.log = run.stdout + run.stderr
        if not report.exists():
            result.not_run = f"not run: pytest stopped (exit {run.returncode})"
            return result
        data = json.loads(report.read_text())
        result.tests, result.deselected = data["tests"], data["deselected"]
    return result


def table(results: Sequence[Result]) -> str:
    """The summary: one row per suite and variant."""
    head = ("suite", "variant", "passed", "failed", "deselected", "not exercising", "other", "s")
    rows = [head]
    for r in results:
        if r.not_run:
            rows.append((r.suite, r.variant, r.not_run, "", "", "", "", ""))
            continue
        other = sum(
            1
            for t in r.tests.values()
            if t["exercised"] and t["outcome"] not in ("passed", "failed")
        )
        rows.append(
            (
                r.suite,
                r.variant,
                str(len(r.counted("passed"))),
                str(len(r.counted("failed"))),
                str(len(r.deselected)),
                str(len(r.not_exercising)),
                str(other),
                f"{r.seconds:.0f}",
            )
        )
    ran = [row for row in rows if row[3]]  # the header and the suites that ran
    widths = [max(len(row[i]) for row in ran + [r[:2] + ("",) * 6 for r in rows]) for i in range(8)]
    lines = []
    for row in rows:
        cells = row if row[3] else row[:3]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip())
    return "\n".join(lines)


def failures(results: Sequence[Result]) -> str:
    """Each counted failure: suite, variant, test and the last line of its error."""
    lines = []
    for r in results:
        for node in r.counted("failed"):
            lines.append(f"FAILED [{r.suite} {r.variant}] {node}: {r.tests[node]['message']}")
        for node in r.not_exercising:
            if r.tests[node]["outcome"] == "failed":
                lines.append(
                    f"failed, not counted (built no MemBrain object) [{r.suite} {r.variant}] "
                    f"{node}: {r.tests[node]['message']}"
                )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.upstream", description=__doc__)
    parser.add_argument("--suite", action="append", choices=[s.name for s in SUITES])
    parser.add_argument("--variant", action="append", choices=VARIANTS)
    parser.add_argument("--jobs", type=int, default=1, help="suites run at once")
    parser.add_argument("--log", action="store_true", help="print each pytest run's output")
    parser.add_argument("--json", type=Path, help="also write the outcomes to this file")
    parser.add_argument(
        "--write-docs", action="store_true", help="rewrite the docs page's deselection table"
    )
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    if args.write_docs:
        DOCS_PAGE.write_text(docs_with_table(DOCS_PAGE.read_text()))
        return 0
    chosen = [s for s in SUITES if not args.suite or s.name in args.suite]
    runs = [(s, v) for v in (args.variant or VARIANTS) for s in chosen]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda sv: run_suite(sv[0], sv[1], args.pytest_args), runs))
    for r in results:
        if args.log or (r.not_run and r.log):
            print(f"===== {r.suite} ({r.variant}) =====\n{r.log}")
    print(table(results))
    listed = failures(results)
    if listed:
        print(listed)
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {"suite": r.suite, "variant": r.variant, "not_run": r.not_run}
                    | {"tests": r.tests, "deselected": r.deselected}
                    for r in results
                ],
                indent=1,
            )
        )
    return 0 if all(r.ok for r in results) else 1
