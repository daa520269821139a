"""Readers that turn an agent's JSON stream (one event a line) into a :class:`Transcript`.

Each reader validates every line with pydantic and fails on the first line it cannot read,
naming it: a broken stream is an error, never an empty answer (docs/agents.md). Events a reader
does not use are skipped, so a newer agent that adds event types still reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalrun.errors import EvalrunError
from evalrun.transcripts.model import Step, ToolCall, Transcript, Usage


class TranscriptError(EvalrunError, ValueError):
    """The stream cannot be read; ``line`` is 1-based, None when no one line is at fault."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")


_E = TypeVar("_E", bound=_Event)


def _lines(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line as a JSON object, with its number."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptError(f"not JSON ({exc.msg}): {line[:80]!r}", number) from None
        if not isinstance(value, dict):
            raise TranscriptError(f"not a JSON object: {line[:80]!r}", number)
        yield number, value


def _parse(model: type[_E], data: dict[str, Any], number: int) -> _E:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "event"
        kind = data.get("type")
        raise TranscriptError(f"{kind!r} event: {where}: {first['msg']}", number) from None


def _require_answer(answer: str | None, fmt: str) -> str:
    if answer is None:
        raise TranscriptError(f"no final answer in the {fmt} stream")
    return answer


# --- Claude Code: `claude -p --output-format stream-json` (docs/agents.md) -------------------


class _ClaudeUsage(_Event):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None

    def usage(self) -> Usage:
        cached = self.cache_read_input_tokens
        fresh = self.input_tokens + (self.cache_creation_input_tokens or 0) + (cached or 0)
        return Usage(fresh, self.output_tokens, cached)


class _ClaudeBlock(_Event):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None
    tool_use_id: str | None = None
    content: Any = None
    is_error: bool | None = None


class _ClaudeMessage(_Event):
    content: list[_ClaudeBlock] | str = Field(default_factory=list)
    usage: _ClaudeUsage | None = None


class _ClaudeEvent(_Event):
    type: str
    subtype: str | None = None
    message: _ClaudeMessage | None = None
    result: str | None = None
    is_error: bool = False
    total_cost_usd: float | None = None
    duration_ms: float | None = None
    usage: _ClaudeUsage | None = None


def _claude_result_text(content: Any) -> Any:
    """A tool_result's content: a string, or text blocks joined (other blocks kept as they are)."""
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    ):
        return "\n".join(str(b.get("text", "")) for b in content)
    return content


def read_claude_code(text: str) -> Transcript:
    steps: list[Step] = []
    calls: dict[str, ToolCall] = {}
    transcript = Transcript(format="claude-code", answer="")
    answer: str | None = None
    for number, data in _lines(text):
        event = _parse(_ClaudeEvent, data, number)
        if event.type in ("assistant", "user") and event.message is not None:
            blocks = event.message.content
            if isinstance(blocks, str):
                steps.append(Step(role=event.type, text=blocks))
                continue
            texts = [b.text for b in blocks if b.type == "text" and b.text is not None]
            step = Step(role=event.type, text="\n".join(texts) if texts else None)
            for block in blocks:
                if block.type == "tool_use":
                    if block.name is None:
                        raise TranscriptError("tool_use block without a name", number)
                    call = ToolCall(block.name, block.input, block.id)
                    step.tool_calls.append(call)
                    if block.id is not None:
                        calls[block.id] = call
                elif block.type == "tool_result":
                    call_ = calls.get(block.tool_use_id or "")
                    if call_ is None:
                        raise TranscriptError(
                            f"tool_result for an unknown tool_use id {block.tool_use_id!r}",
                            number,
                        )
                    call_.result = _claude_result_text(block.content)
                    call_.is_error = bool(block.is_error)
            if event.message.usage is not None and event.type == "assistant":
                step.usage = event.message.usage.usage()
            if step.text is not None or step.tool_calls:
                steps.append(step)
        elif event.type == "result":
            if event.is_error:
                raise TranscriptError(
                    f"the agent reported an error ({event.subtype}): {event.result or ''}".strip(),
                    number,
                )
            answer = event.result
            transcript.cost_usd = event.total_cost_usd
            transcript.duration_ms = event.duration_ms
            transcript.usage = event.usage.usage() if event.usage else None
    if answer is None:
        answer = next((s.text for s in reversed(steps) if s.role == "assistant" and s.text), None)
    transcript.answer = _require_answer(answer, "claude-code")
    transcript.steps = steps
    return transcript


# --- Codex: `codex exec --json` (docs/agents.md) ----------------------------------------------


