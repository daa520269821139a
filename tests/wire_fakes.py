"""Loopback upstreams that answer in each provider's real wire format, with a weather tool:
the first turn (tools offered, no tool result yet) gets a tool call, a turn carrying the tool
result gets a text answer that quotes it. ``mode`` switches a fake to a refusal or an empty,
cut-off answer. Used by the proxy's OpenAI-surface tests (Python and npm clients)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from evalrun.targets import TargetPool
from proxy import JudgeProxy
from tests.targets_helpers import FakeServer, Reply, Seen, targets_file

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TOOL_RESULT = '{"city": "Paris", "sky": "sunny", "celsius": 21}'
FINAL_TEXT = "It is sunny in Paris (21 C)."
ARGS = {"city": "Paris"}
VERDICT = {"verdict": "yes", "confidence": 0.9}


def _called(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tool a fake calls: the forced one, else the first offered; weather gets ``ARGS``,
    any other tool (a structured-output tool) gets ``VERDICT``."""
    choice = body.get("tool_choice")
    name = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
    name = name or body["tools"][0]["function"]["name"]
    return name, ARGS if name == "get_weather" else VERDICT


def _openai(seen: Seen, mode: str) -> Reply:
    body = seen.json()
    messages = body["messages"]
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    finish = "stop"
    if mode == "refusal":
        message["refusal"] = "I can't help with that."
    elif mode == "filtered":
        message["content"], finish = "", "content_filter"
    elif body.get("tools") and messages[-1]["role"] != "tool":
        name, args = _called(body)
        calls = [
            {
                "id": "call_abc123",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ]
        message["tool_calls"], finish = calls, "tool_calls"
    elif messages[-1]["role"] == "tool":
        message["content"] = FINAL_TEXT
    elif body.get("response_format", {}).get("type") == "json_schema":
        message["content"] = json.dumps(VERDICT)
    else:
        message["content"] = "pong"
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    return Reply(
        body={
            "id": "chatcmpl-up",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-upstream",
            "choices": [choice],
            "usage": usage,
        }
    )


def _anthropic(seen: Seen, mode: str) -> Reply:
    body = seen.json()
    last = body["messages"][-1]["content"]
    has_result = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    stop = "end_turn"
    if mode == "refusal":
        content: list[dict[str, Any]] = []
        stop = "refusal"
    elif mode == "empty":
        content, stop = [], "max_tokens"
    elif body.get("tools") and not has_result:
        content = [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": ARGS},
        ]
        stop = "tool_use"
    elif has_result:
        content = [{"type": "text", "text": FINAL_TEXT}]
    elif "output_config" in body:
        content = [{"type": "text", "text": json.dumps(VERDICT)}]
    else:
        content = [{"type": "text", "text": "pong"}]
    return Reply(
        body={
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-upstream",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 5},
        }
    )


def _gemini(seen: Seen, mode: str) -> Reply:
    body = seen.json()
    last = body["contents"][-1]["parts"]
    has_result = any("functionResponse" in part for part in last)
    finish = "STOP"
    if mode == "empty":
        parts: list[dict[str, Any]] = []
        finish = "MAX_TOKENS"
    elif body.get("tools") and not has_result:
        call = {"functionCall": {"name": "get_weather", "args": ARGS}, "thoughtSignature": "sig=="}
        parts = [call]
    elif has_result:
        parts = [{"text": FINAL_TEXT}]
    elif "responseJsonSchema" in body.get("generationConfig", {}):
        parts = [{"text": json.dumps(VERDICT)}]
    else:
        parts = [{"text": "pong"}]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
    return Reply(
        body={
            "candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5},
            "modelVersion": "gemini-upstream",
        }
    )


_FAKES = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini}


def openai_upstream(seen: Seen) -> Reply:
    """The OpenAI fake as a plain handler, for a FakeServer of one's own."""
    return _openai(seen, "")


class Upstreams:
    """One fake server per provider kind, each answering in ``modes[kind]`` (default normal)."""

    def __init__(self) -> None:
        self.modes: dict[str, str] = {}
        self.servers = {
            kind: FakeServer(lambda seen, kind=kind: _FAKES[kind](seen, self.modes.get(kind, "")))
            for kind in _FAKES
        }

    def seen(self, kind: str) -> list[Seen]:
        return self.servers[kind].seen

    def targets(self) -> list[dict[str, Any]]:
        common = {"api_key": "upstream-key", "max_retries": 0, "timeout": 10}
        return [
            {"name": "gpt", "kind": "openai", "model": "gpt-4o-mini", **common}
            | {"base_url": self.servers["openai"].url + "/v1"},
            {"name": "claude", "kind": "anthropic", "model": "claude-x", **common}
            | {"base_url": self.servers["anthropic"].url},
            {"name": "gem", "kind": "gemini", "model": "gemini-x", **common}
            | {"base_url": self.servers["gemini"].url},
            {"name": "mock", "kind": "mock", "default": "mock answer"},
        ]


@asynccontextmanager
async def proxy_over_fakes() -> AsyncIterator[tuple[JudgeProxy, Upstreams]]:
    """A started proxy whose targets ``gpt``, ``claude``, ``gem`` (real providers over the
    fakes) and ``mock`` are ManagedTargets, as in a run."""
    upstreams = Upstreams()
    for server in upstreams.servers.values():
        await server.start()
    pool = TargetPool(targets_file(*upstreams.targets()))
    proxy = JudgeProxy(pool.get, pool.names)
    await proxy.start()
    try:
        yield proxy, upstreams
    finally:
        await proxy.stop()
        await pool.aclose()
        for server in upstreams.servers.values():
            await server.stop()
