"""Graders that misbehave, run through the real CLI in one suite: every case still gets exactly
one result with the right status and reason, nothing they started survives the run, and the
judge proxy's port is closed when ``evalrun`` exits."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import read_bundle, run_cli
from tests.fault_helpers import (
    cli_env,
    left_behind,
    one_result_per_case,
    port_closed,
    recorded_pids,
    write_suite,
)

GRADER = """
import json, os, signal, sys, time, urllib.error, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PIDS = os.path.join(HERE, "pids")
URL = os.environ["AGENTV_TARGET_PROXY_URL"]
TOKEN = os.environ["AGENTV_TARGET_PROXY_TOKEN"]


def note(pid, what):
    with open(os.path.join(PIDS, str(pid)), "w") as f:
        f.write(what)


def running(pid):
    # neither gone nor a zombie; the process may go between any two looks at /proc
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def proxy_status():
    request = urllib.request.Request(URL + "/info", headers={"Authorization": "Bearer " + TOKEN})
    try:
        return str(urllib.request.urlopen(request, timeout=5).status)
    except urllib.error.HTTPError as exc:
        return str(exc.code)
    except OSError:
        return "refused"


case = sys.argv[1]
note(os.getpid(), case)
with open(os.path.join(HERE, "proxy_url"), "w") as f:
    f.write(URL)
if case != "no-read":
    payload = json.load(sys.stdin)

if case == "crash":
    raise RuntimeError("boom in the grader")
elif case == "abort":
    os.abort()
elif case == "hang":
    time.sleep(120)
elif case == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)
elif case == "no-read":
    print("fine without reading")
elif case == "flood-stdout":
    chunk = "x" * (1 << 20)
    for _ in range(50):
        sys.stdout.write(chunk)
    print(json.dumps({"score": 1.0}))
elif case == "flood-stderr":
    chunk = "e" * (1 << 20)
    for _ in range(50):
        sys.stderr.write(chunk)
    sys.stderr.write("\\nlast words on stderr\\n")
    print(json.dumps({"score": 1.0, "reason": "stderr was noisy"}))
elif case == "bad-utf8":
    sys.stdout.buffer.write(b'{"score": 1.0, "reason": "\\xff\\xfe"}')
elif case == "fork":
    child = os.fork()
    if child == 0:
        time.sleep(120)
        os._exit(0)
    note(child, "child")
    print(json.dumps({"score": 1.0, "reason": "forked"}))
elif case == "escape":
    # A double fork into a new session leaves the grader's process group: the launcher cannot
    # kill it, but its token must die with the grader all the same.
    parent = os.getpid()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for fd in (0, 1, 2):
                os.close(fd)
            with open(os.path.join(HERE, "escaped_pid.tmp"), "w") as f:
                f.write(str(os.getpid()))
            os.rename(os.path.join(HERE, "escaped_pid.tmp"), os.path.join(HERE, "escaped_pid"))
            while running(parent):
                time.sleep(0.02)
            status = proxy_status()
            for _ in range(200):
                if status != "200":
                    break
                time.sleep(0.05)
                status = proxy_status()
            with open(os.path.join(HERE, "escaped_status.tmp"), "w") as f:
                f.write(status)
            os.rename(os.path.join(HERE, "escaped_status.tmp"), os.path.join(HERE, "escaped_status"))
            time.sleep(120)
        os._exit(0)
    os.wait()
    while not os.path.exists(os.path.join(HERE, "escaped_pid")):
        time.sleep(0.01)
    print(json.dumps({"score": 1.0, "reason": "escaped child left behind", "details": proxy_status()}))
elif case == "judge":
    body = json.dumps({"question": "Is Paris the capital of France?"}).encode()
    request = urllib.request.Request(
        URL + "/invoke", data=body,
        headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"},
    )
    reply = json.loads(urllib.request.urlopen(request, timeout=10).read())
    print(json.dumps({"score": 1.0, "reason": reply["rawText"]}))
