"""`evalrun FILE` end to end, as a user runs it: real processes, real proxy, real bundle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evalrun.results import reader
from tests.conftest import read_bundle, run_cli
from tests.fault_helpers import working_in

TARGETS = """
targets:
  - name: sut
    kind: mock
    default: I do not know.
    rules:
      - match: capital of France
        response: Paris is the capital of France.
  - name: judge
    kind: mock
    default: '{"verdict": "no"}'
    rules:
      - match: Paris
        response: '{"verdict": "yes"}'
  - name: keyed
    kind: openai
    model: gpt-4o-mini
    api_key_env: EVALRUN_TEST_MISSING_KEY
"""

JUDGE_GRADER = """
import json, os, sys, urllib.request
payload = json.load(sys.stdin)
url = os.environ["AGENTV_TARGET_PROXY_URL"] + "/invoke"
request = urllib.request.Request(
    url,
    data=json.dumps({"question": "Is this right? " + (payload["output"] or "")}).encode(),
    headers={"Authorization": "Bearer " + os.environ["AGENTV_TARGET_PROXY_TOKEN"],
             "Content-Type": "application/json"},
)
reply = json.loads(urllib.request.urlopen(request).read())
verdict = json.loads(reply["rawText"])["verdict"]
print(json.dumps({"score": 1.0 if verdict == "yes" else 0.0, "reason": "judge said " + verdict}))
"""


def make_eval(tmp_path: Path, body: str, grader: str = JUDGE_GRADER) -> Path:
    (tmp_path / "targets.yaml").write_text(TARGETS)
    (tmp_path / "judge_grader.py").write_text(textwrap.dedent(grader))
    path = tmp_path / "suite.eval.yaml"
    path.write_text(textwrap.dedent(body))
    return path


SUITE = """
target: sut
judge: judge
graders:
  - name: judged
    command: [python, judge_grader.py]
    target: {max_calls: 2}
tests:
  - id: france
    input: What is the capital of France?
  - id: spain
    input: What is the capital of Spain?
  - id: given
    input: anything
    output: Paris, obviously.
