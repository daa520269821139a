"""How fast a real run is, end to end, against what it could be at best; every ratio measured in
the same run (a busy machine slows both sides alike).

    python bench/bench_speed.py [--cases 200] [--workers 8] [--latency-ms 50] [--runs 1]

Every row is one whole ``evalrun`` process (the CLI as a user runs it: imports, proxy start,
graders, reports), timed from spawn to exit. The judge is the real ``openai`` target talking to
a loopback fake (``bench/fake_judge.py``, its own process) that answers after a fixed latency.
The rows run with ``--sandbox none`` unless ``--sandbox`` says otherwise. CPU is read from a
cgroup where one can be had (``treestats.cpu_meter``: CPU inside a bubblewrap PID namespace
counts too), else from ``wait4``; the last line says which.
Each checkout first runs a few cases unmeasured, so every row finds its bytecode compiled (the
bench's bytecode cache starts empty), as an installed package has it. Every Python process of a
row (evalrun, its graders, promptfoo's ``python`` assertion) runs on a throwaway interpreter that
sees the checkout and this environment's packages on a plain ``sys.path`` (``bench_python``), as
a user's ``pip install evalrun`` does: a development install's import hook (``pip install -e``
puts one in a ``.pth`` file) costs every Python process ~13 ms that a user's install does not.

    latency floor = ceil(cases / workers) x judge rounds per case x latency
    CPU floor     = CPU seconds of the run (evalrun and every grader process) / CPU cores
    efficiency    = max(latency floor, CPU floor) / wall time

Rows:
- contextual precision (3 passages, one batch of 3 judge calls per case): stream mode (the
  default for built-in graders) against one process per case (``mode: process``, what every
  grader did before stream mode);
- one judge call per case (a Python SDK grader) and a deterministic Python grader, each against
  promptfoo (``llm-rubric``, ``python`` assertion) on the same cases and fake, when
  ``npx promptfoo`` works (``--promptfoo`` names another command); skipped otherwise, with
  why; evalrun runs these two under its default sandbox, whatever ``--sandbox`` says;
- the contextual precision row again on ``--steady-cases`` (2,000) cases;
- a judged custom SDK grader, one process per case, with ``PYTHONDONTWRITEBYTECODE=1`` and
  without (a ratio of CPU);
- 600 judge calls at 200 in flight against a 2 s judge (``--workers 200 --max-processes 200``,
  the judge configured with ``max_concurrency: 200``).
With ``--runs N`` each pair runs N times, alternating, and the median is shown. The restated
aims of docs/performance.md ("Aims") are printed last, each met or short by how much.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_e2e import child_env, unpack_commit, write_jsonl_suite
from treestats import CpuMeter, cpu_meter

ROOT = Path(__file__).resolve().parents[1]

ONE_CALL_GRADER = """\
from grader_sdk import GraderInput, TargetClient, parse_json_reply, script_grader


@script_grader
def grade(inp: GraderInput):
    reply = TargetClient.from_env().invoke(
        f"Does this answer meet the criteria?\\nCriteria: {inp.criteria}\\nAnswer: {inp.output}\\n"
        'Reply with JSON: {"pass": true|false, "reason": "..."}',
        temperature=0,
    )
    verdict = parse_json_reply(reply.raw_text)
    return {"pass": bool(verdict.get("pass")), "reason": str(verdict.get("reason", ""))}
"""

CHECK_GRADER = """\
from grader_sdk import GraderInput, script_grader


@script_grader
def grade(inp: GraderInput):
    return {"pass": "Paris" in (inp.output or ""), "reason": "looked for Paris"}
"""

PROMPTFOO_CHECK = """\
def get_assert(output, context):
    return "Paris" in output
