"""Task completion: did the agent do what it was asked? A judge reads the whole transcript.

The answer alone can claim success the run never reached ("tests pass" after no test ran), so
the judge sees every step: the task, each message, each tool call with its arguments and
result, then the final answer (docs/agents.md, "task-completion"). ``config.criteria`` (or the
test's ``criteria``) says what done means; AgentV's ``trajectory:goal-success`` runs this grader
with its goal (``config.value``, validated when the file loaded) as the criteria. A case without
a transcript, or a reply that cannot be read, makes the grader abstain with the reason, never a
guessed score; an AgentV file's goal grader (``no_transcript: fail``) scores 0 without one, as
AgentV does.

    python -m graders.task_completion < payload.json
"""

from __future__ import annotations

import json
from typing import Any

from grader_sdk import Abstain, GraderInput, message_text, script_grader
from graders._judgekit import judge_client, send_batch, shorten, truncate_middle
from graders.llm_rubric import verdict_reading

SYSTEM_PROMPT = (
    "You decide whether an AI agent completed the task it was given, from the record of its "
    "run. Judge what the steps show was done, not what the agent says it did: a claim the tool "
    "results do not support counts as not done. When done-criteria are given, the task is "
    "complete only if every one is met. "
    'Reply with one JSON object and nothing else: {"pass": true or false, '
    '"score": <number from 0 to 1, how much of the task was completed>, '
    '"reason": "<one or two short sentences naming the evidence>"}'
)
#: characters of one tool call's arguments or result shown to the judge
CALL_TEXT_LIMIT = 2_000


def render_steps(messages: list[dict[str, Any]]) -> str:
    """The transcript's messages (the payload's ``messages``, input first) as numbered text."""
    lines: list[str] = []
    for number, message in enumerate(messages, 1):
        role = str(message.get("role", "assistant"))
        text = message_text(message).strip()
        lines.append(f"[{number}] {role}" + (f": {text}" if text else ""))
        for call in message.get("tool_calls") or ():
            if not isinstance(call, dict):
                continue
            arguments = shorten(_as_text(call.get("input")), CALL_TEXT_LIMIT)
            lines.append(f"    call {call.get('tool', '?')}({arguments})")
            lines.append(f"    result: {shorten(_as_text(call.get('output')), CALL_TEXT_LIMIT)}")
    return "\n".join(lines)


def _as_text(value: Any) -> str:
    if value is None:
        return "(none)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def build_request(inp: GraderInput) -> dict[str, Any]:
    parts = [f"<task>\n{truncate_middle(inp.question, 8_000, 7_000, 800)}\n</task>"]
    criteria = _goal(inp.config) or inp.config.get("criteria", inp.criteria)
    if isinstance(criteria, str) and criteria.strip():
        parts.append(f"<done_criteria>\n{criteria.strip()}\n</done_criteria>")
    parts.append(
        f"<run>\n{truncate_middle(render_steps(inp.messages), 60_000, 50_000, 9_000)}\n</run>"
    )
    parts.append(f"<final_answer>\n{truncate_middle(inp.output or '')}\n</final_answer>")
    request: dict[str, Any] = {
        "question": "\n\n".join(parts),
        "systemPrompt": SYSTEM_PROMPT,
        "temperature": 0,
        "task": {"kind": "goal-success" if _goal(inp.config) else "task-completion"},
    }
    provider = inp.config.get("provider")
    if isinstance(provider, str) and provider:
        request["target"] = provider
    return request


def _goal(config: dict[str, Any]) -> str | None:
    """``trajectory:goal-success``'s goal: ``value`` as text or ``{goal: text}``."""
    value = config.get("value")
    goal = value.get("goal") if isinstance(value, dict) else value
    return goal.strip() if isinstance(goal, str) and goal.strip() else None


def evaluate(inp: GraderInput, client: Any) -> dict[str, Any]:
    if not inp.raw.get("trace") and inp.config.get("no_transcript") == "fail":
        return {"score": 0.0, "reason": "no trace data: the case has no transcript (scored 0)"}
    if not inp.raw.get("trace"):
        raise Abstain(
            "task-completion reads the agent's transcript and this case has none (a cli "
            "target's transcript:)"
        )
    if inp.output is None:
        raise Abstain("there is no final answer to grade")
    (reading,) = send_batch(client, [build_request(inp)], inp.max_calls, verdict_reading)
    if not reading.ok:
        raise Abstain(f"the judge's verdict could not be read: {reading.explain()}")
    passed, score, reason = reading.value
    reason = reason or ("the judge found the task completed" if passed else "not completed")
    return {"score": score, "reason": reason, "details": {"judge_pass": passed}}


@script_grader
def main(inp: GraderInput) -> dict[str, Any]:
    """Runs at once under ``python -m graders.task_completion``; importing only defines it."""
    return evaluate(inp, judge_client())
