"""The cases-by-columns matrix of a run (docs/results.md, "A matrix run"): which column and
which cell a result belongs to.

A run with several targets or prompt variants writes one result line per (case, target,
prompt, repeat) into one bundle; the line's ``target`` and ``prompt`` name its column. Every
reader takes the column from here, so the summary, the reports, ``compare``, ``merge`` and
``evalrun view`` agree on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalrun.results.models import CaseResult

#: Between a column's target and its prompt variant: ``local × concise``.
PROMPT_JOIN = " × "


def column_name(target: str | None, prompt: str | None) -> str:
    """A column's name: the target's ("" when the run named none), joined to the prompt
    variant's id when there is one."""
    name = "" if target is None else str(target)
    if prompt is None:
        return name
    return f"{name}{PROMPT_JOIN}{prompt}" if name else str(prompt)


def column_of(case: CaseResult) -> str:
    """The column a result belongs to: its target and its prompt variant, if any."""
    return column_name(case.target, case.prompt)


def column_names(targets: Sequence[str | None], prompts: Sequence[str] | None) -> list[str]:
    """The columns of a run, in order: each target's prompt variants side by side."""
    variants: Sequence[str | None] = prompts or [None]
    return [column_name(target, prompt) for target in targets for prompt in variants]


def cell_label(case: CaseResult, columns: int) -> str:
    """How a report names a result: its id, and its column when the run has several."""
    return f"{case.id} @ {column_of(case)}" if columns > 1 else str(case.id)


def column_order(names: Iterable[str]) -> list[str]:
    """Columns in the order they were first seen (the order of ``--target``)."""
    return list(dict.fromkeys(names))


#: How a row ranks: its worst cell, problems first (as the reports order cases).
_RANK = {"error": 0, "failed": 1, "unscored": 2, "passed": 3}


@dataclass
class MatrixRow:
    """One case (one repeat of it) across the columns: each column's result, if it has one."""

    case_id: str
    repeat: int
    cells: dict[str, CaseResult] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return min((_RANK.get(c.status, 0) for c in self.cells.values()), default=0)


@dataclass
class Matrix:
    """Rows are cases, columns targets; problem rows first (a row is as bad as its worst
    cell), then in the order the cases came."""

    columns: list[str]
    rows: list[MatrixRow]
    #: rows left out beyond ``max_rows`` (the reports link to the full results instead)
    more: int = 0

    def to_dict(self) -> dict[str, Any]:
        """``matrix`` of report.json and of ``evalrun view``'s run data (docs/results.md)."""
        rows = [
            {
                "id": row.case_id,
                "repeat": row.repeat,
                "cells": {
                    column: {"status": case.status, "score": case.score}
                    for column in self.columns
                    if (case := row.cells.get(column)) is not None
                },
            }
            for row in self.rows
        ]
        return {"columns": self.columns, "rows": rows, "more_rows": self.more}


def build_matrix(
    results: Iterable[CaseResult], order: Sequence[str] = (), *, max_rows: int | None = None
) -> Matrix:
    """The matrix of ``results`` (the last result of a cell wins, as everywhere). With
    ``max_rows`` only the rows first met are kept (given in report order: the problem rows),
    so memory stays bounded however many cases a run has."""
    rows: dict[tuple[str, int], MatrixRow] = {}
    left_out: set[tuple[str, int]] = set()
    seen: dict[str, None] = {}
    for case in results:
        key = (str(case.id), int(case.repeat or 0))
        column = column_of(case)
        seen.setdefault(column)
        row = rows.get(key)
        if row is None:
            if max_rows is not None and len(rows) >= max_rows:
                left_out.add(key)
                continue
            row = rows[key] = MatrixRow(*key)
        row.cells[column] = case
    ordered = sorted(rows.values(), key=lambda r: r.rank)  # stable: arrival order within a rank
    return Matrix(column_order([*order, *seen]), ordered, len(left_out))
