"""The run's split (docs/architecture.md, "The run and one case"): a checked plan, a
``CaseGrader`` that grades one case of it, and the typed records a result line is written
from, which must keep the shape docs/results.md gives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalrun.results.models import CaseResult, CaseTimings, CaseUsage, JudgeUsage, TargetUsage
from evalrun.results.summary import Counts, compute_stats
from evalrun.runner.case_grader import CaseGrader
from evalrun.runner.options import RunOptions
from evalrun.runner.plan import plan_run
from evalrun.runner.preflight import PreflightError
from evalrun.spec.loader import load_eval
from evalrun.targets import StoreOptions

EVAL = """\
description: one case the target answers, one that carries its output
target: echo
graders:
  - type: contains
    value: hello
tests:
  - id: asked
    input: say hello
  - id: given
    input: q
    output: goodbye
"""
TARGETS = """\
targets:
  - name: echo
    kind: mock
    default: hello world
"""


def _eval_file(tmp_path: Path) -> Path:
    (tmp_path / "targets.yaml").write_text(TARGETS)
    path = tmp_path / "records.eval.yaml"
    path.write_text(EVAL)
    return path


def _options(tmp_path: Path) -> RunOptions:
    return RunOptions(out=tmp_path / "out", stores=StoreOptions(), quiet=True, sandbox="none")


class CountingLimit:
    """A concurrency limit that counts the calls it let through."""

    def __init__(self) -> None:
        self.entered = 0

    async def __aenter__(self) -> None:
        self.entered += 1

    async def __aexit__(self, *exc: object) -> None:
        return None


def _grade_both(tmp_path: Path, limit: CountingLimit | None = None) -> dict[str, CaseResult]:
    loaded = load_eval(_eval_file(tmp_path))
    plan = plan_run(
        loaded, _options(tmp_path), limit_for=(lambda _config: limit) if limit else None
    )

    async def grade() -> dict[str, CaseResult]:
        grader = CaseGrader(plan)
        try:
            return {case.id: (await grader.grade(case, 0))[0] for case in plan.cases}
        finally:
            await grader.aclose()
            await plan.close()

    return asyncio.run(grade())


def test_a_case_grader_grades_the_cases_of_a_plan_with_typed_usage_and_timings(
    tmp_path: Path,
) -> None:
    results = _grade_both(tmp_path)
    asked, given = results["asked"], results["given"]
    assert (asked.status, asked.output, asked.score) == ("passed", "hello world", 1.0)
    assert (given.status, given.output, given.score) == ("failed", "goodbye", 0.0)
    target = asked.usage.target
    assert target is not None and (target.input, target.output) == (2, 2)
    assert target.total == 4 and not target.cached and not target.replayed
    assert asked.usage.judge == JudgeUsage()  # a check makes no judge calls
    assert asked.timings.target_ms is not None and asked.timings.total_ms is not None
    # a case that carries its output never asks the target: no target usage, no target time
    assert given.usage.target is None and given.timings.target_ms == 0.0
    assert list(given.to_dict()["usage"]) == ["judge"]
    assert list(given.to_dict()["timings"]) == ["target_ms", "total_ms"]


def test_the_plan_builds_each_target_limit_from_the_factory_it_was_given(tmp_path: Path) -> None:
    """What a Ray worker relies on: the cluster-wide limit is passed in, never patched on."""
    limit = CountingLimit()
    _grade_both(tmp_path, limit)
    assert limit.entered == 1  # "asked" called the target; "given" did not


def test_a_plan_with_problems_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    path = _eval_file(tmp_path)
    path.write_text(EVAL.replace("target: echo", "target: nowhere"))
    with pytest.raises(PreflightError, match="nowhere"):
        plan_run(load_eval(path), _options(tmp_path))


def test_a_result_line_reads_back_into_the_records_and_writes_out_byte_for_byte() -> None:
    """The typed records keep docs/results.md's shape: keys, order and number types."""
    line = {
        "id": "c",
        "status": "passed",
        "score": 1.0,
        "graders": [],
        "output": "hello",
        "target": "echo",
        "error": None,
        "repeat": 0,
        "timings": {"target_ms": 12.5, "total_ms": 40.1},
        "usage": {
            "target": {
                "input": 3,
                "output": 2,
                "total": 5,
                "cached": False,
                "replayed": True,
                "cost_usd": None,
            },
            "judge": {"calls": 2, "input_tokens": 30, "output_tokens": 4, "cost_usd": 0.25},
        },
        "line": 7,
        "warnings": [],
    }
    text = json.dumps(line)
    assert json.dumps(CaseResult.from_dict(json.loads(text)).to_dict()) == text
    bare = {**line, "timings": {}, "usage": {}}
    assert json.dumps(CaseResult.from_dict(bare).to_dict()) == json.dumps(bare)


def test_usage_and_timings_that_are_not_what_evalrun_writes_read_as_absent() -> None:
    """A hand-edited line keeps its case: odd usage or timings are dropped, not fatal."""
    case = CaseResult.from_dict(
        {
            "id": "c",
            "status": "passed",
            "timings": {"total_ms": "slow", "target_ms": True},
            "usage": {"target": "many", "judge": {"calls": "x", "cost_usd": 0.5}},
        }
    )
    assert case.timings == CaseTimings()
    assert case.usage == CaseUsage(target=None, judge=JudgeUsage(cost_usd=0.5))
    assert CaseResult.from_dict({"id": "c", "status": "passed", "usage": 3}).usage == CaseUsage()


def test_counts_are_typed_and_written_in_the_summary_order() -> None:
    cases = [
        CaseResult(id="a", status="passed", score=1.0),
        CaseResult(id="b", status="error"),
        CaseResult(
            id="c",
            status="failed",
            score=0.0,
            usage=CaseUsage(target=TargetUsage(input=3, output=1, total=4, cost_usd=0.5)),
        ),
    ]
    stats = compute_stats(cases)
    assert stats.counts == Counts(passed=1, failed=1, error=1, unscored=0, total=3)
    assert list(stats.to_dict()["counts"].items()) == [
        ("passed", 1),
        ("failed", 1),
        ("error", 1),
        ("unscored", 0),
        ("total", 3),
    ]
    assert stats.to_dict()["usage"]["target"] == {
        "input": 3,
        "output": 1,
        "total": 4,
        "cost_usd": 0.5,
    }
    assert stats.counts.of("error") == 1
