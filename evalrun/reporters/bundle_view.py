"""A run bundle read for reporting, with every statistic the reporters show.

Reporters format a :class:`BundleView`; none of them computes statistics of its own. What stays
in memory is numbers: the statistics and, per result, where its line is and where it goes in the
report order (one pass over ``results.jsonl``, :mod:`evalrun.results.scan`, which a run hands
over). Results and judge calls are read back one case at a time by file offset, through the
bundle's one reader, so reporters write as they go (docs/performance.md).
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from evalrun.errors import UserError
from evalrun.judgecall import JudgeCall
from evalrun.results import bundle, reader, stats
from evalrun.results.agentv_run import INDEX, is_agentv_run, is_evalrun_bundle
from evalrun.results.matrix import Matrix, build_matrix, cell_label, column_of
from evalrun.results.models import CaseResult, GraderOutcome
from evalrun.results.scan import CaseIndex, ResultScan, scan_results
from evalrun.results.summary import (
    DEFAULT_UNSTABLE_BOUND,
    GraderStats,
    RepeatStats,
    RunMeta,
    RunStats,
    run_seed,
)

#: How long a one-line reason may be (a table cell, a CI failure message).
REASON_LIMIT = 240
#: Rows of a matrix run's matrix the reports show (problem rows first); results.jsonl and the
#: case sections have every result.
MATRIX_ROWS = 500


#: Runs with more results than this show passed cases compactly: no per-case details in
#: report.md, and in report.html a row each from compact data, paged in by the page's script.
DETAIL_LIMIT = 1000


class CaseView(Protocol):
    """What rendering one case's section needs of a view: a :class:`BundleView`, or the view
    a run drafts its reports with (``reporters/drafts.py``)."""

    @property
    def repeats(self) -> RepeatStats | None: ...
    @property
    def matrix(self) -> bool: ...
    def label(self, case: CaseResult) -> str: ...
    def calls_for(self, case: CaseResult) -> list[JudgeCall]: ...


def case_label(case: CaseResult, repeats: RepeatStats | None, matrix: bool = False) -> str:
    """The case id, with its column in a matrix run (docs/results.md, "A matrix run") and the
    repeat index when the run has repeats."""
    label = cell_label(case, 2 if matrix else 1)
    return f"{label} [repeat {case.repeat}]" if repeats else label


def calls_of_repeat(case: CaseResult, calls: Iterable[JudgeCall]) -> list[JudgeCall]:
    """Of a case's judge calls, those of its repeat and its matrix column (all of them when
    the log records none)."""
    column = column_of(case)
    return [
        c
        for c in calls
        if (c.repeat is None or c.repeat == case.repeat)
        and (c.column is None or c.column == column)
    ]


class BundleNotFound(UserError, FileNotFoundError):
    """The directory is not a run bundle."""


@dataclass
class JudgeCalls:
    """Where each case's judge calls are in ``judge-calls.jsonl``, and their totals."""

    offsets: dict[str, list[int]] = field(default_factory=dict)
    count: int = 0
    cached: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0
    latencies: array[float] = field(default_factory=lambda: array("d"))

    def add(self, offset: int, call: JudgeCall) -> None:
        self.offsets.setdefault(call.case_id, []).append(offset)
        self.count += 1
        self.cached += call.cached
        self.by_status[call.status] += 1
        self.input_tokens += call.input_tokens
        self.output_tokens += call.output_tokens
        if call.latency_ms is not None:
            self.latencies.append(call.latency_ms)

    def to_dict(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        return {
            "count": self.count,
            "cached": self.cached,
            "by_status": dict(self.by_status),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_ms_mean": stats.mean(self.latencies),
            "latency_ms_p50": stats.median(ordered),
            "latency_ms_p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            if ordered
            else None,
        }


def _scan_judge_calls(run_dir: Path) -> JudgeCalls:
    calls = JudgeCalls()
    for offset, call in reader.judge_call_lines(run_dir):
        calls.add(offset, call)
    return calls


@dataclass
class BundleView:
    run_dir: Path
    #: Statistics (numbers only); the results themselves are read back with :attr:`cases`.
    stats: RunStats
    #: What summary.json says of the run (the repeat count from the results when it says none).
    meta: RunMeta = field(default_factory=RunMeta)
    index: CaseIndex = field(default_factory=CaseIndex)
    calls: JudgeCalls = field(default_factory=JudgeCalls)
    _last_calls: tuple[CaseResult, list[JudgeCall]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _grid: Matrix | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def cases(self) -> Iterator[CaseResult]:
        """Every result in report order (see :class:`CaseIndex`), read from disk one at a
        time: in full, except that a :attr:`compact` view reads passed results brief (what a
        compact row shows: no reasons, hits, checks, details or stderr)."""
        if not self.compact:
            return self.read_at(self.index.offsets())
        return itertools.chain(
            self.problems, self.read_at(self.index.offsets(problems=False), brief=True)
        )

    @property
    def problems(self) -> Iterator[CaseResult]:
        """Full results of the cases that did not pass, in report order."""
        return self.read_at(self.index.offsets(passed=False))

    @property
    def compact(self) -> bool:
        """Whether passed cases are shown compactly (a run of more than DETAIL_LIMIT results)."""
        return self.stats.counts.total > DETAIL_LIMIT

    @property
    def graders(self) -> dict[str, GraderStats]:
        return self.stats.graders

    @property
    def repeats(self) -> RepeatStats | None:
        return self.stats.repeats

    @property
    def matrix(self) -> bool:
        """Whether the results span several columns (docs/results.md, "A matrix run")."""
        return self.stats.matrix

    def grid(self) -> Matrix:
        """A matrix run's grid, problem rows first, read in one more pass over the results
        (brief: what a cell shows), holding at most ``MATRIX_ROWS`` rows; read once, as
        every report of the view shows it."""
        if self._grid is None:
            order = [c.name for c in self.stats.columns]
            brief = self.read_at(self.index.offsets(), brief=True)
            self._grid = build_matrix(brief, order, max_rows=MATRIX_ROWS)
        return self._grid

    @property
    def title(self) -> str:
        return self.meta.eval or self.run_dir.resolve().name

    @property
    def failure_count(self) -> int:
        return self.stats.counts.failed + self.stats.counts.error

    @property
    def failures(self) -> Iterator[CaseResult]:
        """Full results of the failed and errored cases, in report order."""
        return self.read_at(self.index.failure_offsets())

    def read_at(self, offsets: Iterable[int], *, brief: bool = False) -> Iterator[CaseResult]:
        """The results whose lines start at ``offsets``, read one at a time (``brief``: see
        :attr:`cases`)."""
        return reader.results_at(self.run_dir, offsets, brief=brief)

    def label(self, case: CaseResult) -> str:
        return case_label(case, self.repeats, self.matrix)

    def calls_for(self, case: CaseResult) -> list[JudgeCall]:
        """Judge calls of this case (and this repeat, when the log records repeats). The last
        case's are kept: the reports written in one pass each ask for them in turn."""
        if self._last_calls is not None and self._last_calls[0] is case:
            return self._last_calls[1]
        offsets = self.calls.offsets.get(str(case.id))
        calls = reader.judge_calls_at(self.run_dir, offsets) if offsets else []
        mine = calls_of_repeat(case, calls)
        self._last_calls = (case, mine)
        return mine

    @property
    def judge_stats(self) -> dict[str, Any]:
        return self.calls.to_dict()


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def load_bundle(
    run_dir: Path | str,
    *,
    unstable_bound: float = DEFAULT_UNSTABLE_BOUND,
    scan: ResultScan | None = None,
    calls: JudgeCalls | None = None,
) -> BundleView:
    """Read a bundle directory; statistics come from ``results.jsonl`` (or from ``scan``, the
    pass a run made over it; ``calls`` likewise for ``judge-calls.jsonl``), run metadata from
    ``summary.json`` (either file may be missing, e.g. after a crash)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir() or not (is_evalrun_bundle(run_dir) or is_agentv_run(run_dir)):
        raise BundleNotFound(
            f"{run_dir}: neither an evalrun run bundle (no {bundle.RESULTS} or evalrun's "
            f"{bundle.SUMMARY}) nor an AgentV run (no {INDEX})"
        )
    meta = reader.read_meta(run_dir)
    if scan is None:
        scan = scan_results(run_dir, by_case=(meta.repeat or 1) > 1)
    run = scan.stats.build(
        unstable_bound=unstable_bound, seed=run_seed(meta), order=meta.column_order()
    )
    if meta.repeat is None:
        meta.repeat = run.max_repeat + 1
    return BundleView(
        run_dir=run_dir,
        stats=run,
        meta=meta,
        index=scan.index,
        calls=_scan_judge_calls(run_dir) if calls is None else calls,
    )


def case_duration_s(case: CaseResult) -> float | None:
    """Wall time of the case (``total_ms``, what the runner records), else the sum of its
    graders' durations and the target's time."""
    total, target = case.timings.total_ms, case.timings.target_ms
    if total is not None:
        return float(total) / 1000.0
    graders = [g.duration_ms for g in case.graders if _is_number(g.duration_ms)]
    if not graders and target is None:
        return None
    return (sum(graders) + (float(target) if target is not None else 0.0)) / 1000.0


def grader_problem(grader: GraderOutcome) -> str | None:
    """One line on why a grader did not pass, or None when it passed."""
    if grader.status == "passed":
        return None
    reason = (grader.reason or "").strip()
    if grader.status == "failed":
        score = "-" if grader.score is None else f"{grader.score:.3f}"
        head = f"{grader.name}: failed (score {score} < threshold {grader.threshold:g})"
    elif grader.status == "error":
        code = "" if grader.exit_code is None else f", exit {grader.exit_code}"
        head = f"{grader.name}: error{code}"
        if not reason and grader.stderr_tail:
            reason = grader.stderr_tail.strip().splitlines()[-1]
    else:
        head = f"{grader.name}: abstained"
    return f"{head}: {reason}" if reason else head


def case_problems(case: CaseResult) -> list[str]:
    """Why a case did not pass: the case's own error first, then each grader that did not pass."""
    problems = [f"error: {case.error}"] if case.error else []
    problems += [p for g in case.graders if (p := grader_problem(g))]
    return problems


def case_reason(case: CaseResult, limit: int = REASON_LIMIT) -> str:
    """The headline of why a case did not pass: the first line of its first problem, at most
    ``limit`` characters (empty for a passed case). The full text stays in the details."""
    problems = case_problems(case)
    if not problems:
        return ""
    lines = [" ".join(line.split()) for line in problems[0].splitlines()]
    lines = [line for line in lines if line]
    first = lines[0] if lines else problems[0]
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    if len(first) + len(more) > limit:
        first = first[: max(0, limit - len(more) - 1)].rstrip() + "…"
    elif len(lines) > 1:
        first += " …"
    return first + more
