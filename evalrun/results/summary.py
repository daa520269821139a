"""The one place run statistics are computed from case results.

The runner feeds each result line it writes to a ``ResultScanner`` (``results/scan.py``), whose
:class:`StatsBuilder` keeps these statistics beside the report-order index, and writes
``summary.json`` with :func:`summary_dict`; the reporters make the same pass over
``results.jsonl``;
``evalrun merge`` recomputes it from merged shards with :func:`summarize`. Counts are over result
lines: with ``--repeat N`` every repeat of a case counts once. What the summary says of the run
itself (names, times, state) is a :class:`RunMeta`.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from evalrun.errors import ExitCode
from evalrun.results import stats
from evalrun.results.matrix import (
    cell_label,
    column_name,
    column_names,
    column_of,
    column_order,
)
from evalrun.results.models import STATUSES, CaseResult, GraderOutcome, Status

DEFAULT_UNSTABLE_BOUND = 0.15


@dataclass
class RunMeta:
    """What ``summary.json`` says of the run itself, as opposed to its statistics (which every
    reader recomputes from ``results.jsonl``): written by the runner and by ``merge``, read back
    by the reports and ``merge``."""

    eval: str | None = None
    description: str | None = None
    target: str | None = None
    judge: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    complete: bool | None = None
    interrupted: bool | None = None
    threshold: float | None = None
    exit_code: int | None = None
    repeat: int | None = None
    eval_file: str | None = None
    tests_file: str | None = None
    #: selected results with no line in results.jsonl (docs/results.md)
    missing: int | None = None
    max_errors: int | None = None
    #: "i/n" as the runner writes it (other tools write {"index": i, "count": n})
    shard: Any = None
    #: the bootstrap seed of ``mean_score_ci`` (``--seed``); written only when it is not
    #: ``stats.RUN_SEED``, and read back as that when absent (docs/results.md)
    seed: int | None = None
    #: a matrix run's targets, in column order; written only when there are several (then
    #: ``target`` is None: docs/results.md, "A matrix run")
    matrix: list[str] | None = None
    #: the prompt variants' ids, in column order; written only in a run with prompt variants
    #: (docs/results.md, "A matrix run")
    prompts: list[str] | None = None
    #: every other key, as written (targets, write_error, warnings, merged_from, ...)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The run keys of summary.json: ``RUN_KEYS`` always, the others when known."""
        out: dict[str, Any] = {key: getattr(self, key) for key in RUN_KEYS}
        for key in _SOMETIMES:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunMeta:
        """summary.json read back: the statistics in it are left out (they are recomputed), a
        known key of the wrong type reads as unknown (None)."""
        known = {k: _typed(k, data.get(k)) for k in (*RUN_KEYS, *_SOMETIMES)}
        extra = {k: v for k, v in data.items() if k not in known and k not in STATS_KEYS}
        return cls(**known, extra=extra)

    def column_order(self) -> list[str]:
        """The matrix's columns as the run named them: each target by each prompt variant."""
        return column_names(self.matrix or [self.target], self.prompts)


#: Keys of summary.json that come from the run, not from the cases: always written.
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
_SOMETIMES = (
    "eval_file",
    "tests_file",
    "missing",
    "max_errors",
    "shard",
    "seed",
    "matrix",
    "prompts",
)
#: Keys of summary.json that :meth:`RunStats.to_dict` and ``repeat_stats`` fill.
STATS_KEYS = frozenset(
    {"counts", "cases", "mean_score", "median_score", "pass_rate", "graders", "usage"}
    | {"mean_score_ci", "pass_rate_ci", "repeat_stats", "columns"}
)
_TYPES: dict[str, tuple[type, ...]] = {
    "duration_s": (int, float),
    "threshold": (int, float),
    "complete": (bool,),
    "interrupted": (bool,),
    "exit_code": (int,),
    "repeat": (int,),
    "missing": (int,),
    "max_errors": (int,),
    "seed": (int,),
    "matrix": (list,),
    "prompts": (list,),
}


def _typed(key: str, value: Any) -> Any:
    if value is None or key == "shard":
        return value
    if key in ("matrix", "prompts"):
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return value if ok else None
    types = _TYPES.get(key, (str,))
    if isinstance(value, bool) and bool not in types:
        return None
    return value if isinstance(value, types) else None


