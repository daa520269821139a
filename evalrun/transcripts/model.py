"""The neutral transcript: steps (a message and the tool calls it made), usage, cost, the answer.

One shape for every agent format, so graders, results.jsonl and the trajectory matcher read one
thing whichever agent ran (docs/agents.md). ``to_dict``/``from_dict`` are the form kept in
results.jsonl; ``messages`` and ``trace`` are the forms a grader reads (docs/grader-protocol.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None

    def to_dict(self) -> dict[str, int]:
        out = {"input": self.input_tokens, "output": self.output_tokens}
        if self.cached_tokens is not None:
            out["cached"] = self.cached_tokens
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage | None:
        if data is None:
            return None
        return cls(int(data.get("input", 0)), int(data.get("output", 0)), data.get("cached"))


@dataclass
class ToolCall:
    """One call and, once it came back, its result (``is_error`` when the tool failed)."""

    name: str
    arguments: Any = None
    id: str | None = None
    result: Any = None
    is_error: bool = False
    duration_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": self.arguments,
            "id": self.id,
            "result": self.result,
            "is_error": self.is_error,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(**{k: data[k] for k in _CALL_KEYS if k in data})


@dataclass
class Step:
    """One message of the agent's (or the user's, the system's) with the tool calls it made."""

    role: str
    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    duration_ms: float | None = None
    usage: Usage | None = None
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "text": self.text,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "duration_ms": self.duration_ms,
            "usage": self.usage.to_dict() if self.usage else None,
            "cost_usd": self.cost_usd,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        return cls(
            role=data["role"],
            text=data.get("text"),
            tool_calls=[ToolCall.from_dict(c) for c in data.get("tool_calls") or ()],
            duration_ms=data.get("duration_ms"),
            usage=Usage.from_dict(data.get("usage")),
            cost_usd=data.get("cost_usd"),
        )


@dataclass
class Transcript:
    """``answer`` is the case's output; ``usage``, ``cost_usd`` and ``duration_ms`` are the
    run's totals when the agent reported them (None when it did not: never guessed)."""

    format: str
    answer: str
    steps: list[Step] = field(default_factory=list)
    usage: Usage | None = None
    cost_usd: float | None = None
    duration_ms: float | None = None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for step in self.steps for call in step.tool_calls]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "answer": self.answer,
            "steps": [s.to_dict() for s in self.steps],
            "usage": self.usage.to_dict() if self.usage else None,
            "cost_usd": self.cost_usd,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transcript:
        return cls(
            format=data["format"],
            answer=data["answer"],
            steps=[Step.from_dict(s) for s in data.get("steps") or ()],
            usage=Usage.from_dict(data.get("usage")),
            cost_usd=data.get("cost_usd"),
            duration_ms=data.get("duration_ms"),
        )

    def messages(self) -> list[dict[str, Any]]:
        """The steps as grader-protocol messages, ending with the answer (docs/grader-protocol.md)."""
        out = [_message(step) for step in self.steps]
        last = self.steps[-1] if self.steps else None
        if last is None or last.role != "assistant" or last.text != self.answer:
            out.append({"role": "assistant", "content": self.answer})
        return out

    def summary(self) -> dict[str, Any]:
        """AgentV's trace summary: ``event_count`` is the number of tool calls (AgentV counts
        only tool-call events), then calls per tool, failed calls, model turns."""
        counts: dict[str, int] = {}
        durations: dict[str, list[float]] = {}
        for call in self.tool_calls:
            counts[call.name] = counts.get(call.name, 0) + 1
            if call.duration_ms is not None:
                durations.setdefault(call.name, []).append(call.duration_ms)
        out: dict[str, Any] = {
            "event_count": len(self.tool_calls),
            "tool_calls": counts,
            "error_count": sum(call.is_error for call in self.tool_calls),
            "llm_call_count": sum(s.role == "assistant" for s in self.steps),
        }
        if durations:
            out["tool_durations"] = durations
        return out

    def trace(self) -> dict[str, Any]:
        """The steps as AgentV's trace (summary, messages, events), snake_case on the wire."""
        out = {**self.summary(), "messages": self.messages(), "events": self._events()}
        if self.usage is not None:
            out["token_usage"] = self.usage.to_dict()
        if self.cost_usd is not None:
            out["cost_usd"] = self.cost_usd
        if self.duration_ms is not None:
            out["duration_ms"] = self.duration_ms
        return out

    def _events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []

        def add(kind: str, **body: Any) -> None:
            ordinal = len(events)
            body = {k: v for k, v in body.items() if v is not None}
            events.append({"event_id": f"e{ordinal}", "ordinal": ordinal, "type": kind, **body})

        for step in self.steps:
            if step.text is not None:
                message: dict[str, Any] = {"role": step.role, "content": step.text}
                if step.usage is not None:
                    message["token_usage"] = step.usage.to_dict()
                add("message", message=message, duration_ms=step.duration_ms)
            for call in step.tool_calls:
                tool = {"name": call.name, "call_id": call.id, "input": call.arguments}
                add("tool_call", tool={k: v for k, v in tool.items() if v is not None})
                status = "error" if call.is_error else "ok"
                result = {"name": call.name, "call_id": call.id, "output": call.result}
                result = {k: v for k, v in result.items() if v is not None}
                add("tool_result", tool={**result, "status": status}, duration_ms=call.duration_ms)
        add("final_response", message={"role": "assistant", "content": self.answer})
        return events


_CALL_KEYS = tuple(ToolCall.__dataclass_fields__)


def _message(step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"role": step.role}
    if step.text is not None:
        out["content"] = step.text
    if step.tool_calls:
        out["tool_calls"] = [_protocol_call(c) for c in step.tool_calls]
    return out


def _protocol_call(call: ToolCall) -> dict[str, Any]:
    out = {"tool": call.name, "input": call.arguments, "output": call.result}
    if call.id is not None:
        out["id"] = call.id
    if call.duration_ms is not None:
        out["duration_ms"] = call.duration_ms
    return out
