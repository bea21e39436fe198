"""`make run` installs what running fetcher needs and nothing more; the development tools come
with `make test` (and lint, chaos)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned_installs(target: str, venv: Path) -> list[str]:
    """The pip installs `make <target>` would run on a machine without the virtualenv."""
    result = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in result.stdout.splitlines() if "pip install" in line]


def test_make_run_installs_the_package_without_the_development_tools(tmp_path: Path):
    installs = planned_installs("run", tmp_path / "venv")
    assert installs[-1].endswith("pip install --progress-bar on -e .")
    assert not any("[dev]" in line for line in installs)


@pytest.mark.parametrize("target", ["test", "lint"])
def test_the_development_targets_install_the_tools(target: str, tmp_path: Path):
    installs = planned_installs(target, tmp_path / "venv")
    assert installs[-1].endswith('pip install --progress-bar on -e ".[dev]"')
