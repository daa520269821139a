"""evalrun's tool-trajectory matcher against DeepEval's ToolCorrectnessMetric on the shared pairs.

DeepEval (``deepeval``, not in any extra: it is heavy) scores tool calls in code when no
``available_tools`` are given, so no judge is called; its judge is a stand-in that fails the
test if DeepEval ever calls it. A verdict is DeepEval's score reaching 1. Install it by hand to
run this: ``pip install deepeval==4.3.1`` (docs/agents.md, "Agreement with DeepEval").
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from evalrun.transcripts.trajectory import ArgsMode, Call, Mode, match_trajectory
from tests.trajectory_pairs import PAIRS

pytestmark = pytest.mark.slow

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
deepeval_metrics = pytest.importorskip("deepeval.metrics")
from deepeval.models import DeepEvalBaseLLM  # noqa: E402
from deepeval.test_case import LLMTestCase, ToolCall, ToolCallParams  # noqa: E402


class NoJudge(DeepEvalBaseLLM):  # type: ignore[misc]
    """DeepEval wants a model object; this one refuses every call."""

    def __init__(self) -> None:
        super().__init__("no-judge")

    def load_model(self) -> None:
        return None

    def generate(self, prompt: str, schema: Any = None) -> Any:
        raise AssertionError("ToolCorrectnessMetric called its judge")

    async def a_generate(self, prompt: str, schema: Any = None) -> Any:
        raise AssertionError("ToolCorrectnessMetric called its judge")

    def get_model_name(self) -> str:
        return "no-judge"


#: DeepEval's options -> evalrun's (mode, args): exact match compares names (and arguments when
#: asked) position by position; ordering scores the longest common subsequence, so a score of 1
#: is "expected calls in this order, others between"; the default pairs each expected call with
#: a called one, others allowed.
SHARED: list[tuple[bool, bool, bool, Mode, ArgsMode]] = [
    # (should_exact_match, should_consider_ordering, compare arguments, mode, args)
    (True, False, False, "exact", "ignore"),
    (True, False, True, "exact", "exact"),
    (False, True, False, "in-order", "ignore"),
    (False, True, True, "in-order", "exact"),
    (False, False, False, "superset", "ignore"),
    (False, False, True, "superset", "exact"),
]


def _tools(calls: list[Call]) -> list[Any]:
    return [ToolCall(name=c.name, input_parameters=c.arguments) for c in calls]


def _repeats(calls: list[Call]) -> bool:
    """Two identical calls: DeepEval's default mode keeps the called tools it has paired in a
    set, so a second identical call counts as paired already and the expected call that needed
    it goes unmatched (its score stays below 1)."""
    return any(calls[i] == calls[j] for i in range(len(calls)) for j in range(i))


@pytest.mark.parametrize(
    ("exact", "ordering", "with_args", "mode", "args"),
    SHARED,
    ids=[f"{m}-{a}" for *_, m, a in SHARED],
)
def test_same_verdict_as_deepeval(
    exact: bool, ordering: bool, with_args: bool, mode: Mode, args: ArgsMode
) -> None:
    """Every pair: identical verdicts, except where evalrun passes and (a) in the default mode the
    agent repeated an identical call (DeepEval's set, above), or (b) no call was expected and the
    agent made some: DeepEval scores an empty expectation 0 unless nothing was called, while in
    evalrun's in-order and superset modes an empty expectation holds whatever was called (its
    exact, any-order and subset modes are the ones that forbid other calls)."""
    metric = deepeval_metrics.ToolCorrectnessMetric(
        threshold=1.0,
        async_mode=False,
        model=NoJudge(),
        should_exact_match=exact,
        should_consider_ordering=ordering,
        evaluation_params=[ToolCallParams.INPUT_PARAMETERS] if with_args else [],
    )
    differ, by_repeats, by_empty = [], 0, 0
    for expected, actual in PAIRS:
        ours = match_trajectory(expected, actual, mode, args).passed
        case = LLMTestCase(
            input="task",
            actual_output="answer",
            tools_called=_tools(actual),
            expected_tools=_tools(expected),
        )
        theirs = metric.measure(case, _show_indicator=False) >= 1.0
        if ours == theirs:
            continue
        if not exact and not ordering and ours and _repeats(actual):
            by_repeats += 1
            continue
        if not exact and not expected and actual and ours:
            by_empty += 1
            continue
        differ.append((expected, actual, ours))
    assert not differ, f"{len(differ)} of {len(PAIRS)} differ, first: {differ[0]}"
    print(f"{mode}/{args}: {len(PAIRS)} pairs, differ: {by_repeats} repeats, {by_empty} empty")


def test_repeated_identical_calls_behind_the_allowance() -> None:
    """The agent made both expected calls; DeepEval's default mode pairs the first and then
    takes the second, identical one as paired already, so it scores 0.5."""
    call = Call("read", {"k": 1})
    metric = deepeval_metrics.ToolCorrectnessMetric(
        threshold=1.0, async_mode=False, model=NoJudge()
    )
    case = LLMTestCase(
        input="task",
        actual_output="answer",
        tools_called=_tools([call, call]),
        expected_tools=_tools([call, call]),
    )
    assert metric.measure(case, _show_indicator=False) == 0.5
    assert match_trajectory([call, call], [call, call], "superset", "ignore").passed
