"""The mocked tools a model target is offered, and how one call of theirs is answered: a static
result, one matched on the call's arguments, or a script's (docs/agents.md, "Model targets with
tools").

Every call gets an answer: a call evalrun cannot answer (unknown tool, arguments that are not
JSON or break the tool's schema, a script that fails) gets an error result (``is_error``) that
says why, which the model sees and the transcript keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the most a tool script may print on stdout; more is an error, not a truncated result
MAX_SCRIPT_OUTPUT = 1_000_000
#: how much of a failed script's stderr its error result quotes
_STDERR_TAIL = 2000
#: how long a killed script's pipes may stay open before evalrun stops waiting for them
_REAP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class MockedResult:
    """A result, for the calls whose arguments contain ``arguments`` (None: every call)."""

    result: Any
    arguments: Mapping[str, Any] | None = None
    is_error: bool = False

    def fits(self, arguments: Mapping[str, Any]) -> bool:
        if self.arguments is None:
            return True
        return all(k in arguments and arguments[k] == v for k, v in self.arguments.items())


@dataclass(frozen=True)
class MockTool:
    """One tool as the model sees it (name, description, JSON Schema parameters) and how its
    calls are answered: the first of ``results`` that fits, else ``command``, else
    ``fallback``."""

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    results: tuple[MockedResult, ...] = ()
    fallback: MockedResult | None = None
    command: tuple[str, ...] | None = None
    timeout: float = 30.0

    def offered(self) -> dict[str, Any]:
        """The tool in OpenAI's shape, which every provider translates (docs/targets.md)."""
        function: dict[str, Any] = {"name": self.name, "parameters": dict(self.parameters)}
        if self.description is not None:
            function["description"] = self.description
        return {"type": "function", "function": function}


@dataclass
class Answer:
    """What a call came back with: ``result`` as the transcript keeps it, ``content`` as the
    model reads it (the result itself when it is text, else its JSON)."""

    result: Any
    is_error: bool = False
    duration_ms: float | None = None

    @property
    def content(self) -> str:
        if isinstance(self.result, str):
            return self.result
        return json.dumps(self.result, ensure_ascii=False)


def _as_is(argv: Sequence[str]) -> list[str]:
    return list(argv)


