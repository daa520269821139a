"""report.json: the statistics a machine wants, in one document."""

from __future__ import annotations

import json
from typing import Any

from evalrun.reporters.bundle_view import BundleView, case_problems
from evalrun.results.summary import RUN_KEYS

FORMAT = "evalrun.report/1"


def build(view: BundleView) -> dict[str, Any]:
    s = view.summary
    run = view.stats
    return {
        "format": FORMAT,
        "run": {key: s.get(key) for key in RUN_KEYS},
        **run.to_dict(),
        "repeat_stats": run.repeats.to_dict() if run.repeats else None,
        "judge_calls": view.judge_stats,
        "failures": [
            {
                "id": case.id,
                "repeat": case.repeat,
                "status": case.status,
                "score": case.score,
                "problems": case_problems(case),
            }
            for case in view.cases
            if case.status != "passed"
        ],
    }


def render(view: BundleView) -> str:
    return json.dumps(build(view), indent=2, ensure_ascii=False, default=str) + "\n"
