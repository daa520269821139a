"""A run bundle read for reporting, with every statistic the reporters show.

Reporters format a :class:`BundleView`; none of them computes statistics of its own. What stays
in memory is numbers: the statistics (one pass over ``results.jsonl``) and, per result, where
its line is and where it goes in the report order. Results and judge calls are read back one
case at a time by file offset, so reporters write as they go (docs/performance.md).
"""

from __future__ import annotations

import itertools
import json
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from evalrun.compact import merge_sorted, repeated
from evalrun.results import bundle, stats
from evalrun.results.models import CaseResult, GraderResult
from evalrun.results.summary import (
    DEFAULT_UNSTABLE_BOUND,
    GraderStats,
    RepeatStats,
    RunStats,
    StatsBuilder,
    summary_dict,
)

#: Keys of ``CaseResult.timings`` read as the case's wall time, in order of preference.
DURATION_KEYS_MS = ("total_ms", "duration_ms", "wall_ms")
DURATION_KEYS_S = ("total_s", "duration_s")
#: How long a one-line reason may be (a table cell, a CI failure message).
REASON_LIMIT = 240


#: Report order of statuses: what needs a look first.
PROBLEMS_FIRST = {"error": 0, "failed": 1, "unscored": 2, "passed": 3}
#: Runs with more results than this show passed cases compactly: no per-case details in
#: report.md, and in report.html a row each from compact data, paged in by the page's script.
DETAIL_LIMIT = 1000
#: Sort-key layout of a passed result in 64 bits: line (or _NO_LINE), repeat, byte offset.
_LINE_BITS = 22
_NO_LINE = (1 << _LINE_BITS) - 1
_REPEAT_BITS = 6
_OFFSET_BITS = 64 - _LINE_BITS - _REPEAT_BITS


def problem_rank(case: CaseResult) -> tuple[int, int, int]:
    """Sort key of the report order (see :class:`CaseIndex`) for a result in memory; results
    without a line keep their order (a stable sort)."""
    line = case.line if case.line is not None else _NO_LINE
    return (
        PROBLEMS_FIRST.get(case.status, 0),
        line,
        int(case.repeat or 0) if case.line is not None else 0,
    )


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
                value = json.loads(line.decode("utf-8"))
            except ValueError:
                value = None
            if value is not None:
                yield offset, value
            offset += len(line)


