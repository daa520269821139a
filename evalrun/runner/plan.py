"""What a run decides before anything starts: the cases, the targets, the checks, the sandbox.

Made once by :func:`plan_run`, so the run (``runner.py``) and the grading of a case
(``case_grader.py``) receive a checked plan instead of building one; a Ray worker makes its own
plan on its node, where the keys, programs and sandbox are the ones that count
(docs/distributed.md).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from evalrun import telemetry
from evalrun.launcher.sandbox import (
    Requested,
    SandboxPolicy,
    SandboxUnavailable,
    private_root,
    resolve_policy,
)
from evalrun.runner.options import RunOptions
from evalrun.runner.preflight import PreflightError, check_eval, survey_cases
from evalrun.runner.selection import SelectedCases, select_cases
from evalrun.spec.loader import LoadedEval
from evalrun.spec.models import GraderSpec, TestCase
from evalrun.targets import (
    ConfigError,
    LimitFactory,
    TargetPool,
    install_hint,
    load_targets,
    locate_targets_file,
)


@dataclass
class RunPlan:
    """A checked run: the selected cases, the named target and judge, the targets built on
    demand by ``pool``, and the sandbox every grader runs in."""

    loaded: LoadedEval
    options: RunOptions
    cases: SelectedCases
    target_name: str | None
    judge_name: str | None
    #: the targets.yaml the run reads (None when there is none)
    targets_path: Path | None
    pool: TargetPool
    sandbox: SandboxPolicy
    #: strict graders' folder for the proxy's Unix socket and their scratch (docs/security.md)
    private_dir: Path | None = None
    #: the targets of a matrix run, one column each, in order (docs/results.md, "A matrix
    #: run"); one, or none, otherwise
    targets: list[str] = field(default_factory=list)
    #: no judge was named, so each column's target is its own judge
    judge_follows_target: bool = False

    @property
    def matrix(self) -> bool:
        return len(self.targets) > 1

    def column(self, target: str) -> RunPlan:
        """The plan of one matrix column: ``target`` answers its cases (and judges them when
        no judge was named). It shares this plan's targets, cases and sandbox."""
        judge = target if self.judge_follows_target else self.judge_name
        return dataclasses.replace(self, target_name=target, judge_name=judge, targets=[target])

    def graders_for(self, case: TestCase) -> list[GraderSpec]:
        return [*self.loaded.spec.graders, *case.graders]

    @property
    def used_targets(self) -> list[str]:
        """The targets this run calls (the preflight has checked each one)."""
        names: list[str] = []
        answerers = self.targets or ([self.target_name] if self.target_name else [])
        if any(case.output is None for case in self.cases):
            names += answerers
        graders = [g for case in self.cases for g in self.graders_for(case)]
        graders += [g for case in self.cases for _, _, g in case.turn_graders]
        simulated = any(case.simulated_user is not None for case in self.cases)
        if simulated or any(g.needs_judge for g in graders):
            names += answerers if self.judge_follows_target else []
            names += [self.judge_name] if self.judge_name else []
        names += [n for g in graders if g.access is not None for n in g.access.allow or []]
        return list(dict.fromkeys(names))

    async def close(self) -> None:
        """Close the targets and remove the private folder (the run's last step)."""
        if self.private_dir is not None:
            shutil.rmtree(self.private_dir, ignore_errors=True)
        await self.pool.aclose()


def plan_run(
    loaded: LoadedEval, options: RunOptions, *, limit_for: LimitFactory | None = None
) -> RunPlan:
    """Select the cases, load the targets and make every check before anything starts
    (PreflightError, ConfigError: nothing ran). ``limit_for`` builds each target's concurrency
    limit (a Ray worker's holds for the whole cluster); None: the target's own adaptive one."""
    spec = loaded.spec
    cases = select_cases(
        loaded.tests,
        filters=options.filters,
        shard=options.shard,
        only_ids=options.only_ids,
        limit=options.limit,
    )
    targets = _answering_targets(options.target, spec.targets, spec.target)
    target_name = targets[0] if targets else None
    lookup = locate_targets_file(options.targets_file, loaded.folder)
    pool = TargetPool(load_targets(lookup.path), options.stores, limit_for=limit_for)
    judge = options.judge or spec.judge or target_name
    judge_name = pool.file.add_panel(judge) if isinstance(judge, list) else judge
    survey = survey_cases(loaded, cases)  # one pass: the cases may stream
    problems = check_eval(
        loaded,
        cases=cases,
        targets=pool.file,
        lookup=lookup,
        target=options.target,
        judge=options.judge,
        replay=options.stores.replay is not None,
        survey=survey,
    )
    if problems:
        raise PreflightError(problems)
    levels = {g.sandbox for _, g in survey.graders if not g.kind.in_process}
    levels |= {None} if survey.runs_scripts else set()  # scripts follow the run's level
    sandbox, private_dir = _sandbox_policy(options, lookup.path, levels)
    plan = RunPlan(
        loaded,
        options,
        cases,
        target_name,
        judge_name,
        lookup.path,
        pool,
        sandbox,
        private_dir,
        targets=targets,
        judge_follows_target=not (options.judge or spec.judge),
    )
    if options.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise ConfigError(f"--executor ray needs Ray: {install_hint('ray')}")
    if options.otel and not telemetry.available():
        raise ConfigError(f"--otel needs OpenTelemetry's SDK: {install_hint('otel')}")
    return plan


def _answering_targets(
    asked: str | list[str] | None, listed: list[str] | None, named: str | None
) -> list[str]:
    """The targets that answer, in column order: ``--target`` (repeatable), else the file's
    ``targets:``, else its ``target:``; a name given twice is one column."""
    if asked:
        return list(dict.fromkeys([asked] if isinstance(asked, str) else asked))
    if listed:
        return list(listed)
    return [named] if named else []


def _sandbox_policy(
    options: RunOptions, targets_path: Path | None, levels: set[Requested | None]
) -> tuple[SandboxPolicy, Path | None]:
    """Resolved before anything runs, so a level that cannot be had is a config error; with
    the private folder strict graders need, when they need one."""
    stores = options.stores
    own_files = [options.out, stores.cache_dir, stores.record, stores.replay, targets_path]
    if not levels:  # nothing runs as a process
        return SandboxPolicy(), None
    try:
        policy = resolve_policy(options.sandbox, levels, [p for p in own_files if p is not None])
    except SandboxUnavailable as exc:
        raise ConfigError(str(exc)) from None
    if not policy.isolates_network:
        return policy, None
    # strict graders: the proxy's Unix socket and their scratch folders live here, in the
    # folder every sandbox masks (docs/security.md, "Grader sandbox")
    private_dir = Path(tempfile.mkdtemp(prefix="run-", dir=private_root()))
    (private_dir / "tmp").mkdir()
    return dataclasses.replace(policy, scratch=private_dir / "tmp"), private_dir
