"""The scripted agent of the agent examples' side-by-side check (docs/agents.md, "AgentV's agent
examples side by side").

It replays a run AgentV's example recorded, in an agent's own stream format, so evalrun reads
it through the same transcript reader as a live agent's output. The recording is one of the
formats AgentV's examples ship (the run picked by the prompt it is given):

- ``fixtures``: AgentV's replay fixtures (``agentv.replay_fixture.v1``), one run a line;
- ``transcripts``: AgentV's transcripts (``agentv.transcript.v1``), one message a line;
- ``trace``: a static trace (``{text, trace: [tool_call | tool_result events]}``), every prompt.

    python bench/agentv_side_replay_agent.py --eval FILE --source KIND:PATH --emit claude-code|copilot \
        --prompt PROMPT
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Call:
    tool: str
    id: str
    input: Any
    output: Any


@dataclass
class Message:
    role: str
    content: str | None
    calls: list[Call] = field(default_factory=list)


@dataclass
class Run:
    messages: list[Message]
    usage: dict[str, int] | None = None
    cost_usd: float | None = None
    duration_ms: int | None = None


def message(raw: dict[str, Any], number: int) -> Message:
    calls = [
        Call(
            str(c["tool"]),
            str(c.get("id") or f"call-{number}-{i}"),
            c.get("input"),
            c.get("output"),
        )
        for i, c in enumerate(raw.get("tool_calls") or [])
    ]
    content = raw.get("content")
    return Message(str(raw["role"]), content if isinstance(content, str) else None, calls)


def read_fixtures(path: Path, test_id: str) -> Run:
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else None
        if record and record["test_id"] == test_id:
            messages = [message(m, i) for i, m in enumerate(record["output"])]
            return Run(
                messages,
                record.get("token_usage"),
                record.get("cost_usd"),
                record.get("duration_ms"),
            )
    raise SystemExit(f"no recorded run for test {test_id!r} in {path}")


def read_transcripts(path: Path, test_id: str) -> Run:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    rows = sorted((r for r in rows if r["test_id"] == test_id), key=lambda r: r["message_index"])
    if not rows:
        raise SystemExit(f"no recorded transcript for test {test_id!r} in {path}")
    messages = [message(r, r["message_index"]) for r in rows if r["role"] != "user"]
    first = rows[0]
    return Run(
        messages,
        first.get("transcript_token_usage"),
        first.get("transcript_cost_usd"),
        first.get("transcript_duration_ms"),
    )


def read_trace(path: Path) -> Run:
    document = json.loads(path.read_text(encoding="utf-8"))
    events = document.get("trace") or []
    outputs = {e["id"]: e.get("output") for e in events if e.get("type") == "tool_result"}
    calls = [
        Call(str(e["name"]), str(e["id"]), e.get("input"), outputs.get(e["id"]))
        for e in events
        if e.get("type") == "tool_call"
    ]
    return Run([Message("assistant", document.get("text"), calls)])


def test_inputs(eval_file: Path) -> dict[str, str]:
    """Each test's id by the text of its input (the last user message's text)."""
    import yaml

    document = yaml.safe_load(eval_file.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for test in document.get("tests") or []:
        value = (test.get("vars") or {}).get("input")
        if isinstance(value, list):
            value = value[-1].get("content")
        if isinstance(value, list):
            value = " ".join(p.get("value", "") for p in value if p.get("type") == "text")
        found[str(value).strip()] = str(test["id"])
    return found


def pick_test(eval_file: Path, prompt: str) -> str:
    matches = [tid for text, tid in test_inputs(eval_file).items() if text and text in prompt]
    if len(matches) != 1:
        raise SystemExit(f"the prompt matches {len(matches)} tests of {eval_file}")
    return matches[0]


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def claude_code(run: Run) -> list[dict[str, Any]]:
    """Claude Code's ``stream-json`` events (docs/agents.md, "Claude Code")."""
    events: list[dict[str, Any]] = [{"type": "system", "subtype": "init", "session_id": "side"}]
    for step in run.messages:
        blocks: list[dict[str, Any]] = []
        if step.content:
            blocks.append({"type": "text", "text": step.content})
        for call in step.calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.tool, "input": call.input}
            )
        events.append({"type": "assistant", "message": {"role": "assistant", "content": blocks}})
        results = [
            {"type": "tool_result", "tool_use_id": c.id, "content": as_text(c.output)}
            for c in step.calls
            if c.output is not None
        ]
        if results:
            events.append({"type": "user", "message": {"role": "user", "content": results}})
    answer = next((m.content for m in reversed(run.messages) if m.content), "")
    result: dict[str, Any] = {"type": "result", "subtype": "success", "is_error": False}
    result["result"] = answer
    if run.cost_usd is not None:
        result["total_cost_usd"] = run.cost_usd
    if run.duration_ms is not None:
        result["duration_ms"] = run.duration_ms
    if run.usage:
        cached = int(run.usage.get("cached") or 0)
        result["usage"] = {
            "input_tokens": int(run.usage.get("input") or 0) - cached,
            "cache_read_input_tokens": cached,
            "output_tokens": int(run.usage.get("output") or 0),
        }
    return [*events, result]


def copilot(run: Run) -> list[dict[str, Any]]:
    """The Copilot CLI's session events (docs/agents.md, "GitHub Copilot CLI")."""
    start = 1_780_000_000_000
    events: list[dict[str, Any]] = [
        {"type": "session.start", "data": {}, "timestamp": stamp(start)}
    ]
    for step in run.messages:
        requests = [{"toolCallId": c.id, "name": c.tool, "arguments": c.input} for c in step.calls]
        data = {"content": step.content or "", "toolRequests": requests}
        events.append({"type": "assistant.message", "data": data})
        for call in step.calls:
            done = {
                "toolCallId": call.id,
                "success": True,
                "result": {"content": as_text(call.output)},
            }
            events.append({"type": "tool.execution_complete", "data": done})
    end = start + (run.duration_ms or 0)
    usage = run.usage or {}
    metrics = {
        "inputTokens": int(usage.get("input") or 0),
        "outputTokens": int(usage.get("output") or 0),
        "cacheReadTokens": int(usage.get("cached") or 0),
    }
    shutdown = {"modelMetrics": {"side": {"usage": metrics}}}
    events.append({"type": "session.shutdown", "data": shutdown, "timestamp": stamp(end)})
    return events


def stamp(ms: int) -> str:
    from datetime import UTC, datetime

    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


EMITTERS = {"claude-code": claude_code, "copilot": copilot}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--eval", type=Path, required=True, help="the eval file (its tests' inputs)"
    )
    parser.add_argument(
        "--source", required=True, help="fixtures:PATH, transcripts:PATH or trace:PATH"
    )
    parser.add_argument("--emit", choices=sorted(EMITTERS), required=True)
    parser.add_argument("--prompt", required=True)
    args = parser.parse_args()
    kind, _, where = str(args.source).partition(":")
    path = Path(where)
    if kind == "trace":
        run = read_trace(path)
    elif kind == "fixtures":
        run = read_fixtures(path, pick_test(args.eval, args.prompt))
    elif kind == "transcripts":
        run = read_transcripts(path, pick_test(args.eval, args.prompt))
    else:
        raise SystemExit(f"unknown source kind {kind!r}")
    for event in EMITTERS[args.emit](run):
        print(json.dumps(event))
    return 0


if __name__ == "__main__":
    sys.exit(main())