"""

PASSAGES = [
    "Paris is the capital and largest city of France.",
    "The Eiffel Tower was finished in 1889.",
    "France borders Spain, Belgium and Germany.",
]


@dataclass
class Run:
    """One process: wall and CPU seconds (itself and every process it started, read from
    ``METER``)."""

    wall_s: float
    cpu_s: float
    judge_calls: int
    #: How long the fake judge really held a call, on average (None: no call).
    judge_hold_ms: float | None = None
    #: From the command's spawn to the first judge request (None: no call).
    start_s: float | None = None

    def efficiency(self, latency_floor: float) -> float:
        return max(latency_floor, self.cpu_s / CORES) / self.wall_s


CORES = os.cpu_count() or 1
#: main before stream mode: the side the contextual precision row's ">= 3x" aim is measured against
BASELINE_COMMIT = "2a6d360"
#: The interpreter of every measured process (``bench_python``); this one until main sets it.
PYTHON = sys.executable
#: Where every measured run's CPU is read from (``treestats.cpu_meter``); main sets it.
METER = CpuMeter("wait4 (misses CPU inside a bubblewrap PID namespace)", None, None)
#: The restated aims (docs/performance.md, "Aims"): start cost, steady state, 200 in flight,
#: and the CPU cost of ``PYTHONDONTWRITEBYTECODE=1`` for a judged custom grader.
START_AIM_S = 0.35
STEADY_AIM = 0.85
WIDE_AIM = 0.7
#: issue #36: promptfoo's wall time / evalrun's, deterministic and one judge call per case
PROMPTFOO_CHECK_AIM = 5.0
PROMPTFOO_JUDGED_AIM = 3.0
#: the sandbox of the rows measured against promptfoo: evalrun's default
PROMPTFOO_SANDBOX = "auto"
BYTECODE_AIM = 1.2


def bench_python(work: Path) -> str:
    """A virtual environment without packages of its own whose ``sys.path`` lists this one's
    site-packages: the same packages, minus the ``.pth`` import hooks found there (they run at
    every interpreter start). The checkout itself comes from ``PYTHONPATH`` (``child_env``)."""
    folder = work / "python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # a venv made with --system-site-packages finds its packages in the system's too
    found = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    packages = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *found])
    Path(site, "bench-packages.pth").write_text("\n".join(packages) + "\n")
    return str(python)


class FakeJudge:
    def __init__(self, latency_ms: float) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,  # not measured
                str(ROOT / "bench" / "fake_judge.py"),
                "--latency-ms",
                str(latency_ms),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def _get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=10) as reply:
            return json.loads(reply.read())

    def reset(self) -> None:
        self._get("/reset")

    def stats(self) -> tuple[int, float | None, float | None]:
        """(calls since the last reset, their mean hold in ms, when the first came)."""
        stats = self._get("/stats")
        return int(stats["requests"]), stats["mean_hold_ms"], stats["first_at"]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def baseline_checkout(work: Path) -> tuple[Path | None, str]:
    """``BASELINE_COMMIT`` of this repository, unpacked into ``work``; or None and why not."""
    folder = work / "baseline"
    folder.mkdir()
    try:
        unpack_commit(BASELINE_COMMIT, folder)
    except (OSError, subprocess.SubprocessError) as exc:
        return (
            None,
            f"baseline {BASELINE_COMMIT}: skipped (not in this checkout's git history: {exc})",
        )
    return folder, f"baseline: commit {BASELINE_COMMIT} (main before stream mode)"


def timed(argv: list[str], cwd: Path, env: dict[str, str], judge: FakeJudge) -> Run:
    judge.reset()
    cpu_before = METER.read() if METER.read is not None else 0.0
    spawned = time.monotonic()
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=METER.preexec,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    cpu = METER.read() - cpu_before if METER.read is not None else usage.ru_utime + usage.ru_stime
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{shlex.join(argv[:5])} exited {code}:\n{stderr[-2000:]}")
    calls, hold, first_at = judge.stats()
    return Run(wall, cpu, calls, hold, None if first_at is None else first_at - spawned)


def cases(n: int) -> list[dict]:
    return [
        {
            "id": f"case-{i:05d}",
            "question": f"What is the capital of France? (variant {i})",
            "answer": f"Paris is the capital of France (variant {i}).",
        }
        for i in range(n)
    ]


def precision_row(case: dict) -> dict:
    """A case whose retrieval (the expected tool call) is the three passages."""
    retrieval = {
        "tool": "vector_search",
        "input": {"query": case["question"]},
        "output": {"results": [f"{p} ({case['id']})" for p in PASSAGES]},
    }
    return {
        "id": case["id"],
        "input": case["question"],
        "criteria": "The answer names Paris as the capital.",
        "output": case["answer"],
        "expected_output": [{"role": "assistant", "tool_calls": [retrieval]}],
    }


def evalrun_suite(folder: Path, n: int, graders: list[dict], judge: dict | None) -> Path:
    return write_jsonl_suite(folder, map(precision_row, cases(n)), graders, judge)


def run_evalrun(
    path: Path,
    workers: int,
    env: dict[str, str],
    judge: FakeJudge,
    sandbox: str | None = None,
    python_args: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
) -> Run:
    """``sandbox``: the ``--sandbox`` level, None for a checkout that has no such option;
    ``python_args``: options of evalrun's own interpreter; ``options``: more of the run's."""
    shutil.rmtree(path.parent / "out", ignore_errors=True)  # the run before, with --runs N
    argv = [PYTHON, *python_args, "-m", "evalrun", str(path), "--out", str(path.parent / "out")]
    argv += ["--quiet", "--workers", str(workers), "--no-cache"]
    if sandbox is not None:
        argv += ["--sandbox", sandbox]
    run = timed([*argv, *options], path.parent, env, judge)
    summary = json.loads((path.parent / "out" / "summary.json").read_text())
    if summary["counts"]["error"] or summary["counts"]["unscored"]:
        raise SystemExit(f"{path}: cases errored: {summary['counts']}")
    return run


def judge_target(judge: FakeJudge, **extra: object) -> dict:
    return {
        "name": "judge",
        "kind": "openai",
        "model": "bench-judge",
        "base_url": f"{judge.url}/v1",
        "temperature": 0,
        **extra,
    }


def promptfoo_command(explicit: str | None) -> tuple[list[str] | None, str]:
    """The promptfoo command, or None and why not (promptfoo checks its Node.js version
    itself: 0.123 asks for 22.22 or later)."""
    command = shlex.split(explicit) if explicit else ["npx", "--no-install", "promptfoo"]
    if shutil.which(command[0]) is None:
        return None, f"{command[0]} not found"
    try:
        probe = subprocess.run([*command, "--version"], capture_output=True, timeout=120, text=True)
    except subprocess.TimeoutExpired:
        return None, f"{shlex.join(command)} --version took over 120 s"
    if probe.returncode != 0:
        said = (probe.stderr or probe.stdout).strip().splitlines()
        return None, f"{shlex.join(command)} --version: " + (said[0] if said else "failed")
    return command, probe.stdout.strip()


def promptfoo_suite(folder: Path, n: int, assertion: dict, judge: FakeJudge) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "check.py").write_text(PROMPTFOO_CHECK)
    tests = [
        {"vars": {"answer": c["answer"]}, "description": c["id"], "assert": [assertion]}
        for c in cases(n)
    ]
    config = {
        "description": "bench",
        "prompts": ["{{answer}}"],
        "providers": ["echo"],  # the answer is the recorded one, as in the evalrun suites
        "defaultTest": {
            "options": {
                "provider": {
                    "id": "openai:chat:bench-judge",
                    "config": {"apiBaseUrl": f"{judge.url}/v1", "apiKey": "sk-bench-not-a-key"},
                }
            }
        },
        "tests": tests,
    }
    path = folder / "promptfooconfig.json"
    path.write_text(json.dumps(config))
    return path


def run_promptfoo(
    command: list[str], path: Path, cases: int, workers: int, work: Path, judge: FakeJudge
) -> Run:
    """One promptfoo eval; every case must pass (the fake judge says pass, the answers name
    Paris), so a case promptfoo could not grade stops the bench."""
    env = {
        **os.environ,
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_CONFIG_DIR": str(work / "promptfoo-home"),
        "PROMPTFOO_PYTHON": PYTHON,
    }
    out = path.parent / "results.json"
    argv = [*command, "eval", "-c", str(path), "-j", str(workers), "--no-cache"]
    argv += ["--no-table", "--no-progress-bar", "--no-write", "-o", str(out)]
    run = timed(argv, path.parent, env, judge)
    stats = json.loads(out.read_text())["results"]["stats"]
    if stats.get("errors") or stats.get("failures") or stats.get("successes") != cases:
        raise SystemExit(f"promptfoo: {stats} in {path}")
    return run


def paired(runs: int, *sides: Callable[[], Run]) -> list[Run]:
    """Each side ``runs`` times, alternating; the run with the median wall time per side."""
    measured: list[list[Run]] = [[] for _ in sides]
    for _ in range(runs):
        for i, side in enumerate(sides):
            measured[i].append(side())
    out = []
    for series in measured:
        series.sort(key=lambda r: r.wall_s)
        out.append(series[len(series) // 2])
    return out


@dataclass
class Row:
    name: str
    run: Run
    floor_s: float
    against: str = ""
    ratio: float | None = None
    aim: str = ""
    met: bool | None = None


def aim_verdict(measured: float, aim: float, at_most: bool, unit: str = "") -> tuple[bool, str]:
    """(met, how it reads): met, or by how much it falls short."""
    met = measured <= aim if at_most else measured >= aim
    sign = "<=" if at_most else ">="
    text = f"{measured:.2f}{unit} {sign} {aim:g}{unit}: " + (
        "met" if met else f"missed by {abs(measured - aim):.2f}{unit}"
    )
    return met, text


def main() -> None:
    global PYTHON, METER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--runs", type=int, default=1, help="runs per side (median shown)")
    parser.add_argument("--promptfoo", help="promptfoo command (default: npx --no-install)")
    parser.add_argument("--no-promptfoo", action="store_true", help="skip the promptfoo rows")
    parser.add_argument(
        "--baseline-root",
        type=Path,
        help="another checkout of evalrun to run the contextual precision row with, side by side "
        f"(default: commit {BASELINE_COMMIT} of this repository, main before stream mode)",
    )
    parser.add_argument(
        "--sandbox",
        default="none",
        help="--sandbox level of this checkout's rows (default none, as the figures in "
        "docs/performance.md were measured; the baseline checkout has no sandbox)",
    )
    parser.add_argument(
        "--steady-cases", type=int, default=2000, help="cases of the steady-state row"
    )
    parser.add_argument(
        "--no-bytecode", action="store_true", help="skip the PYTHONDONTWRITEBYTECODE rows"
    )
    parser.add_argument("--wide-calls", type=int, default=600, help="calls of the 2 s row")
    parser.add_argument("--wide-workers", type=int, default=200)
    parser.add_argument("--wide-latency-ms", type=float, default=2000.0)
    args = parser.parse_args()
    rounds = math.ceil(args.cases / args.workers)
    floor = rounds * args.latency_ms / 1000
    rows: list[Row] = []
    notes: list[str] = []
    #: each restated aim: (met, what was measured against it)
    aims: list[tuple[bool, str]] = []
    METER = cpu_meter()

    with tempfile.TemporaryDirectory(prefix="evalrun-bench-") as tmp:
        work = Path(tmp)
        PYTHON = bench_python(work)
        env = child_env(work / "pycache")  # as an installed package has
        judge = FakeJudge(args.latency_ms)
        try:
            target = judge_target(judge)
            precision = {"name": "cp", "type": "contextual-precision", "target": {"max_calls": 5}}
            precision["config"] = {"mode": "per-item"}  # 3 judge calls per case, as measured
            serve_cp = evalrun_suite(work / "cp-serve", args.cases, [precision], target)
            process_cp = evalrun_suite(
                work / "cp-process", args.cases, [{**precision, "mode": "process"}], target
            )
            sides = [
                lambda: run_evalrun(serve_cp, args.workers, env, judge, args.sandbox),
                lambda: run_evalrun(process_cp, args.workers, env, judge, args.sandbox),
            ]
            # Unmeasured first runs compile every module into the fresh bytecode cache, as an
            # installed package has it; else the first measured side pays for it.
            warm = evalrun_suite(work / "warm", args.workers, [precision], target)
            run_evalrun(warm, args.workers, env, judge, args.sandbox)
            baseline = args.baseline_root
            if baseline is None:
                baseline, note = baseline_checkout(work)
                notes.append(note)
            if baseline:
                base_env = {**env, "PYTHONPATH": str(baseline.resolve())}
                base_cp = evalrun_suite(work / "cp-base", args.cases, [precision], target)
                sides.append(lambda: run_evalrun(base_cp, args.workers, base_env, judge))
                run_evalrun(warm, args.workers, base_env, judge)
            served, per_process, *base = paired(args.runs, *sides)
            label = f"contextual precision, {args.cases} x 3 passages, {args.workers} workers"
            rows.append(Row(f"{label}: stream mode", served, floor, aim="start cost"))
            rows.append(
                Row(
                    "  same, one process per case",
                    per_process,
                    floor,
                    "stream mode",
                    per_process.wall_s / served.wall_s,
                )
            )
            if served.start_s is not None:
                met, text = aim_verdict(served.start_s, START_AIM_S, True, " s")
                rows[0].met = met
                aims.append((met, f"fixed start cost (spawn to first judge request) {text}"))
            if served.judge_hold_ms is not None:
                notes.append(
                    f"the fake judge held each call of that row {served.judge_hold_ms:.2f} ms "
                    f"on average ({args.latency_ms:g} ms asked): the latency floor is real"
                )
            if base:
                rows.append(
                    Row(
                        f"  same, with {args.baseline_root or BASELINE_COMMIT}",
                        base[0],
                        floor,
                        "stream mode",
                        base[0].wall_s / served.wall_s,
                        ">= 3x slower",
                        base[0].wall_s / served.wall_s >= 3,
                    )
                )

            steady_cp = evalrun_suite(work / "cp-steady", args.steady_cases, [precision], target)
            (steady,) = paired(
                args.runs,
                lambda: run_evalrun(steady_cp, args.workers, env, judge, args.sandbox),
            )
            steady_floor = math.ceil(args.steady_cases / args.workers) * args.latency_ms / 1000
            met, text = aim_verdict(steady.efficiency(steady_floor), STEADY_AIM, False)
            rows.append(
                Row(
                    f"  same, {args.steady_cases} cases (steady state)",
                    steady,
                    steady_floor,
                    aim=f"efficiency >= {STEADY_AIM:g}",
                    met=met,
                )
            )
            aims.append((met, f"steady-state efficiency, {args.steady_cases} cases: {text}"))

            one_call_folder = work / "one-call"
            one_call_folder.mkdir()
            (one_call_folder / "grader.py").write_text(ONE_CALL_GRADER)
            one_call = {
                "name": "judged",
                "command": [PYTHON, "grader.py"],
                "mode": "serve",
                "target": {"max_calls": 1},
            }
            one_call_suite = evalrun_suite(one_call_folder, args.cases, [one_call], target)
            check_folder = work / "check"
            check_folder.mkdir()
            (check_folder / "grader.py").write_text(CHECK_GRADER)
            check = {"name": "check", "command": [PYTHON, "grader.py"], "mode": "serve"}
            check_suite = evalrun_suite(check_folder, args.cases, [check], None)

            promptfoo, said = (
                (None, "not asked for") if args.no_promptfoo else promptfoo_command(args.promptfoo)
            )
            if promptfoo is None:
                one = paired(
                    args.runs,
                    lambda: run_evalrun(one_call_suite, args.workers, env, judge, args.sandbox),
                )
                det = paired(
                    args.runs,
                    lambda: run_evalrun(check_suite, args.workers, env, judge, args.sandbox),
                )
                rows.append(Row("one judge call per case, SDK grader", one[0], floor))
                rows.append(Row("deterministic Python grader", det[0], 0.0))
                notes.append(f"promptfoo: skipped ({said})")
            else:
                promptfoo_rows(
                    args, work, env, judge, promptfoo, (one_call_suite, check_suite), rows, aims
                )
                notes.append(f"promptfoo {said} ({shlex.join(promptfoo)})")
            if not args.no_bytecode:
                bytecode_rows(args, work, env, judge, floor, rows, aims, notes)
        finally:
            judge.close()

        slow = FakeJudge(args.wide_latency_ms)
        try:
            wide_target = judge_target(slow, max_concurrency=args.wide_workers)
            wide_folder = work / "wide"
            wide_folder.mkdir()
            (wide_folder / "grader.py").write_text(ONE_CALL_GRADER)
            wide_suite = evalrun_suite(wide_folder, args.wide_calls, [one_call], wide_target)
            (wide,) = paired(
                args.runs,
                lambda: run_evalrun(
                    wide_suite,
                    args.wide_workers,
                    env,
                    slow,
                    args.sandbox,
                    options=("--max-processes", str(args.wide_workers)),
                ),
            )
            wide_floor = (
                math.ceil(args.wide_calls / args.wide_workers) * args.wide_latency_ms / 1000
            )
            rows.append(
                Row(
                    f"{args.wide_calls} judge calls, {args.wide_workers} in flight, "
                    f"{args.wide_latency_ms / 1000:g} s judge",
                    wide,
                    wide_floor,
                    aim=f"latency floor / wall >= {WIDE_AIM:g}",
                    met=wide_floor / wide.wall_s >= WIDE_AIM,
                )
            )
            met, text = aim_verdict(wide_floor / wide.wall_s, WIDE_AIM, False)
            aims.append((met, f"{args.wide_workers} in flight, latency floor / wall {text}"))
        finally:
            slow.close()
            METER.cleanup()

    width = max(len(r.name) for r in rows) + 2
    print(
        f"\n{'':<{width}}{'wall s':>8}{'CPU s':>8}{'calls':>7}{'floor s':>9}{'effic.':>8}"
        f"{'ratio':>8}  aim"
    )
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        verdict = "" if r.met is None else (" (met)" if r.met else " (missed)")
        effic = f"{r.run.efficiency(r.floor_s):.2f}"
        print(
            f"{r.name:<{width}}{r.run.wall_s:>8.2f}{r.run.cpu_s:>8.2f}{r.run.judge_calls:>7}"
            f"{max(r.floor_s, r.run.cpu_s / CORES):>9.2f}{effic:>8}{ratio:>8}  {r.aim}{verdict}"
        )
    print()
    print('restated aims (docs/performance.md, "Aims"):')
    for met, text in aims:
        print(f"  {'met' if met else 'MISSED'}: {text}")
    short = [text for met, text in aims if not met]
    print(f"  {len(aims) - len(short)} of {len(aims)} met" + (": all" if not short else ""))
    print()
    for note in notes:
        print(note)
    print(
        f"floor = max(latency floor, CPU / {CORES} cores); latency floor = "
        f"ceil({args.cases}/{args.workers}) x {args.latency_ms:g} ms; ratio = the other side's "
        f"wall time / this one's; median of {args.runs} alternating run(s) per side; "
        f"load average {os.getloadavg()[0]:.1f}; --sandbox {args.sandbox}; CPU from "
        f"{METER.source}; "
        f"Python {sys.version.split()[0]}"
    )


def promptfoo_rows(
    args: argparse.Namespace,
    work: Path,
    env: dict[str, str],
    judge: FakeJudge,
    promptfoo: list[str],
    suites: tuple[Path, Path],
    rows: list[Row],
    aims: list[tuple[bool, str]],
) -> None:
    """The same cases and fake judge through promptfoo (``llm-rubric`` pointed at the fake by
    its OpenAI provider's ``apiBaseUrl``; a ``python`` assertion) and through evalrun (a custom
    SDK grader in each, under evalrun's default sandbox), alternating."""
    one_call_suite, check_suite = suites
    rubric = {"type": "llm-rubric", "value": "The answer names Paris as the capital."}
    python_check = {"type": "python", "value": "file://check.py"}
    pf_rubric = promptfoo_suite(work / "pf-rubric", args.cases, rubric, judge)
    pf_python = promptfoo_suite(work / "pf-python", args.cases, python_check, judge)
    sandbox = PROMPTFOO_SANDBOX
    run_evalrun(check_suite, args.workers, env, judge, sandbox)  # the sandbox's first start
    one, pf_one = paired(
        args.runs,
        lambda: run_evalrun(one_call_suite, args.workers, env, judge, sandbox),
        lambda: run_promptfoo(promptfoo, pf_rubric, args.cases, args.workers, work, judge),
    )
    det, pf_det = paired(
        args.runs,
        lambda: run_evalrun(check_suite, args.workers, env, judge, sandbox),
        lambda: run_promptfoo(promptfoo, pf_python, args.cases, args.workers, work, judge),
    )
    floor = math.ceil(args.cases / args.workers) * args.latency_ms / 1000
    for name, ours, theirs, row_floor, aim in (
        ("one judge call per case, SDK grader", one, pf_one, floor, PROMPTFOO_JUDGED_AIM),
        ("deterministic Python grader", det, pf_det, 0.0, PROMPTFOO_CHECK_AIM),
    ):
        if theirs.judge_calls != ours.judge_calls:
            raise SystemExit(
                f"{name}: promptfoo made {theirs.judge_calls} judge calls, evalrun "
                f"{ours.judge_calls}: not the same work"
            )
        ratio = theirs.wall_s / ours.wall_s
        met, text = aim_verdict(ratio, aim, False, "x")
        rows.append(Row(f"{name}, --sandbox {sandbox}", ours, row_floor))
        label = "llm-rubric" if row_floor else "python assertion"
        rows.append(
            Row(
                f"  promptfoo {label}, same cases and judge",
                theirs,
                row_floor,
                "evalrun",
                ratio,
                f">= {aim:g}x slower",
                met,
            )
        )
        aims.append((met, f"promptfoo / evalrun, {name}: {text}"))


def bytecode_rows(
    args: argparse.Namespace,
    work: Path,
    env: dict[str, str],
    judge: FakeJudge,
    floor: float,
    rows: list[Row],
    aims: list[tuple[bool, str]],
    notes: list[str],
) -> None:
    """A judged custom SDK grader, one process per case (a custom grader's default), with
    ``PYTHONDONTWRITEBYTECODE=1`` and without. The graders get the bytecode folder evalrun
    chooses (``PYTHONPYCACHEPREFIX`` unset, the user's cache folder a fresh one here); evalrun's
    own process reads its bytecode from the bench's cache through ``-X pycache_prefix``, which
    its graders do not inherit. Under the default sandbox when CPU comes from a cgroup (wait4
    does not see a sandboxed grader's CPU), else under ``--sandbox``."""
    sandbox = "auto" if METER.read is not None else args.sandbox
    folder = work / "bytecode"
    folder.mkdir()
    (folder / "grader.py").write_text(ONE_CALL_GRADER)
    grader = {"name": "judged", "command": [PYTHON, "grader.py"], "target": {"max_calls": 1}}
    suite = evalrun_suite(folder, args.cases, [grader], judge_target(judge))
    prefix = env["PYTHONPYCACHEPREFIX"]
    plain = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"}
    plain["XDG_CACHE_HOME"] = str(work / "user-cache")
    no_write = {**plain, "PYTHONDONTWRITEBYTECODE": "1"}
    own = ("-X", f"pycache_prefix={prefix}")
    warm = evalrun_suite(work / "bytecode-warm", 4, [grader], judge_target(judge))
    (work / "bytecode-warm" / "grader.py").write_text(ONE_CALL_GRADER)
    run_evalrun(warm, args.workers, plain, judge, sandbox, own)
    without, with_it = paired(
        args.runs,
        lambda: run_evalrun(suite, args.workers, plain, judge, sandbox, own),
        lambda: run_evalrun(suite, args.workers, no_write, judge, sandbox, own),
    )
    ratio = with_it.cpu_s / without.cpu_s
    met, text = aim_verdict(ratio, BYTECODE_AIM, True, "x")
    rows.append(
        Row(f"judged custom SDK grader, process per case, --sandbox {sandbox}", without, floor)
    )
    rows.append(
        Row(
            "  same, PYTHONDONTWRITEBYTECODE=1",
            with_it,
            floor,
            "CPU / unset",
            ratio,
            f"CPU <= {BYTECODE_AIM:g}x",
            met,
        )
    )
    aims.append((met, f"PYTHONDONTWRITEBYTECODE=1, CPU against unset {text}"))
    notes.append("the PYTHONDONTWRITEBYTECODE rows' ratio is of CPU, not wall time")


if __name__ == "__main__":
    main()
