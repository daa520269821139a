"""AgentV's own proxy tests, ported as black-box tests against evalrun's proxy over loopback.

AgentV (EntityProcess/agentv, MIT) tests its judge proxy in
``packages/core/test/runtime/provider-proxy.test.ts`` (58f316ca2, current names: ``provider``,
``providerLabel``) and ``target-proxy.test.ts`` (14bca459e, 4.x names: ``target``,
``targetName``): the same nine tests in each spelling, run here once per generation. The
behaviours its proxy source states beyond those tests follow. Where evalrun differs on purpose
the test pins evalrun's answer and names the reason (docs/proxy.md, "AgentV's proxy").
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx
import pytest
from proxy_helpers import FakeTarget, client, error_body, run, serve

from evalrun.targets.base import CompletionRequest, CompletionResponse, TargetError, TokenUsage


class LabelledTarget:
    """AgentV's ``createMockProvider``: answers ``Response from <name>: <question>``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.calls += 1
        question = request.messages[-1]["content"]
        return CompletionResponse(text=f"Response from {self.name}: {question}", usage=TokenUsage())

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True)
class Generation:
    """How one AgentV generation spells the selector and the /info fields."""

    selector: str
    label: str
    labels: str
    default: str
    alt: str


CURRENT = Generation("provider", "providerLabel", "availableProviderLabels", "default-provider", "alt-provider")  # fmt: skip
AGENTV_4X = Generation("target", "targetName", "availableTargets", "default-target", "alt-target")
GENERATIONS = pytest.mark.parametrize("gen", [CURRENT, AGENTV_4X], ids=["58f316ca2", "14bca459e"])


# --- AgentV's tests: "/info endpoint" -----------------------------------------------------------


@GENERATIONS
def test_info_returns_proxy_info_with_the_default(gen: Generation) -> None:
    async def scenario() -> None:
        async with serve(LabelledTarget(gen.default), LabelledTarget(gen.alt)) as proxy:
            grant = proxy.grant(gen.default, max_calls=50, allowed=[gen.default])
            async with client(proxy, grant.token) as http:
                reply = await http.get("/info")
            assert reply.status_code == 200
            info = reply.json()
            assert info[gen.label] == gen.default
            assert (info["maxCalls"], info["callCount"]) == (50, 0)
            assert info[gen.labels] == [gen.default]

    run(scenario)


@GENERATIONS
def test_info_returns_all_available_when_others_may_be_used(gen: Generation) -> None:
    async def scenario() -> None:
        async with serve(LabelledTarget(gen.default), LabelledTarget(gen.alt)) as proxy:
            grant = proxy.grant(gen.default, max_calls=50, allowed=[gen.default, gen.alt])
            async with client(proxy, grant.token) as http:
                reply = await http.get("/info")
            assert reply.status_code == 200
            assert reply.json()[gen.labels] == [gen.default, gen.alt]

    run(scenario)


@GENERATIONS
def test_info_call_count_updates_after_invocations(gen: Generation) -> None:
    async def scenario() -> None:
        async with serve(LabelledTarget(gen.default)) as proxy:
            grant = proxy.grant(gen.default, max_calls=50)
            async with client(proxy, grant.token) as http:
                assert (await http.post("/invoke", json={"question": "test"})).status_code == 200
                assert (await http.get("/info")).json()["callCount"] == 1

    run(scenario)


@GENERATIONS
def test_info_requires_authentication(gen: Generation) -> None:
    async def scenario() -> None:
        async with serve(LabelledTarget(gen.default)) as proxy:
            proxy.grant(gen.default, max_calls=50)
            async with client(proxy) as http:
                assert (await http.get("/info")).status_code == 401

    run(scenario)


# --- AgentV's tests: "provider override" / "target override" ------------------------------------


@GENERATIONS
def test_the_default_answers_when_none_is_named(gen: Generation) -> None:
    async def scenario() -> None:
        async with serve(LabelledTarget(gen.default), LabelledTarget(gen.alt)) as proxy:
            grant = proxy.grant(gen.default, max_calls=50)
            async with client(proxy, grant.token) as http:
                reply = await http.post("/invoke", json={"question": "test"})
            assert reply.status_code == 200
            assert gen.default in reply.json()["rawText"]

    run(scenario)


@GENERATIONS
def test_the_named_one_answers_when_one_is_named(gen: Generation) -> None:
    async def scenario() -> None:
        async with serve(LabelledTarget(gen.default), LabelledTarget(gen.alt)) as proxy:
            grant = proxy.grant(gen.default, max_calls=50, allowed=[gen.default, gen.alt])
            async with client(proxy, grant.token) as http:
                reply = await http.post("/invoke", json={"question": "test", gen.selector: gen.alt})
            assert reply.status_code == 200
            assert gen.alt in reply.json()["rawText"]

    run(scenario)


