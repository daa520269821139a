"""Host mode (docs/grader-protocol.md, "Host mode"): evalrun's built-in graders share a few
processes that grade several cases at once. The SDK's host loop in-process, the launcher's host
pool against real host processes, and a CLI run of two built-in graders."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from evalrun.launcher.hosts import HostPool, host_count
from grader_sdk import proxy_settings
from grader_sdk._host import serve_host
from tests.conftest import ROOT, read_bundle

sys.path.insert(0, str(ROOT / "bench"))
from treestats import TreeSampler  # noqa: E402


def _line(nonce: str, grader: str, token: str, **payload: object) -> str:
    env = {"EVALRUN_PROXY_URL": "http://127.0.0.1:1", "EVALRUN_PROXY_TOKEN": token}
    return json.dumps({"nonce": nonce, "grader": grader, "payload": payload, "env": env}) + "\n"


def test_a_host_grades_cases_at_once_each_with_its_own_token_and_stderr() -> None:
    both_in_flight = threading.Barrier(2, timeout=10)  # broken unless the two cases overlap

    def grade(inp):
        both_in_flight.wait()
        print(f"note from {inp.case_id}")  # stdout of a case goes to that case's stderr
        _, token = proxy_settings()
        return {"score": 1.0, "reason": token}

    stdin = io.StringIO(
        _line("n1", "g", "token-1", case_id="c1") + _line("n2", "g", "token-2", case_id="c2")
    )
    stdout = io.StringIO()
    saved = sys.stdout, sys.stderr
    try:
        assert serve_host(lambda name: grade, 2, stdin, stdout) == 0
    finally:
        sys.stdout, sys.stderr = saved
    answers = {a["nonce"]: a for a in map(json.loads, stdout.getvalue().splitlines())}
    assert answers["n1"]["exit"] == 0 and answers["n1"]["result"]["reason"] == "token-1"
    assert answers["n2"]["result"]["reason"] == "token-2"
    assert answers["n1"]["stderr"].strip() == "note from c1"
    assert answers["n2"]["stderr"].strip() == "note from c2"
    assert "EVALRUN_PROXY_TOKEN" not in os.environ


def test_a_host_answers_a_line_naming_no_grader_it_has_with_an_error() -> None:
    def load(name):
        raise ValueError(f"{name!r} is not a built-in grader module")

    stdout = io.StringIO()
    saved = sys.stdout, sys.stderr
    try:
        serve_host(load, 1, io.StringIO(_line("n1", "os", "t")), stdout)
    finally:
        sys.stdout, sys.stderr = saved
    (answer,) = map(json.loads, stdout.getvalue().splitlines())
    assert answer["nonce"] == "n1" and answer["exit"] == 1 and answer["result"] is None
    assert "not a built-in grader module" in answer["stderr"]


@pytest.mark.parametrize("name", ["os", "graders._host", "graders.x.y", "graders.Quality"])
def test_the_builtin_host_loads_only_public_modules_of_the_graders_package(name: str) -> None:
    from graders._host import load

    with pytest.raises(ValueError, match="not a built-in grader module"):
        load(name)


def test_the_builtin_host_finds_each_builtin_grader_function() -> None:
    from graders._host import load

    assert load("graders.contextual_precision").__name__ == "grade"
    assert load("graders.llm_rubric").__name__ == "main"


def test_host_processes_are_capped_whatever_the_width() -> None:
    assert host_count(1, cores=2) == 1
    assert host_count(8, cores=2) == 1
    assert host_count(64, cores=2) == 2
    assert host_count(2000, cores=2) == 2
    assert host_count(2000, cores=16) == 16


# A host over a test module: "sleep" waits, "hang" never answers, "crash" ends the process.
TEST_HOST = """\
import os, sys, threading, time
sys.path.insert(0, {root!r})
from grader_sdk._host import serve_host

BARRIER = threading.Barrier(4, timeout=10)

def grade(inp):
    if inp.config.get("barrier"):
        BARRIER.wait()
    if inp.case_id.startswith("hang"):
        time.sleep(600)
    if inp.case_id.startswith("late"):
        time.sleep(0.8)
    if inp.case_id.startswith("crash"):
        time.sleep(0.3)
        os._exit(9)
    time.sleep(float(inp.config.get("sleep", 0)))
    return {{"score": 1.0, "reason": f"{{inp.case_id}} in {{os.getpid()}}"}}

