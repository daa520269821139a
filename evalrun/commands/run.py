"""``evalrun run FILE`` (also plain ``evalrun FILE``), ``evalrun validate`` and ``evalrun schema``."""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from evalrun.commands.failing import fail
from evalrun.commands.options import TARGETS_FOR_EVAL
from evalrun.errors import ExitCode
from evalrun.projectconfig import ProjectDefaults
from evalrun.results.models import CaseResult
from evalrun.results.stats import RUN_SEED
from evalrun.runner.options import DEFAULT_REPORT_FORMATS
from evalrun.runner.preflight import check_eval
from evalrun.safetext import printable
from evalrun.session import (
    EvalError,
    NothingToRun,
    RunSettings,
    execute,
    load_problem,
    loaded_notes,
    prepare,
    problems_line,
    say_warnings,
    write_reports,
)
from evalrun.spec.loader import EvalFileError, eval_name, load_eval
from evalrun.spec.schema import TARGETS_SCHEMA_ID, eval_json_schema, published
from evalrun.targets import (
    ConfigError,
    TargetsFile,
    load_targets,
    locate_targets_file,
)
from evalrun.yamlsource import SourceError


class SandboxChoice(str, enum.Enum):
    """``--sandbox``: the levels of evalrun.launcher.sandbox.LEVELS (tests/test_run.py keeps
    them equal), spelled out so that mypy knows the members."""

    auto = "auto"
    none = "none"
    process = "process"
    strict = "strict"


ExecutorChoice = enum.Enum("ExecutorChoice", {"local": "local", "ray": "ray"}, type=str)
_STYLE = {"passed": "green", "failed": "red", "error": "magenta", "unscored": "yellow"}


