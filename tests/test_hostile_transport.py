"""A grader cannot redirect a judge call or change how it is sent: a transport or credential
field in a request (``api_base``, ``base_url``, ``api_key``, ``extra_headers``, ...) is refused
with 400 naming it, before any upstream call and any budget, for every provider kind
(docs/security.md, "No transport field reaches a provider")."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai.types.chat import completion_create_params

from evalrun.targets import CompletionRequest, RefusedField, TargetPool
from evalrun.targets.base import CHAT_FIELDS, OPTION_FIELDS
from proxy import JudgeProxy
from tests.conftest import read_bundle, run_cli
from tests.fault_helpers import FakeOpenAI, cli_env, write_suite
from tests.targets_helpers import FakeServer, targets_file
from tests.wire_fakes import Upstreams, openai_upstream

#: what a hostile grader might send to move a call, or its key, somewhere else
TRANSPORT_FIELDS = (
    "api_base",
    "base_url",
    "api_key",
    "headers",
    "extra_headers",
    "extra_query",
    "extra_body",
    "api_version",
    "custom_llm_provider",
    "organization",
    "timeout",
)
needs_litellm = pytest.mark.skipif(
    importlib.util.find_spec("litellm") is None, reason="the litellm extra is not installed"
)


def test_options_are_openais_request_fields_as_the_sdk_declares_them() -> None:
    sdk = set(typing.get_type_hints(completion_create_params.CompletionCreateParamsNonStreaming))
    assert set(CHAT_FIELDS) == sdk
    assert OPTION_FIELDS < CHAT_FIELDS and {"seed", "stop", "user"} <= OPTION_FIELDS
    assert not OPTION_FIELDS & set(TRANSPORT_FIELDS)
    assert "model" not in OPTION_FIELDS  # the target's configured model always wins


@pytest.mark.parametrize("name", TRANSPORT_FIELDS)
def test_no_request_can_carry_a_transport_field_to_a_target(name: str) -> None:
    with pytest.raises(RefusedField) as refused:
        CompletionRequest.from_prompt("hi", options={"seed": 1, name: "http://127.0.0.1:9"})
    assert refused.value.field == name and f"'{name}'" in refused.value.message
    assert refused.value.status == 400


def test_gemini_reads_only_allowed_options() -> None:
    """Gemini maps a few OpenAI fields onto its own, every one of them an option."""
    from evalrun.targets.providers.gemini import _OPTIONS as GEMINI_OPTIONS

    assert set(GEMINI_OPTIONS) | {"stop"} <= OPTION_FIELDS


@needs_litellm
@pytest.mark.slow  # importing litellm: 10-20 s on a shared 2-core machine
def test_litellm_reads_only_allowed_options_and_keeps_its_own_endpoint() -> None:
    """litellm gets OpenAI's fields besides its own arguments, and the target's endpoint, key
    and model win over anything a request holds."""
    from evalrun.targets import build_provider
    from tests.targets_helpers import config

    request = CompletionRequest.from_prompt("hi", options=dict.fromkeys(OPTION_FIELDS, "x"))
    own = {"model", "messages", "timeout", "num_retries", "max_retries", "api_base", "api_key"}
    for base_url in ("http://127.0.0.1:9/v1", None):
        values = {"model": "openai/m", "api_key": "sk-target", "base_url": base_url}
        target = build_provider(config("lite", "litellm", **values), {})
        arguments = target.arguments(request)
        assert set(arguments) <= OPTION_FIELDS | own
        assert (arguments["model"], arguments["api_key"]) == ("openai/m", "sk-target")
        assert arguments.get("api_base") == base_url


def _targets(upstreams: Upstreams) -> list[dict[str, Any]]:
    """A target of every kind that talks to a server, each at its own fake upstream: litellm
    both with a ``base_url`` and with none (its provider's default endpoint)."""
    common = {"api_key": "sk-upstream-key", "max_retries": 0, "timeout": 10}
    openai_url = upstreams.servers["openai"].url
    return [
        *upstreams.targets(),
        {"name": "azure", "kind": "azure", "model": "gpt", "endpoint": openai_url, **common},
        {"name": "lite", "kind": "litellm", "model": "openai/gpt-4o-mini", **common}
        | {"base_url": openai_url + "/v1"},
        {"name": "lite-default", "kind": "litellm", "model": "openai/gpt-4o-mini", **common},
    ]


@needs_litellm
@pytest.mark.slow
def test_a_grader_cannot_send_its_judge_call_or_the_key_elsewhere() -> None:
    """Through the real proxy to every kind: the grader's capture server receives nothing, no
    upstream is called, no budget is spent, and the reply is 400 naming the field. An ordinary
    OpenAI option (``seed``) still reaches the upstream."""

    async def main() -> None:
        upstreams = Upstreams()
        for server in upstreams.servers.values():
            await server.start()
        async with FakeServer(openai_upstream) as capture:
            pool = TargetPool(targets_file(*_targets(upstreams)))
            proxy = JudgeProxy(pool.get, pool.names)
            await proxy.start()
            try:
                for target in pool.names:
                    grant = proxy.grant(target, max_calls=1)
                    async with httpx.AsyncClient(
                        base_url=proxy.url,
                        headers={"Authorization": f"Bearer {grant.token}"},
                        timeout=30,
                    ) as client:
                        for name in TRANSPORT_FIELDS:
                            body = {
                                "model": target,
                                "messages": [{"role": "user", "content": "ping"}],
                                name: f"{capture.url}/v1",
                            }
                            reply = await client.post("/v1/chat/completions", json=body)
                            assert reply.status_code == 400, (target, name, reply.text)
                            error = reply.json()["error"]
                            assert error["param"] == name, (target, error)
                            assert f"'{name}'" in error["message"]
                        assert grant.used == 0, target
                        assert capture.count == 0, (target, capture.seen[0].path)
                        sent = sum(len(s.seen) for s in upstreams.servers.values())
                        assert sent == 0, target
                ok = proxy.grant("gpt", max_calls=1)
                reply = await httpx.AsyncClient(base_url=proxy.url).post(
                    "/v1/chat/completions",
                    headers={"Authorization": f"Bearer {ok.token}"},
                    json={"messages": [{"role": "user", "content": "ping"}], "seed": 7},
                )
                assert reply.status_code == 200, reply.text
                assert upstreams.seen("openai")[0].json()["seed"] == 7
            finally:
                await proxy.stop()
                await pool.aclose()
                for server in upstreams.servers.values():
                    await server.stop()

    asyncio.run(main())


GRADER = """
import json, os, urllib.error, urllib.request
from grader_sdk import TargetClient, script_grader

CAPTURE = os.environ["CAPTURE_URL"]


def post(body):
    request = urllib.request.Request(
        os.environ["AGENTV_TARGET_PROXY_URL"] + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + os.environ["AGENTV_TARGET_PROXY_TOKEN"],
                 "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


@script_grader
def grade(inp):
    tries = {}
    for field in ("api_base", "base_url"):
        status, body = post({"messages": [{"role": "user", "content": "steal"}], field: CAPTURE})
        tries[field] = [status, body["error"]["param"] if status != 200 else None]
    honest = TargetClient.from_env(timeout=60).invoke(inp.question)
    return {"score": 1.0, "reason": honest.raw_text, "details": {"tries": tries}}
"""


@needs_litellm
@pytest.mark.slow
def test_a_graders_redirect_fails_in_a_real_run(tmp_path: Path) -> None:
    """A run whose judge is a litellm target: the grader's redirected calls get 400 naming the
    field and the capture server sees nothing, while its honest call reaches the judge."""
    (tmp_path / "grader.py").write_text(textwrap.dedent(GRADER))
    grader = {"name": "thief", "command": [sys.executable, "grader.py"], "target": True}
    cases = [{"id": "c1", "input": "Is Paris in France?", "output": "Yes."}]
    with FakeOpenAI() as judge, FakeServer(openai_upstream) as capture:
        target = {
            "name": "judge",
            "kind": "litellm",
            "model": "openai/m",
            "base_url": judge.base_url,
            "api_key_env": "JUDGE_KEY",
            "max_retries": 0,
        }
        path = write_suite(tmp_path, graders=[grader], cases=cases, targets=[target])
        env = cli_env(JUDGE_KEY="sk-planted-0123456789", CAPTURE_URL=capture.url + "/v1")
        result = run_cli(str(path), "--out", str(tmp_path / "out"), "--no-cache", env=env)
        captured = capture.count
        keys = list(judge.keys)
    assert result.returncode == 0, result.stdout + result.stderr
    assert captured == 0
    assert keys == ["sk-planted-0123456789"]  # the honest call, at the configured endpoint
    results, _ = read_bundle(tmp_path / "out")
    (graded,) = results[0]["graders"]
    assert graded["details"]["tries"] == {
        "api_base": [400, "api_base"],
        "base_url": [400, "base_url"],
    }
    calls = [json.loads(line) for line in (tmp_path / "out" / "judge-calls.jsonl").open()]
    assert len(calls) == 1 and calls[0]["status"] == "ok"
