"""A workspace's setup and teardown scripts (docs/agents.md, "Lifecycle"): an argv run without a
shell, in its own process group (a timeout kills all it started), with the case's context on
stdin and in ``{{name}}`` placeholders of its arguments."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrun.argvpaths import absolute_paths
from evalrun.errors import EvalrunError
from evalrun.spec.workspace import WorkspaceScript

#: how much of a failed script's stderr its error keeps (the end, where the reason usually is)
STDERR_TAIL = 2000
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


class ScriptFailed(EvalrunError):
    """A setup or teardown script failed, timed out or could not start; the message says which
    and ends with its stderr's tail."""


@dataclass(frozen=True)
class ScriptContext:
    """What a script is told besides its workspace's path: the names AgentV gives its
    workspace hooks."""

    test_id: str
    eval_run_id: str
    case_input: str
    case_metadata: dict[str, Any]

    def stdin(self, workspace: Path) -> bytes:
        return json.dumps(
            {
                "workspace_path": str(workspace),
                "test_id": self.test_id,
                "eval_run_id": self.eval_run_id,
                "case_input": self.case_input,
                "case_metadata": self.case_metadata or None,
            }
        ).encode()

    def fill(self, part: str, workspace: Path) -> str:
        """``{{workspace_path}}`` and the other names in one argument; unknown names stay."""
        values = {
            "workspace_path": str(workspace),
            "test_id": self.test_id,
            "eval_run_id": self.eval_run_id,
            "case_input": self.case_input,
            "case_metadata": json.dumps(self.case_metadata) if self.case_metadata else "",
        }
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), part)


def _unwrapped(argv: Sequence[str], cwd: Path, workspace: Path) -> list[str]:
    return list(argv)


@dataclass(frozen=True)
class ScriptLaunch:
    """How the run starts scripts: their environment (the runner leaves the run's secrets out)
    and ``wrap(argv, cwd, workspace)``, the argv inside the run's sandbox (docs/agents.md, "The
    scripts' sandbox"); the defaults start them as they are."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    wrap: Callable[[Sequence[str], Path, Path], list[str]] = _unwrapped


def script_argv(
    script: WorkspaceScript, eval_dir: Path, ctx: ScriptContext, workspace: Path
) -> list[str]:
    """The argv to run: placeholders filled, relative paths that exist from the eval file's
    folder made absolute (as a grader's argv, docs/eval-files.md); a bare program name stays a
    PATH lookup."""
    return absolute_paths((ctx.fill(part, workspace) for part in script.argv), eval_dir)


async def run_script(
    script: WorkspaceScript,
    *,
    label: str,
    timeout: float,
    eval_dir: Path,
    ctx: ScriptContext,
    workspace: Path,
    launch: ScriptLaunch,
) -> None:
    """Run one script to its end in ``workspace`` (or its ``cwd``); raise ``ScriptFailed``
    unless it exits 0 in time."""
    argv = script_argv(script, eval_dir, ctx, workspace)
    cwd = workspace / ctx.fill(script.cwd, workspace) if script.cwd else workspace
    env = {**launch.env, "EVALRUN_WORKSPACE": str(workspace)}
    try:
        process = await asyncio.create_subprocess_exec(
            *launch.wrap(argv, cwd, workspace),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise ScriptFailed(f"{label}: cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    try:
        _, stderr = await asyncio.wait_for(process.communicate(ctx.stdin(workspace)), timeout)
    except asyncio.TimeoutError:
        await _kill_group(process)
        raise ScriptFailed(f"{label}: no exit within {timeout:g}s (process group killed)") from None
    except BaseException:
        await _kill_group(process)
        raise
    if process.returncode != 0:
        tail = stderr.decode(errors="replace").strip()[-STDERR_TAIL:]
        raise ScriptFailed(
            f"{label}: exited with status {process.returncode}"
            + (f": {tail}" if tail else " and no stderr")
        )


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.wait(), 5.0)
