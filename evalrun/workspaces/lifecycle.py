"""One case's workspace from start to end (docs/agents.md, "Lifecycle"): made fresh in a folder
of its own, set up, handed to the agent, compared with how the agent got it, torn down (always)
and removed unless kept."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from evalrun.spec.workspace import SETUP_TIMEOUT_S, TEARDOWN_TIMEOUT_S, WorkspaceSpec
from evalrun.workspaces.changes import Snapshot, compare, snapshot
from evalrun.workspaces.making import WorkspaceError, fill
from evalrun.workspaces.scripts import ScriptContext, ScriptFailed, ScriptLaunch, run_script


@dataclass(frozen=True)
class FinalWorkspace:
    """The workspace after the agent, as graders get it: its path, its files, the diff."""

    path: Path
    files: list[str]
    diff: str


@dataclass
class CaseWorkspace:
    """Use ``open`` (setup may fail: ``WorkspaceError``), then ``final``, then always
    ``close``. ``root`` holds every workspace of the run (a folder sandboxes mask)."""

    spec: WorkspaceSpec
    eval_dir: Path
    root: Path
    context: ScriptContext
    keep: bool = False
    launch: ScriptLaunch = field(default_factory=ScriptLaunch)
    path: Path | None = None
    _baseline: Snapshot = field(default_factory=dict)

    async def open(self) -> Path:
        """Make, fill and set up the workspace; the baseline is taken after the setup."""
        if self.spec.unsupported:
            raise WorkspaceError("; ".join(self.spec.unsupported))
        missing = [c for c in self.spec.required_commands if shutil.which(c) is None]
        if missing:
            raise WorkspaceError(f"workspace: required commands not on PATH: {', '.join(missing)}")
        holder = Path(tempfile.mkdtemp(prefix="case-", dir=self.root))
        self.path = holder / "workspace"
        self.path.mkdir()
        await asyncio.to_thread(fill, self.path, self.spec, self.eval_dir)
        for index, script in enumerate(self.spec.setup):
            try:
                await run_script(
                    script,
                    label=f"workspace setup[{index}]",
                    timeout=script.timeout or SETUP_TIMEOUT_S,
                    eval_dir=self.eval_dir,
                    ctx=self.context,
                    workspace=self.path,
                    launch=self.launch,
                )
            except ScriptFailed as exc:
                raise WorkspaceError(str(exc)) from None
        self._baseline = await asyncio.to_thread(snapshot, self.path)
        return self.path

    async def final(self) -> FinalWorkspace:
        assert self.path is not None
        changes = compare(self._baseline, await asyncio.to_thread(snapshot, self.path))
        return FinalWorkspace(self.path, changes.files, changes.diff)

    async def close(self) -> list[str]:
        """Run every teardown script (each even when one before it failed), then remove the
        workspace unless kept. Returns the failures, one message each."""
        if self.path is None:
            return []
        failures = []
        for index, script in enumerate(self.spec.teardown):
            try:
                await run_script(
                    script,
                    label=f"workspace teardown[{index}]",
                    timeout=script.timeout or TEARDOWN_TIMEOUT_S,
                    eval_dir=self.eval_dir,
                    ctx=self.context,
                    workspace=self.path,
                    launch=self.launch,
                )
            except ScriptFailed as exc:
                failures.append(str(exc))
        if not self.keep:
            await asyncio.to_thread(shutil.rmtree, self.path.parent, True)
        return failures
