"""ManagedTarget over real loopback HTTP: retries, timeouts, concurrency, cache, record/replay."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from evalrun.targets import (
    CompletionRequest,
    ConfigError,
    ManagedTarget,
    StoreOptions,
    TargetError,
    TargetPool,
    TargetTimeout,
)
from evalrun.targets.providers.openai import OpenAITarget
from evalrun.targets.stores.cache import ResponseCache
from evalrun.targets.stores.cassette import Cassette
from tests.targets_helpers import (
    FakeServer,
    Reply,
    Seen,
    Sleeps,
    config,
    openai_error,
    openai_reply,
    targets_file,
)

KEY = "sk-managed-0123456789"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def managed(url: str, sleeps: Sleeps | None = None, **values: Any) -> ManagedTarget:
    cfg = config(name="judge", model="gpt-4o-mini", base_url=url, **values)
    return ManagedTarget(OpenAITarget(cfg, KEY), cfg, sleep=sleeps or Sleeps())


def scripted(*replies: Reply) -> Any:
    """Answer the n-th request with the n-th reply (the last one repeats)."""
    queue = list(replies)

    def handler(seen: Seen) -> Reply:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return handler


PROMPT = CompletionRequest.from_prompt("ping")


def test_429_honours_retry_after_seconds() -> None:
    async def main() -> None:
        sleeps = Sleeps()
        limited = openai_error(429, "Rate limit reached", "requests", "rate_limit_exceeded")
        limited.headers["retry-after"] = "7"
        async with FakeServer(scripted(limited, openai_reply("pong"))) as server:
            target = managed(server.url, sleeps)
            response = await target.complete(PROMPT)
            await target.aclose()
        assert response.text == "pong" and server.count == 2
        assert sleeps.delays == [7.0]

    run(main())


@pytest.mark.slow
def test_429_honours_retry_after_http_date() -> None:
    async def main() -> None:
        sleeps = Sleeps()
        limited = openai_error(429, "slow down", "requests")
        limited.headers["retry-after"] = email.utils.formatdate(time.time() + 20, usegmt=True)
        async with FakeServer(scripted(limited, openai_reply("pong"))) as server:
            target = managed(server.url, sleeps)
            await target.complete(PROMPT)
            await target.aclose()
        (delay,) = sleeps.delays
        assert 15 <= delay <= 20

    run(main())


def test_500_then_success_backs_off_without_retry_after() -> None:
    async def main() -> None:
        sleeps = Sleeps()
        broken = openai_error(500, "The server had an error", "server_error")
        async with FakeServer(scripted(broken, broken, openai_reply("pong"))) as server:
            target = managed(server.url, sleeps, max_retries=3)
            response = await target.complete(PROMPT)
            await target.aclose()
        assert response.text == "pong" and server.count == 3
        assert len(sleeps.delays) == 2
        assert 0.25 <= sleeps.delays[0] <= 0.5 and 0.5 <= sleeps.delays[1] <= 1.0

    run(main())


def test_retries_exhausted_raise_the_provider_message() -> None:
    async def main() -> None:
        sleeps = Sleeps()
        busy = openai_error(503, "Engine is overloaded, try later", "server_error")
        async with FakeServer(scripted(busy)) as server:
            target = managed(server.url, sleeps, max_retries=2)
            with pytest.raises(TargetError) as info:
                await target.complete(PROMPT)
            await target.aclose()
        assert server.count == 3 and len(sleeps.delays) == 2
        error = info.value
        assert error.status == 503 and error.target == "judge"
        assert "Engine is overloaded, try later" in error.message
        assert "gave up after 3 attempts" in error.message

    run(main())


def test_4xx_is_not_retried() -> None:
    async def main() -> None:
        sleeps = Sleeps()
        async with FakeServer(scripted(openai_error(404, "model not found", "x"))) as server:
            target = managed(server.url, sleeps, max_retries=3)
            with pytest.raises(TargetError, match="model not found"):
                await target.complete(PROMPT)
            await target.aclose()
        assert server.count == 1 and sleeps.delays == []

    run(main())


def test_a_very_long_retry_after_fails_at_once() -> None:
    async def main() -> None:
        sleeps = Sleeps()
        quota = openai_error(429, "daily quota used up", "requests")
        quota.headers["retry-after"] = "86400"
        async with FakeServer(scripted(quota)) as server:
            target = managed(server.url, sleeps)
            with pytest.raises(TargetError, match="daily quota used up.*not retried"):
                await target.complete(PROMPT)
            await target.aclose()
        assert server.count == 1 and sleeps.delays == []

    run(main())


def test_stalled_server_times_out_then_retry_succeeds() -> None:
    async def main() -> None:
        sleeps = Sleeps()
        async with FakeServer(scripted(Reply(stall=True), openai_reply("pong"))) as server:
            target = managed(server.url, sleeps, timeout=0.3, max_retries=1)
            response = await target.complete(PROMPT)
            await target.aclose()
        assert response.text == "pong" and server.count == 2 and len(sleeps.delays) == 1

    run(main())


def test_timeouts_exhausted_raise_target_timeout() -> None:
    async def main() -> None:
        async with FakeServer(scripted(Reply(stall=True))) as server:
            target = managed(server.url, timeout=0.2, max_retries=1)
            with pytest.raises(TargetTimeout, match="no response within 0.2s"):
                await target.complete(PROMPT)
            await target.aclose()
        assert server.count == 2

    run(main())


def test_connection_closed_mid_response_is_retried() -> None:
    async def main() -> None:
        cut = openai_reply("never seen")
        cut.cut_after = 10
        async with FakeServer(scripted(cut, openai_reply("pong"))) as server:
            target = managed(server.url)
            response = await target.complete(PROMPT)
            await target.aclose()
        assert response.text == "pong" and server.count == 2

    run(main())


def test_connection_refused_is_retryable() -> None:
    async def main() -> None:
        server = FakeServer(scripted(openai_reply("x")))
        await server.start()
        url = server.url
        await server.stop()
        target = managed(url, max_retries=1)
        with pytest.raises(TargetError, match="connection failed") as info:
            await target.complete(PROMPT)
        await target.aclose()
        assert info.value.retryable

    run(main())


def test_concurrency_limit_holds_under_load() -> None:
    limit = 3

    async def main() -> None:
        gate = asyncio.Event()

        async def handler(seen: Seen) -> Reply:
            if server.active >= limit:
                gate.set()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(gate.wait(), 2.0)
            await asyncio.sleep(0.01)  # keep requests overlapping so a broken limit shows
            return openai_reply("ok")

        server = FakeServer(handler)
        async with server:
            target = managed(server.url, max_concurrency=limit)
            requests = [CompletionRequest.from_prompt(f"q{i}") for i in range(12)]
            responses = await asyncio.gather(*(target.complete(r) for r in requests))
            await target.aclose()
        assert [r.text for r in responses] == ["ok"] * 12
        assert server.count == 12
        assert server.max_active == limit

    run(main())


def test_concurrency_limit_is_shared_across_event_loops() -> None:
    """Three threads, each running its own event loop, draw from the same limit."""
    with FakeServer(lambda seen: _slow_ok()) as server:
        target = managed(server.url, max_concurrency=2)

        def burst() -> None:
            async def go() -> None:
                await asyncio.gather(
                    *(target.complete(CompletionRequest.from_prompt(f"{i}")) for i in range(6))
                )

            asyncio.run(go())

        threads = [threading.Thread(target=burst) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        asyncio.run(target.aclose())
    assert server.count == 18 and server.max_active == 2


async def _slow_ok() -> Reply:
    await asyncio.sleep(0.01)
    return openai_reply("ok")


# --- cache ----------------------------------------------------------------------------------

EVAL_LIKE = [
    CompletionRequest.from_prompt("What is the capital of France?"),
    CompletionRequest.from_prompt("Is this relevant?", system_prompt="You judge relevance."),
    CompletionRequest.from_prompt("Is this relevant?", system_prompt="You judge attribution."),
    CompletionRequest.from_prompt("Extract statements", response_format={"type": "json_object"}),
]


def _echo(seen: Seen) -> Reply:
    body = seen.json()
    return openai_reply(f"answer to {body['messages'][-1]['content']} #{len(body['messages'])}")


def _pool(server: FakeServer, stores: StoreOptions, **values: Any) -> TargetPool:
    file = targets_file(
        {
            "name": "judge",
            "kind": "openai",
            "model": "gpt-4o-mini",
            "base_url": server.url,
            "api_key_env": "JUDGE_KEY",
            "price": {"input": 0.15, "output": 0.6},
            **values,
        }
    )
    return TargetPool(file, stores, env={"JUDGE_KEY": KEY})


def test_cache_second_run_makes_no_upstream_calls(tmp_path: Path) -> None:
    async def sequence(server: FakeServer) -> list[Any]:
        pool = _pool(server, StoreOptions(cache_dir=tmp_path / "cache"))
        target = pool.get("judge")
        responses = [await target.complete(r) for r in EVAL_LIKE]
        responses += await asyncio.gather(*(target.complete(r) for r in EVAL_LIKE))
        await pool.aclose()
        return responses

    async def main() -> None:
        async with FakeServer(_echo) as server:
            first = await sequence(server)
            assert server.count == len(EVAL_LIKE)
            second = await sequence(server)
            assert server.count == len(EVAL_LIKE)
        assert [r.text for r in first] == [r.text for r in second]
        assert not any(r.cached for r in first[: len(EVAL_LIKE)])
        assert all(r.cached for r in second)
        assert first[0].cost_usd == pytest.approx((11 * 0.15 + 3 * 0.6) / 1e6)
        assert second[0].cost_usd == 0.0
        assert second[0].usage.input_tokens == 11

    run(main())
    assert (tmp_path / "cache" / "cache.sqlite3").is_file()


def test_cache_skips_temperature_above_zero(tmp_path: Path) -> None:
    async def main() -> None:
        async with FakeServer(_echo) as server:
            pool = _pool(server, StoreOptions(cache_dir=tmp_path))
            warm = CompletionRequest.from_prompt("tell a story", temperature=0.7)
            for _ in range(3):
                response = await pool.get("judge").complete(warm)
                assert not response.cached
            await pool.aclose()
            assert server.count == 3
            assert len(ResponseCache(tmp_path)) == 0

    run(main())


def test_cache_key_is_target_identity_not_name(tmp_path: Path) -> None:
    request = CompletionRequest.from_prompt("x")
    cache = ResponseCache(tmp_path)
    a = config(name="a", model="m", base_url="http://h/v1")
    same = config(name="b", model="m", base_url="http://h/v1")
    other_model = config(name="a", model="m2", base_url="http://h/v1")
    other_url = config(name="a", model="m", base_url="http://other/v1")
    from evalrun.targets.base import CompletionResponse

    cache.put(a, request, CompletionResponse(text="hello"))
    got = cache.get(same, request)
    assert got is not None and got.text == "hello"
    assert cache.get(other_model, request) is None
    assert cache.get(other_url, request) is None
    assert cache.get(a, CompletionRequest.from_prompt("x", max_tokens=5)) is None
    cache.close()


def test_mock_is_not_cached_by_default(tmp_path: Path) -> None:
    async def main() -> None:
        file = targets_file({"name": "m", "kind": "mock", "default": "one"})
        pool = TargetPool(file, StoreOptions(cache_dir=tmp_path), env={})
        response = await pool.get("m").complete(PROMPT)
        await pool.aclose()
        assert not response.cached and len(ResponseCache(tmp_path)) == 0

    run(main())


# --- record / replay ------------------------------------------------------------------------


def test_record_then_replay_without_server(tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"

    async def main() -> None:
        async with FakeServer(_echo) as server:
            pool = _pool(server, StoreOptions(record=cassette, cache_dir=tmp_path / "c"))
            recorded = [await pool.get("judge").complete(r) for r in EVAL_LIKE]
            # a cache hit is recorded too
            recorded.append(await pool.get("judge").complete(EVAL_LIKE[0]))
            await pool.aclose()
            assert server.count == len(EVAL_LIKE)
            url = server.url

        lines = cassette.read_text().splitlines()
        assert len(lines) == len(EVAL_LIKE) + 1
        assert KEY not in cassette.read_text()

        file = targets_file(
            {
                "name": "judge",
                "kind": "openai",
                "model": "gpt-4o-mini",
                "base_url": url,
                "api_key_env": "JUDGE_KEY",
            }
        )
        pool = TargetPool(file, StoreOptions(replay=cassette), env={})
        pool.check(["judge"])  # no key needed to replay
        replayed = [await pool.get("judge").complete(r) for r in EVAL_LIKE]
        assert [(r.text, r.usage, r.finish_reason) for r in replayed] == [
            (r.text, r.usage, r.finish_reason) for r in recorded[: len(EVAL_LIKE)]
        ]
        assert all(r.replayed for r in replayed)
        with pytest.raises(TargetError, match="no recorded response .* target 'judge'"):
            await pool.get("judge").complete(CompletionRequest.from_prompt("never asked"))
        await pool.aclose()

    run(main())


def test_replay_returns_repeated_answers_in_order(tmp_path: Path) -> None:
    from evalrun.targets.base import CompletionResponse

    path = tmp_path / "c.jsonl"
    cfg = config(name="j", model="m")
    request = CompletionRequest.from_prompt("roll a die", temperature=1.0)
    recorder = Cassette.for_recording(path)
    for text in ("3", "5"):
        recorder.put(cfg, request, CompletionResponse(text=text))
    recorder.close()
    with path.open("a") as handle:
        handle.write('{"key": "trunc')  # a crash mid-line while recording
    replay = Cassette.for_replay(path)
    texts = [replay.get(cfg, request).text for _ in range(3)]  # type: ignore[union-attr]
    assert texts == ["3", "5", "5"]


def test_replay_of_a_missing_cassette_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        Cassette.for_replay(tmp_path / "nope.jsonl")


def test_missing_key_is_a_config_error_naming_the_variable() -> None:
    file = targets_file(
        {"name": "g", "kind": "gemini", "model": "gemini-2.5-flash", "api_key_env": "GEMINI_KEY_X"}
    )
    pool = TargetPool(file, env={})
    with pytest.raises(ConfigError, match="GEMINI_KEY_X"):
        pool.check(["g"])
    with pytest.raises(ConfigError, match="GEMINI_KEY_X"):
        pool.get("g")


def test_cancelled_waiters_do_not_leak_slots() -> None:
    from evalrun.targets.limit import ConcurrencyLimit

    async def main() -> None:
        limit = ConcurrencyLimit(1)
        await limit.acquire()
        first = asyncio.ensure_future(limit.acquire())
        second = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0)
        first.cancel()
        limit.release()  # hands the slot past the cancelled waiter to the second one
        await asyncio.wait_for(second, 1)
        assert limit.active == 1 and first.cancelled()
        limit.release()
        assert limit.active == 0
        # a slot handed over in the same tick as a cancel is passed on, not lost
        await limit.acquire()
        third = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0)
        limit.release()
        third.cancel()
        await asyncio.gather(third, return_exceptions=True)
        assert limit.active == 0

    run(main())


def test_unexpected_provider_failure_becomes_a_redacted_target_error() -> None:
    class Broken(OpenAITarget):
        async def complete(self, request: CompletionRequest) -> Any:
            raise RuntimeError(f"bug while using {KEY}")

    cfg = config(name="judge", model="m")
    target = ManagedTarget(Broken(cfg, KEY), cfg)
    with pytest.raises(TargetError) as info:
        run(target.complete(PROMPT))
    assert "RuntimeError: bug while using ***" in info.value.message
    assert KEY not in info.value.message and not info.value.retryable


OPEN_AT_ONCE = """
import sys, time
from pathlib import Path
from evalrun.targets.stores.cache import ResponseCache
start = float(sys.argv[2])
while time.time() < start:
    pass
ResponseCache(Path(sys.argv[1])).close()
"""


@pytest.mark.slow
def test_processes_that_open_a_new_cache_at_once_all_get_it(tmp_path: Path) -> None:
    """Ray's workers and a sharded run's shards open one cache folder at the same moment;
    SQLite's switch of a new file to WAL does not wait for a lock, and must not fail a run."""
    import os
    import subprocess
    import sys
    import time

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    for attempt in range(3):
        folder = tmp_path / f"cache-{attempt}"
        start = time.time() + 1.5  # every process is up and waiting by then
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_AT_ONCE, str(folder), str(start)],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 8, "\n".join(errors)
