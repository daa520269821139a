"""Run indexes and bundles for the viewer's tests, and the viewer served on real loopback HTTP
in a thread (uvicorn on a socket the OS picked)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from report_helpers import case, grader, write_bundle

from evalrun.results.index import IndexedRun, record
from evalrun.results.models import CaseResult
from evalrun.viewer.server import bind, server, url_of


def add_run(
    index: Path,
    directory: Path,
    cases: Sequence[CaseResult],
    *,
    meta: dict[str, Any] | None = None,
    judge_calls: Sequence[dict[str, Any]] = (),
    exit_code: int | None = None,
    commit: str | None = None,
) -> Path:
    """Write a bundle and record it in ``index`` as a run that ended would."""
    write_bundle(directory, cases, meta=meta, judge_calls=judge_calls)
    summary = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    if exit_code is None:
        exit_code = 1 if summary["counts"]["failed"] + summary["counts"]["error"] else 0
    record(index, IndexedRun.from_summary(summary, directory, exit_code, commit))
    return directory


def scored(case_id: str, score: float) -> CaseResult:
    """A case with one grader at threshold 0.5: passed from 0.5 up."""
    return case(case_id, [grader("g", score)])


#: Three runs of one eval, oldest first: the base, one that regresses, one that recovers.
THREE_RUNS: tuple[dict[str, float], ...] = (
    {f"c{i}": 0.9 for i in range(10)},
    {**{f"c{i}": 0.9 for i in range(10)}, "c3": 0.1, "c4": 0.2, "c7": 0.3},
    {**{f"c{i}": 0.95 for i in range(10)}, "c4": 0.4},
)


def three_runs(root: Path, index: Path) -> list[Path]:
    dirs = []
    for n, scores in enumerate(THREE_RUNS):
        started = f"2026-01-0{n + 1}T10:00:00+00:00"
        dirs.append(
            add_run(
                index,
                root / f"run{n}",
                [scored(cid, s) for cid, s in scores.items()],
                meta={"eval": "capitals", "target": "model-a", "started_at": started},
                commit=f"{n:040d}",
            )
        )
    return dirs


@contextmanager
def served(index: Path) -> Iterator[str]:
    """The viewer over ``index`` at its URL (``http://127.0.0.1:PORT/``) until the block ends."""
    sock = bind(0)
    uv = server(index)
    thread = threading.Thread(
        target=lambda: asyncio.run(uv.serve(sockets=[sock])), name="viewer", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the viewer did not start")
        time.sleep(0.02)
    try:
        yield url_of(sock)
    finally:
        uv.should_exit = True
        thread.join(timeout=30)
        sock.close()