def _read_line(handle: BinaryIO, offset: int) -> Any:
    handle.seek(offset)
    return json.loads(handle.readline().decode("utf-8"))


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
class CaseIndex:
    """Where each result's line is, in report order: problems first (error, failed, unscored,
    then passed), by the case's line in its eval file within a status, then by repeat; results
    without a line after those, in the order of ``results.jsonl``."""

    #: (status rank, line, repeat, offset) of every result that did not pass: few, as a rule.
    problems: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: One 64-bit sort key per passed result: line, repeat and offset packed together (a
    #: passed case costs 8 bytes here, however large the run).
    passed: array[int] = field(default_factory=lambda: array("Q"))

    def add(self, rank: int, line: int | None, repeat: int, offset: int) -> None:
        if offset >> _OFFSET_BITS:
            raise ValueError(f"results.jsonl beyond {1 << _OFFSET_BITS} bytes is not supported")
        if line is None or not 0 <= line < _NO_LINE:
            line, repeat = _NO_LINE, 0
        repeat = min(max(repeat, 0), (1 << _REPEAT_BITS) - 1)
        if rank == PROBLEMS_FIRST["passed"]:
            self.passed.append((((line << _REPEAT_BITS) | repeat) << _OFFSET_BITS) | offset)
        else:
            self.problems.append((rank, line, repeat, offset))

    def sort(self) -> None:
        self.problems.sort()
        self.passed = array("Q", merge_sorted(self.passed))

    def offsets(self, *, problems: bool = True, passed: bool = True) -> Iterator[int]:
        if problems:
            for entry in self.problems:
                yield entry[3]
        if passed:
            mask = (1 << _OFFSET_BITS) - 1
            for key in self.passed:
                yield key & mask

    def failure_offsets(self) -> Iterator[int]:
        for rank, _, _, offset in self.problems:
            if rank <= PROBLEMS_FIRST["failed"]:
                yield offset


@dataclass
class BundleView:
    run_dir: Path
    #: Statistics (numbers only); the results themselves are read back with :attr:`cases`.
    stats: RunStats
    summary: dict[str, Any]
    file_summary: dict[str, Any] = field(default_factory=dict)
    index: CaseIndex = field(default_factory=CaseIndex)
    calls: JudgeCalls = field(default_factory=JudgeCalls)

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
        return self.stats.counts["total"] > DETAIL_LIMIT

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
        return self.read_at(self.index.failure_offsets())

    def read_at(self, offsets: Iterable[int], *, brief: bool = False) -> Iterator[CaseResult]:
        """The results whose lines start at ``offsets``, read one at a time (``brief``: see
        :attr:`cases`)."""
        path = self.run_dir / bundle.RESULTS
        if not path.is_file():
            return
        read = _brief_result if brief else CaseResult.from_dict
        at = -1
        with open(path, "rb") as handle:
            for offset in offsets:
                if offset != at:  # report order mostly follows the file: skip needless seeks
                    handle.seek(offset)
                line = handle.readline()
                at = offset + len(line)
                yield read(json.loads(line.decode("utf-8")))

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


def _brief_result(data: dict[str, Any]) -> CaseResult:
    """A result with what a compact row needs, read faster than in full (large runs)."""
    return CaseResult(
        id=data["id"],
        status=data["status"],
        score=data.get("score"),
        output=data.get("output"),
        repeat=data.get("repeat") or 0,
        timings=data.get("timings") or {},
        line=data.get("line"),
        graders=[
            GraderResult(
                name=g["name"],
                status=g["status"],
                score=g.get("score"),
                duration_ms=g.get("duration_ms") or 0.0,
            )
            for g in data.get("graders") or ()
        ],
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _key(data: dict[str, Any]) -> tuple[str, int]:
    """(case id, repeat) of a result line; raises on a line that is not a result."""
    case_id, status = data["id"], data["status"]
    if not isinstance(case_id, (str, int)) or status not in PROBLEMS_FIRST:
        raise ValueError("not a result")
    return str(case_id), int(data.get("repeat") or 0)


def _scan_results(
    path: Path, builder: StatsBuilder, keep: Callable[[int], bool] | None = None
) -> tuple[CaseIndex, array[int]]:
    """One pass over ``results.jsonl``: statistics into ``builder``, the report order, and a
    hash of each line's (id, repeat) to find superseded lines. Lines that are not results are
    skipped; with ``keep``, so are lines whose offset it refuses."""
    index = CaseIndex()
    hashes = array("q")
    for offset, data in _json_lines(path):
        if keep is not None and not keep(offset):
            continue
        try:
            key = _key(data)
            line = data.get("line")
            builder.add_record(data)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        hashes.append(hash(key))
        index.add(
            PROBLEMS_FIRST[data["status"]],
            line if isinstance(line, int) and not isinstance(line, bool) else None,
            key[1],
            offset,
        )
    index.sort()
    return index, hashes


def _latest_offsets(path: Path) -> set[int]:
    """Offsets of the last line of each (id, repeat): a resumed run may grade a case again."""
    latest: dict[tuple[str, int], int] = {}
    for offset, data in _json_lines(path):
        try:
            latest[_key(data)] = offset
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return set(latest.values())


def load_bundle(
    run_dir: Path | str, *, unstable_bound: float = DEFAULT_UNSTABLE_BOUND
) -> BundleView:
    """Read a bundle directory; statistics come from ``results.jsonl``, run metadata from
    ``summary.json`` (either may be missing, e.g. after a crash)."""
    run_dir = Path(run_dir)
    results = run_dir / bundle.RESULTS
    if not run_dir.is_dir() or not (results.is_file() or (run_dir / bundle.SUMMARY).is_file()):
        raise BundleNotFound(
            f"{run_dir}: not a run bundle (no {bundle.RESULTS} or {bundle.SUMMARY})"
        )
    file_summary = bundle.read_summary(run_dir)
    repeats = isinstance(file_summary.get("repeat"), int) and file_summary["repeat"] > 1
    builder = StatsBuilder(by_case=repeats)
    index, hashes = _scan_results(results, builder)
    superseded = bool(repeated(hashes))
    del hashes
    if superseded or builder.saw_repeats:  # rare: go again, keeping what that needs
        keep = _latest_offsets(results).__contains__ if superseded else None
        builder = StatsBuilder(by_case=True)
        index, _ = _scan_results(results, builder, keep)
    run = builder.build(unstable_bound=unstable_bound)
    return BundleView(
        run_dir=run_dir,
        stats=run,
        summary=summary_dict(run, file_summary),
        file_summary=file_summary,
        index=index,
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
