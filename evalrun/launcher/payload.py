"""The JSON document a grader reads on stdin (protocol ``evalrun.grader/1``)."""

from __future__ import annotations

from typing import Any

from evalrun.spec.models import GraderSpec, Message, TestCase

PROTOCOL = "evalrun.grader/1"


def message_dict(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"tool": c.tool, "input": c.input, "output": c.output} for c in message.tool_calls
        ]
    return out


def last_text(messages: list[Message], role: str) -> str | None:
    for message in reversed(messages):
        if message.role == role and message.text():
            return message.text()
    return None


def build_payload(
    case: TestCase,
    grader: GraderSpec,
    output: str | None,
    attempt: int = 0,
) -> dict[str, Any]:
    inputs = case.input_messages
    expected = case.expected_messages
    transcript = [message_dict(m) for m in inputs]
    if output is not None:
        transcript.append({"role": "assistant", "content": output})
    access = grader.access
    return {
        "protocol": PROTOCOL,
        "case_id": case.id,
        "question": last_text(inputs, "user") or "",
        "criteria": case.criteria,
        "input": [message_dict(m) for m in inputs],
        "output": output,
        "messages": transcript,
        "expected_output": [message_dict(m) for m in expected],
        "reference_answer": last_text(expected, "assistant"),
        "config": grader.config,
        "metadata": case.metadata,
        "grader": {"name": grader.name, "max_calls": access.max_calls if access else 0},
        "attempt": attempt,
    }
