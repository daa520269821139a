"""``--executor ray`` on a real local Ray cluster (2 CPUs, started once for this module with
``ray start``): subprocess graders and judge calls through each worker's own proxy, a worker
killed mid-run, one concurrency limit for the whole cluster, Ctrl-C on the driver."""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, read_bundle, run_cli
from tests.fault_helpers import cli_env, completion, one_result_per_case, write_suite

ray = pytest.importorskip("ray", reason="the Ray executor needs the [ray] extra")
pytestmark = pytest.mark.ray


#: a loopback-only test cluster: Ray's single-machine mode, no usage report, no auth token
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
}


def ray_env() -> dict[str, str]:
    return cli_env(**RAY_ENV)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # `ray start` as a module: a venv made with --system-site-packages has no `ray` script
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts"]
    head = subprocess.Popen(
        [*ray_cli, "start", "--head", "--block", "--num-cpus", "2", "--port", str(port),
         "--include-dashboard", "false", "--disable-usage-stats"],
        env=ray_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            assert head.poll() is None and time.monotonic() < deadline, "ray start failed"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)  # the head and every Ray process it started
        head.wait()


def _by_id(out: Path) -> dict[str, tuple[str, float | None]]:
    results, _ = read_bundle(out)
    return {r["id"]: (r["status"], r["score"]) for r in results}


@pytest.mark.skipif(shutil.which("node") is None, reason="the polyglot eval has a JS grader")
def test_a_ray_run_gives_the_same_bundle_as_a_local_run(cluster: str, tmp_path: Path) -> None:
    evalfile = ROOT / "evals" / "polyglot" / "polyglot.eval.yaml"
    local = run_cli(str(evalfile), "-q", "--out", str(tmp_path / "local"), env=ray_env())
    remote = run_cli(
        str(evalfile),
        "-q",
        "--out",
        str(tmp_path / "ray"),
        "--executor",
        "ray",
        "--ray-address",
        cluster,
        env=ray_env(),
    )
    assert (local.returncode, remote.returncode) == (1, 1), remote.stderr
    assert _by_id(tmp_path / "ray") == _by_id(tmp_path / "local")
    assert len(_by_id(tmp_path / "ray")) == 4
    _, summary = read_bundle(tmp_path / "ray")
    assert summary["complete"] is True and summary["exit_code"] == 1


KILLER = """
import json, os, signal, sys
payload = json.load(sys.stdin)
case = payload["case_id"]
# this script runs from the copy of the folder Ray shipped; the flag lives in the test's folder
flag = os.path.join(payload["config"]["flags"], "killed-" + case)
if case == "victim" and not os.path.exists(flag):
    open(flag, "w").write(str(os.getppid()))
    os.kill(os.getppid(), signal.SIGKILL)  # the Ray worker grading this case
print(json.dumps({"score": 1.0, "reason": "graded"}))
"""


def test_a_worker_killed_mid_run_loses_no_case_and_duplicates_none(
    cluster: str, tmp_path: Path
) -> None:
    (tmp_path / "killer.py").write_text(KILLER)
    # no sandbox for this grader: it must see its parent, the worker, to kill it
    grader = {
        "name": "killer",
        "command": [sys.executable, "killer.py"],
        "sandbox": "none",
        "config": {"flags": str(tmp_path)},
    }
    ids = ["a", "b", "victim", "c", "d", "e"]
    cases = [{"id": i, "input": "q", "output": "a"} for i in ids]
    targets = [{"name": "judge", "kind": "mock", "default": "yes"}]
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
    out = tmp_path / "out"
    result = run_cli(
        str(path), "-q", "--out", str(out), "--executor", "ray", "--ray-address", cluster,
        cwd=tmp_path, env=ray_env(),
    )  # fmt: skip
    assert (tmp_path / "killed-victim").exists(), "the worker was never killed"
    assert result.returncode == 0, result.stdout + result.stderr
    results, summary = read_bundle(out)
    by_id = one_result_per_case(results, ids)  # exactly once each
    assert {r["status"] for r in by_id.values()} == {"passed"}
    assert summary["counts"]["total"] == len(ids)


