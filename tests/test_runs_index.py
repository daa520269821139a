"""The run index (docs/runs.md): real runs append rows, ``evalrun runs`` lists them newest first,
runs that end at once are all recorded, and an index that cannot be written never changes a
run's exit code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli

EVAL = """description: Two fixed answers, one wrong
graders:
  - name: paris
    type: contains
    value: Paris
tests:
  - id: right
    input: capital of France?
    output: Paris.
  - id: wrong
    input: capital of France?
    output: Lyon.
"""
WARNING = "warning: the run is not in the run index"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder to run in, holding one eval file and no git repository."""
    (tmp_path / "demo.eval.yaml").write_text(EVAL)
    return tmp_path


def _listed(project: Path, *args: str) -> list[dict]:
    result = run_cli("runs", "--json", *args, cwd=project)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
def test_two_runs_are_listed_newest_first(project: Path) -> None:
    first = run_cli("demo.eval.yaml", "--quiet", cwd=project)
    second = run_cli("demo.eval.yaml", "--quiet", "--out", "second", cwd=project)
    assert (first.returncode, second.returncode) == (1, 1), first.stderr + second.stderr
    assert WARNING not in first.stderr + second.stderr
    assert "fatal" not in first.stderr  # not a git repository: said nowhere
    rows = _listed(project)
    assert [row["bundle"] for row in rows] == [
        str((project / "second").resolve()),
        str((project / first.stdout.strip()).resolve()),
    ]
    row = rows[0]
    assert (row["eval"], row["description"]) == ("demo", "Two fixed answers, one wrong")
    assert row["eval_file"] == str((project / "demo.eval.yaml").resolve())
    assert (row["passed"], row["failed"], row["error"], row["unscored"], row["total"]) == (
        1,
        1,
        0,
        0,
        2,
    )
    assert row["mean_score"] == 0.5 and row["exit_code"] == 1 and row["git_commit"] is None
    summary = json.loads((project / "second" / "summary.json").read_text())
    assert row["started_at"] == summary["started_at"]
    assert rows[0]["id"] > rows[1]["id"]

    assert [r["bundle"] for r in _listed(project, "--limit", "1")] == [rows[0]["bundle"]]
    assert len(_listed(project, "--eval", "demo")) == 2
    assert len(_listed(project, "--eval", "demo.eval.yaml")) == 2
    assert _listed(project, "--eval", "other") == []
    text = run_cli("runs", cwd=project)
    lines = text.stdout.splitlines()
    assert len(lines) == 2 and lines[0].endswith(rows[0]["bundle"])
    assert "demo" in lines[0] and "1/2 passed, 1 failed" in lines[0] and "exit 1" in lines[0]


def test_the_eval_repositorys_commit_is_recorded(project: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "demo.eval.yaml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "eval"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert run_cli("demo.eval.yaml", "--quiet", "--out", "o", cwd=project).returncode == 1
    (row,) = _listed(project)
    assert row["git_commit"] == head


@pytest.mark.slow
def test_runs_that_end_at_once_are_all_recorded(project: Path) -> None:
    outs = [f"run-{i}" for i in range(3)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "evalrun", "demo.eval.yaml", "--quiet", "--out", out],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 1 and WARNING not in err, err
    rows = _listed(project)
    assert sorted(row["bundle"] for row in rows) == [str((project / o).resolve()) for o in outs]


@pytest.fixture
def read_only(project: Path) -> Iterator[Path]:
    """``.evalrun`` made unwritable: by its mode, or (root ignores modes) by ``chattr +i``."""
    folder = project / ".evalrun"
    folder.mkdir()
    folder.chmod(0o555)
    locked = []
    try:
        if os.access(folder, os.W_OK):  # root
            if shutil.which("chattr") is None:
                pytest.skip("root ignores modes, and chattr is missing")
            done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
            if done.returncode != 0:
                pytest.skip(f"root ignores modes, and chattr +i failed: {done.stderr!r}")
            locked.append(folder)
        try:
            (folder / "probe").touch()
        except OSError:
            pass
        else:
            pytest.skip("the folder stayed writable")
        yield folder
    finally:
        for path in locked:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        folder.chmod(0o755)


@pytest.mark.usefixtures("read_only")
def test_an_unwritable_index_warns_and_keeps_the_exit_code(project: Path) -> None:
    # --no-cache: the response cache lives in .evalrun too, and refuses a run it cannot open
    result = run_cli("demo.eval.yaml", "--no-cache", "--out", "o", cwd=project)
    assert result.returncode == 1, result.stderr  # the failed case's, as without an index
    assert WARNING in result.stderr and ".evalrun/index.sqlite" in result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads((project / "o" / "summary.json").read_text())["complete"] is True
    assert (project / "o" / "report.html").is_file()
    assert _listed(project) == []


def test_an_index_that_is_not_a_database_warns_and_keeps_the_exit_code(project: Path) -> None:
    (project / ".evalrun").mkdir()
    (project / ".evalrun" / "index.sqlite").write_text("not a database\n" * 100)
    result = run_cli("demo.eval.yaml", "--quiet", "--out", "o", cwd=project)
    assert result.returncode == 1 and WARNING in result.stderr, result.stderr
    listed = run_cli("runs", cwd=project)
    assert listed.returncode == 2 and "cannot read the run index" in listed.stderr
