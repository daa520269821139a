"""The targets-by-cases matrix of a run (docs/results.md, "A matrix run"): which column and
which cell a result belongs to.

A run with several targets writes one result line per (case, target, repeat) into one bundle;
the line's ``target`` names its column. Every reader takes the column from here, so the
summary, the reports, ``compare``, ``merge`` and ``evalrun view`` agree on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from evalrun.results.models import CaseResult


def column_of(case: CaseResult) -> str:
    """The column a result belongs to: its target's name ("" when the run named none)."""
    return case.target or ""


def cell_label(case: CaseResult, columns: int) -> str:
    """How a report names a result: its id, and its target when the run has several."""
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


def build_matrix(results: Iterable[CaseResult], order: Sequence[str] = ()) -> Matrix:
    """The matrix of ``results`` (the last result of a cell wins, as everywhere)."""
    rows: dict[tuple[str, int], MatrixRow] = {}
    seen: list[str] = []
    for case in results:
        key = (str(case.id), int(case.repeat or 0))
        row = rows.get(key)
        if row is None:
            row = rows[key] = MatrixRow(*key)
        column = column_of(case)
        row.cells[column] = case
        seen.append(column)
    ordered = sorted(rows.values(), key=lambda r: r.rank)  # stable: arrival order within a rank
    return Matrix(column_order([*order, *seen]), ordered)
