"""What a hostile grader cannot reach through the sandbox's file system (docs/security.md,
"Grader sandbox"), end to end through the CLI as root with real bwrap sandboxes: the judge
proxy's Unix socket, of its own run or of another one running at the same time."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalrun.launcher.sandbox import why_unavailable
from tests.conftest import read_bundle, run_cli
from tests.fault_helpers import cli_env, one_result_per_case, write_suite

GRADERS = Path(__file__).resolve().parent / "sandbox_graders"
TARGETS = [{"name": "judge", "kind": "mock", "default": "yes"}]

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the threat model is a grader as root"),
    pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable())),
]


def _grader(name: str, script: str, config: dict, sandbox: str | None = None) -> dict:
    grader = {
        "name": name,
        "command": [sys.executable, str(GRADERS / script)],
        "target": {"max_calls": 1},
        "config": config,
    }
    return {**grader, "sandbox": sandbox} if sandbox else grader


def _private_tmp(tmp_path: Path) -> Path:
    """The runs' TMPDIR: evalrun keeps its private folders there, and the hijacker searches
    only there (never other runs on this machine)."""
    folder = tmp_path / "tmpdir"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.mark.parametrize("level", ["process", "strict"])
def test_a_grader_cannot_replace_its_own_runs_proxy_socket(tmp_path: Path, level: str) -> None:
    """The hijacker runs first; a strict grader of the same run then still reaches the proxy."""
    tmpdir = _private_tmp(tmp_path)
    hijacker = _grader("hijacker", "hijacker.py", {"search": [str(tmpdir)]}, sandbox=level)
    caller = _grader("caller", "caller.py", {})
    cases = [
        {"id": "hijack", "input": "q", "output": "a", "graders": [hijacker]},
        {"id": "call", "input": "q", "output": "a", "graders": [caller]},
    ]
    path = write_suite(tmp_path, graders=[], cases=cases, targets=TARGETS)
    out = tmp_path / "out"
    result = run_cli(
        str(path), "--out", str(out), "--workers", "1", "--sandbox", "strict",
        cwd=tmp_path, env=cli_env(TMPDIR=str(tmpdir)),
    )  # fmt: skip
    by_id = one_result_per_case(read_bundle(out)[0], ["hijack", "call"])
    assert by_id["hijack"]["graders"][0]["details"]["replaced"] == []
    assert by_id["call"]["status"] == "passed", by_id["call"]["graders"][0]["reason"]
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_grader_of_another_run_cannot_touch_this_runs_proxy_socket(tmp_path: Path) -> None:
    """Run A's strict grader waits, holding its grant, while run B's default-sandbox hijacker
    searches the TMPDIR both runs share; then A's grader calls its proxy."""
    tmpdir = _private_tmp(tmp_path)
    env = cli_env(TMPDIR=str(tmpdir))
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    go = first / "go"
    caller = _grader("caller", "caller.py", {"go": str(go)})
    path_a = write_suite(
        first, graders=[], cases=[{"id": "call", "input": "q", "output": "a", "graders": [caller]}],
        targets=TARGETS,
    )  # fmt: skip
    run_a = subprocess.Popen(
        [sys.executable, "-m", "evalrun", str(path_a), "--out", str(first / "out"),
         "--sandbox", "strict"],
        cwd=first, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        pattern = str(tmpdir / "evalrun-*" / "**" / "*.sock")
        while not glob.glob(pattern, recursive=True):  # A's proxy is up, its grader waits
            assert run_a.poll() is None and time.monotonic() < deadline, run_a.communicate()
            time.sleep(0.05)
        hijacker = _grader("hijacker", "hijacker.py", {"search": [str(tmpdir)]})
        path_b = write_suite(
            second, graders=[],
            cases=[{"id": "hijack", "input": "q", "output": "a", "graders": [hijacker]}],
            targets=TARGETS,
        )  # fmt: skip
        run_b = run_cli(str(path_b), "--out", str(second / "out"), cwd=second, env=env)
        assert run_b.returncode == 0, run_b.stdout + run_b.stderr
        details = read_bundle(second / "out")[0][0]["graders"][0]["details"]
        assert details == {"found": [], "replaced": []}
    finally:
        go.write_text("go")
        stdout, stderr = run_a.communicate(timeout=120)
    calls = read_bundle(first / "out")[0]
    assert calls[0]["status"] == "passed", json.dumps(calls[0]["graders"][0])
    assert run_a.returncode == 0, stdout + stderr
