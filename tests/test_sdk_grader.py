"""The ``@script_grader`` protocol runner: payload views, results, and exit codes of real processes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from grader_sdk import Abstain, GraderInput, GraderResult, run_grader
from tests.sdk_helpers import ROOT, FakeProxy


def run_script(
    tmp_path: Path, body: str, stdin: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "grader.py"
    script.write_text("from grader_sdk import *\n" + textwrap.dedent(body))
    base = {k: v for k, v in os.environ.items() if "PROXY" not in k}
    base["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, str(script)],
        input=stdin,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=30,
    )


PAYLOAD = json.dumps(
    {
        "protocol": "evalrun.grader/1",
        "case_id": "c1",
        "question": "What?",
        "criteria": "It is so.",
        "input": [{"role": "user", "content": "What?"}],
        "output": "So.",
        "expected_output": [{"role": "assistant", "content": "It is so."}],
        "config": {"k": 1},
        "grader": {"name": "g", "max_calls": 3},
        "attempt": 2,
    }
)


def test_graded_result_exit_0(tmp_path: Path) -> None:
    proc = run_script(
        tmp_path,
        """
        @script_grader
        def grade(inp: GraderInput) -> GraderResult:
            r = GraderResult(score=0.75, reason=f"{inp.case_id} {inp.question} {inp.config['k']}")
            return r.hit("h").miss("m").check("c", True, score=1.0)
        """,
        PAYLOAD,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "score": 0.75,
        "reason": "c1 What? 1",
        "hits": ["h"],
        "misses": ["m"],
        "checks": [{"text": "c", "pass": True, "score": 1.0}],
    }


def test_async_grader_function(tmp_path: Path) -> None:
    proc = run_script(
        tmp_path,
        """
        import asyncio

        @script_grader
        async def grade(inp):
            await asyncio.sleep(0)
            return {"score": 1.0, "pass": True, "reason": inp.output}
        """,
        PAYLOAD,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"score": 1.0, "pass": True, "reason": "So."}


def test_abstain_exit_3_with_reason_on_stdout(tmp_path: Path) -> None:
    proc = run_script(
        tmp_path,
        """
        @script_grader
        def grade(inp):
            raise Abstain("cannot judge this", {"why": 1})
        """,
        PAYLOAD,
    )
    assert proc.returncode == 3
    assert json.loads(proc.stdout) == {
        "abstain": True,
        "reason": "cannot judge this",
        "details": {"why": 1},
    }


def test_unexpected_exception_exit_1_with_traceback_tail(tmp_path: Path) -> None:
    proc = run_script(
        tmp_path,
        """
        @script_grader
        def grade(inp):
            return {"score": 1 / 0}
        """,
        PAYLOAD,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "Traceback" in proc.stderr and "ZeroDivisionError" in proc.stderr


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("1.5", "score must be in 0..1"),
        ("{'reason': 'x'}", "needs 'score'"),
        ("None", "must return"),
    ],
)
def test_invalid_results_are_errors(tmp_path: Path, returned: str, message: str) -> None:
    proc = run_script(
        tmp_path, f"@script_grader\ndef grade(inp):\n    return {returned}\n", PAYLOAD
    )
    assert proc.returncode == 1
    assert message in proc.stderr


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]"])
def test_bad_stdin_is_an_error(tmp_path: Path, stdin: str) -> None:
    proc = run_script(tmp_path, "@script_grader\ndef grade(inp):\n    return 1.0\n", stdin)
    assert proc.returncode == 1 and proc.stderr


def test_unreachable_judge_abstains(tmp_path: Path) -> None:
    env = {"AGENTV_TARGET_PROXY_URL": "http://127.0.0.1:9", "AGENTV_TARGET_PROXY_TOKEN": "t"}
    proc = run_script(
        tmp_path,
        """
        @script_grader
        def grade(inp):
            TargetClient.from_env().info()
            return 1.0
        """,
        PAYLOAD,
        env,
    )
    assert proc.returncode == 3
    assert "judge could not be used" in json.loads(proc.stdout)["reason"]


def test_upstream_failure_abstains_but_budget_errors(tmp_path: Path) -> None:
    body = """
        @script_grader
        def grade(inp):
            TargetClient.from_env().invoke("q")
            return 1.0
        """
    with FakeProxy() as proxy:
        proxy.fail_next(502, "upstream_error", "judge down")
        upstream = run_script(tmp_path, body, PAYLOAD, proxy.env())
        proxy.fail_next(429, "max_calls_exceeded", "over budget", limit=1, used=1)
        budget = run_script(tmp_path, body, PAYLOAD, proxy.env())
    assert upstream.returncode == 3 and "judge down" in upstream.stdout
    assert budget.returncode == 1 and "BudgetExceeded" in budget.stderr


def test_a_grader_using_the_judge_end_to_end(tmp_path: Path) -> None:
    with FakeProxy(lambda r: '{"relevant": true, "reason": "fine"}', max_calls=5) as proxy:
        proc = run_script(
            tmp_path,
            """
            @script_grader
            def grade(inp):
                client = TargetClient.from_env()
                verdicts = judge_relevance(client, inp.question, ["p1", "p2"])
                info = client.info()
                return {"score": sum(v.ok for v in verdicts) / 2, "details": info.remaining}
            """,
            PAYLOAD,
            proxy.env(),
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"score": 1.0, "details": 3}


def test_imported_module_does_not_run(tmp_path: Path) -> None:
    (tmp_path / "mygrader.py").write_text(
        "from grader_sdk import script_grader\n@script_grader\ndef grade(inp):\n    return 0.5\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import mygrader; print(mygrader.grade(None), callable(mygrader.grade.main))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        input="",
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0.5 True"


# --- in-process: payload views and result coercion ----------------------------------------


def run_inline(fn: Any, payload: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_grader(fn, io.StringIO(json.dumps(payload)), out, err)
    return code, out.getvalue(), err.getvalue()


def test_camel_case_agentv_payload_is_accepted() -> None:
    seen: dict[str, Any] = {}

    def grade(inp: GraderInput) -> bool:
        seen.update(
            case_id=inp.case_id,
            question=inp.question,
            reference=inp.reference_answer,
            context=inp.retrieval_context(),
            calls=inp.tool_call_results(),
            max_calls=inp.max_calls,
            output=inp.output,
        )
        return True

    payload = {
        "caseId": "agentv-1",
        "input": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Capital?"}],
        "candidateAnswer": "Paris.",
        "expectedOutput": [
            {
                "role": "assistant",
                "toolCalls": [
                    {
                        "name": "vector_search",
                        "arguments": '{"query": "capital"}',
                        "result": {"results": ["Paris is the capital.", {"content": "Lyon."}]},
                    }
                ],
            },
            {"role": "assistant", "content": "Paris is the capital of France."},
        ],
        "grader": {"maxCalls": 4},
    }
    code, out, _ = run_inline(grade, payload)
    assert code == 0 and json.loads(out) == {"score": 1.0, "pass": True}
    assert seen == {
        "case_id": "agentv-1",
        "question": "Capital?",
        "reference": "Paris is the capital of France.",
        "context": ["Paris is the capital.", "Lyon."],
        "calls": [
            {
                "tool": "vector_search",
                "query": "capital",
                "results": ["Paris is the capital.", "Lyon."],
            }
        ],
        "max_calls": 4,
        "output": "Paris.",
    }


def test_tool_outputs_in_every_supported_shape() -> None:
    inp = GraderInput.from_payload(
        {
            "expected_output": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"tool": "a", "output": ["x", "y"]},
                        {"tool": "b", "output": {"results": ["z"]}},
                        {"tool": "c", "output": "one passage"},
                        {"tool": "d", "output": '{"results": ["json string"]}'},
                        {"tool": "e", "output": {"other": 1}},
                        {"tool": "f", "output": None},
                    ],
                }
            ]
        }
    )
    assert inp.retrieval_context() == ["x", "y", "z", "one passage", "json string"]
    assert [g["results"] for g in inp.tool_call_results()][4:] == [[], []]


def test_string_expected_output_and_criteria_fallback() -> None:
    inp = GraderInput.from_payload({"input": "Hi?", "expected_output": "Hello."})
    assert inp.question == "Hi?"
    assert inp.reference_answer == "Hello."
    assert inp.expected_text() == "Hello."
    assert (
        GraderInput.from_payload({"criteria": "C", "expected_output": "E"}).expected_text() == "C"
    )


def test_plain_returns_are_coerced() -> None:
    assert json.loads(run_inline(lambda inp: 0.25, {})[1]) == {"score": 0.25}
    assert json.loads(run_inline(lambda inp: False, {})[1]) == {"score": 0.0, "pass": False}
    result = GraderResult(passed=True, reason="ok", details={"a": 1})
    assert json.loads(run_inline(lambda inp: result, {})[1]) == {
        "pass": True,
        "reason": "ok",
        "hits": [],
        "misses": [],
        "details": {"a": 1},
    }


def test_abstain_in_process() -> None:
    def grade(inp: GraderInput) -> float:
        raise Abstain("nope")

    code, out, err = run_inline(grade, {})
    assert (code, json.loads(out), err) == (3, {"abstain": True, "reason": "nope"}, "")


def test_the_sdk_imports_neither_dataclasses_nor_inspect() -> None:
    """Their import was 8.7 ms of the SDK's ~20 ms, paid by every grader process
    (docs/performance.md)."""
    probe = "import sys, grader_sdk; print(sorted({'dataclasses', 'inspect'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = [{str(ROOT)!r}]; {probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_sdk_records_compare_by_value_and_answer_as_json() -> None:
    from dataclasses import dataclass

    from grader_sdk import Verdict

    @dataclass
    class Own:
        label: str

    first = GraderInput(case_id="c1", raw={"big": "payload"})
    assert first == GraderInput(case_id="c1", raw={"big": "payload"})
    assert first != GraderInput(case_id="c2")
    assert "case_id='c1'" in repr(first) and "payload" not in repr(first)
    details = {"verdicts": [Verdict(True, "relevant", node=1)], "own": Own("x")}
    out = io.StringIO()
    code = run_grader(lambda inp: {"score": 1.0, "details": details}, io.StringIO("{}"), out)
    assert code == 0
    written = json.loads(out.getvalue())["details"]
    assert written["verdicts"] == [
        {"ok": True, "reason": "relevant", "node": 1, "confidence": None, "raw": ""}
    ]
    assert written["own"] == {"label": "x"}
