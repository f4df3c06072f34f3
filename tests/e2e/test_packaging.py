"""The distribution builds under its own name and its wheel installs and imports on its own."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "membrain-memory"


def test_the_distribution_name_is_ours_and_every_install_command_uses_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION  # "membrain" on the index is another project
    extras = project["optional-dependencies"]
    assert all(not dep.startswith("membrain[") for deps in extras.values() for dep in deps), (
        "extras refer to the distribution by its name"
    )
    readme = (ROOT / "README.md").read_text()
    assert "pip install 'membrain[" not in readme
    assert f"pip install '{DISTRIBUTION}[langchain]'" in readme


def test_wheel_and_sdist_build_and_the_wheel_installs_offline(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-d", str(dist)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("membrain_memory-*.whl")
    (sdist,) = dist.glob("membrain_memory-*.tar.gz")
    assert sdist.stat().st_size > 0
    fresh = tmp_path / "fresh"
    venv.create(fresh)  # no pip of its own: this environment's pip installs into it (--python)
    python = fresh / "bin" / "python"
    install = ["install", "--no-index", "--no-deps", "-q", str(wheel)]
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *install],
        check=True,
        capture_output=True,
    )
    # The dependencies come from this environment's site-packages, read without its .pth
    # files, so the repository's own editable install does not shadow the wheel.
    site = sysconfig.get_paths()["purelib"]
    probe = (
        "import membrain, langchain_membrain, llama_index_membrain, importlib.metadata as m;"
        "print(membrain.__file__); print(langchain_membrain.__file__);"
        f"print(m.version({DISTRIBUTION!r}))"
    )
    shown = subprocess.run(
        [str(python), "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": site, "PATH": str(fresh / "bin")},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert all(str(fresh) in line for line in shown[:2]), shown
    assert shown[2] == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