"""


def test_cases_answered_by_target_and_graded_through_the_proxy(tmp_path):
    path = make_eval(tmp_path, SUITE)
    out = tmp_path / "out"
    result = run_cli(str(path), "--out", str(out))
    assert result.returncode == 1, result.stderr  # spain fails
    cases, summary = read_bundle(out)
    by_id = {c["id"]: c for c in cases}
    assert len(cases) == 3
    assert by_id["france"]["output"] == "Paris is the capital of France."
    assert by_id["france"]["status"] == "passed"
    assert by_id["spain"]["status"] == "failed"
    assert by_id["given"]["output"] == "Paris, obviously."
    grader = by_id["france"]["graders"][0]
    assert grader["proxy"]["calls"] == 1 and grader["proxy"]["max_calls"] == 2
    assert summary["counts"] == {"passed": 2, "failed": 1, "error": 0, "unscored": 0, "total": 3}
    assert summary["complete"] is True and summary["exit_code"] == 1
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    assert len(calls) == 3 and {c["case_id"] for c in calls} == {"france", "spain", "given"}
    assert "france" in result.stdout and "mean score" in result.stdout
    for report in ("report.md", "report.html", "junit.xml"):
        assert (out / report).is_file()


def test_exit_0_when_every_gate_holds_and_filter_selects(tmp_path):
    path = make_eval(tmp_path, SUITE)
    result = run_cli(
        str(path), "--out", str(tmp_path / "o"), "--filter", "fr*", "--filter", "given"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    cases, _ = read_bundle(tmp_path / "o")
    assert sorted(c["id"] for c in cases) == ["france", "given"]


def test_suite_threshold_gate(tmp_path):
    path = make_eval(tmp_path, SUITE)
    ok = run_cli(
        str(path), "--out", str(tmp_path / "a"), "--filter", "france", "--threshold", "0.9"
    )
    assert ok.returncode == 0
    low = run_cli(
        str(path), "--out", str(tmp_path / "b"), "--filter", "france", "--threshold", "1.1"
    )
    assert low.returncode == 1


def test_errors_beyond_max_errors_exit_3(tmp_path):
    crashing = "import sys\nsys.stderr.write('kaboom\\n')\nsys.exit(2)\n"
    path = make_eval(tmp_path, SUITE, grader=crashing)
    result = run_cli(str(path), "--out", str(tmp_path / "o"))
    assert result.returncode == 3
    cases, summary = read_bundle(tmp_path / "o")
    assert {c["status"] for c in cases} == {"error"}
    assert cases[0]["graders"][0]["exit_code"] == 2
    assert "kaboom" in cases[0]["graders"][0]["stderr_tail"]
    assert summary["counts"]["error"] == 3
    tolerated = run_cli(str(path), "--out", str(tmp_path / "p"), "--max-errors", "3")
    assert tolerated.returncode == 0


def test_configuration_errors_exit_2_before_running(tmp_path):
    path = make_eval(tmp_path, SUITE)
    unknown = run_cli(str(path), "--target", "nope", "--out", str(tmp_path / "o"))
    assert unknown.returncode == 2
    assert "unknown target 'nope'" in unknown.stderr and "sut" in unknown.stderr
    env = {k: v for k, v in os.environ.items() if k != "EVALRUN_TEST_MISSING_KEY"}
    missing = run_cli(str(path), "--target", "keyed", "--out", str(tmp_path / "o"), env=env)
    assert missing.returncode == 2
    assert "EVALRUN_TEST_MISSING_KEY" in missing.stderr
    assert not (tmp_path / "o").exists()


def test_run_and_plain_forms_are_the_same(tmp_path):
    path = make_eval(tmp_path, SUITE)
    result = run_cli("run", str(path), "--out", str(tmp_path / "o"), "--filter", "given", "--quiet")
    assert result.returncode == 0
    assert result.stdout.strip() == str(tmp_path / "o")


@pytest.mark.slow
def test_repeat_and_shards_partition_cases(tmp_path):
    body = SUITE.replace(
        "tests:\n",
        "tests:\n"
        + "".join(f"  - {{id: extra-{i}, input: x, output: Paris {i}}}\n" for i in range(9)),
    )
    path = make_eval(tmp_path, body)
    seen: list[str] = []
    for shard in ("1/3", "2/3", "3/3"):
        out = tmp_path / f"s{shard[0]}"
        result = run_cli(str(path), "--out", str(out), "--shard", shard, "--quiet")
        assert result.returncode in (0, 1), result.stderr
        seen += [c["id"] for c in read_bundle(out)[0]]
    assert sorted(seen) == sorted(["france", "spain", "given", *[f"extra-{i}" for i in range(9)]])
    rep = run_cli(str(path), "--out", str(tmp_path / "r"), "--filter", "given", "--repeat", "3")
    assert rep.returncode == 0, rep.stderr
    cases, summary = read_bundle(tmp_path / "r")
    assert sorted(c["repeat"] for c in cases) == [0, 1, 2]
    assert summary["repeat"] == 3


def test_resume_skips_finished_cases(tmp_path):
    counter = tmp_path / "count"
    grader = f"""
    import json, sys
    data = json.load(sys.stdin)
    with open({str(counter)!r}, "a") as f:
        f.write(data["case_id"] + "\\n")
    print(json.dumps({{"score": 1.0}}))
    """
    path = make_eval(tmp_path, SUITE, grader=grader)
    out = tmp_path / "o"
    assert run_cli(str(path), "--out", str(out), "--filter", "france").returncode == 0
    assert counter.read_text().split() == ["france"]
    assert run_cli(str(path), "--resume", str(out)).returncode == 0
    assert sorted(counter.read_text().split()) == ["france", "given", "spain"]
    cases, summary = read_bundle(out)
    assert sorted(c["id"] for c in cases) == ["france", "given", "spain"]
    assert summary["counts"]["total"] == 3


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
def test_resume_keeps_every_earlier_line_and_judge_call(tmp_path):
    """--resume appends: the finished cases' lines and judge calls stay as they were, and a line
    torn by a crash (kill -9 mid-write) costs only its own case, which is graded again."""
    path = make_eval(tmp_path, SUITE)
    out = tmp_path / "o"
    assert run_cli(str(path), "--out", str(out), "--filter", "france").returncode == 0
    before = (out / "results.jsonl").read_bytes()
    calls_before = (out / "judge-calls.jsonl").read_bytes()
    assert json.loads(calls_before)["case_id"] == "france"
    torn = b'{"id": "spain", "status": "passed", "sco'  # what a crash mid-write leaves
    (out / "results.jsonl").write_bytes(before + torn)
    run_cli(str(path), "--resume", str(out))
    after = (out / "results.jsonl").read_bytes()
    assert after.startswith(before + torn + b"\n")  # nothing earlier rewritten or lost
    assert (out / "judge-calls.jsonl").read_bytes().startswith(calls_before)
    assert sorted(c.id for c in reader.read_case_results(out)) == ["france", "given", "spain"]
    assert json.loads((out / "summary.json").read_text())["counts"]["total"] == 3
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    assert sorted(c["case_id"] for c in calls) == ["france", "given", "spain"]


def test_ctrl_c_kills_graders_writes_incomplete_summary_and_exits_130(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    grader = f"""
    import json, os, sys, time, uuid
    data = json.load(sys.stdin)
    child = os.fork()
    if child == 0:
        time.sleep(120)
        os._exit(0)
    open(os.path.join({str(pids)!r}, f"{{os.getpid()}}.{{uuid.uuid4().hex}}"), "w").write(str(child))
    if data["case_id"] == "given":
        print(json.dumps({{"score": 1.0}}))
        sys.exit(0)
    time.sleep(120)
    """
    path = make_eval(tmp_path, SUITE, grader=grader)
    out = tmp_path / "o"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalrun", str(path), "--out", str(out), "--workers", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(list(pids.iterdir())) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    cases, summary = read_bundle(out)
    assert sorted(c["id"] for c in cases) == ["france", "given", "spain"]
    by_id = {c["id"]: c for c in cases}
    assert by_id["given"]["status"] == "passed"
    assert by_id["france"]["status"] == "error" and "interrupted" in by_id["france"]["error"]
    assert summary["interrupted"] is True and summary["complete"] is False
    assert "interrupted" in stdout
    assert working_in(tmp_path) == []  # graders and their children, sandboxed or not


def test_unknown_rubric_is_a_configuration_error_before_the_run(tmp_path):
    path = make_eval(
        tmp_path, SUITE.replace("judge: judge\n", "judge: judge\nrubric: no-such-rubric\n")
    )
    result = run_cli(str(path), "--out", str(tmp_path / "o"))
    assert result.returncode == 2
    assert "rubric 'no-such-rubric'" in result.stderr
    assert not (tmp_path / "o").exists()


def test_the_table_keeps_at_most_its_rows_problems_first() -> None:
    from evalrun.results.models import CaseResult
    from evalrun.runner.progress import TableRows

    rows = TableRows(limit=5)
    statuses = {7: "failed", 3: "error", 50: "unscored", 90: "failed"}
    for i in reversed(range(100)):
        rows.add(CaseResult(id=f"c{i:03d}", status=statuses.get(i, "passed")))  # type: ignore[arg-type]
    assert rows.total == 100
    assert [c.id for c in rows.rows()] == ["c003", "c007", "c090", "c050", "c000"]
    few = TableRows(limit=5)
    for cid in ("b", "a", "c"):
        few.add(CaseResult(id=cid, status="failed" if cid == "c" else "passed"))
    assert [c.id for c in few.rows()] == ["a", "b", "c"]  # all fit: by id


def _run_patched(path: Path, out: Path, patch: str) -> subprocess.CompletedProcess[str]:
    """The CLI on the suite's France case in a fresh interpreter, after ``patch`` ran there."""
    script = (
        patch + "from evalrun.cli import main\n"
        f"main([{str(path)!r}, '--out', {str(out)!r}, '--filter', 'france'])\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )


def test_reporters_that_cannot_be_imported_are_a_clear_error(tmp_path):
    """The results stay on disk; the run says why no report was written and exits 3."""
    path = make_eval(tmp_path, SUITE)
    out = tmp_path / "out"
    result = _run_patched(
        path,
        out,
        "import sys\n"
        "sys.modules['evalrun.reporters'] = None  # import evalrun.reporters: ImportError\n",
    )
    assert result.returncode == 3, result.stderr
    assert "no reports written: evalrun.reporters cannot be imported" in result.stderr
    assert f"evalrun report {out}" in result.stderr
    cases, summary = read_bundle(out)
    assert [c["status"] for c in cases] == ["passed"] and summary["exit_code"] == 0
    assert not (out / "report.html").exists()


def test_ctrl_c_while_the_reports_are_written_exits_130_and_leaves_no_half_report(tmp_path):
    """The bundle is whole by then: the run says how to write the reports and leaves no
    half-written file; 130 says the run was stopped, never 0."""
    path = make_eval(tmp_path, SUITE)
    out = tmp_path / "out"
    result = _run_patched(
        path,
        out,
        "import evalrun.reporters.writing as writing\n"
        "def interrupted(view, writers, drafts=None):  # the report files are open, half written\n"
        "    raise KeyboardInterrupt\n"
        "writing.write_all = interrupted\n",
    )
    assert result.returncode == 130, result.stderr
    assert f"'evalrun report {out}' writes the reports" in result.stderr
    cases, summary = read_bundle(out)
    assert [c["status"] for c in cases] == ["passed"] and summary["exit_code"] == 0
    assert sorted(p.name for p in out.iterdir() if "report" in p.name) == []


@pytest.mark.slow
@pytest.mark.parametrize("repeat", [1, 2])
def test_resume_counts_each_case_once_in_summary_table_report_and_exit(tmp_path, repeat):
    """A resume grades the errored cases again: their new lines win everywhere (summary.json,
    the printed table, report.md, the exit code), each (case, repeat) counted once
    (docs/results.md, "Reading a bundle")."""
    flag = tmp_path / "crash"
    grader = f"""
    import json, os, sys
    data = json.load(sys.stdin)
    if data["case_id"] != "given" and os.path.exists({str(flag)!r}):
        sys.exit(1)
    print(json.dumps({{"score": 1.0}}))
    """
    path = make_eval(tmp_path, SUITE, grader=grader)
    out = tmp_path / "o"
    flag.write_text("")
    first = run_cli(str(path), "--out", str(out), "--repeat", str(repeat))
    assert first.returncode == 3, first.stderr
    flag.unlink()
    resumed = run_cli(str(path), "--resume", str(out), "--repeat", str(repeat))
    results = 3 * repeat
    # every line kept, plus a new one for each errored (case, repeat): france and spain's
    assert len(reader.read_case_results(out)) == results + 2 * repeat
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["total"] == results
    assert summary["counts"]["passed"] == results and summary["counts"]["error"] == 0
    assert summary["missing"] == 0 and summary["exit_code"] == 0
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    counted = "3 cases" if repeat == 1 else f"3 cases × 2 repeats = {results} results"
    assert f"{counted}: {results} passed" in resumed.stdout
    assert "error" not in resumed.stdout
    report = (out / "report.md").read_text()
    assert "| Exit code | 0 |" in report
    # the counts, then the mean score and pass rate (each with its interval: docs/results.md)
    assert f"| 3 | {results} | {results} | 0 | 0 | 0 | 1.000 [" in report


SDK_GRADER = """
from grader_sdk import script_grader


@script_grader
def grade(case):
    return {"score": 1.0, "reason": "graded by the SDK"}
"""


def test_command_python_is_the_interpreter_evalrun_runs_under(tmp_path):
    """``venv/bin/evalrun`` run without activating the venv: PATH's python (here a shim that
    fails as one without grader_sdk would) is not the one a ``[python, ...]`` grader gets; an
    explicit path to an interpreter opts out (docs/eval-files.md, "Which python")."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        shim = bin_dir / name
        shim.write_text("#!/bin/sh\necho \"No module named 'grader_sdk'\" >&2\nexit 1\n")
        shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    body = """
    graders:
      - name: plain
        command: [python, judge_grader.py]
      - name: three
        command: [python3, judge_grader.py]
    tests:
      - {id: one, input: q, output: a}
    """
    path = make_eval(tmp_path, body, grader=SDK_GRADER)
    result = run_cli(str(path), "--out", str(tmp_path / "o"), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    (case,) = reader.read_case_results(tmp_path / "o")
    assert [(g.name, g.status) for g in case.graders] == [("plain", "passed"), ("three", "passed")]
    # a path names the interpreter: evalrun runs that one (the shim, which fails)
    path.write_text(textwrap.dedent(body).replace("[python,", f"[{bin_dir / 'python'},"))
    result = run_cli(str(path), "--out", str(tmp_path / "p"), "--max-errors", "1", env=env)
    (case,) = reader.read_case_results(tmp_path / "p")
    assert case.graders[0].status == "error" and "grader_sdk" in case.graders[0].stderr_tail
    assert case.graders[1].status == "passed"


@pytest.mark.slow
def test_an_option_given_twice_is_a_usage_error_never_last_wins(tmp_path):
    """An option that takes one value, given twice, would keep the last one without a word; it
    says why it cannot be both (docs/results.md, exit 2). (A run's --target is repeatable: a
    matrix run; validate's is not.)"""
    path = make_eval(tmp_path, SUITE)
    out = tmp_path / "o"
    twice = run_cli("validate", str(path), "--target", "sut", "--target", "judge")
    assert twice.returncode == 2, twice.stdout + twice.stderr
    assert "--target was given 2 times" in twice.stderr
    assert "validate checks with one target at a time" in twice.stderr
    judges = run_cli(str(path), "--judge", "judge", "--judge", "sut", "--out", str(out))
    assert judges.returncode == 2 and "--judge was given 2 times" in judges.stderr
    assert "one judge per run" in judges.stderr
    for option, a, b in [("--workers", "1", "2"), ("-w", "1", "2"), ("--sandbox", "none", "auto")]:
        again = run_cli(str(path), option, a, "--out", str(out), option, b)
        assert again.returncode == 2, (option, again.stderr)
        assert "was given 2 times" in again.stderr and "it takes one value" in again.stderr
    mixed = run_cli(str(path), "--workers", "1", "-w", "2", "--out", str(out))
    assert mixed.returncode == 2 and "--workers was given 2 times" in mixed.stderr
    seeds = run_cli("compare", str(out), str(out), "--seed", "1", "--seed", "2")
    assert seeds.returncode == 2 and "--seed was given 2 times" in seeds.stderr
    # repeatable options and flags (nothing lost by a repeat) still work
    fine = run_cli(str(path), "-q", "-q", "-f", "france", "-f", "spain", "--out", str(out))
    assert fine.returncode == 1, fine.stderr  # spain fails its judge, as in the suite


def test_sandbox_choices_are_the_sandbox_levels() -> None:
    """``--sandbox`` offers exactly the levels the launcher knows."""
    from evalrun.commands.run import SandboxChoice
    from evalrun.launcher.sandbox import LEVELS

    assert [choice.value for choice in SandboxChoice] == list(LEVELS)
