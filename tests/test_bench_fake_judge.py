"""The benches' loopback judge (bench/fake_judge.py): the verdicts it reads from marked passages
and its seeded faults, which bench_peers.py's rows rely on (docs/performance.md, "Against the
peers"). In-process, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from typing import Any

import httpx

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from fake_judge import Faults, Judge  # noqa: E402


def marked(flags: list[bool]) -> dict[str, Any]:
    passages = "\n".join(f"{i}. text {'[[rel]]' if f else '[[irr]]'}" for i, f in enumerate(flags))
    return {"model": "m", "messages": [{"role": "user", "content": passages}]}


async def exchange(judge: Judge, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    server = await asyncio.start_server(judge.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    limits = httpx.Limits(max_connections=len(bodies))
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=60)
    async with server, client:
        return list(
            await asyncio.gather(*(client.post("/v1/chat/completions", json=b) for b in bodies))
        )


def test_each_tools_keys_carry_the_marked_verdicts() -> None:
    rng = random.Random(5)
    lists = [[rng.random() < 0.5 for _ in range(rng.randint(1, 4))] for _ in range(20)]
    replies = asyncio.run(exchange(Judge(0.0), [marked(flags) for flags in lists]))
    for flags, reply in zip(lists, replies, strict=True):
        verdict = json.loads(reply.json()["choices"][0]["message"]["content"])
        assert verdict["relevant"] is flags[0] and verdict["verdict"] == int(flags[0])
        assert [v["verdict"] for v in verdict["verdicts"]] == ["yes" if f else "no" for f in flags]


def test_an_unmarked_request_gets_the_plain_pass() -> None:
    (reply,) = asyncio.run(exchange(Judge(0.0), [{"messages": [{"content": "rate this"}]}]))
    assert json.loads(reply.json()["choices"][0]["message"]["content"])["pass"] is True


def test_faults_come_in_their_shares_and_repeat_after_a_reset() -> None:
    """Drawn per request by the judge itself (no HTTP needed to see them)."""
    judge = Judge(0.0, Faults(hang_share=0.1, hang_s=0.01, throttle_share=0.2, seed=7))
    body = json.dumps(marked([True])).encode()

    async def statuses() -> list[bytes]:
        answers = [judge._answer(b"/v1/chat/completions", body) for _ in range(300)]
        return [reply.split(b" ", 2)[1] for reply in await asyncio.gather(*answers)]

    first = asyncio.run(statuses())
    hung, throttled = judge.hung, judge.throttled
    asyncio.run(judge._answer(b"/reset", b""))
    second = asyncio.run(statuses())
    assert first.count(b"429") == throttled and 40 <= throttled <= 80
    assert 15 <= hung <= 45  # held, then answered like the rest
    assert set(first) == {b"200", b"429"}
    assert first == second and judge.hung == hung  # the same seed, the same faults