class _CodexItem(_Event):
    id: str | None = None
    type: str
    text: str | None = None
    command: str | None = None
    aggregated_output: str | None = None
    exit_code: int | None = None
    status: str | None = None
    changes: Any = None
    server: str | None = None
    tool: str | None = None
    arguments: Any = None
    result: Any = None
    error: Any = None
    query: str | None = None


class _CodexUsage(_Event):
    input_tokens: int = 0
    cached_input_tokens: int | None = None
    output_tokens: int = 0


class _CodexError(_Event):
    message: str = ""


class _CodexEvent(_Event):
    type: str
    item: _CodexItem | None = None
    usage: _CodexUsage | None = None
    error: _CodexError | None = None
    message: str | None = None


def _codex_call(item: _CodexItem) -> ToolCall | None:
    failed = item.status == "failed"
    if item.type == "command_execution":
        failed = failed or (item.exit_code not in (None, 0))
        return ToolCall(
            "command_execution",
            {"command": item.command},
            item.id,
            item.aggregated_output,
            failed,
        )
    if item.type == "file_change":
        return ToolCall("file_change", {"changes": item.changes}, item.id, item.status, failed)
    if item.type == "mcp_tool_call":
        failed = failed or item.error is not None
        result = item.error if item.error is not None else item.result
        return ToolCall(f"mcp:{item.server}/{item.tool}", item.arguments, item.id, result, failed)
    if item.type == "web_search":
        return ToolCall("web_search", {"query": item.query}, item.id)
    return None


def read_codex(text: str) -> Transcript:
    steps: list[Step] = []
    total: Usage | None = None
    for number, data in _lines(text):
        event = _parse(_CodexEvent, data, number)
        if event.type == "item.completed":
            if event.item is None:
                raise TranscriptError("item.completed event without an item", number)
            item = event.item
            if item.type == "agent_message":
                steps.append(Step(role="assistant", text=item.text or ""))
            else:
                call = _codex_call(item)
                if call is not None:
                    steps.append(Step(role="assistant", tool_calls=[call]))
        elif event.type == "turn.completed" and event.usage is not None:
            turn = Usage(
                event.usage.input_tokens,
                event.usage.output_tokens,
                event.usage.cached_input_tokens,
            )
            if steps:
                steps[-1].usage = turn
            total = turn if total is None else _add(total, turn)
        elif event.type in ("turn.failed", "error"):
            reason = event.error.message if event.error else event.message
            raise TranscriptError(f"the agent reported an error: {reason or event.type}", number)
    answer = next((s.text for s in reversed(steps) if s.text is not None), None)
    return Transcript("codex", _require_answer(answer, "codex"), steps, total)


def _add(a: Usage, b: Usage) -> Usage:
    cached = None if a.cached_tokens is None and b.cached_tokens is None else 0
    if cached is not None:
        cached = (a.cached_tokens or 0) + (b.cached_tokens or 0)
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, cached)


# --- evalrun's own JSONL transcript (docs/agents.md) ------------------------------------------


class _JsonlUsage(_Event):
    input: int = 0
    output: int = 0
    cached: int | None = None


class _JsonlEvent(_Event):
    model_config = ConfigDict(extra="forbid")
    type: Literal["message", "tool_call", "tool_result", "final"]
    role: Literal["assistant", "user", "system", "tool"] = "assistant"
    text: str | None = None
    id: str | None = None
    name: str | None = None
    arguments: Any = None
    result: Any = None
    is_error: bool = False
    duration_ms: float | None = Field(default=None, ge=0)
    usage: _JsonlUsage | None = None
    cost_usd: float | None = Field(default=None, ge=0)


def read_jsonl(text: str) -> Transcript:
    steps: list[Step] = []
    open_calls: list[ToolCall] = []
    transcript = Transcript(format="jsonl", answer="")
    answer: str | None = None
    for number, data in _lines(text):
        event = _parse(_JsonlEvent, data, number)
        usage = (
            Usage(event.usage.input, event.usage.output, event.usage.cached)
            if event.usage
            else None
        )
        if event.type == "message":
            if event.text is None:
                raise TranscriptError("message event without text", number)
            steps.append(Step(event.role, event.text, [], event.duration_ms, usage, event.cost_usd))
        elif event.type == "tool_call":
            if not event.name:
                raise TranscriptError("tool_call event without a name", number)
            call = ToolCall(event.name, event.arguments, event.id)
            steps.append(Step("assistant", None, [call], event.duration_ms, usage, event.cost_usd))
            open_calls.append(call)
        elif event.type == "tool_result":
            call_ = _answered(open_calls, event.id)
            if call_ is None:
                raise TranscriptError(
                    f"tool_result with no open tool_call (id {event.id!r})", number
                )
            call_.result, call_.is_error, call_.duration_ms = (
                event.result,
                event.is_error,
                event.duration_ms,
            )
        else:
            if event.text is None:
                raise TranscriptError("final event without text", number)
            answer = event.text
            transcript.usage, transcript.cost_usd = usage, event.cost_usd
            transcript.duration_ms = event.duration_ms
    if answer is None:
        answer = next((s.text for s in reversed(steps) if s.role == "assistant" and s.text), None)
    transcript.answer = _require_answer(answer, "jsonl")
    transcript.steps = steps
    return transcript


