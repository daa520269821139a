"""Stream mode (`mode: serve`, docs/grader-protocol.md): long-lived grader processes keep every
per-case promise of the per-process mode. Real runs of the CLI, real grader processes, the real
proxy over loopback HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalrun.launcher.sandbox import why_unavailable
from tests.conftest import ROOT, read_bundle, run_cli

TARGETS = """\
targets:
  - name: judge
    kind: mock
    default: '{"relevant": true, "reason": "scripted"}'
"""

# A grader on the SDK that reports what it saw; what it does per case is steered by the id.
SDK_GRADER = """\
import json, os, sys, time, uuid
from grader_sdk import GraderInput, TargetClient, Unauthorized, script_grader

SEEN = {"previous_token": None, "cases": 0}
PROCESS = uuid.uuid4().hex  # pids repeat across PID namespaces (the sandbox); this does not

@script_grader
def grade(inp: GraderInput):
    SEEN["cases"] += 1
    print(f"note for {inp.case_id}", file=sys.stderr)
    print("a stray print goes to stderr, not into the answer")
    if inp.case_id.startswith("hang"):
        time.sleep(600)
    if inp.case_id.startswith("crash"):
        os._exit(9)
    client = TargetClient.from_env()
    client.invoke("one judge call")
    info = client.info()
    previous = "none"
    if SEEN["previous_token"] is not None:
        stale = TargetClient(client.url, SEEN["previous_token"])
        try:
            stale.info()
            previous = "accepted"
        except Unauthorized:
            previous = "rejected"
    token = client.token
    fresh = token != SEEN["previous_token"]
    SEEN["previous_token"] = token
    return {
        "score": 1.0,
        "details": {
            "pid": PROCESS,
            "cases_in_process": SEEN["cases"],
            "calls_left": info.remaining,
            "previous_token": previous,
            "fresh_token": fresh,
            "mode": os.environ.get("EVALRUN_GRADER_MODE"),
            "secret_seen": "EVALRUN_TEST_API_KEY" in os.environ,
            "token_in_process_env": "AGENTV_TARGET_PROXY_TOKEN" in os.environ,
        },
    }
"""


def _write_eval(folder: Path, ids: list[str], *, timeout: float = 30, mode: str = "serve") -> Path:
    (folder / "targets.yaml").write_text(TARGETS)
    (folder / "g.py").write_text(SDK_GRADER)
    tests = "\n".join(f"  - id: {i}\n    input: q {i}\n    output: a {i}" for i in ids)
    path = folder / "serve.eval.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            judge: judge
            graders:
              - name: g
                command: [{json.dumps(sys.executable)}, g.py]
                mode: {mode}
                timeout: {timeout}
                target: {{max_calls: 2}}
            tests:
            """
        )
        + tests
        + "\n"
    )
    return path


def _run(tmp_path: Path, ids: list[str], *, workers: int, **kwargs) -> dict[str, dict]:
    path = _write_eval(tmp_path, ids, **kwargs)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALRUN_TEST_API_KEY": "sk-must-not-leak"}
    proc = run_cli(
        str(path), "--out", str(out), "--workers", str(workers), "--quiet", env=env, timeout=120
    )
    assert proc.returncode in (0, 3), proc.stderr
    results, summary = read_bundle(out)
    assert summary["counts"]["total"] == len(ids)
    judge = summary["targets"]["judge"]  # the summary says how the judge's concurrency went
    assert judge["rate_limited"] == 0 and 1 <= judge["concurrency_reached"] <= workers
    return {r["id"]: r["graders"][0] for r in results}


