"""Start-up and memory figures for ``evalrun`` as a user runs it, printed as one table of ratios
measured in the same run (a busy machine slows both sides of each ratio alike).

    python bench/bench_e2e.py [--runs 30] [--memory-cases 1000]

Speed end to end (wall time against the latency and CPU floors, stream mode against one process
per case, promptfoo side by side) is ``bench/bench_speed.py``.

Grader start-up. A Python SDK grader (``import grader_sdk``, read the payload, print a result)
against a bare ``python -c pass``: alternating runs after warm-up, ratio of the medians. In stream
mode (docs/grader-protocol.md) a grader pays it once per worker, not once per case.

Memory. Peak RSS (``wait4`` rusage) of the ``evalrun`` process for 10x the cases against 1x,
with the deterministic ``contains`` grader (no process per case), and of the runner alone
(no reports) to tell the two apart.

Child Pythons get a bytecode cache (PYTHONPYCACHEPREFIX in a temporary folder, as a normal
install has) even where PYTHONDONTWRITEBYTECODE is set, so start-up is not compile time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SDK_GRADER = """
import os
from grader_sdk import TargetClient, script_grader

CALLS = int(os.environ.get("BENCH_JUDGE_CALLS", "0"))


@script_grader
def grade(inp):
    client = TargetClient.from_env() if CALLS else None
    for i in range(CALLS):
        client.invoke(f"{inp.question} (call {i})")
    return {"score": 1.0, "reason": "ok"}
"""

RUNNER_ONLY = """
import asyncio, sys
from pathlib import Path
from evalrun.runner.options import RunOptions
from evalrun.runner.plan import plan_run
from evalrun.runner.runner import EvalRun
from evalrun.spec.loader import load_eval

options = RunOptions(out=Path(sys.argv[2]), workers=int(sys.argv[3]), quiet=True)
asyncio.run(EvalRun(plan_run(load_eval(Path(sys.argv[1])), options)).run())
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
class Measured:
    """One ``evalrun`` process: wall and CPU seconds (itself and the graders it waited for),
    peak RSS in KiB, and the run bundle it wrote."""

    wall_s: float
    cpu_s: float
    peak_kib: int
    out: Path

    @property
    def summary(self) -> dict:
        return json.loads((self.out / "summary.json").read_text())


@dataclass
class Row:
    name: str
    measured: str
    baseline: str
    ratio: float
    aim: str = ""
    ok: bool = True


def unpack_commit(ref: str, folder: Path, *paths: str) -> None:
    """``paths`` (default: everything) of commit ``ref`` of this repository, into ``folder``;
    ``CalledProcessError`` or ``OSError`` when it is not there to unpack."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, *paths],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True, timeout=120)


def child_env(cache_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def write_suite(folder: Path, cases: int, graders: list[dict], judge: dict | None) -> Path:
    rows = (
        {"id": f"case-{i:05d}", "input": f"Question number {i}?", "output": f"Paris {i}"}
        for i in range(cases)
    )
    return write_jsonl_suite(folder, rows, graders, judge)


def write_jsonl_suite(
    folder: Path, rows: Iterable[dict], graders: list[dict], judge: dict | None
) -> Path:
    """An eval file whose tests are ``rows`` in cases.jsonl, with ``judge`` its only target."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "targets.yaml").write_text(json.dumps({"targets": [judge] if judge else []}))
    with open(folder / "cases.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    suite: dict = {"graders": graders, "tests": "cases.jsonl"}
    if judge:
        suite["judge"] = judge["name"]
    path = folder / "bench.eval.yaml"
    path.write_text(json.dumps(suite))
    return path


def measure(argv: list[str], out: Path, env: dict[str, str], cwd: Path) -> Measured:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} exited {proc.returncode}")
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, out)


def run_cli(path: Path, workers: int, env: dict[str, str]) -> Measured:
    out = path.parent / "out"
    argv = [sys.executable, "-m", "evalrun", str(path), "--out", str(out), "--quiet"]
    argv += ["--workers", str(workers), "--no-cache"]
    return measure(argv, out, env, path.parent)


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


def memory_rows(work: Path, small: int, env: dict[str, str]) -> tuple[list[Row], list[str]]:
    grader = {"name": "has-paris", "type": "contains", "value": "Paris"}
    runner = work / "runner_only.py"
    runner.write_text(RUNNER_ONLY)
    cli: list[Measured] = []
    alone: list[Measured] = []
    sizes = (small, small * 10)
    for n in sizes:
        path = write_suite(work / f"memory-{n}", n, [grader], None)
        cli.append(run_cli(path, 8, env))
        out = path.parent / "out-runner"
        argv = [sys.executable, str(runner), str(path), str(out), "8"]
        alone.append(measure(argv, out, env, path.parent))
    extra = sizes[1] - sizes[0]
    rows = []
    notes = []
    labels = (
        f"peak RSS, {sizes[1]} vs {sizes[0]} cases: evalrun CLI",
        "  runner alone, no reports",
    )
    for label, (a, b) in zip(labels, (cli, alone), strict=True):
        ratio = b.peak_kib / a.peak_kib
        rows.append(
            Row(
                label,
                f"{b.peak_kib / 1024:.1f} MiB",
                f"{a.peak_kib / 1024:.1f} MiB",
                ratio,
                "flat (<= 1.2x)",
                ratio <= 1.2,
            )
        )
        notes.append(
            f"{label.split(': ')[-1].strip()}: {(b.peak_kib - a.peak_kib) / extra:.1f} KiB per extra case"
        )
    return rows, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="start-up runs per side")
    parser.add_argument("--memory-cases", type=int, default=1000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="evalrun-bench-") as tmp:
        work = Path(tmp)
        env = child_env(work / "pycache")
        bare_s, sdk_start_s = startup(work, args.runs, env)
        rows: list[Row] = []
        notes: list[str] = []
        rows.append(
            Row(
                "grader start-up: SDK grader vs python -c pass",
                f"{sdk_start_s * 1000:.1f} ms",
                f"{bare_s * 1000:.1f} ms",
                sdk_start_s / bare_s,
                "<= 1.5x",
                sdk_start_s / bare_s <= 1.5,
            )
        )
        memory, memory_notes = memory_rows(work, args.memory_cases, env)
        rows += memory
        notes += memory_notes

    width = max(len(r.name) for r in rows) + 2
    print(f"\n{'':<{width}}{'measured':>11}{'baseline':>11}{'ratio':>8}  aim")
    for row in rows:
        mark = "" if row.ok else "  (missed)"
        print(
            f"{row.name:<{width}}{row.measured:>11}{row.baseline:>11}{row.ratio:>8.2f}  "
            f"{row.aim}{mark}"
        )
    print()
    for note in notes:
        print(note)
    print(
        f"start-up: median of {args.runs} alternating runs per side; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"Python {sys.version.split()[0]}"
    )


if __name__ == "__main__":
    main()
