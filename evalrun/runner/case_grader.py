"""The grading of one case: the target's answer (unless the case carries an output), every
grader as a process beside this process's judge proxy, and the case's score and status.

The local executor is a ``CaseGrader``, and each Ray worker holds one of its own
(docs/distributed.md), so both grade a case the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from evalrun import telemetry
from evalrun.judgecall import JudgeCall
from evalrun.launcher.environment import agentv_run_variables
from evalrun.launcher.launch import GraderRun, LaunchContext, launch_grader
from evalrun.launcher.pools import GraderPools
from evalrun.launcher.sandbox import private_root
from evalrun.results.agentv_scoring import agentv_case, required_minimum
from evalrun.results.models import CaseResult, CaseUsage, GraderOutcome, TargetUsage
from evalrun.results.scoring import case_score, case_status
from evalrun.runner.conversation import conversation_id, converse, target_usage
from evalrun.runner.plan import RunPlan
from evalrun.runner.simulated_user import SimulatedUser
from evalrun.runner.tooluse import tool_use_for
from evalrun.runner.workspace_step import RunWorkspaces
from evalrun.safetext import repaired_note
from evalrun.spec.models import GraderSpec, TestCase, as_messages
from evalrun.targets import (
    CompletionRequest,
    TargetError,
    ToolLoopError,
    run_tool_loop,
)
from evalrun.transcripts import Transcript
from evalrun.workspaces import CaseWorkspace, FinalWorkspace
from evalrun.workspaces.inputs import agent_text

if TYPE_CHECKING:
    from proxy import JudgeProxy


class CaseGrader:
    """Grades cases of one plan in this process; owns the judge proxy and the stream-mode
    graders, which :meth:`aclose` stops (the plan's targets are closed by whoever made it)."""

    def __init__(
        self,
        plan: RunPlan,
        spans: telemetry.Telemetry = telemetry.OFF,
        *,
        bundle_dir: Path | None = None,
    ) -> None:
        self.plan = plan
        #: the run's spans (docs/otel.md); off on a Ray worker
        self.telemetry = spans
        self._proxy: JudgeProxy | None = None
        self._proxy_lock = asyncio.Lock()
        self._pools = GraderPools(plan.options.workers, plan.options.max_processes)
        self._workspaces = RunWorkspaces(plan, lambda: self._agent_masks())
        self._ctx = LaunchContext(
            eval_dir=plan.loaded.folder.resolve(),
            judge=plan.judge_name,
            secret_names=plan.pool.secret_env_names(),
            proxy=self._get_proxy,
            sandbox=plan.sandbox,
            pools=self._pools,
            wire="agentv" if plan.loaded.agentv else "evalrun",
            agentv_rules=plan.loaded.agentv,
            run_env={}
            if bundle_dir is None
            else agentv_run_variables(
                bundle_dir.resolve(), plan.loaded.spec.name or plan.loaded.name
            ),
        )

    async def grade(self, case: TestCase, repeat: int) -> tuple[CaseResult, list[JudgeCall]]:
        """Answer one case with the target and run its graders: always one result. A case
        with a workspace is graded inside it (docs/agents.md, "Workspaces")."""
        spec = self._workspaces.spec_for(case)
        if spec is None:
            return await self._grade(case, repeat, None)

        def failed(error: str) -> CaseResult:
            result = CaseResult(
                id=case.id,
                status="error",
                repeat=repeat,
                target=self.plan.target_name,
                prompt=case.prompt,
            )
            result.line, result.error = case.line, error
            return result

        return await self._workspaces.around(
            case, spec, failed, lambda workspace: self._grade(case, repeat, workspace)
        )

    async def _grade(
        self, case: TestCase, repeat: int, workspace: CaseWorkspace | None
    ) -> tuple[CaseResult, list[JudgeCall]]:
        started = time.monotonic()
        target_name = self.plan.target_name
        result = CaseResult(
            id=case.id,
            status="error",
            repeat=repeat,
            target=target_name,
            line=case.line,
            prompt=case.prompt,
        )
        result.conversation_id = conversation_id(case)
        calls: list[JudgeCall] = []
        if case.multi_turn:
            return await self._converse(case, repeat, result, started, workspace)
        try:
            output, target_ms, usage, repaired, transcript = await self._answer(case, workspace)
            result.output = output
            result.transcript = transcript.to_dict() if transcript else None
            if repaired:
                result.warnings.append(repaired_note(repaired, "the target's answer"))
            result.timings.target_ms = round(target_ms, 1)
            result.usage.target = usage
        except TargetError as exc:
            result.error = f"target '{exc.target or target_name}' failed: {exc.message}"
            if isinstance(exc, ToolLoopError):  # the steps made before it stopped, and their cost
                result.transcript = exc.transcript.to_dict()
                result.usage.target = target_usage(exc.spent)
            result.timings.total_ms = _since(started)
            return result, calls
        final = await workspace.final() if workspace is not None else None
        try:
            runs = await self._run_graders(
                self.plan.graders_for(case), case, output, transcript, repeat, final
            )
        except Exception as exc:  # a bug of ours must still leave one result for the case
            result.error = f"internal error while grading: {type(exc).__name__}: {exc}"
            result.timings.total_ms = _since(started)
            return result, calls
        result.graders = [r.result for r in runs]
        for run in runs:
            calls += run.judge_calls
        if self.plan.loaded.agentv and not self.plan.loaded.spec.rubric:
            gates = [
                required_minimum(
                    g.required, g.threshold if "threshold" in g.model_fields_set else None
                )
                for g in self.plan.graders_for(case)
            ]
            result.score, result.status = agentv_case(result.graders, gates)
        else:
            result.score = self._score(result.graders)
            result.status = case_status(result.graders)
        if not result.graders:
            result.error = "no graders apply to this case"
        result.usage.judge = CaseUsage.judge_of(result.graders)
        result.timings.total_ms = _since(started)
        return result, calls

    async def _run_graders(
        self,
        graders: list[GraderSpec],
        case: TestCase,
        output: str | None,
        transcript: Transcript | None,
        repeat: int,
        workspace: FinalWorkspace | None = None,
    ) -> list[GraderRun]:
        return list(
            await asyncio.gather(
                *(
                    self.telemetry.grader(
                        launch_grader(g, case, output, self._ctx, repeat, transcript, workspace)
                    )
                    for g in graders
                )
            )
        )

    async def _converse(
        self,
        case: TestCase,
        repeat: int,
        result: CaseResult,
        started: float,
        workspace: CaseWorkspace | None,
    ) -> tuple[CaseResult, list[JudgeCall]]:
        """A multi-turn test, turn by turn (``conversation.py``): always one result; an agent
        with a workspace answers every turn in it."""

        async def answer(
            turn: TestCase,
        ) -> tuple[str | None, float, TargetUsage | None, int, Transcript | None]:
            return await self._answer(turn, workspace)

        async def grade(
            graders: list[GraderSpec], seen: TestCase, output: str | None, t: Transcript | None
        ) -> list[GraderRun]:
            return await self._run_graders(graders, seen, output, t, repeat)

        user = None
        try:
            if case.simulated_user is not None and self.plan.judge_name is not None:
                judge = self.plan.pool.get(self.plan.judge_name)
                user = SimulatedUser(
                    case.simulated_user, judge, self.plan.judge_name, case.id, repeat
                )
            calls = await converse(
                case,
                result,
                answer=answer,
                grade=grade,
                score=self._score,
                conversation_graders=self.plan.graders_for(case),
                next_user=user,
            )
        except Exception as exc:  # a bug of ours must still leave one result for the case
            result.status, result.score = "error", None
            result.error = f"internal error while grading: {type(exc).__name__}: {exc}"
            calls = []
        if result.graders or user is not None:
            result.usage.judge = CaseUsage.judge_of(result.graders)
            if user is not None:
                user.count_in(result.usage.judge)
                calls = [*user.calls, *calls]
        result.timings.total_ms = _since(started)
        return result, calls

    async def aclose(self) -> None:
        """Stop the stream-mode graders and the proxy; remove the run's workspaces."""
        self._workspaces.close()
        await self._pools.close()
        if self._proxy is not None:
            await self._proxy.stop()
            self._proxy = None

    async def _get_proxy(self) -> JudgeProxy:
        """The judge proxy, started on first use (a run without judged graders never imports
        it)."""
        async with self._proxy_lock:
            if self._proxy is None:
                from evalrun.runner.judging import judge_proxy

                unix_socket = None
                if self.plan.private_dir is not None:  # strict graders reach it through this
                    unix_socket = self.plan.private_dir / "proxy.sock"
                proxy = judge_proxy(self.plan.pool, unix_socket=unix_socket)
                if self.plan.judge_name is not None:
                    threading.Thread(
                        target=self._prebuild, args=(self.plan.judge_name,), daemon=True
                    ).start()
                await proxy.start()
                self._proxy = proxy
            return self._proxy

    def _agent_masks(self) -> tuple[Path, ...]:
        """What an agent's sandbox hides: what graders' sandboxes hide, and the run's own files
        even when no grader runs as a process (docs/agents.md, "The agent's sandbox")."""
        options = self.plan.options
        own = (options.out, options.stores.cache_dir, options.stores.record, self.plan.targets_path)
        paths = [*self._ctx.sandbox.masked, private_root(), *(p for p in own if p is not None)]
        return tuple(dict.fromkeys(Path(p).resolve() for p in paths))

    def _prebuild(self, name: str) -> None:
        """Build a target off the loop: its provider's imports (httpx and its kin, ~0.1-0.2 s)
        then overlap the graders' start instead of holding up the first judge call. A target
        that fails to build says so again when the proxy asks for it."""
        with contextlib.suppress(Exception):
            self.plan.pool.get(name)

    def _score(self, graders: list[GraderOutcome]) -> float | None:
        loaded = self.plan.loaded
        rubric = loaded.spec.rubric
        if rubric:
            from evalrun.rubric import combine_grader_scores

            scored = {g.name: g.score for g in graders if g.score is not None}
            return combine_grader_scores(rubric, scored, base_dir=loaded.folder)
        return case_score(graders)

    async def _answer(
        self, case: TestCase, workspace: CaseWorkspace | None = None
    ) -> tuple[str | None, float, TargetUsage | None, int, Transcript | None]:
        """The answer, its latency, usage, how many lone surrogates were repaired in it, and
        the agent's transcript when the target reads one (docs/agents.md); a ``cli`` agent
        runs in the case's workspace and reads its input files (docs/agents.md)."""
        if case.output is not None:
            messages = as_messages(case.output, "assistant")
            texts = [m.text() for m in messages if m.role == "assistant" and m.text()]
            return (texts[-1] if texts else ""), 0.0, None, 0, None
        target_name = self.plan.target_name
        assert target_name is not None
        target = self.plan.pool.get(target_name)
        place = self._workspaces.place(case, workspace, getattr(target, "kind", ""))
        folder = self.plan.loaded.folder.resolve()
        system = [m.text() for m in case.input_messages if m.role == "system"]
        request = CompletionRequest(
            messages=[
                {
                    "role": m.role,
                    "content": agent_text(m, folder) if place is not None else m.text(),
                }
                for m in case.input_messages
                if m.role != "system"
            ],
            system_prompt="\n\n".join(system) or None,
            agent=place,
        )
        with self.telemetry.target_call(
            target_name, request.messages, request.system_prompt
        ) as answered:
            tools = tool_use_for(self.plan, case, self._agent_masks())
            if tools is None:
                response = await target.complete(request)
            else:  # docs/agents.md, "Model targets with tools"
                response = await run_tool_loop(target, request, tools.toolbox, tools.max_turns)
            usage = target_usage(response)
            answered(usage.to_dict(), response.text, response.model)
        return response.text, response.latency_ms, usage, response.repaired, response.transcript


def _since(started: float) -> float:
    """Milliseconds since ``started`` (``time.monotonic``), as results.jsonl keeps them."""
    return round((time.monotonic() - started) * 1000, 1)