def result_key(case: CaseResult) -> tuple[str, str, int]:
    """What identifies one result line: the case id, its matrix column (the target and the
    prompt variant: one column in a run of one target without variants) and the repeat index
    (docs/results.md)."""
    return (str(case.id), column_of(case), int(case.repeat or 0))


def latest_results(cases: Iterable[CaseResult]) -> list[CaseResult]:
    """One result per (id, target, repeat), sorted by id, target, then repeat.

    The last line wins: a resumed run may grade a case again after a crash.
    """
    latest: dict[tuple[str, str, int], CaseResult] = {}
    for case in cases:
        latest[result_key(case)] = case
    return [latest[key] for key in sorted(latest)]


def _scored(score: float | None, status: str) -> bool:
    return score is not None and status in ("passed", "failed")


class _Spread:
    """mean, median and stdev of ``scores`` (None when there are none)."""

    scores: Sequence[float]

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
    scores: array[float] = field(default_factory=lambda: array("d"))

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
    """Per case and per grader repeat statistics; None when no case ran more than once. In a
    matrix run each cell is a case of its own, named ``id @ target``."""
    by_case: dict[str, CaseRepeats] = {}
    columns = len({column_of(case) for case in results})
    for case in results:
        name = cell_label(case, columns)
        entry = by_case.get(name)
        if entry is None:
            entry = by_case[name] = CaseRepeats(name, Series(), {}, False)
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


#: The score histogram's bins: tenths of the case score.
SCORE_BINS = 10


@dataclass(slots=True)
class Counts:
    """Result lines by status, and in all (``counts`` in summary.json, docs/results.md)."""

    passed: int = 0
    failed: int = 0
    error: int = 0
    unscored: int = 0
    total: int = 0

    def of(self, status: Status) -> int:
        return int(getattr(self, status))

    def add(self, status: Status) -> None:
        setattr(self, status, getattr(self, status) + 1)
        self.total += 1

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _COUNT_KEYS}


_COUNT_KEYS = (*STATUSES, "total")


@dataclass
class ColumnStats:
    """One column of a matrix run: its counts, scores and intervals (``columns`` in
    summary.json, docs/results.md "A matrix run"), the same statistics as the run's."""

    target: str
    #: the column's prompt variant, in a run with prompt variants only
    prompt: str | None = None
    counts: Counts = field(default_factory=Counts)
    scores: array[float] = field(default_factory=lambda: array("d"))

    @property
    def name(self) -> str:
        """The column's name, as cell labels and the reports' column heads show it."""
        return column_name(self.target or None, self.prompt)

    @property
    def mean_score(self) -> float | None:
        return stats.mean(self.scores)

    @property
    def pass_rate(self) -> float | None:
        return self.counts.passed / self.counts.total if self.counts.total else None

    @property
    def pass_rate_ci(self) -> tuple[float, float] | None:
        """95% Wilson interval, as the run's (docs/results.md#intervals)."""
        return stats.wilson_interval(self.counts.passed, self.counts.total)

    def mean_score_ci(self, seed: int = stats.RUN_SEED) -> tuple[float, float] | None:
        """95% bootstrap interval with the run's seed, as the run's (docs/results.md#intervals)."""
        return stats.run_mean_ci(self.scores, seed=seed)

    def to_dict(self, seed: int = stats.RUN_SEED) -> dict[str, Any]:
        return {
            "target": self.target,
            # a column of a prompt variant names it, and the name its cells are labelled with
            **({"prompt": self.prompt, "column": self.name} if self.prompt is not None else {}),
            "counts": self.counts.to_dict(),
            "mean_score": self.mean_score,
            "mean_score_ci": _pair(self.mean_score_ci(seed)),
            "pass_rate": self.pass_rate,
            "pass_rate_ci": _pair(self.pass_rate_ci),
        }


