"""What the viewer's app reads, and keeps between requests: runs looked up in the index, their
bundles scanned (``bundles.py``) and the last comparisons, so paging through a page or a
comparison does not compute it again (docs/viewer.md).

A run the index does not hold, or whose bundle is gone, is a :class:`Problem`: an error status
and one sentence for the page to show.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrun.errors import EvalrunError
from evalrun.reporters.bundle_view import BundleNotFound, BundleView
from evalrun.reporters.compare import CaseScores
from evalrun.results.index import IndexedRun
from evalrun.viewer import catalog, paired
from evalrun.viewer.bundles import BundleCache, stamp

#: How many comparisons are kept, so paging through one does not compute it again.
KEPT_COMPARISONS = 4


class Problem(EvalrunError):
    """A request the viewer answers with an error status and one sentence."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Comparison:
    """Runs aligned by case (regressions first) and each later run paired with the first."""

    rows: list[paired.Row]
    pairings: list[paired.Pairing]


@dataclass
class Viewer:
    """What the app reads: the index, the bundles scanned so far, the last comparisons."""

    index: Path
    bundles: BundleCache = field(default_factory=BundleCache)
    comparisons: OrderedDict[tuple[tuple[str, Any], ...], Comparison] = field(
        default_factory=OrderedDict
    )
    #: requests are answered in a thread pool: one comparison cache update at a time
    lock: threading.Lock = field(default_factory=threading.Lock)

    def compare(self, runs: list[IndexedRun]) -> Comparison:
        dirs = [self.bundle_dir(run) for run in runs]
        key = tuple((str(d), stamp(d)) for d in dirs)
        with self.lock:
            kept = self.comparisons.get(key)
            if kept is not None:
                self.comparisons.move_to_end(key)
                return kept
        scores = [self.scores(run) for run in runs]
        found = Comparison(
            rows=paired.aligned_rows(scores),
            pairings=[paired.pair(scores[0], other) for other in scores[1:]],
        )
        with self.lock:
            self.comparisons[key] = found
            while len(self.comparisons) > KEPT_COMPARISONS:
                self.comparisons.popitem(last=False)
        return found

    def run(self, run_id: int) -> IndexedRun:
        run = catalog.find_run(self.index, run_id)
        if run is None:
            raise Problem(404, f"no run {run_id} in the index {self.index}")
        return run

    def bundle_dir(self, run: IndexedRun) -> Path:
        path = Path(run.bundle)
        if not path.is_dir():
            raise Problem(410, f"run {run.id}: its bundle {run.bundle} is gone")
        return path

    def view(self, run: IndexedRun) -> BundleView:
        try:
            return self.bundles.view(self.bundle_dir(run))
        except BundleNotFound:
            raise Problem(410, f"run {run.id}: {run.bundle} is not a run bundle any more") from None

    def scores(self, run: IndexedRun) -> dict[str, CaseScores]:
        try:
            return self.bundles.scores(self.bundle_dir(run))
        except BundleNotFound:
            raise Problem(410, f"run {run.id}: {run.bundle} is not a run bundle any more") from None
