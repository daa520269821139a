"""evalrun's tool-trajectory matcher agrees with LangChain's agentevals on generated trajectories.

agentevals (``create_trajectory_match_evaluator``) is the reference: every mode the two share
must give the same verdict on every pair (docs/agents.md, "Tool trajectories").
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from evalrun.transcripts.trajectory import ArgsMode, Call, Mode, match_trajectory
from tests.trajectory_pairs import PAIRS

match = pytest.importorskip("agentevals.trajectory.match")

#: agentevals' argument rule -> evalrun's, by agentevals' mode. Its matcher takes (actual args,
#: expected args) in strict and superset mode and the two swapped in subset mode, so "expected
#: args are a subset of the actual ones" is its ``superset`` there and its ``subset`` here
#: (docs/agents.md, "Agreement with agentevals").
THEIR_ARGS: dict[str, dict[str, ArgsMode]] = {
    "strict": {"exact": "exact", "ignore": "ignore", "superset": "subset", "subset": "superset"},
    "superset": {"exact": "exact", "ignore": "ignore", "superset": "subset", "subset": "superset"},
    "subset": {"exact": "exact", "ignore": "ignore", "subset": "subset", "superset": "superset"},
    "unordered": {"exact": "exact", "ignore": "ignore"},
}
OUR_MODE: dict[str, Mode] = {
    "strict": "exact",
    "unordered": "any-order",
    "superset": "superset",
    "subset": "subset",
}
#: agentevals' per-tool overrides tried in every mode: a rule for one tool's calls
OVERRIDES: list[dict[str, str]] = [
    {},
    {"search": "ignore"},
    {"read": "exact", "write": "ignore"},
    {"search": "superset"},
    {"write": "subset", "read": "ignore"},
]
#: Every (agentevals mode, its argument rule, its overrides) evalrun shares: all but the one-way
#: rules in ``unordered``, which agentevals applies in both directions, so its "subset" there
#: asks for equal arguments paired two ways (no evalrun rule says that).
SHARED: list[tuple[str, str, dict[str, str]]] = [
    (their_mode, their_args, overrides)
    for their_mode, rules in THEIR_ARGS.items()
    for their_args in ("exact", "ignore", "superset", "subset")
    if their_args in rules
    for overrides in OVERRIDES
    if all(rule in rules for rule in overrides.values())
]


def ours(
    their_mode: str, their_args: str, overrides: dict[str, str], expected: list[Call]
) -> tuple[Mode, ArgsMode, list[Call]]:
    """The same question in evalrun's terms: an override becomes each expected call's own rule."""
    rules = THEIR_ARGS[their_mode]
    calls = [
        Call(c.name, c.arguments, rules[overrides[c.name]]) if c.name in overrides else c
        for c in expected
    ]
    return OUR_MODE[their_mode], rules[their_args], calls


def _messages(calls: list[Call]) -> list[dict[str, Any]]:
    """One assistant message per call, the shape agentevals reads (OpenAI tool calls)."""
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": c.name, "arguments": json.dumps(c.arguments)}}],
        }
        for c in calls
    ]


#: the default run's share: the edges and the first generated pairs, in the combinations without
#: overrides (agentevals takes some milliseconds a verdict); ``slow`` runs every pair in every
#: combination
FAST_PAIRS = PAIRS[:60]


def test_the_generated_set_is_varied() -> None:
    """At least 50 pairs, and in each shared mode both verdicts occur (so agreement is not
    agreement on all-pass or all-fail)."""
    assert len(PAIRS) >= 50 and len(SHARED) >= 30
    for their_mode, their_args, overrides in SHARED:
        verdicts = set()
        for expected, actual in PAIRS:
            mode, args, calls = ours(their_mode, their_args, overrides, expected)
            verdicts.add(match_trajectory(calls, actual, mode, args).passed)
        assert verdicts == {True, False}, (their_mode, their_args, overrides)


def _one_way(their_mode: str, their_args: str, overrides: dict[str, str]) -> bool:
    """Where agentevals pairs calls first-fit under a one-way rule: a call can take a partner a
    later call needed, so its verdict depends on the order of the calls in modes that ignore
    order. evalrun pairs by maximum matching; see test_first_fit_differs_only_by_order."""
    rules = {their_args, *overrides.values()}
    return their_mode in ("superset", "subset") and bool(rules & {"subset", "superset"})


def _verdict(evaluator: Any, expected: list[Call], actual: list[Call]) -> bool:
    result = evaluator(outputs=_messages(actual), reference_outputs=_messages(expected))
    return bool(result["score"])


def _evaluator(their_mode: str, their_args: str, overrides: dict[str, str]) -> Any:
    return match.create_trajectory_match_evaluator(
        trajectory_match_mode=their_mode,
        tool_args_match_mode=their_args,
        tool_args_match_overrides=overrides or None,
    )


def _compare(
    their_mode: str,
    their_args: str,
    overrides: dict[str, str],
    sample: list[tuple[list[Call], list[Call]]],
) -> tuple[int, list[Any]]:
    """How many verdicts differ by first-fit alone, and the ones that differ otherwise."""
    evaluator = _evaluator(their_mode, their_args, overrides)
    by_order, differ = 0, []
    for expected, actual in sample:
        mode, args, calls = ours(their_mode, their_args, overrides, expected)
        verdict = match_trajectory(calls, actual, mode, args).passed
        if verdict == _verdict(evaluator, expected, actual):
            continue
        if (
            _one_way(their_mode, their_args, overrides)
            and verdict
            and _passes_reordered(evaluator, expected, actual)
        ):
            by_order += 1
            continue
        differ.append((expected, actual, verdict))
    return by_order, differ


def _name(combination: tuple[str, str, dict[str, str]]) -> str:
    mode, args, overrides = combination
    return f"{mode}-{args}-{'+'.join(f'{k}:{v}' for k, v in overrides.items()) or 'none'}"


BASE = [combination for combination in SHARED if not combination[2]]


@pytest.mark.parametrize("combination", BASE, ids=[_name(c) for c in BASE])
def test_same_verdict_as_agentevals(combination: tuple[str, str, dict[str, str]]) -> None:
    """Identical verdicts on the first 60 pairs; where agentevals pairs first-fit under a
    one-way rule, a difference is allowed only where agentevals itself passes the same calls in
    another order."""
    _, differ = _compare(*combination, FAST_PAIRS)
    assert not differ, f"{len(differ)} of {len(FAST_PAIRS)} differ, first: {differ[0]}"


@pytest.mark.slow
def test_same_verdict_as_agentevals_everywhere() -> None:
    """Every pair in every shared combination, overrides too, with the figures docs/agents.md
    quotes: combinations, verdicts compared, and how many differ by first-fit alone."""
    by_order = 0
    for combination in SHARED:
        differ_by_order, differ = _compare(*combination, PAIRS)
        assert not differ, f"{_name(combination)}: {len(differ)} differ, first: {differ[0]}"
        by_order += differ_by_order
    assert (len(SHARED), len(SHARED) * len(PAIRS), by_order) == (66, 26400, 48)


def _passes_reordered(evaluator: Any, expected: list[Call], actual: list[Call]) -> bool:
    """agentevals passes the same actual calls in some other order."""
    return any(
        _verdict(evaluator, expected, list(order)) for order in itertools.permutations(actual)
    )


def test_first_fit_differs_only_by_order() -> None:
    """The pair behind the allowance: the agent made both expected calls, so superset passes.
    agentevals gives the broader expected call the first actual call that fits and fails; with
    the actual calls swapped it passes."""
    expected = [Call("search", {}), Call("search", {"q": 2, "k": 2})]
    actual = [Call("search", {"q": 2, "k": 2}), Call("search", {"q": 1})]
    swapped = actual[::-1]
    evaluator = _evaluator("superset", "superset", {})
    assert match_trajectory(expected, actual, "superset", "subset").passed
    assert match_trajectory(expected, swapped, "superset", "subset").passed
    assert not _verdict(evaluator, expected, actual)
    assert _verdict(evaluator, expected, swapped)
