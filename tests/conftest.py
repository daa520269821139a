from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
