"""End-to-end figures for ``evalrun`` as a user runs it, printed as one table of ratios measured
in the same run (so a slow or busy machine slows both sides of each ratio alike).

    python bench/bench_e2e.py [--cases 200] [--workers 8] [--latency-ms 50] [--runs 30]

1. Efficiency: ``evalrun`` runs N cases whose grader (a Python SDK grader, a real process) makes
   3 sequential judge calls through the proxy to a ``mock`` judge answering after L ms.
   ideal = ceil(N / workers) * 3 * L: every worker busy all the time, every call taking exactly
   the judge's latency, and nothing else costing anything (not even starting the grader).
   efficiency = ideal / measured, with measured = the runner's own duration (summary.json
   ``duration_s``: first case started to last result written). A second figure adds the
   unavoidable cost of starting the grader process (its measured median start-up, from 2) to
   the ideal, which leaves what evalrun itself adds: proxy, scheduling, payloads, results.
2. Grader start-up: a Python SDK grader (``import grader_sdk``, read the payload, print a
   result) against a bare ``python -c pass``: alternating runs after warm-up, ratio of medians.
3. Memory: peak RSS (``wait4`` rusage of the ``evalrun`` process) for 10x the cases against 1x,
   with the deterministic ``contains`` grader so no process is started per case.

Child Pythons get a bytecode cache (PYTHONPYCACHEPREFIX in a temporary folder, as a normal
install has) even where PYTHONDONTWRITEBYTECODE is set, so start-up is not compile time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SDK_GRADER = """
import json, os
from grader_sdk import TargetClient, script_grader

CALLS = int(os.environ.get("BENCH_JUDGE_CALLS", "0"))


@script_grader
def grade(inp):
    client = TargetClient.from_env() if CALLS else None
    for i in range(CALLS):
        client.invoke(f"{inp.question} (call {i})")
    return {"score": 1.0, "reason": "ok"}
"""

PAYLOAD = json.dumps(
    {
        "protocol": "evalrun.grader/1",
        "case_id": "c1",
        "question": "What is the capital of France?",
        "criteria": "Paris",
        "input": [{"role": "user", "content": "What is the capital of France?"}],
        "output": "Paris.",
        "messages": [{"role": "assistant", "content": "Paris."}],
        "expected_output": [],
        "reference_answer": "Paris",
        "config": {},
        "metadata": {},
        "grader": {"name": "bench", "max_calls": 0},
        "attempt": 0,
    }
).encode()


@dataclass
class Row:
    name: str
    measured: str
    baseline: str
    ratio: float
    aim: str
    ok: bool


def child_env(cache_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def write_suite(folder: Path, cases: int, graders: list[dict], judge: dict | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    targets = [judge] if judge else []
    (folder / "targets.yaml").write_text(json.dumps({"targets": targets}))
    with open(folder / "cases.jsonl", "w") as f:
        for i in range(cases):
            case = {"id": f"case-{i:05d}", "input": f"Question number {i}?", "output": f"Paris {i}"}
            f.write(json.dumps(case) + "\n")
    suite = {"graders": graders, "tests": "cases.jsonl"}
    if judge:
        suite["judge"] = judge["name"]
    path = folder / "bench.eval.yaml"
    path.write_text(json.dumps(suite))
    return path


def run_evalrun(path: Path, out: Path, workers: int, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one ``evalrun`` process."""
    argv = [sys.executable, "-m", "evalrun", str(path), "--out", str(out), "--quiet"]
    argv += ["--workers", str(workers), "--no-cache"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=path.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"evalrun exited {proc.returncode}: {err[-2000:]}")
    return wall, usage.ru_maxrss


