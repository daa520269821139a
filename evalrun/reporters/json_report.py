"""report.json: the statistics a machine wants, in one document."""

from __future__ import annotations

from typing import Any, TextIO

from evalrun.reporters.bundle_view import BundleView, CaseView, case_problems
from evalrun.reporters.fmt import pretty_json
from evalrun.results.models import CaseResult
from evalrun.results.summary import RUN_KEYS

FORMAT = "evalrun.report/1"
#: Where ``indent=2`` puts an item of the top-level "failures" list.
_INDENT = "    "


def _head(view: BundleView) -> dict[str, Any]:
    """Everything but the failures, which are written one by one after it."""
    run = view.stats
    head = {
        "format": FORMAT,
        "run": {key: getattr(view.meta, key) for key in RUN_KEYS},
        **run.to_dict(),
        "repeat_stats": run.repeats.to_dict() if run.repeats else None,
        "judge_calls": view.judge_stats,
    }
    if view.matrix:  # a run of one column keeps the keys it always had
        head["run"]["matrix"] = view.meta.matrix
        if view.meta.prompts:
            head["run"]["prompts"] = view.meta.prompts
        head["matrix"] = view.grid().to_dict()
    return head


def _failure(case: CaseResult, matrix: bool) -> dict[str, Any]:
    return {
        "id": case.id,
        **({"target": case.target} if matrix else {}),
        **({"prompt": case.prompt} if case.prompt is not None else {}),
        "repeat": case.repeat,
        "status": case.status,
        "score": case.score,
        "problems": case_problems(case),
    }


def draft(view: CaseView, case: CaseResult) -> tuple[str]:
    """A case's entry in "failures", indented as it sits there."""
    return (pretty_json(_failure(case, view.matrix)).replace("\n", "\n" + _INDENT),)


class Writer:
    """The document ``json.dumps(..., indent=2)`` gives, with "failures" (every result that did
    not pass) streamed last."""

    reads_passed = False

    def __init__(self, view: BundleView, out: TextIO) -> None:
        self.view, self.out = view, out
        self.separator = "\n"

    def head(self) -> None:
        head = pretty_json({**_head(self.view), "failures": []})
        self.out.write(head.removesuffix("[]\n}") + "[")

    def case(self, case: CaseResult) -> None:
        self.place(draft(self.view, case))

    def place(self, pieces: tuple[str]) -> None:
        self.out.write(self.separator + _INDENT + pieces[0])
        self.separator = ",\n"

    def tail(self) -> None:
        self.out.write("]\n}\n" if self.separator == "\n" else "\n  ]\n}\n")
