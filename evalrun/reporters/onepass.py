"""The one pass that writes several reports from a bundle: each result read once.

Below ``writing.py`` (which opens the report files) so a format module (``markdown.write``) can
run the pass without importing the module that imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from evalrun.reporters.bundle_view import BundleView
from evalrun.results.models import CaseResult

if TYPE_CHECKING:
    from evalrun.reporters.drafts import Pieces, ReportDrafts


class ReportWriter(Protocol):
    """One report being written: its start, then each case in report order, then its end.
    A case comes whole (``case``) or as the section its module's ``draft(view, case)``
    rendered before (``place``)."""

    #: False when the report shows only the cases that did not pass.
    reads_passed: bool

    def head(self) -> None: ...
    def case(self, case: CaseResult) -> None: ...
    def place(self, pieces: Pieces) -> None: ...
    def tail(self) -> None: ...


def write_all(
    view: BundleView, writers: Iterable[ReportWriter], drafts: ReportDrafts | None = None
) -> None:
    """Write several reports in one pass over the results: each result is read once, or not
    at all when ``drafts`` (the run's) has its sections already."""
    writers = list(writers)
    for w in writers:
        w.head()
    passed_too = any(w.reads_passed for w in writers)
    if drafts is not None and drafts.fit(view):
        modules = [type(w).__module__ for w in writers]
        for offset in view.index.offsets(passed=passed_too):
            draft = drafts.get(view, offset, modules)
            if draft is None:
                for case in view.read_at([offset]):
                    _write_case(writers, case)
                continue
            for w, module in zip(writers, modules, strict=True):
                if w.reads_passed or draft.status != "passed":
                    w.place(draft.pieces[module])
    else:
        for case in view.cases if passed_too else view.problems:
            _write_case(writers, case)
    for w in writers:
        w.tail()


def _write_case(writers: list[ReportWriter], case: CaseResult) -> None:
    for w in writers:
        if w.reads_passed or case.status != "passed":
            w.case(case)