def run(
    ctx: typer.Context,
    files: list[Path] = typer.Argument(
        None,
        help="Eval files or folders of them (default: `evals` in the project config; "
        "docs/config.md).",
        show_default=False,
    ),
    target: list[str] | None = typer.Option(
        None,
        "--target",
        "-t",
        metavar="NAME",
        help="Target that answers the cases (overrides the file); repeat it for a "
        "targets-by-cases matrix in one run.",
    ),
    judge: str | None = typer.Option(
        None,
        "--judge",
        metavar="NAME",
        help="Target the graders' judge calls go to (default: the file's judge, else the target).",
    ),
    targets: Path | None = TARGETS_FOR_EVAL,
    workers: int = typer.Option(
        4, "--workers", "-w", metavar="N", help="Cases in flight at once (at least 1)."
    ),
    max_processes: int | None = typer.Option(
        None,
        "--max-processes",
        metavar="N",
        help="Most processes of the eval's own graders at once, whatever --workers is "
        "(default: 8 per core, at least 64; docs/performance.md).",
    ),
    filter_: list[str] = typer.Option(
        [], "--filter", "-f", metavar="GLOB", help="Only case ids matching this glob (repeatable)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        metavar="DIR",
        help="Run bundle folder, new or empty (default: <time>-<eval> under --runs-dir).",
    ),
    runs_dir: Path = typer.Option(
        Path(".evalrun/runs"),
        "--runs-dir",
        metavar="DIR",
        help="Where a run without --out writes its bundle, in a folder of its own.",
    ),
    repeat: int = typer.Option(1, "--repeat", metavar="N", help="Grade each case N times."),
    threshold: float | None = typer.Option(
        None,
        "--threshold",
        metavar="SCORE",
        help="Fail (exit 1) when the suite's mean score is below this.",
    ),
    max_errors: int = typer.Option(
        0,
        "--max-errors",
        metavar="N",
        help="Errors and unscored cases tolerated before exit 3.",
    ),
    shard: str | None = typer.Option(
        None,
        "--shard",
        metavar="I/N",
        help="Run only slice i of n (e.g. 2/4), chosen by a stable hash of the case id.",
    ),
    resume: Path | None = typer.Option(
        None,
        "--resume",
        metavar="DIR",
        help="Continue the run bundle in this folder, skipping finished cases.",
    ),
    rerun_failed: Path | None = typer.Option(
        None,
        "--rerun-failed",
        metavar="DIR",
        help="Run only the cases that failed or errored in this run bundle.",
    ),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Do not read or write the response cache."
    ),
    cache_dir: Path = typer.Option(
        Path(".evalrun/cache"), "--cache-dir", metavar="DIR", help="Where the response cache lives."
    ),
    record: Path | None = typer.Option(
        None,
        "--record",
        metavar="FILE",
        help="Write every target and judge call to this cassette (JSONL).",
    ),
    replay: Path | None = typer.Option(
        None,
        "--replay",
        metavar="FILE",
        help="Serve every call from this cassette; fail on a miss.",
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress and no table; just the exit code and bundle path."
    ),
    sandbox: SandboxChoice = typer.Option(
        "auto", "--sandbox", help="Isolate graders (docs/security.md)."
    ),
    executor: ExecutorChoice = typer.Option(
        "local",
        "--executor",
        help="Grade in this process, or on a Ray cluster (docs/distributed.md).",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="Ray cluster to join (auto, ray://host:port); default: start a local one.",
    ),
    limit: int | None = typer.Option(
        None,
        "--limit",
        metavar="N",
        help="Run only the first N selected cases (after --filter and --shard).",
    ),
    otel: bool = typer.Option(
        False,
        "--otel",
        help="Send OpenTelemetry spans over OTLP/HTTP (also on when OTEL_EXPORTER_OTLP_ENDPOINT "
        "is set; docs/otel.md).",
    ),
    seed: int = typer.Option(
        RUN_SEED,
        "--seed",
        metavar="N",
        help="Bootstrap seed of the mean score's interval (recorded in summary.json).",
    ),
    format_: list[str] = typer.Option(
        list(DEFAULT_REPORT_FORMATS),
        "--format",
        metavar="FMT",
        help="Reports written into the bundle: md, html, junit, json or agentv (AgentV's result "
        "layout); repeatable (default md+html+junit).",
    ),
    keep_workspaces: bool = typer.Option(
        False,
        "--keep-workspaces",
        help="Leave each case's workspace in place; results say where (docs/agents.md).",
    ),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Also say which config file and .env were read and where each default came from.",
    ),
) -> None:
    """Run eval files: answer each case, grade it, write a run bundle for each file."""
    if verbose:
        _say_project(ctx.obj)
    options: dict[str, Any] = dict(
        target=(target[0] if len(target) == 1 else list(target)) if target else None,
        judge=judge,
        targets=targets,
        workers=workers,
        max_processes=max_processes,
        filter=filter_,
        out=out,
        runs_dir=runs_dir,
        repeat=repeat,
        threshold=threshold,
        max_errors=max_errors,
        shard=shard,
        limit=limit,
        resume=resume,
        rerun_failed=rerun_failed,
        no_cache=no_cache,
        cache_dir=cache_dir,
        record=record,
        replay=replay,
        quiet=quiet,
        sandbox=sandbox.value,
        executor=executor.value,
        ray_address=ray_address,
        otel=otel,
        seed=seed,
        format=format_,
        keep_workspaces=keep_workspaces,
    )
    problems: list[str] = []
    paths = list(_eval_files(files or [], problems))
    if problems:
        raise fail(problems_line(problems, "run"), problems=problems)
    if not paths:
        raise fail(
            "no eval file: name one (evalrun run FILE) or list them under `evals` in "
            "[tool.evalrun] (docs/config.md)"
        )
    if len(paths) == 1 and not any(p.is_dir() for p in files):
        raise typer.Exit(_run_one(paths[0], options)[0])
    if resume is not None or rerun_failed is not None:
        raise fail("--resume and --rerun-failed take one eval file (its bundle's)")
    if out is not None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise fail(f"--out {printable(str(out))}: not a new or empty folder (docs/config.md)")
    raise typer.Exit(_run_many(paths, options))


#: Exit codes of the files of one command, least to most severe: the command exits with the
#: most severe (docs/config.md, "Several eval files"); 130 stops at once.
SEVERITY = (ExitCode.OK, ExitCode.GATE_FAILED, ExitCode.INCOMPLETE, ExitCode.USAGE)
#: The combined summary of several files, beside their bundles in ``--out DIR``: not named like
#: a bundle's summary.json, so DIR is never taken for a bundle.
COMBINED_SUMMARY = "combined-summary.json"


def _run_many(paths: list[Path], options: dict[str, Any]) -> int:
    """Each file in turn, in a bundle of its own (under ``--out`` when given: one folder per
    eval, and the combined summary beside them); the worst exit code wins."""
    out: Path | None = options["out"]
    names = _bundle_names(paths)
    rows: list[dict[str, Any]] = []
    for path, name in zip(paths, names, strict=True):
        if not options["quiet"]:
            typer.echo(f"── {printable(str(path))}", err=True)
        bundle = None if out is None else out / name
        code, written = _run_one(path, {**options, "out": bundle})
        rows.append({"eval": str(path), "bundle": written, "exit_code": code})
        if code == ExitCode.INTERRUPTED:
            return code
    worst = max((row["exit_code"] for row in rows), key=SEVERITY.index)
    combined = {"evals": rows, "exit_code": worst}
    for row in rows:
        bundle_text = row["bundle"] if row["bundle"] is not None else "(no bundle)"
        typer.echo(f"exit {row['exit_code']}  {printable(row['eval'])}  {printable(bundle_text)}")
    typer.echo(f"{plural(len(rows), 'eval file')}: exit {worst} (the worst of them)")
    if out is not None:
        (out / COMBINED_SUMMARY).write_text(json.dumps(combined, indent=2) + "\n", "utf-8")
    return worst