serve_host(lambda name: grade, int(sys.argv[1]))
"""


def _pool(tmp_path: Path, workers: int) -> HostPool:
    (tmp_path / "host.py").write_text(TEST_HOST.format(root=str(ROOT)))
    return HostPool(
        lambda slots: [sys.executable, str(tmp_path / "host.py"), str(slots)],
        tmp_path,
        dict(os.environ),
        workers,
        lambda code: code,
    )


def _cases(
    pool: HostPool,
    ids: list[str],
    timeout: float = 30,
    sleep: float = 0.2,
    modules: list[str] | None = None,
    **config: object,
):
    """The outcomes, and whether each host was alive once they were all in."""
    modules = modules or ["t"] * len(ids)

    async def run():
        try:
            outcomes = await asyncio.gather(
                *(
                    pool.run(m, {"case_id": i, "config": {"sleep": sleep, **config}}, {}, timeout)
                    for i, m in zip(ids, modules, strict=True)
                )
            )
            return outcomes, [w.alive for w in (*pool._workers, *pool._retired)]
        finally:
            await pool.close()

    return asyncio.run(run())


@pytest.mark.slow  # real host processes: ~1-1.5 s each on 2 cores
def test_a_pool_runs_many_cases_on_at_most_its_cap_of_hosts(tmp_path: Path) -> None:
    pool = _pool(tmp_path, workers=32)
    ids = [f"c{i}" for i in range(40)]
    outcomes, alive = _cases(pool, ids)
    assert alive == [True] * pool.hosts
    reasons = [json.loads(o.stdout)["reason"] for o in outcomes]
    assert [r.split()[0] for r in reasons] == ids  # each answer reached its own case
    assert pool.started == pool.hosts == host_count(32)
    assert len({r.split()[-1] for r in reasons}) == pool.hosts


@pytest.mark.slow  # real host processes: ~1-1.5 s each on 2 cores
def test_each_builtin_grader_gets_the_runs_width_in_flight(tmp_path: Path) -> None:
    """A case runs its graders side by side: two graders at 2 workers hold 4 cases at once
    (a barrier of 4 in the host fails every case unless all four are in flight together)."""
    pool = _pool(tmp_path, workers=2)
    ids = ["a1", "a2", "b1", "b2"]
    outcomes, _ = _cases(pool, ids, modules=["a", "a", "b", "b"], barrier=True)
    assert [json.loads(o.stdout)["reason"].split()[0] for o in outcomes] == ids
    assert pool.started == 1 and pool.slots == 4


@pytest.mark.slow  # real host processes: ~1-1.5 s each on 2 cores
def test_a_hung_case_times_out_alone_and_its_host_takes_no_more_cases(tmp_path: Path) -> None:
    pool = _pool(tmp_path, workers=4)
    outcomes, alive = _cases(pool, ["hang", "c1", "c2", "c3"], timeout=1, sleep=0.3)
    assert outcomes[0].timed_out and outcomes[0].failure is None
    assert [json.loads(o.stdout)["reason"].split()[0] for o in outcomes[1:]] == ["c1", "c2", "c3"]
    assert alive == [False]  # killed once the others had answered


@pytest.mark.slow  # real host processes: ~1-1.5 s each on 2 cores
def test_an_answer_after_its_timeout_is_dropped_and_the_others_are_answered(
    tmp_path: Path,
) -> None:
    pool = _pool(tmp_path, workers=2)

    async def run():
        try:
            return await asyncio.gather(
                pool.run("t", {"case_id": "late"}, {}, 0.3),
                pool.run("t", {"case_id": "c1", "config": {"sleep": 1.1}}, {}, 30),
            )
        finally:
            await pool.close()

    late, other = asyncio.run(run())
    assert late.timed_out
    assert other.failure is None and json.loads(other.stdout)["reason"].startswith("c1 ")


@pytest.mark.slow  # real host processes: ~1-1.5 s each on 2 cores
def test_a_host_that_crashes_errors_the_cases_it_held(tmp_path: Path) -> None:
    pool = _pool(tmp_path, workers=2)
    outcomes, _ = _cases(pool, ["crash", "c1"], sleep=5)
    for outcome in outcomes:
        assert outcome.failure is not None and "status 9" in outcome.failure


RAG_TARGETS = """\
targets:
  - name: judge
    kind: mock
    default: '{"relevant": true, "pass": true, "score": 1.0, "reason": "scripted"}'
"""


@pytest.mark.slow
def test_two_builtin_graders_of_a_wide_run_share_capped_host_processes(tmp_path: Path) -> None:
    (tmp_path / "targets.yaml").write_text(RAG_TARGETS)
    rows = []
    for i in range(24):
        retrieval = {"tool": "search", "input": {}, "output": {"results": [f"Paris {i}"]}}
        rows.append(
            {
                "id": f"c{i}",
                "input": "Capital of France?",
                "output": "Paris",
                "criteria": "Names Paris",
                "expected_output": [{"role": "assistant", "tool_calls": [retrieval]}],
            }
        )
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "wide.eval.yaml").write_text(
        textwrap.dedent(
            """\
            judge: judge
            graders:
              - {name: cp, type: contextual-precision}
              - {name: rubric, type: llm-rubric}
            tests: cases.jsonl
            """
        )
    )
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "evalrun", str(tmp_path / "wide.eval.yaml"), "--out", str(out)]
    argv += ["--workers", "24", "--quiet", "--sandbox", "none"]
    proc = subprocess.Popen(
        argv,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with TreeSampler(proc.pid, interval=0.02) as sampler:
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    results, summary = read_bundle(out)
    assert summary["counts"] == {**summary["counts"], "passed": 24, "total": 24}
    # evalrun and its hosts, never a worker per grader per case in flight (1 + 48 before)
    assert 2 <= sampler.result.most_processes <= 1 + host_count(24)
    assert all(len(r["graders"]) == 2 for r in results)
