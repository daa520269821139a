"""The task-completion judge grader: it shows the judge every step of the agent's run, scores by
the judge's verdict, and abstains on a case without a transcript or a reply it cannot read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalrun.launcher.payload import build_payload
from evalrun.spec.models import GraderSpec, TestCase
from evalrun.transcripts import read_transcript
from grader_sdk import Abstain, GraderInput
from graders.task_completion import evaluate
from tests.judge_helpers import ScriptedClient, run_with_proxy

DATA = Path(__file__).parent / "data" / "transcripts"


def payload(config: dict[str, Any] | None = None, *, transcript: bool = True) -> dict[str, Any]:
    """The payload evalrun builds for a case answered by the recorded Claude Code run."""
    t = read_transcript("claude-code", (DATA / "claude-code.jsonl").read_text())
    case = TestCase.model_validate(
        {
            "id": "fix-add",
            "input": "Fix add() in calc.py and run the tests.",
            "criteria": "Tests pass",
        }
    )
    grader = GraderSpec.model_validate({"type": "task-completion", "config": config or {}})
    return build_payload(case, grader, t.answer, 0, t if transcript else None)


def test_the_judge_sees_every_step_and_its_verdict_is_the_score() -> None:
    judge = ScriptedClient(['{"pass": true, "score": 0.9, "reason": "the test run passed"}'])
    result = evaluate(GraderInput.from_payload(payload()), judge)
    assert result == {
        "score": 0.9,
        "reason": "the test run passed",
        "details": {"judge_pass": True},
    }
    (request,) = judge.requests
    question = request["question"]
    assert "<task>\nFix add() in calc.py and run the tests.\n</task>" in question
    assert "<done_criteria>\nTests pass\n</done_criteria>" in question
    assert 'call Read({"file_path": "/tmp/proj/calc.py"})' in question
    assert "result:      1\tdef add(a, b):" in question  # the tool's output as it came back
    assert (
        'call Bash({"command": "python -m pytest -q", "description": "Run the tests"})' in question
    )
    assert "result: 1 passed in 0.01s" in question
    # the steps in order, the final answer last
    assert question.index("call Read") < question.index("call Edit") < question.index("call Bash")
    assert question.rstrip().endswith(
        "<final_answer>\nFixed: add() now returns a + b, and the test passes.\n</final_answer>"
    )
    assert request["task"] == {"kind": "task-completion"}


def test_config_criteria_win_and_a_provider_is_routed() -> None:
    judge = ScriptedClient(['{"pass": false, "score": 0.2, "reason": "no tests ran"}'])
    config = {"criteria": "The full suite ran", "provider": "strict-judge"}
    result = evaluate(GraderInput.from_payload(payload(config)), judge)
    assert result["score"] == 0.2 and result["details"] == {"judge_pass": False}
    assert "<done_criteria>\nThe full suite ran\n</done_criteria>" in judge.requests[0]["question"]
    assert judge.requests[0]["target"] == "strict-judge"


@pytest.mark.parametrize("reply", ["It looks done to me.", '{"score": 7}', '{"reason": "ok"}'])
def test_an_unreadable_verdict_abstains(reply: str) -> None:
    with pytest.raises(Abstain, match="the judge's verdict could not be read"):
        evaluate(GraderInput.from_payload(payload()), ScriptedClient([reply]))


def test_no_transcript_abstains_before_any_call() -> None:
    judge = ScriptedClient([])
    with pytest.raises(Abstain, match="reads the agent's transcript and this case has none"):
        evaluate(GraderInput.from_payload(payload(transcript=False)), judge)
    assert judge.requests == []


def test_through_the_real_proxy() -> None:
    """A real grader process, the real proxy over loopback HTTP, a mock judge: the verdict is
    the score."""
    rules = [
        {"task": "task-completion", "response": '{"pass": true, "score": 1, "reason": "done"}'}
    ]
    run = run_with_proxy("graders.task_completion", json.loads(json.dumps(payload())), rules)
    assert run.exit_code == 0, run.stderr
    assert run.result["score"] == 1 and run.result["reason"] == "done"
    assert run.calls == 1


def test_an_unreadable_reply_through_the_real_proxy_abstains() -> None:
    body = json.loads(json.dumps(payload()))
    run = run_with_proxy("graders.task_completion", body, [], default="Looks complete!")
    assert run.exit_code == 3, run.stderr
    assert run.result["abstain"] is True
    assert "could not be read" in run.result["reason"]


def test_goal_success_is_task_completion_with_the_goal_as_criteria() -> None:
    """AgentV's trajectory:goal-success: its goal replaces the criteria the judge is given."""
    for value in ("All tests pass", {"goal": "All tests pass"}):
        judge = ScriptedClient(['{"pass": true, "score": 1, "reason": "the test run passed"}'])
        body = payload({"value": value})
        result = evaluate(GraderInput.from_payload(body), judge)
        assert result["score"] == 1
        (request,) = judge.requests
        assert "<done_criteria>\nAll tests pass\n</done_criteria>" in request["question"]
        assert request["task"] == {"kind": "goal-success"}


def test_goal_success_options_are_checked_when_the_file_loads() -> None:
    from pydantic import ValidationError

    spec = GraderSpec.model_validate(
        {"type": "trajectory:goal-success", "config": {"value": {"goal": "Done"}}}
    )
    assert spec.kind.module == "graders.task_completion" and spec.needs_judge
    for grader, message in [
        ({"config": {"value": {"aim": "x"}}}, "value must be the goal, or {goal: text}"),
        ({"config": {"value": " "}}, "value must be the goal, or {goal: text}"),
        ({"negate": True, "config": {"value": "x"}}, "not-trajectory:goal-success is not"),
    ]:
        with pytest.raises(ValidationError, match=message):
            GraderSpec.model_validate({"type": "trajectory:goal-success", **grader})


def test_an_agentv_goal_without_a_transcript_scores_zero() -> None:
    """AgentV scores 0 where the run left no trace; evalrun's own files abstain."""
    judge = ScriptedClient([])
    config = {"value": "All tests pass", "no_transcript": "fail"}
    result = evaluate(GraderInput.from_payload(payload(config, transcript=False)), judge)
    assert result["score"] == 0 and "no transcript" in result["reason"]
    assert judge.requests == []
