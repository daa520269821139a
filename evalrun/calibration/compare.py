"""Compare each judge's per-item verdicts with the labels people gave (docs/judges.md).

A case's ``labels:`` and a grader's ``details.verdicts`` share one shape, so they are flattened
the same way into items ``(kind, item)``: a list under ``relevant`` gives ``relevant #0``,
``#1``...; a mapping under ``attributable`` or ``quality`` gives one item per key (statements
matched after folding case, spaces and end punctuation); a single value gives one item.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from evalrun.calibration.agreement import Agreement, measure
from evalrun.results.models import CaseResult


@dataclass(frozen=True)
class Pair:
    case_id: str
    grader: str
    kind: str
    item: str
    human: Any
    judge: Any


@dataclass
class JudgeRow:
    judge: str
    grader: str
    kind: str
    agreement: Agreement
    cost_per_call: float | None
    latency_ms_per_call: float | None


@dataclass
class Calibration:
    rows: list[JudgeRow]
    disagreements: dict[str, list[Pair]]
    #: judge -> mean coefficient over its rows (None where no coefficient was defined)
    scores: dict[str, float | None]
    costs: dict[str, float | None]
    recommended: str | None
    tolerance: float
    unmatched: dict[str, int] = field(default_factory=dict)
    #: judge -> judge calls per case of its run
    calls_per_case: dict[str, float | None] = field(default_factory=dict)
    #: with ``--mode``: each run's label -> (the judge, the judge mode it ran in)
    modes: dict[str, tuple[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [
                {
                    "judge": r.judge,
                    "grader": r.grader,
                    "kind": r.kind,
                    **asdict(r.agreement),
                    "cost_per_call": r.cost_per_call,
                    "latency_ms_per_call": r.latency_ms_per_call,
                }
                for r in self.rows
            ],
            "disagreements": {j: [asdict(p) for p in ps] for j, ps in self.disagreements.items()},
            "scores": self.scores,
            "costs": self.costs,
            "recommended": self.recommended,
            "tolerance": self.tolerance,
            "unmatched": self.unmatched,
            "calls_per_case": self.calls_per_case,
            "modes": {label: list(pair) for label, pair in self.modes.items()},
        }


def _fold(text: str) -> str:
    return re.sub(r"[\s.!?;:,]+$", "", " ".join(str(text).lower().split()))


def _value(value: Any) -> Any:
    if isinstance(value, str) and re.fullmatch(r"-?\d+(\.\d+)?", value.strip()):
        return float(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def flatten(shape: dict[str, Any]) -> dict[tuple[str, str], Any]:
    items: dict[tuple[str, str], Any] = {}
    for kind, value in shape.items():
        if isinstance(value, list):
            items.update({(kind, f"#{i}"): _value(v) for i, v in enumerate(value)})
        elif isinstance(value, dict):
            items.update({(kind, _fold(k)): _value(v) for k, v in value.items()})
        else:
            items[(kind, "")] = _value(value)
    return items


def pairs_for(labels: dict[str, dict[str, Any]], results: Iterable[CaseResult]) -> list[Pair]:
    """``labels``: case id -> that case's labels. Items a grader did not judge are left out."""
    pairs = []
    for case in results:
        wanted = flatten(labels.get(case.id) or {})
        if not wanted:
            continue
        for grader in case.graders:
            verdicts = (
                (grader.details or {}).get("verdicts") if isinstance(grader.details, dict) else None
            )
            if not isinstance(verdicts, dict):
                continue
            for (kind, item), judged in flatten(verdicts).items():
                if (kind, item) in wanted:
                    human = wanted[(kind, item)]
                    pairs.append(Pair(case.id, grader.name, kind, item, human, judged))
    return pairs


def _is_ordinal(pairs: list[Pair]) -> bool:
    return all(
        isinstance(v, float) and not isinstance(v, bool) for p in pairs for v in (p.human, p.judge)
    )


def _usage(results: list[CaseResult]) -> tuple[float | None, float | None, float | None]:
    """Cost (0 for a target without a ``price:``) and latency per judge call, and judge calls
    per case."""
    calls = cost = latency = 0.0
    for case in results:
        for grader in case.graders:
            if grader.proxy is not None:
                calls += grader.proxy.calls
                latency += grader.proxy.latency_ms
                cost += grader.proxy.cost_usd or 0.0
    if not calls:
        return None, None, None
    return cost / calls, latency / calls, calls / len(results)


def calibrate(
    labels: dict[str, dict[str, Any]],
    runs: dict[str, list[CaseResult]],
    *,
    tolerance: float = 0.05,
    worst: int = 10,
    modes: dict[str, tuple[str, str]] | None = None,
) -> Calibration:
    """``runs``: each run's label (a judge, or a judge in a mode) -> its case results."""
    rows: list[JudgeRow] = []
    disagreements: dict[str, list[Pair]] = {}
    scores: dict[str, float | None] = {}
    costs: dict[str, float | None] = {}
    latencies: dict[str, float | None] = {}
    calls: dict[str, float | None] = {}
    unmatched: dict[str, int] = {}
    label_count = sum(len(flatten(v)) for v in labels.values())
    for judge, results in runs.items():
        pairs = pairs_for(labels, results)
        unmatched[judge] = label_count - len({(p.case_id, p.kind, p.item) for p in pairs})
        cost, latency, calls[judge] = _usage(results)
        costs[judge], latencies[judge] = cost, latency
        groups: dict[tuple[str, str], list[Pair]] = defaultdict(list)
        for pair in pairs:
            groups[(pair.grader, pair.kind)].append(pair)
        coefficients = []
        for (grader, kind), group in sorted(groups.items()):
            ordinal = _is_ordinal(group)
            agreement = measure([(p.human, p.judge) for p in group], ordinal=ordinal)
            rows.append(JudgeRow(judge, grader, kind, agreement, cost, latency))
            if agreement.coefficient is not None:
                coefficients.append(agreement.coefficient)
        scores[judge] = sum(coefficients) / len(coefficients) if coefficients else None
        wrong = [p for p in pairs if p.human != p.judge]
        wrong.sort(key=lambda p: -_distance(p))
        disagreements[judge] = wrong[:worst]
    return Calibration(
        rows,
        disagreements,
        scores,
        costs,
        _recommend(scores, costs, latencies, calls, tolerance),
        tolerance,
        unmatched,
        calls,
        modes or {},
    )


def _distance(pair: Pair) -> float:
    if isinstance(pair.human, float) and isinstance(pair.judge, float):
        return abs(pair.human - pair.judge)
    return 1.0


def _recommend(
    scores: dict[str, float | None],
    costs: dict[str, float | None],
    latencies: dict[str, float | None],
    calls: dict[str, float | None],
    tolerance: float,
) -> str | None:
    """The judge cheapest per case whose score is within ``tolerance`` of the best; then the
    better score, then fewer judge calls per case (a batched judge mode), then the faster one
    per case. Per case, not per call: a batched call costs more than a per-item one and
    replaces several."""
    scored = {j: s for j, s in scores.items() if s is not None}
    if not scored:
        return None
    best = max(scored.values())
    near = [j for j, s in scored.items() if s >= best - tolerance]

    def key(judge: str) -> tuple[float, float, float, float]:
        per_case = calls.get(judge) or 0.0
        cost = (costs.get(judge) or 0.0) * per_case
        return (cost, -scored[judge], per_case, (latencies.get(judge) or 0.0) * per_case)

    return min(near, key=key)
