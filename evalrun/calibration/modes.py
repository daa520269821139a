"""Judge modes for ``evalrun calibrate --mode``: the same labelled cases judged once per mode, so
the agreement of per-item and batched judging can be read side by side (docs/judges.md,
"Comparing judge modes")."""

from __future__ import annotations

from dataclasses import replace

from evalrun.spec.loader import LoadedEval
from evalrun.spec.models import GraderSpec, TestCase, Turn

#: the values of ``config.mode`` (docs/contextual-precision.md, "Judge modes")
JUDGE_MODES = ("per-item", "batched")
#: the grader kinds that read ``config.mode``
MODE_KINDS = ("contextual-precision", "contextual-recall")


def _graders(graders: list[GraderSpec], mode: str) -> list[GraderSpec]:
    return [
        g.model_copy(update={"config": {**g.config, "mode": mode}}) if g.type in MODE_KINDS else g
        for g in graders
    ]


def _turn(turn: Turn, mode: str) -> Turn:
    return turn.model_copy(update={"graders": _graders(turn.graders, mode)})


def _case(case: TestCase, mode: str) -> TestCase:
    turns = [_turn(t, mode) for t in case.turns] if case.turns else case.turns
    return case.model_copy(update={"graders": _graders(case.graders, mode), "turns": turns})


def mode_graders(loaded: LoadedEval) -> list[str]:
    """The names (or kinds) of the graders a judge mode changes, in the file and its tests."""
    cases = list(loaded.tests)
    found = [*loaded.spec.graders, *(g for c in cases for g in c.graders)]
    found += [g for c in cases for t in c.turns or [] for g in t.graders]
    return [g.name or g.type for g in found if g.type in MODE_KINDS]


def with_judge_mode(loaded: LoadedEval, mode: str) -> LoadedEval:
    """A copy of the eval whose RAG graders judge in ``mode``, wherever they are declared."""
    if mode not in JUDGE_MODES:
        raise ValueError(f"--mode must be one of {', '.join(JUDGE_MODES)}, not {mode!r}")
    spec = loaded.spec.model_copy(update={"graders": _graders(loaded.spec.graders, mode)})
    return replace(loaded, spec=spec, tests=[_case(c, mode) for c in loaded.tests])