def test_one_process_serves_many_cases_with_a_fresh_token_each(tmp_path):
    ids = [f"c{i}" for i in range(6)]
    by_id = _run(tmp_path, ids, workers=1)
    details = [by_id[i]["details"] for i in ids]
    assert len({d["pid"] for d in details}) == 1  # served: one process for every case
    assert [d["cases_in_process"] for d in details] == [1, 2, 3, 4, 5, 6]
    assert all(d["mode"] == "serve" for d in details)
    assert all(d["fresh_token"] for d in details)
    # the previous case's token was revoked when its answer came back
    assert details[0]["previous_token"] == "none"
    assert all(d["previous_token"] == "rejected" for d in details[1:])
    assert all(d["calls_left"] == 1 for d in details)  # each case's budget is its own
    assert not any(d["secret_seen"] for d in details)  # scrubbed like a per-process grader
    # the token lives in the process environment only while its case runs
    assert all(by_id[i]["status"] == "passed" for i in ids)


def test_stderr_belongs_to_the_case_that_wrote_it(tmp_path):
    ids = [f"s{i}" for i in range(5)]
    by_id = _run(tmp_path, ids, workers=1)
    for case_id in ids:
        tail = by_id[case_id]["stderr_tail"]
        assert f"note for {case_id}" in tail
        assert "a stray print goes to stderr" in tail
        others = [o for o in ids if o != case_id and f"note for {o}" in tail]
        assert others == [], tail


@pytest.mark.slow
def test_a_hung_case_is_killed_alone(tmp_path):
    ids = ["a1", "hang", "a2", "a3", "a4"]
    by_id = _run(tmp_path, ids, workers=2, timeout=2)
    assert by_id["hang"]["status"] == "error"
    assert "timed out" in by_id["hang"]["reason"]
    for case_id in ("a1", "a2", "a3", "a4"):
        assert by_id[case_id]["status"] == "passed", by_id[case_id]


def test_a_crash_mid_case_errors_that_case_only(tmp_path):
    ids = ["b1", "b2", "crash", "b3", "b4"]
    by_id = _run(tmp_path, ids, workers=1)
    crash = by_id["crash"]
    assert crash["status"] == "error"
    assert "exited with status 9 before it answered" in crash["reason"]
    assert "note for crash" in crash["stderr_tail"]
    for case_id in ("b1", "b2", "b3", "b4"):
        assert by_id[case_id]["status"] == "passed", by_id[case_id]
    before = {by_id[i]["details"]["pid"] for i in ("b1", "b2")}
    after = {by_id[i]["details"]["pid"] for i in ("b3", "b4")}
    assert len(before) == len(after) == 1 and before != after  # a new worker took over
    assert by_id["b3"]["details"]["cases_in_process"] == 1


def test_process_mode_is_still_one_process_per_case(tmp_path):
    ids = ["p1", "p2", "p3"]
    by_id = _run(tmp_path, ids, workers=1, mode="process")
    details = [by_id[i]["details"] for i in ids]
    assert len({d["pid"] for d in details}) == 3
    assert all(d["mode"] is None and d["token_in_process_env"] for d in details)


RAW_GRADER = """\
import json, sys
for line in sys.stdin:
    case = json.loads(line)
    payload = case["payload"]
    if payload["case_id"] == "garbled":
        print("this is not an answer", flush=True)
        continue
    answer = {"nonce": case["nonce"], "exit": 0, "result": {"score": 1, "reason": payload["case_id"]}}
    print(json.dumps(answer), flush=True)
"""


