"""The ``openai`` npm package (Node 20) against the proxy, over the same real providers and wire
fakes as the Python SDK tests: plain, json_schema, tools round trip on each provider kind,
streaming, models list/retrieve, bad token and spent budget with the SDK's default retries.

The package is installed with ``npm install`` into ``tests/js/node_modules`` (git-ignored,
reused when present, pinned by ``tests/js/package-lock.json``). Without node or npm, or when the
registry cannot be reached, the test skips and says why."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.proxy_helpers import run
from tests.wire_fakes import ARGS, FINAL_TEXT, VERDICT, proxy_over_fakes

JS = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def openai_npm() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node or npm is not installed")
    if not (JS / "node_modules" / "openai" / "package.json").is_file():
        try:
            subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=JS,
                check=True,
                capture_output=True,
                text=True,
                timeout=300,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            pytest.skip(f"npm could not install the openai package: {detail.strip()[:300]}")
    return JS / "openai_client.mjs"


def test_the_openai_npm_package_works_through_the_proxy(openai_npm: Path) -> None:
    async def scenario() -> dict:
        async with proxy_over_fakes() as (proxy, upstreams):
            grants = {
                "plain": proxy.grant("gpt", max_calls=2, allowed=["gpt", "claude"]),
                "tools": proxy.grant("gpt", max_calls=6),
                "stream": proxy.grant("gpt", max_calls=1),
                "budget": proxy.grant("gpt", max_calls=1),
            }
            argument = {"url": proxy.url, "tokens": {k: g.token for k, g in grants.items()}}
            process = await asyncio.create_subprocess_exec(
                "node",
                str(openai_npm),
                json.dumps(argument),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
            assert process.returncode == 0, stderr.decode()
            assert {k: g.used for k, g in grants.items()} == {
                "plain": 2,
                "tools": 6,
                "stream": 1,
                "budget": 1,
            }
            sent = upstreams.seen("openai")[1].json()
            assert sent["response_format"]["json_schema"]["strict"] is True
            return json.loads(stdout)

    out = run(scenario)
    assert out["plain"] == "pong"
    assert out["jsonSchema"] == VERDICT
    assert out["models"] == ["claude", "gpt"]
    assert out["retrieved"] == {"id": "claude", "object": "model"}
    for model in ("gpt", "claude", "gem"):
        assert out["tools"][model] == {
            "finish": "tool_calls",
            "name": "get_weather",
            "args": ARGS,
            "answer": FINAL_TEXT,
        }, model
    assert out["noTools"]["badRequest"] and out["noTools"]["code"] == "tools_unsupported"
    assert "target 'mock' (mock) cannot call tools" in out["noTools"]["message"]
    assert out["stream"] == {"text": "pong", "usage": 17, "finish": "stop"}
    assert out["badToken"]["authentication"] and out["badToken"]["requests"] == 1
    budget = out["budget"]
    assert budget["rateLimit"] and budget["status"] == 429
    assert budget["requests"] == 2, "one call that worked, then exactly one refused request"
    assert (budget["shouldRetry"], budget["retryAfter"]) == ("false", None)
