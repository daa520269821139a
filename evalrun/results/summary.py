"""The one place run statistics are computed from case results.

The runner builds ``summary.json`` with :func:`summarize`; ``evalrun merge`` recomputes it from
merged shards; the reporters read :class:`RunStats`. Counts are over result lines: with
``--repeat N`` every repeat of a case counts once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from evalrun.results import stats
from evalrun.results.models import STATUSES, CaseResult

DEFAULT_UNSTABLE_BOUND = 0.15

#: Keys of summary.json that come from the run, not from the cases (passed through ``meta``).
RUN_KEYS = (
    "eval",
    "description",
    "target",
    "judge",
    "started_at",
    "finished_at",
    "duration_s",
    "complete",
    "interrupted",
    "threshold",
    "exit_code",
    "repeat",
)


def result_key(case: CaseResult) -> tuple[str, int]:
    """What identifies one result line: the case id and the repeat index."""
    return (str(case.id), int(case.repeat or 0))


def latest_results(cases: Iterable[CaseResult]) -> list[CaseResult]:
    """One result per (id, repeat), sorted by id then repeat.

    The last line wins: a resumed run may grade a case again after a crash.
    """
    latest: dict[tuple[str, int], CaseResult] = {}
    for case in cases:
        latest[result_key(case)] = case
    return [latest[key] for key in sorted(latest)]


def _scored(score: float | None, status: str) -> bool:
    return score is not None and status in ("passed", "failed")


class _Spread:
    """mean, median and stdev of ``scores`` (None when there are none)."""

    scores: list[float]

    @property
    def mean(self) -> float | None:
        return stats.mean(self.scores)

    @property
    def median(self) -> float | None:
        return stats.median(self.scores)

    @property
    def stdev(self) -> float | None:
        return stats.stdev(self.scores)


@dataclass
class GraderStats(_Spread):
    """Every result of one grader across the run."""

    name: str
    count: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    unscored: int = 0
    scores: list[float] = field(default_factory=list)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.count if self.count else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "median": self.median,
            "stdev": self.stdev,
            "min": min(self.scores) if self.scores else None,
            "max": max(self.scores) if self.scores else None,
            "count": self.count,
            "scored": len(self.scores),
            "passed": self.passed,
            "failed": self.failed,
            "error": self.error,
            "unscored": self.unscored,
            "pass_rate": self.pass_rate,
        }


@dataclass
class Series(_Spread):
    """One case (or one grader on one case) over its repeats."""

    n: int = 0
    passes: int = 0
    scores: list[float] = field(default_factory=list)

    def add(self, score: float | None, status: str) -> None:
        self.n += 1
        self.passes += status == "passed"
        if _scored(score, status):
            self.scores.append(float(score))  # type: ignore[arg-type]

    @property
    def pass_at_k(self) -> list[float]:
        return stats.pass_at_ks(self.n, self.passes) if self.n else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "passes": self.passes,
            "scores": self.scores,
            "mean": self.mean,
            "median": self.median,
            "stdev": self.stdev,
            "pass_at_k": _k_dict(self.pass_at_k),
        }


def _k_dict(values: list[float]) -> dict[str, float]:
    return {str(k): v for k, v in enumerate(values, start=1)}


@dataclass
class CaseRepeats:
    case_id: str
    overall: Series
    graders: dict[str, Series]
    unstable: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.overall.to_dict(),
            "unstable": self.unstable,
            "graders": {name: s.to_dict() for name, s in self.graders.items()},
        }


@dataclass
class GraderRepeats:
    name: str
    mean_stdev: float | None
    pass_at_k: list[float]
    unstable: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean_stdev": self.mean_stdev,
            "pass_at_k": _k_dict(self.pass_at_k),
            "unstable": self.unstable,
        }


@dataclass
class RepeatStats:
    """Spread across ``--repeat`` runs; a case is unstable when its score stdev > ``bound``."""

    repeats: int
    bound: float
    cases: dict[str, CaseRepeats]
    graders: dict[str, GraderRepeats]
    pass_at_k: list[float]
    mean_stdev: float | None

    @property
    def unstable(self) -> list[str]:
        return [cid for cid, c in self.cases.items() if c.unstable]

    def to_dict(self, *, per_case: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "repeats": self.repeats,
            "unstable_bound": self.bound,
            "pass_at_k": _k_dict(self.pass_at_k),
            "mean_stdev": self.mean_stdev,
            "unstable": self.unstable,
            "graders": {name: g.to_dict() for name, g in self.graders.items()},
        }
        if per_case:
            out["cases"] = {cid: c.to_dict() for cid, c in self.cases.items()}
        return out


def _suite_pass_at_k(series: list[Series]) -> list[float]:
    """Mean over cases of pass@k, for the k every case has attempts for."""
    if not series:
        return []
    k_max = min(s.n for s in series)
    return [stats.mean([s.pass_at_k[k - 1] for s in series]) or 0.0 for k in range(1, k_max + 1)]


def repeat_stats(
    results: list[CaseResult], *, bound: float = DEFAULT_UNSTABLE_BOUND
) -> RepeatStats | None:
    """Per case and per grader repeat statistics; None when no case ran more than once."""
    by_case: dict[str, CaseRepeats] = {}
    for case in results:
        entry = by_case.get(case.id)
        if entry is None:
            entry = by_case[case.id] = CaseRepeats(case.id, Series(), {}, False)
        entry.overall.add(case.score, case.status)
        for grader in case.graders:
            entry.graders.setdefault(grader.name, Series()).add(grader.score, grader.status)
    if not by_case or max(c.overall.n for c in by_case.values()) < 2:
        return None
    for entry in by_case.values():
        entry.unstable = (entry.overall.stdev or 0.0) > bound
        for series in entry.graders.values():
            series.n = entry.overall.n  # a repeat without this grader's result did not pass
    names = list(dict.fromkeys(n for c in by_case.values() for n in c.graders))
    graders = {}
    for name in names:
        pairs = [(cid, c.graders[name]) for cid, c in by_case.items() if name in c.graders]
        spreads = [s.stdev for _, s in pairs if s.stdev is not None]
        graders[name] = GraderRepeats(
            name=name,
            mean_stdev=stats.mean(spreads),
            pass_at_k=_suite_pass_at_k([s for _, s in pairs]),
            unstable=[cid for cid, s in pairs if (s.stdev or 0.0) > bound],
        )
    overall = [c.overall for c in by_case.values()]
    return RepeatStats(
        repeats=max(s.n for s in overall),
        bound=bound,
        cases=by_case,
        graders=graders,
        pass_at_k=_suite_pass_at_k(overall),
        mean_stdev=stats.mean([s.stdev for s in overall if s.stdev is not None]),
    )


@dataclass
class RunStats:
    results: list[CaseResult]
    counts: dict[str, int]
    case_ids: list[str]
    scores: list[float]
    graders: dict[str, GraderStats]
    repeats: RepeatStats | None
    usage: dict[str, float]

    @property
    def mean_score(self) -> float | None:
        return stats.mean(self.scores)

    @property
    def median_score(self) -> float | None:
        return stats.median(self.scores)

    @property
    def pass_rate(self) -> float | None:
        total = self.counts["total"]
        return self.counts["passed"] / total if total else None

    def to_dict(self) -> dict[str, Any]:
        """The statistics block shared by summary.json and report.json."""
        return {
            "counts": self.counts,
            "cases": len(self.case_ids),
            "mean_score": self.mean_score,
            "median_score": self.median_score,
            "pass_rate": self.pass_rate,
            "graders": {name: g.to_dict() for name, g in self.graders.items()},
            "usage": self.usage,
        }


def _add_numbers(into: dict[str, float], values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value


def compute_stats(
    cases: Iterable[CaseResult], *, unstable_bound: float = DEFAULT_UNSTABLE_BOUND
) -> RunStats:
    results = latest_results(cases)
    counts = dict.fromkeys(STATUSES, 0)
    graders: dict[str, GraderStats] = {}
    judge: dict[str, float] = {}
    target: dict[str, float] = {}
    for case in results:
        counts[case.status] = counts.get(case.status, 0) + 1
        usage = case.usage or {}
        _add_numbers(target, usage["target"] if isinstance(usage.get("target"), dict) else usage)
        for g in case.graders:
            gs = graders.setdefault(g.name, GraderStats(g.name))
            gs.count += 1
            if g.status in STATUSES:
                setattr(gs, g.status, getattr(gs, g.status) + 1)
            if _scored(g.score, g.status):
                gs.scores.append(float(g.score))  # type: ignore[arg-type]
            if g.proxy is not None:
                _add_numbers(judge, asdict(g.proxy))
    judge.pop("max_calls", None)
    counts["total"] = len(results)
    return RunStats(
        results=results,
        counts=counts,
        case_ids=list(dict.fromkeys(c.id for c in results)),
        scores=[float(c.score) for c in results if c.score is not None],
        graders=graders,
        repeats=repeat_stats(results, bound=unstable_bound),
        usage={"judge": judge, "target": target},
    )


def summary_dict(run: RunStats, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """summary.json: run metadata from ``meta`` (unknown keys kept), statistics from ``run``."""
    meta = dict(meta or {})
    out: dict[str, Any] = {key: meta.get(key) for key in RUN_KEYS}
    out.update({k: v for k, v in meta.items() if k not in out})
    if out.get("repeat") is None:
        out["repeat"] = max((c.repeat for c in run.results), default=0) + 1
    out.update(run.to_dict())
    if run.repeats is not None:
        out["repeat_stats"] = run.repeats.to_dict(per_case=False)
    else:
        out.pop("repeat_stats", None)
    return out


def summarize(
    cases: Iterable[CaseResult],
    meta: Mapping[str, Any] | None = None,
    *,
    unstable_bound: float = DEFAULT_UNSTABLE_BOUND,
) -> dict[str, Any]:
    """Build summary.json from case results plus the run's metadata (see ``RUN_KEYS``)."""
    return summary_dict(compute_stats(cases, unstable_bound=unstable_bound), meta)
