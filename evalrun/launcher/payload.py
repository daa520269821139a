"""The JSON document a grader reads on stdin (protocol ``evalrun.grader/1``).

The payload is also a valid AgentV script-grader input (docs/grader-protocol.md, "AgentV
compatibility"): ``criteria`` is always a string, ``input``/``expected_output``/``input_files``
are always lists, and no message or tool call carries ``null`` where AgentV's SDK expects a value
or no key at all.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from evalrun.spec.models import GraderSpec, Message, TestCase, ToolCall
from evalrun.transcripts import Transcript
from evalrun.workspaces import FinalWorkspace

PROTOCOL = "evalrun.grader/1"

#: Which payload a command grader reads (docs/grader-protocol.md, "Payload generations"):
#: evalrun's, or AgentV's, whose Python helper refuses evalrun's own keys.
Wire = Literal["evalrun", "agentv"]
WIRES: tuple[Wire, ...] = ("evalrun", "agentv")


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
    workspace: FinalWorkspace | None = None,
) -> dict[str, Any]:
    """``transcript``: what the agent did, shown as ``messages``, ``trace`` and AgentV's
    trace fields (docs/grader-protocol.md, docs/agents.md); ``workspace``: the case's
    workspace after the agent (docs/agents.md, "What graders get from a workspace")."""
    inputs = case.input_messages
    expected = case.expected_messages
    messages = _conversation(inputs, output, transcript)
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
        "workspace_path": str(workspace.path) if workspace else None,
        "workspace_files": workspace.files if workspace else None,
        "file_changes": workspace.diff if workspace else None,
    }


def build_agentv_payload(
    case: TestCase,
    grader: GraderSpec,
    output: str | None,
    transcript: Transcript | None = None,
    workspace: FinalWorkspace | None = None,
) -> dict[str, Any]:
    """The keys AgentV's script graders get, and no other (docs/grader-protocol.md, "Payload
    generations"): AgentV's Python helper refuses ``reference_answer``, and AgentV sends null
    for an empty ``config`` and for absent ``metadata``."""
    inputs = case.input_messages
    messages = _conversation(inputs, output, transcript)
    return {
        "criteria": case.criteria or "",
        "expected_output": [message_dict(m) for m in case.expected_messages],
        "output": output,
        "messages": messages,
        "input_files": list(case.input_files),
        "input": [message_dict(m) for m in inputs],
        "metadata": case.metadata or None,
        "trace": transcript.trace() if transcript else None,
        "trace_summary": transcript.summary() if transcript else None,
        "token_usage": transcript.usage.to_dict() if transcript and transcript.usage else None,
        "cost_usd": transcript.cost_usd if transcript else None,
        "duration_ms": transcript.duration_ms if transcript else None,
        "start_time": None,
        "end_time": None,
        "file_changes": workspace.diff if workspace else None,
        "workspace_path": str(workspace.path) if workspace else None,
        "config": grader.config or None,
    }


def payload_for(
    wire: Wire,
    case: TestCase,
    grader: GraderSpec,
    output: str | None,
    attempt: int = 0,
    transcript: Transcript | None = None,
    workspace: FinalWorkspace | None = None,
) -> dict[str, Any]:
    """The payload of generation ``wire``."""
    if wire == "agentv":
        return build_agentv_payload(case, grader, output, transcript, workspace)
    return build_payload(case, grader, output, attempt, transcript, workspace)


def _conversation(
    inputs: list[Message], output: str | None, transcript: Transcript | None
) -> list[dict[str, Any]]:
    """The input messages, then what the target did: the agent's steps, or its one answer."""
    messages = [message_dict(m) for m in inputs]
    if transcript is not None:
        messages += transcript.messages()
    elif output is not None:
        messages.append({"role": "assistant", "content": output})
    return messages
