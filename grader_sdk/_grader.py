"""The script-grader protocol (docs/grader-protocol.md): read one JSON payload, write one JSON result.

Exit codes: 0 graded; 3 abstained (``Abstain`` or the judge could not be used); 1 error (any
other exception, with the traceback tail on stderr). The grader function may be async.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import IO, Any, TypeVar

from grader_sdk._context import (
    as_messages,
    configured_context,
    last_text,
    tool_call_results,
)
from grader_sdk._errors import (
    JudgeReplyError,
    ProxyUnavailable,
    ShuttingDown,
    UnsupportedRequest,
    UpstreamError,
)
from grader_sdk._record import Record

PROTOCOL = "evalrun.grader/1"
#: Set by evalrun to ``serve`` when the grader should run in stream mode.
MODE_ENV, SERVE = "EVALRUN_GRADER_MODE", "serve"
EXIT_OK, EXIT_ERROR, EXIT_ABSTAIN = 0, 1, 3
STDERR_TAIL = 4000

#: Failures that mean "the judge could not be used", so the case is unscored, not errored.
ABSTAIN_ON: tuple[type[BaseException], ...] = (
    ProxyUnavailable,
    UpstreamError,
    ShuttingDown,
    UnsupportedRequest,
    JudgeReplyError,
)

_ALIASES: dict[str, tuple[str, ...]] = {
    "case_id": ("case_id", "caseId", "eval_case_id", "evalCaseId", "id"),
    "criteria": ("criteria", "expected_outcome", "expectedOutcome"),
    "input": ("input", "input_messages", "inputMessages"),
    "output": ("output", "answer", "candidate_answer", "candidateAnswer"),
    "messages": ("messages", "output_messages", "outputMessages"),
    "expected_output": (
        "expected_output",
        "expectedOutput",
        "expected_messages",
        "expectedMessages",
    ),
    "reference_answer": ("reference_answer", "referenceAnswer"),
}


class Abstain(Exception):
    """Raise to say "cannot grade this case"; the case is unscored, never scored 0."""

    def __init__(self, reason: str, details: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details


class GraderInput(Record):
    """A typed view of the stdin payload (either case accepted; fields are snake_case)."""

    _unshown = ("raw",)

    def __init__(
        self,
        case_id: str = "",
        question: str = "",
        criteria: str | None = None,
        input: list[dict[str, Any]] | None = None,
        output: str | None = None,
        messages: list[dict[str, Any]] | None = None,
        expected_output: list[dict[str, Any]] | None = None,
        reference_answer: str | None = None,
        config: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        grader: dict[str, Any] | None = None,
        attempt: int = 0,
        protocol: str = PROTOCOL,
        raw: dict[str, Any] | None = None,
    ) -> None:
        self.case_id = case_id
        self.question = question
        self.criteria = criteria
        self.input = [] if input is None else input
        self.output = output
        self.messages = [] if messages is None else messages
        self.expected_output = [] if expected_output is None else expected_output
        self.reference_answer = reference_answer
        self.config = {} if config is None else config
        self.metadata = {} if metadata is None else metadata
        self.grader = {} if grader is None else grader
        self.attempt = attempt
        self.protocol = protocol
        self.raw = {} if raw is None else raw

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> GraderInput:
        get = _getter(data)
        inputs = as_messages(get("input"), "user")
        expected = as_messages(get("expected_output"), "assistant")
        messages = as_messages(get("messages"), "assistant")
        output = get("output")
        if isinstance(output, (list, dict)):
            output = last_text(as_messages(output, "assistant"), "assistant")
        question = data.get("question")
        if not isinstance(question, str) or not question:
            question = last_text(inputs, "user") or ""
        reference = get("reference_answer")
        if not isinstance(reference, str):
            reference = last_text(expected, "assistant")
        grader = data.get("grader")
        grader = dict(grader) if isinstance(grader, dict) else {}
        if "max_calls" not in grader and "maxCalls" in grader:
            grader["max_calls"] = grader["maxCalls"]
        attempt = data.get("attempt")
        return cls(
            case_id=str(get("case_id") or ""),
            question=question,
            criteria=_str_or_none(get("criteria")),
            input=inputs,
            output=output if isinstance(output, str) else None,
            messages=messages,
            expected_output=expected,
            reference_answer=reference,
            config=dict(data.get("config") or {}),
            metadata=dict(data.get("metadata") or {}),
            grader=grader,
            attempt=attempt if isinstance(attempt, int) else 0,
            protocol=str(data.get("protocol") or PROTOCOL),
            raw=dict(data),
        )

    @property
    def max_calls(self) -> int | None:
        value = self.grader.get("max_calls")
        return value if isinstance(value, int) else None

    def tool_call_results(self) -> list[dict[str, Any]]:
        """Each expected tool call as ``{"tool", "query", "results"}``, in order.

        ``config.tools`` (a list of tool names) limits which tool calls count.
        """
        return tool_call_results(self.expected_output, self.config.get("tools"))

    def retrieval_context(self) -> list[str]:
        """``config.retrieval_context`` if set, else every tool call's results, flattened."""
        configured = configured_context(self.config.get("retrieval_context"))
        if configured is not None:
            return configured
        return [node for group in self.tool_call_results() for node in group["results"]]

    def expected_text(self) -> str | None:
        """What the answer should say: ``criteria``, else the reference answer."""
        return (self.criteria or "").strip() or (self.reference_answer or "").strip() or None


