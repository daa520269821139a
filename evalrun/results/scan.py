"""One pass over ``results.jsonl``: the run statistics and where each result's line is, in
report order, holding numbers only (docs/performance.md).

The runner makes this pass when its cases are done (for the summary and the exit code) and
hands it to the reports, so a run reads its results for the reports once more, not twice.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evalrun.compact import merge_sorted, repeated
from evalrun.results.models import CaseResult
from evalrun.results.reader import result_lines
from evalrun.results.summary import StatsBuilder, result_key

#: Report order of statuses: what needs a look first.
PROBLEMS_FIRST = {"error": 0, "failed": 1, "unscored": 2, "passed": 3}
#: Sort-key layout of a passed result in 64 bits: line (or _NO_LINE), repeat, byte offset.
_LINE_BITS = 22
_NO_LINE = (1 << _LINE_BITS) - 1
_REPEAT_BITS = 6
_OFFSET_BITS = 64 - _LINE_BITS - _REPEAT_BITS


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

    def add(self, case: CaseResult, offset: int) -> None:
        if offset >> _OFFSET_BITS:
            raise ValueError(f"results.jsonl beyond {1 << _OFFSET_BITS} bytes is not supported")
        line, repeat = case.line, case.repeat
        if line is None or not 0 <= line < _NO_LINE:
            line, repeat = _NO_LINE, 0
        repeat = min(max(repeat, 0), (1 << _REPEAT_BITS) - 1)
        rank = PROBLEMS_FIRST[case.status]
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
class ResultScan:
    """The statistics (not built yet, so a reader can choose the unstable bound) and the
    report-order index of one bundle's results."""

    stats: StatsBuilder
    index: CaseIndex


class ResultScanner:
    """Fed each result line as it is read; ``keep`` refuses lines by offset (superseded ones).

    :attr:`whole` says whether the pass stands as it is: no (id, repeat) had two lines, and
    the statistics were kept per case if the results have repeats."""

    def __init__(self, *, by_case: bool, keep: Callable[[int], bool] | None = None) -> None:
        self.stats = StatsBuilder(by_case=by_case)
        self.index = CaseIndex()
        self._keep = keep
        self._keys = array("q")

    def add(self, offset: int, case: CaseResult) -> None:
        if self._keep is not None and not self._keep(offset):
            return
        self.stats.add(case)
        self.index.add(case, offset)
        self._keys.append(hash(result_key(case)))

    @property
    def superseded(self) -> bool:
        """Whether some (id, repeat) may have two lines (a hash collision only costs a pass)."""
        return self._keep is None and bool(repeated(self._keys))

    @property
    def whole(self) -> bool:
        return not self.stats.saw_repeats and not self.superseded

    def result(self) -> ResultScan:
        self.index.sort()
        self._keys = array("q")
        return ResultScan(self.stats, self.index)


def latest_offsets(directory: Path) -> set[int]:
    """Offsets of the last line of each (id, repeat): a resumed run may grade a case again."""
    latest = {result_key(case): offset for offset, case in result_lines(directory)}
    return set(latest.values())


def scan_results(directory: Path, *, by_case: bool) -> ResultScan:
    """The scan of a bundle, the last line of each (id, repeat) winning; statistics per case
    when ``by_case`` or when the results turn out to have repeats."""
    scanner = ResultScanner(by_case=by_case)
    for offset, case in result_lines(directory):
        scanner.add(offset, case)
    superseded = scanner.superseded
    if superseded or scanner.stats.saw_repeats:  # rare: go again, keeping what that needs
        keep = latest_offsets(directory).__contains__ if superseded else None
        scanner = ResultScanner(by_case=True, keep=keep)
        for offset, case in result_lines(directory):
            scanner.add(offset, case)
    return scanner.result()