def test_any_executable_can_serve_and_a_garbled_answer_errors_only_its_case(tmp_path):
    (tmp_path / "targets.yaml").write_text(TARGETS)
    (tmp_path / "raw.py").write_text(RAW_GRADER)
    (tmp_path / "raw.eval.yaml").write_text(
        textwrap.dedent(
            f"""\
            graders:
              - name: raw
                command: [{json.dumps(sys.executable)}, raw.py]
                mode: serve
            tests:
              - {{id: r1, input: q, output: a}}
              - {{id: garbled, input: q, output: a}}
              - {{id: r2, input: q, output: a}}
            """
        )
    )
    out = tmp_path / "out"
    proc = run_cli(str(tmp_path / "raw.eval.yaml"), "--out", str(out), "--workers", "1", "--quiet")
    assert proc.returncode == 3, proc.stderr
    results, _ = read_bundle(out)
    by_id = {r["id"]: r["graders"][0] for r in results}
    assert by_id["r1"]["status"] == by_id["r2"]["status"] == "passed"
    assert by_id["r2"]["reason"] == "r2"
    assert by_id["garbled"]["status"] == "error"
    assert "not {nonce, exit, result}" in by_id["garbled"]["reason"]


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize("mode", ["serve", "process"])
def test_the_builtin_example_scores_the_same_in_both_modes(tmp_path, mode):
    source = (ROOT / "evals" / "contextual-precision.eval.yaml").read_text()
    assert "type: contextual-precision" in source
    path = ROOT / "evals" / f".mode-{mode}-{os.getpid()}.eval.yaml"
    path.write_text(
        source.replace(
            "type: contextual-precision", f"type: contextual-precision\n    mode: {mode}"
        )
    )
    try:
        out = tmp_path / "out"
        proc = run_cli(str(path), "--target", "mock", "--out", str(out), "--quiet")
    finally:
        path.unlink()
    assert proc.returncode == 1, proc.stderr
    results, _ = read_bundle(out)
    scores = sorted(round(r["score"], 3) for r in results)
    assert scores == [0.333, 0.833, 1.0]


QUICK_EXIT_GRADER = """\
import atexit, sys
from grader_sdk import script_grader

atexit.register(lambda: print("atexit hook ran", file=sys.stderr))

@script_grader
def grade(inp):
    return {"score": 1.0, "reason": inp.case_id}
"""


def test_a_served_sdk_grader_ends_at_eof_with_its_answers_flushed_and_atexit_run(tmp_path):
    """At the end of its stream the SDK skips the interpreter's teardown (docs/grader-protocol.md,
    "Stream mode"): every answer is out, ``atexit`` hooks ran, the exit status is 0."""
    (tmp_path / "g.py").write_text(QUICK_EXIT_GRADER)
    lines = "".join(
        json.dumps({"payload": {"case_id": f"c{i}", "input": "q"}, "env": {}}) + "\n"
        for i in range(3)
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALRUN_GRADER_MODE": "serve"}
    done = subprocess.run(
        [sys.executable, "g.py"],
        input=lines,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert [a["result"]["reason"] for a in answers] == ["c0", "c1", "c2"]
    assert "atexit hook ran" in done.stderr


@pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable()))
def test_a_strict_worker_serves_many_cases_and_reaches_the_proxy(tmp_path):
    """A ``strict`` sandbox is built per worker, not per case: one worker serves every case
    (with a private temp folder of its own), through the relay to the proxy's socket."""
    ids = [f"c{i}" for i in range(4)]
    path = _write_eval(tmp_path, ids)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = run_cli(
        str(path), "--out", str(out), "--workers", "1", "--quiet", "--sandbox", "strict", env=env
    )
    assert proc.returncode == 0, proc.stderr
    results, _ = read_bundle(out)
    details = [r["graders"][0]["details"] for r in results]
    assert [d["cases_in_process"] for d in details] == [1, 2, 3, 4]
    assert len({d["pid"] for d in details}) == 1
    assert all(d["fresh_token"] and d["calls_left"] == 1 for d in details)


def test_each_new_worker_gets_its_case_before_the_next_one_starts(tmp_path, monkeypatch):
    """Starting a process holds the event loop until it runs: a pool asked for three workers at
    once starts them one after another and hands each its first case as soon as it is up, so
    the first cases are not all held back until the last worker has started."""
    import asyncio

    from evalrun.launcher import serve

    (tmp_path / "raw.py").write_text(RAW_GRADER)
    events: list[str] = []
    start, run_case = serve.ServeWorker.start, serve.ServeWorker.run_case

    async def logged_start(self):
        events.append("start")
        failure = await start(self)
        events.append("started")
        return failure

    async def logged_run_case(self, line, timeout):
        events.append("line")
        return await run_case(self, line, timeout)

    monkeypatch.setattr(serve.ServeWorker, "start", logged_start)
    monkeypatch.setattr(serve.ServeWorker, "run_case", logged_run_case)

    async def three_cases() -> list[bytes]:
        pool = serve.ServePool(
            lambda: [sys.executable, "raw.py"], tmp_path, dict(os.environ), 3, lambda c: c
        )
        try:
            lines = [serve.case_line({"case_id": f"c{i}"}, {}) for i in range(3)]
            outcomes = await asyncio.gather(*(pool.run(line, 30) for line in lines))
        finally:
            await pool.close()
        assert pool.started == 3
        return [o.stdout for o in outcomes]

    answers = asyncio.run(three_cases())
    assert [json.loads(a)["reason"] for a in answers] == ["c0", "c1", "c2"]
    assert events == ["start", "started", "line"] * 3