def startup(work: Path, runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Median seconds of a bare Python and of an SDK grader, alternating, after warm-up."""
    grader = work / "sdk_grader.py"
    grader.write_text(SDK_GRADER)
    bare = [sys.executable, "-c", "pass"]
    sdk = [sys.executable, str(grader)]

    def once(argv: list[str]) -> float:
        started = time.perf_counter()
        subprocess.run(argv, input=PAYLOAD, env=env, stdout=subprocess.DEVNULL, check=True)
        return time.perf_counter() - started

    for _ in range(3):
        once(bare), once(sdk)
    bare_times, sdk_times = [], []
    for _ in range(runs):
        bare_times.append(once(bare))
        sdk_times.append(once(sdk))
    return statistics.median(bare_times), statistics.median(sdk_times)


def efficiency(
    work: Path, cases: int, workers: int, latency_ms: float, calls: int, env: dict[str, str]
) -> tuple[float, float, float]:
    """(runner seconds, process wall seconds, ideal seconds) for the judge-calling suite."""
    folder = work / "efficiency"
    (folder).mkdir(parents=True, exist_ok=True)
    (folder / "sdk_grader.py").write_text(SDK_GRADER)
    grader = {
        "name": "judged",
        "command": [sys.executable, "sdk_grader.py"],
        "target": {"max_calls": calls},
    }
    judge = {
        "name": "judge",
        "kind": "mock",
        "default": '{"relevant": true}',
        "latency_ms": latency_ms,
        "max_concurrency": workers,
    }
    path = write_suite(folder, cases, [grader], judge)
    out = folder / "out"
    wall, _ = run_evalrun(path, out, workers, {**env, "BENCH_JUDGE_CALLS": str(calls)})
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["passed"] == cases, summary["counts"]
    calls_made = sum(
        json.loads(line)["graders"][0]["proxy"]["calls"]
        for line in (out / "results.jsonl").read_text().splitlines()
    )
    assert calls_made == cases * calls, calls_made
    ideal = math.ceil(cases / workers) * calls * latency_ms / 1000
    return summary["duration_s"], wall, ideal


def memory(work: Path, small: int, factor: int, env: dict[str, str]) -> tuple[int, int]:
    grader = {"name": "has-paris", "type": "contains", "value": "Paris"}
    peaks = []
    for n in (small, small * factor):
        path = write_suite(work / f"memory-{n}", n, [grader], None)
        _, peak = run_evalrun(path, work / f"memory-{n}" / "out", 8, env)
        peaks.append(peak)
    return peaks[0], peaks[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--calls", type=int, default=3, help="judge calls per grader run")
    parser.add_argument("--runs", type=int, default=30, help="start-up runs per side")
    parser.add_argument("--memory-cases", type=int, default=1000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="evalrun-bench-") as tmp:
        work = Path(tmp)
        env = child_env(work / "pycache")
        bare_s, sdk_s = startup(work, args.runs, env)
        runner_s, wall_s, ideal_s = efficiency(
            work, args.cases, args.workers, args.latency_ms, args.calls, env
        )
        small_kib, big_kib = memory(work, args.memory_cases, 10, env)

    rounds = math.ceil(args.cases / args.workers)
    ideal_with_start = ideal_s + rounds * sdk_s
    rows = [
        Row(
            f"efficiency ({args.cases} cases, {args.workers} workers)",
            f"{runner_s:.2f} s",
            f"{ideal_s:.2f} s ideal",
            ideal_s / runner_s,
            ">= 0.85",
            ideal_s / runner_s >= 0.85,
        ),
        Row(
            "  same, ideal incl. grader start-up",
            f"{runner_s:.2f} s",
            f"{ideal_with_start:.2f} s ideal",
            ideal_with_start / runner_s,
            ">= 0.85",
            ideal_with_start / runner_s >= 0.85,
        ),
        Row(
            "  same, whole CLI process",
            f"{wall_s:.2f} s",
            f"{ideal_s:.2f} s ideal",
            ideal_s / wall_s,
            "-",
            True,
        ),
        Row(
            "grader start-up, SDK vs bare",
            f"{sdk_s * 1000:.1f} ms",
            f"{bare_s * 1000:.1f} ms",
            sdk_s / bare_s,
            "<= 1.5x",
            sdk_s / bare_s <= 1.5,
        ),
        Row(
            f"peak RSS, {args.memory_cases * 10} vs {args.memory_cases} cases",
            f"{big_kib / 1024:.1f} MiB",
            f"{small_kib / 1024:.1f} MiB",
            big_kib / small_kib,
            "flat (<= 1.2x)",
            big_kib / small_kib <= 1.2,
        ),
    ]
    print(f"\n{'':<44}{'measured':>12}{'baseline':>17}{'ratio':>8}  {'aim':<15}")
    for row in rows:
        mark = "" if row.ok else "  MISSED"
        print(
            f"{row.name:<44}{row.measured:>12}{row.baseline:>17}{row.ratio:>8.2f}  {row.aim:<15}{mark}"
        )
    print(
        f"\nideal = ceil({args.cases}/{args.workers}) x {args.calls} calls x "
        f"{args.latency_ms:g} ms; start-up: median of {args.runs} alternating runs per side; "
        f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}"
    )


if __name__ == "__main__":
    main()
