"""The cap on the processes of an eval's own graders (docs/performance.md, "Process cap"):
real grader processes, counted while they live, through the pools a run uses."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from evalrun.launcher.cap import ProcessCap, default_max_processes
from evalrun.launcher.pools import GraderPools
from evalrun.launcher.process import run_process
from evalrun.launcher.sandbox import Sandbox
from evalrun.launcher.serve import case_line

#: Serves case lines (or grades one payload with ``once``); each case counts the live processes
#: of this script (argv[1] is its own path, unique to the test) and holds a while, so cases
#: overlap.
COUNTING_GRADER = """\
import json, os, sys, time

def live():
    me = sys.argv[0].encode()
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\\0")
            except OSError:
                continue
            n += len(args) > 1 and args[1] == me
    return n

def grade():
    seen = live()
    time.sleep(0.03)
    return {"score": 1.0, "details": {"live": max(seen, live())}}

if sys.argv[1:] == ["once"]:
    json.load(sys.stdin)
    print(json.dumps(grade()))
else:
    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps({"nonce": case["nonce"], "exit": 0, "result": grade()}), flush=True)
"""

NO_SANDBOX = Sandbox("none")


def _lived(outcome_stdout: bytes) -> int:
    return int(json.loads(outcome_stdout)["details"]["live"])


async def _mixed_run(folder: Path, limit: int | None, workers: int, each: int) -> list[int]:
    """``each`` cases for two served graders and ``each`` one-process-per-case runs, all at once,
    as a run of ``workers`` cases in flight would send them; the live counts the cases saw."""
    script = str(folder / "count.py")
    pools = GraderPools(workers, limit)
    env = dict(os.environ)

    async def served(name: str, i: int) -> bytes:
        pool = pools.pool(
            [sys.executable, script, name], folder, [], lambda: env, sandbox=NO_SANDBOX, route=None
        )
        outcome = await pool.run(case_line({"case_id": f"{name}{i}"}, {}), 30)
        return outcome.stdout

    async def one_shot(i: int) -> bytes:
        async with pools.one_shot.place():
            outcome = await run_process(
                [sys.executable, script, "once"], b"{}", cwd=folder, env=env, timeout=30
            )
        return outcome.stdout

    try:
        answers = await asyncio.gather(
            *(served("a", i) for i in range(each)),
            *(served("b", i) for i in range(each)),
            *(one_shot(i) for i in range(each)),
        )
    finally:
        await pools.close()
    assert pools.cap.live == 0, "every place is given back once its process has exited"
    return [_lived(a) for a in answers]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "count.py").write_text(COUNTING_GRADER)
    return tmp_path


def test_two_served_graders_and_per_case_runs_stay_under_the_cap(folder: Path) -> None:
    """Eight cases in flight for each of three graders would be up to 24 processes; with a cap
    of 3 no case ever sees more than 3 alive, and every case is answered."""
    seen = asyncio.run(_mixed_run(folder, 3, 8, 8))
    assert len(seen) == 24
    assert max(seen) <= 3, seen
    assert max(seen) >= 2, "the cases overlapped, so the cap was what held them"


def test_without_a_tight_cap_the_same_run_holds_more_processes(folder: Path) -> None:
    """The control: the count above is not bounded by something else."""
    seen = asyncio.run(_mixed_run(folder, 64, 8, 8))
    assert max(seen) > 3, seen


def test_an_idle_worker_of_a_grader_over_its_share_makes_room_for_another() -> None:
    """Grader A holds the whole cap with idle workers; grader B, below its share, gets a place
    by having one of A's idle workers ended, instead of waiting for ever."""

    class Worker:
        def __init__(self, owner: Holder) -> None:
            self.owner = owner

        async def kill(self) -> None:
            self.owner.idle.remove(self)
            self.owner.live -= 1
            cap.release()

    class Holder:
        def __init__(self) -> None:
            self.live = 0
            self.idle: list[Worker] = []

        def give_up_idle(self) -> Worker | None:
            return self.idle[0] if self.idle else None

    cap = ProcessCap(2)
    a, b = Holder(), Holder()
    cap.join(a)
    cap.join(b)

    async def scenario() -> None:
        for _ in range(2):
            assert await cap.take(a, lambda: None) is None
            a.live += 1
            a.idle.append(Worker(a))
        assert await asyncio.wait_for(cap.take(b, lambda: None), 5) is None
        assert (a.live, cap.live) == (1, 2)
        b.live += 1
        # A is now below its share (1 of 2) but B has no idle worker: A waits until B's
        # process ends, and is let in then
        waiting = asyncio.ensure_future(cap.take(a, lambda: None))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        b.live -= 1
        cap.release()
        assert await asyncio.wait_for(waiting, 5) is None
        assert cap.most == 2

    asyncio.run(scenario())


def test_the_default_cap_does_not_follow_workers() -> None:
    assert default_max_processes(2) == 64
    assert default_max_processes(32) == 256
    assert GraderPools(500).cap.limit == default_max_processes()
    assert GraderPools(1, 7).cap.limit == 7


def test_a_start_that_fails_or_is_cancelled_gives_its_place_back(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that could not start (a missing program) or whose start was cancelled (Ctrl-C)
    has no exit to give its place back: the pool gives it back itself."""
    from evalrun.launcher import serve

    async def scenario() -> None:
        pools = GraderPools(2, 1)
        missing = pools.pool(
            [str(folder / "no-such-grader")], folder, [], dict, sandbox=NO_SANDBOX, route=None
        )
        outcome = await missing.run(case_line({"case_id": "c"}, {}), 30)
        assert outcome.spawn_error and pools.cap.live == 0

        async def never(self: serve.ServeWorker) -> str | None:
            await asyncio.sleep(600)
            return None

        monkeypatch.setattr(serve.ServeWorker, "start", never)
        stuck = pools.pool(
            [sys.executable, str(folder / "count.py")], folder, [], dict, sandbox=NO_SANDBOX,
            route=None,
        )  # fmt: skip
        task = asyncio.ensure_future(stuck.run(case_line({"case_id": "c"}, {}), 30))
        await asyncio.sleep(0.05)
        assert pools.cap.live == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pools.cap.live == 0
        await pools.close()

    asyncio.run(scenario())
