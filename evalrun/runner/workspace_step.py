"""The workspace around one case's grading (docs/agents.md, "Workspaces"): made before the
agent runs, handed to it inside its sandbox, shown to the graders, torn down after them, always.
``CaseGrader`` calls :meth:`RunWorkspaces.around` and :meth:`RunWorkspaces.place`."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from evalrun.judgecall import JudgeCall
from evalrun.launcher.environment import grader_environment
from evalrun.launcher.sandbox import agent_wrap, private_root, script_wrap, why_unavailable
from evalrun.results.models import CaseResult
from evalrun.runner.plan import RunPlan
from evalrun.spec.models import TestCase
from evalrun.spec.workspace import WorkspaceSpec, merged
from evalrun.targets import AgentPlace, TargetError
from evalrun.workspaces import CaseWorkspace, ScriptContext, ScriptLaunch, WorkspaceError
from evalrun.workspaces.inputs import MissingInputFile, input_files

Graded = tuple[CaseResult, list[JudgeCall]]


class RunWorkspaces:
    """The workspaces of one run: one folder holding them all (inside the folder every sandbox
    masks), removed at the end unless ``--keep-workspaces``."""

    def __init__(self, plan: RunPlan, masked: Callable[[], tuple[Path, ...]]) -> None:
        self.plan = plan
        self._masked = masked
        self._root: Path | None = None
        self._run_id = uuid.uuid4().hex[:12]

    def spec_for(self, case: TestCase) -> WorkspaceSpec | None:
        return merged(self.plan.loaded.spec.workspace, case.workspace)

    async def around(
        self,
        case: TestCase,
        spec: WorkspaceSpec,
        failed: Callable[[str], CaseResult],
        grade: Callable[[CaseWorkspace], Awaitable[Graded]],
    ) -> Graded:
        """Open the case's workspace, grade, tear down: a setup or teardown failure is the
        case's error (with the script's stderr tail), and teardown runs whatever happened."""
        if spec.sandbox != "none" and (reason := why_unavailable()):
            return failed(
                f"workspace: the agent's sandbox '{spec.sandbox}' cannot be had: {reason} "
                "(workspace.sandbox: none runs the agent without one)"
            ), []
        workspace = CaseWorkspace(
            spec,
            self.plan.loaded.folder.resolve(),
            self._folder(),
            ScriptContext(case.id, self._run_id, _input_text(case), case.metadata),
            keep=self.plan.options.keep_workspaces,
            launch=ScriptLaunch(
                grader_environment(secret_names=self.plan.pool.secret_env_names()),
                self._wrap_script,
            ),
        )
        graded: Graded | None = None
        try:
            try:
                await workspace.open()
            except WorkspaceError as exc:
                graded = failed(f"workspace: {exc}"), []
            else:
                graded = await grade(workspace)
        finally:
            failures = await workspace.close()
        result = graded[0]
        if failures:
            result.status, result.score = "error", None
            result.error = "; ".join([*([result.error] if result.error else []), *failures])
        if workspace.keep and workspace.path is not None:
            result.warnings.append(f"workspace kept at {workspace.path}")
        return graded

    def place(
        self, case: TestCase, workspace: CaseWorkspace | None, kind: str
    ) -> AgentPlace | None:
        """Where the target runs: None for a target that is not a ``cli`` agent. A model target
        answers as it would without a workspace, which its graders still get, as AgentV does
        (docs/agents.md, "Workspaces")."""
        if kind != "cli":
            return None
        try:
            files = tuple(str(p) for p in input_files(case, self.plan.loaded.folder.resolve()))
        except MissingInputFile as exc:
            raise TargetError(str(exc)) from None
        if workspace is None or workspace.path is None:
            return AgentPlace(files=files)
        folder, level = workspace.path, workspace.spec.sandbox
        masked = self._masked()
        readable = [Path(f) for f in files]
        return AgentPlace(
            cwd=folder,
            wrap=lambda argv: agent_wrap(level, argv, folder, masked, readable),
            files=files,
        )

    def _wrap_script(self, argv: Sequence[str], cwd: Path, workspace: Path) -> list[str]:
        """A setup or teardown script in the run's sandbox: it may write its workspace and
        read the eval file's folder (docs/agents.md, "The scripts' sandbox")."""
        level, folder = self.plan.sandbox.default, self.plan.loaded.folder.resolve()
        return script_wrap(level, argv, cwd, self._masked(), [folder], writable=workspace)

    def close(self) -> None:
        if self._root is not None and not self.plan.options.keep_workspaces:
            shutil.rmtree(self._root, ignore_errors=True)

    def _folder(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="workspaces-", dir=private_root()))
        return self._root


def _input_text(case: TestCase) -> str:
    users = [m.text() for m in case.input_messages if m.role == "user"]
    return users[-1] if users else ""
