"""N-way comparison of runs, aligned by case: the first run is the base, each other run is
paired with it case by case (the formulas: docs/viewer.md, "The statistics of a comparison").

Pass/fail changes are tested with McNemar's exact test (a two-sided binomial test on the
discordant cases), mean-score changes with a paired percentile bootstrap of the per-case
deltas, counted in cells as a run's own interval is (``evalrun.results.stats.run_mean_ci``),
so its cost does not grow with the number of cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalrun.reporters.compare import TIE_TOLERANCE, CaseScores
from evalrun.results import stats

#: Bootstrap resamples and seed of a comparison: those of a run's own interval (docs/viewer.md).
VIEW_RESAMPLES = stats.RUN_RESAMPLES
VIEW_SEED = stats.RUN_SEED
#: The level below which McNemar's p counts as a pass/fail change.
ALPHA = 0.05


def mcnemar_exact(regressed: int, fixed: int) -> float:
    """Two-sided exact McNemar p-value: ``min(1, 2 * P(X <= min(b, c)))`` for
    ``X ~ Binomial(b + c, 1/2)``; 1 when no case changed (docs/viewer.md, "The statistics of
    a comparison")."""
    if regressed < 0 or fixed < 0:
        raise ValueError("counts of changed cases cannot be negative")
    n = regressed + fixed
    if n == 0:
        return 1.0
    term = tail = 1  # C(n, 0); each next term from the last: C(n, k+1) = C(n, k)(n-k)/(k+1)
    for k in range(min(regressed, fixed)):
        term = term * (n - k) // (k + 1)
        tail += term
    return min(1.0, 2 * tail / (1 << n))


@dataclass
class Pairing:
    """One run against the base, over the cases both have."""

    cases: int
    #: passed in the base, not in this run (McNemar's b)
    regressed: int
    #: not passed in the base, passed in this run (McNemar's c)
    fixed: int
    p_value: float
    scored: int
    base_mean: float | None
    mean: float | None
    mean_delta: float | None
    ci: tuple[float, float] | None

    @property
    def regression(self) -> bool:
        """Worse beyond chance: the score interval is below zero, or more cases stopped
        passing than started, with McNemar's p under ``ALPHA``."""
        below = self.ci is not None and self.ci[1] < 0
        return below or (self.regressed > self.fixed and self.p_value < ALPHA)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "regressed": self.regressed,
            "fixed": self.fixed,
            "mcnemar_p": self.p_value,
            "scored": self.scored,
            "base_mean": self.base_mean,
            "mean": self.mean,
            "mean_delta": self.mean_delta,
            "ci": list(self.ci) if self.ci else None,
            "regression": self.regression,
        }


def pair(
    base: dict[str, CaseScores],
    other: dict[str, CaseScores],
    *,
    resamples: int = VIEW_RESAMPLES,
    seed: int = VIEW_SEED,
) -> Pairing:
    shared = [cid for cid in base if cid in other]
    regressed = sum(base[c].status == "passed" and other[c].status != "passed" for c in shared)
    fixed = sum(base[c].status != "passed" and other[c].status == "passed" for c in shared)
    pairs = [
        (b, o)
        for c in shared
        if (b := base[c].score) is not None and (o := other[c].score) is not None
    ]
    deltas = [0.0 if abs(o - b) <= TIE_TOLERANCE else o - b for b, o in pairs]
    ci = stats.run_mean_ci(deltas, resamples=resamples, seed=seed)
    return Pairing(
        cases=len(shared),
        regressed=regressed,
        fixed=fixed,
        p_value=mcnemar_exact(regressed, fixed),
        scored=len(pairs),
        base_mean=stats.mean([b for b, _ in pairs]),
        mean=stats.mean([o for _, o in pairs]),
        mean_delta=stats.mean(deltas),
        ci=ci,
    )


@dataclass
class Row:
    """One case across the runs (None where a run has no such case)."""

    id: str
    cells: list[CaseScores | None]

    @property
    def regressed(self) -> bool:
        """Passed in the base and not in some later run that has it."""
        base = self.cells[0]
        return (
            base is not None
            and base.status == "passed"
            and any(c is not None and c.status != "passed" for c in self.cells[1:])
        )

    @property
    def changed(self) -> bool:
        statuses = {c.status for c in self.cells if c is not None}
        return len(statuses) > 1 or any(c is None for c in self.cells)

    @property
    def worst_delta(self) -> float:
        """The largest drop from the base score (0 when nothing can be paired)."""
        base = self.cells[0]
        if base is None or base.score is None:
            return 0.0
        drops = [c.score - base.score for c in self.cells[1:] if c and c.score is not None]
        return min(drops, default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "regressed": self.regressed,
            "changed": self.changed,
            "worst_delta": self.worst_delta,
            "cells": [
                None if c is None else {"status": c.status, "score": c.score} for c in self.cells
            ],
        }


def aligned_rows(runs: Sequence[dict[str, CaseScores]]) -> list[Row]:
    """Every case of any run, regressions first (largest drop first), then other changes, then
    the rest, each group in the order the cases first appear."""
    ids = list(dict.fromkeys(cid for run in runs for cid in run))
    rows = [Row(cid, [run.get(cid) for run in runs]) for cid in ids]
    order = {row.id: n for n, row in enumerate(rows)}
    return sorted(
        rows,
        key=lambda r: (not r.regressed, not r.changed, r.worst_delta, order[r.id]),
    )
