"""Stream mode of the grader protocol (docs/grader-protocol.md, "Stream mode"): long-lived grader
processes that read one case per stdin line and answer one result per stdout line.

Every promise of the per-process mode holds per case: the proxy token travels in the case's
line (issued before it, revoked by the launcher after its answer), a timeout or a crash kills
only the worker that held the case, stderr written while a case is in flight belongs to it, and
the worker's environment is scrubbed like a per-process grader's. Each case line carries a fresh
nonce that its answer must echo: a stray stdout line can error the case in flight, never shift
an answer onto another case.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalrun.launcher.cap import ProcessCap
from evalrun.launcher.process import (
    KILL_GRACE_S,
    STDERR_TAIL,
    STDOUT_CAP,
    ProcessOutcome,
    answer_outcome,
)

#: Why a worker's stdout line is no answer at all (``grader check`` reads it as "does not serve").
NOT_AN_ANSWER = "answered with a line that is not {nonce, exit, result}"
#: The variable that tells a grader (the SDKs' ``script_grader``) to serve lines.
MODE_ENV = "EVALRUN_GRADER_MODE"
SERVE = "serve"
#: How long an exiting worker's last output may take to arrive after its exit.
DRAIN_AFTER_EXIT_S = 2.0
CLOSE_GRACE_S = 1.0


#: maps a worker's raw exit status (a sandbox reports a signal as 128+N)
ExitStatus = Callable[[int | None], int | None]


@dataclass(frozen=True)
class CaseLine:
    """One case as a stdin line, and the nonce its answer line must echo."""

    nonce: str
    data: bytes


def case_line(payload: dict[str, Any], env: Mapping[str, str]) -> CaseLine:
    """The payload, the variables that hold for this case only, and a nonce of its own
    (docs/grader-protocol.md, "Stream mode")."""
    nonce = secrets.token_hex(8)
    line = {"nonce": nonce, "payload": payload, "env": dict(env)}
    return CaseLine(nonce, json.dumps(line, ensure_ascii=False).encode() + b"\n")


class _WorkerProtocol(asyncio.SubprocessProtocol):
    """Hands pipe data to the worker from the loop's callbacks, so a result line and the stderr
    written before it are both seen before the waiting case resumes."""

    def __init__(self, worker: ServeWorker) -> None:
        self.worker = worker

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.worker._on_stdout(data)
        elif fd == 2:
            self.worker._on_stderr(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.worker._on_stdout_closed()

    def process_exited(self) -> None:
        self.worker._on_exit()


class ServeWorker:
    """One grader process serving cases one at a time."""

    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        env: Mapping[str, str],
        stdout_cap: int,
        exit_status: ExitStatus,
        on_exit: Callable[[], None] | None = None,
    ) -> None:
        self.argv = argv
        self.exit_status = exit_status
        self.on_exit = on_exit
        self.cwd = cwd
        self.env = dict(env)
        self.stdout_cap = stdout_cap
        self.transport: asyncio.SubprocessTransport | None = None
        self.pid: int | None = None
        self.cases = 0
        self._stdout = bytearray()
        self._stderr = bytearray()
        #: the answer of the case in flight (None: the worker broke), and the nonce it must echo
        self._answer: asyncio.Future[dict[str, Any] | None] | None = None
        self._nonce: str | None = None
        self._exited: asyncio.Future[None] | None = None
        self._stdout_closed: asyncio.Future[None] | None = None
        self._overflowed = False
        self._broken: str | None = None

    @property
    def alive(self) -> bool:
        return (
            self.transport is not None
            and self._exited is not None
            and not self._exited.done()
            and self._broken is None
        )

    async def start(self) -> str | None:
        """Start the process; the reason it could not be started, or None."""
        loop = asyncio.get_running_loop()
        self._exited = loop.create_future()
        self._stdout_closed = loop.create_future()
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: _WorkerProtocol(self),
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(self.cwd),
                env=self.env,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return f"cannot start {self.argv[0]!r}: {reason}"
        self.transport = transport
        self.pid = transport.get_pid()
        return None

    # -- pipe callbacks -----------------------------------------------------------------------

    def _on_stdout(self, data: bytes) -> None:
        self._stdout += data
        while (newline := self._stdout.find(b"\n")) >= 0 and self._broken is None:
            line = bytes(self._stdout[:newline])
            del self._stdout[: newline + 1]
            self._on_line(line)
        if len(self._stdout) > self.stdout_cap:
            self._overflowed = True
            self._fail("printed more than the stdout limit")

    def _on_line(self, line: bytes) -> None:
        """The answer to the case in flight, or a line out of turn that breaks the worker."""
        if self._answer is None or self._answer.done():
            self._fail("printed a line while no case was in flight")
            return
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        code = doc.get("exit") if isinstance(doc, dict) else None
        if not isinstance(code, int) or isinstance(code, bool) or "result" not in doc:
            self._fail(NOT_AN_ANSWER)
        elif doc.get("nonce") is None:
            self._fail("answered without the nonce of the case in flight (echo its line's nonce)")
        elif doc["nonce"] != self._nonce:
            self._fail("answered with a nonce that is not the case in flight's")
        else:
            self._answer.set_result(doc)

    def _on_stderr(self, data: bytes) -> None:
        self._stderr += data
        if len(self._stderr) > STDERR_TAIL * 8:
            del self._stderr[: -STDERR_TAIL * 4]

    def _on_stdout_closed(self) -> None:
        if self._stdout_closed is not None and not self._stdout_closed.done():
            self._stdout_closed.set_result(None)

    def _on_exit(self) -> None:
        if self._exited is not None and not self._exited.done():
            self._exited.set_result(None)
            if self.on_exit is not None:
                self.on_exit()

    def _fail(self, why: str) -> None:
        """Break the worker: it will take no more cases and is killed."""
        if self._broken is None:
            self._broken = why
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(None)
        self._signal(signal.SIGKILL)

    # -- cases ----------------------------------------------------------------------------------

    def _stderr_text(self) -> str:
        return bytes(self._stderr).decode("utf-8", errors="replace")[-STDERR_TAIL:].strip()

    async def run_case(self, line: CaseLine, timeout: float) -> ProcessOutcome:
        """Send one case line and wait for its answer; a worker that misbehaves (a line out of
        turn, a missing or wrong nonce) is killed and the case errors."""
        assert self.transport is not None and self._exited is not None
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        if self.cases:
            self._stderr.clear()  # stderr from before the first case belongs to the first case
        self.cases += 1
        self._answer = answer = loop.create_future()
        self._nonce = line.nonce
        stdin = self.transport.get_pipe_transport(0)
        with contextlib.suppress(OSError, RuntimeError, AttributeError):
            stdin.write(line.data)  # type: ignore[union-attr]
        try:
            done, _ = await asyncio.wait(
                {answer, self._exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            await self.kill()
            raise
        if answer.done() and answer.result() is not None:
            await asyncio.sleep(0)  # let stderr callbacks already queued with the line run
            return answer_outcome(answer.result(), self._stderr_text(), started)
        if not done:
            await self.kill()
            return self._outcome(started, timed_out=True)
        if self._broken is not None:
            await self.kill()
            return self._outcome(started, failure=f"grader {self._broken} and was killed")
        # The process exited with the case in flight: wait for its last output, then report it.
        assert self._stdout_closed is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._stdout_closed), DRAIN_AFTER_EXIT_S)
        if answer.done() and answer.result() is not None:
            return answer_outcome(answer.result(), self._stderr_text(), started)
        code = self.exit_status(self.transport.get_returncode())
        await self.kill()
        return self._outcome(started, exit_code=code, failure=_exit_reason(code))

    def _outcome(
        self,
        started: float,
        *,
        exit_code: int | None = None,
        timed_out: bool = False,
        failure: str | None = None,
    ) -> ProcessOutcome:
        return ProcessOutcome(
            exit_code=exit_code,
            stdout=b"",
            stderr_tail=self._stderr_text(),
            duration_ms=(time.perf_counter() - started) * 1000,
            timed_out=timed_out,
            overflowed=self._overflowed,
            failure=None if timed_out or self._overflowed else failure,
        )

    # -- ending ---------------------------------------------------------------------------------

    def _signal(self, sig: int) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    async def kill(self) -> None:
        """SIGTERM the worker's process group, SIGKILL it after a grace period."""
        if self._broken is None:
            self._broken = "was stopped"
        if self._exited is not None and not self._exited.done():
            self._signal(signal.SIGTERM)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._exited), KILL_GRACE_S)
        self._signal(signal.SIGKILL)  # children the grader forked share its group
        if self.transport is not None:
            self.transport.close()

    async def close(self) -> None:
        """End of the run: close stdin (a served grader exits at EOF), then kill what is left."""
        if self.transport is not None and self._exited is not None and not self._exited.done():
            stdin = self.transport.get_pipe_transport(0)
            if stdin is not None:
                stdin.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._exited), CLOSE_GRACE_S)
        self._signal(signal.SIGKILL)
        if self.transport is not None:
            self.transport.close()


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"grader was killed by signal {name} before it answered"
    return f"grader exited with status {code} before it answered"