@dataclass(frozen=True)
class Toolbox:
    """A case's tools, where their scripts run, the environment they get (the run's secrets
    left out, as for graders: docs/security.md) and ``wrap``, which puts a script's argv in the
    run's sandbox (docs/agents.md, "The scripts' sandbox")."""

    tools: tuple[MockTool, ...]
    cwd: Path
    env: Mapping[str, str]
    wrap: Callable[[Sequence[str]], list[str]] = _as_is
    #: OpenAI's ``tool_choice`` (None: unset, the provider's default)
    choice: str | dict[str, Any] | None = None

    def offered(self) -> list[dict[str, Any]]:
        return [tool.offered() for tool in self.tools]

    def choice_for(self, call: int) -> str | dict[str, Any] | None:
        """The choice sent with the loop's ``call``-th model call: a call that must use a tool
        (``required``, a named tool) is forced once, then ``auto``, so a forced call cannot
        repeat until ``max_turns`` (docs/agents.md, "tool_choice")."""
        if call > 1 and (self.choice == "required" or isinstance(self.choice, dict)):
            return "auto"
        return self.choice

    async def answer(self, name: str, raw_arguments: Any, call_id: str) -> tuple[Any, Answer]:
        """The call's arguments (an object, or the text the model sent when it is not one) and
        its answer."""
        arguments, problem = parse_arguments(raw_arguments)
        tool = next((t for t in self.tools if t.name == name), None)
        if tool is None:
            offered = ", ".join(t.name for t in self.tools)
            return arguments, Answer(f"unknown tool '{name[:80]}': the tools are {offered}", True)
        if problem is not None:
            return arguments, Answer(f"tool '{name}': {problem}", True)
        assert isinstance(arguments, dict)
        invalid = _schema_problem(tool.parameters, arguments)
        if invalid is not None:
            return arguments, Answer(
                f"tool '{name}': the arguments do not fit its parameters: {invalid}", True
            )
        for mocked in tool.results:
            if mocked.fits(arguments):
                return arguments, Answer(mocked.result, mocked.is_error)
        if tool.command is not None:
            call = {"name": name, "arguments": arguments, "id": call_id}
            return arguments, await self._run_script(tool, tool.command, call)
        if tool.fallback is not None:
            return arguments, Answer(tool.fallback.result, tool.fallback.is_error)
        return arguments, Answer(
            f"tool '{name}': no mocked result for these arguments "
            f"({json.dumps(arguments, ensure_ascii=False)[:200]})",
            True,
        )

    async def _run_script(
        self, tool: MockTool, argv: tuple[str, ...], call: dict[str, Any]
    ) -> Answer:
        """The script's stdout read as JSON; any other outcome is an error result naming it."""
        started = time.perf_counter()

        def failed(reason: str) -> Answer:
            elapsed = (time.perf_counter() - started) * 1000
            return Answer(f"tool '{tool.name}': its script {reason}", True, round(elapsed, 1))

        try:
            process = await asyncio.create_subprocess_exec(
                *self.wrap(argv),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=dict(self.env),
                start_new_session=True,
            )
        except OSError as exc:
            return failed(f"could not start ({argv[0]!r}: {exc.strerror or exc})")
        try:
            stdout, stderr = await asyncio.wait_for(
                _communicate(process, json.dumps(call, ensure_ascii=False).encode()), tool.timeout
            )
        except asyncio.TimeoutError:
            await _kill_group(process)
            return failed(f"gave no answer within {tool.timeout:g}s (process group killed)")
        except BaseException:
            await _kill_group(process)
            raise
        await _kill_group(process)  # anything it left running goes with it
        if stdout is None:
            return failed(f"printed more than {MAX_SCRIPT_OUTPUT:,} bytes (killed)")
        tail = stderr.decode(errors="replace").strip()[-_STDERR_TAIL:]
        if process.returncode != 0:
            return failed(
                f"exited with status {process.returncode}" + (f": {tail}" if tail else "")
            )
        try:
            text = stdout.decode()
            result = json.loads(text)
        except ValueError as exc:
            shown = stdout[:200].decode(errors="replace")
            return failed(f"printed no JSON ({exc}): {shown!r}")
        elapsed = (time.perf_counter() - started) * 1000
        return Answer(result, False, round(elapsed, 1))


async def _communicate(
    process: asyncio.subprocess.Process, stdin: bytes
) -> tuple[bytes | None, bytes]:
    """stdin written, then stdout and stderr's tail read; stdout is None when the script
    printed more than ``MAX_SCRIPT_OUTPUT`` (it is killed then, so its pipes close)."""
    assert process.stdin and process.stdout and process.stderr
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(stdin)
        await process.stdin.drain()
        process.stdin.close()

    async def read_out(stream: asyncio.StreamReader) -> bytes | None:
        out = bytearray()
        while chunk := await stream.read(65536):
            out += chunk
            if len(out) > MAX_SCRIPT_OUTPUT:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                return None
        return bytes(out)

    async def read_tail(stream: asyncio.StreamReader) -> bytes:
        tail = b""
        while chunk := await stream.read(65536):
            tail = (tail + chunk)[-4 * _STDERR_TAIL :]
        return tail

    stdout, stderr = await asyncio.gather(read_out(process.stdout), read_tail(process.stderr))
    await process.wait()
    return stdout, stderr


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.wait(), _REAP_TIMEOUT_S)


def parse_arguments(raw: Any) -> tuple[Any, str | None]:
    """The arguments as an object, or what was sent and why it is not one."""
    if raw is None or raw == "":
        return {}, None
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError as exc:
            return raw, f"the arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return value, "the arguments must be a JSON object"
    return value, None


def _schema_problem(schema: Mapping[str, Any], arguments: dict[str, Any]) -> str | None:
    """The first way ``arguments`` breaks the tool's JSON Schema (its ``$schema``'s draft,
    else 2020-12, as the eval file's validation reads it), or None."""
    from jsonschema import Draft202012Validator, validators  # slow import: only for tool calls

    cls = validators.validator_for(dict(schema), default=Draft202012Validator)
    errors = sorted(cls(dict(schema)).iter_errors(arguments), key=lambda e: list(e.path))
    if not errors:
        return None
    where = "/".join(str(p) for p in errors[0].absolute_path) or "(the object)"
    return f"{where}: {errors[0].message[:200]}"
