"""AgentV's result layout (docs/results.md, "AgentV's result layout"): where its files sit, and
an AgentV run's ``index.jsonl`` rows read as evalrun's case results, so the one bundle reader
(``reader.py``) serves ``compare`` and ``report`` for AgentV runs too."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalrun.results.agentv_scoring import AGENTV_THRESHOLD
from evalrun.results.bundle import RESULTS, SUMMARY
from evalrun.results.models import CaseResult, CaseTimings, CaseUsage, GraderOutcome, Status

INDEX = "index.jsonl"
GRADING = "grading.json"
RESULT = "result.json"
ANSWER = "outputs/answer.md"
#: AgentV's execution status of a result <-> evalrun's status of a case.
EXECUTION_STATUS: dict[str, Status] = {
    "ok": "passed",
    "quality_failure": "failed",
    "execution_error": "error",
}
#: evalrun's status of a case -> AgentV's execution status (unscored has none of its own).
EXECUTION_OF: dict[str, str] = {
    "passed": "ok",
    "failed": "quality_failure",
    "error": "execution_error",
    "unscored": "execution_error",
}
_UNSAFE = re.compile(r'[/\\:*?"<>|]')
_PREFIX_CHARS = 64
_HASH_CHARS = 12


def is_agentv_run(directory: Path) -> bool:
    """An AgentV run folder: its ``index.jsonl`` and no evalrun ``results.jsonl``."""
    return (directory / INDEX).is_file() and not (directory / RESULTS).is_file()


def is_evalrun_bundle(directory: Path) -> bool:
    """An evalrun bundle: ``results.jsonl``, or evalrun's ``summary.json`` alone (a run that
    crashed early); AgentV's own ``summary.json`` names its index (``index_path``)."""
    if (directory / RESULTS).is_file():
        return True
    summary = directory / SUMMARY
    if not summary.is_file():
        return False
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True  # evalrun's reader reports an unreadable summary itself
    return not (isinstance(data, dict) and "index_path" in data)


def test_dir(test_id: str, suite: str | None, target: str, eval_path: str | None) -> str:
    """The folder AgentV gives a test's artifacts: its id made safe for a path (64 characters
    at most), ``--``, and 12 hex digits of the SHA-256 of the row's identity."""
    identity = {
        "eval_path": eval_path,
        "suite": suite,
        "test_id": test_id,
        "target": target,
        "variant": None,
    }
    digest = hashlib.sha256(
        json.dumps(identity, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    safe = _UNSAFE.sub("_", test_id.strip()) or "unknown"
    return f"{safe[:_PREFIX_CHARS]}--{digest[:_HASH_CHARS]}"


def variant_test_id(test_id: str, prompt: str | None) -> str:
    """A prompt variant's ``test_id`` as AgentV names a test it expanded per prompt
    (``<test id>__<prompt id>``), so each variant has its own folder; the row's ``prompt_id``
    names the variant (docs/results.md, "AgentV's result layout")."""
    return test_id if prompt is None else f"{test_id}__{prompt}"


def sample_dir(repeat: int) -> str:
    return f"sample-{repeat + 1}"


def _field(row: dict[str, Any], snake: str, camel: str) -> Any:
    """AgentV writes snake_case; older AgentV files and its replay fixtures, camelCase."""
    return row[snake] if snake in row else row.get(camel)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _inside(directory: Path, relative: Any) -> Path | None:
    """A path the row names, only when it stays inside the run folder."""
    if not isinstance(relative, str) or not relative:
        return None
    path = (directory / relative).resolve()
    return path if path.is_relative_to(directory.resolve()) and path.is_file() else None


def usage_fields(usage: CaseUsage) -> dict[str, Any]:
    """evalrun's target usage (docs/results.md) as AgentV's ``token_usage`` and ``cost_usd``."""
    target = usage.target
    if target is None:
        return {}
    out: dict[str, Any] = {"token_usage": {"input": target.input, "output": target.output}}
    if target.cost_usd is not None:
        out["cost_usd"] = target.cost_usd
    return out


def _usage(row: dict[str, Any]) -> CaseUsage:
    """AgentV's ``token_usage`` and ``cost_usd`` as evalrun's target usage."""
    tokens = _field(row, "token_usage", "tokenUsage")
    target = {k: tokens[k] for k in ("input", "output") if isinstance(tokens, dict) and k in tokens}
    if target:
        target["total"] = sum(v for v in target.values() if isinstance(v, int))
    cost = _number(_field(row, "cost_usd", "costUsd"))
    if cost is not None:
        target["cost_usd"] = cost
    return CaseUsage.from_dict({"target": target} if target else {})


def _grader(score: dict[str, Any]) -> GraderOutcome:
    value = _number(score.get("score"))
    passed = score.get("pass")
    if not isinstance(passed, bool):
        passed = value is not None and value >= AGENTV_THRESHOLD
    weight = _number(score.get("weight"))
    return GraderOutcome(
        name=str(score.get("name") or score.get("type") or "grader"),
        status="passed" if passed else "failed",
        score=value,
        passed=passed,
        reason=str(score.get("reason") or ""),
        weight=1.0 if weight is None else weight,
        threshold=AGENTV_THRESHOLD,
    )


def _graders(row: dict[str, Any], directory: Path) -> list[GraderOutcome]:
    """The row's ``scores``, else the components of its ``grading.json``."""
    scores = row.get("scores")
    if not isinstance(scores, list):
        grading = _inside(directory, _field(row, "grading_path", "gradingPath"))
        if grading is None:
            return []
        document = json.loads(grading.read_text(encoding="utf-8"))
        scores = [
            {**c, "name": (c.get("assertion") or {}).get("name")}
            for c in document.get("component_results") or ()
            if isinstance(c, dict)
        ]
    return [_grader(s) for s in scores if isinstance(s, dict)]


def reader_of(directory: Path) -> Callable[[Any], CaseResult]:
    """The converter of one ``index.jsonl`` row of the AgentV run in ``directory`` into a case
    result; it raises for a row that is not one (the reader's skip rule). A run of several
    targets is a matrix run: each row is the cell of its test and target (docs/results.md,
    "A matrix run"), so no row stands in for another."""

    def convert(row: Any) -> CaseResult:
        test_id = _field(row, "test_id", "testId")
        score = _number(row.get("score"))
        if not isinstance(test_id, str) or not test_id or score is None:
            raise ValueError("not an AgentV result row")
        target = row.get("target") if isinstance(row.get("target"), str) else None
        execution = _field(row, "execution_status", "executionStatus")
        status: Status = EXECUTION_STATUS.get(
            execution if isinstance(execution, str) else "",
            "passed" if score >= AGENTV_THRESHOLD else "failed",
        )
        answer = _inside(directory, _field(row, "answer_path", "answerPath"))
        duration = _number(_field(row, "duration_ms", "durationMs"))
        error = row.get("error")
        sample = _field(row, "sample_index", "sampleIndex")
        prompt = row.get("prompt_id")
        if isinstance(prompt, str) and test_id.endswith(suffix := variant_test_id("", prompt)):
            test_id = test_id.removesuffix(suffix)
        else:
            prompt = None
        return CaseResult(
            id=test_id,
            prompt=prompt,
            status=status,
            score=score,
            graders=_graders(row, directory),
            output=answer.read_text(encoding="utf-8") if answer else None,
            target=target,
            error=error if isinstance(error, str) else None,
            repeat=sample if isinstance(sample, int) and not isinstance(sample, bool) else 0,
            timings=CaseTimings(total_ms=duration),
            usage=_usage(row),
        )

    return convert