class ServePool:
    """At most ``size`` workers of one grader; a worker serves one case at a time.
    ``command`` gives each new worker its command line (its own sandbox)."""

    def __init__(
        self,
        command: Callable[[], list[str]],
        cwd: Path,
        env: Mapping[str, str],
        size: int,
        exit_status: ExitStatus,
        cap: ProcessCap | None = None,
    ) -> None:
        self.command = command
        self.exit_status = exit_status
        self.cwd = cwd
        self.env = {**env, MODE_ENV: SERVE}
        self.size = max(1, size)
        self.cap = cap
        self._idle: list[ServeWorker] = []
        self._all: set[ServeWorker] = set()
        self._slots = asyncio.Semaphore(self.size)
        self._starting = asyncio.Lock()
        self.started = 0
        #: workers whose process has not exited (what the cap counts)
        self.live = 0
        if cap is not None:
            cap.join(self)

    async def run(
        self, line: CaseLine, timeout: float, stdout_cap: int = STDOUT_CAP
    ) -> ProcessOutcome:
        async with self._slots:
            if self.cap is None:
                worker = self._take_idle()
            else:
                worker = await self.cap.take(self, self._take_idle)
            if worker is None:
                worker = ServeWorker(
                    self.command(), self.cwd, self.env, stdout_cap, self.exit_status, self._gone
                )
                self.started += 1
                # One start at a time: a start blocks the loop until the process runs, so
                # eight at once would hold every first case line back until the last one.
                failure: str | None = "the run stopped while the worker started"
                try:
                    async with self._starting:
                        failure = await worker.start()
                finally:
                    if failure is not None:  # no process, or none this pool will count
                        worker.on_exit = None
                        if self.cap is not None:
                            self.cap.release()
                if failure is not None:
                    return ProcessOutcome(None, b"", "", 0.0, spawn_error=failure)
                self.live += 1
                self._all.add(worker)
            try:
                outcome = await worker.run_case(line, timeout)
            finally:
                if worker.alive:
                    self._idle.append(worker)
                    if self.cap is not None:
                        self.cap.changed()
                else:
                    self._all.discard(worker)
            return outcome

    def _gone(self) -> None:
        self.live -= 1
        if self.cap is not None:
            self.cap.release()

    def _take_idle(self) -> ServeWorker | None:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                return worker
            self._all.discard(worker)
            asyncio.ensure_future(worker.kill())
        return None

    def give_up_idle(self) -> ServeWorker | None:
        """An idle worker taken out of the pool, for the cap to end."""
        worker = self._take_idle()
        if worker is not None:
            self._all.discard(worker)
        return worker

    async def close(self) -> None:
        workers, self._all, self._idle = list(self._all), set(), []
        await asyncio.gather(*(w.close() for w in workers), return_exceptions=True)
