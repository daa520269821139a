"""The run index: one row per run in ``.evalrun/index.sqlite``, so past runs can be listed
without reading every bundle (docs/runs.md).

Rows are appended by the run command when a run ends and read by ``evalrun runs``. Several runs
may end at once: the file is opened in WAL mode with a busy timeout (``evalrun/sqlitewal.py``).
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evalrun.sqlitewal import BUSY_TIMEOUT_S, open_wal

#: Where a run records itself, relative to the folder it runs in (beside .evalrun/runs).
DEFAULT_INDEX = Path(".evalrun/index.sqlite")
#: Between a matrix run's targets in its row (docs/runs.md).
TARGETS_JOIN = ", "
#: How long ``git rev-parse HEAD`` may take before a run records no commit.
GIT_TIMEOUT_S = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    eval TEXT,
    eval_file TEXT,
    description TEXT,
    started_at TEXT,
    finished_at TEXT,
    bundle TEXT NOT NULL,
    target TEXT,
    judge TEXT,
    passed INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    error INTEGER NOT NULL,
    unscored INTEGER NOT NULL,
    total INTEGER NOT NULL,
    mean_score REAL,
    exit_code INTEGER,
    git_commit TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_at, id);
"""


@dataclass
class IndexedRun:
    """One row of the index: what a run's summary.json says of it, and where its bundle is."""

    eval: str | None
    eval_file: str | None
    description: str | None
    started_at: str | None
    finished_at: str | None
    bundle: str
    target: str | None
    judge: str | None
    passed: int
    failed: int
    error: int
    unscored: int
    total: int
    mean_score: float | None
    exit_code: int | None
    git_commit: str | None
    id: int | None = None

    @classmethod
    def from_summary(
        cls, summary: Mapping[str, Any], bundle: Path, exit_code: int, git_commit: str | None
    ) -> IndexedRun:
        counts = summary.get("counts") or {}
        eval_file = summary.get("eval_file")
        return cls(
            eval=summary.get("eval"),
            eval_file=str(Path(eval_file).resolve()) if eval_file else None,
            description=summary.get("description"),
            started_at=summary.get("started_at"),
            finished_at=summary.get("finished_at"),
            bundle=str(bundle.resolve()),
            target=summary.get("target") or _matrix_targets(summary.get("matrix")),
            judge=summary.get("judge"),
            passed=int(counts.get("passed", 0)),
            failed=int(counts.get("failed", 0)),
            error=int(counts.get("error", 0)),
            unscored=int(counts.get("unscored", 0)),
            total=int(counts.get("total", 0)),
            mean_score=summary.get("mean_score"),
            exit_code=exit_code,
            git_commit=git_commit,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def targets(self) -> list[str]:
        """Each target the run graded: a matrix run's are listed as ``local, mock``."""
        return [name for name in (self.target or "").split(TARGETS_JOIN) if name]


_COLUMNS = [name for name in IndexedRun.__dataclass_fields__ if name != "id"]


def _matrix_targets(matrix: Any) -> str | None:
    """A matrix run's targets as the index lists them: ``local, mock`` (docs/runs.md)."""
    if isinstance(matrix, list) and matrix and all(isinstance(t, str) for t in matrix):
        return TARGETS_JOIN.join(matrix)
    return None


def git_commit(folder: Path) -> str | None:
    """``git rev-parse HEAD`` of the repository holding ``folder``; None when it is not in one,
    git is missing or slow: the index is a convenience and says nothing then."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def record(index: Path, run: IndexedRun) -> None:
    """Append ``run``; raises ``OSError`` or ``sqlite3.Error`` (the caller warns and goes on)."""
    index.parent.mkdir(parents=True, exist_ok=True)
    db = open_wal(index, _SCHEMA)
    try:
        values = [getattr(run, name) for name in _COLUMNS]
        db.execute(
            f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
            values,
        )
    finally:
        db.close()


def list_runs(
    index: Path,
    *,
    eval_name: str | None = None,
    target: str | None = None,
    limit: int | None = None,
) -> list[IndexedRun]:
    """Runs newest first (start time, then the order they were recorded); ``eval_name``
    matches the eval's name or its file path, ``target`` any one target a run graded. An
    index that does not exist holds no runs."""
    if not index.is_file():
        return []
    db = sqlite3.connect(index, timeout=BUSY_TIMEOUT_S)
    try:
        query = f"SELECT id, {', '.join(_COLUMNS)} FROM runs"
        params: list[Any] = []
        if eval_name is not None:
            query += " WHERE eval = ? OR eval_file = ?"
            params += [eval_name, str(Path(eval_name).resolve())]
        query += " ORDER BY started_at DESC, id DESC"
        if limit is not None and target is None:
            query += " LIMIT ?"
            params.append(limit)
        rows = db.execute(query, params).fetchall()
    finally:
        db.close()
    runs = [IndexedRun(**dict(zip(["id", *_COLUMNS], row, strict=True))) for row in rows]
    if target is not None:  # a matrix run's row holds its targets in one field
        runs = [run for run in runs if target in run.targets][:limit]
    return runs
