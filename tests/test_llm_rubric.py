"""The llm-rubric grader (what AgentV's plain-string assertions become): verdict reading,
scoring, and abstaining when a verdict cannot be read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from grader_sdk import Abstain, GraderInput
from graders.llm_rubric import evaluate, read_verdict


@dataclass
class Reply:
    raw_text: str


class ScriptedJudge:
    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def invoke_batch(self, requests: list[dict[str, Any]]) -> list[Reply]:
        self.requests += requests
        return [Reply(self.replies.pop(0)) for _ in requests]


def payload(**extra: Any) -> GraderInput:
    data = {
        "question": "How high is Everest?",
        "criteria": "",
        "output": "8,849 metres.",
        "grader": {"name": "llm-rubric", "max_calls": 5},
        **extra,
    }
    return GraderInput.from_payload(data)


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ('{"pass": true, "score": 1, "reason": "ok"}', (True, 1.0, "ok")),
        (
            '```json\n{"pass": false, "score": 0.25, "reason": "partly"}\n```',
            (False, 0.25, "partly"),
        ),
        ('{"passed": "yes"}', (True, 1.0, "")),
        ('{"score": 0.75}', (True, 0.75, "")),
        ('{"score": 4}', None),
        ("I think it is fine.", None),
    ],
)
def test_read_verdict(reply: str, verdict: Any) -> None:
    assert read_verdict(reply) == verdict


def test_scores_the_mean_of_the_items_and_names_the_failed_one() -> None:
    judge = ScriptedJudge(
        '{"pass": true, "score": 1, "reason": "gives metres"}',
        '{"pass": false, "score": 0.5, "reason": "no source"}',
    )
    result = evaluate(payload(config={"rubric": ["Gives metres", "Cites a source"]}), judge)
    assert result["score"] == 0.75
    assert result["reason"] == "Cites a source: no source"
    assert [c["pass"] for c in result["checks"]] == [True, False]
    assert "<rubric_item>\nCites a source\n</rubric_item>" in judge.requests[1]["question"]
    assert judge.requests[0]["task"]["kind"] == "rubric"


def test_falls_back_to_the_criteria_and_routes_to_the_named_provider() -> None:
    judge = ScriptedJudge('{"pass": true, "score": 1, "reason": "ok"}')
    evaluate(payload(criteria="Gives metres", config={"provider": "strict-judge"}), judge)
    assert judge.requests[0]["target"] == "strict-judge"
    assert "Gives metres" in judge.requests[0]["question"]


def test_an_unreadable_verdict_abstains() -> None:
    judge = ScriptedJudge('{"pass": true, "score": 1}', "no idea")
    with pytest.raises(Abstain, match="1 of 2 rubric items could not be read: B"):
        evaluate(payload(config={"rubric": ["A", "B"]}), judge)


def test_nothing_to_grade_abstains() -> None:
    with pytest.raises(Abstain, match="no rubric"):
        evaluate(payload(), ScriptedJudge())
    with pytest.raises(Abstain, match="no answer"):
        evaluate(payload(output=None, config={"rubric": ["A"]}), ScriptedJudge())


@pytest.mark.parametrize(("config", "temperature"), [({}, 0), ({"temperature": 0.4}, 0.4)])
def test_the_judge_call_takes_the_graders_temperature(
    config: dict[str, Any], temperature: float
) -> None:
    """AgentV's ``temperature`` on an llm-rubric (docs/eval-files.md, "AgentV files")."""
    judge = ScriptedJudge('{"pass": true, "score": 1, "reason": "ok"}')
    evaluate(payload(config={"rubric": ["Gives a number"], **config}), judge)
    assert [r["temperature"] for r in judge.requests] == [temperature]


def test_the_judge_sees_the_turns_before_the_question() -> None:
    """In a conversation the item may be about earlier turns, so the judge is shown them
    (docs/agents.md, "Multi-turn conversations"); a one-message input shows none."""
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 15% of 200?"},
        {"role": "assistant", "content": "30."},
        {"role": "user", "content": "Now double that."},
    ]
    judge = ScriptedJudge('{"pass": true, "score": 1}')
    rubric = {"rubric": ["Uses the earlier 30"]}
    inp = payload(input=history, question="Now double that.", output="60.", config=rubric)
    evaluate(inp, judge)
    question = judge.requests[0]["question"]
    earlier = "system: Be brief.\n\nuser: What is 15% of 200?\n\nassistant: 30."
    assert f"<earlier_turns>\n{earlier}\n</earlier_turns>" in question
    assert "<question>\nNow double that.\n</question>" in question
    alone = ScriptedJudge('{"pass": true, "score": 1}')
    evaluate(payload(input=history[:2], config={"rubric": ["x"]}), alone)
    assert "<earlier_turns>" not in alone.requests[0]["question"]
