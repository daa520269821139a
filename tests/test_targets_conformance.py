"""Wire conformance: for the same call, what the official SDK sends and what evalrun's target
sends, captured on one loopback server, must agree on method, path, query, auth header (and
Anthropic's version header) and the JSON body.

SDKs: ``openai`` (OpenAI and ``openai.AsyncAzureOpenAI``), ``anthropic``, ``google-genai``;
test extras only. Each provider is checked on a plain call with the options it takes, a call
offering a tool with a tool choice, a turn replaying a tool call and its result, the same
with a failed tool (evalrun's tool loop), and a ``json_schema`` structured output.

Documented differences (docs/targets.md):

- Anthropic: evalrun drops ``temperature`` (the current Messages API and SDK have none); a
  request without ``max_tokens`` gets 1024 (the SDK makes it required).
- Gemini: google-genai sends a function's schema as ``parameters_json_schema`` (the proto
  field name); evalrun sends the REST reference's ``parametersJsonSchema``. The API's JSON
  mapping accepts both; the comparison renames the SDK's key (``GEMINI_RENAMED``).
- Headers other than auth and version (user agent, ``x-stainless-*``, retry counters) are the
  SDK's own telemetry and are not compared.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from evalrun.targets import CompletionRequest, build_provider
from tests.targets_helpers import FakeServer, Reply, Seen, config, openai_reply

KEY = "sk-conformance-0123456789"
SYSTEM = "You are a strict judge."
QUESTION = "What is the weather in Paris?"
PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
OPENAI_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": PARAMETERS,
    },
}
SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}},
    "required": ["verdict"],
    "additionalProperties": False,
}
JSON_SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "verdict", "strict": True, "schema": SCHEMA},
}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
TOOL_TURNS = [
    {"role": "user", "content": QUESTION},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "sunny"}'},
]
#: a failed tool's turn, as evalrun's tool loop sends it (docs/targets.md, "Tools")
FAILED_TOOL_TURNS = [
    *TOOL_TURNS[:2],
    {"role": "tool", "tool_call_id": "call_1", "content": "no such city", "is_error": True},
]

#: the tool_choice modes an eval file may set (docs/agents.md, "tool_choice"), besides a name
CHOICES = ("auto", "none", "required")

#: evalrun's requests, one per scenario; each SDK test makes the same calls in its own API
REQUESTS = {
    "plain": CompletionRequest(
        messages=[{"role": "user", "content": QUESTION}],
        system_prompt=SYSTEM,
        temperature=0.0,
        max_tokens=64,
        options={"seed": 7},
    ),
    "tools": CompletionRequest(
        messages=[{"role": "user", "content": QUESTION}],
        max_tokens=64,
        tools=[OPENAI_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    ),
    **{
        f"choice_{mode}": CompletionRequest(
            messages=[{"role": "user", "content": QUESTION}],
            max_tokens=64,
            tools=[OPENAI_TOOL],
            tool_choice=mode,
        )
        for mode in CHOICES
    },
    "tool_turns": CompletionRequest(messages=TOOL_TURNS, max_tokens=64, tools=[OPENAI_TOOL]),
    "tool_error": CompletionRequest(messages=FAILED_TOOL_TURNS, max_tokens=64, tools=[OPENAI_TOOL]),
    "json_schema": CompletionRequest(
        messages=[{"role": "user", "content": QUESTION}],
        max_tokens=64,
        response_format=JSON_SCHEMA_FORMAT,
    ),
}


def anthropic_reply(seen: Seen) -> Reply:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return Reply(body=body)


def gemini_reply(seen: Seen) -> Reply:
    candidate = {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    return Reply(body={"candidates": [candidate], "usageMetadata": {}, "modelVersion": "g"})


async def capture(
    handler: Callable[[Seen], Reply],
    sdk_call: Callable[[str], Awaitable[Any]],
    target_config: Callable[[str], dict[str, Any]],
    request: CompletionRequest,
) -> tuple[Seen, Seen]:
    """(what the SDK sent, what evalrun sent) for one call, on the same loopback server."""
    async with FakeServer(handler) as server:
        await sdk_call(server.url)
        target = build_provider(config(**target_config(server.url)), {"KEY": KEY})
        try:
            await target.complete(request)
        finally:
            await target.aclose()
    sdk_seen, ours = server.seen
    return sdk_seen, ours


def assert_same(
    sdk_seen: Seen, ours: Seen, headers: tuple[str, ...], renamed: dict[str, str] | None = None
) -> None:
    assert (ours.method, ours.path, ours.query) == (sdk_seen.method, sdk_seen.path, sdk_seen.query)
    for name in headers:
        assert ours.headers.get(name) == sdk_seen.headers.get(name), name
    assert ours.json() == _renamed(sdk_seen.json(), renamed or {})


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """``value`` with the documented key differences applied, at any depth."""
    if isinstance(value, dict):
        return {names.get(k, k): _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    return value


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- openai and azure -------------------------------------------------------------------------


def openai_tool_turns(result: dict[str, Any]) -> dict[str, Any]:
    """The SDK's call replaying the tool call of ``TOOL_TURNS`` with ``result`` as its answer."""
    return {
        "messages": [*TOOL_TURNS[:2], result],
        "max_completion_tokens": 64,
        "tools": [OPENAI_TOOL],
    }


