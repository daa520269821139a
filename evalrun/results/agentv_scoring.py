"""How a case of an AgentV file gets its score and status: AgentV's rule, not evalrun's
(docs/eval-files.md, "AgentV's scoring rule").

AgentV judges a test by its aggregate: the weight-averaged score of the graders, passed at
0.8. A grader below its own threshold does not fail the test by itself; only a ``required``
grader does, and it makes the aggregate 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalrun.results.models import GraderOutcome, Status

#: AgentV's default pass mark, for a test's aggregate and for a grader that sets none
#: (docs/eval-files.md, "AgentV's scoring rule").
AGENTV_THRESHOLD = 0.8


def required_minimum(required: bool, threshold: float | None) -> float | None:
    """The score a ``required`` grader must reach: the threshold the file set for it (AgentV's
    ``min_score``), else AgentV's 0.8; None when it is not required."""
    if not required:
        return None
    return AGENTV_THRESHOLD if threshold is None else threshold


def agentv_case(
    graders: Sequence[GraderOutcome], required_min: Sequence[float | None]
) -> tuple[float | None, Status]:
    """The case's score and status under AgentV's rule. ``required_min[i]`` is the score a
    ``required`` grader must reach (None: not required). An error stays an error and a case
    whose graders all abstained stays unscored, as in evalrun's own rule."""
    if any(g.status == "error" for g in graders):
        scored = [g for g in graders if g.status in ("passed", "failed") and g.score is not None]
        return (_mean(scored) if scored else None), "error"
    if not graders or all(g.status == "unscored" for g in graders):
        return None, "unscored"
    for grader, minimum in zip(graders, required_min, strict=True):
        # an abstaining required grader counts as 0, as AgentV scores a skipped grader
        if minimum is not None and (grader.score or 0.0) < minimum:
            return 0.0, "failed"
    scored = [g for g in graders if g.status in ("passed", "failed") and g.score is not None]
    score = _mean(scored)
    return score, "passed" if score >= AGENTV_THRESHOLD else "failed"


def _mean(scored: Sequence[GraderOutcome]) -> float:
    """AgentV's weighted mean: 0 when the weights add up to 0."""
    total = sum(g.weight for g in scored)
    if total <= 0:
        return 0.0
    return sum((g.score or 0.0) * g.weight for g in scored) / total
