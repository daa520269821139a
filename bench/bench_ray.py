"""The Ray executor's overhead on one machine: the same 200 cases run locally and on a local
Ray cluster (2 CPUs, started once here with ``ray start``, so its start-up is not counted).

    python bench/bench_ray.py [--cases 200] [--workers 8]

Whole-process wall time of ``evalrun run``; the ratio ray/local in one run is what to read.
Each case runs one Python grader process, as a code grader would. Skipped without Ray.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalrun.targets.extras import install_hint

ROOT = Path(__file__).resolve().parents[1]
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "PYTHONPATH": str(ROOT),
}
GRADER = "import json, sys; json.load(sys.stdin); print(json.dumps({'score': 1.0}))\n"


def _suite(folder: Path, cases: int) -> Path:
    (folder / "grader.py").write_text(GRADER)
    (folder / "targets.yaml").write_text(
        json.dumps({"targets": [{"name": "judge", "kind": "mock"}]})
    )
    tests = [{"id": f"case-{i}", "input": "q", "output": "a"} for i in range(cases)]
    suite = {
        "judge": "judge",
        "graders": [{"command": [sys.executable, "grader.py"]}],
        "tests": tests,
    }
    path = folder / "bench.eval.yaml"
    path.write_text(json.dumps(suite))
    return path


def _wall(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "evalrun", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"evalrun failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - started


def main(cases: int, workers: int) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        print(f"skipped: Ray is not installed ({install_hint('ray')})")
        return
    env = {**os.environ, **RAY_ENV}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    head = subprocess.Popen(
        # Ray's CLI by module: a venv made with --system-site-packages has no `ray` script
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--num-cpus", "2",
         "--port", str(port), "--include-dashboard", "false", "--disable-usage-stats"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            if head.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("ray start failed")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.2)
        with tempfile.TemporaryDirectory() as folder:
            cwd = Path(folder)
            path = _suite(cwd, cases)
            common = [str(path), "-q", "--workers", str(workers), "--no-cache"]
            local = _wall([*common, "--out", "local"], cwd, env)
            remote = _wall(
                [
                    *common,
                    "--out",
                    "ray",
                    "--executor",
                    "ray",
                    "--ray-address",
                    f"127.0.0.1:{port}",
                ],
                cwd,
                env,
            )
        print(
            f"{cases} cases, --workers {workers}: local {local:.1f} s, ray (2-CPU local cluster) "
            f"{remote:.1f} s; ray/local {remote / local:.2f}x"
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    options = parser.parse_args()
    main(options.cases, options.workers)
