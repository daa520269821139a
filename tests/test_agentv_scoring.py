"""AgentV's scoring rule for AgentV files (docs/eval-files.md, "AgentV's scoring rule"),
checked against the numbers AgentV's own orchestrator gives."""

from __future__ import annotations

import pytest

from evalrun.results.agentv_scoring import agentv_case, required_minimum
from evalrun.results.models import GraderOutcome
from evalrun.spec.loader import load_eval


def grader(score: float | None, status: str = "", weight: float = 1.0) -> GraderOutcome:
    verdict = status or ("passed" if (score or 0) >= 0.5 else "failed")
    return GraderOutcome(name="g", status=verdict, score=score, weight=weight)  # type: ignore[arg-type]


def test_the_aggregate_decides_not_each_grader() -> None:
    # four checks pass and one fails: 0.8 passes, as AgentV's default threshold has it
    assert agentv_case([grader(1.0)] * 4 + [grader(0.0)], [None] * 5) == (0.8, "passed")
    assert agentv_case([grader(1.0)] * 3 + [grader(0.0)], [None] * 4) == (0.75, "failed")


def test_a_required_grader_below_its_minimum_makes_the_score_zero() -> None:
    graders = [grader(0.0), grader(1.0), grader(1.0), grader(1.0)]
    assert agentv_case(graders, [0.8, None, None, None]) == (0.0, "failed")
    # its own min_score (evalrun's threshold) replaces the 0.8
    assert agentv_case([grader(0.6), grader(1.0)], [0.5, None]) == (pytest.approx(0.8), "passed")
    abstained = [grader(None, "unscored"), grader(1.0)]
    assert agentv_case(abstained, [0.8, None]) == (0.0, "failed")


def test_weights_errors_and_abstentions() -> None:
    assert agentv_case([grader(1.0, weight=0), grader(0.0, weight=0)], [None, None]) == (
        0.0,
        "failed",
    )
    assert agentv_case([grader(None, "error"), grader(1.0)], [None, None]) == (1.0, "error")
    assert agentv_case([grader(None, "unscored")], [None]) == (None, "unscored")


def test_required_minimum() -> None:
    assert required_minimum(False, 0.3) is None
    assert required_minimum(True, None) == 0.8
    assert required_minimum(True, 0.3) == 0.3


def test_required_true_is_kept_on_the_grader(tmp_path) -> None:
    path = tmp_path / "gate.eval.yaml"
    path.write_text(
        "providers: [sut]\n"
        "tests:\n"
        "  - id: a\n"
        "    vars: {input: hi}\n"
        "    assert:\n"
        "      - {type: contains, value: x, required: true}\n"
        "      - {type: contains, value: y, min_score: 0.6, required: true}\n"
        "      - {type: contains, value: z}\n",
        encoding="utf-8",
    )
    graders = load_eval(path).spec.tests[0].graders  # type: ignore[index]
    assert [g.required for g in graders] == [True, True, False]
    assert "threshold" not in graders[0].model_fields_set
    assert graders[1].threshold == 0.6


def test_the_load_time_and_the_run_time_pass_marks_are_one_fact() -> None:
    """The spec may not import results (tests/test_import_direction.py), so AgentV's pass mark
    is written twice; this keeps them equal."""
    from evalrun.results.agentv_scoring import AGENTV_THRESHOLD as at_run_time
    from evalrun.spec.agentv_options import AGENTV_THRESHOLD as at_load_time

    assert at_load_time == at_run_time == 0.8
