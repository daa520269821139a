"""evalrun against DeepEval and RAGAS on the same RAG cases and the same judge, with the judge's
faults of issue #36: every ratio measured in one run, each pair alternating.

    python bench/bench_peers.py [--cases 200] [--concurrency 8] [--latency-ms 50] [--runs 1]
        [--peers-python /work/peers/.venv/bin/python] [--rows plain,hang,throttle]
    python bench/bench_peers.py --only evalrun --row hang     # one run of one tool, for timing

The judge is ``bench/fake_judge.py`` (OpenAI's wire format over loopback, its own process),
restarted at each run with its seed, so every tool meets the same faults in the same order:

- ``plain``: every call answered after the latency;
- ``hang``: 5% of calls held ``--hang-s`` (30) seconds before their answer;
- ``throttle``: 20% of calls answered 429 at random, whatever the load.

Each case is a question, a reference answer and three retrieved passages marked ``[[rel]]`` or
``[[irr]]``; the judge answers every tool's prompt with the verdicts of those marks, so the
tools must agree on every contextual precision score (the count that differ is printed).
evalrun runs its built-in ``contextual-precision`` grader (``--workers N``); DeepEval its
``ContextualPrecisionMetric`` and RAGAS its ``LLMContextPrecisionWithReference``, each driven by
``bench/peer_driver.py`` at N cases at once in the interpreter ``--peers-python`` names (a
separate environment: neither is a dependency of evalrun). A peer whose packages that
interpreter lacks is skipped with a line saying why. Wall time is the whole process, from spawn
to exit. For evalrun the adaptive limit's lowest value and its start come from
``summary.json``; a case fails when a tool gave it no score.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
PEERS = ("deepeval", "ragas")
TOOLS = ("evalrun", *PEERS)
#: the judge's faults per row (fake_judge.py's options)
ROWS = {
    "plain": [],
    "hang": ["--hang-share", "0.05"],
    "throttle": ["--throttle-share", "0.2"],
}
#: the model name every tool is told: DeepEval accepts only the names of models it knows
MODEL = "gpt-4o-mini"
#: two scores agree when they are this close (RAGAS divides by R + 1e-10)
TOLERANCE = 1e-9


@dataclass
class Outcome:
    """One tool's run: wall seconds, score per case (None: the case failed), and for evalrun
    the judge target's limit figures from summary.json."""

    wall_s: float
    scores: dict[str, float | None]
    judge_calls: int
    limit_start: int | None = None
    limit_low: int | None = None

    @property
    def failed(self) -> int:
        return sum(score is None for score in self.scores.values())


@dataclass
class Row:
    name: str
    runs: dict[str, list[Outcome]] = field(default_factory=dict)

    def median_wall(self, tool: str) -> float:
        return statistics.median(o.wall_s for o in self.runs[tool])


def make_cases(n: int, seed: int) -> list[dict]:
    """``n`` cases of three passages each, relevance drawn from ``seed``."""
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        marks = [rng.random() < 0.5 for _ in range(3)]
        passages = [
            f"Passage {k} for case {i} {'[[rel]]' if rel else '[[irr]]'}: "
            + (f"item {i} is kept in drawer {i % 7}." if rel else f"the weather on day {k}.")
            for k, rel in enumerate(marks, 1)
        ]
        cases.append(
            {
                "id": f"case-{i:04d}",
                "question": f"Where is item {i} kept?",
                "reference": f"Item {i} is kept in drawer {i % 7}.",
                "passages": passages,
            }
        )
    return cases