# -- a stray stdout line never shifts an answer onto another case (#31) -------------------------

STRAY_CASES = 14
STRAY_ON = 4
#: What a grader that prints its own result to stdout writes: an answer in all but the nonce.
STRAY_LINE = '{"exit": 0, "result": {"score": 1.0, "reason": "stray"}}'

SDK_STRAY_GRADER = f"""\
import os
import shutil
from grader_sdk import script_grader

@script_grader
def grade(inp):
    n = int(inp.case_id[1:])
    if n == {STRAY_ON}:
        os.write(1, {STRAY_LINE!r}.encode() + b"\\n")  # past the SDK, straight to stdout
    return {{"score": n / 20, "reason": inp.case_id}}
"""

JS_STRAY_GRADER = f"""\
import {{ writeSync }} from 'node:fs';
import {{ defineScriptGrader }} from {json.dumps((ROOT / "grader_sdk" / "js" / "index.mjs").as_uri())};

defineScriptGrader((input) => {{
  const n = Number(input.caseId.slice(1));
  if (n === {STRAY_ON}) writeSync(1, {json.dumps(STRAY_LINE)} + '\\n');
  return {{ score: n / 20, reason: input.caseId }};
}});
"""

#: A hand-written served grader (docs/grader-protocol.md) that answers case STRAY_ON twice: the
#: second answer goes out once the next case's line has been read, so it lands while that case
#: is in flight.
DUPLICATE_ANSWER_GRADER = f"""\
import json, sys

again = None
for line in sys.stdin:
    case = json.loads(line)
    if again is not None:
        print(again, flush=True)
        again = None
    n = int(case["payload"]["case_id"][1:])
    answer = json.dumps({{"nonce": case.get("nonce"), "exit": 0,
                         "result": {{"score": n / 20, "reason": case["payload"]["case_id"]}}}})
    print(answer, flush=True)
    if n == {STRAY_ON}:
        again = answer
"""

STRAY_GRADERS = {
    "python-sdk": ("g.py", SDK_STRAY_GRADER, [sys.executable, "g.py"]),
    "js-sdk": ("g.mjs", JS_STRAY_GRADER, ["node", "g.mjs"]),
    "second-answer": ("g.py", DUPLICATE_ANSWER_GRADER, [sys.executable, "g.py"]),
}


