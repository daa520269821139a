"""The JSON document a grader reads on stdin (protocol ``evalrun.grader/1``).

The payload is also a valid AgentV script-grader input (docs/grader-protocol.md, "AgentV
compatibility"): ``criteria`` is always a string, ``input``/``expected_output``/``input_files``
are always lists, and no message or tool call carries ``null`` where AgentV's SDK expects a value
or no key at all.
"""

from __future__ import annotations

import json
from typing import Any

from evalrun.spec.models import GraderSpec, Message, TestCase, ToolCall
from evalrun.transcripts import Transcript

PROTOCOL = "evalrun.grader/1"


def message_dict(message: Message) -> dict[str, Any]:
    """One message: ``content`` only when there is some, ``tool_calls`` only when non-empty."""
    out: dict[str, Any] = {"role": message.role}
    content = _content(message.content)
    if content is not None:
        out["content"] = content
    if message.tool_calls:
        out["tool_calls"] = [_tool_call(c) for c in message.tool_calls]
    return out


def _content(value: Any) -> str | list[Any] | dict[str, Any] | None:
    """Strings, content-part lists and structured objects pass; other scalars become text."""
    if value is None or isinstance(value, (str, list, dict)):
        return value
    return json.dumps(value)


def _tool_call(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {"tool": call.tool, "input": call.input, "output": call.output}
    if call.id is not None:
        out["id"] = call.id
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
    transcript: Transcript | None = None,
) -> dict[str, Any]:
    """``transcript``: what the agent did, shown as ``messages``, ``trace`` and AgentV's
    trace fields (docs/grader-protocol.md, docs/agents.md)."""
    inputs = case.input_messages
    expected = case.expected_messages
    messages = [message_dict(m) for m in inputs]
    if transcript is not None:
        messages += transcript.messages()
    elif output is not None:
        messages.append({"role": "assistant", "content": output})
    access = grader.access
    return {
        "protocol": PROTOCOL,
        "case_id": case.id,
        "question": last_text(inputs, "user") or "",
        "criteria": case.criteria or "",
        "input": [message_dict(m) for m in inputs],
        "output": output,
        "messages": messages,
        "expected_output": [message_dict(m) for m in expected],
        "reference_answer": last_text(expected, "assistant"),
        "input_files": list(case.input_files),
        "config": grader.config,
        "metadata": case.metadata,
        "grader": {"name": grader.name, "max_calls": access.max_calls if access else 0},
        "attempt": attempt,
        "trace": transcript.trace() if transcript else None,
        "trace_summary": transcript.summary() if transcript else None,
        "token_usage": transcript.usage.to_dict() if transcript and transcript.usage else None,
        "cost_usd": transcript.cost_usd if transcript else None,
        "duration_ms": transcript.duration_ms if transcript else None,
    }
