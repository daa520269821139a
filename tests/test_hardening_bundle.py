"""Each run owns its bundle folder (docs/results.md): runs started in the same second never
share one, an explicit --out must be new or empty, and every bundle agrees with itself."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fault_helpers import cli_env, write_suite
from tests.hardening_helpers import assert_bundle_agrees

PREVIOUS = '{"id": "from-an-earlier-run", "status": "passed", "score": 1.0}\n'


def _suite(folder: Path) -> Path:
    return write_suite(
        folder,
        graders=[{"type": "contains", "value": "Paris"}],
        cases=[{"id": "capital", "input": "Capital of France?", "output": "Paris."}],
        targets=[{"name": "judge", "kind": "mock", "default": "{}"}],
    )


def _taken_folders(runs: Path, seconds: int) -> list[Path]:
    """The default bundle name for every second of the next ``seconds``, already taken by an
    earlier run (as a run started in the same second would have taken it)."""
    now = datetime.now()
    taken = []
    for delta in range(-2, seconds):
        stamp = (now + timedelta(seconds=delta)).strftime("%Y%m%d-%H%M%S")
        folder = runs / f"{stamp}-suite"
        folder.mkdir(parents=True)
        (folder / "results.jsonl").write_text(PREVIOUS)
        taken.append(folder)
    return taken


def test_runs_started_together_never_share_a_bundle_folder(tmp_path: Path) -> None:
    path = _suite(tmp_path)
    runs = tmp_path / ".evalrun" / "runs"
    taken = _taken_folders(runs, seconds=120)
    argv = [sys.executable, "-m", "evalrun", str(path), "--repeat", "3", "--no-cache"]
    processes = [
        subprocess.Popen(
            argv,
            cwd=tmp_path,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in processes]

    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stdout + stderr
    for folder in taken:  # earlier runs' bundles are untouched
        assert [p.name for p in folder.iterdir()] == ["results.jsonl"]
        assert (folder / "results.jsonl").read_text() == PREVIOUS
    printed = {
        line.removeprefix("run bundle: ")
        for out, _ in outputs
        for line in out.splitlines()
        if line.startswith("run bundle: ")
    }
    bundles = sorted(set(runs.iterdir()) - set(taken))
    assert len(bundles) == 3 and printed == {str(b.relative_to(tmp_path)) for b in bundles}
    for bundle in bundles:
        assert bundle.name.rsplit("-", 1)[-1].isdigit()  # "<time>-suite-2" and so on
        rows = [json.loads(line) for line in (bundle / "results.jsonl").open()]
        assert sorted((r["id"], r["repeat"]) for r in rows) == [("capital", r) for r in range(3)]
        assert assert_bundle_agrees(bundle)["complete"] is True


@pytest.mark.slow
def test_an_explicit_out_folder_must_be_new_or_empty(tmp_path: Path) -> None:
    path = _suite(tmp_path)
    used = tmp_path / "used"
    used.mkdir()
    (used / "results.jsonl").write_text(PREVIOUS)
    refused = run_cli(str(path), "--out", str(used), "--no-cache", cwd=tmp_path, env=cli_env())
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"--out {used}: the folder is not empty" in refused.stderr
    assert f"--resume {used}" in refused.stderr
    assert [p.name for p in used.iterdir()] == ["results.jsonl"]
    assert (used / "results.jsonl").read_text() == PREVIOUS

    empty = tmp_path / "empty"
    empty.mkdir()
    ok = run_cli(str(path), "--out", str(empty), "--no-cache", cwd=tmp_path, env=cli_env())
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert assert_bundle_agrees(empty)["counts"]["passed"] == 1

    again = run_cli(str(path), "--resume", str(empty), "--no-cache", cwd=tmp_path, env=cli_env())
    assert again.returncode == 0, again.stdout + again.stderr
    assert assert_bundle_agrees(empty)["counts"]["total"] == 1
