"""``evalrun report``, ``evalrun merge`` and ``evalrun compare``: work on finished run bundles."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from evalrun.commands.failing import fail
from evalrun.errors import ExitCode
from evalrun.results.summary import DEFAULT_UNSTABLE_BOUND
from evalrun.safetext import printable


def report(
    run_dir: Path = typer.Argument(..., help="A run bundle folder."),
    formats: list[str] = typer.Option(
        [],
        "--format",
        metavar="FORMAT",
        help="md, html, junit, json or agentv (repeatable; default md+html+junit).",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write here instead of the bundle ('-' = stdout; one format)."
    ),
    unstable_bound: float = typer.Option(
        DEFAULT_UNSTABLE_BOUND,
        "--unstable-bound",
        min=0.0,
        help="Stdev above which a case is unstable.",
    ),
) -> None:
    """Render reports again from a run bundle (results.jsonl, summary.json, judge-calls.jsonl)."""
    from evalrun.reporters import (
        DEFAULT_FORMATS,
        FORMATS,
        BundleNotFound,
        load_bundle,
        write,
        write_reports,
    )

    chosen = list(dict.fromkeys(formats)) or list(DEFAULT_FORMATS)
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown:
        raise fail(f"unknown format(s) {', '.join(unknown)}; choose from {', '.join(FORMATS)}")
    if out is not None and len(chosen) != 1:
        raise fail("--out takes exactly one --format")
    try:
        if out is None:  # into the bundle: every format in one pass over the results
            for path in write_reports(run_dir, chosen, unstable_bound=unstable_bound):
                typer.echo(str(path))
            return
        view = load_bundle(run_dir, unstable_bound=unstable_bound)
    except BundleNotFound as exc:
        raise fail(exc) from None
    (fmt,) = chosen
    if str(out) == "-":
        write(view, fmt, sys.stdout)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as handle:
        write(view, fmt, handle)
    typer.echo(str(out))


def merge(
    run_dirs: list[Path] = typer.Argument(..., help="Shard bundles (from --shard i/n)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the merged bundle."),
    force: bool = typer.Option(False, "--force", help="Overwrite a bundle already in --out."),
    no_reports: bool = typer.Option(False, "--no-reports", help="Write only the bundle files."),
) -> None:
    """Join shard bundles into one bundle, as if the run had not been split.

    Exits with the merged run's exit code (0 passed, 1 a gate failed, 3 incomplete, 130
    interrupted), so a CI merge job gates like an unsharded run.
    """
    from evalrun.reporters import DEFAULT_FORMATS, github_actions_report
    from evalrun.reporters.merge import MergeError, merge_bundles

    try:
        result = merge_bundles(
            run_dirs, out, formats=() if no_reports else DEFAULT_FORMATS, force=force
        )
    except MergeError as exc:
        raise fail(exc) from None
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    s = result.summary
    counts = s["counts"]
    mean = "-" if s.get("mean_score") is None else f"{s['mean_score']:.3f}"
    typer.echo(
        f"merged {len(run_dirs)} bundle(s): {counts['total']} results "
        f"({counts['passed']} passed, {counts['failed']} failed, {counts['error']} error, "
        f"{counts['unscored']} unscored), mean score {mean} -> {out}"
    )
    if not no_reports:
        github_actions_report(out)
    raise typer.Exit(s.get("exit_code") or ExitCode.OK)


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _ci(group: object) -> str:
    ci = getattr(group, "ci", None)
    return "-" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def compare(
    base: Path = typer.Argument(..., help="The baseline run bundle."),
    new: Path = typer.Argument(..., help="The run bundle to judge against it."),
    old_json_file: Path | None = typer.Argument(None, hidden=True),
    fail_on_regression: bool = typer.Option(
        False,
        "--fail-on-regression",
        help="Exit 1 when the suite is significantly worse or a case no longer passes.",
    ),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence of the interval."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed (same seed, same interval)."),
    resamples: int = typer.Option(10_000, "--resamples", min=100, help="Bootstrap resamples."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the comparison as JSON on stdout instead of the tables."
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", metavar="FILE", help="Also write the comparison as JSON to this file."
    ),
    limit: int = typer.Option(20, "--limit", min=0, help="Changed cases to list (worst first)."),
) -> None:
    """Per-case and per-grader score deltas between two runs, with a paired bootstrap interval.

    Significantly worse means the interval's upper bound is below 0; a case that passed and no
    longer does is a regression whatever the interval says.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from evalrun.reporters import BundleNotFound, load_bundle
    from evalrun.reporters.compare import TIE_TOLERANCE, compare_bundles

    if not 0 < confidence < 1:
        raise fail("--confidence must be between 0 and 1")
    try:
        result = compare_bundles(
            load_bundle(base),
            load_bundle(new),
            confidence=confidence,
            seed=seed,
            resamples=resamples,
        )
    except BundleNotFound as exc:
        raise fail(exc) from None
    if old_json_file is not None:  # `compare BASE NEW --json FILE`, the old spelling
        if not as_json or out is not None:
            raise fail(f"unexpected argument {printable(str(old_json_file))}")
        typer.echo(
            "warning: --json FILE is deprecated: write the file with --out FILE; --json alone "
            "prints the JSON on stdout (docs/reports.md)",
            err=True,
        )
        out, as_json = old_json_file, False
    gate = ExitCode.GATE_FAILED if fail_on_regression and result.regression else ExitCode.OK
    if out is not None:
        out.write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        raise typer.Exit(gate)

    console = Console()
    if not console.is_terminal:  # CI logs and pipes: do not squeeze the table to 80 columns
        console.width = max(console.width, 110)
    pct = f"{confidence:.0%}"
    table = Table(title=f"{base} -> {new}", title_justify="left")
    table.add_column("grader", overflow="fold", min_width=12)
    for column in ("n", "base", "new", "delta", f"{pct} CI", "win", "loss", "tie"):
        table.add_column(column, justify="right", no_wrap=True)
    for group in [result.overall, *result.graders]:
        style = "red" if group.regression else "green" if group.improvement else None
        table.add_row(
            "[bold]suite[/]" if group is result.overall else group.name,
            str(len(group.deltas)),
            _fmt(group.base_mean),
            _fmt(group.new_mean),
            _fmt(group.mean_delta, signed=True),
            _ci(group),
            str(group.wins),
            str(group.losses),
            str(group.ties),
            style=style,
        )
    console.print(table)
    changed = sorted(
        (
            c
            for c in result.cases
            if abs(c.delta or 0.0) > TIE_TOLERANCE or c.base_status != c.new_status
        ),
        key=lambda c: (c.delta if c.delta is not None else 0.0, c.id),
    )
    if changed and limit:
        cases = Table(title="changed cases (worst first)", title_justify="left")
        cases.add_column("case", overflow="fold", min_width=12)
        for column in ("base", "new", "delta"):
            cases.add_column(column, justify="right", no_wrap=True)
        cases.add_column("status")
        for c in changed[:limit]:
            status = (
                c.new_status
                if c.base_status == c.new_status
                else f"{c.base_status} -> {c.new_status}"
            )
            cases.add_row(c.id, _fmt(c.base), _fmt(c.new), _fmt(c.delta, signed=True), status)
        console.print(cases)
        if len(changed) > limit:
            console.print(f"... and {len(changed) - limit} more changed case(s)")
    if result.only_base or result.only_new:
        console.print(
            f"{len(result.only_base)} case(s) only in base, {len(result.only_new)} only in new "
            "(left out of the deltas)"
        )
    regressed = result.status_regressions
    for c in regressed:  # each one, whatever --limit says: the gate fails on it
        console.print(
            f"[red]regression[/] {escape(printable(c.id))}: {c.base_status} -> {c.new_status}",
            highlight=False,
        )
    verdict = (
        "[red]significantly worse[/]"
        if result.overall.regression
        else "[green]significantly better[/]"
        if result.overall.improvement
        else "no significant difference"
    )
    if not result.overall.deltas:
        verdict = "no case was scored in both runs"
    if regressed:
        verdict += f"; [red]{len(regressed)} case(s) no longer pass[/]"
    console.print(f"verdict: {verdict}")
    raise typer.Exit(gate)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("merge")(merge)
    app.command("compare")(compare)
