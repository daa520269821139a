"""Run bundles for reporter tests, written straight to disk (no runner involved)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from evalrun.results.models import (
    CaseResult,
    CaseTimings,
    CaseUsage,
    GraderOutcome,
    ProxyUsage,
    TargetUsage,
)
from evalrun.results.scoring import case_score, case_status
from evalrun.results.summary import RunMeta, summarize

NASTY = '<script>alert("x")</script> | *bold* `code` 100% done\r\nline two & <b>'


def grader(
    name: str,
    score: float | None,
    *,
    status: str | None = None,
    threshold: float = 0.5,
    reason: str = "",
    **extra: Any,
) -> GraderOutcome:
    if status is None:
        status = "unscored" if score is None else ("passed" if score >= threshold else "failed")
    return GraderOutcome(
        name=name,
        status=status,  # type: ignore[arg-type]
        score=score,
        passed=None if score is None else score >= threshold,
        reason=reason,
        threshold=threshold,
        **extra,
    )


def case(
    case_id: str,
    graders: Sequence[GraderOutcome],
    *,
    repeat: int = 0,
    output: str | None = "an answer",
    error: str | None = None,
    total_ms: float = 120.0,
) -> CaseResult:
    return CaseResult(
        id=case_id,
        status=case_status(graders, target_failed=error is not None),
        score=case_score(graders),
        graders=list(graders),
        output=output,
        target="mock",
        error=error,
        repeat=repeat,
        timings=CaseTimings(total_ms=total_ms),
        usage=CaseUsage(target=TargetUsage(input=10, output=5, total=15)),
    )


def mixed_cases() -> list[CaseResult]:
    """Every status, several graders, hostile text in reasons, ids and output."""
    usage = ProxyUsage(calls=2, max_calls=10, input_tokens=100, output_tokens=20)
    return [
        case(
            "alpha",
            [
                grader("precision", 0.9, reason="all relevant first", hits=["p1", "p2"]),
                grader("contains", 1.0, checks=[{"text": "has Paris", "pass": True}]),
            ],
            total_ms=300,
        ),
        case(
            "beta-10",
            [
                grader("precision", 0.2, reason=NASTY, misses=["p3 ranked low"], proxy=usage),
                grader("contains", 1.0),
            ],
            output=NASTY,
            total_ms=900,
        ),
        case(
            "beta-2",
            [grader("precision", 0.7), grader("contains", 0.0, reason="no Paris")],
            total_ms=50,
        ),
        case(
            "gamma",
            [
                grader(
                    "precision",
                    None,
                    status="error",
                    reason="",
                    exit_code=1,
                    stderr_tail="Traceback...\nValueError: boom",
                ),
                grader("contains", 1.0),
            ],
            total_ms=1500,
        ),
        case(
            "delta",
            [grader("precision", None, reason="judge unavailable")],
            total_ms=10,
        ),
        case("epsilon", [], error="target timed out after 30 s", output=None, total_ms=30000),
        case(
            '<img src=x onerror="alert(1)">',
            [grader("precision", 0.55, reason="borderline")],
            total_ms=200,
        ),
    ]


def judge_calls_for(cases: Iterable[CaseResult]) -> list[dict[str, Any]]:
    calls = []
    for c in cases:
        for g in c.graders:
            if g.proxy is not None:
                for i in range(g.proxy.calls):
                    calls.append(
                        {
                            "case_id": c.id,
                            "grader": g.name,
                            "target": "judge-llm",
                            "status": "ok",
                            "latency_ms": 40.0 + i,
                            "input_tokens": 50,
                            "output_tokens": 10,
                            "cached": i == 1,
                            "system_prompt": "You judge relevance.",
                            "question": f"Is passage {i} relevant? {NASTY}",
                            "response": '{"relevant": true, "reason": "</pre><script>bad()</script>"}',
                        }
                    )
    return calls


def random_cases(
    ids: Sequence[str], *, repeats: int = 1, seed: int = 7, graders: Sequence[str] = ("a", "b")
) -> list[CaseResult]:
    """Deterministic pseudo-random results for ``ids`` x ``repeats``."""
    rng = random.Random(seed)
    out = []
    for cid in ids:
        for r in range(repeats):
            roll = rng.random()
            if roll < 0.08:
                gs = [grader(graders[0], None, status="error", reason="crashed", exit_code=1)]
            elif roll < 0.14:
                gs = [grader(name, None, reason="abstained") for name in graders]
            else:
                gs = [grader(name, round(rng.random(), 3)) for name in graders]
            out.append(case(cid, gs, repeat=r, total_ms=rng.randint(10, 5000)))
    return out


def write_bundle(
    directory: Path,
    cases: Sequence[CaseResult],
    *,
    meta: dict[str, Any] | None = None,
    judge_calls: Sequence[dict[str, Any]] = (),
    summary: bool = True,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "results.jsonl", "w", encoding="utf-8") as handle:
        for c in cases:
            handle.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
    with open(directory / "judge-calls.jsonl", "w", encoding="utf-8") as handle:
        for call in judge_calls:
            handle.write(json.dumps(call, ensure_ascii=False) + "\n")
    if summary:
        base = {
            "eval": "rag-demo",
            "description": "Demo <eval> | with *markup*",
            "target": "mock",
            "judge": "judge-llm",
            "started_at": "2025-01-02T03:04:05+00:00",
            "finished_at": "2025-01-02T03:05:05+00:00",
            "duration_s": 60.0,
            "complete": True,
            "interrupted": False,
            "threshold": None,
            "exit_code": 1,
        }
        data = summarize(cases, RunMeta.from_dict({**base, **(meta or {})}))
        (directory / "summary.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    return directory
