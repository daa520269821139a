"""The one reader of a run bundle: reports, merge, compare, resume and calibration all read
``results.jsonl`` and ``judge-calls.jsonl`` through here, so one skip rule holds for every one
of them, and each line is known by its byte offset (docs/results.md, "Reading a bundle"). An
AgentV run's ``index.jsonl`` is read here too, its rows made case results by ``agentv_run.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic_core import from_json

from evalrun.judgecall import JudgeCall
from evalrun.results.agentv_run import INDEX, is_agentv_run, reader_of
from evalrun.results.bundle import JUDGE_CALLS, RESULTS, SUMMARY
from evalrun.results.models import STATUSES, CaseResult, CaseTimings, GraderOutcome
from evalrun.results.summary import RunMeta

T = TypeVar("T")

#: What a line that is not the record it should be raises while it is read: the skip rule.
_NOT_A_RECORD = (ValueError, TypeError, KeyError, AttributeError)


def _result(data: Any) -> CaseResult:
    """A result line as a :class:`CaseResult`; raises for a line that is not a result."""
    _check_result(data)
    return CaseResult.from_dict(data)


def _brief_result(data: Any) -> CaseResult:
    """What a compact report row needs (no reasons, hits, checks, details, stderr or usage),
    read faster than in full (docs/reports.md), from a line already known to be a result."""
    return CaseResult(
        id=data["id"],
        status=data["status"],
        score=data.get("score"),
        output=data.get("output"),
        repeat=data.get("repeat") or 0,
        target=data.get("target"),
        prompt=data.get("prompt"),
        timings=CaseTimings.from_dict(data.get("timings")),
        line=data.get("line"),
        graders=[
            GraderOutcome(
                name=g["name"],
                status=g["status"],
                score=g.get("score"),
                duration_ms=g.get("duration_ms") or 0.0,
            )
            for g in data.get("graders") or ()
        ],
    )


def _check_result(data: Any) -> None:
    """The fields every reader relies on, with the types the writer gives them."""
    if not (
        isinstance(data.get("id"), str)
        and data.get("status") in STATUSES
        and _number_or_none(data.get("score"))
        and isinstance(data.get("repeat") or 0, int)
        and isinstance(data.get("line"), (int, type(None)))
    ):
        raise ValueError("not a result")
    for grader in data.get("graders") or ():
        if not (
            isinstance(grader.get("name"), str)
            and grader.get("status") in STATUSES
            and _number_or_none(grader.get("score"))
        ):
            raise ValueError("not a grader result")


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _json_object(line: bytes) -> dict[str, Any] | None:
    """The object on a line, or None for any line that is not whole UTF-8 JSON of an object.

    pydantic-core's parser reads a result line in half the time ``json`` takes (the reports
    read 100,000 of them); it also refuses a lone-surrogate escape that ``json`` accepts, so a
    line it refuses gets ``json``'s verdict."""
    try:
        value = from_json(line)
    except ValueError:
        try:
            value = json.loads(line.decode("utf-8"))
        except ValueError:  # blank, torn by a crash mid-write, not UTF-8, not JSON
            return None
    return value if isinstance(value, dict) else None


def _record(line: bytes, convert: Callable[[Any], T]) -> T | None:
    """The record on a line, or None for a line the skip rule skips."""
    data = _json_object(line)
    if data is None:
        return None
    try:
        return convert(data)
    except _NOT_A_RECORD:
        return None


def _lines(path: Path, convert: Callable[[Any], T]) -> Iterator[tuple[int, T]]:
    """(byte offset, record) of every line of ``path`` that reads as a record; others are
    skipped."""
    if not path.is_file():
        return
    offset = 0
    with open(path, "rb") as handle:
        for line in handle:
            record = _record(line, convert)
            if record is not None:
                yield offset, record
            offset += len(line)


def _at(path: Path, offsets: Iterable[int], convert: Callable[[Any], T]) -> Iterator[T]:
    """The records whose lines start at ``offsets`` (offsets this reader gave), one at a time."""
    if not path.is_file():
        return
    at = -1
    with open(path, "rb") as handle:
        for offset in offsets:
            if offset != at:  # report order mostly follows the file: skip needless seeks
                handle.seek(offset)
            line = handle.readline()
            at = offset + len(line)
            record = _record(line, convert)
            if record is not None:
                yield record


def result_lines(directory: Path) -> Iterator[tuple[int, CaseResult]]:
    """(byte offset, result) of every result line of the bundle, in file order; of an AgentV
    run, every row of its ``index.jsonl`` (``agentv_run.py``)."""
    if is_agentv_run(directory):
        return _lines(directory / INDEX, reader_of(directory))
    return _lines(directory / RESULTS, _result)


def result_from_line(line: bytes) -> CaseResult | None:
    """The result on one line of ``results.jsonl`` as :func:`result_lines` reads it (None: a
    line it skips), for who holds the line already (the run, drafting its reports)."""
    return _record(line, _result)


def judge_call_from_line(line: bytes) -> JudgeCall | None:
    """The judge call on one line of ``judge-calls.jsonl`` as :func:`judge_call_lines` reads
    it (None: a line it skips)."""
    return _record(line, JudgeCall.from_dict)


def iter_results(directory: Path) -> Iterator[CaseResult]:
    """Every result of the bundle, in file order, one at a time."""
    return (case for _, case in result_lines(directory))


def read_case_results(directory: Path) -> list[CaseResult]:
    """Every result of the bundle in ``directory``, in file order (a user's own results file is
    ``evalrun score``'s to read: ``read_metrics_file``)."""
    return list(iter_results(directory))


def results_at(
    directory: Path, offsets: Iterable[int], *, brief: bool = False
) -> Iterator[CaseResult]:
    """The results whose lines start at ``offsets``, offsets :func:`result_lines` gave (so
    lines already checked); ``brief``: only what a compact report row shows."""
    if is_agentv_run(directory):
        return _at(directory / INDEX, offsets, reader_of(directory))
    return _at(directory / RESULTS, offsets, _brief_result if brief else CaseResult.from_dict)


def judge_call_lines(directory: Path) -> Iterator[tuple[int, JudgeCall]]:
    """(byte offset, call) of every judge-call line of the bundle, in file order."""
    return _lines(directory / JUDGE_CALLS, JudgeCall.from_dict)


def read_judge_calls(directory: Path) -> list[JudgeCall]:
    return [call for _, call in judge_call_lines(directory)]


def judge_calls_at(directory: Path, offsets: Iterable[int]) -> list[JudgeCall]:
    return list(_at(directory / JUDGE_CALLS, offsets, JudgeCall.from_dict))


def read_meta(directory: Path) -> RunMeta:
    """The run metadata of ``summary.json``; all unknown when there is none (a run that
    crashed)."""
    path = directory / SUMMARY
    if is_agentv_run(directory):  # its summary.json is AgentV's own
        return RunMeta(eval=directory.name, extra={"format": "agentv"})
    if not path.is_file():
        return RunMeta()
    data = json.loads(path.read_text(encoding="utf-8"))
    return RunMeta.from_dict(data if isinstance(data, dict) else {})


def read_columns(directory: Path) -> list[dict[str, Any]] | None:
    """A matrix run's per-target statistics as its ``summary.json`` recorded them (``columns``:
    docs/results.md, "A matrix run"); None for a run of one target, or a bundle whose summary
    is missing or unreadable."""
    try:
        data = json.loads((directory / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    columns = data.get("columns") if isinstance(data, dict) else None
    if not isinstance(columns, list) or not all(isinstance(c, dict) for c in columns):
        return None
    return columns
