"""Each HTTP provider against a loopback fake that checks the exact request the real API expects
and answers in that API's real response and error shapes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalrun.targets import (
    CompletionRequest,
    ConfigError,
    ManagedTarget,
    TargetError,
    ToolsUnsupported,
    build_provider,
    load_targets,
)
from evalrun.targets.providers.anthropic import AnthropicTarget
from evalrun.targets.providers.azure import AzureOpenAITarget
from evalrun.targets.providers.gemini import GeminiTarget
from evalrun.targets.providers.openai import OpenAITarget
from tests.targets_helpers import FakeServer, Reply, Seen, config, openai_error, openai_reply

KEY = "sk-test-abcdef0123456789"

REQUEST = CompletionRequest(
    messages=[
        {"role": "user", "content": "Is Paris the capital of France?"},
        {"role": "assistant", "content": "Let me think."},
        {"role": "user", "content": "Answer in JSON."},
    ],
    system_prompt="You are a strict judge.",
    temperature=0.0,
    max_tokens=64,
    response_format={"type": "json_object"},
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def call(target: Any, request: CompletionRequest = REQUEST) -> Any:
    try:
        return await target.complete(request)
    finally:
        await target.aclose()


# --- openai ---------------------------------------------------------------------------------


def test_openai_request_and_response_shape() -> None:
    async def main() -> None:
        async with FakeServer(lambda seen: openai_reply('{"ok": true}', 21, 4)) as server:
            target = OpenAITarget(
                config(model="gpt-4o-mini", base_url=f"{server.url}/v1", timeout=5), KEY
            )
            response = await call(target)
        (seen,) = server.seen
        assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        assert seen.headers["content-type"] == "application/json"
        assert seen.json() == {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are a strict judge."},
                {"role": "user", "content": "Is Paris the capital of France?"},
                {"role": "assistant", "content": "Let me think."},
                {"role": "user", "content": "Answer in JSON."},
            ],
            "temperature": 0.0,
            "max_completion_tokens": 64,
            "response_format": {"type": "json_object"},
        }
        assert response.text == '{"ok": true}'
        assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 4)
        assert response.finish_reason == "stop"
        assert response.model == "gpt-4o-mini-2024-07-18"

    run(main())


def test_openai_keyless_local_server_and_max_tokens_field() -> None:
    """Ollama-style: no key means no Authorization header; the token field is configurable."""

    async def main() -> None:
        async with FakeServer(lambda seen: openai_reply("hi")) as server:
            cfg = config(
                model="llama3.2", base_url=f"{server.url}/v1/", max_tokens_field="max_tokens"
            )
            await call(OpenAITarget(cfg, None), CompletionRequest.from_prompt("hi", max_tokens=5))
        body = server.seen[0].json()
        assert "authorization" not in server.seen[0].headers
        assert body["max_tokens"] == 5 and "max_completion_tokens" not in body
        assert "temperature" not in body and "response_format" not in body
        assert body["messages"] == [{"role": "user", "content": "hi"}]

    run(main())


def test_openai_4xx_is_not_retryable_and_carries_message_and_status() -> None:
    async def main() -> None:
        reply = openai_error(400, "Invalid value for 'temperature'.", "invalid_request_error")
        async with FakeServer(lambda seen: reply) as server:
            target = OpenAITarget(config(model="m", base_url=server.url), KEY)
            with pytest.raises(TargetError) as info:
                await call(target)
        error = info.value
        assert error.status == 400 and not error.retryable
        assert "Invalid value for 'temperature'." in error.message
        assert "invalid_request_error" in error.message and "'t'" in error.message

    run(main())


def test_openai_key_is_redacted_from_error_messages() -> None:
    async def main() -> None:
        reply = openai_error(401, f"Incorrect API key provided: {KEY}.", "invalid_request_error")
        async with FakeServer(lambda seen: reply) as server:
            target = OpenAITarget(config(model="m", base_url=server.url), KEY)
            with pytest.raises(TargetError) as info:
                await call(target)
        assert KEY not in str(info.value) and KEY not in info.value.message
        assert "Incorrect API key provided: ***" in info.value.message

    run(main())


def test_openai_malformed_json_is_retryable() -> None:
    async def main() -> None:
        async with FakeServer(lambda seen: Reply(raw=b"<html>oops")) as server:
            with pytest.raises(TargetError) as info:
                await call(OpenAITarget(config(model="m", base_url=server.url), KEY))
        assert info.value.retryable and "not JSON" in info.value.message

    run(main())


# --- azure ----------------------------------------------------------------------------------


def test_azure_request_and_response_shape() -> None:
    async def main() -> None:
        async with FakeServer(lambda seen: openai_reply("Paris", 9, 1)) as server:
            cfg = config(
                kind="azure",
                endpoint=server.url + "/",
                deployment="judge-4o",
                api_version="2024-06-01",
            )
            response = await call(AzureOpenAITarget(cfg, KEY))
        (seen,) = server.seen
        assert seen.path == "/openai/deployments/judge-4o/chat/completions"
        assert seen.query == {"api-version": ["2024-06-01"]}
        assert seen.headers["api-key"] == KEY and "authorization" not in seen.headers
        body = seen.json()
        assert body["model"] == "judge-4o"
        assert body["messages"][0] == {"role": "system", "content": "You are a strict judge."}
        assert body["max_completion_tokens"] == 64 and "max_tokens" not in body
        assert body["response_format"] == {"type": "json_object"}
        assert response.text == "Paris" and response.usage.total_tokens == 10

    run(main())


def test_azure_content_filter_error() -> None:
    async def main() -> None:
        reply = Reply(
            status=400,
            body={
                "error": {
                    "message": "The response was filtered due to the prompt triggering a filter.",
                    "type": None,
                    "param": "prompt",
                    "code": "content_filter",
                    "status": 400,
                }
            },
        )
        async with FakeServer(lambda seen: reply) as server:
            cfg = config(kind="azure", endpoint=server.url, deployment="d")
            with pytest.raises(TargetError) as info:
                await call(AzureOpenAITarget(cfg, KEY))
        assert not info.value.retryable and info.value.status == 400
        assert "HTTP 400 content_filter: The response was filtered" in info.value.message
        assert server.seen[0].query == {"api-version": ["2024-10-21"]}

    run(main())


def test_azure_needs_endpoint_and_key() -> None:
    with pytest.raises(ConfigError, match="endpoint"):
        AzureOpenAITarget(config(kind="azure", deployment="d"), KEY)
    with pytest.raises(ConfigError, match="AZURE_OPENAI_API_KEY"):
        build_provider(
            config(kind="azure", endpoint="https://x", api_key_env="AZURE_OPENAI_API_KEY"), env={}
        )


# --- anthropic ------------------------------------------------------------------------------


def anthropic_reply(seen: Seen) -> Reply:
    return Reply(
        body={
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-3-5-haiku-20241022",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": '{"relevant": '},
                {"type": "text", "text": "true}"},
            ],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 30, "output_tokens": 7},
        }
    )


def test_anthropic_request_and_response_shape() -> None:
    async def main() -> None:
        async with FakeServer(anthropic_reply) as server:
            cfg = config(kind="anthropic", model="claude-3-5-haiku-latest", base_url=server.url)
            response = await call(AnthropicTarget(cfg, KEY))
        (seen,) = server.seen
        assert seen.path == "/v1/messages"
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        assert seen.headers["anthropic-version"] == "2026-10-21"
        assert seen.headers["content-type"] == "application/json"
        assert "x-api-key" not in seen.headers
        assert seen.json() == {
            "model": "claude-3-5-haiku-latest",
            "max_tokens": 64,
            "system": "You are a strict judge.",
            "messages": [
                {"role": "user", "content": "Is Paris the capital of France?"},
                {"role": "assistant", "content": "Let me think."},
                {"role": "user", "content": "Answer in JSON."},
            ],
        }
        assert response.text == '{"relevant": true}'
        assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 7)
        assert response.finish_reason == "end_turn"

    run(main())


def test_anthropic_default_max_tokens_and_merged_turns() -> None:
    async def main() -> None:
        async with FakeServer(anthropic_reply) as server:
            cfg = config(kind="anthropic", model="claude", base_url=server.url)
            request = CompletionRequest(
                messages=[
                    {"role": "system", "content": "Extra rule."},
                    {"role": "user", "content": "a"},
                    {"role": "user", "content": "b"},
                ]
            )
            await call(AnthropicTarget(cfg, KEY), request)
        body = server.seen[0].json()
        assert body["max_tokens"] == 1024
        assert body["system"] == "Extra rule."
        assert body["messages"] == [{"role": "user", "content": "a\n\nb"}]
        assert "temperature" not in body

    run(main())


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [(529, "overloaded_error", True), (400, "invalid_request_error", False)],
)
def test_anthropic_error_shape(status: int, kind: str, retryable: bool) -> None:
    async def main() -> None:
        reply = Reply(
            status=status,
            body={"type": "error", "error": {"type": kind, "message": f"{kind} happened"}},
            headers={"retry-after": "3"} if retryable else {},
        )
        async with FakeServer(lambda seen: reply) as server:
            cfg = config(kind="anthropic", model="claude", base_url=server.url)
            with pytest.raises(TargetError) as info:
                await call(AnthropicTarget(cfg, KEY))
        error = info.value
        assert (error.status, error.retryable) == (status, retryable)
        assert f"HTTP {status} {kind}: {kind} happened" in error.message
        assert error.retry_after == (3.0 if retryable else None)

    run(main())


# --- gemini ---------------------------------------------------------------------------------


def gemini_reply(seen: Seen) -> Reply:
    return Reply(
        body={
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"text": "thinking...", "thought": True}, {"text": '{"a": 1}'}],
                    },
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 40,
                "candidatesTokenCount": 6,
                "thoughtsTokenCount": 4,
                "totalTokenCount": 50,
            },
            "modelVersion": "gemini-2.5-flash",
        }
    )


def test_gemini_request_and_response_shape() -> None:
    async def main() -> None:
        async with FakeServer(gemini_reply) as server:
            cfg = config(kind="gemini", model="models/gemini-2.5-flash", base_url=server.url)
            response = await call(GeminiTarget(cfg, KEY))
        (seen,) = server.seen
        assert seen.path == "/v1/models/gemini-2.5-flash:generateContent"
        assert seen.query == {}
        assert seen.headers["x-goog-api-key"] == KEY
        assert seen.json() == {
            "contents": [
                {"role": "user", "parts": [{"text": "Is Paris the capital of France?"}]},
                {"role": "model", "parts": [{"text": "Let me think."}]},
                {"role": "user", "parts": [{"text": "Answer in JSON."}]},
            ],
            "systemInstruction": {"parts": [{"text": "You are a strict judge."}], "role": "user"},
            "generationConfig": {
                "temperature": 0.0,
                "maxOutputTokens": 64,
                "responseMimeType": "application/json",
            },
        }
        assert response.text == '{"a": 1}'
        assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 10)
        assert response.finish_reason == "STOP" and response.model == "gemini-2.5-flash"

    run(main())


def test_gemini_blocked_prompt_is_a_clear_non_retryable_error() -> None:
    async def main() -> None:
        reply = Reply(
            body={
                "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
                "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
            }
        )
        async with FakeServer(lambda seen: reply) as server:
            cfg = config(kind="gemini", model="gemini-2.5-flash", base_url=server.url)
            with pytest.raises(TargetError) as info:
                await call(GeminiTarget(cfg, KEY), CompletionRequest.from_prompt("x"))
        assert not info.value.retryable
        assert "blocked (blockReason=SAFETY)" in info.value.message
        assert server.seen[0].json() == {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}

    run(main())


def test_gemini_error_shape_and_retry_delay_in_body() -> None:
    async def main() -> None:
        reply = Reply(
            status=429,
            body={
                "error": {
                    "code": 429,
                    "message": "You exceeded your current quota.",
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}
                    ],
                }
            },
        )
        async with FakeServer(lambda seen: reply) as server:
            cfg = config(kind="gemini", model="gemini-2.5-flash", base_url=server.url)
            with pytest.raises(TargetError) as info:
                await call(GeminiTarget(cfg, KEY))
        error = info.value
        assert error.retryable and error.status == 429 and error.retry_after == 37.0
        assert "RESOURCE_EXHAUSTED: You exceeded your current quota." in error.message

    run(main())


@pytest.mark.parametrize("kind", ["anthropic", "gemini"])
def test_keyed_providers_refuse_to_start_without_a_key(kind: str) -> None:
    with pytest.raises(ConfigError, match="MY_KEY"):
        build_provider(config(kind=kind, model="m", api_key_env="MY_KEY"), env={})
    with pytest.raises(ConfigError, match="needs an API key"):
        build_provider(config(kind=kind, model="m"), env={})


def test_a_tool_turn_without_a_call_id_is_plain_text_to_every_kind() -> None:
    """Eval-file transcripts may hold ``role: tool`` turns with no call id: they are history,
    not a tool exchange, so they go as user text and mock targets take them too."""
    transcript = CompletionRequest(
        messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "tool", "content": "sunny"},
            {"role": "user", "content": "So?"},
        ]
    )
    assert not transcript.uses_tools

    async def main() -> list[Any]:
        async with FakeServer(lambda seen: openai_reply("ok")) as server:
            await call(OpenAITarget(config(model="m", base_url=server.url), KEY), transcript)
            return server.seen[0].json()["messages"]

    assert [m["role"] for m in run(main())] == ["user", "user", "user"]
    mock = config(kind="mock", default="fine")
    managed = ManagedTarget(build_provider(mock), mock)
    assert run(managed.complete(transcript)).text == "fine"
    offered = CompletionRequest.from_prompt("Weather?", tools=[{"type": "function"}])
    with pytest.raises(ToolsUnsupported, match="target 't' \\(mock\\) cannot call tools"):
        run(managed.complete(offered))


def test_mock_answers_a_free_text_yes_no_question_with_its_yes_no_key() -> None:
    """``yes_no`` (the built-in ``mock`` has ``yes``) answers a free-text prompt that asks for
    yes or no after the rules and before ``default`` (docs/targets.md, "mock")."""
    from evalrun.targets.providers.mock import MockTarget

    def ask(target: MockTarget, text: str, task: dict[str, Any] | None = None) -> str:
        request = CompletionRequest(messages=[{"role": "user", "content": text}], task=task)
        return target.answer(request)

    scripted = MockTarget(
        config(
            kind="mock",
            default="fallback",
            yes_no="yes",
            rules=[{"match": "Lyon", "response": "no"}],
        )
    )
    for question in (
        "Is 'Paris' a correct answer? Answer yes or no.",
        "Does it meet the criteria? Reply with 'yes' or 'no'.",
        "Relevant? Respond yes/no",
    ):
        assert ask(scripted, question) == "yes", question
    assert ask(scripted, "Is 'Lyon' a correct answer? Answer yes or no.") == "no"  # a rule first
    assert ask(scripted, "What is the capital of France?") == "fallback"
    assert ask(scripted, "Yes or no is not asked here.") == "fallback"
    typed = {"kind": "relevance", "question": "q", "passage": "p"}
    assert ask(scripted, "Answer yes or no.", typed) == "fallback"  # typed tasks: rules only
    plain = MockTarget(config(kind="mock", default="no"))  # no yes_no: the default, as before
    assert ask(plain, "Answer yes or no.") == "no"
    builtin = MockTarget(load_targets(None).get("mock"))
    assert ask(builtin, "Correct? Answer yes or no.") == "yes"
    assert ask(builtin, "What is the capital of France?") == "mock answer"
