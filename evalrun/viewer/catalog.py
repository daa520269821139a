"""The run index as the viewer lists it: filtered and paged run rows, and each eval's history
(mean score and pass rate over time, one series per target, a matrix run's columns each in
its target's; docs/viewer.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalrun.results.index import IndexedRun, list_runs
from evalrun.results.reader import read_columns

#: The most runs one page of the run list may ask for.
MAX_RUNS_PAGE = 500


def verdict(run: IndexedRun) -> str:
    """``passed`` when the run's exit code says every gate held, ``failed`` otherwise (a run
    with no exit code recorded is judged by its counts)."""
    if run.exit_code is not None:
        return "passed" if run.exit_code == 0 else "failed"
    return "failed" if run.failed or run.error else "passed"


def run_row(run: IndexedRun) -> dict[str, Any]:
    return {**run.to_dict(), "verdict": verdict(run)}


@dataclass
class RunFilter:
    """What the run list's filters ask for; None matches anything. A target matches a run
    that graded it, alone or as one of a matrix run's targets."""

    eval: str | None = None
    target: str | None = None
    verdict: str | None = None
    text: str | None = None

    def matches(self, run: IndexedRun) -> bool:
        if self.eval is not None and run.eval != self.eval:
            return False
        if self.target is not None and self.target not in run.targets:
            return False
        if self.verdict is not None and verdict(run) != self.verdict:
            return False
        if self.text:
            needle = self.text.casefold()
            fields = (run.eval, run.description, run.target, run.bundle, run.git_commit)
            return any(needle in (f or "").casefold() for f in fields)
        return True


def run_list(index: Path, where: RunFilter, *, start: int, count: int) -> dict[str, Any]:
    """One page of the runs ``where`` matches, newest first, with the values the filters
    offer (every eval and target in the index)."""
    runs = list_runs(index)
    chosen = [run for run in runs if where.matches(run)]
    count = max(0, min(count, MAX_RUNS_PAGE))
    return {
        "start": start,
        "total": len(chosen),
        "runs": [run_row(run) for run in chosen[start : start + count]],
        "evals": sorted({run.eval for run in runs if run.eval}),
        "targets": sorted({target for run in runs for target in run.targets}),
    }


def find_run(index: Path, run_id: int) -> IndexedRun | None:
    return next((run for run in list_runs(index) if run.id == run_id), None)


def _number(value: Any) -> float | None:
    """A statistic read from a summary.json, which may have been edited: a number or None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def history(index: Path, eval_name: str) -> dict[str, Any]:
    """The eval's runs oldest first, one series per target: each point is a run with its mean
    score and pass rate (passed / total result lines); a matrix run adds a point to the series
    of each of its targets, from summary.json's ``columns``."""
    runs = [run for run in list_runs(index) if run.eval == eval_name]
    runs.reverse()
    series: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        point = {
            "id": run.id,
            "started_at": run.started_at,
            "mean_score": run.mean_score,
            "pass_rate": run.passed / run.total if run.total else None,
            "total": run.total,
            "verdict": verdict(run),
            "git_commit": run.git_commit,
        }
        columns = read_columns(Path(run.bundle)) or []
        if len(columns) < 2:
            series.setdefault(run.target or "", []).append(point)
            continue
        for column in columns:  # a matrix run: a point in each of its targets' series
            counts = column.get("counts")
            total = counts.get("total") if isinstance(counts, dict) else None
            name = column.get("column") or column.get("target") or ""
            series.setdefault(str(name), []).append(
                {
                    **point,
                    "mean_score": _number(column.get("mean_score")),
                    "pass_rate": _number(column.get("pass_rate")),
                    "total": total if isinstance(total, int) else 0,
                }
            )
    return {
        "eval": eval_name,
        "series": [{"target": target, "points": points} for target, points in series.items()],
    }