def _answered(open_calls: list[ToolCall], call_id: str | None) -> ToolCall | None:
    """The call a result answers: by id, else the oldest one still open; it is then closed."""
    for index, call in enumerate(open_calls):
        if call_id is None or call.id == call_id:
            return open_calls.pop(index)
    return None


# --- pi: `pi --print --mode json` (docs/agents.md) -----------------------------------------


class _PiCost(_Event):
    total: float | None = None


class _PiUsage(_Event):
    input: int = 0
    output: int = 0
    cacheRead: int = 0  # noqa: N815 (pi's wire names)
    cacheWrite: int = 0  # noqa: N815
    cost: _PiCost | None = None

    def usage(self) -> Usage:
        return Usage(self.input + self.cacheRead + self.cacheWrite, self.output, self.cacheRead)


class _PiBlock(_Event):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    arguments: Any = None


class _PiMessage(_Event):
    role: str
    content: list[_PiBlock] | str = Field(default_factory=list)
    usage: _PiUsage | None = None
    stopReason: str | None = None  # noqa: N815
    errorMessage: str | None = None  # noqa: N815
    toolCallId: str | None = None  # noqa: N815
    isError: bool = False  # noqa: N815


class _PiEvent(_Event):
    type: str
    message: _PiMessage | None = None


def _pi_text(content: list[_PiBlock] | str) -> str | None:
    if isinstance(content, str):
        return content
    texts = [b.text for b in content if b.type == "text" and b.text is not None]
    return "\n".join(texts) if texts else None


def read_pi(text: str) -> Transcript:
    """Each complete message (``message_end``) in order; the partial ``message_start`` and
    ``message_update``, the ``tool_execution_*`` echoes and ``agent_end``'s copy of every
    message are not read again. The prompt pi echoes as a user message is not a step."""
    steps: list[Step] = []
    calls: dict[str, ToolCall] = {}
    for number, data in _lines(text):
        event = _parse(_PiEvent, data, number)
        if event.type != "message_end" or event.message is None:
            continue
        message = event.message
        if message.role == "assistant":
            if message.stopReason in ("error", "aborted"):
                reason = message.errorMessage or message.stopReason
                raise TranscriptError(f"the agent reported an error: {reason}", number)
            step = Step("assistant", _pi_text(message.content))
            for block in message.content if isinstance(message.content, list) else ():
                if block.type == "toolCall":
                    if block.name is None:
                        raise TranscriptError("toolCall block without a name", number)
                    call = ToolCall(block.name, block.arguments, block.id)
                    step.tool_calls.append(call)
                    calls[block.id or ""] = call
            if message.usage is not None:
                step.usage = message.usage.usage()
                step.cost_usd = message.usage.cost.total if message.usage.cost else None
            steps.append(step)
        elif message.role == "toolResult":
            call_ = calls.get(message.toolCallId or "")
            if call_ is None:
                raise TranscriptError(
                    f"toolResult for an unknown toolCall id {message.toolCallId!r}", number
                )
            call_.result, call_.is_error = _pi_text(message.content), message.isError
    answer = next((s.text for s in reversed(steps) if s.text), None)
    usages = [s.usage for s in steps if s.usage is not None]
    costs = [s.cost_usd for s in steps if s.cost_usd is not None]
    total = None
    for usage in usages:
        total = usage if total is None else _add(total, usage)
    return Transcript(
        "pi", _require_answer(answer, "pi"), steps, total, sum(costs) if costs else None
    )


# --- GitHub Copilot CLI: `copilot -p --output-format json` (docs/agents.md) ------------------


class _CopilotToolRequest(_Event):
    toolCallId: str | None = None  # noqa: N815 (Copilot's wire names)
    name: str | None = None
    arguments: Any = None


class _CopilotResult(_Event):
    content: Any = None


