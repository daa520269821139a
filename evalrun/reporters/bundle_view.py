"""A run bundle read for reporting, with every statistic the reporters show.

Reporters format a :class:`BundleView`; none of them computes statistics of its own. Only the
statistics stay in memory: they come from one pass over ``results.jsonl`` keeping slim results,
and full results and judge calls are read back one case at a time by file offset, so reporters
can write as they go.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from evalrun.results import bundle, stats
from evalrun.results.models import CaseResult, GraderResult
from evalrun.results.summary import (
    DEFAULT_UNSTABLE_BOUND,
    GraderStats,
    RepeatStats,
    RunStats,
    compute_stats,
    result_key,
    summary_dict,
)

#: Keys of ``CaseResult.timings`` read as the case's wall time, in order of preference.
DURATION_KEYS_MS = ("total_ms", "duration_ms", "wall_ms")
DURATION_KEYS_S = ("total_s", "duration_s")


class BundleNotFound(FileNotFoundError):
    """The directory is not a run bundle."""


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(offset, value) of every line of ``path`` that parses; torn or blank lines are skipped."""
    if not path.is_file():
        return
    offset = 0
    with open(path, "rb") as handle:
        for line in handle:
            try:
                value = json.loads(line)
            except ValueError:
                value = None
            if value is not None:
                yield offset, value
            offset += len(line)


def _read_line(handle: BinaryIO, offset: int) -> Any:
    handle.seek(offset)
    return json.loads(handle.readline())


@dataclass
class JudgeCalls:
    """Where each case's judge calls are in ``judge-calls.jsonl``, and their totals."""

    offsets: dict[str, list[int]] = field(default_factory=dict)
    count: int = 0
    cached: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0
    latencies: list[float] = field(default_factory=list)

    def add(self, offset: int, call: dict[str, Any]) -> None:
        self.offsets.setdefault(str(call.get("case_id")), []).append(offset)
        self.count += 1
        self.cached += bool(call.get("cached"))
        self.by_status[str(call.get("status", "unknown"))] += 1
        self.input_tokens += int(call.get("input_tokens") or 0)
        self.output_tokens += int(call.get("output_tokens") or 0)
        if _is_number(call.get("latency_ms")):
            self.latencies.append(float(call["latency_ms"]))

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


def _scan_judge_calls(path: Path) -> JudgeCalls:
    calls = JudgeCalls()
    for offset, call in _json_lines(path):
        if isinstance(call, dict):
            calls.add(offset, call)
    return calls


@dataclass
class BundleView:
    run_dir: Path
    #: Statistics over slim results (no outputs, reasons or details); see :attr:`cases`.
    stats: RunStats
    summary: dict[str, Any]
    file_summary: dict[str, Any] = field(default_factory=dict)
    #: (case id, repeat) -> offset of the result's line in ``results.jsonl``.
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    calls: JudgeCalls = field(default_factory=JudgeCalls)

    @property
    def cases(self) -> Iterator[CaseResult]:
        """Every full result in report order, read from disk one at a time."""
        return self.read_full(self.stats.results)

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
    def failure_count(self) -> int:
        return self.stats.counts["failed"] + self.stats.counts["error"]

    @property
    def failures(self) -> Iterator[CaseResult]:
        """Full results of the failed and errored cases, in report order."""
        return self.read_full(c for c in self.stats.results if c.status in ("failed", "error"))

    def read_full(self, slim: Iterable[CaseResult]) -> Iterator[CaseResult]:
        """The full results of ``slim`` (results of :attr:`stats`), read one at a time."""
        if not self.offsets:
            return
        with open(self.run_dir / bundle.RESULTS, "rb") as handle:
            for case in slim:
                yield CaseResult.from_dict(_read_line(handle, self.offsets[result_key(case)]))

    def label(self, case: CaseResult) -> str:
        """The case id, with the repeat index when the run has repeats."""
        return f"{case.id} [repeat {case.repeat}]" if self.repeats else str(case.id)

    def calls_for(self, case: CaseResult) -> list[dict[str, Any]]:
        """Judge calls of this case (and this repeat, when the log records repeats)."""
        offsets = self.calls.offsets.get(str(case.id))
        if not offsets:
            return []
        with open(self.run_dir / bundle.JUDGE_CALLS, "rb") as handle:
            calls = [_read_line(handle, offset) for offset in offsets]
        return [c for c in calls if c.get("repeat") is None or c.get("repeat") == case.repeat]

    @property
    def judge_stats(self) -> dict[str, Any]:
        return self.calls.to_dict()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scan_results(path: Path, offsets: dict[tuple[str, int], int]) -> Iterator[CaseResult]:
    """Slim results of ``results.jsonl``, noting each line's offset (the last line wins)."""
    for offset, data in _json_lines(path):
        try:
            case = CaseResult.from_dict(data)
        except (TypeError, ValueError, AttributeError):
            continue
        offsets[result_key(case)] = offset
        yield case.slim()


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
    offsets: dict[tuple[str, int], int] = {}
    run = compute_stats(
        _scan_results(run_dir / bundle.RESULTS, offsets), unstable_bound=unstable_bound
    )
    return BundleView(
        run_dir=run_dir,
        stats=run,
        summary=summary_dict(run, file_summary),
        file_summary=file_summary,
        offsets=offsets,
        calls=_scan_judge_calls(run_dir / bundle.JUDGE_CALLS),
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