"""

#: case id -> (grader timeout, expected status, text expected in the reason)
EXPECTED = {
    "crash": (30, "error", "RuntimeError: boom in the grader"),
    "abort": (30, "error", "killed by signal SIGABRT"),
    "hang": (1, "error", "timed out"),
    "ignore-term": (1, "error", "timed out"),
    "no-read": (30, "passed", "fine without reading"),
    "flood-stdout": (30, "error", "stdout limit"),
    "flood-stderr": (30, "passed", "stderr was noisy"),
    "bad-utf8": (30, "error", "not valid UTF-8"),
    "fork": (30, "passed", "forked"),
    "escape": (30, "passed", "escaped child left behind"),
    "judge": (30, "passed", '{"verdict": "yes"}'),
}


@pytest.mark.slow
def test_misbehaving_graders_each_leave_one_result_and_nothing_running(tmp_path: Path) -> None:
    (tmp_path / "pids").mkdir()
    (tmp_path / "grader.py").write_text(textwrap.dedent(GRADER))
    cases = []
    for case_id, (timeout, _, _) in EXPECTED.items():
        grader = {
            "name": "faulty",
            "command": [sys.executable, "grader.py", case_id],
            "target": {"max_calls": 2},
            "timeout": timeout,
        }
        case = {"id": case_id, "input": "q", "output": "Paris.", "graders": [grader]}
        if case_id == "no-read":
            case["criteria"] = "x" * 5_000_000  # far more than a pipe buffer: must not block
        cases.append(case)
    targets = [{"name": "judge", "kind": "mock", "default": '{"verdict": "yes"}'}]
    path = write_suite(tmp_path, graders=[], cases=cases, targets=targets)
    out = tmp_path / "out"
    escaped = None
    try:
        # Without a sandbox: this pins the launcher's own process-group discipline (pids as the
        # host sees them); test_sandbox.py covers the same faults inside a sandbox.
        result = run_cli(
            str(path),
            "--out",
            str(out),
            "--workers",
            str(len(cases)),
            "--sandbox",
            "none",
            cwd=tmp_path,
            env=cli_env(),
        )
        escaped_file = tmp_path / "escaped_pid"
        escaped = int(escaped_file.read_text()) if escaped_file.exists() else None
        assert result.returncode == 3, result.stdout + result.stderr  # errors beyond --max-errors 0
        results, summary = read_bundle(out)
        by_id = one_result_per_case(results, list(EXPECTED))
        for case_id, (_, status, reason) in EXPECTED.items():
            grader = by_id[case_id]["graders"][0]
            assert (by_id[case_id]["status"], grader["status"]) == (status, status), case_id
            assert reason in grader["reason"] + grader.get("stderr_tail", ""), (case_id, grader)
        assert by_id["crash"]["graders"][0]["exit_code"] == 1
        assert "last words on stderr" in by_id["flood-stderr"]["graders"][0]["stderr_tail"]
        assert len(by_id["flood-stderr"]["graders"][0]["stderr_tail"]) <= 4000
        assert by_id["judge"]["graders"][0]["proxy"]["calls"] == 1
        assert summary["complete"] is True and summary["counts"]["total"] == len(EXPECTED)

        pids = recorded_pids(tmp_path / "pids")
        assert len(pids) == len(EXPECTED) + 1  # every grader, plus the forked child
        assert left_behind(pids) == []
        assert port_closed((tmp_path / "proxy_url").read_text())
        # The escaped process outlives its grader (only a container stops that), but not its
        # token: it is refused while the run goes on, or finds the proxy gone.
        assert escaped is not None
        assert _wait_for(tmp_path / "escaped_status").read_text() in ("401", "refused")
    finally:
        if escaped is not None:
            _kill(escaped)


def _wait_for(path: Path, seconds: float = 15) -> Path:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return path


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
