"""A judge target that misbehaves (rate limits, 500s, malformed JSON, stalls, connections cut
mid-response), through the real CLI: an ``openai`` target pointed at a local fake server, an SDK
grader per case. Retries are bounded, every case gets one result, and a judge that cannot be
used makes the case unscored (never a silent 0)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import read_bundle
from tests.fault_helpers import (
    FakeOpenAI,
    one_result_per_case,
    port_closed,
    recorded_pids,
    run_suite,
    working_in,
    write_suite,
)

GRADER = """
import json, os
from grader_sdk import TargetClient, script_grader

HERE = os.path.dirname(os.path.abspath(__file__))


@script_grader
def grade(inp):
    open(os.path.join(HERE, "pids", str(os.getpid())), "w").write(inp.case_id)
    open(os.path.join(HERE, "proxy_url"), "w").write(os.environ["AGENTV_TARGET_PROXY_URL"])
    reply = TargetClient.from_env(timeout=30).invoke(inp.question, target=inp.metadata.get("judge"))
    return {"score": 1.0 if json.loads(reply.raw_text)["verdict"] == "yes" else 0.0,
            "reason": "judge answered"}
"""

MAX_RETRIES = 2  # rate-limited needs two retries to get through

#: fault -> (case status, text in the grader's reason, upstream requests made)
EXPECTED = {
    "ok": ("passed", "judge answered", 1),
    "rate-limited": ("passed", "judge answered", 3),  # two 429s, Retry-After: 0, then ok
    "retry-after-1": ("passed", "judge answered", 2),
    "server-error": ("unscored", "HTTP 500", MAX_RETRIES + 1),
    "malformed": ("unscored", "not JSON", MAX_RETRIES + 1),
    "stall": ("unscored", "no response within", MAX_RETRIES + 1),
    "cut-off": ("unscored", "upstream_error", MAX_RETRIES + 1),
}


@pytest.mark.slow
def test_judge_faults_are_retried_then_leave_the_case_unscored(tmp_path: Path) -> None:
    (tmp_path / "pids").mkdir()
    (tmp_path / "grader.py").write_text(textwrap.dedent(GRADER))
    grader = {
        "name": "judged",
        "command": [sys.executable, "grader.py"],
        "target": {"max_calls": 5, "allow": ["impatient-judge"]},
        "timeout": 60,
    }
    cases = [
        {"id": fault, "input": f"Is this right? [fault:{fault}]", "output": "Paris."}
        for fault in EXPECTED
    ]
    # only the stalled case uses a short timeout, so a slow machine cannot time out the others
    cases[list(EXPECTED).index("stall")]["metadata"] = {"judge": "impatient-judge"}
    with FakeOpenAI() as fake:
        judge = {
            "name": "judge",
            "kind": "openai",
            "model": "fake-model",
            "base_url": fake.base_url,
            "api_key_env": "FAKE_JUDGE_KEY",
            "timeout": 10,
            "max_retries": MAX_RETRIES,
        }
        impatient = {**judge, "name": "impatient-judge", "timeout": 0.5}
        path = write_suite(tmp_path, graders=[grader], cases=cases, targets=[judge, impatient])
        out = tmp_path / "out"
        result = run_suite(
            path, out, "--workers", str(len(cases)), FAKE_JUDGE_KEY="sk-fake-judge-key"
        )
        hits = {fault: fake.hits_for(fault) for fault in EXPECTED}

    assert result.returncode == 3, result.stdout + result.stderr  # unscored beyond --max-errors
    results, summary = read_bundle(out)
    by_id = one_result_per_case(results, list(EXPECTED))
    for fault, (status, reason, _) in EXPECTED.items():
        grader_result = by_id[fault]["graders"][0]
        assert by_id[fault]["status"] == status, (fault, grader_result)
        assert reason in grader_result["reason"], (fault, grader_result["reason"])
        # retries are the proxy's: the grader made one call
        assert grader_result["proxy"]["calls"] == 1, fault
        if status == "unscored":
            assert by_id[fault]["score"] is None
    assert summary["counts"]["unscored"] == 4 and summary["counts"]["passed"] == 3
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    assert {c["case_id"]: c["status"] for c in calls} == {
        fault: "ok" if status == "passed" else "error" for fault, (status, _, _) in EXPECTED.items()
    }
    assert len(recorded_pids(tmp_path / "pids")) > 0
    assert working_in(tmp_path) == []
    assert port_closed((tmp_path / "proxy_url").read_text())
    assert hits == {fault: n for fault, (_, _, n) in EXPECTED.items()}
    assert set(fake.keys) == {"sk-fake-judge-key"}
