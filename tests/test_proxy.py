"""The judge proxy's routes over real loopback HTTP: auth, budgets, targets, errors, records."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from proxy_helpers import FakeTarget, client, error_body, run, serve

from evalrun.results.models import ProxyUsage
from evalrun.targets.base import TargetError, TargetTimeout, UnsupportedByTarget
from evalrun.targets.config import TargetConfig
from evalrun.targets.providers.mock import MockTarget
from grader_sdk import AsyncTargetClient, UpstreamError


def test_info_and_invoke_follow_the_wire_contract() -> None:
    mock = MockTarget(
        TargetConfig(
            name="mock-judge",
            kind="mock",
            rules=[{"match": "capital", "response": '{"relevant": true}'}],
            default="no idea",
        )
    )

    async def scenario() -> None:
        async with serve(mock, FakeTarget("other")) as proxy:
            grant = proxy.grant("mock-judge", max_calls=5, grader="cp", case_id="c1")
            async with client(proxy, grant.token) as http:
                info = (await http.get("/info")).json()
                assert info == {
                    "targetName": "mock-judge",
                    "providerLabel": "mock-judge",
                    "callCount": 0,
                    "maxCalls": 5,
                    "availableTargets": ["mock-judge", "other"],
                    "availableProviderLabels": ["mock-judge", "other"],
                    "callsPerRequest": 1,
                }
                reply = await http.post(
                    "/invoke",
                    json={"question": "What is the capital?", "system_prompt": "Be brief."},
                )
                assert reply.status_code == 200
                body = reply.json()
                assert body["rawText"] == '{"relevant": true}'
                assert body["output"] == [{"role": "assistant", "content": '{"relevant": true}'}]
                assert body["target"] == "mock-judge"
                assert body["cached"] is False
                assert body["latencyMs"] >= 0
                usage = body["tokenUsage"]
                assert usage["total"] == usage["input"] + usage["output"] > 0
                other = await http.post("/invoke", json={"question": "q", "target": "other"})
                assert other.json()["rawText"] == "fake answer"
                assert (await http.get("/info")).json()["callCount"] == 2
            assert ProxyUsage(**grant.usage()).calls == 2
            assert set(grant.usage()) == {
                "calls",
                "max_calls",
                "input_tokens",
                "output_tokens",
                "cached_calls",
                "latency_ms",
                "cost_usd",
            }
            first = grant.records[0]
            assert first.case_id == "c1" and first.grader == "cp"
            assert first.status == "ok" and first.target == "mock-judge"
            assert first.system_prompt == "Be brief."
            assert first.question == "What is the capital?"

    run(scenario)


def test_bad_tokens_get_401_and_reach_no_target() -> None:
    fake = FakeTarget("judge")

    async def scenario() -> None:
        async with serve(fake) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            other = proxy.grant("judge", max_calls=5)
            token = grant.token
            changed = token[:-1] + ("A" if token[-1] != "A" else "B")
            assert len(token) >= 43 and token != other.token
            bad_headers = [
                {},
                {"Authorization": "Bearer"},
                {"Authorization": "Bearer wrong"},
                {"Authorization": f"Bearer {changed}"},
                {"Authorization": f"Bearer {token[:-1]}"},
                {"Authorization": f"Bearer {token}x"},
                {"Authorization": f"Basic {token}"},
            ]
            async with client(proxy) as http:
                for headers in bad_headers:
                    for method, path in (("POST", "/invoke"), ("GET", "/info")):
                        reply = await http.request(
                            method, path, json={"question": "q"}, headers=headers
                        )
                        assert reply.status_code == 401, headers
                        assert error_body(reply)["code"] == "unauthorized"
                ok = await http.post(
                    "/invoke", json={"question": "q"}, headers={"Authorization": f"Bearer {token}"}
                )
                assert ok.status_code == 200
                proxy.revoke(grant)
                for path in ("/invoke", "/v1/chat/completions"):
                    revoked = await http.post(
                        path,
                        json={"question": "q", "messages": [{"role": "user", "content": "q"}]},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    assert revoked.status_code == 401
                still = await http.get("/info", headers={"Authorization": f"Bearer {other.token}"})
                assert still.status_code == 200
        assert fake.calls == 1

    run(scenario)


@pytest.mark.parametrize("racing", [50, pytest.param(200, marks=pytest.mark.slow)])
def test_max_calls_is_exact_when_requests_race(racing: int) -> None:
    fake = FakeTarget("judge", delay=0.05)

    async def scenario() -> list[httpx.Response]:
        async with serve(fake) as proxy:
            grant = proxy.grant("judge", max_calls=10)
            limits = httpx.Limits(max_connections=racing)
            # one event loop serves every connection and makes them: on a loaded machine an
            # answer can wait longer than the helper's 10 s, and a client timeout is not what
            # this test is about. A hang still fails it.
            patient = httpx.Timeout(300)
            async with client(proxy, grant.token, limits=limits, timeout=patient) as http:
                return list(
                    await asyncio.gather(
                        *(http.post("/invoke", json={"question": f"q{i}"}) for i in range(racing))
                    )
                )

    replies = run(scenario)
    assert fake.calls == 10
    assert fake.peak_in_flight > 1
    statuses = [r.status_code for r in replies]
    assert statuses.count(200) == 10 and statuses.count(429) == racing - 10
    for reply in replies:
        if reply.status_code == 429:
            error = error_body(reply)
            assert error["code"] == "max_calls_exceeded"
            assert error["limit"] == 10 and error["used"] == 10


def test_batch_is_refused_whole_when_over_budget_and_runs_concurrently() -> None:
    fake = FakeTarget("judge", delay=0.05)

    async def scenario() -> None:
        async with serve(fake) as proxy:
            grant = proxy.grant("judge", max_calls=3)
            async with client(proxy, grant.token) as http:
                four = {"requests": [{"question": f"q{i}"} for i in range(4)]}
                refused = await http.post("/invokeBatch", json=four)
                assert refused.status_code == 429
                error = error_body(refused)
                assert error["code"] == "max_calls_exceeded"
                assert (error["limit"], error["used"], error["requested"]) == (3, 0, 4)
                assert fake.calls == 0 and grant.used == 0

                three = {"requests": [{"question": f"q{i}"} for i in range(3)]}
                done = await http.post("/invokeBatch", json=three)
                assert done.status_code == 200
                responses = done.json()["responses"]
                assert [r["rawText"] for r in responses] == ["fake answer"] * 3
                assert fake.calls == 3 and fake.peak_in_flight == 3

                empty = await http.post("/invokeBatch", json={"requests": []})
                assert empty.json() == {"responses": []}
                last = await http.post("/invoke", json={"question": "one more"})
                assert last.status_code == 429
        assert fake.calls == 3

    run(scenario)


def test_batch_with_a_failing_call_answers_its_error_in_its_place() -> None:
    """As AgentV's proxy: 200, the other calls answered, the failed one's error in its place."""
    good, bad = FakeTarget("good"), FakeTarget("bad", error=TargetError("provider said no"))

    async def scenario() -> None:
        async with serve(good, bad) as proxy:
            grant = proxy.grant("good", max_calls=5)
            async with client(proxy, grant.token) as http:
                batch = {
                    "requests": [
                        {"question": "a"},
                        {"question": "b", "target": "bad"},
                        {"question": "c"},
                    ]
                }
                reply = await http.post("/invokeBatch", json=batch)
            assert reply.status_code == 200
            first, failed, last = reply.json()["responses"]
            assert first["rawText"] == last["rawText"] == "fake answer"
            assert failed["output"] == [] and failed["rawText"].startswith("Error: ")
            assert (failed["code"], failed["status"], failed["index"]) == ("upstream_error", 502, 1)
            assert "provider said no" in failed["error"] and "provider said no" in failed["rawText"]
            assert grant.used == 3 and (good.calls, bad.calls) == (2, 1)
            assert sorted(r.status for r in grant.records) == ["error", "ok", "ok"]
            sdk = AsyncTargetClient(proxy.url, grant.token)
            with pytest.raises(UpstreamError) as caught:
                await sdk.invoke_batch(["d", {"question": "e", "target": "bad"}])
            assert caught.value.status == 502 and caught.value.body["index"] == 1
            assert grant.used == 5

    run(scenario)


def test_unknown_target_is_400_listing_the_allowed_ones() -> None:
    a, b, c = FakeTarget("a"), FakeTarget("b"), FakeTarget("c")

    async def scenario() -> None:
        async with serve(a, b, c) as proxy:
            grant = proxy.grant("a", max_calls=5, allowed=["b"])
            async with client(proxy, grant.token) as http:
                for name in ("c", "no-such-target"):
                    reply = await http.post("/invoke", json={"question": "q", "target": name})
                    assert reply.status_code == 400
                    error = error_body(reply)
                    assert error["code"] == "unknown_target"
                    assert error["allowed"] == ["a", "b"]
                    assert name in error["message"]
                batch = {"requests": [{"question": "q"}, {"question": "q", "target": "c"}]}
                answered = await http.post("/invokeBatch", json=batch)
                assert answered.status_code == 200
                refused = answered.json()["responses"][1]
                assert (refused["code"], refused["status"]) == ("unknown_target", 400)
                assert refused["allowed"] == ["a", "b"] and "'c'" in refused["error"]
                assert (await http.post("/invoke", json={"question": "q", "target": "b"})).json()[
                    "target"
                ] == "b"
            assert grant.used == 2 and (a.calls, b.calls, c.calls) == (1, 1, 0)

    run(scenario)


def test_host_and_origin_must_be_loopback_and_no_cors_headers() -> None:
    fake = FakeTarget("judge")

    async def scenario() -> None:
        async with serve(fake) as proxy:
            grant = proxy.grant("judge", max_calls=10)
            port = proxy.port
            async with client(proxy, grant.token) as http:
                for host in ("evil.example", f"evil.example:{port}", "127.0.0.2", "0.0.0.0"):
                    reply = await http.get("/info", headers={"Host": host})
                    assert reply.status_code == 403, host
                    assert error_body(reply)["code"] == "bad_request"
                for host in (
                    f"127.0.0.1:{port}",
                    f"localhost:{port}",
                    f"[::1]:{port}",
                    "localhost",
                ):
                    assert (await http.get("/info", headers={"Host": host})).status_code == 200
                cross = await http.post(
                    "/invoke", json={"question": "q"}, headers={"Origin": "https://evil.example"}
                )
                assert cross.status_code == 403
                same = await http.get("/info", headers={"Origin": f"http://127.0.0.1:{port}"})
                assert same.status_code == 200
                preflight = await http.options(
                    "/invoke",
                    headers={
                        "Origin": f"http://localhost:{port}",
                        "Access-Control-Request-Method": "POST",
                    },
                )
                for reply in (same, preflight):
                    assert not any(h.startswith("access-control-") for h in reply.headers)
        assert fake.calls == 0

    run(scenario)


def test_body_limit_applies_to_sized_and_chunked_bodies() -> None:
    fake = FakeTarget("judge")

    async def chunks(size: int, piece: int = 256) -> object:
        body = json.dumps({"question": "x" * size}).encode()
        for start in range(0, len(body), piece):
            yield body[start : start + piece]

    async def scenario() -> None:
        async with serve(fake, max_body_bytes=2_000) as proxy:
            grant = proxy.grant("judge", max_calls=10)
            async with client(proxy, grant.token) as http:
                big = await http.post("/invoke", json={"question": "x" * 5_000})
                assert big.status_code == 413
                assert error_body(big)["code"] == "payload_too_large"
                chunked = await http.post("/invoke", content=chunks(50_000))
                assert chunked.status_code == 413
                small = await http.post("/invoke", content=chunks(500))
                assert small.status_code == 200
        assert fake.calls == 1

    run(scenario)


def test_upstream_errors_map_to_status_codes_and_count() -> None:
    targets = [
        FakeTarget("fails", error=TargetError("rate limited by provider", status=429)),
        FakeTarget("slow", error=TargetTimeout("no answer in 60 s")),
        FakeTarget("local", error=UnsupportedByTarget("free text is not a typed task")),
        FakeTarget("crashes", error=RuntimeError("boom")),
    ]
    expected = {
        "fails": (502, "upstream_error", "rate limited by provider"),
        "slow": (504, "upstream_timeout", "no answer in 60 s"),
        "local": (422, "unsupported_request", "free text is not a typed task"),
        "crashes": (502, "upstream_error", "boom"),
    }

    async def scenario() -> None:
        async with serve(*targets) as proxy:
            grant = proxy.grant("fails", max_calls=10)
            async with client(proxy, grant.token) as http:
                for name, (status, code, message) in expected.items():
                    reply = await http.post("/invoke", json={"question": "q", "target": name})
                    assert reply.status_code == status, name
                    error = error_body(reply)
                    assert error["code"] == code and message in error["message"]
            assert grant.used == 4
            assert [r.error_code for r in grant.records] == [e[1] for e in expected.values()]
            assert all(r.status == "error" for r in grant.records)

    run(scenario)


def test_call_records_and_error_messages_redact_secrets() -> None:
    secret = "sk-live-0123456789abcdef"
    echo = FakeTarget("echo", echo=True)
    leaky = FakeTarget("leaky", error=TargetError(f"invalid key {secret}"))

    async def scenario() -> None:
        async with serve(echo, leaky, secrets=(secret,)) as proxy:
            grant = proxy.grant("echo", max_calls=5)
            async with client(proxy, grant.token) as http:
                reply = await http.post(
                    "/invoke",
                    json={
                        "question": f"key is {secret}, token is {grant.token}",
                        "systemPrompt": f"system {secret}",
                        "task": {"kind": "statements", "text": f"t {secret}"},
                    },
                )
                assert reply.status_code == 200
                failed = await http.post("/invoke", json={"question": "q", "target": "leaky"})
                assert failed.status_code == 502
                assert secret not in failed.text and "***" in error_body(failed)["message"]
            dumped = json.dumps([r.to_dict() for r in grant.records])
            assert secret not in dumped and grant.token not in dumped
            record = grant.records[0]
            assert record.question == "key is ***, token is ***"
            assert record.system_prompt == "system ***"
            assert record.task == {"kind": "statements", "text": "t ***"}
            assert record.response is not None and "***" in record.response

    run(scenario)


def test_bad_requests_and_unknown_routes_answer_json_errors() -> None:
    fake = FakeTarget("judge")

    async def scenario() -> None:
        async with serve(fake) as proxy:
            grant = proxy.grant("judge", max_calls=10)
            async with client(proxy, grant.token) as http:
                for body in (b"{not json", b"[]", b'{"systemPrompt": "no question"}', b""):
                    reply = await http.post("/invoke", content=body)
                    assert reply.status_code == 400, body
                    assert error_body(reply)["code"] == "bad_request"
                bad_batch = await http.post("/invokeBatch", json={"requests": [{"q": 1}]})
                assert bad_batch.status_code == 400
                missing = await http.get("/nowhere")
                assert missing.status_code == 404 and error_body(missing)["code"]
                wrong_method = await http.get("/invoke")
                assert wrong_method.status_code == 405 and error_body(wrong_method)["code"]
            assert grant.used == 0

    run(scenario)


def test_openapi_schema_is_served_and_docs_are_not() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge")) as proxy, client(proxy) as http:
            schema = (await http.get("/openapi.json")).json()
            for path in ("/invoke", "/invokeBatch", "/v1/chat/completions"):
                assert "requestBody" in schema["paths"][path]["post"]
            assert {"/info", "/v1/models"} <= set(schema["paths"])
            assert "InvokeBody" in schema["components"]["schemas"]
            assert "systemPrompt" in schema["components"]["schemas"]["InvokeBody"]["properties"]
            token = {"Authorization": f"Bearer {proxy.grant('judge', max_calls=1).token}"}
            for page in ("/docs", "/redoc"):
                assert (await http.get(page)).status_code == 401  # no token: not even a 404
                assert (await http.get(page, headers=token)).status_code == 404

    run(scenario)


def test_chat_completions_speaks_openai_json() -> None:
    fake = FakeTarget("judge", text="42")
    other = FakeTarget("other")

    async def scenario() -> None:
        async with serve(fake, other) as proxy:
            grant = proxy.grant("judge", max_calls=10, allowed=["judge"])
            async with client(proxy, grant.token) as http:
                reply = await http.post(
                    "/v1/chat/completions",
                    json={
                        "model": "gpt-4o-mini",
                        "messages": [
                            {"role": "system", "content": "Answer with a number."},
                            {"role": "user", "content": [{"type": "text", "text": "6 x 7?"}]},
                        ],
                        "temperature": 0,
                        "response_format": {"type": "json_object"},
                    },
                )
                assert reply.status_code == 200
                body = reply.json()
                assert body["object"] == "chat.completion" and body["model"] == "judge"
                assert body["choices"][0]["message"] == {
                    "role": "assistant",
                    "content": "42",
                    "refusal": None,
                }
                assert body["choices"][0]["finish_reason"] == "stop"
                assert body["usage"] == {
                    "prompt_tokens": 3,
                    "completion_tokens": 2,
                    "total_tokens": 5,
                }
                sent = fake.requests[-1]
                assert sent.system_prompt == "Answer with a number."
                assert sent.messages == [{"role": "user", "content": "6 x 7?"}]
                assert sent.response_format == {"type": "json_object"}
                assert sent.temperature == 0

                user_only = {"messages": [{"role": "user", "content": "hi"}]}
                two = await http.post("/v1/chat/completions", json={**user_only, "n": 2})
                assert two.status_code == 400 and "n" in two.json()["error"]["message"]
                assert two.json()["error"]["type"] == "invalid_request_error"
                not_allowed = await http.post(
                    "/v1/chat/completions", json={**user_only, "model": "other"}
                )
                assert not_allowed.status_code == 400
                assert not_allowed.json()["error"]["code"] == "unknown_target"
                models = (await http.get("/v1/models")).json()
                assert models == {
                    "object": "list",
                    "data": [
                        {"id": "judge", "object": "model", "created": 0, "owned_by": "evalrun"}
                    ],
                }
        assert fake.calls == 1 and other.calls == 0

    run(scenario)


def test_the_openai_package_works_against_the_proxy() -> None:
    import openai

    fake = FakeTarget("judge", text='{"relevant": true}')

    async def scenario() -> None:
        async with serve(fake, FakeTarget("second")) as proxy:
            grant = proxy.grant("judge", max_calls=1)
            api = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key=grant.token, max_retries=0)
            completion = await api.chat.completions.create(
                model="judge",
                messages=[
                    {"role": "system", "content": "Reply in JSON."},
                    {"role": "user", "content": "Is Paris in France?"},
                ],
                extra_body={"task": {"kind": "relevance", "query": "q", "passage": "p"}},
            )
            assert completion.choices[0].message.content == '{"relevant": true}'
            assert completion.usage is not None and completion.usage.total_tokens == 5
            assert fake.requests[0].task == {"kind": "relevance", "query": "q", "passage": "p"}
            models = await api.models.list()
            assert sorted(m.id for m in models.data) == ["judge", "second"]
            try:
                await api.chat.completions.create(
                    model="judge", messages=[{"role": "user", "content": "again"}]
                )
            except openai.RateLimitError as exc:
                assert exc.status_code == 429
            else:
                raise AssertionError("the second call should pass the budget")
            wrong = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key="nope", max_retries=0)
            try:
                await wrong.models.list()
            except openai.AuthenticationError as exc:
                assert exc.status_code == 401
            else:
                raise AssertionError("a wrong key should be refused")
            await api.close()
            await wrong.close()

    run(scenario)