class CountingJudge:
    """An OpenAI-compatible judge on loopback that answers after ``delay`` seconds and counts
    the calls in flight at once."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.in_flight = 0
        self.peak = 0
        self.calls = 0
        self._lock = threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with judge._lock:
                    judge.in_flight += 1
                    judge.calls += 1
                    judge.peak = max(judge.peak, judge.in_flight)
                time.sleep(judge.delay)
                with judge._lock:
                    judge.in_flight -= 1
                body = completion("yes")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


JUDGED = """
import json, os, sys, urllib.request
payload = json.load(sys.stdin)
request = urllib.request.Request(
    os.environ["AGENTV_TARGET_PROXY_URL"] + "/invoke",
    data=json.dumps({"question": payload["question"]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["AGENTV_TARGET_PROXY_TOKEN"],
             "Content-Type": "application/json"},
)
reply = json.loads(urllib.request.urlopen(request, timeout=60).read())
print(json.dumps({"score": 1.0, "reason": reply["rawText"]}))
"""


def test_a_matrix_run_grades_each_cell_on_the_workers_with_its_columns_judge(
    cluster: str, tmp_path: Path
) -> None:
    """2 targets x 2 prompt variants (docs/results.md, "A matrix run"): every cell graded once
    on the cluster, each by its column's ``CaseGrader``, so each column's target answers and
    judges its own cells through the worker's proxy."""
    (tmp_path / "judged.py").write_text(JUDGED)
    targets = [{"name": name, "kind": "mock", "default": f"{name} says"} for name in ("l", "r")]
    (tmp_path / "targets.yaml").write_text(json.dumps({"targets": targets}))
    cells = [(i, p) for i in ("a", "b", "c") for p in ("short", "long")]
    rows = [{"id": i, "prompt": p, "input": f"{p} question {i}"} for i, p in cells]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    grader = {"name": "judged", "command": [sys.executable, "judged.py"], "target": True}
    path = tmp_path / "matrix.eval.yaml"
    path.write_text(json.dumps({"graders": [grader], "tests": "cases.jsonl"}))
    out = tmp_path / "out"
    result = run_cli(
        str(path), "-q", "--out", str(out), "--target", "l", "--target", "r",
        "--executor", "ray", "--ray-address", cluster, cwd=tmp_path, env=ray_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    results, summary = read_bundle(out)
    found = Counter((r["id"], r["target"], r["prompt"]) for r in results)
    assert found == Counter((i, t, p) for i, p in cells for t in ("l", "r"))  # once each
    for line in results:
        said = f"{line['target']} says"
        assert (line["output"], line["graders"][0]["reason"]) == (said, said), line
    assert summary["matrix"] == ["l", "r"] and summary["prompts"] == ["short", "long"]
    assert [c["column"] for c in summary["columns"]] == [
        "l × short",
        "l × long",
        "r × short",
        "r × long",
    ]
    assert summary["complete"] is True and summary["missing"] == 0
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    assert len(calls) == 12
    assert all(call["column"].startswith(f"{call['target']} × ") for call in calls)


def test_the_targets_concurrency_limit_holds_across_the_cluster(
    cluster: str, tmp_path: Path
) -> None:
    (tmp_path / "judged.py").write_text(JUDGED)
    judge = CountingJudge(delay=0.4)
    try:
        grader = {
            "name": "judged",
            "command": [sys.executable, "judged.py"],
            "target": {"max_calls": 1},
        }
        ids = [f"case-{i}" for i in range(10)]
        cases = [{"id": i, "input": f"question {i}", "output": "a"} for i in ids]
        targets = [
            {
                "name": "judge",
                "kind": "openai",
                "model": "m",
                "base_url": judge.base_url,
                "api_key": "sk-fake",
                "max_concurrency": 2,
                "cache": False,
            }
        ]
        path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
        out = tmp_path / "out"
        result = run_cli(
            str(path), "-q", "--out", str(out), "--workers", "8", "--no-cache",
            "--executor", "ray", "--ray-address", cluster, cwd=tmp_path, env=ray_env(),
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        results, _ = read_bundle(out)
        assert {r["status"] for r in one_result_per_case(results, ids).values()} == {"passed"}
        assert judge.calls == len(ids)
        # two workers with four cases in flight each, but the provider saw at most 2 at once
        assert judge.peak == 2
    finally:
        judge.close()


SLOW = """
import json, sys, time
json.load(sys.stdin)
time.sleep(1.5)
print(json.dumps({"score": 1.0, "reason": "slow"}))
"""


def test_ctrl_c_on_the_driver_leaves_one_result_per_case(cluster: str, tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    grader = {"name": "slow", "command": [sys.executable, "slow.py"]}
    ids = [f"case-{i}" for i in range(12)]
    cases = [{"id": i, "input": "q", "output": "a"} for i in ids]
    targets = [{"name": "judge", "kind": "mock", "default": "yes"}]
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalrun", str(path), "-q", "--out", str(out), "--workers", "2",
         "--executor", "ray", "--ray-address", cluster],
        cwd=tmp_path, env=ray_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        results_file = out / "results.jsonl"
        while time.monotonic() < deadline and proc.poll() is None:
            if results_file.exists() and results_file.read_text().count("\n") >= 2:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stdout + stderr
    results, summary = read_bundle(out)
    by_id = one_result_per_case(results, ids)
    interrupted = [i for i, r in by_id.items() if r["status"] == "error"]
    assert interrupted and all("interrupted" in by_id[i]["error"] for i in interrupted)
    assert summary["interrupted"] is True and summary["counts"]["total"] == len(ids)


def test_ray_is_named_when_it_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default install has no Ray: the run says what to install before anything starts."""
    from evalrun.runner.options import RunOptions
    from evalrun.runner.plan import plan_run
    from evalrun.spec.loader import load_eval
    from evalrun.targets import ConfigError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    loaded = load_eval(ROOT / "evals" / "polyglot" / "polyglot.eval.yaml")
    with pytest.raises(ConfigError, match=r"pip install 'ray>=2\.40'"):
        plan_run(loaded, RunOptions(out=tmp_path / "o", executor="ray"))


def test_a_worker_without_the_key_stops_the_run_before_any_case(
    cluster: str, tmp_path: Path
) -> None:
    """Keys come from each worker's own environment; the driver sends none. Here only the
    driver has the key, so the workers cannot start, and the run says so with exit 2."""
    (tmp_path / "judged.py").write_text(JUDGED)
    grader = {"name": "judged", "command": [sys.executable, "judged.py"], "target": True}
    targets = [
        {
            "name": "judge",
            "kind": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "EVALRUN_TEST_DRIVER_ONLY_KEY",
        }
    ]
    cases = [{"id": "c", "input": "q", "output": "a"}]
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
    env = {**ray_env(), "EVALRUN_TEST_DRIVER_ONLY_KEY": "sk-driver-only"}
    out = tmp_path / "out"
    result = run_cli(
        str(path), "--out", str(out), "--executor", "ray", "--ray-address", cluster,
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the workers could not start" in result.stderr
    assert "EVALRUN_TEST_DRIVER_ONLY_KEY" in result.stderr
    assert "sk-driver-only" not in result.stderr
    assert not out.exists()


FORGER = """
import json, os, sys
payload = json.load(sys.stdin)
config = payload["config"]
if payload["case_id"] == "honest":
    print(json.dumps({"score": 0.0, "reason": "a wrong answer"}))
    sys.exit()
reached = []
for path in config["read"]:
    try:
        if os.listdir(path) if os.path.isdir(path) else open(path).read():
            reached.append(path)
    except OSError:
        pass
try:  # the driver's results.jsonl: every case passed
    with open(config["results"]) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for line in lines:
        line["status"], line["score"] = "passed", 1.0
        for grader in line["graders"]:
            grader["score"], grader["passed"] = 1.0, True
    with open(config["results"], "w") as f:
        f.writelines(json.dumps(line) + "\\n" for line in lines)
    forged = bool(lines)
except OSError:
    forged = False
print(json.dumps({"score": 1.0, "reason": "probed", "details": {"forged": forged, "read": reached}}))
"""


def test_ray_workers_mask_the_drivers_bundle_cache_and_targets_file(
    cluster: str, tmp_path: Path
) -> None:
    """A grader on a worker of a local cluster tries to rewrite the driver's results.jsonl
    (failed -> passed) and to read the driver's cache and targets file (docs/security.md)."""
    (tmp_path / "forger.py").write_text(FORGER)
    out, cache = tmp_path / "out", tmp_path / "cache"
    cache.mkdir()
    (cache / "responses.db").write_text("a cached judge reply")
    config = {"results": str(out / "results.jsonl"), "read": [str(cache), str(out),
              str(tmp_path / "targets.yaml")]}  # fmt: skip
    grader = {"name": "forger", "command": [sys.executable, "forger.py"], "config": config}
    cases = [{"id": "honest", "input": "q", "output": "a"}, {"id": "forger", "input": "q"}]
    cases[1]["output"] = "a"
    targets = [{"name": "judge", "kind": "mock", "default": "yes"}]
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
    result = run_cli(
        str(path), "--out", str(out), "--workers", "1", "--cache-dir", str(cache),
        "--executor", "ray", "--ray-address", cluster, cwd=tmp_path, env=ray_env(),
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr  # the honest case failed
    by_id = one_result_per_case(read_bundle(out)[0], ["honest", "forger"])
    assert by_id["forger"]["graders"][0]["details"] == {"forged": False, "read": []}
    assert by_id["honest"]["status"] == "failed"


WAITER = """
import json, os, sys, time
go = json.load(sys.stdin)["config"]["go"]
deadline = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({"score": 1.0, "reason": "waited"}))
"""


def _process_tree(root: int) -> dict[int, str]:
    """``root`` and every process below it, by pid, with its program's name."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):
            tree[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            todo += children.get(pid, [])
    return tree


def _listening(pids: dict[int, str]) -> list[tuple[str, str]]:
    """Every listening TCP socket (IPv4 and IPv6) those processes hold: (address, program)."""
    owner = {}
    for pid, name in pids.items():
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:["):
                        owner[link[8:-1]] = Path(name).name
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in owner:  # 0A: LISTEN
                raw, port = fields[1].split(":")
                packed = b"".join(
                    int(raw[i : i + 8], 16).to_bytes(4, "little") for i in range(0, len(raw), 8)
                )
                address = ipaddress.ip_address(packed)
                found.append((f"{address}:{int(port, 16)}", owner[fields[9]]))
    return found


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.rsplit(":", 1)[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def test_a_local_ray_cluster_listens_on_loopback_only(tmp_path: Path) -> None:
    """evalrun starts the cluster itself (no --ray-address); while a grader waits, every
    listening socket of evalrun and of every Ray process below it is on 127.0.0.1."""
    (tmp_path / "waiter.py").write_text(WAITER)
    go = tmp_path / "go"
    grader = {"name": "waiter", "command": [sys.executable, "waiter.py"], "config": {"go": str(go)}}
    cases = [{"id": "c", "input": "q", "output": "a"}]
    targets = [{"name": "judge", "kind": "mock", "default": "yes"}]
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
    env = cli_env(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # evalrun's own doing, not the test's
    run = subprocess.Popen(
        [sys.executable, "-m", "evalrun", str(path), "-q", "--out", str(tmp_path / "out"),
         "--executor", "ray"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "waiter.py" not in " ".join(_cmdlines(run.pid)):  # the grader is running
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.2)
        sockets = _listening(_process_tree(run.pid))
    finally:
        go.write_text("go")
        stdout, stderr = run.communicate(timeout=120)
    programs = {program for _, program in sockets}
    assert {"gcs_server", "raylet"} <= programs, sockets  # the cluster was seen
    assert [s for s in sockets if not _is_loopback(s[0])] == []
    assert run.returncode == 0, stdout + stderr


def _cmdlines(root: int) -> list[str]:
    tree = _process_tree(root)
    lines = []
    for pid in tree:
        with contextlib.suppress(OSError):
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return lines


def test_a_local_cluster_that_would_listen_beyond_loopback_is_not_started(tmp_path: Path) -> None:
    """Ray asked, through its own variable, to bind the machine's IP: evalrun refuses (exit 2)
    instead of starting a cluster reachable from the network."""
    grader = {"name": "g", "command": [sys.executable, "-c", "print('{\"score\": 1}')"]}
    cases = [{"id": "c", "input": "q", "output": "a"}]
    targets = [{"name": "judge", "kind": "mock", "default": "yes"}]
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
    env = cli_env(RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1")
    result = run_cli(
        str(path), "--out", str(tmp_path / "out"), "--executor", "ray", cwd=tmp_path, env=env
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "not 127.0.0.1 only" in result.stderr
    assert not (tmp_path / "out").exists()