def _bundle_names(paths: list[Path]) -> list[str]:
    """A folder name per eval file: its name without ``.eval.yaml``, ``-2``... when repeated."""
    names: list[str] = []
    for path in paths:
        base = eval_name(path)
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names.append(name)
    return names


def _say_project(project: ProjectDefaults | None) -> None:
    """``-v``: the files the project's defaults came from, and each default's source."""
    if project is None:
        return
    for label, path in (("config", project.config_file), (".env", project.dotenv_file)):
        _say(f"{label}: {printable(str(path)) if path else 'none found'}")
    for name, setting in sorted(project.settings.items()):
        flag = "--" + name.replace("_", "-")
        _say(f"default {flag} {printable(str(setting.value))} from {printable(setting.source)}")


def _run_one(file: Path, options: dict[str, Any]) -> tuple[int, str | None]:
    """Run one eval file; its exit code and its bundle's folder (None when nothing ran)."""
    try:
        return _run_file(file, options)
    except typer.Exit as exc:
        return exc.exit_code, None


def _run_file(file: Path, options: dict[str, Any]) -> tuple[int, str | None]:
    quiet = options["quiet"]
    try:
        settings = RunSettings.checked(**options)  # the limits the Python API checks too
        loaded = load_eval(file)
        loaded_notes(loaded, _say)
        prepared = prepare(loaded, settings, _say)
        finished = execute(prepared, _say)
    except EvalFileError as exc:
        raise fail(load_problem(exc)) from None
    except EvalError as exc:
        if exc.summary is not None:
            raise fail(exc.summary, problems=exc.problems) from None
        raise fail("\n".join(exc.problems)) from None
    except NothingToRun as exc:
        typer.echo(str(exc))
        return ExitCode.OK, None
    out, outcome = finished.out, finished.outcome
    try:
        exit_code = write_reports(finished, prepared.options.report_formats, _say)
        if not quiet:
            _print_table(outcome.cases, outcome.total, outcome.summary, out)
        else:
            print(printable(out))
        _index_run(outcome.summary, out, exit_code, loaded.path.parent)
    except KeyboardInterrupt:  # the bundle is whole: what is missing is derived from it
        typer.echo(
            f"\ninterrupted after the run; the results are in {printable(out)}: "
            f"'evalrun report {printable(out)}' writes the reports",
            err=True,
        )
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    return exit_code, str(out)


def _index_run(summary: dict[str, Any], out: Path, exit_code: int, folder: Path) -> None:
    """Append the run to the run index; a failure is a warning, never the run's exit code
    (docs/runs.md)."""
    import sqlite3

    from evalrun.results.index import DEFAULT_INDEX, IndexedRun, git_commit, record

    try:
        record(DEFAULT_INDEX, IndexedRun.from_summary(summary, out, exit_code, git_commit(folder)))
    except (OSError, sqlite3.Error) as exc:
        typer.echo(
            f"warning: the run is not in the run index {DEFAULT_INDEX}: {printable(str(exc))}",
            err=True,
        )


def _say(message: str) -> None:
    typer.echo(message, err=True)


#: Width of the table when stdout is a file or a pipe: wide enough for whole names.
PLAIN_WIDTH = 10_000


