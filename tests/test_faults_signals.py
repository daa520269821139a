"""Ctrl-C (SIGINT) and SIGTERM at seeded random points of a real run: after k graders have
started, plus a little jitter so some signals land while a judge call is in flight. Whatever
the point, the run exits 130 with one result per case, no grader or grader child survives, and
the proxy port is closed."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import read_bundle
from tests.fault_helpers import (
    cli_env,
    one_result_per_case,
    port_closed,
    recorded_pids,
    working_in,
    write_suite,
)

CASES = 8
WORKERS = 3

GRADER = """
import json, os, sys, time, urllib.request, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
UNIQUE = uuid.uuid4().hex
open(os.path.join(HERE, "pids", f"{os.getpid()}.{UNIQUE}"), "w").write("grader")
child = os.fork()
if child == 0:
    time.sleep(120)
    os._exit(0)
open(os.path.join(HERE, "pids", f"{child}.{UNIQUE}"), "w").write("child")
url = os.environ["AGENTV_TARGET_PROXY_URL"]
open(os.path.join(HERE, "proxy_url"), "w").write(url)
payload = json.load(sys.stdin)
request = urllib.request.Request(
    url + "/invoke",
    data=json.dumps({"question": payload["question"]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["AGENTV_TARGET_PROXY_TOKEN"],
             "Content-Type": "application/json"},
)
reply = json.loads(urllib.request.urlopen(request, timeout=30).read())
time.sleep(0.2)
print(json.dumps({"score": 1.0, "reason": reply["rawText"]}))
"""


def _scenarios(seed: int = 20240611, count: int = 4) -> list[tuple[str, int, float, int]]:
    """(signal name, graders started before it, jitter in seconds, how many times to send)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        name = ("SIGINT", "SIGTERM")[i % 2]
        out.append((name, rng.randint(1, CASES), round(rng.uniform(0.0, 0.3), 3), 1))
    out.append(("SIGINT", rng.randint(1, CASES), round(rng.uniform(0.0, 0.3), 3), 2))
    return out


@pytest.mark.parametrize(
    ("sig", "started", "jitter", "times"),
    # the first SIGINT, the first SIGTERM and the signal sent twice in the default run
    [
        pytest.param(*s, marks=() if i in (0, 1, 4) else pytest.mark.slow)
        for i, s in enumerate(_scenarios())
    ],
)
def test_signal_at_a_random_point_leaves_a_clean_incomplete_run(
    tmp_path: Path, sig: str, started: int, jitter: float, times: int
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    (tmp_path / "grader.py").write_text(textwrap.dedent(GRADER))
    grader = {
        "name": "slow-judged",
        "command": [sys.executable, "grader.py"],
        "target": {"max_calls": 1},
        "timeout": 60,
    }
    ids = [f"case-{i}" for i in range(CASES)]
    cases = [{"id": i, "input": f"question {i}", "output": "answer"} for i in ids]
    judge = {"name": "judge", "kind": "mock", "default": "fine", "latency_ms": 300}
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=[judge])
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalrun", str(path), "--out", str(out), "--workers", str(WORKERS)],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while (
            sum(p.read_text() == "grader" for p in pids.iterdir()) < started
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        time.sleep(jitter)
        for _ in range(times):
            proc.send_signal(getattr(signal, sig))
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode == 130, stdout + stderr
    results, summary = read_bundle(out)
    by_id = one_result_per_case(results, ids)
    interrupted = [i for i, r in by_id.items() if r["status"] == "error"]
    assert interrupted, "the signal came after every case had finished"
    for case_id, result in by_id.items():
        if case_id in interrupted:
            assert "interrupted" in result["error"], result
        else:
            assert result["status"] == "passed", result
    assert summary["interrupted"] is True and summary["complete"] is False
    assert summary["counts"]["total"] == CASES
    assert len(recorded_pids(pids)) > 0
    assert working_in(tmp_path) == []
    assert port_closed((tmp_path / "proxy_url").read_text())


LINGERING_WORKER = """
import json, os, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
for line in sys.stdin:
    case = json.loads(line)
    payload = case["payload"]
    if payload["case_id"] == "slow":
        time.sleep(60)
    answer = {"nonce": case["nonce"], "exit": 0, "result": {"score": 1, "reason": payload["case_id"]}}
    print(json.dumps(answer), flush=True)
open(os.path.join(HERE, "at-eof"), "w").close()
time.sleep(30)  # ignores the end of input: the run waits its 1 s close grace for it
"""


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize("slow_case", [False, True])
def test_a_signal_while_the_run_closes_still_leaves_a_whole_bundle(
    tmp_path: Path, slow_case: bool
) -> None:
    """A second Ctrl-C (or a first one after the last case) lands while the stream-mode workers
    are being closed: the summary is still written, and it tells the truth about the cases."""
    (tmp_path / "worker.py").write_text(textwrap.dedent(LINGERING_WORKER))
    grader = {"name": "lingering", "command": [sys.executable, "worker.py"], "mode": "serve"}
    ids = ["a", "b", *(["slow"] if slow_case else [])]
    cases = [{"id": i, "input": "q", "output": "a"} for i in ids]
    judge = {"name": "judge", "kind": "mock", "default": "fine"}
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=[judge])
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalrun", str(path), "--out", str(out), "--workers", "2"],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    eof = tmp_path / "at-eof"
    try:
        if slow_case:  # the first signal interrupts the slow case; the second hits the close
            deadline = time.monotonic() + 60
            while (
                not (out / "results.jsonl").is_file()
                or len((out / "results.jsonl").read_text().splitlines()) < 2
            ):
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.01)
            proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        while not eof.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    results, summary = read_bundle(out)
    by_id = one_result_per_case(results, ids)
    assert [by_id[i]["status"] for i in ("a", "b")] == ["passed", "passed"]
    if slow_case:
        assert proc.returncode == 130, stdout + stderr
        assert "interrupted" in by_id["slow"]["error"]
        assert summary["interrupted"] is True and summary["complete"] is False
    else:
        assert proc.returncode == 0, stdout + stderr
        assert summary["interrupted"] is False and summary["complete"] is True
    assert working_in(tmp_path) == []
