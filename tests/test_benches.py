"""``make bench`` keeps working: every bench runs to the end, at small sizes where it has size
options (``bench_local.py`` has none and runs in full); its figures are not checked here (tests
never assert wall time). A move of code a bench imports, or of a baseline it reads, fails here
instead of the next time someone measures. Marked ``bench``: ``.ci/run`` runs them, a plain
``pytest`` does not."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

SMALL = {
    "bench_e2e.py": (["--runs", "3", "--memory-cases", "100"], "grader start-up"),
    "bench_judge_tokens.py": (["--cases", "6"], "| evalrun batched |"),
    "bench_local.py": ([], '"baseline"'),
    "bench_memory.py": (
        ["--cases", "40", "--workers", "8", "--latency-ms", "20"],
        "whole-tree PSS",
    ),
    "bench_peers.py": (["--cases", "12", "--hang-s", "2"], "limit low/start"),
    "bench_proxy.py": (["--calls", "100", "--seconds", "0.5", "--clients", "4"], "via proxy"),
    "bench_ray.py": (["--cases", "8", "--workers", "2"], "ray/local"),
    "bench_reports.py": (["--small", "200", "--large", "2000"], "peak memory"),
    "bench_sandbox.py": (["--runs", "3"], "grader start-up"),
    "bench_speed.py": (
        [
            "--cases",
            "16",
            "--workers",
            "4",
            "--latency-ms",
            "20",
            "--no-promptfoo",
            "--steady-cases",
            "32",
        ]
        + ["--wide-calls", "20", "--wide-workers", "10", "--wide-latency-ms", "200"],
        "contextual precision",
    ),
}


def test_every_bench_of_make_bench_is_listed() -> None:
    assert sorted(SMALL) == sorted(p.name for p in (ROOT / "bench").glob("bench_*.py"))


@pytest.mark.bench
@pytest.mark.parametrize("script", sorted(SMALL))
def test_the_bench_runs_to_the_end(script: str) -> None:
    if script == "bench_ray.py":
        pytest.importorskip("ray", reason="bench_ray.py needs the [ray] extra")
    args, expected = SMALL[script]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected in done.stdout, done.stdout[-3000:]
