"""The Python SDK's proxy client and judge helpers over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from grader_sdk import (
    AsyncTargetClient,
    BadRequest,
    BudgetExceeded,
    InvokeRequest,
    JudgeReplyError,
    PayloadTooLarge,
    ProtocolError,
    ProxyError,
    ProxyNotConfigured,
    ProxyUnavailable,
    ShuttingDown,
    TargetClient,
    Unauthorized,
    UnknownTarget,
    UnsupportedRequest,
    UpstreamError,
    UpstreamTimeout,
    ajudge_relevance,
    extract_statements,
    judge_attribution,
    judge_relevance,
)
from tests.sdk_helpers import FakeProxy


def client_for(proxy: FakeProxy) -> TargetClient:
    return TargetClient(proxy.url, proxy.token, timeout=10)


def test_invoke_sends_camel_case_and_reads_the_result() -> None:
    with FakeProxy(lambda r: "pong: " + r["question"]) as proxy:
        result = client_for(proxy).invoke(
            "ping", system_prompt="sys", max_tokens=5, response_format={"type": "json_object"}
        )
    assert result.raw_text == "pong: ping" == result.text
    assert result.output == [{"role": "assistant", "content": "pong: ping"}]
    assert result.token_usage == {"input": 10, "output": 5, "total": 15}
    assert (result.target, result.cached, result.latency_ms) == ("mock", False, 1.5)
    assert proxy.requests == [
        {
            "question": "ping",
            "systemPrompt": "sys",
            "maxTokens": 5,
            "responseFormat": {"type": "json_object"},
        }
    ]


def test_invoke_batch_is_one_http_request_and_keeps_order() -> None:
    with FakeProxy(lambda r: r["question"].upper()) as proxy:
        results = client_for(proxy).invoke_batch(
            ["a", {"question": "b", "system_prompt": "s"}, InvokeRequest("c", target="mock")]
        )
        assert [r.raw_text for r in results] == ["A", "B", "C"]
        assert proxy.http_requests == [("POST", "/invokeBatch")]
        assert proxy.requests[1] == {"question": "b", "systemPrompt": "s"}
        assert client_for(proxy).invoke_batch([]) == []
        assert len(proxy.http_requests) == 1


def test_info_and_remaining() -> None:
    with FakeProxy(max_calls=4, available=("mock", "other")) as proxy:
        client = client_for(proxy)
        client.invoke_batch(["x", "y", "z"])
        info = client.info()
    assert (info.target_name, info.call_count, info.max_calls) == ("mock", 3, 4)
    assert info.available_targets == ["mock", "other"]
    assert info.remaining == 1


def test_from_env_prefers_agentv_names_and_falls_back() -> None:
    agentv = {"AGENTV_TARGET_PROXY_URL": "http://127.0.0.1:1/", "AGENTV_TARGET_PROXY_TOKEN": "t"}
    evalrun = {"EVALRUN_PROXY_URL": "http://127.0.0.1:2", "EVALRUN_PROXY_TOKEN": "u"}
    assert TargetClient.from_env({**evalrun, **agentv}).url == "http://127.0.0.1:1"
    client = TargetClient.from_env(evalrun)
    assert (client.url, client.token) == ("http://127.0.0.1:2", "u")
    with pytest.raises(ProxyNotConfigured, match="max_calls"):
        TargetClient.from_env({})
    with pytest.raises(ProxyNotConfigured):
        TargetClient.from_env({"EVALRUN_PROXY_URL": "http://127.0.0.1:2"})


def test_bad_token_is_unauthorized() -> None:
    with FakeProxy() as proxy, pytest.raises(Unauthorized) as info:
        TargetClient(proxy.url, "wrong").info()
    assert (info.value.status, info.value.code) == (401, "unauthorized")


def test_budget_refuses_a_whole_batch() -> None:
    with FakeProxy(max_calls=2) as proxy:
        client = client_for(proxy)
        with pytest.raises(BudgetExceeded) as info:
            client.invoke_batch(["a", "b", "c"])
        assert (info.value.limit, info.value.used) == (2, 0)
        assert proxy.call_count == 0
        assert len(client.invoke_batch(["a", "b"])) == 2


def test_unknown_target_lists_the_allowed_ones() -> None:
    with FakeProxy(available=("mock", "judge")) as proxy, pytest.raises(UnknownTarget) as info:
        client_for(proxy).invoke("q", target="nope")
    assert info.value.allowed == ["mock", "judge"]


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "bad_request", BadRequest),
        (413, "payload_too_large", PayloadTooLarge),
        (422, "unsupported_request", UnsupportedRequest),
        (502, "upstream_error", UpstreamError),
        (504, "upstream_timeout", UpstreamTimeout),
        (503, "shutting_down", ShuttingDown),
        (500, "something_new", ProxyError),
    ],
)
def test_error_codes_map_to_typed_exceptions(status: int, code: str, cls: type) -> None:
    with FakeProxy() as proxy:
        proxy.fail_next(status, code, "went wrong")
        with pytest.raises(cls) as info:
            client_for(proxy).invoke("q")
    assert type(info.value) is cls
    assert info.value.status == status and info.value.code == code
    assert "went wrong" in str(info.value)


def test_timeout_is_an_upstream_error_too() -> None:
    assert issubclass(UpstreamTimeout, UpstreamError)


def test_unreachable_proxy() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProxyUnavailable, match="cannot reach"):
        TargetClient(f"http://127.0.0.1:{port}", "t", timeout=5).info()


def test_short_batch_answer_is_a_protocol_error() -> None:
    with (
        FakeProxy(short_batch=True) as proxy,
        pytest.raises(ProtocolError, match="3 requests but got 2"),
    ):
        client_for(proxy).invoke_batch(["a", "b", "c"])


def test_async_client() -> None:
    async def main(proxy: FakeProxy) -> tuple[str, list[str], int]:
        client = AsyncTargetClient(proxy.url, proxy.token)
        one = await client.invoke("x", system_prompt="s")
        many = await client.invoke_batch(["y", "z"])
        info = await client.info()
        return one.raw_text, [r.raw_text for r in many], info.call_count

    with FakeProxy(lambda r: r["question"] + "!") as proxy:
        assert asyncio.run(main(proxy)) == ("x!", ["y!", "z!"], 3)


# --- judge helpers --------------------------------------------------------------------------


def test_judge_relevance_one_batch_with_typed_tasks() -> None:
    def judge(request: dict) -> str:
        relevant = "Paris" in request["task"]["passage"]
        return json.dumps({"relevant": relevant, "reason": "r", "confidence": 0.9})

    passages = ["Paris is the capital.", "The Eiffel Tower.", "Paris, City of Light."]
    with FakeProxy(judge) as proxy:
        verdicts = judge_relevance(client_for(proxy), "Capital?", passages, expected="Paris.")
        assert proxy.http_requests == [("POST", "/invokeBatch")]
        assert [r["task"]["siblings"] for r in proxy.requests] == [passages] * 3
        assert all(r["task"]["query"] == "Capital?" for r in proxy.requests)
    assert [v.ok for v in verdicts] == [True, False, True]
    assert verdicts[0].confidence == 0.9 and verdicts[0].raw


def test_judge_relevance_empty_list_makes_no_call() -> None:
    with FakeProxy() as proxy:
        assert judge_relevance(client_for(proxy), "q", []) == []
        assert proxy.http_requests == []


def test_malformed_reply_is_retried_once_with_a_different_prompt() -> None:
    def judge(request: dict) -> str:
        if "Note: your previous reply" in request["question"]:
            return '{"relevant": false, "reason": "second try"}'
        return "hmm, hard to say" if request["task"]["passage"] == "b" else '{"relevant": true}'

    with FakeProxy(judge) as proxy:
        verdicts = judge_relevance(client_for(proxy), "q", ["a", "b"])
        assert proxy.call_count == 3
        assert proxy.http_requests == [
            ("POST", "/invokeBatch"),
            ("GET", "/info"),
            ("POST", "/invokeBatch"),
        ]
    assert [(v.ok, v.reason) for v in verdicts] == [(True, ""), (False, "second try")]


def test_still_unparseable_gives_ok_none() -> None:
    with FakeProxy(lambda r: "no idea") as proxy:
        verdicts = judge_relevance(client_for(proxy), "q", ["a", "b"])
        assert proxy.call_count == 4
    assert [v.ok for v in verdicts] == [None, None]
    assert "--- retry ---" in verdicts[0].raw


def test_retry_only_as_far_as_the_budget_allows() -> None:
    with FakeProxy(lambda r: "garbled", max_calls=3) as proxy:
        verdicts = judge_relevance(client_for(proxy), "q", ["a", "b"])
        assert proxy.call_count == 3
    assert [v.ok for v in verdicts] == [None, None]
    assert "--- retry ---" in verdicts[0].raw and "--- retry ---" not in verdicts[1].raw


def test_no_retry_when_disabled() -> None:
    with FakeProxy(lambda r: "garbled") as proxy:
        verdicts = judge_relevance(client_for(proxy), "q", ["a"], retry=False)
        assert proxy.call_count == 1
    assert verdicts[0].ok is None


def test_wrong_verdict_count_is_detected() -> None:
    with FakeProxy(short_batch=True) as proxy, pytest.raises(ProtocolError):
        judge_relevance(client_for(proxy), "q", ["a", "b"])


def test_async_judge_relevance_matches_sync() -> None:
    def judge(request: dict) -> str:
        return '{"relevant": %s}' % ("true" if "1" in request["task"]["passage"] else "false")

    with FakeProxy(judge) as proxy:
        sync = judge_relevance(client_for(proxy), "q", ["p1", "p2"])
        client = AsyncTargetClient(proxy.url, proxy.token)
        asynced = asyncio.run(ajudge_relevance(client, "q", ["p1", "p2"]))
    assert [v.ok for v in sync] == [v.ok for v in asynced] == [True, False]


def test_attribution_and_statements() -> None:
    def judge(request: dict) -> str:
        task = request["task"]
        if task["kind"] == "statements":
            return '```json\n{"statements": ["A is 1.", "B is 2.", "a is 1"]}\n```'
        supported = task["statement"].startswith("A")
        return json.dumps({"attributable": supported, "node": 2 if supported else None})

    with FakeProxy(judge) as proxy:
        client = client_for(proxy)
        statements = extract_statements(client, "A is 1 and B is 2.")
        verdicts = judge_attribution(client, statements, ["x", "A is 1 here"])
        assert proxy.requests[1]["task"] == {
            "kind": "attribution",
            "statement": "A is 1.",
            "context": ["x", "A is 1 here"],
        }
    assert statements == ["A is 1.", "B is 2."]
    assert [(v.ok, v.node) for v in verdicts] == [(True, 2), (False, None)]


def test_unreadable_statements_raise_after_one_retry() -> None:
    with FakeProxy(lambda r: "I would rather not") as proxy:
        with pytest.raises(JudgeReplyError):
            extract_statements(client_for(proxy), "text")
        assert proxy.call_count == 2


def test_statement_retry_respects_the_reserve() -> None:
    with FakeProxy(lambda r: "I would rather not", max_calls=2) as proxy:
        with pytest.raises(JudgeReplyError):
            extract_statements(client_for(proxy), "text", reserve=1)
        assert proxy.call_count == 1
