"""Per-attempt timeouts derived from latency (docs/targets.md, "Tails") against a loopback
OpenAI fake where a seeded share of attempts hangs."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from evalrun.targets import CompletionRequest, ManagedTarget
from evalrun.targets.providers.openai import OpenAITarget
from evalrun.targets.tails import FACTOR, FLOOR_S, MIN_SAMPLES, AttemptTimeouts
from tests.conftest import read_bundle
from tests.fault_helpers import run_suite, write_suite
from tests.targets_helpers import FakeServer, Reply, Seen, Sleeps, config, openai_reply

KEY = "sk-tails-0123456789"


class HangingJudge:
    """Answers after ``latency_s``; ``share`` of the attempts (seeded) never answer."""

    def __init__(self, share: float, latency_s: float = 0.005, seed: int = 36) -> None:
        self.share, self.latency_s = share, latency_s
        self.rng = random.Random(seed)
        self.hung = 0

    async def __call__(self, seen: Seen) -> Reply:
        if self.rng.random() < self.share:
            self.hung += 1
            await asyncio.Event().wait()
        await asyncio.sleep(self.latency_s)
        return openai_reply("ok")


def run_calls(judge: HangingJudge, calls: int, **values: Any) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with FakeServer(judge) as server:
            cfg = config(name="judge", model="gpt-4o-mini", base_url=server.url, **values)
            managed = ManagedTarget(OpenAITarget(cfg, KEY), cfg, sleep=Sleeps())
            requests = [CompletionRequest.from_prompt(f"q{i}") for i in range(calls)]
            # a guard against a hang, not a timing: an uncut attempt waits the 60 s default
            answers = await asyncio.wait_for(
                asyncio.gather(*(managed.complete(r) for r in requests)), 30
            )
            stats = managed.stats()
            await managed.aclose()
        assert [a.text for a in answers] == ["ok"] * calls  # every call answered in the end
        return stats

    return asyncio.run(main())


def test_hung_attempts_are_cut_and_their_retries_answer() -> None:
    judge = HangingJudge(share=0.05)
    stats = run_calls(judge, 400)
    assert judge.hung >= 10  # the hangs were there
    # each hang cut; on a loaded machine an answer slower than the 1 s floor is cut too, which
    # is the rule working, so the count of cuts is not pinned to the hangs (no test times)
    assert stats["attempt_timeouts"] >= judge.hung
    assert stats["calls"] == 400 + stats["attempt_timeouts"]  # one retry per cut attempt
    assert FLOOR_S <= stats["attempt_timeout_s"] < 60
    assert stats["latency_p99_ms"] is not None


def test_a_timeout_set_in_targets_yaml_stays_fixed() -> None:
    stats = run_calls(HangingJudge(share=0.0), 100, timeout=30)
    assert stats["attempt_timeout_s"] is None and stats["attempt_timeouts"] == 0


def test_the_timeout_is_derived_only_after_enough_answers_and_within_bounds() -> None:
    timeouts = AttemptTimeouts(ceiling_s=60.0)
    for _ in range(MIN_SAMPLES - 1):
        timeouts.observe(0.01)
    assert timeouts.current() is None  # too few answers to tell a tail
    timeouts.observe(0.01)
    assert timeouts.current() == FLOOR_S  # 3 x 10 ms is below the floor
    for _ in range(1000):
        timeouts.observe(2.0)
    assert timeouts.current() == 2.0 * FACTOR
    for _ in range(1000):
        timeouts.observe(100.0)
    assert timeouts.current() == 60.0  # never beyond the target's own timeout


GRADER = """\
from grader_sdk import GraderInput, TargetClient, script_grader


@script_grader
def grade(inp: GraderInput):
    reply = TargetClient.from_env().invoke(f"Is this right? {inp.output}", temperature=0)
    return {"score": 1.0 if reply.raw_text == "ok" else 0.0, "reason": reply.raw_text}
"""


@pytest.mark.slow
def test_a_run_whose_judge_hangs_now_and_then_scores_every_case(tmp_path: Path) -> None:
    judge = HangingJudge(share=0.05)
    (tmp_path / "grader.py").write_text(GRADER)
    grader = {
        "name": "judged",
        "command": [sys.executable, "grader.py"],
        "mode": "serve",
        "target": {"max_calls": 1},
        "timeout": 30,  # a guard, not a timing: an uncut attempt waits the 60 s default
    }
    cases = [{"id": f"c{i}", "input": f"q{i}", "output": f"a{i}"} for i in range(200)]
    with FakeServer(judge) as server:
        target = {"name": "judge", "kind": "openai", "model": "m", "base_url": f"{server.url}/v1"}
        path = write_suite(tmp_path, graders=[grader], cases=cases, targets=[target])
        result = run_suite(path, tmp_path / "out", "--workers", "8")
    assert result.returncode == 0, result.stdout + result.stderr
    results, summary = read_bundle(tmp_path / "out")
    assert summary["counts"]["passed"] == 200
    stats = summary["targets"]["judge"]
    assert judge.hung >= 3 and stats["attempt_timeouts"] == judge.hung
    assert stats["attempt_timeout_s"] >= FLOOR_S


class SlowJudge:
    """Answers after ``latency_s``, but a seeded ``share`` of attempts after ``slow_s``."""

    def __init__(self, share: float, slow_s: float, latency_s: float = 0.005) -> None:
        self.share, self.slow_s, self.latency_s = share, slow_s, latency_s
        self.rng = random.Random(36)

    async def __call__(self, seen: Seen) -> Reply:
        slow = self.rng.random() < self.share
        await asyncio.sleep(self.slow_s if slow else self.latency_s)
        return openai_reply("ok", prompt_tokens=1000, completion_tokens=100)


def test_hedged_copies_answer_slow_calls_and_are_charged() -> None:
    price = {"input": 1.0, "output": 10.0}  # per million tokens: 0.002 USD a call
    hedge = {"quantile": 0.95, "max_share": 0.2}

    async def main() -> tuple[list[float], dict[str, Any]]:
        async with FakeServer(SlowJudge(share=0.1, slow_s=0.5)) as server:
            # a fixed timeout: on a loaded machine a derived one (1 s floor) can cut a slow
            # answer, which is the tails rule, not hedging's (test above)
            cfg = config(
                name="judge", model="m", base_url=server.url, price=price, hedge=hedge, timeout=60
            )
            managed = ManagedTarget(OpenAITarget(cfg, KEY), cfg, sleep=Sleeps())
            requests = [CompletionRequest.from_prompt(f"q{i}") for i in range(300)]
            answers = await asyncio.gather(*(managed.complete(r) for r in requests))
            stats = managed.stats()
            await managed.aclose()
        assert [a.text for a in answers] == ["ok"] * 300
        return [a.cost_usd or 0.0 for a in answers], stats

    costs, stats = asyncio.run(main())
    assert stats["hedge_wins"] >= 5, stats  # slow calls answered by their copy
    assert stats["hedged"] <= 0.2 * stats["calls"]  # never more than the share asked for
    assert stats["attempt_timeouts"] == 0 and stats["calls"] == 300 + stats["hedged"]
    assert sum(costs) == pytest.approx(0.002 * stats["calls"])  # every copy sent is charged


def test_without_hedge_nothing_is_sent_twice() -> None:
    stats = run_calls(HangingJudge(share=0.0), 100)
    assert stats["hedged"] == 0 and stats["calls"] == 100
