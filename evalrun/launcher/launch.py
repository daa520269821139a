"""Run one grader for one case: deterministic graders in-process, script graders as a child
process holding a proxy grant that dies with it."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalrun.argvpaths import absolute_paths
from evalrun.judgecall import JudgeCall
from evalrun.launcher.bytecode import strict_binds
from evalrun.launcher.deterministic import run_deterministic
from evalrun.launcher.environment import grader_environment, own_python, proxy_variables
from evalrun.launcher.issuer import GrantIssuer, IssuedGrant, StartIssuer
from evalrun.launcher.payload import Wire, payload_for
from evalrun.launcher.pools import GraderPools
from evalrun.launcher.process import ProcessOutcome, run_process
from evalrun.launcher.protocol import as_agentv_failure, interpret
from evalrun.launcher.sandbox import ProxyRoute, SandboxPolicy
from evalrun.launcher.serve import case_line
from evalrun.results.agentv_scoring import AGENTV_THRESHOLD
from evalrun.results.models import GraderOutcome, ProxyUsage
from evalrun.spec.models import GraderSpec, TestCase
from evalrun.transcripts import Transcript
from evalrun.workspaces import FinalWorkspace


@dataclass
class LaunchContext:
    eval_dir: Path
    judge: str | None
    secret_names: set[str] = field(default_factory=set)
    #: Starts the judge proxy on first use and returns it.
    proxy: StartIssuer | None = None
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    #: Stream-mode workers; without them every grader runs one process per case.
    pools: GraderPools | None = None
    #: The payload command graders read: AgentV's for an AgentV file (docs/grader-protocol.md).
    wire: Wire = "evalrun"
    #: AgentV's verdict rules for command graders (AgentV files only, docs/grader-protocol.md,
    #: "AgentV files"): pass at score 0.8 unless the grader says, and a failure scores 0.
    agentv_rules: bool = False
    #: Variables every grader of the run gets (AGENTV_RUN_DIR and its kin).
    run_env: dict[str, str] = field(default_factory=dict)


@dataclass
class GraderRun:
    result: GraderOutcome
    judge_calls: list[JudgeCall] = field(default_factory=list)


def grader_argv(spec: GraderSpec) -> list[str]:
    """A built-in runs with evalrun's own interpreter; any other grader is its ``command``,
    ``python`` in it meaning that interpreter too (:func:`own_python`)."""
    module = spec.kind.module
    return [sys.executable, "-m", module] if module else own_python(spec.argv)


def grader_wire(spec: GraderSpec, ctx: LaunchContext) -> Wire:
    """The run's payload generation for a command grader; a built-in is evalrun's own grader
    and always reads evalrun's payload (docs/grader-protocol.md, "Payload generations")."""
    return ctx.wire if spec.kind.runs == "command" else "evalrun"


async def launch_grader(
    spec: GraderSpec,
    case: TestCase,
    output: str | None,
    ctx: LaunchContext,
    attempt: int = 0,
    transcript: Transcript | None = None,
    workspace: FinalWorkspace | None = None,
) -> GraderRun:
    """Grade ``output`` with one grader: in-process for a check, else a child process (or a
    stream-mode worker) with its own proxy grant (the SDK's ``run_grader`` is the other end).
    A per-process grader of a case with a ``workspace`` may read it (docs/agents.md)."""
    if spec.kind.in_process:
        return GraderRun(run_deterministic(spec, output, transcript, case.expected_messages))
    access = spec.access
    wire = grader_wire(spec, ctx)
    payload = payload_for(wire, case, spec, output, attempt, transcript, workspace)
    cwd = ctx.eval_dir / spec.cwd if spec.cwd else ctx.eval_dir
    grant: IssuedGrant | None = None
    proxy: GrantIssuer[Any] | None = None
    if access is not None and ctx.proxy is not None and ctx.judge is not None:
        proxy = await ctx.proxy()
        grant = proxy.grant(
            default_target=ctx.judge,
            max_calls=access.max_calls,
            allowed=None if access.allow is None else [ctx.judge, *access.allow],
            grader=spec.name or "",
            case_id=case.id,
        )
    try:
        readable = [workspace.path] if workspace is not None else []
        outcome = await _launch(spec, payload, cwd, ctx, proxy, grant, readable)
    finally:
        if grant is not None and proxy is not None:
            proxy.revoke(grant)
    agentv = ctx.agentv_rules and spec.kind.runs == "command"
    # AgentV's pass mark unless the file set one (docs/grader-protocol.md, "AgentV files")
    own = "threshold" in spec.model_fields_set
    threshold = AGENTV_THRESHOLD if agentv and not own else spec.threshold
    result = interpret(
        outcome, name=spec.name or spec.type, threshold=threshold, weight=spec.weight
    )
    if agentv and result.status == "error":
        as_agentv_failure(result)
    calls: list[JudgeCall] = []
    if grant is not None and proxy is not None:
        _redact(result, proxy, grant.token)
        result.proxy = ProxyUsage(**grant.usage())
        calls = list(grant.records)
    return GraderRun(result, calls)


