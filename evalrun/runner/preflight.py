"""Every check a run can make without the network, made before anything starts.

``evalrun validate`` and ``evalrun run`` share these checks (docs/eval-files.md), so a file that
validates does not trip on them later: each problem is one ``file:line: key: message`` line
(a command-line option stands in for the file when it supplied the value), and all of them are
reported at once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrun.launcher.environment import own_python
from evalrun.launcher.sandbox import why_unavailable
from evalrun.spec.loader import LoadedEval
from evalrun.spec.models import GraderSpec, TestCase
from evalrun.spec.tools import ToolSpec, choice_problem, tools_for
from evalrun.spec.workspace import WorkspaceSpec, merged
from evalrun.suggest import closest, did_you_mean
from evalrun.targets import (
    ConfigError,
    TargetNotConfigured,
    TargetsFile,
    TargetsLookup,
    kind_of,
    kinds,
    missing_extra,
)
from evalrun.workspaces.checks import workspace_problems

#: Programs people usually start graders with; a misspelt one gets "did you mean".
USUAL_PROGRAMS = ("python", "python3", "node", "bun", "deno", "bash", "sh", "npx", "uv", "ruby")
#: Arguments with these endings are scripts the grader needs; they must exist.
SCRIPT_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".mts", ".sh", ".rb", ".pl", ".php")


class PreflightError(ConfigError):
    """The run cannot start; ``problems`` lists every reason (one line each)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class _Use:
    """A target name and where it was asked for (``--target`` or ``file:line: key``)."""

    name: str
    where: str


@dataclass
class CaseSurvey:
    """What the checks need of the cases, gathered in one pass: the cases may stream from a
    file, and each pass reads it again (docs/performance.md)."""

    #: Each grader once, with its key path; suite graders first.
    graders: list[tuple[tuple[Any, ...], GraderSpec]] = field(default_factory=list)
    #: Some case has no recorded output, so the target must answer it.
    needs_target: bool = False
    #: Each tool once, with its key path; suite tools first (docs/agents.md).
    tools: list[tuple[tuple[Any, ...], ToolSpec]] = field(default_factory=list)
    #: Some case has a simulated user, who speaks through the judge (docs/agents.md).
    needs_judge: bool = False
    #: Where the first workspace that sandboxes its agent is declared (docs/agents.md).
    sandboxed_workspace: tuple[Any, ...] | None = None
    #: Some workspace has setup or teardown scripts (docs/agents.md, "The scripts' sandbox").
    workspace_scripts: bool = False
    #: Each ``tool_choice`` its case's tools cannot take, where it is set (docs/agents.md).
    choices: list[tuple[tuple[Any, ...], str]] = field(default_factory=list)

    @property
    def runs_scripts(self) -> bool:
        """The run starts scripts of the eval file besides its graders: the run's sandbox
        holds them too."""
        return self.workspace_scripts or any(tool.argv for _, tool in self.tools)


def survey_cases(loaded: LoadedEval, cases: Iterable[TestCase]) -> CaseSurvey:
    survey = CaseSurvey([(("graders", i), g) for i, g in enumerate(loaded.spec.graders)])
    survey.tools = [(("tools", i), t) for i, t in enumerate(loaded.spec.tools)]
    for case in cases:
        survey.needs_target = survey.needs_target or case.output is None
        workspace = merged(loaded.spec.workspace, case.workspace)
        if workspace is not None:
            survey.workspace_scripts |= bool(workspace.setup or workspace.teardown)
            if workspace.sandbox != "none" and survey.sandboxed_workspace is None:
                declared = (
                    case.workspace is not None and "sandbox" in case.workspace.model_fields_set
                )
                survey.sandboxed_workspace = ("tests", case.index) if declared else ()
        survey.needs_judge = survey.needs_judge or case.simulated_user is not None
        survey.graders += [
            (("tests", case.index, "graders", j), g) for j, g in enumerate(case.graders)
        ]
        survey.tools += [(("tests", case.index, "tools", j), t) for j, t in enumerate(case.tools)]
        choice = case.tool_choice or loaded.spec.tool_choice
        problem = choice and choice_problem(choice, tools_for(loaded.spec.tools, case.tools))
        if problem:
            at = ("tests", case.index) if case.tool_choice is not None else ()
            survey.choices.append(((*at, "tool_choice"), problem))
        survey.graders += [
            (("tests", case.index, "turns", i, "graders", j), g) for i, j, g in case.turn_graders
        ]
    return survey


