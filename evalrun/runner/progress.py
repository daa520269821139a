"""Progress for long runs: a live bar on a terminal, one plain line per case otherwise."""

from __future__ import annotations

import heapq
import sys
import time
from typing import TYPE_CHECKING, TextIO

from evalrun.results.matrix import cell_label, column_of
from evalrun.results.models import CaseResult
from evalrun.results.scan import PROBLEMS_FIRST
from evalrun.safetext import printable

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

_STATUS_STYLE = {"passed": "green", "failed": "red", "error": "magenta", "unscored": "yellow"}


#: Longest reason on a progress line; a longer one loses its middle, never its end (the fix).
REASON_CHARS = 240


class Progress:
    def __init__(
        self,
        total: int,
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
        repeat: int = 1,
        columns: int = 1,
    ) -> None:
        self.total = total
        self.repeat = repeat
        self.columns = columns
        self.done = 0
        self.passed = 0
        self.judge_calls = 0
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self._started = time.monotonic()
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        if not quiet and self.stream.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]evalrun"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._task = self._bar.add_task("cases", total=total, stats="")
            self._bar.start()

    def case_done(self, case: CaseResult) -> None:
        self.done += 1
        self.passed += case.status == "passed"
        self.judge_calls += sum(g.proxy.calls for g in case.graders if g.proxy)
        if self.quiet:
            return
        if self._bar is not None and self._task is not None:
            rate = self.passed / self.done
            self._bar.update(
                self._task,
                advance=1,
                stats=f"pass {rate:.0%} · judge calls {self.judge_calls}",
            )
            if case.status in ("failed", "error"):
                from rich.markup import escape  # the bar imported rich already

                color = _STATUS_STYLE[case.status]
                self._bar.console.print(
                    f"[{color}]{case.status}[/] {escape(printable(self._label(case)))}: "
                    f"{escape(printable(_why(case)))}",
                    highlight=False,
                )
            return
        score = "-" if case.score is None else f"{case.score:.3f}"
        label = printable(self._label(case))
        line = f"[{self.done}/{self.total}] {case.status:<8} {score:>6}  {label}"
        if case.status in ("failed", "error", "unscored"):
            line += f"  ({printable(_why(case))})"
        print(line, file=self.stream, flush=True)

    def _label(self, case: CaseResult) -> str:
        """The case id (with its column in a matrix run), and with --repeat which repeat
        (0-based, as ``rep`` in the table)."""
        label = cell_label(case, self.columns)
        return f"{label} rep {case.repeat}" if self.repeat > 1 else label

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class _Row:
    """A table row in a heap whose top is the row that matters least."""

    __slots__ = ("case", "key")

    def __init__(self, case: CaseResult) -> None:
        self.case = case
        self.key = (PROBLEMS_FIRST.get(case.status, 0), case.id, column_of(case), case.repeat)

    def __lt__(self, other: _Row) -> bool:
        return self.key > other.key


class TableRows:
    """The results for the terminal table, held as they finish: all of them while there are at
    most ``limit``, else the ``limit`` that matter most (problems first, then by id), so a run
    of any size holds at most ``limit`` results for the table."""

    def __init__(self, limit: int = 40) -> None:
        self.limit = limit
        self.total = 0
        self._heap: list[_Row] = []

    def add(self, case: CaseResult) -> None:
        self.total += 1
        row = _Row(case)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, row)
        elif row.key < self._heap[0].key:
            heapq.heapreplace(self._heap, row)

    def rows(self) -> list[CaseResult]:
        """By id when all fit; else problems first (by id within a status)."""
        if self.total <= self.limit:
            return sorted(
                (r.case for r in self._heap), key=lambda c: (c.id, column_of(c), c.repeat)
            )
        return [r.case for r in sorted(self._heap, key=lambda r: r.key)]


def _why(case: CaseResult) -> str:
    if case.error:
        return shorten(case.error)
    for grader in case.graders:
        if grader.status == case.status and grader.reason:
            return shorten(f"{grader.name}: {grader.reason}")
    return ""


def shorten(text: str, limit: int = REASON_CHARS) -> str:
    """One line of at most ``limit`` characters; a reason's end usually says what to do, so
    the middle goes."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    keep = limit - 3
    return f"{text[: keep // 3]} … {text[-(keep - keep // 3) :]}"
