"""A non-editable install works from another folder: packages, rubrics and graders ship."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_non_editable_install_runs_an_example_eval_from_another_folder(tmp_path):
    site = tmp_path / "site"
    # A real wheel build and install of the project (dependencies come from this environment).
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}

    def evalrun(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "evalrun", *args],
            capture_output=True,
            text=True,
            cwd=elsewhere,
            env=env,
            timeout=120,
        )

    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import evalrun, graders, rubrics; print(evalrun.__file__, rubrics.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
    )
    assert str(site) in where.stdout and str(ROOT) not in where.stdout, where.stdout

    out = tmp_path / "run"
    run = evalrun(
        str(ROOT / "evals" / "contextual-precision.eval.yaml"),
        "--target",
        "mock",
        "--out",
        str(out),
        "--quiet",
        "--no-cache",
    )
    assert run.returncode == 1, run.stderr  # relevant-node-last is below its threshold by design
    scores = {
        json.loads(line)["id"]: round(json.loads(line)["score"], 3)
        for line in (out / "results.jsonl").read_text().splitlines()
    }
    assert scores == {"perfect-ranking": 1.0, "mixed-ranking": 0.833, "relevant-node-last": 0.333}
    rubrics = evalrun("rubrics", "list")
    assert "default" in rubrics.stdout and "agent" in rubrics.stdout
