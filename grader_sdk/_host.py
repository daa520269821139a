"""Host mode (docs/grader-protocol.md, "Host mode"): one process serves several graders, several
cases at once, one thread per case in flight. evalrun uses it for its own built-in graders only,
so a run's width no longer costs one interpreter per grader per worker.

Each line is a stream-mode line plus ``"grader"``, the name the host's ``load`` resolves to a
grader function. A case's proxy variables are seen by its own thread only (``case_env``), and
what a case prints goes into its answer's ``"stderr"``: cases in flight together never see
each other's token or output.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from grader_sdk._client import CASE_ENV
from grader_sdk._grader import (
    STDERR_TAIL,
    _grade_quietly,
    _json_default,
    _read_case_line,
)

Grade = Callable[[Any], Any]


class _PerThreadStream(io.TextIOBase):
    """``sys.stdout`` and ``sys.stderr`` of a host: a case's thread writes into that case's
    buffer; any other thread into the host's own stderr."""

    def __init__(self, fallback: IO[str]) -> None:
        self._fallback = fallback
        self._local = threading.local()

    def bind(self, buffer: IO[str] | None) -> None:
        self._local.buffer = buffer

    def _target(self) -> IO[str]:
        buffer = getattr(self._local, "buffer", None)
        return self._fallback if buffer is None else buffer

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def writable(self) -> bool:
        return True


def serve_host(
    load: Callable[[str], Grade],
    slots: int,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
) -> int:
    """Read case lines until end of input, grading up to ``slots`` cases at once; each answer
    is one line ``{"nonce", "exit", "result", "stderr"}``. Returns once every case has
    answered."""
    stdin = stdin or sys.stdin
    answers = stdout or sys.stdout
    streams = _PerThreadStream(sys.stderr)
    sys.stdout = sys.stderr = streams  # type: ignore[assignment]
    write_lock = threading.Lock()

    def answer(nonce: str | None, code: int, document: Any, stderr: str) -> None:
        line = {"nonce": nonce, "exit": code, "result": document, "stderr": stderr}
        text = json.dumps(line, default=_json_default) + "\n"
        with write_lock:
            answers.write(text)
            answers.flush()

    def run(nonce: str | None, grade: Grade, payload: dict[str, Any], env: dict[str, str]) -> None:
        buffer = io.StringIO()
        streams.bind(buffer)
        token = CASE_ENV.set(env)
        try:
            code, document = _grade_quietly(grade, payload, buffer)
        finally:
            CASE_ENV.reset(token)
            streams.bind(None)
        answer(nonce, code, document, buffer.getvalue()[-STDERR_TAIL:])

    with ThreadPoolExecutor(max(1, slots), thread_name_prefix="case") as pool:
        for line in stdin:
            if not line.strip():
                continue
            nonce = None
            try:
                nonce, payload, env = _read_case_line(line)
                grade = load(_grader_name(line))
            except Exception as exc:  # answered at once: the launcher errors that case
                answer(nonce, 1, None, f"{type(exc).__name__}: {exc}")
                continue
            pool.submit(run, nonce, grade, payload, env)
    return 0


def _grader_name(line: str) -> str:
    name = json.loads(line).get("grader")
    if not isinstance(name, str) or not name:
        raise ValueError('a host-mode line names its grader: {"grader": "...", ...}')
    return name