def _print_table(rows: list[CaseResult], total: int, summary: dict, out: Path) -> None:
    """The rows the run kept for the table (all, or the problems first: see TableRows)."""
    from rich.console import Console  # not imported by a --quiet run
    from rich.table import Table
    from rich.text import Text

    console = Console()
    if not console.is_terminal:  # a CI log or a file: no 80-column cut (rich's default)
        console = Console(width=PLAIN_WIDTH)
    grader_names = list(dict.fromkeys(g.name for c in rows for g in c.graders))
    title = printable(summary.get("description") or summary.get("eval") or "", multiline=True)
    # soft_wrap: no line breaks of rich's own, so no user text can land at a line's start
    console.print(Text(title), style="bold", highlight=False, soft_wrap=True)
    if summary.get("matrix"):
        _print_matrix(console, rows, total, summary)
        console.print(Text(f"run bundle: {printable(out)}"), highlight=False, soft_wrap=True)
        return
    table = Table()
    table.add_column("case")
    repeats = any(c.repeat for c in rows)
    if repeats:
        table.add_column("rep", justify="right")
    table.add_column("status")
    table.add_column("score", justify="right")
    for name in grader_names:
        table.add_column(Text(printable(name)), justify="right")
    for case in rows:
        by_name = {g.name: g for g in case.graders}
        cells: list[str | Text] = [Text(printable(case.id))]
        if repeats:
            cells.append(str(case.repeat))
        cells.append(Text(case.status, style=_STYLE[case.status]))
        cells.append("-" if case.score is None else f"{case.score:.3f}")
        for name in grader_names:
            g = by_name.get(name)
            cells.append("" if g is None else (g.status if g.score is None else f"{g.score:.3f}"))
        table.add_row(*cells)
    console.print(table)
    if total > len(rows):
        console.print(f"… and {total - len(rows)} more (all cases: report.md, report.html)")
    line = _stats_line(summary, total)
    if summary.get("missing"):
        line += f" · [bold red]{summary['missing']} not recorded[/]"
    if summary.get("interrupted"):
        line += " · [bold yellow]interrupted (incomplete)[/]"
    console.print(line, highlight=False)
    console.print(Text(f"run bundle: {printable(out)}"), highlight=False, soft_wrap=True)


def _stats_line(stats: dict[str, Any], total: int, noun: str = "case") -> str:
    """``3 cases: 2 passed, 1 failed · pass rate ... · mean score ...`` of the run or of one
    matrix column (the same keys, docs/results.md); a matrix's results are ``cell``s."""
    counts = stats.get("counts", {})
    mean = stats.get("mean_score")
    parts = [
        f"{counts.get(k, 0)} {k}"
        for k in ("passed", "failed", "error", "unscored")
        if counts.get(k)
    ]
    line = f"{_count_line(counts.get('total', total), stats.get('repeat') or 1, noun)}: "
    line += ", ".join(parts)
    if (rate_ci := stats.get("pass_rate_ci")) is not None:
        line += f" · pass rate {_bounded(stats['pass_rate'], rate_ci, '.0%')}"
    if mean is not None:
        line += f" · mean score {_bounded(mean, stats.get('mean_score_ci'), '.3f')}"
    return line


def _print_matrix(console: Any, rows: list[CaseResult], total: int, summary: dict) -> None:
    """A matrix run's table: a row per case, a column per target, each cell its status and
    score; then a line per column and the run's line (docs/results.md, "A matrix run")."""
    from rich.table import Table
    from rich.text import Text

    from evalrun.results.matrix import build_matrix
    from evalrun.results.summary import RunMeta

    matrix = build_matrix(rows, RunMeta.from_dict(summary).column_order())
    table = Table()
    table.add_column("case")
    repeats = any(c.repeat for c in rows)
    if repeats:
        table.add_column("rep", justify="right")
    for column in matrix.columns:
        table.add_column(Text(printable(column)), justify="right")
    for row in matrix.rows:
        cells: list[str | Text] = [Text(printable(row.case_id))]
        if repeats:
            cells.append(str(row.repeat))
        for column in matrix.columns:
            case = row.cells.get(column)
            if case is None:
                cells.append(Text("·"))  # not among the rows kept for the table
                continue
            score = "" if case.score is None else f" {case.score:.3f}"
            cells.append(Text(case.status + score, style=_STYLE[case.status]))
        table.add_row(*cells)
    console.print(table)
    if total > len(rows):
        console.print(f"… and {total - len(rows)} more results (all: report.md, report.html)")
    repeat = summary.get("repeat") or 1
    for column in summary.get("columns") or ():
        name = printable(str(column.get("column") or column.get("target")))
        line = _stats_line({**column, "repeat": repeat}, 0)
        console.print(Text(f"{name}: {line}"), highlight=False, soft_wrap=True)
    word = "columns" if summary.get("prompts") else "targets"
    line = f"all {len(matrix.columns)} {word}: {_stats_line(summary, total, 'cell')}"
    if summary.get("missing"):
        line += f" · [bold red]{summary['missing']} not recorded[/]"
    if summary.get("interrupted"):
        line += " · [bold yellow]interrupted (incomplete)[/]"
    console.print(line, highlight=False)


