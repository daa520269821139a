"""`evalrun init`: the starter project runs green offline in each grader language, its grader
really grades (a wrong answer fails), and init never overwrites a file (docs/config.md)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("EVALRUN_")}


def init_and_run(tmp_path: Path, language: str) -> Path:
    made = run_cli("init", str(tmp_path / "proj"), "--language", language, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "next: cd " in made.stdout
    project = tmp_path / "proj"
    done = run_cli("run", "-q", "--out", str(tmp_path / "green"), cwd=project, env=clean_env())
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "green" / "starter" / "summary.json").read_text())
    assert summary["counts"] == {"passed": 2, "failed": 0, "error": 0, "unscored": 0, "total": 2}
    assert summary["target"] == "local"
    return project


@pytest.mark.slow
def test_the_python_starter_runs_green_and_its_grader_grades(tmp_path: Path) -> None:
    project = init_and_run(tmp_path, "python")
    eval_file = project / "evals" / "starter.eval.yaml"
    eval_file.write_text(eval_file.read_text().replace("is Paris.", "is Lyon."))
    done = run_cli("run", "-q", "--out", str(tmp_path / "red"), cwd=project, env=clean_env())
    assert done.returncode == 1, done.stderr
    lines = (tmp_path / "red" / "starter" / "results.jsonl").read_text().splitlines()
    statuses = {json.loads(line)["id"]: json.loads(line)["status"] for line in lines}
    assert statuses == {"capital-of-france": "failed", "largest-planet": "passed"}


@pytest.mark.slow
@pytest.mark.parametrize("language", ["js", "shell"])
def test_the_js_and_shell_starters_run_green(tmp_path: Path, language: str) -> None:
    needs = {"js": "node", "shell": "jq"}[language]
    if shutil.which(needs) is None:
        pytest.skip(f"no {needs} on PATH")
    init_and_run(tmp_path, language)


def test_init_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "evalrun.toml").write_text("workers = 3\n")
    done = run_cli("init", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert "already there, nothing written" in done.stderr
    assert (tmp_path / "evalrun.toml").read_text() == "workers = 3\n"
    assert not (tmp_path / "evals").exists()
