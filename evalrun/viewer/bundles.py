"""A run's page as data: the verdict, the statistics and one page of cases in report order
(problems first), read from the bundle by byte offset so a page costs the same in a run of 10
or 100,000 cases (docs/viewer.md, "The pages").

Bundles are scanned once and kept (a few, the last used): the scan holds numbers only
(``evalrun/results/scan.py``), and a bundle rewritten since (a resumed run) is scanned again.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalrun.reporters.bundle_view import (
    BundleView,
    case_problems,
    case_reason,
    load_bundle,
)
from evalrun.reporters.compare import CaseScores, case_scores
from evalrun.results.bundle import RESULTS, SUMMARY
from evalrun.results.index import IndexedRun
from evalrun.results.models import CaseResult, GraderOutcome

#: How many scanned bundles the viewer keeps.
KEPT_BUNDLES = 8
#: The most cases one page of the run page may ask for.
MAX_PAGE = 200


def stamp(run_dir: Path) -> tuple[float, int, float, int]:
    """What changes when a bundle is rewritten: the mtime and size of results and summary."""
    out: list[float | int] = []
    for name in (RESULTS, SUMMARY):
        try:
            st = (run_dir / name).stat()
            out += [st.st_mtime, st.st_size]
        except OSError:
            out += [0.0, -1]
    return (float(out[0]), int(out[1]), float(out[2]), int(out[3]))


class BundleCache:
    """Scanned bundles by folder, the least recently used dropped first."""

    def __init__(self, size: int = KEPT_BUNDLES) -> None:
        self._size = size
        self._views: OrderedDict[Path, tuple[tuple[float, int, float, int], BundleView]] = (
            OrderedDict()
        )
        self._scores: dict[Path, tuple[tuple[float, int, float, int], dict[str, CaseScores]]] = {}
        self._lock = threading.Lock()

    def view(self, run_dir: Path) -> BundleView:
        """The bundle's view; raises ``BundleNotFound`` for a folder that is not a bundle."""
        now = stamp(run_dir)
        with self._lock:
            kept = self._views.get(run_dir)
            if kept is not None and kept[0] == now:
                self._views.move_to_end(run_dir)
                return kept[1]
        view = load_bundle(run_dir)
        with self._lock:
            self._views[run_dir] = (now, view)
            self._views.move_to_end(run_dir)
            while len(self._views) > self._size:
                dropped, _ = self._views.popitem(last=False)
                self._scores.pop(dropped, None)
        return view

    def scores(self, run_dir: Path) -> dict[str, CaseScores]:
        """Each case's status and score (repeats averaged), what a comparison pairs."""
        view = self.view(run_dir)
        now = stamp(run_dir)
        with self._lock:
            kept = self._scores.get(run_dir)
            if kept is not None and kept[0] == now:
                return kept[1]
        found = case_scores(view.cases, view.matrix)
        with self._lock:
            if run_dir in self._views:
                self._scores[run_dir] = (now, found)
        return found


@dataclass
class Verdict:
    """The first thing a run page says: did the run hold, and how many cases need a look."""

    word: str
    problems: int

    @classmethod
    def of(cls, view: BundleView) -> Verdict:
        counts = view.stats.counts
        problems = counts.failed + counts.error + counts.unscored
        if view.meta.complete is False or view.meta.interrupted:
            word = "incomplete"
        elif view.meta.exit_code not in (None, 0) or counts.failed + counts.error:
            word = "failed"
        else:
            word = "passed"
        return cls(word=word, problems=problems)


def grader_dict(grader: GraderOutcome) -> dict[str, Any]:
    return {
        "name": grader.name,
        "status": grader.status,
        "score": grader.score,
        "threshold": grader.threshold,
        "reason": grader.reason,
        "hits": grader.hits,
        "misses": grader.misses,
        "checks": grader.checks,
        "details": grader.details,
        "exit_code": grader.exit_code,
        "stderr_tail": grader.stderr_tail,
        "warnings": grader.warnings,
    }


def case_dict(view: BundleView, case: CaseResult) -> dict[str, Any]:
    """One case as the run page shows it: headline reason, graders, judge calls, transcript."""
    return {
        "id": case.id,
        "label": view.label(case),
        "repeat": case.repeat,
        "status": case.status,
        "score": case.score,
        "target": case.target,
        **({"prompt": case.prompt} if case.prompt is not None else {}),
        "error": case.error,
        "output": case.output,
        "reason": case_reason(case),
        "problems": case_problems(case),
        "warnings": case.warnings,
        "graders": [grader_dict(g) for g in case.graders],
        "judge_calls": [call.to_dict() for call in view.calls_for(case)],
        "transcript": case.transcript,
    }


def run_head(run: IndexedRun, view: BundleView) -> dict[str, Any]:
    """The run page's top: verdict, counts, intervals, graders, what the summary says."""
    verdict = Verdict.of(view)
    run_stats = view.stats.to_dict()
    return {
        "run": run.to_dict(),
        "title": view.title,
        "verdict": verdict.word,
        "problems": verdict.problems,
        "counts": run_stats.get("counts"),
        "pass_rate": run_stats.get("pass_rate"),
        "pass_rate_ci": run_stats.get("pass_rate_ci"),
        "mean_score": run_stats.get("mean_score"),
        "mean_score_ci": run_stats.get("mean_score_ci"),
        "graders": run_stats.get("graders"),
        # a matrix run: each column's statistics and the grid, problem rows first
        "columns": run_stats.get("columns"),
        "matrix": view.grid().to_dict() if view.matrix else None,
        "meta": {
            key: value
            for key, value in view.meta.to_dict().items()
            if isinstance(value, (str, int, float, bool)) or value is None
        },
        "judge": view.judge_stats,
    }


def case_page(view: BundleView, *, start: int, count: int, problems_only: bool) -> dict[str, Any]:
    """Cases ``start`` .. ``start + count`` of the report order (problems first), in full."""
    count = max(0, min(count, MAX_PAGE))
    start = max(0, start)
    offsets = view.index.offsets(passed=not problems_only)
    chosen = list(itertools.islice(offsets, start, start + count))
    total = len(view.index.problems)
    if not problems_only:
        total += len(view.index.passed)
    return {
        "start": start,
        "total": total,
        "cases": [case_dict(view, case) for case in view.read_at(chosen)],
    }
