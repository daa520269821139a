"""The Python API: ``evalrun.run`` runs an eval file, or an eval built in Python, through the
same code path as ``evalrun run`` and returns what its bundle holds (docs/python-api.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrun.errors import ExitCode
from evalrun.results.models import CaseResult
from evalrun.results.reader import iter_results
from evalrun.results.summary import compute_stats, latest_results
from evalrun.session import (
    EvalError,
    NothingToRun,
    RunSettings,
    execute,
    load_problem,
    loaded_notes,
    prepare,
    write_reports,
)
from evalrun.spec.loader import EvalFileError, LoadedEval, build_eval, load_eval
from evalrun.spec.models import EvalFile as Eval
from evalrun.spec.models import GraderSpec as Grader
from evalrun.spec.models import TestCase as Case

__all__ = ["Case", "Eval", "EvalError", "Grader", "RunOutcome", "run"]


@dataclass(frozen=True)
class RunOutcome:
    """A finished run, read back from its bundle (docs/results.md) by the one bundle reader."""

    #: the run bundle folder; None when ``rerun_failed`` found nothing to run
    bundle: Path | None
    #: the command line's exit code for the same run (docs/results.md, "Exit codes")
    exit_code: int
    #: results per status, and ``total``
    counts: dict[str, int]
    #: the mean case score (scored cases only), None when no case has a score
    mean_score: float | None
    #: one result per case and repeat, in the order they finished (the last line of a case wins)
    cases: list[CaseResult]
    #: what the command line would have printed on stderr (deprecations, sandbox notes)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every gate held (exit code 0)."""
        return self.exit_code == ExitCode.OK

    @classmethod
    def read(cls, bundle: Path, exit_code: int, notes: list[str]) -> RunOutcome:
        cases = read_cases(bundle)
        stats = compute_stats(cases)
        return cls(bundle, exit_code, stats.counts.to_dict(), stats.mean_score, cases, notes)


def read_cases(bundle: Path) -> list[CaseResult]:
    """The bundle's results, the last line of each case and repeat winning (docs/results.md)."""
    return latest_results(iter_results(bundle))


def run(
    eval: str | os.PathLike[str] | Eval,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    name: str = "python-eval",
    **options: Any,
) -> RunOutcome:
    """Run an eval and return its outcome; a run whose gates fail still returns (see
    ``exit_code``).

    ``eval`` is a path to an eval file, or an :class:`Eval` built in Python, whose relative
    paths resolve from ``base_dir`` (required) and whose bundle is named after ``name``.
    ``options`` are the run command's options, spelled as Python names (``workers=2``,
    ``filter=["fr*"]``, ``max_errors=1``, ``limit=10``) with its defaults and limits.

    Raises :class:`EvalError` when the run cannot start: a bad option, a bad eval, an unknown
    target, an occupied bundle folder; its message is what the command line prints.
    """
    settings = RunSettings.checked(**options)
    notes: list[str] = []
    loaded = _loaded(eval, base_dir, name)
    loaded_notes(loaded, notes.append)
    try:
        prepared = prepare(loaded, settings, notes.append)
    except NothingToRun as exc:
        notes.append(str(exc))
        return RunOutcome(None, 0, compute_stats([]).counts.to_dict(), None, [], notes)
    finished = execute(prepared, notes.append)
    exit_code = write_reports(finished, prepared.options.report_formats, notes.append)
    return RunOutcome.read(finished.out, exit_code, notes)


def _loaded(eval: str | os.PathLike[str] | Eval, base_dir: Any, name: str) -> LoadedEval:
    try:
        if isinstance(eval, Eval):
            if base_dir is None:
                raise EvalError(["a built eval needs base_dir: the folder its paths resolve from"])
            return build_eval(eval, Path(base_dir), name)
        return load_eval(Path(eval))
    except EvalFileError as exc:
        raise EvalError([load_problem(exc)]) from None