@dataclass
class RunStats:
    """Numbers only: counts, scores and per-grader spreads, never the results themselves, so
    memory stays flat however many cases a run has (docs/performance.md)."""

    counts: Counts
    case_count: int
    scores: Sequence[float]
    graders: dict[str, GraderStats]
    repeats: RepeatStats | None
    usage: dict[str, dict[str, float]]
    #: Highest repeat index seen (0 without --repeat).
    max_repeat: int = 0
    #: Per tenth of the score: how many results of each status scored there.
    score_bins: list[dict[str, int]] = field(default_factory=list)
    #: Bootstrap seed of ``mean_score_ci`` (the run's ``--seed``).
    seed: int = stats.RUN_SEED
    #: Per target, in column order: more than one only in a matrix run.
    columns: list[ColumnStats] = field(default_factory=list)

    @property
    def mean_score(self) -> float | None:
        return stats.mean(self.scores)

    @property
    def median_score(self) -> float | None:
        return stats.median(self.scores)

    @property
    def pass_rate(self) -> float | None:
        total = self.counts.total
        return self.counts.passed / total if total else None

    @property
    def pass_rate_ci(self) -> tuple[float, float] | None:
        """95% Wilson score interval of the pass rate (docs/results.md#intervals)."""
        return stats.wilson_interval(self.counts.passed, self.counts.total)

    @cached_property
    def mean_score_ci(self) -> tuple[float, float] | None:
        """95% percentile bootstrap interval of the mean score (docs/results.md#intervals):
        computed once, as summary.json and every report show it."""
        return stats.run_mean_ci(self.scores, seed=self.seed)

    def to_dict(self) -> dict[str, Any]:
        """The statistics block shared by summary.json and report.json."""
        return {
            "counts": self.counts.to_dict(),
            "cases": self.case_count,
            "mean_score": self.mean_score,
            "mean_score_ci": _pair(self.mean_score_ci),
            "median_score": self.median_score,
            "pass_rate": self.pass_rate,
            "pass_rate_ci": _pair(self.pass_rate_ci),
            "graders": {name: g.to_dict() for name, g in self.graders.items()},
            "usage": self.usage,
            # a run of one target keeps the keys it always had (docs/results.md)
            **({"columns": [c.to_dict(self.seed) for c in self.columns]} if self.matrix else {}),
        }

    @property
    def matrix(self) -> bool:
        """Whether the results span several columns: targets or prompt variants (a matrix
        run)."""
        return len(self.columns) > 1


def _pair(interval: tuple[float, float] | None) -> list[float] | None:
    return list(interval) if interval is not None else None


