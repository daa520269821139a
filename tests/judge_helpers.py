"""Helpers for the judge-grader tests: a scripted in-process client, and a grader run as a real
subprocess against the real judge proxy (loopback HTTP) with a scripted mock judge."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrun.judgecall import JudgeCall
from grader_sdk import GraderInput, InvokeResult

ROOT = Path(__file__).resolve().parent.parent


class ScriptedClient:
    """Stands in for TargetClient: answers each request with ``reply(request)`` or the next
    reply of a list, and records what was sent."""

    def __init__(self, reply: Callable[[dict[str, Any]], str] | Iterable[str]) -> None:
        self._fn = reply if callable(reply) else None
        self._queue = [] if callable(reply) else list(reply)
        self.batches: list[list[dict[str, Any]]] = []

    def invoke_batch(self, requests: list[dict[str, Any]]) -> list[InvokeResult]:
        self.batches.append(list(requests))
        out = []
        for request in requests:
            text = self._fn(request) if self._fn else self._queue.pop(0)
            out.append(InvokeResult(raw_text=text))
        return out

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [r for batch in self.batches for r in batch]


def grader_input(**payload: Any) -> GraderInput:
    payload.setdefault("input", "What is the capital of France?")
    return GraderInput.from_payload(payload)


@dataclass
class GraderRun:
    exit_code: int
    stdout: str
    stderr: str
    calls: int
    records: list[JudgeCall] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def run_with_proxy(
    module: str,
    payload: dict[str, Any],
    rules: list[dict[str, Any]],
    *,
    default: str = "",
    max_calls: int = 10,
) -> GraderRun:
    """Start the real JudgeProxy with a mock judge, grant a token, run ``python -m module``."""
    from evalrun.targets.config import TargetConfig
    from evalrun.targets.providers.mock import MockTarget
    from proxy import JudgeProxy

    judge = MockTarget(TargetConfig(name="judge", kind="mock", rules=rules, default=default))

    async def go() -> GraderRun:
        proxy = JudgeProxy(lambda name: judge, ["judge"])
        async with proxy:
            grant = proxy.grant("judge", max_calls, grader=module)
            env = {k: v for k, v in os.environ.items() if not k.endswith("_TOKEN")}
            env.update(
                AGENTV_TARGET_PROXY_URL=proxy.url,
                AGENTV_TARGET_PROXY_TOKEN=grant.token,
                PYTHONPATH=str(ROOT),
            )
            body = {
                "protocol": "evalrun.grader/1",
                "grader": {"name": module, "max_calls": max_calls},
            }
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                cwd=str(ROOT),
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(
                proc.communicate(json.dumps({**body, **payload}).encode()), timeout=60
            )
            proxy.revoke(grant)
            return GraderRun(
                proc.returncode or 0, out.decode(), err.decode(), grant.used, list(grant.records)
            )

    return asyncio.run(go())
