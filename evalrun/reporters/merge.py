"""``evalrun merge``: join shard bundles into one bundle equal to an unsharded run's.

Results are re-sorted by case id then repeat and the summary is recomputed from them with the
same :func:`~evalrun.results.summary.summarize` the runner uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from evalrun.errors import ExitCode, UserError
from evalrun.judgecall import JudgeCall
from evalrun.reporters.writing import write_reports
from evalrun.results import bundle, reader
from evalrun.results.bundle import BundleWriter
from evalrun.results.matrix import cell_label
from evalrun.results.models import CaseResult
from evalrun.results.summary import (
    RunMeta,
    gated_exit_code,
    latest_results,
    result_key,
    summarize,
)

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
#: Exit codes that a merge keeps from any shard, most severe first (docs/results.md).
_STICKY_EXIT = (ExitCode.INTERRUPTED, ExitCode.INCOMPLETE, ExitCode.USAGE)


class MergeError(UserError, ValueError):
    """The shards cannot be joined (missing, overlapping or from different evals)."""


@dataclass
class Shard:
    path: Path
    cases: list[CaseResult]
    meta: RunMeta
    calls: list[JudgeCall]


@dataclass
class MergeResult:
    out_dir: Path
    summary: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)


def _load(path: Path) -> Shard:
    if not (path / bundle.RESULTS).is_file():
        raise MergeError(f"{path}: not a run bundle (no {bundle.RESULTS})")
    return Shard(
        path=path,
        cases=latest_results(reader.iter_results(path)),
        meta=reader.read_meta(path),
        calls=reader.read_judge_calls(path),
    )


def _parse_shard(value: Any) -> tuple[int, int] | None:
    if isinstance(value, dict) and "index" in value and "count" in value:
        return int(value["index"]), int(value["count"])
    match = _SHARD.match(value) if isinstance(value, str) else None
    return (int(match[1]), int(match[2])) if match else None


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _first(values: Iterable[Any]) -> Any:
    return next((v for v in values if v is not None), None)


def _coverage_warnings(metas: list[RunMeta]) -> list[str]:
    shards = [_parse_shard(m.shard) for m in metas]
    known = [s for s in shards if s is not None]
    if not known:
        return []
    counts = {count for _, count in known}
    if len(counts) > 1:
        return [f"shards come from different splits: {sorted(counts)}"]
    total = counts.pop()
    missing = sorted(set(range(1, total + 1)) - {index for index, _ in known})
    return [f"shard(s) {', '.join(f'{i}/{total}' for i in missing)} missing"] if missing else []


def merged_meta(metas: list[RunMeta], warnings: list[str]) -> RunMeta:
    """Run metadata of the joined run: first known names, widest time span, worst state."""
    meta = RunMeta(
        eval=_first(m.eval for m in metas),
        eval_file=_first(m.eval_file for m in metas),
        tests_file=_first(m.tests_file for m in metas),
        description=_first(m.description for m in metas),
        target=_first(m.target for m in metas),
        judge=_first(m.judge for m in metas),
        matrix=_first(m.matrix for m in metas),
        prompts=_first(m.prompts for m in metas),
        threshold=_first(m.threshold for m in metas),
        max_errors=_first(m.max_errors for m in metas),
        seed=_first(m.seed for m in metas),
    )
    starts = [t for m in metas if (t := _moment(m.started_at))]
    ends = [t for m in metas if (t := _moment(m.finished_at))]
    try:
        meta.started_at = min(starts).isoformat() if starts else None
        meta.finished_at = max(ends).isoformat() if ends else None
        span = (max(ends) - min(starts)).total_seconds() if starts and ends else None
    except TypeError:  # naive and aware timestamps mixed
        meta.started_at = _first(m.started_at for m in metas)
        meta.finished_at = _first(m.finished_at for m in reversed(metas))
        span = None
    durations = [m.duration_s for m in metas if m.duration_s is not None]
    meta.duration_s = span if span is not None else (max(durations) if durations else None)
    meta.interrupted = any(bool(m.interrupted) for m in metas)
    meta.complete = all(m.complete is True for m in metas) and not meta.interrupted and not warnings
    repeats = [m.repeat for m in metas if m.repeat is not None]
    meta.repeat = max(repeats) if repeats else None
    meta.extra["merged_from"] = [
        {"shard": m.shard, "exit_code": m.exit_code, "complete": m.complete} for m in metas
    ]
    return meta


def merged_exit_code(metas: list[RunMeta], summary: dict[str, Any]) -> int | None:
    """The gates re-judged on the merged results, as the runner judges them: a failed case or a
    mean below ``threshold`` -> 1; errors and unscored beyond ``max_errors`` -> 3 (when the
    shards recorded ``max_errors``; otherwise a shard's 3 sticks). 130 and 2 always stick."""
    codes = [m.exit_code for m in metas]
    counts = summary["counts"]
    if summary.get("interrupted"):
        return ExitCode.INTERRUPTED
    max_errors = _first(m.max_errors for m in metas)
    sticky = _STICKY_EXIT if max_errors is None else (ExitCode.INTERRUPTED, ExitCode.USAGE)
    for code in sticky:
        if code in codes:
            return code
    return gated_exit_code(
        failed=counts["failed"],
        not_scored=counts["error"] + counts["unscored"],
        mean=summary.get("mean_score"),
        threshold=summary.get("threshold"),
        max_errors=max_errors,
    )


def merge_bundles(
    run_dirs: Sequence[Path | str],
    out_dir: Path | str,
    *,
    formats: Sequence[str] = (),
    force: bool = False,
) -> MergeResult:
    """Write the joined bundle to ``out_dir`` and render ``formats`` reports into it."""
    out_dir = Path(out_dir)
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise MergeError("nothing to merge")
    if any(p.resolve() == out_dir.resolve() for p in paths):
        raise MergeError(f"{out_dir}: the output must not be one of the inputs")
    if (out_dir / bundle.RESULTS).exists() and not force:
        raise MergeError(f"{out_dir} already holds a bundle (use --force to overwrite)")
    shards = [_load(p) for p in paths]

    evals = {s.meta.eval for s in shards} - {None}
    if len(evals) > 1:
        raise MergeError(f"shards come from different evals: {sorted(map(str, evals))}")
    owner: dict[tuple[str, str, int], Path] = {}
    overlaps = []
    for shard in shards:
        for case in shard.cases:
            key = result_key(case)  # a matrix run's cells: (id, target × prompt, repeat)
            if key in owner:
                overlaps.append(
                    f"{cell_label(case, 2 if shard.meta.matrix or shard.meta.prompts else 1)} "
                    f"(repeat {case.repeat}) "
                    f"in {owner[key]} and {shard.path}"
                )
            owner[key] = shard.path
    if overlaps:
        raise MergeError("shards overlap: " + "; ".join(overlaps[:5]))

    metas = [s.meta for s in shards]
    warnings = _coverage_warnings(metas)
    cases = latest_results(c for s in shards for c in s.cases)
    summary = summarize(cases, merged_meta(metas, warnings))
    summary["exit_code"] = merged_exit_code(metas, summary)
    if warnings:
        summary["warnings"] = warnings

    writer = BundleWriter(out_dir, mode="overwrite")
    try:
        for case in cases:
            writer.add_case(case)
        calls = [c for s in shards for c in s.calls]
        calls.sort(key=lambda c: (c.case_id, c.column or "", c.repeat or 0))
        writer.add_judge_calls(calls)
        writer.write_summary(summary)
    finally:
        writer.close()
    result = MergeResult(out_dir=out_dir, summary=summary, warnings=warnings)
    if formats:
        result.reports = write_reports(out_dir, formats)
    return result