def _add_numbers(into: dict[str, float], values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value


class StatsBuilder:
    """Run statistics fed one result at a time, keeping numbers only.

    ``by_case`` keeps each case's scores for the repeat statistics (what ``--repeat`` needs);
    without it a result with a repeat index above 0 sets :attr:`saw_repeats`, so a reader
    can go over the results again with ``by_case=True``. Results are taken as they come: the
    caller drops superseded lines (see :func:`latest_results`).
    """

    def __init__(self, *, by_case: bool = False) -> None:
        self.counts = Counts()
        self.scores = array("d")
        self.graders: dict[str, GraderStats] = {}
        self.judge: dict[str, float] = {}
        self.target: dict[str, float] = {}
        self.max_repeat = 0
        self.bins: list[dict[str, int]] = [dict.fromkeys(STATUSES, 0) for _ in range(SCORE_BINS)]
        self.by_case = by_case
        self._grouped: list[CaseResult] = []
        self.saw_repeats = False
        self.columns: dict[str, ColumnStats] = {}
        self._built: tuple[int, float, int, RunStats] | None = None

    @property
    def total(self) -> int:
        return self.counts.total

    def add(self, case: CaseResult) -> None:
        """One result: a :class:`CaseResult` (full or slim)."""
        status, score, repeat = case.status, case.score, int(case.repeat or 0)
        self.counts.add(status)
        if repeat > self.max_repeat:
            self.max_repeat = repeat
            self.saw_repeats = not self.by_case
        if score is not None:
            self.scores.append(float(score))
            index = min(SCORE_BINS - 1, max(0, int(float(score) * SCORE_BINS)))
            self.bins[index][status if status in STATUSES else "error"] += 1
        column = column_of(case)
        cs = self.columns.get(column)
        if cs is None:
            target = "" if case.target is None else str(case.target)
            cs = self.columns[column] = ColumnStats(target, case.prompt)
        cs.counts.add(status)
        if score is not None:
            cs.scores.append(float(score))
        if case.usage.target is not None:
            _add_numbers(self.target, case.usage.target.to_dict())
        for grader in case.graders:
            gs = self.graders.get(grader.name)
            if gs is None:
                gs = self.graders[grader.name] = GraderStats(grader.name)
            gs.count += 1
            if grader.status in STATUSES:
                setattr(gs, grader.status, getattr(gs, grader.status) + 1)
            if _scored(grader.score, grader.status):
                gs.scores.append(float(grader.score))  # type: ignore[arg-type]
            if grader.proxy:
                _add_numbers(self.judge, grader.proxy.to_dict())
        if self.by_case:
            self._grouped.append(
                CaseResult(
                    id=str(case.id),
                    status=status,
                    score=score,
                    repeat=repeat,
                    target=case.target,
                    prompt=case.prompt,
                    graders=[
                        GraderOutcome(name=g.name, status=g.status, score=g.score)
                        for g in case.graders
                    ],
                )
            )

    def build(
        self,
        *,
        unstable_bound: float = DEFAULT_UNSTABLE_BOUND,
        seed: int = stats.RUN_SEED,
        order: Sequence[str] = (),
    ) -> RunStats:
        """The statistics so far; the same object until more results come, so the run's summary
        and its reports compute the score interval once. ``seed`` is the interval's; ``order``
        the matrix's columns as the run named them (summary.json's ``matrix``)."""
        if self._built is not None and self._built[:3] == (self.total, unstable_bound, seed):
            return self._built[3]
        counts = dataclasses.replace(self.counts)
        judge = dict(self.judge)
        judge.pop("max_calls", None)
        repeats = repeat_stats(self._grouped, bound=unstable_bound) if self.by_case else None
        case_count = len(repeats.cases) if repeats else self.total
        if self.by_case and repeats is None:
            case_count = len({(c.id, column_of(c)) for c in self._grouped})
        named = column_order([*order, *self.columns])
        run = RunStats(
            counts=counts,
            case_count=case_count,
            scores=self.scores,
            graders=self.graders,
            repeats=repeats,
            usage={"judge": judge, "target": dict(self.target)},
            max_repeat=self.max_repeat,
            score_bins=[dict(b) for b in self.bins],
            seed=seed,
            columns=[self.columns[name] for name in named if name in self.columns],
        )
        self._built = (self.total, unstable_bound, seed, run)
        return run


def compute_stats(
    cases: Iterable[CaseResult],
    *,
    unstable_bound: float = DEFAULT_UNSTABLE_BOUND,
    seed: int = stats.RUN_SEED,
    order: Sequence[str] = (),
) -> RunStats:
    """Statistics of ``cases`` after dropping superseded lines (the last line of a case wins);
    ``seed`` is the score interval's bootstrap seed, ``order`` a matrix's column order."""
    results = latest_results(cases)
    builder = StatsBuilder(by_case=any(c.repeat for c in results))
    for case in results:
        builder.add(case)
    return builder.build(unstable_bound=unstable_bound, seed=seed, order=order)


def summary_dict(run: RunStats, meta: RunMeta | None = None) -> dict[str, Any]:
    """summary.json: run metadata from ``meta``, statistics from ``run``."""
    out = (meta or RunMeta()).to_dict()
    if out.get("repeat") is None:
        out["repeat"] = run.max_repeat + 1
    out.update(run.to_dict())
    if run.repeats is not None:
        out["repeat_stats"] = run.repeats.to_dict(per_case=False)
    return out


def summarize(
    cases: Iterable[CaseResult],
    meta: RunMeta | None = None,
    *,
    unstable_bound: float = DEFAULT_UNSTABLE_BOUND,
) -> dict[str, Any]:
    """Build summary.json from case results plus the run's metadata (its ``seed``, if any, is
    the score interval's)."""
    seed = run_seed(meta)
    order = meta.column_order() if meta is not None else ()
    run = compute_stats(cases, unstable_bound=unstable_bound, seed=seed, order=order)
    return summary_dict(run, meta)


def run_seed(meta: RunMeta | None) -> int:
    """The bootstrap seed a bundle's interval was computed with: summary.json's ``seed``, else
    the default one (docs/results.md)."""
    return meta.seed if meta is not None and meta.seed is not None else stats.RUN_SEED


def gated_exit_code(
    *,
    failed: int,
    not_scored: int,
    mean: float | None,
    threshold: float | None,
    max_errors: int | None,
) -> int:
    """The gates on a run's results, in docs/results.md's order ("Exit codes"): errors and
    unscored beyond ``max_errors`` -> 3 (no such gate when it is None), then a failed case or a
    mean below ``threshold`` -> 1. The runner and ``merge`` both judge with it."""
    if max_errors is not None and not_scored > max_errors:
        return ExitCode.INCOMPLETE
    below = threshold is not None and (mean is None or mean < threshold)
    return ExitCode.GATE_FAILED if failed or below else ExitCode.OK