def check_eval(
    loaded: LoadedEval,
    *,
    cases: Iterable[TestCase],
    targets: TargetsFile,
    lookup: TargetsLookup,
    target: str | list[str] | None = None,
    judge: str | None = None,
    replay: bool = False,
    env: Mapping[str, str] | None = None,
    need_target: bool = True,
    survey: CaseSurvey | None = None,
) -> list[str]:
    """Problems the run would trip on: unknown targets, unset keys, missing extras, grader
    programs or scripts that are not there, a rubric that cannot be found. ``validate`` passes
    ``need_target=False``: a file may leave the target to ``--target`` at run time."""
    env = os.environ if env is None else env
    survey = survey or survey_cases(loaded, cases)
    problems = _check_targets(
        loaded, survey, targets, lookup, target, judge, replay, env, need_target
    )
    problems += _check_graders(loaded, survey, env)
    problems += _check_tools(loaded, survey, targets, target, env)
    problems += _check_rubric(loaded)
    problems += _check_workspaces(loaded)
    problems += _check_agent_sandbox(loaded, survey)
    problems += [f"{loaded.where(at)}: {message}" for at, message in survey.choices]
    return list(dict.fromkeys(problems))


def _check_agent_sandbox(loaded: LoadedEval, survey: CaseSurvey) -> list[str]:
    """A workspace whose agent must run in a sandbox this machine cannot give stops the run
    once, before any case (docs/agents.md, "The agent's sandbox")."""
    at = survey.sandboxed_workspace
    if at is None or (reason := why_unavailable()) is None:
        return []
    return [
        f"{loaded.where((*at, 'workspace', 'sandbox'))}: the agent's sandbox cannot be had: "
        f"{reason} (workspace.sandbox: none runs the agent without one)"
    ]


def _check_workspaces(loaded: LoadedEval) -> list[str]:
    """The suite's workspace and those of the tests listed in the file (docs/agents.md)."""
    holders: list[tuple[tuple[Any, ...], WorkspaceSpec | None]] = [((), loaded.spec.workspace)]
    if isinstance(loaded.spec.tests, list):
        holders += [(("tests", i), case.workspace) for i, case in enumerate(loaded.spec.tests)]
    return [
        f"{loaded.where((*at, 'workspace', *key))}: {message}"
        for at, spec in holders
        if spec is not None
        for key, message in workspace_problems(spec, loaded.folder)
    ]


def _check_targets(
    loaded: LoadedEval,
    survey: CaseSurvey,
    targets: TargetsFile,
    lookup: TargetsLookup,
    target: str | list[str] | None,
    judge: str | None,
    replay: bool,
    env: Mapping[str, str],
    need_target: bool,
) -> list[str]:
    spec = loaded.spec
    answerers = _answerers(loaded, target)
    uses: list[_Use] = []
    problems: list[str] = []
    configured = ", ".join(targets.names)
    if survey.needs_target:
        if not answerers and need_target:
            problems.append(
                f"{loaded.path}: target: no target to answer the cases: set 'target:' in the "
                f"eval file or pass --target (configured: {configured})"
            )
        uses += answerers
    graders = survey.graders
    if survey.needs_judge or any(g.needs_judge for _, g in graders):
        if isinstance(spec.judge, list) and not judge:  # a panel: each member must be usable
            uses += [_Use(m, loaded.where(("judge", k))) for k, m in enumerate(spec.judge)]
        else:  # the judge defaults to the target: to each of a matrix's targets
            chosen = (
                [_Use(judge, "--judge")]
                if judge
                else [_Use(spec.judge, loaded.where(("judge",)))]
                if isinstance(spec.judge, str)
                else answerers
            )
            if not chosen and need_target:
                problems.append(
                    f"{loaded.path}: judge: graders need a judge: set 'judge:' or 'target:' in "
                    f"the eval file or pass --judge (configured: {configured})"
                )
            uses += chosen
    for loc, grader in graders:
        access = grader.access
        for k, name in enumerate((access.allow or []) if access else []):
            uses.append(_Use(name, loaded.where((*loc, "target", "allow", k))))
    checked: set[str] = set()
    unknown = False
    for use in uses:
        if use.name in checked:
            continue
        checked.add(use.name)
        try:
            problem = _target_problem(use.name, targets, replay, env)
        except TargetNotConfigured as exc:
            problem, unknown = str(exc), True
        if problem:
            problems.append(f"{use.where}: {problem}")
    if unknown:  # say once which targets file was read, or where none was found
        problems.append(f"{loaded.path}: targets: {lookup.describe()}")
    return problems


def _answerers(loaded: LoadedEval, target: str | list[str] | None) -> list[_Use]:
    """The targets that answer the cases, each with where it was asked for: ``--target``
    (given twice or more: a matrix run), else the file's ``targets:`` or ``target:``."""
    if target:
        return [
            _Use(name, "--target") for name in ([target] if isinstance(target, str) else target)
        ]
    spec = loaded.spec
    if spec.targets:
        return [_Use(name, loaded.where(("targets", k))) for k, name in enumerate(spec.targets)]
    return [_Use(spec.target, loaded.where(("target",)))] if spec.target else []