def _stray_run(tmp_path: Path, grader: str, workers: int, sandbox: str) -> dict[str, dict]:
    name, source, command = STRAY_GRADERS[grader]
    (tmp_path / name).write_text(source)
    tests = "".join(f"  - {{id: c{i}, input: q{i}, output: a{i}}}\n" for i in range(STRAY_CASES))
    path = tmp_path / "stray.eval.yaml"
    path.write_text(
        f"graders:\n  - name: g\n    command: {json.dumps(command)}\n    mode: serve\n"
        f"tests:\n{tests}"
    )
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = run_cli(
        str(path), "--out", str(out), "--workers", str(workers), "--sandbox", sandbox,
        "--quiet", env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr  # an errored case: the run is incomplete
    results, _ = read_bundle(out)
    assert sorted(r["id"] for r in results) == sorted(f"c{i}" for i in range(STRAY_CASES))
    return {r["id"]: r["graders"][0] for r in results}


#: the default run's combinations: every grader, both worker counts and both sandboxes; the other
#: nine run under ``slow`` (docs/architecture.md, "Tests")
STRAY_DEFAULT = {("python-sdk", 1, "auto"), ("js-sdk", 3, "strict"), ("second-answer", 3, "auto")}


@pytest.mark.parametrize(
    ("grader", "workers", "sandbox"),
    [
        pytest.param(
            g, w, s, id=f"{g}-{w}-{s}", marks=() if (g, w, s) in STRAY_DEFAULT else pytest.mark.slow
        )
        for g in STRAY_GRADERS
        for w in (1, 3)
        for s in ("auto", "strict")
    ],
)
def test_a_stray_stdout_line_errors_one_case_and_shifts_no_answer(
    tmp_path: Path, grader: str, workers: int, sandbox: str
) -> None:
    """One stray line used to shift every later answer by one case (5 of 14 wrong, exit 0).
    Each case line carries a nonce its answer echoes: every case that is not errored has its own
    score, and exactly one case errors, the one in flight when the stray line came."""
    if sandbox == "strict" and why_unavailable() is not None:
        pytest.skip(str(why_unavailable()))
    if grader == "js-sdk" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    by_id = _stray_run(tmp_path, grader, workers, sandbox)
    errored = sorted(i for i, g in by_id.items() if g["status"] == "error")
    for case_id, g in by_id.items():
        if case_id not in errored:
            assert (g["score"], g["reason"]) == (int(case_id[1:]) / 20, case_id), case_id
    assert len(errored) == 1, {i: by_id[i]["reason"] for i in errored}
    reason = by_id[errored[0]]["reason"]
    if grader == "second-answer":  # its first answer was right; the case after it pays
        assert errored != [f"c{STRAY_ON}"] and "nonce that is not the case in flight's" in reason
    else:
        assert errored == [f"c{STRAY_ON}"] and "without the nonce" in reason, reason


# -- a JSON result among debug lines is the result, in both modes (#32) -------------------------

CHATTY_GRADER = """\
import json, os, sys

def result(token):
    return "debug: token " + token + "\\n" + json.dumps({"score": 0.0, "reason": "wrong"})

if os.environ.get("EVALRUN_GRADER_MODE") == "serve":
    for line in sys.stdin:
        case = json.loads(line)
        token = case["env"]["AGENTV_TARGET_PROXY_TOKEN"]
        answer = {"nonce": case.get("nonce"), "exit": 0, "result": result(token)}
        print(json.dumps(answer), flush=True)
else:
    sys.stdin.read()
    print(result(os.environ["AGENTV_TARGET_PROXY_TOKEN"]))
"""


@pytest.mark.parametrize("mode", ["process", "serve"])
def test_a_json_result_after_a_debug_line_fails_and_the_line_is_a_redacted_warning(
    tmp_path: Path, mode: str
) -> None:
    """``debug: ...`` then ``{"score": 0.0}`` was a pass with score 1 (the JSON read as plain
    text). The JSON is the result; the debug line is a warning, with the proxy token it quotes
    redacted like any grader text (docs/security.md)."""
    (tmp_path / "targets.yaml").write_text(TARGETS)
    (tmp_path / "g.py").write_text(CHATTY_GRADER)
    (tmp_path / "chatty.eval.yaml").write_text(
        textwrap.dedent(
            f"""\
            judge: judge
            graders:
              - name: chatty
                command: [{json.dumps(sys.executable)}, g.py]
                mode: {mode}
                target: {{max_calls: 1}}
            tests:
              - {{id: c1, input: q, output: a}}
              - {{id: c2, input: q, output: a}}
            """
        )
    )
    out = tmp_path / "out"
    proc = run_cli(str(tmp_path / "chatty.eval.yaml"), "--out", str(out), "--quiet")
    assert proc.returncode == 1, proc.stderr  # both cases fail their grader
    results, _ = read_bundle(out)
    for r in results:
        grader = r["graders"][0]
        assert (grader["status"], grader["score"], grader["reason"]) == ("failed", 0.0, "wrong")
        (warning,) = grader["warnings"]
        assert "other stdout lines besides its JSON result" in warning
        assert "debug: token ***" in warning, warning