class GraderResult(Record):
    """The stdout result; ``passed`` is written as ``pass``."""

    def __init__(
        self,
        score: float | None = None,
        passed: bool | None = None,
        reason: str = "",
        hits: list[str] | None = None,
        misses: list[str] | None = None,
        checks: list[dict[str, Any]] | None = None,
        details: Any = None,
    ) -> None:
        self.score = score
        self.passed = passed
        self.reason = reason
        self.hits = [] if hits is None else hits
        self.misses = [] if misses is None else misses
        self.checks = [] if checks is None else checks
        self.details = details

    def hit(self, text: str) -> GraderResult:
        self.hits.append(text)
        return self

    def miss(self, text: str) -> GraderResult:
        self.misses.append(text)
        return self

    def check(
        self, text: str, passed: bool, *, score: float | None = None, reason: str | None = None
    ) -> GraderResult:
        entry: dict[str, Any] = {"text": text, "pass": passed}
        if score is not None:
            entry["score"] = score
        if reason is not None:
            entry["reason"] = reason
        self.checks.append(entry)
        return self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.score is not None:
            out["score"] = self.score
        if self.passed is not None:
            out["pass"] = self.passed
        out["reason"] = self.reason
        out["hits"] = list(self.hits)
        out["misses"] = list(self.misses)
        if self.checks:
            out["checks"] = list(self.checks)
        if self.details is not None:
            out["details"] = self.details
        return validate_result(out)


F = TypeVar("F", bound=Callable[..., Any])
#: each module's ``script_grader`` function, by module name: what a host serves (``_host.py``)
_REGISTERED: dict[str, Callable[..., Any]] = {}


def registered_grader(module: str) -> Callable[..., Any]:
    """The function ``module`` (already imported) made a grader with ``script_grader``."""
    try:
        return _REGISTERED[module]
    except KeyError:
        raise LookupError(f"{module} defines no @script_grader function") from None


def script_grader(fn: F | None = None, *, run: bool | None = None) -> Any:
    """Turn ``fn(GraderInput) -> GraderResult | dict | float | bool`` into a protocol grader.

    The grader runs at once (and the process exits) when ``fn`` is defined in ``__main__`` or
    ``run=True``; otherwise ``fn`` is returned unchanged with a ``.main()`` to run it later.
    In stream mode (``EVALRUN_GRADER_MODE=serve``) it serves one case per stdin line.
    """

    def wrap(func: F) -> F:
        func.main = lambda: _finish(main(func))  # type: ignore[attr-defined]
        _REGISTERED[getattr(func, "__module__", "")] = func
        if run or (run is None and getattr(func, "__module__", None) == "__main__"):
            _finish(main(func))
        return func

    return wrap(fn) if fn is not None else wrap


def _finish(code: int) -> None:
    """Exit with ``code``. A worker whose stream evalrun has ended skips the interpreter's
    teardown, which a run pays for every worker at its very end (docs/grader-protocol.md,
    "Stream mode"): stdout and stderr are flushed and ``atexit`` hooks run first."""
    if os.environ.get(MODE_ENV) != SERVE:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main(fn: Callable[[GraderInput], Any]) -> int:
    """Serve cases when evalrun asks for stream mode, else grade the one payload on stdin."""
    if os.environ.get(MODE_ENV) == SERVE:
        return serve_grader(fn)
    return run_grader(fn)


