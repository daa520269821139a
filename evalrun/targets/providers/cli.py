"""The ``cli`` target: a program (typically an agent) that takes the prompt and prints the answer.

The command is an argv list run without a shell. An element containing ``{prompt}`` gets the
prompt substituted into it (still one argument); without a placeholder the prompt goes on stdin.
An argument that is exactly ``{files}`` becomes the case's input files, one argument each. With a
case's workspace it runs there, in the agent's sandbox (docs/agents.md, "Workspaces"). The
program runs in its own process group so a timeout kills everything it started. With
``transcript:`` its stdout is an agent's JSON stream, read into a transcript whose final answer
is the answer (docs/agents.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from pathlib import Path
from typing import Any

from evalrun.argvpaths import absolute_paths
from evalrun.errors import ConfigError
from evalrun.targets.base import (
    AgentPlace,
    CompletionRequest,
    CompletionResponse,
    TargetError,
    TargetTimeout,
    TokenUsage,
)
from evalrun.targets.config import TargetConfig
from evalrun.transcripts import FORMATS, Transcript, TranscriptError, read_transcript

PLACEHOLDER = "{prompt}"
#: an argument that is exactly this becomes one argument per input file of the case
FILES = "{files}"
_STDERR_TAIL = 1000
_REAP_TIMEOUT_S = 5.0


def _argv(config: TargetConfig) -> list[str]:
    command: Any = config.extra("command")
    if isinstance(command, str):
        command = shlex.split(command)
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(part, (str, int, float)) for part in command)
    ):
        raise ConfigError(
            f"target '{config.name}' (cli) needs 'command': a non-empty list of arguments"
        )
    return [str(part) for part in command]


def _transcript_format(config: TargetConfig) -> str | None:
    fmt: Any = config.extra("transcript")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(
            f"target '{config.name}' (cli): 'transcript' must be one of {', '.join(FORMATS)}"
            f", not {fmt!r}"
        )
    return fmt


def _env(config: TargetConfig) -> dict[str, str] | None:
    extra: Any = config.extra("env")
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise ConfigError(f"target '{config.name}' (cli): 'env' must be a mapping")
    return {**os.environ, **{str(k): str(v) for k, v in extra.items()}}


class CliTarget:
    kind = "cli"

    def __init__(self, config: TargetConfig, api_key: str | None = None) -> None:
        self.name = config.name
        self.config = config
        self.argv = _argv(config)
        self.env = _env(config)
        cwd = config.extra("cwd")
        self.cwd = str(cwd) if cwd is not None else None
        self.uses_stdin = not any(PLACEHOLDER in part for part in self.argv)
        self.transcript_format = _transcript_format(config)

    def _error(self, message: str, **kwargs: Any) -> TargetError:
        return TargetError(f"cli target '{self.name}': {message}", target=self.name, **kwargs)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        prompt = request.prompt_text
        place = request.agent or AgentPlace()
        argv = _with_files(
            [part.replace(PLACEHOLDER, prompt) for part in self.argv], list(place.files)
        )
        if place.cwd is not None:
            argv = _absolute(argv, Path(self.cwd or os.getcwd()))
        if place.wrap is not None:
            argv = place.wrap(argv)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if self.uses_stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(place.cwd) if place.cwd is not None else self.cwd,
                env=self.env,
                start_new_session=True,
            )
        except OSError as exc:
            raise self._error(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        stdin = prompt.encode() if self.uses_stdin else None
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(stdin), self.config.timeout)
        except asyncio.TimeoutError:
            await _kill_group(process)
            raise TargetTimeout(
                f"cli target '{self.name}': no answer within {self.config.timeout:g}s "
                "(process group killed)",
                target=self.name,
            ) from None
        except BaseException:
            await _kill_group(process)
            raise
        if process.returncode != 0:
            tail = stderr.decode(errors="replace").strip()[-_STDERR_TAIL:]
            raise self._error(
                f"command exited with status {process.returncode}"
                + (f": {tail}" if tail else " and no stderr")
            )
        text = stdout.decode(errors="replace").strip()
        if self.transcript_format is None:
            return CompletionResponse(
                text=text,
                usage=TokenUsage(len(prompt.split()), len(text.split())),
                finish_reason="stop",
                model=self.config.model,
            )
        return self._from_transcript(prompt, text)

    def _from_transcript(self, prompt: str, stdout: str) -> CompletionResponse:
        """The answer and usage as the agent reported them; word counts only where it did not."""
        assert self.transcript_format is not None
        try:
            transcript: Transcript = read_transcript(self.transcript_format, stdout)
        except TranscriptError as exc:
            raise self._error(
                f"cannot read its {self.transcript_format} transcript: {exc}"
            ) from None
        usage = transcript.usage
        return CompletionResponse(
            text=transcript.answer,
            usage=TokenUsage(usage.input_tokens, usage.output_tokens)
            if usage
            else TokenUsage(len(prompt.split()), len(transcript.answer.split())),
            finish_reason="stop",
            model=self.config.model,
            cost_usd=transcript.cost_usd,
            transcript=transcript,
        )

    async def aclose(self) -> None:
        return None


def _absolute(argv: list[str], base: Path) -> list[str]:
    """Paths in argv that exist from ``base`` (the target's own ``cwd``, or where evalrun runs)
    made absolute, since a case's agent runs in its workspace instead; a bare program name
    stays a PATH lookup (docs/targets.md)."""
    return absolute_paths(argv, base)


def _with_files(argv: list[str], files: list[str]) -> list[str]:
    """``{files}`` (a whole argument) expanded to the case's input files' absolute paths, one
    argument each, none when it has none (AgentV's ``{FILES}``; docs/agents.md)."""
    out: list[str] = []
    for part in argv:
        out += files if part == FILES else [part]
    return out


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the whole group: children the program left behind may hold its pipes open."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    # wait() also waits for the pipes to close, which a child that left the group may hold
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.wait(), _REAP_TIMEOUT_S)
