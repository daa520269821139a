"""Host mode (docs/grader-protocol.md, "Host mode"): the built-in graders of a run share a few
processes (``python -m graders._host``), each grading several cases at once, so a wide run holds
a few interpreters instead of one per grader per worker (docs/performance.md, "Memory at width").

Only evalrun's own graders are hosted: a host holds the tokens of the cases in flight in one
process, which is safe for code evalrun ships and not for a grader an eval file brings. What a
case keeps from stream mode: its own token (issued before its line, revoked after its answer),
its own stderr (carried in its answer), its own timeout. What it shares: a host that crashes
errors every case it held, and a host one of whose cases timed out takes no more cases and is
killed once the others have answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalrun.launcher.process import STDERR_TAIL, STDOUT_CAP, ProcessOutcome, answer_outcome
from evalrun.launcher.serve import (
    MODE_ENV,
    NOT_AN_ANSWER,
    SERVE,
    ExitStatus,
    ServeWorker,
    _exit_reason,
)
from evalrun.spec.kinds import KINDS

HOST_MODULE = "graders._host"
#: cases one host grades at once before a run is wide enough for another host
CASES_PER_HOST = 8
#: the built-in grader kinds: at most one case of each per worker in flight at once
BUILTIN_GRADERS = sum(1 for kind in KINDS.values() if kind.runs == "builtin")


def host_count(workers: int, cores: int | None = None) -> int:
    """Host processes for ``workers`` cases in flight: one per ``CASES_PER_HOST``, at most one
    per core (at least 2): the cap that holds however wide the run is."""
    cap = max(2, cores if cores is not None else os.cpu_count() or 1)
    return max(1, min(cap, math.ceil(workers / CASES_PER_HOST)))


def host_line(module: str, payload: dict[str, Any], env: Mapping[str, str]) -> tuple[str, bytes]:
    """(nonce, line) of one case for a host: a stream-mode line that names its grader."""
    nonce = secrets.token_hex(8)
    line = {"nonce": nonce, "grader": module, "payload": payload, "env": dict(env)}
    return nonce, json.dumps(line, ensure_ascii=False).encode() + b"\n"


class HostWorker(ServeWorker):
    """One host process and the cases in flight in it, each waiting for its own nonce."""

    def __init__(
        self, argv: list[str], cwd: Path, env: Mapping[str, str], exit_status: ExitStatus
    ) -> None:
        super().__init__(argv, cwd, env, STDOUT_CAP, exit_status)
        self._waiting: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        #: nonces of cases that timed out: an answer that comes late is dropped, not out of turn
        self._abandoned: set[str] = set()
        #: a case timed out: no more cases; killed when the last one in flight has answered
        self.retired = False

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    @property
    def open(self) -> bool:
        """Alive and taking cases."""
        return self.alive and not self.retired

    def _on_line(self, line: bytes) -> None:
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        code = doc.get("exit") if isinstance(doc, dict) else None
        if not isinstance(code, int) or isinstance(code, bool) or "result" not in doc:
            self._fail(NOT_AN_ANSWER)
            return
        nonce = doc.get("nonce")
        waiting = self._waiting.get(nonce) if isinstance(nonce, str) else None
        if nonce in self._abandoned:
            self._abandoned.discard(nonce)
        elif waiting is None or waiting.done():
            self._fail("answered with a nonce of no case in flight")
        else:
            waiting.set_result(doc)

    def _fail(self, why: str) -> None:
        if self._broken is None:
            self._broken = why
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_result(None)
        self._signal(signal.SIGKILL)

    async def run_host_case(self, nonce: str, line: bytes, timeout: float) -> ProcessOutcome:
        """Send one case line; wait for its answer, the host's exit, or the case's timeout."""
        assert self.transport is not None and self._exited is not None
        started = time.perf_counter()
        self.cases += 1
        answer: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        self._waiting[nonce] = answer
        stdin = self.transport.get_pipe_transport(0)
        with contextlib.suppress(OSError, RuntimeError, AttributeError):
            stdin.write(line)  # type: ignore[union-attr]
        try:
            watched: set[asyncio.Future[Any]] = {answer, self._exited}
            done, _ = await asyncio.wait(
                watched, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            self._waiting.pop(nonce, None)
            self.retired = True
            await self._settle()
            raise
        self._waiting.pop(nonce, None)
        if answer.done() and answer.result() is not None:
            doc: dict[str, Any] = answer.result()  # type: ignore[assignment]
            outcome = answer_outcome(doc, self._stderr_of(doc), started)
        elif not done:
            self.retired = True
            self._abandoned.add(nonce)
            outcome = self._outcome(started, timed_out=True)
        elif self._broken is not None:
            outcome = self._outcome(started, failure=f"grader host {self._broken} and was killed")
        else:
            code = self.exit_status(self.transport.get_returncode())
            outcome = self._outcome(started, exit_code=code, failure=_exit_reason(code))
        await self._settle()
        return outcome

    async def _settle(self) -> None:
        """Kill a retired or broken host once no case is in flight in it."""
        if (self.retired or not self.alive) and not self._waiting:
            await self.kill()

    @staticmethod
    def _stderr_of(doc: dict[str, Any]) -> str:
        """The case's own stderr, carried in its answer (the host's is shared by its cases)."""
        stderr = doc.get("stderr")
        return stderr[-STDERR_TAIL:].strip() if isinstance(stderr, str) else ""


class HostPool:
    """The hosts of one environment and sandbox: at most ``hosts`` processes, and ``workers``
    cases in flight per built-in grader they serve (a case runs its graders side by side), spread
    evenly; a case goes to the open host with the fewest cases in flight."""

    def __init__(
        self,
        command: Callable[[int], list[str]],
        cwd: Path,
        env: Mapping[str, str],
        workers: int,
        exit_status: ExitStatus,
    ) -> None:
        self.workers = max(1, workers)
        self.hosts = host_count(self.workers)
        #: a host's threads: room for every built-in grader's share of the run's width
        self.threads = math.ceil(self.workers / self.hosts) * BUILTIN_GRADERS
        self.command = command
        self.cwd = cwd
        self.env = {**env, MODE_ENV: SERVE}
        self.exit_status = exit_status
        self._workers: list[HostWorker] = []
        self._retired: list[HostWorker] = []
        self._modules: set[str] = set()
        self._free = asyncio.Semaphore(0)  # ``workers`` more for each grader first seen
        self._starting = asyncio.Lock()
        self.started = 0

    @property
    def slots(self) -> int:
        """Cases in flight per host: the run's width for each grader seen, over the hosts."""
        return math.ceil(self.workers * max(1, len(self._modules)) / self.hosts)

    async def run(
        self, module: str, payload: dict[str, Any], env: Mapping[str, str], timeout: float
    ) -> ProcessOutcome:
        if module not in self._modules:
            self._modules.add(module)
            for _ in range(self.workers):
                self._free.release()
        async with self._free:
            host = await self._host()
            if isinstance(host, str):
                return ProcessOutcome(None, b"", "", 0.0, spawn_error=host)
            nonce, line = host_line(module, payload, env)
            return await host.run_host_case(nonce, line, timeout)

    async def _host(self) -> HostWorker | str:
        """The open host with room and the fewest cases in flight, or a new one while the hosts
        are fewer than the cap and each has a case in flight; or why it could not start."""
        async with self._starting:
            self._retired += [w for w in self._workers if not w.open]
            self._workers = [w for w in self._workers if w.open]
            room = [w for w in self._workers if w.in_flight < self.slots]
            idle = any(w.in_flight == 0 for w in room)
            if room and (idle or len(self._workers) >= self.hosts):
                return min(room, key=lambda w: w.in_flight)
            worker = HostWorker(self.command(self.threads), self.cwd, self.env, self.exit_status)
            self.started += 1
            failure = await worker.start()
            if failure is not None:
                return failure
            self._workers.append(worker)
            return worker

    async def close(self) -> None:
        workers, self._workers = [*self._workers, *self._retired], []
        self._retired = []
        await asyncio.gather(*(w.close() for w in workers), return_exceptions=True)


def host_argv(slots: int) -> list[str]:
    return [sys.executable, "-m", HOST_MODULE, str(slots)]
