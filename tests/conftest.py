from __future__ import annotations

import compileall
import importlib.util
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
    _load_schemathesis(config)
    if hasattr(config, "workerinput"):
        return
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=2)


def _load_schemathesis(config: pytest.Config) -> None:
    """``addopts`` turns plugin autoloading off (docs/architecture.md, "Tests"), so schemathesis'
    plugin, which ``test_hostile_schema.py`` needs to be collected, is registered here: when
    installed (a ``[test-all]`` package, which ``-p`` in ``addopts`` would require) and not
    already loaded (a run with autoloading on)."""
    manager = config.pluginmanager
    if manager.has_plugin("schemathesis") or importlib.util.find_spec("schemathesis") is None:
        return
    from schemathesis.pytest import plugin

    manager.register(plugin, "schemathesis")


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
