"""How grader results become a case's score and status (docs/results.md)."""

from __future__ import annotations

from collections.abc import Sequence

from evalrun.results.models import GraderOutcome, Status


def case_score(graders: Sequence[GraderOutcome]) -> float | None:
    """Weight-averaged score of the graders that scored; abstentions and errors left out."""
    scored = [g for g in graders if g.score is not None and g.status in ("passed", "failed")]
    total_weight = sum(g.weight for g in scored)
    if not scored:
        return None
    if total_weight == 0:
        return sum(g.score or 0.0 for g in scored) / len(scored)
    return sum((g.score or 0.0) * g.weight for g in scored) / total_weight


def case_status(graders: Sequence[GraderOutcome], target_failed: bool = False) -> Status:
    if target_failed or any(g.status == "error" for g in graders):
        return "error"
    if not graders or all(g.status == "unscored" for g in graders):
        return "unscored"
    if any(g.status == "failed" for g in graders):
        return "failed"
    return "passed"
