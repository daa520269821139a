"""The ``litellm`` target on the wire: litellm's OpenAI-compatible route (``openai/<model>`` with
``base_url``) against a loopback fake, directly and behind the proxy with the openai SDK."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from typing import Any

import openai
import pytest

from evalrun.targets import CompletionRequest, TargetError, TargetPool, build_provider
from proxy import JudgeProxy
from tests.targets_helpers import FakeServer, Seen, config, openai_error, targets_file
from tests.wire_fakes import ARGS, FINAL_TEXT, TOOL_RESULT, WEATHER_TOOL, openai_upstream

# litellm is imported by the target itself (which first stops its price-list download), so
# only look for it here; importing it takes seconds
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("litellm") is None, reason="the litellm extra is not installed"
    ),
]
KEY = "sk-litellm-0123456789"


def litellm_config(url: str, **values: Any) -> dict[str, Any]:
    return {
        "name": "lite",
        "kind": "litellm",
        "model": "openai/gpt-4o-mini",
        "base_url": f"{url}/v1",
        "api_key_env": "LITE_KEY",
        "max_retries": 0,
        **values,
    }


def test_litellm_sends_openai_wire_and_reads_tool_calls() -> None:
    async def main() -> tuple[Seen, Any]:
        async with FakeServer(openai_upstream) as server:
            target = build_provider(config(**litellm_config(server.url)), {"LITE_KEY": KEY})
            request = CompletionRequest(
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                system_prompt="Use the tool.",
                temperature=0.0,
                max_tokens=32,
                tools=[WEATHER_TOOL],
                tool_choice="auto",
                options={"seed": 3},
            )
            response = await target.complete(request)
            await target.aclose()
        return server.seen[0], response

    seen, response = asyncio.run(main())
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    body = seen.json()
    assert body["model"] == "gpt-4o-mini"
    assert body["messages"] == [
        {"role": "system", "content": "Use the tool."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    assert body["tools"] == [WEATHER_TOOL] and body["tool_choice"] == "auto"
    assert (body["temperature"], body["seed"]) == (0.0, 3)
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 32
    (call,) = response.tool_calls
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == ARGS


@pytest.mark.parametrize(
    "choice",
    ["auto", "none", "required", {"type": "function", "function": {"name": "get_weather"}}],
)
def test_litellm_sends_every_tool_choice_in_openais_shape(choice: Any) -> None:
    """Each tool_choice an eval file may set (docs/agents.md, "tool_choice") reaches the wire as
    OpenAI's SDK sends it (tests/test_targets_conformance.py)."""

    async def main() -> Seen:
        async with FakeServer(openai_upstream) as server:
            target = build_provider(config(**litellm_config(server.url)), {"LITE_KEY": KEY})
            request = CompletionRequest(
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                tools=[WEATHER_TOOL],
                tool_choice=choice,
            )
            await target.complete(request)
            await target.aclose()
        return server.seen[0]

    body = asyncio.run(main()).json()
    assert body["tools"] == [WEATHER_TOOL] and body["tool_choice"] == choice


@pytest.mark.parametrize(("status", "retryable"), [(429, True), (401, False)])
def test_litellm_errors_keep_status_and_retryability(status: int, retryable: bool) -> None:
    async def main() -> TargetError:
        reply = openai_error(status, f"upstream says {status} for {KEY}", "requests")
        async with FakeServer(lambda seen: reply) as server:
            target = build_provider(config(**litellm_config(server.url)), {"LITE_KEY": KEY})
            with pytest.raises(TargetError) as info:
                await target.complete(CompletionRequest.from_prompt("hi"))
            count = server.count
        assert count == 1, "litellm retried on its own"
        return info.value

    error = asyncio.run(main())
    assert (error.status, error.retryable) == (status, retryable)
    assert KEY not in error.message and "***" in error.message


def test_litellm_target_behind_the_proxy_does_a_tool_round_trip() -> None:
    async def main() -> None:
        async with FakeServer(openai_upstream) as server:
            pool = TargetPool(targets_file(litellm_config(server.url)), env={"LITE_KEY": KEY})
            proxy = JudgeProxy(pool.get, pool.names)
            await proxy.start()
            try:
                grant = proxy.grant("lite", max_calls=2)
                api = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key=grant.token)
                question = [{"role": "user", "content": "Weather in Paris?"}]
                first = await api.chat.completions.create(
                    model="lite", messages=question, tools=[WEATHER_TOOL]
                )
                message = first.choices[0].message
                assert first.choices[0].finish_reason == "tool_calls"
                follow_up = [
                    *question,
                    message.model_dump(exclude_none=True),
                    {
                        "role": "tool",
                        "tool_call_id": message.tool_calls[0].id,
                        "content": TOOL_RESULT,
                    },
                ]
                second = await api.chat.completions.create(
                    model="lite", messages=follow_up, tools=[WEATHER_TOOL]
                )
                assert second.choices[0].message.content == FINAL_TEXT
                sent = server.seen[1].json()["messages"]
                assert sent[-1] == {
                    "role": "tool",
                    "content": TOOL_RESULT,
                    "tool_call_id": "call_abc123",
                }
                await api.close()
            finally:
                await proxy.stop()
                await pool.aclose()

    asyncio.run(main())
