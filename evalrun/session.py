"""One run of an eval from start to bundle: the core that ``evalrun run`` and ``evalrun.run``
both call, so the command line and the Python API check, select, run and report alike
(docs/python-api.md). What it has to say on the way goes to ``say``; the caller prints it or
keeps it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evalrun.errors import ConfigError, EvalrunError, ExitCode, UserError
from evalrun.launcher import bytecode
from evalrun.launcher.sandbox import LEVELS as SANDBOX_LEVELS
from evalrun.results.bundle import BundleError, BundleWriter
from evalrun.results.scan import ResultScan
from evalrun.results.stats import RUN_SEED
from evalrun.runner.options import DEFAULT_REPORT_FORMATS, RunOptions
from evalrun.runner.preflight import PreflightError
from evalrun.runner.selection import parse_shard, select_cases
from evalrun.safetext import printable
from evalrun.spec.loader import EvalFileError, LoadedEval
from evalrun.suggest import closest
from evalrun.targets import StoreOptions, install_hint
from evalrun.yamlsource import SourceError

if TYPE_CHECKING:
    from evalrun.reporters.drafts import ReportDrafts
    from evalrun.runner.runner import EvalRun, RunOutcome

Say = Callable[[str], None]


class EvalError(UserError):
    """The run did not start (the command line's exit 2): a bad eval file, option, target or
    bundle folder. ``problems`` are the lines the command line prints, each ``file:line: key:
    message`` where the problem has a place; ``summary`` is its closing line when there are
    several (``the run did not start: 2 problems above``)."""

    def __init__(self, problems: list[str], summary: str | None = None) -> None:
        self.problems = problems
        self.summary = summary
        super().__init__("\n".join([*problems, *([summary] if summary else [])]))


class NothingToRun(EvalrunError):
    """``rerun_failed`` names a bundle where no case failed: not an error (exit 0)."""


class RunSettings(BaseModel):
    """The run command's options, with its defaults and limits (``evalrun run --help``); the
    Python API validates its keyword arguments here (docs/python-api.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: several: a matrix run, one column per target (docs/results.md, "A matrix run")
    target: str | list[str] | None = None
    judge: str | None = None
    targets: Path | None = None
    workers: int = Field(4, ge=1)
    #: the cap on the eval's own graders' processes (docs/performance.md, "Process cap")
    max_processes: int | None = Field(None, ge=1)
    filter: list[str] = Field(default_factory=list)
    out: Path | None = None
    #: where a bundle without ``--out`` goes, in a folder of its own (``<time>-<eval>``)
    runs_dir: Path = Path(".evalrun/runs")
    repeat: int = Field(1, ge=1)
    threshold: float | None = None
    max_errors: int = Field(0, ge=0)
    shard: str | None = None
    limit: int | None = Field(None, ge=1)
    resume: Path | None = None
    rerun_failed: Path | None = None
    no_cache: bool = False
    cache_dir: Path = Path(".evalrun/cache")
    record: Path | None = None
    replay: Path | None = None
    quiet: bool = False
    sandbox: Literal[SANDBOX_LEVELS] = "auto"  # type: ignore[valid-type]
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    otel: bool = False
    #: bootstrap seed of the score interval (docs/config.md "Randomness")
    seed: int = RUN_SEED
    #: the reports written into the bundle (docs/reports.md); ``agentv`` is AgentV's layout
    format: list[str] = Field(default_factory=lambda: list(DEFAULT_REPORT_FORMATS))

    @field_validator("format")
    @classmethod
    def _known_formats(cls, value: list[str]) -> list[str]:
        try:
            from evalrun.reporters.formats import check_formats
        except ImportError:  # the reports stage says so itself when the run ends
            return list(dict.fromkeys(value))
        check_formats(value)  # its ValueError names the formats there are
        return list(dict.fromkeys(value))

    #: leave each case's workspace in place (docs/agents.md, "Workspaces")
    keep_workspaces: bool = False

    @classmethod
    def checked(cls, **options: object) -> RunSettings:
        """Settings from keyword arguments; a bad one raises :class:`EvalError` naming the
        option as the command line spells it (``--workers: ...``)."""
        try:
            return cls.model_validate(options)
        except ValidationError as exc:
            raise EvalError([_option_problem(error) for error in exc.errors()]) from None


def _option_problem(error: Any) -> str:
    name = str(error["loc"][0]) if error["loc"] else "options"
    flag = "--" + name.replace("_", "-")
    if error["type"] == "extra_forbidden":
        known = closest(name, list(RunSettings.model_fields))
        hint = f" (did you mean '{known}'?)" if known else ""
        return f"{name}: not an option of a run{hint}"
    return f"{flag}: {error['msg']} (got {error.get('input')!r})"


def _no_match(filters: list[str], ids: list[str]) -> str:
    """Why ``--filter`` selected nothing, with the closest id for each glob."""
    hints = [
        f"'{f}' (did you mean '{m}'?)" if (m := closest(f, ids)) else f"'{f}'" for f in filters
    ]
    shown = ", ".join(ids[:10]) + (f", … ({len(ids)} in all)" if len(ids) > 10 else "")
    return f"--filter: no test id matches {' or '.join(hints)}; ids: {shown}"


@dataclass
class Prepared:
    """A run whose checks passed and whose bundle folder is claimed: nothing has run yet."""

    run: EvalRun
    writer: BundleWriter
    options: RunOptions
    settings: RunSettings


@dataclass
class Finished:
    """A run that ended: its bundle and exit code (the reports not yet written)."""

    outcome: RunOutcome
    out: Path
    exit_code: int
    drafts: ReportDrafts | None


def loaded_notes(loaded: LoadedEval, say: Say) -> None:
    """What loads but may not mean what it says: AgentV's old spellings, values YAML 1.1 reads
    otherwise (docs/eval-files.md)."""
    for note in loaded.deprecations:
        say(printable(f"{note} (deprecated; still loads)"))
    say_warnings(loaded.warnings, say)


def say_warnings(warnings: list[str], say: Say) -> None:
    for warning in warnings:
        say(printable(f"warning: {warning}"))


def load_problem(exc: EvalFileError) -> str:
    """The loader's problems, with the install hint of the extra that would fix them (the spec
    stage may not build it: docs/architecture.md)."""
    return f"{exc}: {install_hint(exc.extra)}" if exc.extra else str(exc)


def prepare(loaded: LoadedEval, settings: RunSettings, say: Say) -> Prepared:
    """Check everything and claim the bundle folder (EvalError: nothing ran)."""
    from evalrun.runner.plan import plan_run
    from evalrun.runner.runner import EvalRun

    try:
        resume, rerun_failed = settings.resume, settings.rerun_failed
        if resume is not None and not resume.is_dir():
            raise ConfigError(f"--resume: no run bundle at {resume}")
        only_ids = None
        filters = settings.filter
        if filters and not select_cases(loaded.tests, filters=filters, shard=None):
            raise ConfigError(_no_match(filters, [case.id for case in loaded.tests]))
        if rerun_failed is not None:
            from evalrun.results.reader import read_case_results
            from evalrun.runner.selection import failed_ids

            if not rerun_failed.is_dir():
                raise ConfigError(f"--rerun-failed: no run bundle at {rerun_failed}")
            only_ids = failed_ids(read_case_results(rerun_failed))
            if not only_ids:
                raise NothingToRun(f"nothing to rerun: no case failed or errored in {rerun_failed}")
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        replay = settings.replay
        options = RunOptions(
            out=resume or settings.out or settings.runs_dir / f"{stamp}-{loaded.name}",
            unique_out=resume is None and settings.out is None,
            target=settings.target,
            judge=settings.judge,
            targets_file=settings.targets,
            workers=settings.workers,
            max_processes=settings.max_processes,
            filters=list(filters),
            repeat=settings.repeat,
            threshold=settings.threshold,
            max_errors=settings.max_errors,
            shard=parse_shard(settings.shard) if settings.shard else None,
            resume=resume is not None,
            only_ids=only_ids,
            limit=settings.limit,
            stores=StoreOptions(
                cache_dir=None if settings.no_cache or replay else settings.cache_dir,
                record=settings.record,
                replay=replay,
            ),
            quiet=settings.quiet,
            sandbox=settings.sandbox,
            executor=settings.executor,
            ray_address=settings.ray_address,
            otel=settings.otel,
            seed=settings.seed,
            report_formats=tuple(settings.format),
            keep_workspaces=settings.keep_workspaces,
        )
        if replay is not None and not replay.is_file():
            raise ConfigError(f"--replay: no cassette at {replay}")
        plan = plan_run(loaded, options)
        say_warnings(plan.pool.file.warnings, say)
        run = EvalRun(plan)
        writer = run.open_bundle()
    except PreflightError as exc:
        raise EvalError(
            exc.problems, problems_line(exc.problems, "the run did not start")
        ) from None
    except EvalFileError as exc:
        raise EvalError([load_problem(exc)]) from None
    except (ConfigError, SourceError, BundleError, ValueError) as exc:
        raise EvalError([str(exc)]) from None
    if not plan.cases:  # an empty shard is not an error (docs/github-actions.md)
        say(
            f"shard {settings.shard} selects none of the {len(loaded.tests)} cases: "
            "writing an empty bundle (exit 0)"
        )
    if plan.sandbox.notice and not settings.quiet:
        say(f"note: {plan.sandbox.notice}")
    if (writes := bytecode.notice(os.environ)) and not settings.quiet:
        say(f"note: {writes}")
    return Prepared(run, writer, options, settings)


def problems_line(problems: list[str], what: str) -> str:
    """The closing line of a list of problems: ``WHAT: N problems above``."""
    return f"{what}: {len(problems)} problem{'s' if len(problems) != 1 else ''} above"


def execute(prepared: Prepared, say: Say) -> Finished:
    """Grade every case into the bundle (EvalError when the executor could not start)."""
    options, writer = prepared.options, prepared.writer
    plan = prepared.run.plan
    # a matrix run's reports are written from the bundle: its cells share case ids, which the
    # drafts key judge calls by (docs/reports.md, "When reports are written"); so do the
    # prompt variants of a test
    columned = plan.matrix or bool(plan.loaded.prompts)
    drafts = None if columned else _report_drafts(options, writer, len(plan.cases))
    try:
        outcome = asyncio.run(prepared.run.run(writer, drafts.add if drafts else None))
    except ConfigError as exc:  # e.g. Ray workers that could not start: nothing was written
        raise EvalError([str(exc)]) from None
    if outcome.write_error is not None:
        say(f"error: the run bundle is incomplete: {printable(outcome.write_error)}")
    return Finished(outcome, outcome.out or options.out, outcome.exit_code, drafts)


def write_reports(finished: Finished, formats: tuple[str, ...], say: Say) -> int:
    """Write the reports; the run's exit code, 3 when they could not be written."""
    outcome = finished.outcome
    if outcome.write_error is None and not _write_reports(
        finished.out, formats, outcome.scan, finished.drafts, say
    ):
        return max(finished.exit_code, ExitCode.INCOMPLETE)
    return finished.exit_code


def _report_drafts(options: RunOptions, writer: BundleWriter, cases: int) -> ReportDrafts | None:
    """Drafts of the reports' case sections, made as the cases finish, for a run of one repeat
    into a fresh bundle (docs/reports.md, "When reports are written"); None for any other run,
    and when the reporters cannot be imported (said after the run, when none are written)."""
    if not options.report_formats or options.repeat != 1 or writer.mode != "new":
        return None
    try:
        from evalrun.reporters import report_drafts
    except ImportError:
        return None
    return report_drafts(options.report_formats, cases)


def _write_reports(
    out: Path,
    formats: tuple[str, ...],
    scan: ResultScan | None,
    drafts: ReportDrafts | None,
    say: Say,
) -> bool:
    """False (said) when the reporters cannot be imported: the results are on disk, and
    ``evalrun report`` renders them once the install is whole."""
    try:
        from evalrun.reporters import github_actions_report, load_bundle, write_view
    except ImportError as exc:
        say(
            f"error: no reports written: evalrun.reporters cannot be imported ({exc}); "
            f"the results are in {printable(out)}: run 'evalrun report {printable(out)}' "
            "once the install is fixed"
        )
        return False
    # read once, for the report files and GitHub's; the run's drafts stand in for its cases
    view = load_bundle(out, scan=scan, calls=drafts.calls if drafts is not None else None)
    write_view(view, formats, drafts)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        github_actions_report(view)
    return True
