"""Run one grader process: argv without a shell, its own process group, stdin fed without
blocking on a grader that never reads it, stdout capped, a stderr tail kept, and the whole
group killed on timeout, on overflow, on cancellation and after it exits (no orphans)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STDOUT_CAP = 4 * 1024 * 1024
STDERR_TAIL = 4000
KILL_GRACE_S = 1.0
DRAIN_AFTER_EXIT_S = 2.0


@dataclass
class ProcessOutcome:
    exit_code: int | None
    stdout: bytes
    stderr_tail: str
    duration_ms: float
    timed_out: bool = False
    overflowed: bool = False
    spawn_error: str | None = None
    #: why the grader's answer cannot be used at all (stream mode: it died or broke the framing)
    failure: str | None = None


def answer_outcome(doc: dict[str, Any], stderr_tail: str, started: float) -> ProcessOutcome:
    """A stream-mode answer line (``{nonce, exit, result}``, docs/grader-protocol.md, "Stream
    mode") as a per-process outcome, so the one protocol reader (``protocol.interpret``) reads
    served, hosted and per-process graders alike."""
    result = doc["result"]
    if result is None:
        stdout = b""
    else:
        stdout = result.encode() if isinstance(result, str) else json.dumps(result).encode()
    return ProcessOutcome(
        exit_code=doc["exit"],
        stdout=stdout,
        stderr_tail=stderr_tail,
        duration_ms=(time.perf_counter() - started) * 1000,
    )


class _ExitAwareProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Reports the exit itself: ``Process.wait()`` also waits for the pipes to close, which a
    grandchild holding stdout, or a pipe we stopped reading, can delay for ever."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)
        self.exited: asyncio.Future[int] = loop.create_future()
        self._transport_ref: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._transport_ref = transport  # type: ignore[assignment]

    def process_exited(self) -> None:
        super().process_exited()
        if self.exited.done() or self._transport_ref is None:
            return
        # asyncio records the return code before it calls process_exited
        code = self._transport_ref.get_returncode()
        if code is not None:
            self.exited.set_result(code)


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        stdin.write(data)
        await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        stdin.close()
        await stdin.wait_closed()


async def _read_capped(stream: asyncio.StreamReader, cap: int, on_overflow: asyncio.Event) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(65536):
        size += len(chunk)
        if size > cap:
            on_overflow.set()
            return b"".join(chunks)
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_tail(stream: asyncio.StreamReader, keep: int) -> bytes:
    tail = b""
    while chunk := await stream.read(65536):
        tail = (tail + chunk)[-keep * 4 :]
    return tail


def _tail_text(data: bytes, keep: int) -> str:
    return data.decode("utf-8", errors="replace")[-keep:].strip()


async def run_process(
    argv: list[str],
    stdin: bytes,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdout_cap: int = STDOUT_CAP,
) -> ProcessOutcome:
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000

    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _ExitAwareProtocol(loop),
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(cwd),
            env=dict(env),
            start_new_session=True,
        )
        proc = asyncio.subprocess.Process(transport, protocol, loop)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return ProcessOutcome(
            None, b"", "", elapsed(), spawn_error=f"cannot start {argv[0]!r}: {reason}"
        )

    assert proc.stdin and proc.stdout and proc.stderr
    overflow = asyncio.Event()
    feeder = asyncio.create_task(_feed(proc.stdin, stdin))
    out_task = asyncio.create_task(_read_capped(proc.stdout, stdout_cap, overflow))
    err_task = asyncio.create_task(_read_tail(proc.stderr, STDERR_TAIL))
    overflow_wait = asyncio.create_task(overflow.wait())
    exit_wait = asyncio.ensure_future(protocol.exited)
    timed_out = False
    waiting: set[asyncio.Future[Any]] = {exit_wait, overflow_wait}
    try:
        await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not protocol.exited.done():
            timed_out = not overflow.is_set()
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(exit_wait), KILL_GRACE_S)
            except asyncio.TimeoutError:
                _kill_group(proc.pid, signal.SIGKILL)
                await exit_wait
    except BaseException:
        _kill_group(proc.pid, signal.SIGKILL)
        for task in (feeder, out_task, err_task, overflow_wait, exit_wait):
            task.cancel()
        transport.close()
        raise
    finally:
        overflow_wait.cancel()
    # Children the grader forked share its group: they go with it.
    _kill_group(proc.pid, signal.SIGKILL)
    feeder.cancel()
    stdout = b""
    stderr = b""
    done, pending = await asyncio.wait({out_task, err_task}, timeout=DRAIN_AFTER_EXIT_S)
    for task in pending:
        task.cancel()
    if out_task in done and not out_task.cancelled() and out_task.exception() is None:
        stdout = out_task.result()
    if err_task in done and not err_task.cancelled() and err_task.exception() is None:
        stderr = err_task.result()
    transport.close()
    return ProcessOutcome(
        exit_code=protocol.exited.result(),
        stdout=stdout,
        stderr_tail=_tail_text(stderr, STDERR_TAIL),
        duration_ms=elapsed(),
        timed_out=timed_out,
        overflowed=overflow.is_set(),
    )
