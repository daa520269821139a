"""A build of the checkout's packages as an install makes it, for the tests that check what
the build ships (package data: rubrics, the viewer's page)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import PACKAGES, ROOT


def run_in_built_copy(tmp_path: Path, probe: str, timeout: float = 300) -> list[str]:
    """The output lines of ``probe`` (Python source) run in an isolated interpreter from a
    folder outside the source tree, importing the packages from a copy built by setuptools'
    ``build_py`` with the pyproject's package-data, so only what a build ships is there."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py"]
        + ["--build-lib", str(site)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert build.returncode == 0, build.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {probe}"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(str(site)), lines  # imported from the build, not the checkout
    return lines