def _redact(result: GraderOutcome, proxy: GrantIssuer[Any], token: str) -> None:
    """The grant's token and provider keys never reach the bundle, even if a grader prints
    them (docs/security.md)."""
    result.reason = proxy.redact(result.reason, token)
    result.stderr_tail = proxy.redact(result.stderr_tail, token)
    result.hits = proxy.redact(result.hits, token)
    result.misses = proxy.redact(result.misses, token)
    result.checks = proxy.redact(result.checks, token)
    result.details = proxy.redact(result.details, token)
    result.warnings = proxy.redact(result.warnings, token)  # they quote stray stdout lines


async def _launch(
    spec: GraderSpec,
    payload: dict[str, Any],
    cwd: Path,
    ctx: LaunchContext,
    proxy: GrantIssuer[Any] | None,
    grant: IssuedGrant | None,
    readable: list[Path],
) -> ProcessOutcome:
    """Run the case in a served worker or in a process of its own; the grant lives meanwhile."""
    sandbox = ctx.sandbox.for_grader(spec.sandbox)
    if sandbox.level == "strict":
        sandbox = replace(sandbox, binds=strict_binds(os.environ))
    route = None
    if proxy is not None and proxy.port is not None and proxy.unix_socket is not None:
        route = ProxyRoute(proxy.port, proxy.unix_socket)
    command = _resolve_argv(grader_argv(spec), ctx.eval_dir)
    per_case = (
        proxy_variables(proxy.url, grant.token) if proxy is not None and grant is not None else {}
    )
    if ctx.pools is not None and spec.run_mode == "serve" and spec.kind.module is not None:
        hosts = ctx.pools.hosts(
            cwd,
            spec.env,
            lambda: {
                **grader_environment(secret_names=ctx.secret_names, allow=spec.env),
                **ctx.run_env,
            },
            sandbox=sandbox,
            route=route,
        )
        return await hosts.run(spec.kind.module, payload, per_case, spec.timeout)
    if ctx.pools is not None and spec.run_mode == "serve":
        pool = ctx.pools.pool(
            command,
            cwd,
            spec.env,
            lambda: {
                **grader_environment(secret_names=ctx.secret_names, allow=spec.env),
                **ctx.run_env,
            },
            sandbox=sandbox,
            route=route,
        )
        return await pool.run(case_line(payload, per_case), spec.timeout)
    argv = sandbox.wrap(command, cwd, route, readable)
    env = {
        **grader_environment(secret_names=ctx.secret_names, allow=spec.env),
        **ctx.run_env,
        **per_case,
    }
    stdin = json.dumps(payload, ensure_ascii=False).encode()
    if ctx.pools is None:
        outcome = await run_process(argv, stdin, cwd=cwd, env=env, timeout=spec.timeout)
    else:
        async with ctx.pools.one_shot.place():
            outcome = await run_process(argv, stdin, cwd=cwd, env=env, timeout=spec.timeout)
    outcome.exit_code = sandbox.exit_status(outcome.exit_code)
    return outcome


def _resolve_argv(argv: list[str], eval_dir: Path) -> list[str]:
    """Relative paths in argv resolve from the eval file's folder (docs/eval-files.md), bare
    names after the program too (``python grader.py``): a ``strict`` grader runs in a scratch
    folder of its own, not there. A bare program name stays a PATH lookup."""
    return absolute_paths(argv, eval_dir)