def _bounded(value: float, ci: list[float] | None, spec: str) -> str:
    """``67% [21%, 94%]``: a statistic and its 95% interval (docs/results.md#intervals)."""
    text = format(value, spec)
    return text if ci is None else f"{text} [{format(ci[0], spec)}, {format(ci[1], spec)}]"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _count_line(results: int, repeat: int, noun: str = "case") -> str:
    """``3 cases`` or, with --repeat, ``3 cases × 5 repeats = 15 results``."""
    if repeat <= 1:
        return plural(results, noun)
    cases = results // repeat if results % repeat == 0 else None
    if cases is None:
        return f"{plural(results, 'result')} ({plural(repeat, 'repeat')} per {noun})"
    return f"{plural(cases, noun)} × {plural(repeat, 'repeat')} = {plural(results, 'result')}"


#: what eval files are called (docs/eval-files.md); ``validate DIR`` checks these
EVAL_PATTERNS = ("*.eval.yaml", "*.eval.yml", "*.eval.json")
#: file names that are targets files, not eval files (docs/targets.md)
TARGETS_NAMES = ("targets.yaml", "targets.yml")


def validate(
    files: list[Path] = typer.Argument(
        ..., help="Eval files, or folders of them (*.eval.yaml, *.eval.yml, *.eval.json)."
    ),
    target: str | None = typer.Option(
        None, "--target", "-t", metavar="NAME", help="Check as if run with --target NAME."
    ),
    judge: str | None = typer.Option(
        None, "--judge", metavar="NAME", help="Check as if run with --judge NAME."
    ),
    targets: Path | None = TARGETS_FOR_EVAL,
) -> None:
    """Check eval files as a run would, without the network: the format, the targets (known,
    keys set, extras installed), grader programs and scripts, the rubric. Exit 2 if any fails."""
    problems: list[str] = []
    for file in _eval_files(files, problems):
        found = _validate_one(file, target, judge, targets)
        if isinstance(found, list):
            problems += found
        else:
            print(printable(found))
    if problems:
        raise fail(problems_line(problems, "validate"), problems=problems)


def _eval_files(paths: list[Path], problems: list[str]) -> Iterator[Path]:
    """The eval files named, and those in the folders named, in the order given; a targets
    file is skipped (a shell glob such as ``evals/*.yaml`` names it too)."""
    for path in paths:
        if path.is_dir():
            found = sorted({f for pattern in EVAL_PATTERNS for f in path.rglob(pattern)})
            if not found:
                problems.append(
                    f"{path}: no eval files in this folder ({', '.join(EVAL_PATTERNS)})"
                )
            yield from found
        elif path.name in TARGETS_NAMES:
            typer.echo(f"{printable(str(path))}: skipped (a targets file, not an eval file)")
        else:
            yield path


def _validate_one(
    file: Path, target: str | None, judge: str | None, targets: Path | None
) -> str | list[str]:
    """``FILE: ok (...)``, or the file's problems."""
    try:
        loaded = load_eval(file)
    except EvalFileError as exc:
        return load_problem(exc).splitlines()
    loaded_notes(loaded, _say)
    try:
        lookup = locate_targets_file(targets, loaded.folder)
        configured = load_targets(lookup.path)
    except (ConfigError, SourceError) as exc:
        return str(exc).splitlines()
    say_warnings(configured.warnings, _say)
    problems = check_eval(
        loaded,
        cases=loaded.tests,
        targets=configured,
        lookup=lookup,
        target=target,
        judge=judge,
        need_target=False,
    )
    if problems:
        return problems
    graders = len(loaded.spec.graders) + sum(
        len(t.graders) + len(t.turn_graders) for t in loaded.tests
    )
    line = f"{file}: ok ({plural(len(loaded.tests), 'test')}, {plural(graders, 'grader')})"
    if not (target or judge or loaded.spec.target or loaded.spec.targets or loaded.spec.judge):
        line += "; it names no target: pass --target when you run it"
    return line


def schema(
    targets: bool = typer.Option(
        False, "--targets", help="Print the schema of targets.yaml instead."
    ),
) -> None:
    """Print the JSON Schema of eval files (for editor validation; docs/eval-files.md)."""
    json.dump(targets_json_schema() if targets else eval_json_schema(), sys.stdout, indent=2)
    print()


def targets_json_schema() -> dict[str, Any]:
    return published(
        TargetsFile.model_json_schema(by_alias=True),
        TARGETS_SCHEMA_ID,
        "evalrun targets.yaml",
        "Named targets (providers) an eval file and --target refer to (docs/targets.md).",
    )


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("validate")(validate)
    app.command("schema")(schema)