class _CopilotUsage(_Event):
    inputTokens: int = 0  # noqa: N815
    outputTokens: int = 0  # noqa: N815
    cacheReadTokens: int | None = None  # noqa: N815


class _CopilotModelMetrics(_Event):
    usage: _CopilotUsage | None = None


class _CopilotData(_Event):
    content: str | None = None
    toolRequests: list[_CopilotToolRequest] = Field(default_factory=list)  # noqa: N815
    toolCallId: str | None = None  # noqa: N815
    toolName: str | None = None  # noqa: N815
    arguments: Any = None
    success: bool | None = None
    result: _CopilotResult | str | None = None
    error: Any = None
    name: str | None = None
    message: str | None = None
    modelMetrics: dict[str, _CopilotModelMetrics] | None = None  # noqa: N815


class _CopilotEvent(_Event):
    type: str
    data: _CopilotData = Field(default_factory=_CopilotData)
    timestamp: str | None = None


def _copilot_result(data: _CopilotData) -> Any:
    if isinstance(data.result, _CopilotResult):
        return data.result.content
    return data.result if data.result is not None else data.error


def read_copilot(text: str) -> Transcript:
    """``assistant.message`` events are the steps (text and ``toolRequests``);
    ``tool.execution_complete`` gives a call its result; ``skill.invoked`` is a ``Skill`` call;
    ``session.shutdown`` has the token totals; ``session.error`` is the agent's error."""
    steps: list[Step] = []
    calls: dict[str, ToolCall] = {}
    total: Usage | None = None
    started: str | None = None
    duration: float | None = None
    for number, data in _lines(text):
        event = _parse(_CopilotEvent, data, number)
        body = event.data
        if event.type == "session.start":
            started = event.timestamp
        elif event.type == "assistant.message":
            step = Step("assistant", body.content or None)
            for request in body.toolRequests:
                if request.name is None:
                    raise TranscriptError("a tool request without a name", number)
                call = ToolCall(request.name, request.arguments, request.toolCallId)
                step.tool_calls.append(call)
                calls[request.toolCallId or ""] = call
            if step.text is not None or step.tool_calls:
                steps.append(step)
        elif event.type == "tool.execution_start" and body.toolCallId not in calls:
            if body.toolName is None:
                raise TranscriptError("tool.execution_start without a toolName", number)
            call = ToolCall(body.toolName, body.arguments, body.toolCallId)
            steps.append(Step("assistant", None, [call]))
            calls[body.toolCallId or ""] = call
        elif event.type == "tool.execution_complete":
            call_ = calls.get(body.toolCallId or "")
            if call_ is None:
                raise TranscriptError(
                    f"tool.execution_complete for an unknown toolCallId {body.toolCallId!r}",
                    number,
                )
            call_.result = _copilot_result(body)
            call_.is_error = body.success is False or body.error is not None
        elif event.type == "skill.invoked" and body.name:
            steps.append(Step("assistant", None, [ToolCall("Skill", {"skill": body.name})]))
        elif event.type == "session.error":
            raise TranscriptError(f"the agent reported an error: {body.message or ''}", number)
        elif event.type == "session.shutdown":
            for metrics in (body.modelMetrics or {}).values():
                if metrics.usage is not None:
                    u = metrics.usage
                    usage = Usage(u.inputTokens, u.outputTokens, u.cacheReadTokens)
                    total = usage if total is None else _add(total, usage)
            duration = _elapsed_ms(started, event.timestamp)
    answer = next((s.text for s in reversed(steps) if s.text), None)
    transcript = Transcript("copilot", _require_answer(answer, "copilot"), steps, total)
    transcript.duration_ms = duration
    return transcript


def _elapsed_ms(start: str | None, end: str | None) -> float | None:
    """Milliseconds between two ISO 8601 times, None when either is missing or unreadable."""
    from datetime import datetime

    try:
        begin = datetime.fromisoformat((start or "").replace("Z", "+00:00"))
        finish = datetime.fromisoformat((end or "").replace("Z", "+00:00"))
    except ValueError:
        return None
    elapsed = (finish - begin).total_seconds() * 1000
    return elapsed if elapsed >= 0 else None


#: The ``transcript:`` values of a ``cli`` target and their readers.
FORMATS: dict[str, Callable[[str], Transcript]] = {
    "claude-code": read_claude_code,
    "codex": read_codex,
    "copilot": read_copilot,
    "jsonl": read_jsonl,
    "pi": read_pi,
}


def read_transcript(fmt: str, text: str) -> Transcript:
    return FORMATS[fmt](text)
