"""``evalrun runs``: the runs recorded in the run index, newest first (docs/runs.md)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import typer

from evalrun.commands.failing import fail
from evalrun.results.index import DEFAULT_INDEX, IndexedRun, list_runs
from evalrun.safetext import printable


def runs(
    eval_name: str | None = typer.Option(
        None, "--eval", metavar="NAME", help="Only runs of this eval (its name or its file)."
    ),
    target: str | None = typer.Option(
        None, "--target", metavar="NAME", help="Only runs that graded this target."
    ),
    limit: int = typer.Option(20, "--limit", min=1, help="At most this many runs."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as a JSON array."),
    index: Path = typer.Option(DEFAULT_INDEX, "--index", metavar="PATH", help="The index to read."),
) -> None:
    """List past runs from the run index (.evalrun/index.sqlite), newest first."""
    try:
        found = list_runs(index, eval_name=eval_name, target=target, limit=limit)
    except sqlite3.Error as exc:
        raise fail(f"{index}: cannot read the run index ({exc})") from None
    if as_json:
        print(json.dumps([run.to_dict() for run in found], indent=2, ensure_ascii=False))
        return
    if not found:
        which = f" of {printable(eval_name)}" if eval_name else ""
        which += f" with target {printable(target)}" if target else ""
        typer.echo(f"no runs{which} recorded in {printable(str(index))}")
        return
    for run in found:
        print(printable(_line(run)))


def _line(run: IndexedRun) -> str:
    """``2026-12-02T02:52:43+00:00  contextual-precision  mock  2/3 passed, 1 failed  mean 0.722
    exit 1  BUNDLE``: one run a line."""
    counts = f"{run.passed}/{run.total} passed"
    counts += "".join(
        f", {n} {status}"
        for status, n in (("failed", run.failed), ("error", run.error), ("unscored", run.unscored))
        if n
    )
    mean = "–" if run.mean_score is None else f"{run.mean_score:.3f}"
    fields = [
        run.started_at or "–",
        run.eval or "–",
        run.target or "–",
        counts,
        f"mean {mean}",
        f"exit {'–' if run.exit_code is None else run.exit_code}",
        *([run.git_commit[:10]] if run.git_commit else []),
        run.bundle,
    ]
    return "  ".join(fields)


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
