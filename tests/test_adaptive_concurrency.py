"""The adaptive concurrency limit (docs/targets.md, "Concurrency") against a loopback OpenAI fake
that enforces a rate limit: a call beyond its allowance in flight gets 429 with Retry-After."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from evalrun.targets import CompletionRequest, ManagedTarget
from evalrun.targets.config import CONCURRENCY_CEILING, DEFAULT_CONCURRENCY
from evalrun.targets.providers.openai import OpenAITarget
from tests.targets_helpers import FakeServer, Reply, Seen, config, openai_error, openai_reply

KEY = "sk-adaptive-0123456789"


class RateLimitedJudge:
    """Admits ``allowance`` calls in flight, answers each after ``latency_s``, and answers
    429 (Retry-After in ms) to any call beyond the allowance."""

    def __init__(self, allowance: int, latency_s: float, retry_after_ms: int = 50) -> None:
        self.allowance = allowance
        self.latency_s = latency_s
        self.retry_after_ms = retry_after_ms
        self.in_flight = 0
        self.peak_in_flight = 0
        self.rejected = 0
        self.rejected_at: list[float] = []
        self.arrived_at: list[float] = []

    async def __call__(self, seen: Seen) -> Reply:
        self.arrived_at.append(time.monotonic())
        if self.in_flight >= self.allowance:
            self.rejected += 1
            self.rejected_at.append(time.monotonic())
            reply = openai_error(429, "Rate limit reached", "requests", "rate_limit_exceeded")
            reply.headers["retry-after-ms"] = str(self.retry_after_ms)
            return reply
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency_s)
        finally:
            self.in_flight -= 1
        return openai_reply('{"relevant": true}')


def target(url: str, **values: Any) -> ManagedTarget:
    cfg = config(name="judge", model="gpt-4o-mini", base_url=url, **values)
    return ManagedTarget(OpenAITarget(cfg, KEY), cfg)


async def burst(managed: ManagedTarget, calls: int) -> list[str]:
    requests = [CompletionRequest.from_prompt(f"q{i}") for i in range(calls)]
    responses = await asyncio.gather(*(managed.complete(r) for r in requests))
    return [r.text for r in responses]


def test_an_unconfigured_target_grows_to_the_allowance_without_a_429_storm() -> None:
    judge = RateLimitedJudge(allowance=24, latency_s=0.1)

    async def main() -> dict[str, Any]:
        async with FakeServer(judge) as server:
            managed = target(server.url)
            texts = await burst(managed, 600)
            stats = managed.stats()
            await managed.aclose()
        assert texts == ['{"relevant": true}'] * 600  # every call got through in the end
        return stats

    stats = asyncio.run(main())
    assert stats["concurrency_start"] == DEFAULT_CONCURRENCY
    assert stats["max_concurrency"] == CONCURRENCY_CEILING
    assert stats["concurrency_reached"] > DEFAULT_CONCURRENCY  # it grew
    assert judge.peak_in_flight >= 16  # and used most of what the provider allows
    assert stats["rate_limited"] == judge.rejected  # the summary counts every 429 it saw
    assert judge.rejected <= 120, judge.rejected  # at most 1 in 5 calls; no storm
    assert stats["concurrency_limit_end"] <= CONCURRENCY_CEILING


def test_a_configured_max_concurrency_is_never_exceeded() -> None:
    judge = RateLimitedJudge(allowance=1000, latency_s=0.01)

    async def main() -> dict[str, Any]:
        async with FakeServer(judge) as server:
            managed = target(server.url, max_concurrency=6)
            await burst(managed, 200)
            stats = managed.stats()
            await managed.aclose()
            assert server.max_active <= 6
        return stats

    stats = asyncio.run(main())
    assert judge.peak_in_flight == 6
    assert stats["concurrency_limit_peak"] == stats["max_concurrency"] == 6
    assert stats["rate_limited"] == 0


def test_a_429_halves_the_limit_and_holds_new_calls_for_retry_after() -> None:
    judge = RateLimitedJudge(allowance=0, latency_s=0.0, retry_after_ms=300)

    async def main() -> dict[str, Any]:
        async with FakeServer(judge) as server:
            managed = target(server.url, max_concurrency=16)
            first = asyncio.ensure_future(managed.complete(CompletionRequest.from_prompt("a")))
            while managed.stats()["rate_limited"] == 0:
                await asyncio.sleep(0.002)
            judge.allowance = 100  # the provider recovers at once; the limit must still wait
            second = asyncio.ensure_future(managed.complete(CompletionRequest.from_prompt("b")))
            await asyncio.gather(first, second)
            stats = managed.stats()
            await managed.aclose()
        return stats

    stats = asyncio.run(main())
    assert judge.rejected == stats["rate_limited"] == 1
    assert stats["concurrency_limit_end"] == 8  # halved from 16
    rejected = judge.rejected_at[0]
    later = judge.arrived_at[1:]
    assert len(later) == 2  # the retry, and the call started after the 429
    assert all(t >= rejected + 0.29 for t in later), [round(t - rejected, 3) for t in later]
