"""A run bundle loaded once, with every statistic the reporters show.

Reporters format a :class:`BundleView`; none of them computes statistics of its own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from evalrun.results import bundle, stats
from evalrun.results.models import CaseResult, GraderResult
from evalrun.results.summary import (
    DEFAULT_UNSTABLE_BOUND,
    GraderStats,
    RepeatStats,
    RunStats,
    compute_stats,
    summary_dict,
)

#: Keys of ``CaseResult.timings`` read as the case's wall time, in order of preference.
DURATION_KEYS_MS = ("total_ms", "duration_ms", "wall_ms")
DURATION_KEYS_S = ("total_s", "duration_s")


class BundleNotFound(FileNotFoundError):
    """The directory is not a run bundle."""


@dataclass
class BundleView:
    run_dir: Path
    stats: RunStats
    summary: dict[str, Any]
    judge_calls: list[dict[str, Any]] = field(default_factory=list)
    file_summary: dict[str, Any] = field(default_factory=dict)

    @property
    def cases(self) -> list[CaseResult]:
        return self.stats.results

    @property
    def graders(self) -> dict[str, GraderStats]:
        return self.stats.graders

    @property
    def repeats(self) -> RepeatStats | None:
        return self.stats.repeats

    @property
    def title(self) -> str:
        return str(self.summary.get("eval") or self.run_dir.resolve().name)

    @property
    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if c.status in ("failed", "error")]

    def label(self, case: CaseResult) -> str:
        """The case id, with the repeat index when the run has repeats."""
        return f"{case.id} [repeat {case.repeat}]" if self.repeats else str(case.id)

    @cached_property
    def _calls_by_case(self) -> dict[str, list[dict[str, Any]]]:
        index: dict[str, list[dict[str, Any]]] = {}
        for call in self.judge_calls:
            index.setdefault(str(call.get("case_id")), []).append(call)
        return index

    def calls_for(self, case: CaseResult) -> list[dict[str, Any]]:
        """Judge calls of this case (and this repeat, when the log records repeats)."""
        return [
            c
            for c in self._calls_by_case.get(str(case.id), [])
            if c.get("repeat") is None or c.get("repeat") == case.repeat
        ]

    @cached_property
    def judge_stats(self) -> dict[str, Any]:
        calls = self.judge_calls
        latencies = [float(c["latency_ms"]) for c in calls if _is_number(c.get("latency_ms"))]
        ordered = sorted(latencies)
        return {
            "count": len(calls),
            "cached": sum(1 for c in calls if c.get("cached")),
            "by_status": dict(Counter(str(c.get("status", "unknown")) for c in calls)),
            "input_tokens": sum(int(c.get("input_tokens") or 0) for c in calls),
            "output_tokens": sum(int(c.get("output_tokens") or 0) for c in calls),
            "latency_ms_mean": stats.mean(latencies),
            "latency_ms_p50": stats.median(latencies),
            "latency_ms_p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            if ordered
            else None,
        }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def load_bundle(
    run_dir: Path | str, *, unstable_bound: float = DEFAULT_UNSTABLE_BOUND
) -> BundleView:
    """Read a bundle directory; statistics come from ``results.jsonl``, run metadata from
    ``summary.json`` (either may be missing, e.g. after a crash)."""
    run_dir = Path(run_dir)
    has_results = (run_dir / bundle.RESULTS).is_file()
    if not run_dir.is_dir() or not (has_results or (run_dir / bundle.SUMMARY).is_file()):
        raise BundleNotFound(
            f"{run_dir}: not a run bundle (no {bundle.RESULTS} or {bundle.SUMMARY})"
        )
    file_summary = bundle.read_summary(run_dir)
    run = compute_stats(bundle.read_results(run_dir), unstable_bound=unstable_bound)
    return BundleView(
        run_dir=run_dir,
        stats=run,
        summary=summary_dict(run, file_summary),
        judge_calls=bundle.read_judge_calls(run_dir),
        file_summary=file_summary,
    )


def case_duration_s(case: CaseResult) -> float | None:
    """Wall time of the case from its timings, else the sum of its graders' durations."""
    timings = case.timings or {}
    for key in DURATION_KEYS_MS:
        if _is_number(timings.get(key)):
            return float(timings[key]) / 1000.0
    for key in DURATION_KEYS_S:
        if _is_number(timings.get(key)):
            return float(timings[key])
    graders = [g.duration_ms for g in case.graders if _is_number(g.duration_ms)]
    target = timings.get("target_ms")
    if not graders and not _is_number(target):
        return None
    return (sum(graders) + (float(target) if _is_number(target) else 0.0)) / 1000.0


def grader_problem(grader: GraderResult) -> str | None:
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