@GENERATIONS
def test_an_unknown_one_is_400_naming_the_available(gen: Generation) -> None:
    async def scenario() -> None:
        async with serve(LabelledTarget(gen.default), LabelledTarget(gen.alt)) as proxy:
            grant = proxy.grant(gen.default, max_calls=50, allowed=[gen.default])
            async with client(proxy, grant.token) as http:
                body = {"question": "test", gen.selector: f"unknown-{gen.selector}"}
                reply = await http.post("/invoke", json=body)
            assert reply.status_code == 400
            error = reply.json()["error"]
            assert f"Unknown {gen.selector}" in error and gen.default in error
            assert grant.used == 0

    run(scenario)


@GENERATIONS
def test_a_batch_names_one_per_request(gen: Generation) -> None:
    async def scenario() -> None:
        async with serve(LabelledTarget(gen.default), LabelledTarget(gen.alt)) as proxy:
            grant = proxy.grant(gen.default, max_calls=50, allowed=[gen.default, gen.alt])
            async with client(proxy, grant.token) as http:
                batch = {
                    "requests": [{"question": "q1"}, {"question": "q2", gen.selector: gen.alt}]
                }
                reply = await http.post("/invokeBatch", json=batch)
            assert reply.status_code == 200
            first, second = reply.json()["responses"]
            assert gen.default in first["rawText"] and gen.alt in second["rawText"]

    run(scenario)


@GENERATIONS
def test_an_unknown_one_in_a_batch_is_answered_in_its_place(gen: Generation) -> None:
    default = LabelledTarget(gen.default)

    async def scenario() -> None:
        async with serve(default, LabelledTarget(gen.alt)) as proxy:
            grant = proxy.grant(gen.default, max_calls=50, allowed=[gen.default])
            async with client(proxy, grant.token) as http:
                batch = {
                    "requests": [
                        {"question": "q1"},
                        {"question": "q2", gen.selector: f"unknown-{gen.selector}"},
                    ]
                }
                reply = await http.post("/invokeBatch", json=batch)
            assert reply.status_code == 200
            first, second = reply.json()["responses"]
            assert gen.default in first["rawText"]
            assert f"Unknown {gen.selector}" in second["rawText"]
            assert (second["output"], second["code"]) == ([], "unknown_target")
            assert grant.used == 1 and default.calls == 1  # the unknown one is not charged

    run(scenario)


# --- what AgentV's proxy source states beyond its tests -----------------------------------------


def test_options_answers_204_on_agentvs_routes_without_cors_headers() -> None:
    """AgentV answers a preflight 204 with ``Access-Control-Allow-Origin: *``. evalrun answers
    204 with no Access-Control-* header, on purpose: a browser page must never read a judge
    answer (docs/security.md, "Host and Origin check, no CORS")."""

    async def scenario() -> None:
        async with serve(FakeTarget("judge")) as proxy, client(proxy) as http:
            for path in ("/info", "/invoke", "/invokeBatch"):
                reply = await http.options(path)
                assert (reply.status_code, reply.content) == (204, b""), path
                assert not [h for h in reply.headers if h.lower().startswith("access-control")]
            # not one of AgentV's routes: no token, no answer about it
            assert (await http.options("/v1/chat/completions")).status_code == 401

    run(scenario)


def test_an_unknown_route_without_a_token_is_401() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge")) as proxy, client(proxy) as http:
            for path in ("/nowhere", "/v1/nowhere", "/docs"):
                reply = await http.get(path)
                assert reply.status_code == 401, path
                assert error_body(reply)["code"] == "unauthorized"
            assert (await http.post("/info")).status_code == 401  # known route, wrong method

    run(scenario)


def test_a_wrong_token_is_401_on_every_route() -> None:
    judge = FakeTarget("judge")

    async def scenario() -> None:
        async with serve(judge) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            async with client(proxy, grant.token + "x") as http:
                assert (await http.get("/info")).status_code == 401
                assert (await http.post("/invoke", json={"question": "q"})).status_code == 401
                batch = {"requests": [{"question": "q"}]}
                assert (await http.post("/invokeBatch", json=batch)).status_code == 401
            assert judge.calls == 0 and grant.used == 0

    run(scenario)


