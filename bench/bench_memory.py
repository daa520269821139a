"""Memory at width: the whole process tree of a wide run (evalrun, its proxy, every grader
worker and every sandbox process), its PSS summed and sampled while the run goes, against the
aim of docs/performance.md ("Memory at width").

    python bench/bench_memory.py [--cases 2000] [--workers 64] [--latency-ms 500] [--sandbox auto]

The eval has two built-in graders (contextual precision and an LLM rubric, both judged by a
loopback fake of OpenAI's API, ``bench/fake_judge.py``, not part of the tree measured). CPU is
read from a cgroup where one can be had (``bench/treestats.py``); the output says which source.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_e2e import child_env
from bench_speed import FakeJudge, bench_python, evalrun_suite, judge_target
from treestats import TreeSampler, cpu_meter

AIM_MB = 400.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--sandbox", default="auto")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between samples")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalrun-bench-") as tmp:
        work = Path(tmp)
        python = bench_python(work)
        env = child_env(work / "pycache")
        judge = FakeJudge(args.latency_ms)
        meter = cpu_meter()
        try:
            graders = [
                {
                    "name": "cp",
                    "type": "contextual-precision",
                    "target": {"max_calls": 5},
                    "config": {"mode": "per-item"},  # the fake judge answers one item a call
                },
                {"name": "rubric", "type": "llm-rubric", "config": {"rubric": ["Names Paris"]}},
            ]
            suite = evalrun_suite(work / "wide", args.cases, graders, judge_target(judge))
            out = suite.parent / "out"
            argv = [python, "-m", "evalrun", str(suite), "--out", str(out), "--quiet"]
            argv += ["--workers", str(args.workers), "--no-cache", "--sandbox", args.sandbox]
            before = meter.read() if meter.read is not None else 0.0
            started = time.perf_counter()
            proc = subprocess.Popen(
                argv,
                cwd=suite.parent,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=meter.preexec,
            )
            with TreeSampler(proc.pid, args.interval) as sampler:
                _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - started
            cpu = meter.read() - before if meter.read is not None else None
            assert proc.stderr is not None
            stderr = proc.stderr.read().decode(errors="replace")
            code = os.waitstatus_to_exitcode(status)
            if code not in (0, 1):
                raise SystemExit(f"evalrun exited {code}:\n{stderr[-2000:]}")
            if not (out / "summary.json").exists():
                raise SystemExit(f"evalrun wrote no summary (exit {code}):\n{stderr[-2000:]}")
            counts = json.loads((out / "summary.json").read_text())["counts"]
        finally:
            judge.close()
            meter.cleanup()
    peak = sampler.result.peak
    pss_mb = peak.pss_kib * 1024 / 1e6
    waited = usage.ru_utime + usage.ru_stime
    met = pss_mb <= AIM_MB
    print(
        f"\n{args.cases} cases, 2 built-in graders, {args.workers} workers, "
        f"{args.latency_ms:g} ms judge, --sandbox {args.sandbox}"
    )
    print(f"cases: {counts}")
    print(f"wall {wall:.2f} s")
    print(
        f"CPU {cpu:.2f} s from {meter.source}; wait4 counted {waited:.2f} s"
        if cpu is not None
        else f"CPU {waited:.2f} s from {meter.source}"
    )
    print(
        f"peak tree PSS {pss_mb:.1f} MB over {peak.processes} processes "
        f"({peak.unreadable} unreadable); most processes at once {sampler.result.most_processes}; "
        f"{sampler.result.samples} samples every {args.interval:g} s"
    )
    verdict = "met" if met else f"missed by {pss_mb - AIM_MB:.1f} MB"
    print(f"aim: whole-tree PSS <= {AIM_MB:g} MB: {verdict}")
    print(f"load average {os.getloadavg()[0]:.1f}; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