def run_grader(
    fn: Callable[[GraderInput], Any],
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run one grading: stdin payload -> ``fn`` -> stdout JSON. Returns the exit code."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        payload = _read_payload(stdin.read())
    except KeyboardInterrupt:
        return 130
    except Exception:
        return _report_error(stderr)
    code, document = _grade(fn, payload, stderr)
    if document is not None:
        _emit(stdout, document)
    return code


def serve_grader(
    fn: Callable[[GraderInput], Any],
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Stream mode (docs/grader-protocol.md): each stdin line is ``{"nonce", "payload", "env"}``;
    each answer is one stdout line ``{"nonce", "exit", "result"}`` with the case's nonce, so
    evalrun can tell an answer from a stray line. ``env`` (the case's proxy token) is set in
    ``os.environ`` while the case runs, so ``TargetClient.from_env()`` works unchanged; anything
    the grader prints goes to stderr. Returns at the end of input."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        for line in stdin:
            if not line.strip():
                continue
            nonce = None
            try:
                nonce, payload, env = _read_case_line(line)
            except Exception:
                code, document = _report_error(stderr), None
            else:
                with _case_environment(env):
                    code, document = _grade(fn, payload, stderr)
            stderr.flush()
            answer = {"nonce": nonce, "exit": code, "result": document}
            stdout.write(json.dumps(answer, default=_json_default))
            stdout.write("\n")
            stdout.flush()
    except KeyboardInterrupt:
        return 130
    return EXIT_OK


def _grade(
    fn: Callable[[GraderInput], Any], payload: dict[str, Any], stderr: IO[str]
) -> tuple[int, dict[str, Any] | None]:
    """(exit code, the JSON document to print) for one payload. What ``fn`` prints goes to
    stderr: stdout carries the result only."""
    with _stdout_to(stderr):
        return _grade_quietly(fn, payload, stderr)


def _grade_quietly(
    fn: Callable[[GraderInput], Any], payload: dict[str, Any], stderr: IO[str]
) -> tuple[int, dict[str, Any] | None]:
    try:
        if not str(payload.get("protocol", PROTOCOL)).startswith("evalrun.grader/1"):
            stderr.write(f"warning: unexpected grader protocol {payload.get('protocol')!r}\n")
        value = fn(GraderInput.from_payload(payload))
        if hasattr(value, "__await__"):
            value = _await(value)
        return EXIT_OK, coerce_result(value)
    except Abstain as exc:
        return EXIT_ABSTAIN, _abstention(exc.reason, exc.details)
    except ABSTAIN_ON as exc:
        return EXIT_ABSTAIN, _abstention(f"the judge could not be used: {exc}", None)
    except KeyboardInterrupt:
        raise
    except Exception:
        return _report_error(stderr), None


def _report_error(stderr: IO[str]) -> int:
    import traceback

    stderr.write(traceback.format_exc()[-STDERR_TAIL:])
    stderr.flush()
    return EXIT_ERROR


def _read_case_line(line: str) -> tuple[str | None, dict[str, Any], dict[str, str]]:
    """(nonce, payload, env) of a case line; a line that cannot be read is answered with no
    nonce, which evalrun takes as a broken worker."""
    data = json.loads(line)
    if not isinstance(data, dict) or not isinstance(data.get("payload"), dict):
        raise ValueError(
            'a stream-mode line must be {"nonce": ..., "payload": {...}, "env": {...}}'
        )
    nonce = data.get("nonce")
    env = data.get("env") or {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ValueError("'env' of a stream-mode line must map names to strings")
    return nonce if isinstance(nonce, str) else None, data["payload"], env


@contextmanager
def _case_environment(env: Mapping[str, str]) -> Iterator[None]:
    """Set the case's variables; restore the previous values after it, whatever happened."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _stdout_to(stream: IO[str]) -> Iterator[None]:
    saved, sys.stdout = sys.stdout, stream
    try:
        yield
    finally:
        sys.stdout = saved


def coerce_result(value: Any) -> dict[str, Any]:
    """Accept a GraderResult, a dict, a number (score) or a bool (pass)."""
    if isinstance(value, GraderResult):
        return value.to_dict()
    if isinstance(value, bool):
        return {"score": 1.0 if value else 0.0, "pass": value}
    if isinstance(value, (int, float)):
        return validate_result({"score": float(value)})
    if isinstance(value, Mapping):
        return validate_result(dict(value))
    raise TypeError(f"a grader must return a GraderResult, dict, number or bool, not {value!r}")


def validate_result(out: dict[str, Any]) -> dict[str, Any]:
    score = out.get("score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or math.isnan(score):
            raise ValueError(f"score must be a number in 0..1, got {score!r}")
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"score must be in 0..1, got {score}")
    if score is None and "pass" not in out and "checks" not in out:
        raise ValueError("a grader result needs 'score', 'pass' or 'checks'")
    return out


def _read_payload(text: str) -> dict[str, Any]:
    if not text.strip():
        raise ValueError("no grader input on stdin (expected one JSON object)")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"grader input must be a JSON object, got {type(data).__name__}")
    return data


def _abstention(reason: str, details: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"abstain": True, "reason": reason}
    if details is not None:
        out["details"] = details
    return out


def _emit(stdout: IO[str], data: dict[str, Any]) -> None:
    stdout.write(json.dumps(data, default=_json_default) + "\n")
    stdout.flush()


def _json_default(value: Any) -> Any:
    if isinstance(value, Record):
        return value.as_dict()
    dataclasses = sys.modules.get("dataclasses")  # a grader's own dataclass imported it
    if dataclasses is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _await(awaitable: Any) -> Any:
    import asyncio

    async def wait() -> Any:
        return await awaitable

    return asyncio.run(wait())


def _getter(data: Mapping[str, Any]) -> Callable[[str], Any]:
    def get(name: str) -> Any:
        for alias in _ALIASES.get(name, (name,)):
            if data.get(alias) is not None:
                return data[alias]
        return None

    return get


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)
