"""The proxy on AgentV's routes speaks AgentV's wire: flat error bodies, ``provider`` as a
synonym of ``target``, unknown targets refused in AgentV's words, unknown keys ignored and
recorded unless they would redirect the call, both generations' env names."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import pytest

from evalrun.launcher.environment import grader_environment
from evalrun.targets.base import TargetError
from grader_sdk import AsyncTargetClient
from grader_sdk._errors import BadRequest, BudgetExceeded, UnknownTarget, error_from_response
from tests.conftest import ROOT
from tests.proxy_helpers import FakeTarget, client, error_body, run, serve

CLIENT = ROOT / "tests" / "data" / "agentv" / "agentv_style_client.mjs"


def test_errors_on_agentv_routes_are_flat_and_v1_keeps_openai_shape() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge"), FakeTarget("other")) as proxy:
            grant = proxy.grant("judge", max_calls=1, allowed=["judge"])
            async with client(proxy, grant.token) as http:
                unknown = await http.post("/invoke", json={"question": "q", "target": "nope"})
                assert unknown.status_code == 400
                assert unknown.json() == {
                    "error": "Unknown target 'nope': not available to this grader (allowed: judge)",
                    "code": "unknown_target",
                    "allowed": ["judge"],
                }
                assert (await http.post("/invoke", json={"question": "q"})).status_code == 200
                over = await http.post("/invokeBatch", json={"requests": [{"question": "q"}]})
                assert over.status_code == 429
                body = over.json()
                assert body["code"] == "max_calls_exceeded" and (body["limit"], body["used"]) == (
                    1,
                    1,
                )
                assert body["error"] == "this grader may make 1 judge calls and has used 1"
                chat = await http.post(
                    "/v1/chat/completions", json={"messages": [{"role": "user", "content": "q"}]}
                )
                assert chat.status_code == 429
                assert chat.json()["error"]["code"] == "max_calls_exceeded"
            async with client(proxy, "wrong") as http:
                info = await http.get("/info")
                assert info.status_code == 401
                assert error_body(info) == {
                    "error": "missing, invalid or revoked token",
                    "code": "unauthorized",
                    "message": "missing, invalid or revoked token",
                }
                missing = await http.get("/nowhere")  # no token, no answer about the route
                assert missing.status_code == 401 and error_body(missing)["code"] == "unauthorized"

    run(scenario)


def test_provider_is_a_synonym_of_target_and_never_falls_back_to_the_default() -> None:
    judge, other = FakeTarget("judge"), FakeTarget("other")

    async def scenario() -> None:
        async with serve(judge, other) as proxy:
            grant = proxy.grant("judge", max_calls=10)
            async with client(proxy, grant.token) as http:
                by_provider = await http.post(
                    "/invoke", json={"question": "q", "provider": "other"}
                )
                assert by_provider.status_code == 200 and by_provider.json()["target"] == "other"
                with_null = {"question": "q", "provider": "other", "target": None}
                assert (await http.post("/invoke", json=with_null)).json()["target"] == "other"
                refused = [
                    {"question": "q", "provider": "missing"},
                    {"question": "q", "provider": ""},
                    {"question": "q", "provider": "other", "target": "judge"},
                    {"question": "q", "provider": "other", "target": "other"},
                    {"question": "q", "model": "other"},
                    {"question": "q", "targetName": "other"},
                    {"question": "q", "provider_label": "other"},
                    {"question": "q", "api_base": "http://127.0.0.1:9"},
                    {"question": "q", "apiKey": "sk-x"},
                    {"question": "q", "extra_headers": {"x": "y"}},
                ]
                for body in refused:
                    reply = await http.post("/invoke", json=body)
                    assert reply.status_code == 400, body
                    assert error_body(reply)["code"] in ("unknown_target", "bad_request"), body
                batch = {"requests": [{"question": "a"}, {"question": "b", "provider": "missing"}]}
                reply = await http.post("/invokeBatch", json=batch)
                assert reply.status_code == 200
                answered, refused_item = reply.json()["responses"]
                assert answered["target"] == "judge"
                assert refused_item["allowed"] == ["judge", "other"]
                assert refused_item["rawText"].startswith("Error: Unknown provider 'missing'")
                extra = await http.post("/invokeBatch", json={"requests": [], "mode": "fast"})
                assert extra.status_code == 200 and extra.json() == {"responses": []}
                bookkeeping = {"question": "q", "evalCaseId": "c1", "attempt": 2}
                assert (await http.post("/invoke", json=bookkeeping)).status_code == 200
                # a misspelt selector is not a redirect: ignored as AgentV ignores it, recorded
                misspelt = await http.post("/invoke", json={"question": "q", "provder": "other"})
                assert misspelt.status_code == 200 and misspelt.json()["target"] == "judge"
            assert (judge.calls, other.calls) == (3, 2)
            assert grant.records[-1].warnings == ["ignored unknown request keys: 'provder'"]
            assert all(not record.warnings for record in grant.records[:-1])

    run(scenario)


def test_unknown_field_message_names_it_and_the_known_ones() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge")) as proxy:
            grant = proxy.grant("judge", max_calls=10)
            async with client(proxy, grant.token) as http:
                reply = await http.post("/invoke", json={"question": "q", "model": "x"})
                message = error_body(reply)["message"]
                assert "field 'model' is refused: it would choose the target" in message
                assert "provider" in message and "target" in message and "evalCaseId" in message
                both = {"question": "q", "provider": "judge", "target": "judge"}
                assert "not both" in error_body(await http.post("/invoke", json=both))["message"]
            assert grant.used == 0

    run(scenario)


def test_grader_environment_carries_both_generations_names() -> None:
    env = grader_environment(
        secret_names=[], proxy_url="http://127.0.0.1:1", proxy_token="t", base={}
    )
    for prefix in ("AGENTV_TARGET_PROXY", "AGENTV_PROVIDER_PROXY", "EVALRUN_PROXY"):
        assert (env[f"{prefix}_URL"], env[f"{prefix}_TOKEN"]) == ("http://127.0.0.1:1", "t")


@pytest.mark.parametrize(
    "payload",
    [
        {"error": "over budget", "code": "max_calls_exceeded", "limit": 3, "used": 3},
        {"error": {"message": "over budget", "code": "max_calls_exceeded", "limit": 3, "used": 3}},
    ],
)
def test_python_sdk_reads_both_error_shapes(payload: dict[str, Any]) -> None:
    error = error_from_response(429, payload)
    assert isinstance(error, BudgetExceeded)
    assert (error.limit, error.used, error.code) == (3, 3, "max_calls_exceeded")
    assert str(error) == "over budget (HTTP 429, max_calls_exceeded)"
    assert isinstance(error_from_response(400, {"error": "Unknown provider 'x'"}), BadRequest)


def test_python_sdk_against_the_real_proxy_names_the_allowed_targets() -> None:
    async def scenario() -> None:
        async with serve(FakeTarget("judge"), FakeTarget("other")) as proxy:
            grant = proxy.grant("judge", max_calls=5, allowed=["judge"])
            sdk = AsyncTargetClient(proxy.url, grant.token)
            with pytest.raises(UnknownTarget) as caught:
                await sdk.invoke("q", target="other")
            assert caught.value.allowed == ["judge"]
            assert "not available to this grader" in caught.value.message

    run(scenario)


node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


async def agentv_client(env: dict[str, str], generation: str, request: Any, route: str) -> Any:
    process = await asyncio.create_subprocess_exec(
        "node",
        str(CLIENT),
        generation,
        json.dumps(request),
        route,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    return json.loads(out)


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@node
@pytest.mark.parametrize("generation", ["4x", "current"])
def test_an_agentv_style_client_reads_evalrun_errors_as_text(generation: str) -> None:
    other = FakeTarget("other")

    async def scenario() -> None:
        async with serve(FakeTarget("judge"), other) as proxy:
            grant = proxy.grant("judge", max_calls=2)
            env = grader_environment(
                secret_names=[], proxy_url=proxy.url, proxy_token=grant.token, base={}
            )
            env["PATH"] = "/usr/bin:/bin:/usr/local/bin"
            ok = await agentv_client(env, generation, {"question": "q", "name": "other"}, "invoke")
            assert ok["ok"] and ok["body"]["target"] == "other"
            info = await agentv_client(env, generation, {}, "info")
            assert info["body"]["availableProviderLabels"] == ["judge", "other"]
            unknown = await agentv_client(env, generation, {"question": "q", "name": "x"}, "invoke")
            selector = "target" if generation == "4x" else "provider"
            assert unknown == {
                "ok": False,
                "status": 400,
                "message": f"Unknown {selector} 'x': not available to this grader "
                "(allowed: judge, other)",
            }
            batch = {"requests": [{"question": "a"}, {"question": "b"}]}
            over = await agentv_client(env, generation, batch, "invokeBatch")
            assert over["status"] == 429 and "[object Object]" not in over["message"]
            assert over["message"] == "this grader may make 2 judge calls and has used 1"
            assert other.calls == 1

    run(scenario)


@node
def test_js_sdk_reads_both_error_shapes() -> None:
    import subprocess

    source = (
        f"import {{ errorFromResponse }} from '{ROOT / 'grader_sdk' / 'js' / 'index.mjs'}';\n"
        "const flat = errorFromResponse(429, {error: 'over', code: 'max_calls_exceeded', limit: 3});\n"
        "const nested = errorFromResponse(429, {error: {message: 'over', code: 'max_calls_exceeded', limit: 3}});\n"
        "console.log(JSON.stringify([flat, nested].map(e => [e.name, e.message, e.body.limit])));\n"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", source], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        ["BudgetExceeded", "over (HTTP 429, max_calls_exceeded)", 3],
        ["BudgetExceeded", "over (HTTP 429, max_calls_exceeded)", 3],
    ]


@node
def test_js_sdk_raises_the_error_a_batch_answers_in_a_requests_place() -> None:
    """The proxy answers a failed request of a batch in its place (AgentV's way); evalrun's JS
    SDK must raise it, never hand ``Error: ...`` to a grader as the judge's reply."""
    bad = FakeTarget("bad", error=TargetError("provider said no"))
    source = (
        f"import {{ TargetClient }} from '{ROOT / 'grader_sdk' / 'js' / 'index.mjs'}';\n"
        "const client = new TargetClient({url: process.env.URL, token: process.env.TOKEN});\n"
        "try { await client.invokeBatch(['a', {question: 'b', target: 'bad'}]);"
        " console.log(JSON.stringify(['no error'])); }\n"
        "catch (e) { console.log(JSON.stringify([e.name, e.status, e.body.index])); }\n"
    )

    async def scenario() -> None:
        async with serve(FakeTarget("judge"), bad) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            env = {"URL": proxy.url, "TOKEN": grant.token, "PATH": "/usr/bin:/bin:/usr/local/bin"}
            process = await asyncio.create_subprocess_exec(
                "node", "--input-type=module", "-e", source, env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(process.communicate(), 30)
            assert process.returncode == 0, err.decode()
            assert json.loads(out) == ["UpstreamError", 502, 1]
            assert grant.used == 2 and bad.calls == 1

    run(scenario)
