"""The run bundle on disk: results streamed to ``results.jsonl`` as cases finish, a summary,
and the judge-call log. Reporters read bundles, never the runner's memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from evalrun.results.models import CaseResult

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
JUDGE_CALLS = "judge-calls.jsonl"


class BundleWriter:
    """Appends each case the moment it finishes and flushes, so a crash loses nothing."""

    def __init__(self, directory: Path, *, append: bool = False) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        mode = "a" if append else "w"
        self._results: IO[str] = open(directory / RESULTS, mode, encoding="utf-8")  # noqa: SIM115
        self._calls: IO[str] = open(directory / JUDGE_CALLS, mode, encoding="utf-8")  # noqa: SIM115

    def add_case(self, case: CaseResult) -> None:
        self._results.write(json.dumps(case.to_dict(), ensure_ascii=False, default=str) + "\n")
        self._results.flush()

    def add_judge_calls(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._calls.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        if records:
            self._calls.flush()

    def write_summary(self, summary: dict[str, Any]) -> None:
        tmp = self.directory / (SUMMARY + ".tmp")
        tmp.write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n")
        tmp.replace(self.directory / SUMMARY)

    def close(self) -> None:
        self._results.close()
        self._calls.close()


def read_results(directory: Path) -> list[CaseResult]:
    """Every complete line of ``results.jsonl``; a torn last line (crash mid-write) is skipped."""
    path = directory / RESULTS
    if not path.is_file():
        return []
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            cases.append(CaseResult.from_dict(json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue
    return cases


def read_summary(directory: Path) -> dict[str, Any]:
    path = directory / SUMMARY
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def read_judge_calls(directory: Path) -> list[dict[str, Any]]:
    path = directory / JUDGE_CALLS
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
