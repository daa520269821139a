from __future__ import annotations

import compileall
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the packages of this checkout that the suite's ``evalrun`` and grader processes import
PACKAGES = ("evalrun", "proxy", "grader_sdk", "graders", "rubrics")


def pytest_configure(config: pytest.Config) -> None:
    """Compile the checkout's packages once, before any test starts a process. Where
    ``PYTHONDONTWRITEBYTECODE`` is set (many CI images: docs/performance.md, "Bytecode") no
    process writes bytecode, so each of the suite's hundreds of ``evalrun`` processes would
    compile what it imports from source again (docs/architecture.md, "Tests"). Files already
    up to date are only checked; under xdist only the controller compiles."""
    if hasattr(config, "workerinput"):
        return
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=2)


def run_cli(
    *args: str, cwd: Path | None = None, timeout: float = 120, env: dict | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``evalrun`` as a user would: a real process, no TTY."""
    return subprocess.run(
        [sys.executable, "-m", "evalrun", *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def read_bundle(out: Path) -> tuple[list[dict], dict]:
    lines = (out / "results.jsonl").read_text().splitlines()
    summary = json.loads((out / "summary.json").read_text())
    return [json.loads(line) for line in lines if line.strip()], summary


@pytest.fixture
def cli():
    return run_cli
