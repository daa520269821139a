"""``evalrun compare``: did a change make the scores better or worse?

Cases are matched by id (repeats averaged per case). For the suite and for each grader we report
the mean paired delta (new - base), wins/losses/ties and a paired percentile-bootstrap
confidence interval; a regression is an interval entirely below zero, or a case that passed
in the base run and does not in the new one (docs/reports.md, "evalrun compare").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evalrun.reporters.bundle_view import BundleView
from evalrun.results import stats
from evalrun.results.matrix import cell_label
from evalrun.results.models import CaseResult

TIE_TOLERANCE = 1e-9


@dataclass
class CaseScores:
    """A case's scores averaged over its repeats, overall and per grader."""

    score: float | None
    status: str
    graders: dict[str, float]


@dataclass
class CaseDelta:
    id: str
    base: float | None
    new: float | None
    base_status: str
    new_status: str

    @property
    def delta(self) -> float | None:
        return None if self.base is None or self.new is None else self.new - self.base

    @property
    def regression(self) -> bool:
        """It passed (every repeat) and no longer does: failed, error, unscored or mixed. No
        interval can say so, as an errored case has no score to pair (docs/reports.md)."""
        return self.base_status == "passed" and self.new_status != "passed"


@dataclass
class Group:
    """The suite or one grader, over the cases both runs scored."""

    name: str
    base_mean: float | None
    new_mean: float | None
    deltas: list[float]
    ci: tuple[float, float] | None
    wins: int
    losses: int
    ties: int

    @property
    def mean_delta(self) -> float | None:
        return stats.mean(self.deltas)

    @property
    def regression(self) -> bool:
        return self.ci is not None and self.ci[1] < 0

    @property
    def improvement(self) -> bool:
        return self.ci is not None and self.ci[0] > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_mean": self.base_mean,
            "new_mean": self.new_mean,
            "paired": len(self.deltas),
            "mean_delta": self.mean_delta,
            "ci": list(self.ci) if self.ci else None,
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "regression": self.regression,
            "improvement": self.improvement,
        }


@dataclass
class Comparison:
    base: str
    new: str
    confidence: float
    seed: int | None
    resamples: int
    overall: Group
    graders: list[Group]
    cases: list[CaseDelta]
    only_base: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)

    @property
    def status_regressions(self) -> list[CaseDelta]:
        return [c for c in self.cases if c.regression]

    @property
    def regression(self) -> bool:
        return self.overall.regression or bool(self.status_regressions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "new": self.new,
            "confidence": self.confidence,
            "seed": self.seed,
            "resamples": self.resamples,
            "overall": self.overall.to_dict(),
            "graders": {g.name: g.to_dict() for g in self.graders},
            "cases": [
                {
                    "id": c.id,
                    "base": c.base,
                    "new": c.new,
                    "delta": c.delta,
                    "base_status": c.base_status,
                    "new_status": c.new_status,
                    "regression": c.regression,
                }
                for c in self.cases
            ],
            "only_base": self.only_base,
            "only_new": self.only_new,
            "status_regressions": [c.id for c in self.status_regressions],
            "regression": self.regression,
        }


def _status(statuses: list[str]) -> str:
    return statuses[0] if len(set(statuses)) == 1 else "mixed"


def case_scores(cases: Iterable[CaseResult], matrix: bool = False) -> dict[str, CaseScores]:
    """Each case's status and score, its repeats averaged; in a matrix run each cell is a case,
    named ``id @ column`` (its target and prompt variant), so two matrix runs pair cell by cell
    (docs/reports.md)."""
    grouped: dict[str, list[CaseResult]] = {}
    columns = 2 if matrix else 1
    for case in cases:
        grouped.setdefault(cell_label(case, columns), []).append(case)
    out = {}
    for cid, runs in grouped.items():
        per_grader: dict[str, list[float]] = {}
        for run in runs:
            for g in run.graders:
                if g.score is not None and g.status in ("passed", "failed"):
                    per_grader.setdefault(g.name, []).append(float(g.score))
        scores = [float(r.score) for r in runs if r.score is not None]
        out[cid] = CaseScores(
            score=stats.mean(scores),
            status=_status([r.status for r in runs]),
            graders={
                name: m for name, vals in per_grader.items() if (m := stats.mean(vals)) is not None
            },
        )
    return out


def _group(
    name: str,
    pairs: list[tuple[float, float]],
    *,
    confidence: float,
    seed: int | None,
    resamples: int,
) -> Group:
    # Float noise (a mean of equal repeats) must not count as a change, let alone a regression.
    deltas = [0.0 if abs(d) <= TIE_TOLERANCE else d for d in (n - b for b, n in pairs)]
    ci = (
        stats.bootstrap_mean_ci(deltas, confidence=confidence, resamples=resamples, seed=seed)
        if deltas
        else None
    )
    return Group(
        name=name,
        base_mean=stats.mean([b for b, _ in pairs]),
        new_mean=stats.mean([n for _, n in pairs]),
        deltas=deltas,
        ci=ci,
        wins=sum(d > TIE_TOLERANCE for d in deltas),
        losses=sum(d < -TIE_TOLERANCE for d in deltas),
        ties=sum(abs(d) <= TIE_TOLERANCE for d in deltas),
    )


def compare_bundles(
    base: BundleView,
    new: BundleView,
    *,
    confidence: float = 0.95,
    seed: int | None = 0,
    resamples: int = 10_000,
) -> Comparison:
    before, after = case_scores(base.cases, base.matrix), case_scores(new.cases, new.matrix)
    shared = sorted(cid for cid in before if cid in after)
    options: dict[str, Any] = {"confidence": confidence, "seed": seed, "resamples": resamples}
    overall = _group(
        "suite",
        [
            (before[c].score, after[c].score)  # type: ignore[misc]
            for c in shared
            if before[c].score is not None and after[c].score is not None
        ],
        **options,
    )
    names = list(dict.fromkeys([*base.graders, *new.graders]))
    graders = []
    for name in names:
        pairs = [
            (before[c].graders[name], after[c].graders[name])
            for c in shared
            if name in before[c].graders and name in after[c].graders
        ]
        if pairs:
            graders.append(_group(name, pairs, **options))
    return Comparison(
        base=str(base.run_dir),
        new=str(new.run_dir),
        confidence=confidence,
        seed=seed,
        resamples=resamples,
        overall=overall,
        graders=graders,
        cases=[
            CaseDelta(c, before[c].score, after[c].score, before[c].status, after[c].status)
            for c in shared
        ],
        only_base=sorted(c for c in before if c not in after),
        only_new=sorted(c for c in after if c not in before),
    )
