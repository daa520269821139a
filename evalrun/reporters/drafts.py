"""Each case's report sections, drafted while the run goes on (docs/reports.md, "When reports
are written").

The run hands :class:`ReportDrafts` every line it writes to the bundle. A result line is read
back through the bundle's one reader and its section of every report is rendered then, while
the run waits on graders and judges. At the end the reports are written from the bundle as
always (its statistics, its order), each case's section taken from its draft instead of being
read and rendered again. A case without a draft that fits is read and rendered as usual, so
the reports are the same bytes either way; the end of a run is mostly copying.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from evalrun.judgecall import JudgeCall
from evalrun.reporters.bundle_view import (
    DETAIL_LIMIT,
    BundleView,
    JudgeCalls,
    calls_of_repeat,
    case_label,
)
from evalrun.results.bundle import WrittenLine
from evalrun.results.models import CaseResult
from evalrun.results.reader import judge_call_from_line, result_from_line

#: A case's section of one report, in the pieces its writer's ``place`` puts together.
Pieces = tuple[str, ...]


@dataclass
class Draft:
    case_id: str
    status: str
    #: How many judge calls the run wrote with the result under its id (a view must agree).
    calls: int
    #: reporter module -> the case's section of that report
    pieces: dict[str, Pieces]


class _DraftView:
    """The ``CaseView`` (``bundle_view.py``) of a run of one repeat (no repeat statistics,
    ids as labels): a case's judge calls are those written with it."""

    repeats = None
    matrix = False

    def __init__(self) -> None:
        self.calls: list[JudgeCall] = []

    def label(self, case: CaseResult) -> str:
        return case_label(case, self.repeats)

    def calls_for(self, case: CaseResult) -> list[JudgeCall]:
        return calls_of_repeat(case, self.calls)


class ReportDrafts:
    """Drafts of the reports whose modules are ``modules`` (``evalrun.reporters.report_drafts``
    makes them from format names) for a run of one repeat that starts a fresh bundle and writes
    ``expected`` results; a run of more than ``DETAIL_LIMIT`` (compact reports) keeps none."""

    def __init__(self, modules: list[ModuleType], expected: int = 0) -> None:
        self._calls = JudgeCalls()
        self.broken = False
        self._modules = {m.__name__: m for m in modules}
        self._drafts: dict[int, Draft] = {}
        self._view = _DraftView()
        self._full = expected > DETAIL_LIMIT

    def add(self, result: WrittenLine, calls: list[WrittenLine]) -> None:
        """One recorded case: its result line and its judge-call lines. Never raises: a draft
        that cannot be made leaves the reports to be rendered from the bundle alone."""
        if self.broken:
            return
        try:
            self._add(result, calls)
        except Exception:  # a report draft never costs the run a result
            self.broken = True
            self._drafts.clear()

    def _add(self, result: WrittenLine, calls: list[WrittenLine]) -> None:
        written = [(offset, judge_call_from_line(line)) for offset, line in calls]
        for offset, call in written:
            if call is not None:
                self._calls.add(offset, call)
        if self._full:
            return
        if len(self._drafts) >= DETAIL_LIMIT:
            self._full = True
            self._drafts.clear()
            return
        case = result_from_line(result[1])
        if case is None:
            return
        case_id = str(case.id)
        self._view.calls = [c for _, c in written if c is not None and c.case_id == case_id]
        self._drafts[result[0]] = Draft(
            case_id,
            case.status,
            len(self._view.calls),
            {name: module.draft(self._view, case) for name, module in self._modules.items()},
        )

    @property
    def calls(self) -> JudgeCalls | None:
        """Every judge call written, indexed as a scan of the file would; None once a draft
        failed (the index may then lack some)."""
        return None if self.broken else self._calls

    def fit(self, view: BundleView) -> bool:
        """Whether drafts may stand in for this view's cases at all."""
        fits = view.repeats is None and not view.compact and not view.matrix
        return not self.broken and fits

    def get(self, view: BundleView, offset: int, modules: list[str]) -> Draft | None:
        """The draft of the result at ``offset`` with a section for each of ``modules``, if the
        view has the same judge calls for it."""
        draft = self._drafts.get(offset)
        if draft is None or any(m not in draft.pieces for m in modules):
            return None
        if len(view.calls.offsets.get(draft.case_id, ())) != draft.calls:
            return None
        return draft