def _target_problem(
    name: str, targets: TargetsFile, replay: bool, env: Mapping[str, str]
) -> str | None:
    config = targets.get(name)
    if config.kind == "panel":
        members = config.extra("members") or []
        if not members:
            return f"panel '{name}' has no members (members: [target, ...])"
        found = [_target_problem(m, targets, replay, env) for m in members]
        return "; ".join(p for p in found if p) or None
    if replay:
        return None  # a replayed run makes no live call: no key, no model
    try:
        config.resolve_secret(env)
    except ConfigError as exc:
        return str(exc)
    return missing_extra(config)


def _check_graders(loaded: LoadedEval, survey: CaseSurvey, env: Mapping[str, str]) -> list[str]:
    problems = []
    for loc, grader in survey.graders:
        if grader.kind.runs != "command":
            continue  # only the eval file's own commands can be missing (docs/architecture.md)
        folder = loaded.folder / grader.cwd if grader.cwd else loaded.folder
        if grader.cwd and not folder.is_dir():
            problems.append(f"{loaded.where((*loc, 'cwd'))}: folder not found: {folder}")
            continue
        argv = own_python(grader.argv)  # `python` is evalrun's own: no PATH lookup
        where = loaded.where((*loc, "command"))
        program = _program_problem(argv[0], loaded.folder, folder, env)
        if program:
            problems.append(f"{where}: {program}")
        for part in argv[1:]:
            script = _script_problem(part, loaded.folder, folder)
            if script:
                problems.append(f"{where}: {script}")
    return problems


def _check_tools(
    loaded: LoadedEval,
    survey: CaseSurvey,
    targets: TargetsFile,
    target: str | list[str] | None,
    env: Mapping[str, str],
) -> list[str]:
    """Tools need target kinds that can call them (each of a matrix's targets), and their
    scripts must be there (docs/agents.md, "Model targets with tools")."""
    if not survey.tools:
        return []
    problems = []
    for use in _answerers(loaded, target):
        name = use.name
        config = targets.get(name) if name in targets.names else None
        if config is not None and not kind_of(config).tools:
            problems.append(
                f"{loaded.where(survey.tools[0][0])}: tools are offered, but target '{name}' "
                f"({config.kind}) cannot call tools: use a target of kind "
                + ", ".join(n for n, k in kinds().items() if k.tools)
            )
    for loc, tool in survey.tools:
        argv = own_python(tool.argv or [])
        if not argv:
            continue
        where = loaded.where((*loc, "command"))
        program = _program_problem(argv[0], loaded.folder, loaded.folder, env)
        problems += [f"{where}: {program}"] if program else []
        for part in argv[1:]:
            script = _script_problem(part, loaded.folder, loaded.folder)
            problems += [f"{where}: {script}"] if script else []
    return problems


def _program_problem(program: str, eval_dir: Path, cwd: Path, env: Mapping[str, str]) -> str | None:
    if "/" in program:
        if _exists(program, eval_dir, cwd):
            return None
        return f"program '{program}' not found in the eval file's folder ({eval_dir.resolve()})"
    if shutil.which(program, path=env.get("PATH")):
        return None
    usual = [p for p in USUAL_PROGRAMS if shutil.which(p, path=env.get("PATH"))]
    return f"program '{program}' is not on PATH{did_you_mean(program, usual)}"


def _script_problem(part: str, eval_dir: Path, cwd: Path) -> str | None:
    looks_like_script = part.endswith(SCRIPT_SUFFIXES) or part.startswith("./")
    if part.startswith("-") or "://" in part or not looks_like_script:
        return None
    if _exists(part, eval_dir, cwd):
        return None
    path = Path(part)
    folder = path.parent if path.is_absolute() else eval_dir / path.parent
    siblings = [p.name for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    match = closest(path.name, siblings)
    hint = f"; did you mean '{path.parent / match}'?" if match else ""
    return f"script '{part}' not found in the eval file's folder ({eval_dir.resolve()}){hint}"


def _exists(part: str, eval_dir: Path, cwd: Path) -> bool:
    path = Path(part)
    if path.is_absolute():
        return path.exists()
    return (eval_dir / path).exists() or (cwd / path).exists()


def _check_rubric(loaded: LoadedEval) -> list[str]:
    rubric = loaded.spec.rubric
    if not rubric:
        return []
    from evalrun.rubric import RubricError, list_rubrics, rubric_for_eval

    try:
        rubric_for_eval(rubric, loaded.folder)
    except (RubricError, OSError) as exc:
        local = loaded.folder / "rubrics"
        names = [e.name for e in list_rubrics(local if local.is_dir() else None)]
        return [f"{loaded.where(('rubric',))}: {exc}{did_you_mean(rubric, names)}"]
    return []
