"""The real ``openai`` Python SDK (and langchain-openai) against the proxy's /v1 routes, with
real providers behind it talking to loopback fakes of each provider's wire format: plain,
json_schema, tools round trip (tool role included) passed through to OpenAI and translated for
Anthropic and Gemini, streaming, models list/retrieve, refusals, and the error paths that must
cost exactly one request with the SDK's default retries."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.proxy_helpers import run
from tests.wire_fakes import (
    ARGS,
    FINAL_TEXT,
    TOOL_RESULT,
    VERDICT,
    WEATHER_TOOL,
    proxy_over_fakes,
)


class Counter:
    """An httpx event hook counting the requests the SDK really sends (retries included)."""

    def __init__(self) -> None:
        self.requests = 0

    async def __call__(self, request: httpx.Request) -> None:
        self.requests += 1


def sdk(url: str, token: str, counter: Counter | None = None) -> openai.AsyncOpenAI:
    """The SDK with its default retries (2) unless a test says otherwise."""
    hooks = {"request": [counter]} if counter else {}
    return openai.AsyncOpenAI(
        base_url=f"{url}/v1", api_key=token, http_client=httpx.AsyncClient(event_hooks=hooks)
    )


QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


async def tool_round_trip(api: openai.AsyncOpenAI, model: str) -> tuple[Any, Any]:
    first = await api.chat.completions.create(
        model=model, messages=QUESTION, tools=[WEATHER_TOOL], tool_choice="auto"
    )
    message = first.choices[0].message
    follow_up = [
        *QUESTION,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": TOOL_RESULT},
    ]
    second = await api.chat.completions.create(
        model=model, messages=follow_up, tools=[WEATHER_TOOL]
    )
    return first, second


def test_tools_pass_unchanged_to_openai_and_back() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            grant = proxy.grant("gpt", max_calls=5)
            api = sdk(proxy.url, grant.token)
            first, second = await tool_round_trip(api, "gpt")
            call = first.choices[0].message.tool_calls[0]
            assert first.choices[0].finish_reason == "tool_calls"
            assert (call.id, call.type, call.function.name) == (
                "call_abc123",
                "function",
                "get_weather",
            )
            assert json.loads(call.function.arguments) == ARGS
            assert second.choices[0].message.content == FINAL_TEXT
            sent_first, sent_second = (s.json() for s in upstreams.seen("openai"))
            assert sent_first["tools"] == [WEATHER_TOOL] and sent_first["tool_choice"] == "auto"
            assert sent_second["messages"][1]["tool_calls"] == [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps(ARGS)},
                }
            ]
            assert sent_second["messages"][2] == {
                "role": "tool",
                "content": TOOL_RESULT,
                "tool_call_id": "call_abc123",
            }
            assert grant.used == 2
            await api.close()

    run(scenario)


@pytest.mark.parametrize("model", ["claude", "gem"])
def test_tools_are_translated_for_anthropic_and_gemini(model: str) -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            grant = proxy.grant(model, max_calls=5)
            api = sdk(proxy.url, grant.token)
            first, second = await tool_round_trip(api, model)
            call = first.choices[0].message.tool_calls[0]
            assert first.choices[0].finish_reason == "tool_calls"
            assert call.function.name == "get_weather"
            assert json.loads(call.function.arguments) == ARGS
            assert second.choices[0].message.content == FINAL_TEXT
            kind = "anthropic" if model == "claude" else "gemini"
            sent_first, sent_second = (s.json() for s in upstreams.seen(kind))
            if kind == "anthropic":
                assert call.id == "toolu_01"
                assert sent_first["tools"] == [
                    {
                        "name": "get_weather",
                        "input_schema": WEATHER_TOOL["function"]["parameters"],
                        "description": "Current weather of a city",
                    }
                ]
                assert sent_first["tool_choice"] == {"type": "auto"}
                assert sent_second["messages"][1] == {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me look."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01",
                            "name": "get_weather",
                            "input": ARGS,
                        },
                    ],
                }
                assert sent_second["messages"][2] == {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_01", "content": TOOL_RESULT}
                    ],
                }
            else:
                declaration = sent_first["tools"][0]["functionDeclarations"][0]
                assert declaration["parametersJsonSchema"] == WEATHER_TOOL["function"]["parameters"]
                assert sent_first["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
                assert sent_second["contents"][1] == {
                    "role": "model",
                    "parts": [
                        {
                            "functionCall": {"name": "get_weather", "args": ARGS},
                            "thoughtSignature": "sig==",
                        }
                    ],
                }
                assert sent_second["contents"][2] == {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "name": "get_weather",
                                "response": json.loads(TOOL_RESULT),
                            }
                        }
                    ],
                }
            await api.close()

    run(scenario)


def test_forced_tool_and_no_parallel_calls_translate_for_anthropic() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            api = sdk(proxy.url, proxy.grant("claude", max_calls=2).token)
            await api.chat.completions.create(
                model="claude",
                messages=QUESTION,
                tools=[WEATHER_TOOL],
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
                parallel_tool_calls=False,
            )
            sent = upstreams.seen("anthropic")[0].json()
            assert sent["tool_choice"] == {
                "type": "tool",
                "name": "get_weather",
                "disable_parallel_tool_use": True,
            }
            await api.close()

    run(scenario)


def test_targets_without_tools_answer_400_naming_the_target_and_spend_nothing() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, _):
            grant = proxy.grant("mock", max_calls=2)
            counter = Counter()
            api = sdk(proxy.url, grant.token, counter)
            with pytest.raises(openai.BadRequestError) as info:
                await api.chat.completions.create(
                    model="mock", messages=QUESTION, tools=[WEATHER_TOOL]
                )
            assert "target 'mock' (mock) cannot call tools" in info.value.message
            assert info.value.code == "tools_unsupported"
            tool_turn = [*QUESTION, {"role": "tool", "tool_call_id": "x", "content": "{}"}]
            with pytest.raises(openai.BadRequestError):
                await api.chat.completions.create(model="mock", messages=tool_turn)
            assert counter.requests == 2 and grant.used == 0
            await api.close()

    run(scenario)


class Verdict(BaseModel):
    verdict: str
    confidence: float


@pytest.mark.parametrize("model", ["gpt", "claude", "gem"])
def test_json_schema_reaches_each_provider_as_its_structured_output(model: str) -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            api = sdk(proxy.url, proxy.grant(model, max_calls=2).token)
            parsed = await api.chat.completions.parse(
                model=model, messages=QUESTION, response_format=Verdict
            )
            assert parsed.choices[0].message.parsed == Verdict(verdict="yes", confidence=0.9)
            kind = {"gpt": "openai", "claude": "anthropic", "gem": "gemini"}[model]
            sent = upstreams.seen(kind)[0].json()
            schema = Verdict.model_json_schema()
            if kind == "openai":
                assert sent["response_format"]["type"] == "json_schema"
                assert sent["response_format"]["json_schema"]["strict"] is True
                assert sent["response_format"]["json_schema"]["name"] == "Verdict"
            elif kind == "anthropic":
                format_ = sent["output_config"]["format"]
                assert format_["type"] == "json_schema"
                assert set(format_["schema"]["properties"]) == set(schema["properties"])
            else:
                generation = sent["generationConfig"]
                assert generation["responseMimeType"] == "application/json"
                assert set(generation["responseJsonSchema"]["properties"]) == {
                    "verdict",
                    "confidence",
                }
            await api.close()

    run(scenario)


def test_plain_call_forwards_unknown_openai_fields() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            api = sdk(proxy.url, proxy.grant("gpt", max_calls=2).token)
            reply = await api.chat.completions.create(
                model="gpt",
                messages=QUESTION,
                seed=7,
                logprobs=True,
                top_p=0.5,
                user="grader-1",
                max_completion_tokens=20,
                extra_body={"task": {"kind": "relevance"}},
            )
            assert reply.choices[0].message.content == "pong"
            sent = upstreams.seen("openai")[0].json()
            assert (sent["seed"], sent["logprobs"], sent["top_p"], sent["user"]) == (
                7,
                True,
                0.5,
                "grader-1",
            )
            assert sent["model"] == "gpt-4o-mini" and "task" not in sent
            assert "stream" not in sent
            await api.close()

    run(scenario)


@pytest.mark.parametrize("model", ["gpt", "claude"])
def test_streaming_is_openai_chunks_and_costs_one_call(model: str) -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, _):
            grant = proxy.grant(model, max_calls=3)
            api = sdk(proxy.url, grant.token)
            stream = await api.chat.completions.create(
                model=model,
                messages=QUESTION,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text == "pong"
            assert chunks[-1].choices == [] and chunks[-1].usage is not None
            assert chunks[-1].usage.total_tokens == 17
            assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
            assert grant.used == 1
            async with api.chat.completions.stream(
                model=model, messages=QUESTION, tools=[WEATHER_TOOL]
            ) as tool_stream:
                final = await tool_stream.get_final_completion()
            call = final.choices[0].message.tool_calls[0]
            assert call.function.name == "get_weather"
            assert json.loads(call.function.arguments) == ARGS
            assert grant.used == 2
            await api.close()

    run(scenario)


def test_models_list_and_retrieve() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, _):
            grant = proxy.grant("gpt", max_calls=1, allowed=["gpt", "claude"])
            api = sdk(proxy.url, grant.token)
            assert sorted(m.id for m in (await api.models.list()).data) == ["claude", "gpt"]
            model = await api.models.retrieve("claude")
            assert (model.id, model.object, model.owned_by) == ("claude", "model", "evalrun")
            with pytest.raises(openai.NotFoundError) as info:
                await api.models.retrieve("gem")
            assert info.value.code == "model_not_found"
            await api.close()

    run(scenario)


@pytest.mark.parametrize(
    ("kind", "mode", "refusal", "finish"),
    [
        ("openai", "refusal", "I can't help with that.", "stop"),
        ("openai", "filtered", "content filter", "content_filter"),
        ("anthropic", "refusal", "stop_reason=refusal", "content_filter"),
        ("anthropic", "empty", "stop_reason=max_tokens", "length"),
        ("gemini", "empty", "finishReason=MAX_TOKENS", "length"),
    ],
)
def test_refusals_and_empty_answers_are_flagged(
    kind: str, mode: str, refusal: str, finish: str
) -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            upstreams.modes[kind] = mode
            model = {"openai": "gpt", "anthropic": "claude", "gemini": "gem"}[kind]
            api = sdk(proxy.url, proxy.grant(model, max_calls=1).token)
            reply = await api.chat.completions.create(model=model, messages=QUESTION)
            message = reply.choices[0].message
            assert message.refusal is not None and refusal in message.refusal
            assert not message.content
            assert reply.choices[0].finish_reason == finish
            await api.close()

    run(scenario)


def test_bad_token_is_one_request_and_an_authentication_error() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, _):
            counter = Counter()
            api = sdk(proxy.url, "not-a-token", counter)
            with pytest.raises(openai.AuthenticationError) as info:
                await api.chat.completions.create(model="gpt", messages=QUESTION)
            assert info.value.status_code == 401
            assert info.value.body["type"] == "authentication_error"  # type: ignore[index]
            assert counter.requests == 1
            await api.close()

    run(scenario)


def test_spent_budget_is_one_request_and_a_rate_limit_error() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            grant = proxy.grant("gpt", max_calls=1)
            counter = Counter()
            api = sdk(proxy.url, grant.token, counter)
            await api.chat.completions.create(model="gpt", messages=QUESTION)
            started = asyncio.get_running_loop().time()
            with pytest.raises(openai.RateLimitError) as info:
                await api.chat.completions.create(model="gpt", messages=QUESTION)
            assert counter.requests == 2, "the SDK retried a spent budget"
            assert asyncio.get_running_loop().time() - started < 5
            response = info.value.response
            assert response.headers["x-should-retry"] == "false"
            assert "retry-after" not in response.headers
            error = info.value.body
            assert error == {  # type: ignore[comparison-overlap]
                "message": "this grader may make 1 judge calls and has used 1",
                "type": "insufficient_quota",
                "param": None,
                "code": "max_calls_exceeded",
                "limit": 1,
                "used": 1,
            }
            assert len(upstreams.seen("openai")) == 1
            await api.close()

    run(scenario)


def test_upstream_failure_is_one_502_not_a_retry_storm() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            await upstreams.servers["openai"].stop()  # the provider is down
            grant = proxy.grant("gpt", max_calls=5)
            counter = Counter()
            api = sdk(proxy.url, grant.token, counter)
            with pytest.raises(openai.InternalServerError) as info:
                await api.chat.completions.create(model="gpt", messages=QUESTION)
            assert info.value.status_code == 502 and counter.requests == 1
            assert info.value.response.headers["x-should-retry"] == "false"
            assert "retry-after" not in info.value.response.headers
            assert grant.used == 1
            await api.close()

    run(scenario)


def test_langchain_bind_tools_returns_the_tool_call() -> None:
    langchain_openai = pytest.importorskip("langchain_openai")

    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            grant = proxy.grant("gpt", max_calls=3)
            chat = langchain_openai.ChatOpenAI(
                model="gpt", base_url=f"{proxy.url}/v1", api_key=grant.token
            )
            reply = await chat.bind_tools([WEATHER_TOOL]).ainvoke("What is the weather in Paris?")
            assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("get_weather", ARGS)]
            structured = chat.with_structured_output(Verdict, method="function_calling")
            assert await structured.ainvoke("Is Paris in France?") == Verdict(**VERDICT)
            sent = upstreams.seen("openai")[1].json()
            assert sent["tools"][0]["function"]["name"] == "Verdict"
            assert sent["tool_choice"]["function"]["name"] == "Verdict"
            assert grant.used == 2

    run(scenario)


@pytest.mark.parametrize("model", ["claude", "gem"])
def test_an_untranslatable_tool_shape_is_a_422_not_an_upstream_failure(model: str) -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, upstreams):
            api = sdk(proxy.url, proxy.grant(model, max_calls=2).token)
            with pytest.raises(openai.UnprocessableEntityError) as info:
                await api.chat.completions.create(
                    model=model,
                    messages=QUESTION,
                    tools=[{"type": "web_search_preview"}],  # type: ignore[list-item]
                )
            assert info.value.code == "unsupported_request"
            assert "only function tools can be translated" in info.value.message
            kind = "anthropic" if model == "claude" else "gemini"
            assert upstreams.seen(kind) == []
            await api.close()

    run(scenario)


def test_guard_and_routing_errors_on_v1_are_openai_shaped() -> None:
    async def scenario() -> None:
        async with proxy_over_fakes() as (proxy, _):
            token = proxy.grant("gpt", max_calls=1).token
            auth = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=proxy.url, timeout=10) as http:
                answers = {
                    "host": await http.get("/v1/models", headers={**auth, "Host": "evil.test"}),
                    "size": await http.post(
                        "/v1/chat/completions", headers=auth, content=b"x" * 1_000_001
                    ),
                    "route": await http.get("/v1/nothing-here", headers=auth),
                    "invoke": await http.post("/invoke", headers=auth, content=b"x" * 1_000_001),
                }
            for name in ("host", "size", "route"):
                error = answers[name].json()["error"]
                assert {"message", "type", "param", "code"} <= set(error), name
                assert answers[name].headers["x-should-retry"] == "false", name
            assert (answers["host"].status_code, answers["size"].status_code) == (403, 413)
            assert answers["route"].status_code == 404
            assert answers["size"].json()["error"]["code"] == "payload_too_large"
            assert "type" not in answers["invoke"].json()["error"]  # the contract shape off /v1

    run(scenario)