OPENAI_CALLS: dict[str, dict[str, Any]] = {
    "plain": {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        "temperature": 0.0,
        "max_completion_tokens": 64,
        "seed": 7,
    },
    "tools": {
        "messages": [{"role": "user", "content": QUESTION}],
        "max_completion_tokens": 64,
        "tools": [OPENAI_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    },
    **{
        f"choice_{mode}": {
            "messages": [{"role": "user", "content": QUESTION}],
            "max_completion_tokens": 64,
            "tools": [OPENAI_TOOL],
            "tool_choice": mode,
        }
        for mode in CHOICES
    },
    "tool_turns": openai_tool_turns(TOOL_TURNS[2]),
    # OpenAI's tool message has no error mark: the text goes alone
    "tool_error": openai_tool_turns(
        {"role": "tool", "tool_call_id": "call_1", "content": "no such city"}
    ),
    "json_schema": {
        "messages": [{"role": "user", "content": QUESTION}],
        "max_completion_tokens": 64,
        "response_format": JSON_SCHEMA_FORMAT,
    },
}


@pytest.mark.parametrize("scenario", list(REQUESTS))
def test_openai_matches_the_openai_sdk(scenario: str) -> None:
    openai = pytest.importorskip("openai")

    async def sdk_call(url: str) -> None:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0) as api:
            await api.chat.completions.create(model="gpt-4o-mini", **OPENAI_CALLS[scenario])

    def target(url: str) -> dict[str, Any]:
        return {
            "kind": "openai",
            "model": "gpt-4o-mini",
            "base_url": f"{url}/v1",
            "api_key_env": "KEY",
        }

    sdk_seen, ours = run(
        capture(lambda seen: openai_reply("ok"), sdk_call, target, REQUESTS[scenario])
    )
    assert_same(sdk_seen, ours, ("authorization",))


@pytest.mark.parametrize("scenario", list(REQUESTS))
def test_azure_matches_the_azure_openai_client(scenario: str) -> None:
    openai = pytest.importorskip("openai")

    async def sdk_call(url: str) -> None:
        async with openai.AsyncAzureOpenAI(
            azure_endpoint=url, api_key=KEY, api_version="2024-10-21", max_retries=0
        ) as api:
            await api.chat.completions.create(model="judge-4o", **OPENAI_CALLS[scenario])

    def target(url: str) -> dict[str, Any]:
        return {"kind": "azure", "endpoint": url, "deployment": "judge-4o", "api_key_env": "KEY"}

    sdk_seen, ours = run(
        capture(lambda seen: openai_reply("ok"), sdk_call, target, REQUESTS[scenario])
    )
    assert_same(sdk_seen, ours, ("api-key", "authorization"))


# --- anthropic ----------------------------------------------------------------------------------

ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "input_schema": PARAMETERS,
}


