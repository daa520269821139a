"""Reports at scale: 10,000 and 100,000 ``contains`` cases through the real CLI, measured in
the same bench run so the ratios compare like with like.

    python bench/bench_reports.py [--small 10000] [--large 100000] [--baseline PATH]

Each size runs ``evalrun run`` in a fresh process (the CLI as a user runs it, reports written at
the end) on a tests file in JSONL, one ``contains`` grader, 1 case in 20 failing. The process
wraps the run command's ``_write_reports`` with a timer, so "reports" is the time spent writing
report.md, report.html and junit.xml, and "wall" is the whole process from start to exit
(imports included). The same two figures are also given in CPU seconds (the process's own CPU time,
and ``process_time`` around the reports), which a busy machine disturbs less than wall time.
Peak memory is the process's ``ru_maxrss``.

Printed: for each size the wall time, the reports' time and share of the wall time, the size of
report.html and the peak RSS; then the ratios 100,000 against 10,000 cases. ``--baseline PATH``
runs the same sizes with another checkout of evalrun first (e.g. a worktree of an older commit)
and prints both, side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Runs in the child: the CLI, with the run command's report writing timed (reading the bundle
#: for the reports, then writing them: ``_write_reports`` of the run's core, or of the command in
#: a checkout from before the core moved to ``evalrun/session.py``).
CHILD = """
import json, resource, sys, time
t0 = time.monotonic()
import evalrun.reporters
import evalrun.commands.run as run_command
try:  # the run's core moved out of the command (evalrun/session.py); older checkouts lack it
    import evalrun.session as run_core
except ImportError:
    run_core = run_command
spent, spent_cpu = [], []
original = run_core._write_reports

def timed(*args, **kwargs):
    start, start_cpu = time.monotonic(), time.process_time()
    try:
        return original(*args, **kwargs)
    finally:
        spent.append(time.monotonic() - start)
        spent_cpu.append(time.process_time() - start_cpu)

run_core._write_reports = timed
from evalrun.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
wall = time.monotonic() - t0
usage = resource.getrusage(resource.RUSAGE_SELF)
print("BENCH " + json.dumps({
    "wall_s": wall,
    "reports_s": sum(spent),
    "cpu_s": usage.ru_utime + usage.ru_stime,
    "reports_cpu_s": sum(spent_cpu),
    "peak_mib": usage.ru_maxrss / 1024,
}))
"""


def make_eval(folder: Path, cases: int) -> Path:
    """An eval file whose tests come from a JSONL file; every 20th case fails its grader."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "cases.jsonl", "w", encoding="utf-8") as handle:
        for i in range(cases):
            answer = "Lyon is in France." if i % 20 == 7 else "The capital of France is Paris."
            case = {
                "id": f"capital-{i:06d}",
                "input": f"Question {i}: what is the capital of France?",
                "output": answer,
            }
            handle.write(json.dumps(case) + "\n")
    path = folder / "bench.eval.yaml"
    path.write_text(
        "description: Report bench\n"
        "graders:\n  - type: contains\n    value: Paris\n"
        "tests: cases.jsonl\n",
        encoding="utf-8",
    )
    return path


def run_once(tree: Path, eval_file: Path, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("GITHUB_ACTIONS", None)
    argv = [sys.executable, "-c", CHILD, "run", str(eval_file), "--out", str(out), "--quiet"]
    argv += ["--workers", "8"]
    proc = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"bench run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    figures = json.loads(line.removeprefix("BENCH "))
    figures["html_mib"] = (out / "report.html").stat().st_size / 2**20
    return figures


def measure(tree: Path, evals: dict[int, Path], scratch: Path, tag: str) -> dict[int, dict]:
    results = {}
    for size, eval_file in evals.items():
        results[size] = run_once(tree, eval_file, scratch / f"{tag}-{size}")
    return results


def show(label: str, results: dict[int, dict], small: int, large: int) -> None:
    print(f"\n{label}")
    print(
        f"{'cases':>8} {'wall s':>7} {'reports s':>9} {'share':>6} {'cpu s':>7} "
        f"{'reports cpu s':>13} {'cpu share':>9} {'html MiB':>8} {'peak MiB':>8}"
    )
    for size, r in results.items():
        share = r["reports_s"] / r["wall_s"]
        cpu_share = r["reports_cpu_s"] / r["cpu_s"]
        print(
            f"{size:>8,} {r['wall_s']:>7.2f} {r['reports_s']:>9.2f} {share:>6.1%} "
            f"{r['cpu_s']:>7.2f} {r['reports_cpu_s']:>13.2f} {cpu_share:>9.1%} "
            f"{r['html_mib']:>8.1f} {r['peak_mib']:>8.1f}"
        )
    a, b = results[small], results[large]
    print(
        f"{large:,} vs {small:,} cases: wall {b['wall_s'] / a['wall_s']:.2f}x, "
        f"reports {b['reports_s'] / a['reports_s']:.2f}x, peak memory "
        f"{b['peak_mib'] / a['peak_mib']:.2f}x (aims: share <= 15%, html <= 25 MiB, "
        "memory <= 1.3x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--baseline", type=Path, help="another evalrun checkout to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reports-") as tmp:
        scratch = Path(tmp)
        evals = {n: make_eval(scratch / f"eval-{n}", n) for n in (args.small, args.large)}
        if args.baseline:
            base = measure(args.baseline.resolve(), evals, scratch, "baseline")
            show(f"baseline: {args.baseline}", base, args.small, args.large)
        now = measure(ROOT, evals, scratch, "this")
        show(f"this tree: {ROOT}", now, args.small, args.large)
        if args.baseline:
            b, n = base[args.large], now[args.large]
            print(
                f"\nthis tree vs baseline at {args.large:,} cases: wall "
                f"{b['wall_s'] / n['wall_s']:.2f}x faster, reports "
                f"{b['reports_s'] / n['reports_s']:.2f}x faster, html "
                f"{b['html_mib'] / n['html_mib']:.2f}x smaller, peak memory "
                f"{b['peak_mib'] / n['peak_mib']:.2f}x lower"
            )


if __name__ == "__main__":
    main()