@pytest.mark.slow  # the first 404 builds the FastAPI app: seconds on a loaded 2-core machine
def test_an_unknown_route_with_a_token_is_404() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge")) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            async with client(proxy, grant.token) as http:
                reply = await http.get("/nowhere")
            assert reply.status_code == 404 and error_body(reply)["code"] == "not_found"

    run(scenario)


def test_invoke_past_max_calls_is_429() -> None:
    judge = FakeTarget("judge")

    async def scenario() -> None:
        async with serve(judge) as proxy:
            grant = proxy.grant("judge", max_calls=2)
            async with client(proxy, grant.token) as http:
                statuses = [
                    (await http.post("/invoke", json={"question": "q"})).status_code
                    for _ in range(3)
                ]
            assert statuses == [200, 200, 429] and judge.calls == 2

    run(scenario)


def test_a_batch_past_the_remaining_budget_is_429_and_calls_nothing() -> None:
    judge = FakeTarget("judge")

    async def scenario() -> None:
        async with serve(judge) as proxy:
            grant = proxy.grant("judge", max_calls=3)
            async with client(proxy, grant.token) as http:
                assert (await http.post("/invoke", json={"question": "q"})).status_code == 200
                batch = {"requests": [{"question": "q"}] * 3}
                reply = await http.post("/invokeBatch", json=batch)
            assert reply.status_code == 429
            assert (error_body(reply)["used"], error_body(reply)["requested"]) == (1, 3)
            assert judge.calls == 1

    run(scenario)


def test_a_request_without_a_question_is_400() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge")) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            async with client(proxy, grant.token) as http:
                for body in ({}, {"question": 3}):
                    reply = await http.post("/invoke", json=body)
                    assert reply.status_code == 400, body
                    assert "question" in error_body(reply)["message"]
            assert grant.used == 0

    run(scenario)


def test_a_batch_without_a_requests_array_is_400() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge")) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            async with client(proxy, grant.token) as http:
                for body in ({}, {"requests": "q"}):
                    reply = await http.post("/invokeBatch", json=body)
                    assert reply.status_code == 400, body
                    assert "requests" in error_body(reply)["message"]

    run(scenario)


def test_unknown_body_keys_are_ignored_but_redirects_are_refused() -> None:
    """AgentV ignores keys it does not read. evalrun does too, and records them on the call;
    a key that would choose the target, its endpoint or credentials is refused on purpose
    (docs/security.md, "Unknown request keys")."""
    judge = FakeTarget("judge")

    async def scenario() -> None:
        async with serve(judge) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            async with client(proxy, grant.token) as http:
                extra = {"question": "q", "evalCaseId": "c1", "attempt": 1, "mode": "fast"}
                assert (await http.post("/invoke", json=extra)).status_code == 200
                for key in ("api_base", "baseUrl", "api_key", "headers", "model"):
                    reply = await http.post("/invoke", json={"question": "q", key: "x"})
                    assert reply.status_code == 400, key
                    assert repr(key) in error_body(reply)["message"]
            assert judge.calls == 1 and grant.used == 1
            assert grant.records[0].warnings == ["ignored unknown request keys: 'mode'"]

    run(scenario)


def test_a_failing_call_in_a_batch_answers_its_error_in_rawtext() -> None:
    good, bad = FakeTarget("good"), FakeTarget("bad", error=TargetError("provider said no"))

    async def scenario() -> None:
        async with serve(good, bad) as proxy:
            grant = proxy.grant("good", max_calls=5)
            async with client(proxy, grant.token) as http:
                batch = {"requests": [{"question": "a", "target": "bad"}, {"question": "b"}]}
                reply = await http.post("/invokeBatch", json=batch)
            assert reply.status_code == 200
            failed, answered = reply.json()["responses"]
            assert failed["rawText"] == "Error: provider said no" and failed["output"] == []
            assert answered["rawText"] == "fake answer"

    run(scenario)


def test_a_call_in_flight_when_the_proxy_stops_gets_503() -> None:
    slow = FakeTarget("judge", delay=30)

    async def scenario() -> None:
        async with serve(slow) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            async with client(proxy, grant.token) as http:
                call = asyncio.ensure_future(http.post("/invoke", json={"question": "q"}))
                await slow.started.wait()
                await proxy.stop()
                reply = await call
            assert reply.status_code == 503
            assert error_body(reply)["code"] == "shutting_down"

    run(scenario)


def test_the_proxy_listens_on_loopback_only() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge")) as proxy:
            assert httpx.URL(proxy.url).host == "127.0.0.1"
        with pytest.raises(ValueError, match="loopback"):
            from proxy import JudgeProxy

            JudgeProxy(lambda name: FakeTarget(name), ["judge"], host="0.0.0.0")

    run(scenario)