def anthropic_tool_turns(result: dict[str, Any]) -> dict[str, Any]:
    """The SDK's call replaying the tool call of ``TOOL_TURNS``; ``result`` fills its
    ``tool_result`` block."""
    tool_use = {
        "type": "tool_use",
        "id": "call_1",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    answer = {"type": "tool_result", "tool_use_id": "call_1", **result}
    return {
        "messages": [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": [tool_use]},
            {"role": "user", "content": [answer]},
        ],
        "max_tokens": 64,
        "tools": [ANTHROPIC_TOOL],
    }


ANTHROPIC_CALLS: dict[str, dict[str, Any]] = {
    "plain": {
        "system": SYSTEM,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 64,
    },
    "tools": {
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 64,
        "tools": [ANTHROPIC_TOOL],
        "tool_choice": {"type": "tool", "name": "get_weather"},
    },
    **{
        f"choice_{mode}": {
            "messages": [{"role": "user", "content": QUESTION}],
            "max_tokens": 64,
            "tools": [ANTHROPIC_TOOL],
            "tool_choice": {"type": kind},
        }
        for mode, kind in zip(CHOICES, ("auto", "none", "any"), strict=True)
    },
    "tool_turns": anthropic_tool_turns({"content": '{"sky": "sunny"}'}),
    "tool_error": anthropic_tool_turns({"is_error": True, "content": "no such city"}),
    "json_schema": {
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 64,
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    },
}


@pytest.mark.parametrize("scenario", list(REQUESTS))
def test_anthropic_matches_the_anthropic_sdk(scenario: str) -> None:
    anthropic = pytest.importorskip("anthropic")

    async def sdk_call(url: str) -> None:
        async with anthropic.AsyncAnthropic(base_url=url, api_key=KEY, max_retries=0) as api:
            await api.messages.create(model="claude-x", **ANTHROPIC_CALLS[scenario])

    def target(url: str) -> dict[str, Any]:
        return {"kind": "anthropic", "model": "claude-x", "base_url": url, "api_key_env": "KEY"}

    sdk_seen, ours = run(capture(anthropic_reply, sdk_call, target, REQUESTS[scenario]))
    assert_same(sdk_seen, ours, ("authorization", "x-api-key", "anthropic-version"))


def test_anthropic_version_and_auth_scheme_are_configurable() -> None:
    async def main() -> Seen:
        async with FakeServer(anthropic_reply) as server:
            cfg = config(
                kind="anthropic",
                model="claude-x",
                base_url=server.url,
                api_key_env="KEY",
                api_version="2023-06-01",
                auth_scheme="x-api-key",
            )
            target = build_provider(cfg, {"KEY": KEY})
            await target.complete(CompletionRequest.from_prompt("hi"))
            await target.aclose()
        return server.seen[0]

    seen = run(main())
    assert seen.headers["x-api-key"] == KEY and "authorization" not in seen.headers
    assert seen.headers["anthropic-version"] == "2023-06-01"


# --- gemini -------------------------------------------------------------------------------------


GEMINI_RENAMED = {"parameters_json_schema": "parametersJsonSchema"}


def gemini_calls(types: Any) -> dict[str, dict[str, Any]]:
    question = types.Content(role="user", parts=[types.Part(text=QUESTION)])
    declaration = types.FunctionDeclaration(
        name="get_weather",
        description="Current weather of a city",
        parameters_json_schema=PARAMETERS,
    )
    tools = [types.Tool(function_declarations=[declaration])]

    def tool_turns(response: dict[str, Any]) -> dict[str, Any]:
        """The call replaying the tool call of ``TOOL_TURNS`` with ``response`` as its answer."""
        call = types.FunctionCall(name="get_weather", args={"city": "Paris"})
        answer = types.FunctionResponse(name="get_weather", response=response)
        return {
            "contents": [
                question,
                types.Content(role="model", parts=[types.Part(function_call=call)]),
                types.Content(role="user", parts=[types.Part(function_response=answer)]),
            ],
            "config": types.GenerateContentConfig(
                max_output_tokens=64,
                tools=tools,
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            ),
        }

    return {
        "plain": {
            "contents": [question],
            "config": types.GenerateContentConfig(
                system_instruction=SYSTEM, temperature=0.0, max_output_tokens=64, seed=7
            ),
        },
        "tools": {
            "contents": [question],
            "config": types.GenerateContentConfig(
                max_output_tokens=64,
                tools=tools,
                tool_config=types.ToolConfig(
                    function_calling_config=types.FunctionCallingConfig(
                        mode="ANY", allowed_function_names=["get_weather"]
                    )
                ),
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            ),
        },
        **{
            f"choice_{mode}": {
                "contents": [question],
                "config": types.GenerateContentConfig(
                    max_output_tokens=64,
                    tools=tools,
                    tool_config=types.ToolConfig(
                        function_calling_config=types.FunctionCallingConfig(mode=kind)
                    ),
                    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
                ),
            }
            for mode, kind in zip(CHOICES, ("AUTO", "NONE", "ANY"), strict=True)
        },
        "tool_turns": tool_turns({"sky": "sunny"}),
        "tool_error": tool_turns({"error": "no such city"}),
        "json_schema": {
            "contents": [question],
            "config": types.GenerateContentConfig(
                max_output_tokens=64,
                response_mime_type="application/json",
                response_json_schema=SCHEMA,
            ),
        },
    }


@pytest.mark.parametrize("scenario", list(REQUESTS))
def test_gemini_matches_the_google_genai_sdk(scenario: str) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    async def sdk_call(url: str) -> None:
        client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=url))
        await client.aio.models.generate_content(model="gemini-x", **gemini_calls(types)[scenario])

    def target(url: str) -> dict[str, Any]:
        return {"kind": "gemini", "model": "gemini-x", "base_url": url, "api_key_env": "KEY"}

    sdk_seen, ours = run(capture(gemini_reply, sdk_call, target, REQUESTS[scenario]))
    assert_same(sdk_seen, ours, ("x-goog-api-key",), GEMINI_RENAMED)


def test_documented_differences_are_the_only_ones() -> None:
    """The one documented body difference: Anthropic gets no temperature from evalrun."""
    pytest.importorskip("anthropic")
    request = REQUESTS["plain"]
    assert request.temperature == 0.0
    from evalrun.targets.providers.anthropic import messages_body

    assert "temperature" not in messages_body("claude-x", request)
    assert json.dumps(ANTHROPIC_CALLS["plain"]).find("temperature") == -1