def evalrun_suite(folder: Path, cases: list[dict], url: str) -> Path:
    """The cases as an eval file of evalrun's built-in grader, the fake as its judge."""
    rows = [
        {
            "id": case["id"],
            "input": case["question"],
            "output": case["reference"],
            "criteria": case["reference"],
            "expected_output": [
                {
                    "role": "assistant",
                    "tool_calls": [{"tool": "retrieve", "input": {}, "output": case["passages"]}],
                }
            ],
        }
        for case in cases
    ]
    judge = {"name": "judge", "kind": "openai", "model": MODEL, "base_url": url, "temperature": 0}
    (folder / "targets.yaml").write_text(json.dumps({"targets": [judge]}))
    (folder / "cases.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    grader = {"name": "cp", "type": "contextual-precision", "target": {"max_calls": 10}}
    suite = {"judge": "judge", "graders": [grader], "tests": "cases.jsonl"}
    path = folder / "peers.eval.yaml"
    path.write_text(json.dumps(suite))
    return path


class FakeJudge:
    """``fake_judge.py`` with a row's faults, in its own process."""

    def __init__(self, latency_ms: float, faults: list[str]) -> None:
        argv = [sys.executable, str(BENCH / "fake_judge.py"), "--latency-ms", str(latency_ms)]
        self.proc = subprocess.Popen([*argv, *faults], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def call(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=10) as reply:
            return json.loads(reply.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None, ok: int = 0) -> float:
    """Wall seconds of ``argv``, which must exit 0 or ``ok`` (evalrun: 1, a case below its
    threshold)."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, ok):
        raise SystemExit(f"{' '.join(argv[:4])} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return wall


def run_evalrun(folder: Path, cases: list[dict], judge: FakeJudge, concurrency: int) -> Outcome:
    path = evalrun_suite(folder, cases, f"{judge.url}/v1")
    out = folder / "out"
    argv = [sys.executable, "-m", "evalrun", str(path), "--out", str(out), "--quiet"]
    argv += ["--workers", str(concurrency), "--no-cache"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    wall = timed(argv, folder, env, ok=1)
    scores: dict[str, float | None] = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        case = json.loads(line)
        scores[case["id"]] = case["graders"][0].get("score")
    summary = json.loads((out / "summary.json").read_text())
    limit = summary["targets"]["judge"]
    return Outcome(
        wall,
        scores,
        judge.call("/stats")["requests"],
        limit["concurrency_start"],
        limit["concurrency_limit_low"],
    )


def run_peer(
    peer: str, python: str, folder: Path, cases: list[dict], judge: FakeJudge, concurrency: int
) -> Outcome:
    (folder / "cases.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    scores_file = folder / "scores.json"
    argv = [python, str(BENCH / "peer_driver.py"), peer, str(folder / "cases.jsonl")]
    argv += [str(scores_file), f"{judge.url}/v1", MODEL, str(concurrency)]
    wall = timed(argv, folder)
    scores = json.loads(scores_file.read_text())
    return Outcome(wall, {case["id"]: scores.get(case["id"]) for case in cases}, 0)


def missing_peers(python: str | None) -> dict[str, str]:
    """Why each peer cannot run (none: it can)."""
    if python is None:
        return {peer: "no --peers-python given" for peer in PEERS}
    why = {}
    for peer in PEERS:
        probe = subprocess.run(
            [python, "-c", f"import {peer}"], capture_output=True, text=True, timeout=120
        )
        if probe.returncode:
            why[peer] = f"not importable by {python}: {probe.stderr.strip().splitlines()[-1:]}"
    return why


def one_run(tool: str, args: argparse.Namespace, row: str, cases: list[dict]) -> Outcome:
    judge = FakeJudge(args.latency_ms, [*ROWS[row], "--hang-s", str(args.hang_s)])
    try:
        with tempfile.TemporaryDirectory(prefix=f"peers-{tool}-") as tmp:
            if tool == "evalrun":
                outcome = run_evalrun(Path(tmp), cases, judge, args.concurrency)
            else:
                outcome = run_peer(
                    tool, args.peers_python, Path(tmp), cases, judge, args.concurrency
                )
            outcome.judge_calls = judge.call("/stats")["requests"]
            return outcome
    finally:
        judge.close()


def differing(a: Outcome, b: Outcome) -> int:
    """Cases both scored whose scores differ by more than ``TOLERANCE``."""
    both = [(x, b.scores.get(case)) for case, x in a.scores.items()]
    return sum(1 for x, y in both if x is not None and y is not None and abs(x - y) > TOLERANCE)


def report(rows: list[Row], tools: list[str]) -> None:
    peers = [t for t in tools if t != "evalrun"]
    head = f"{'row':<9} {'evalrun s':>9}"
    for peer in peers:
        head += f" {peer + ' s':>11} {peer + '/evalrun':>17}"
    print(head + f" {'limit low/start':>15} {'failed':>8} {'calls/case':>16} {'differ':>7}")
    for row in rows:
        ours = row.runs["evalrun"]
        line = f"{row.name:<9} {row.median_wall('evalrun'):>9.1f}"
        for peer in peers:
            ratios = [p.wall_s / e.wall_s for p, e in zip(row.runs[peer], ours, strict=True)]
            line += f" {row.median_wall(peer):>11.1f} {statistics.median(ratios):>16.2f}x"
        low = min(o.limit_low or 0 for o in ours)
        line += f" {f'{low}/{ours[0].limit_start}':>15}"
        failed = "/".join(str(max(o.failed for o in row.runs[t])) for t in tools)
        cases = len(ours[0].scores)
        calls = "/".join(
            f"{statistics.median(o.judge_calls for o in row.runs[t]) / cases:.2f}" for t in tools
        )
        differ = "/".join(str(max(map(differing, row.runs[p], ours))) for p in peers)
        print(line + f" {failed:>8} {calls:>16} {differ or '-':>7}")
    print(
        f"failed cases (the most in any run), judge calls per case (median): {'/'.join(tools)}; "
        f"differ: cases whose scores differ by more than {TOLERANCE:g}, each peer against evalrun"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--hang-s", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=1, help="alternating runs of each pair")
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument(
        "--peers-python",
        default=os.environ.get("BENCH_PEERS_PYTHON"),
        help="an interpreter with deepeval and ragas (default: $BENCH_PEERS_PYTHON)",
    )
    parser.add_argument("--only", choices=TOOLS, help="one run of this tool (with --row)")
    parser.add_argument("--row", choices=list(ROWS), default="plain")
    parser.add_argument("--seed", type=int, default=36)
    args = parser.parse_args()
    cases = make_cases(args.cases, args.seed)
    if args.only:
        outcome = one_run(args.only, args, args.row, cases)
        limit = f", limit low/start {outcome.limit_low}/{outcome.limit_start}"
        print(
            f"{args.only} {args.row}: {outcome.wall_s:.1f} s, {outcome.failed} failed cases, "
            f"{outcome.judge_calls} judge calls{limit if args.only == 'evalrun' else ''}"
        )
        return
    skipped = missing_peers(args.peers_python)
    for peer, why in skipped.items():
        print(f"{peer}: skipped ({why})")
    tools = [t for t in TOOLS if t not in skipped]
    rows = []
    for name in args.rows.split(","):
        row = Row(name, {tool: [] for tool in tools})
        for run in range(args.runs):
            order = tools if run % 2 == 0 else tools[::-1]
            for tool in order:
                row.runs[tool].append(one_run(tool, args, name, cases))
        rows.append(row)
    print(f"{args.cases} cases, {args.concurrency} at once, judge {args.latency_ms:g} ms")
    report(rows, tools)


if __name__ == "__main__":
    main()
