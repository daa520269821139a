"""``evalrun calibrate FILE --judge A --judge B``: how well does each judge agree with people?

Runs the cases that carry ``labels:`` once per judge (same graders, same cache), or once per judge
and judge mode with ``--mode``, then compares every grader's per-item verdicts with the labels
(docs/judges.md).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path

import typer

from evalrun.calibration.compare import calibrate as compare
from evalrun.calibration.modes import JUDGE_MODES, MODE_KINDS, mode_graders, with_judge_mode
from evalrun.calibration.render import markdown, page
from evalrun.commands.failing import fail
from evalrun.commands.options import TARGETS_FOR_EVAL
from evalrun.errors import ConfigError, ExitCode
from evalrun.results.reader import read_case_results
from evalrun.runner.options import RunOptions
from evalrun.runner.preflight import PreflightError
from evalrun.session import load_problem, problems_line
from evalrun.spec.loader import EvalFileError, LoadedEval, load_eval
from evalrun.targets import StoreOptions


def calibrate(
    file: Path = typer.Argument(..., help="An eval file whose cases carry labels:."),
    judges: list[str] = typer.Option(
        ..., "--judge", "-j", metavar="TARGET", help="A judge to compare (repeat for each)."
    ),
    targets: Path | None = TARGETS_FOR_EVAL,
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        metavar="DIR",
        help="Where the runs and the report go (default: .evalrun/calibrations/<time>-<eval>).",
    ),
    min_kappa: float | None = typer.Option(
        None,
        "--min-kappa",
        metavar="K",
        help="Exit 1 when the recommended judge's mean kappa/alpha is below K.",
    ),
    tolerance: float = typer.Option(
        0.05,
        "--tolerance",
        metavar="X",
        help="Recommend the cheapest judge within X of the best mean kappa/alpha.",
    ),
    modes: list[str] | None = typer.Option(
        None,
        "--mode",
        "-m",
        metavar="MODE",
        help="Judge the RAG graders in this mode, per-item or batched (repeat to compare).",
    ),
    workers: int = typer.Option(4, "--workers", "-w", min=1, help="Cases in flight at once."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not use the response cache."),
    cache_dir: Path = typer.Option(
        Path(".evalrun/cache"), "--cache-dir", metavar="DIR", help="Where the response cache lives."
    ),
) -> None:
    """Compare judges with human labels: agreement, kappa/alpha, confusion, cost; recommend one."""
    try:
        loaded = load_eval(file)
    except EvalFileError as exc:
        raise fail(load_problem(exc)) from None
    labels = {case.id: case.labels for case in loaded.tests if case.labels}
    if not labels:
        raise fail(f"{file}: no case carries labels: (see docs/judges.md)")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = out or Path(".evalrun/calibrations") / f"{stamp}-{loaded.name}"
    if folder.exists() and any(folder.iterdir()):
        raise fail(f"--out {folder} is not empty")
    runs = {}
    variants = _variants(loaded, file, list(dict.fromkeys(judges)), modes)
    for label, (judge, mode) in variants.items():
        judged = with_judge_mode(loaded, mode) if mode else loaded
        bundle = folder / "runs" / label.replace("/", "_")
        options = RunOptions(
            out=bundle,
            judge=judge,
            targets_file=targets,
            workers=workers,
            only_ids=set(labels),
            max_errors=len(labels),
            stores=StoreOptions(cache_dir=None if no_cache else cache_dir),
            quiet=True,
        )
        from evalrun.runner.plan import plan_run
        from evalrun.runner.runner import EvalRun

        try:
            run = EvalRun(plan_run(judged, options))
        except PreflightError as exc:
            summary = problems_line(exc.problems, f"calibrate with {judge}")
            raise fail(summary, problems=exc.problems) from None
        except (ConfigError, ValueError) as exc:
            raise fail(str(exc)) from None
        typer.echo(f"judging {len(labels)} labelled cases with {label} ...", err=True)
        outcome = asyncio.run(run.run())
        if outcome.exit_code == ExitCode.INTERRUPTED:
            raise typer.Exit(ExitCode.INTERRUPTED)
        runs[label] = read_case_results(bundle)
    with_modes = {label: (j, m) for label, (j, m) in variants.items() if m}
    result = compare(labels, runs, tolerance=tolerance, modes=with_modes)
    report = markdown(result, loaded.spec.description or loaded.name)
    (folder / "calibration.md").write_text(report, encoding="utf-8")
    (folder / "calibration.html").write_text(page(result, loaded.name), encoding="utf-8")
    (folder / "calibration.json").write_text(
        json.dumps(result.to_dict(), indent=2, default=str) + "\n", encoding="utf-8"
    )
    typer.echo(report)
    typer.echo(f"calibration report: {folder}")
    best = result.scores.get(result.recommended) if result.recommended else None
    if min_kappa is not None and (best is None or best < min_kappa):
        raise typer.Exit(ExitCode.GATE_FAILED)


def _variants(
    loaded: LoadedEval, file: Path, judges: list[str], modes: list[str] | None
) -> dict[str, tuple[str, str | None]]:
    """Each run's label -> (judge, judge mode): one run per judge, or per judge and mode."""
    if not modes:
        return {judge: (judge, None) for judge in judges}
    unknown = [m for m in modes if m not in JUDGE_MODES]
    if unknown:
        raise fail(f"--mode {unknown[0]}: the judge modes are {', '.join(JUDGE_MODES)}")
    if not mode_graders(loaded):
        raise fail(f"--mode: no grader of {file} has judge modes (only {', '.join(MODE_KINDS)} do)")
    return {f"{j}/{m}": (j, m) for j in judges for m in dict.fromkeys(modes)}


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
