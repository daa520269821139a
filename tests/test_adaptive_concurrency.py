"""The adaptive concurrency limit (docs/targets.md, "Concurrency") against a loopback OpenAI fake
that enforces a rate limit: a call beyond its allowance in flight gets 429 with Retry-After."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from evalrun.targets import CompletionRequest, ManagedTarget
from evalrun.targets.config import CONCURRENCY_CEILING, DEFAULT_CONCURRENCY
from evalrun.targets.limit import ConcurrencyLimit
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


@pytest.mark.slow
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


class NoisyJudge:
    """Answers after ``latency_s``; a seeded share of calls gets 429 (Retry-After in ms), either
    at random whatever the load (``noise``) or, once ``allowance`` calls are in flight, with a
    chance that rises by ``slope`` per call in flight beyond it. It notes the client's limit at
    every arrival (``watch``), so a test sees every value the limit took."""

    def __init__(
        self,
        *,
        noise: float = 0.0,
        allowance: int = 10**6,
        slope: float = 0.0,
        latency_s: float = 0.02,
        seed: int = 36,
    ) -> None:
        self.noise, self.allowance, self.slope, self.latency_s = noise, allowance, slope, latency_s
        self.rng = random.Random(seed)
        self.in_flight = 0
        self.rejected = 0
        self.limits: list[int] = []
        self.watch: Callable[[], int] = lambda: 0

    async def __call__(self, seen: Seen) -> Reply:
        self.limits.append(self.watch())
        beyond = self.in_flight + 1 - self.allowance
        chance = self.noise + (self.slope * beyond if beyond > 0 else 0.0)
        if self.rng.random() < chance:
            self.rejected += 1
            await asyncio.sleep(self.latency_s / 4)
            reply = openai_error(429, "Rate limit reached", "requests", "rate_limit_exceeded")
            reply.headers["retry-after-ms"] = "5"
            return reply
        self.in_flight += 1
        try:
            await asyncio.sleep(self.latency_s)
        finally:
            self.in_flight -= 1
        return openai_reply('{"relevant": true}')


def watched_run(judge: NoisyJudge, calls: int) -> dict[str, Any]:
    """``timeout`` is set, so no attempt is cut by a timeout derived from latency (docs/targets.md,
    "Tails"): on a loaded machine the fake, in this loop, can hold an attempt past the 1 s floor
    and a 429 it sent would never be read, while these tests count every 429 the client sees."""

    async def main() -> dict[str, Any]:
        async with FakeServer(judge) as server:
            managed = target(server.url, timeout=60)
            assert isinstance(managed._limit, ConcurrencyLimit)
            judge.watch = lambda: managed._limit.limit  # type: ignore[union-attr]
            texts = await burst(managed, calls)
            stats = managed.stats()
            await managed.aclose()
        assert texts == ['{"relevant": true}'] * calls  # every call got through in the end
        return stats

    return asyncio.run(main())


def test_random_429s_independent_of_load_do_not_cut_the_limit() -> None:
    judge = NoisyJudge(noise=0.2)
    stats = watched_run(judge, 800)
    assert judge.rejected >= 100  # the noise was there (1 in 5 of about 1,000 attempts)
    assert stats["rate_limited"] == judge.rejected
    assert min(judge.limits) >= DEFAULT_CONCURRENCY // 2, sorted(judge.limits)[:10]
    assert stats["concurrency_limit_end"] > DEFAULT_CONCURRENCY  # it still grew
    moves = [d["to"] for d in stats["concurrency_decisions"]]
    assert stats["concurrency_changes"] == len(moves)  # none fell out of the summary's list
    assert stats["concurrency_limit_low"] == min([stats["concurrency_start"], *moves])
    assert stats["concurrency_limit_low"] >= DEFAULT_CONCURRENCY // 2  # issue #36's bar
    assert not any(
        d["reason"].startswith("load") and d["to"] < DEFAULT_CONCURRENCY // 2
        for d in stats["concurrency_decisions"]
    )


@pytest.mark.slow
def test_429s_that_rise_above_an_allowance_settle_the_limit_near_it() -> None:
    allowance = 16
    judge = NoisyJudge(allowance=allowance, slope=0.25)
    stats = watched_run(judge, 1500)
    settled = judge.limits[len(judge.limits) // 2 :]
    assert min(settled) >= allowance * 0.6, sorted(settled)[:10]
    assert max(settled) <= allowance * 1.4, sorted(settled)[-10:]
    assert abs(statistics.mean(settled) - allowance) <= allowance * 0.2, statistics.mean(settled)
    loads = [d for d in stats["concurrency_decisions"] if d["reason"].startswith("load")]
    assert loads and all(d["rate_429"] > d["reference_429"] for d in loads)


def test_retry_after_holds_only_the_call_that_got_it() -> None:
    """A 429 asking for 100 s makes its own call wait 100 s before the retry (the injected
    sleep), while a call started meanwhile goes straight through."""
    answered = asyncio.Event()
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        await answered.wait()

    async def handler(seen: Seen) -> Reply:
        if seen.json()["messages"][0]["content"] == "a" and not delays:
            reply = openai_error(429, "Rate limit reached", "requests", "rate_limit_exceeded")
            reply.headers["retry-after"] = "100"
            return reply
        return openai_reply("ok")

    async def main() -> None:
        async with FakeServer(handler) as server:
            cfg = config(name="judge", model="gpt-4o-mini", base_url=server.url)
            managed = ManagedTarget(OpenAITarget(cfg, KEY), cfg, sleep=sleep)
            first = asyncio.ensure_future(managed.complete(CompletionRequest.from_prompt("a")))
            while not delays:
                await asyncio.sleep(0.002)
            # a guard against a hang, not a timing: a held call would wait 100 s
            second = await asyncio.wait_for(
                managed.complete(CompletionRequest.from_prompt("b")), 20
            )
            assert not first.done()  # still waiting out its own Retry-After
            answered.set()
            assert (await first).text == second.text == "ok"
            await managed.aclose()

    asyncio.run(main())
    assert delays == [100.0]
