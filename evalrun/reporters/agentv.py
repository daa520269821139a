"""AgentV's result layout, written from a bundle (docs/results.md, "AgentV's result layout"):
``index.jsonl`` with a row per case, and beside it a folder per test with ``grading.json``,
``result.json`` and ``outputs/answer.md``, where scripts written for AgentV's runs look."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from evalrun.reporters.bundle_view import BundleView, CaseView
from evalrun.results import agentv_run
from evalrun.results.models import CaseResult, GraderOutcome


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _component(grader: GraderOutcome) -> dict[str, Any]:
    out: dict[str, Any] = {
        "pass": bool(grader.passed),
        "score": grader.score or 0.0,
        "reason": grader.reason or grader.status,
        "assertion": {"name": grader.name, "weight": grader.weight},
    }
    checks = [
        {
            "pass": bool(c.get("pass")),
            "score": c.get("score", 1.0 if c.get("pass") else 0.0),
            "reason": str(c.get("reason") or c.get("text") or ""),
            "assertion": {"name": str(c.get("text") or grader.name)},
        }
        for c in grader.checks
    ]
    if checks:
        out["component_results"] = checks
    return out


def _score(grader: GraderOutcome) -> dict[str, Any]:
    return {
        "name": grader.name,
        "pass": bool(grader.passed),
        "score": grader.score or 0.0,
        "reason": grader.reason or grader.status,
        "weight": grader.weight,
        "duration_ms": grader.duration_ms,
    }


def draft(view: CaseView, case: CaseResult) -> tuple[str, str, str, str]:
    """A case's index row (without the run's fields, which :meth:`Writer.place` adds), its
    ``grading.json``, its ``result.json`` and its answer. AgentV needs a number for every
    score: a case evalrun could not score is written as 0 with its error."""
    execution = agentv_run.EXECUTION_OF[case.status]
    score = case.score or 0.0
    error = case.error or (None if case.status in ("passed", "failed") else case.status)
    duration = case.timings.total_ms
    row: dict[str, Any] = {
        "test_id": agentv_run.variant_test_id(case.id, case.prompt),
        **({"prompt_id": case.prompt} if case.prompt is not None else {}),
        "score": score,
        "target": case.target or "unknown",
        "execution_status": execution,
        "scores": [_score(g) for g in case.graders],
    }
    if case.repeat:
        row["sample_index"] = case.repeat
    if case.conversation_id is not None:
        row["conversation_id"] = case.conversation_id
    if error:
        row["error"] = error
    if duration is not None:
        row["duration_ms"] = duration
    row.update(agentv_run.usage_fields(case.usage))
    passed = case.status == "passed"
    grading: dict[str, Any] = {
        "pass": passed,
        "score": score,
        "reason": "; ".join(g.reason for g in case.graders if g.reason) or case.status,
        "component_results": [_component(g) for g in case.graders],
        "metadata": {"execution_status": execution},
    }
    if case.conversation_id is not None:  # AgentV counts the assistant messages as turns
        steps = (case.transcript or {}).get("steps") or []
        turns = sum(step.get("role") == "assistant" for step in steps) or int(
            case.output is not None
        )
        grading["metadata"]["conversation"] = {
            "turns": turns,
            "conversation_id": case.conversation_id,
        }
    result: dict[str, Any] = {
        "execution_status": execution,
        "status": "passed" if passed else "failed",
        "duration_seconds": round((duration or 0.0) / 1000, 3),
        "model": case.target or "unknown",
        "grading_path": f"./{agentv_run.GRADING}",
    }
    if duration is not None:
        result["duration_ms"] = duration
    if case.output:
        result["output_paths"] = {"answer": f"./{agentv_run.ANSWER}"}
    pretty = json.dumps(grading, indent=2, ensure_ascii=False, default=str) + "\n"
    return _dumps(row), pretty, json.dumps(result, indent=2) + "\n", case.output or ""


class Writer:
    """``index.jsonl`` to ``out``; the per-test files into the folder ``out`` is a file in (none
    when ``out`` is not a file, e.g. standard output)."""

    reads_passed = True

    def __init__(self, view: BundleView, out: TextIO) -> None:
        self.view, self.out = view, out
        name = getattr(out, "name", None)
        folder = Path(name).parent if isinstance(name, str) and not name.startswith("<") else None
        self.folder = folder if folder is not None and folder.is_dir() else None
        meta = view.meta
        self.timestamp = meta.started_at or meta.finished_at
        self.suite = meta.eval
        self.eval_path = meta.eval_file

    def head(self) -> None:
        pass

    def case(self, case: CaseResult) -> None:
        self.place(draft(self.view, case))

    def place(self, pieces: tuple[str, str, str, str]) -> None:
        index, grading, result, answer = pieces
        row = json.loads(index)
        test = agentv_run.test_dir(row["test_id"], self.suite, row["target"], self.eval_path)
        sample = f"{test}/{agentv_run.sample_dir(row.get('sample_index', 0))}"
        row = {"timestamp": self.timestamp, **row, "suite": self.suite}
        row["result_dir"] = test
        row["grading_path"] = f"{sample}/{agentv_run.GRADING}"
        if answer:
            row["answer_path"] = row["output_path"] = f"{sample}/{agentv_run.ANSWER}"
        self.out.write(_dumps({k: v for k, v in row.items() if v is not None}) + "\n")
        if self.folder is None:
            return
        where = self.folder / sample
        (where / "outputs").mkdir(parents=True, exist_ok=True)
        (where / agentv_run.GRADING).write_text(grading, encoding="utf-8")
        (where / agentv_run.RESULT).write_text(result, encoding="utf-8")
        if answer:
            (where / agentv_run.ANSWER).write_text(answer, encoding="utf-8", newline="")

    def tail(self) -> None:
        pass
