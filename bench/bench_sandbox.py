"""What the grader sandbox costs per grader start: ``process`` and ``strict`` vs ``none``.

    python bench/bench_sandbox.py [--runs 40]

Each round starts the same grader once per level, in turn (so drift on a shared machine hits
every level alike), through the launcher's own ``run_process``; the ratios of the medians are
what to read. Two graders: a shell one-liner (start-up is almost all sandbox) and a Python
grader that reads its payload (a typical grader's own start-up cost).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalrun.launcher.process import run_process  # noqa: E402
from evalrun.launcher.sandbox import Sandbox, why_unavailable  # noqa: E402

GRADERS = {
    "sh": ["sh", "-c", "cat >/dev/null; echo '{\"score\": 1}'"],
    "python": [
        sys.executable,
        "-c",
        "import json, sys; json.load(sys.stdin); print(json.dumps({'score': 1}))",
    ],
}
LEVELS = ("none", "process", "strict")


async def _time_one(argv: list[str], level: str, cwd: Path) -> float:
    outcome = await run_process(
        Sandbox(level, scratch=cwd).wrap(argv, cwd),  # strict: its scratch folders go there
        b'{"question": "q"}',
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert outcome.exit_code == 0 and b"score" in outcome.stdout, outcome
    return outcome.duration_ms


async def main(runs: int) -> None:
    reason = why_unavailable()
    if reason:
        print(f"skipped: {reason}")
        return
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        for name, argv in GRADERS.items():
            times: dict[str, list[float]] = {level: [] for level in LEVELS}
            for _ in range(runs):
                for level in LEVELS:
                    times[level].append(await _time_one(argv, level, cwd))
            medians = {level: statistics.median(values) for level, values in times.items()}
            base = medians["none"]
            cells = ", ".join(f"{level} {medians[level]:.1f} ms" for level in LEVELS)
            ratios = ", ".join(f"{level}/none {medians[level] / base:.2f}x" for level in LEVELS[1:])
            print(f"{name:>6} grader start-up (median of {runs}): {cells}; {ratios}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    asyncio.run(main(parser.parse_args().runs))
