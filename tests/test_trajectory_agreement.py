"""evalrun's tool-trajectory matcher agrees with LangChain's agentevals on generated trajectories.

agentevals (``create_trajectory_match_evaluator``) is the reference: every mode the two share
must give the same verdict on every pair (docs/agents.md, "Tool trajectories").
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest

from evalrun.transcripts.trajectory import ArgsMode, Call, Mode, match_trajectory

match = pytest.importorskip("agentevals.trajectory.match")

TOOLS = ("search", "read", "write")
#: evalrun's (mode, args) and agentevals' (trajectory_match_mode, tool_args_match_mode) for the
#: same question. agentevals' matcher takes (actual args, expected args) in strict and superset
#: mode and the two swapped in subset mode, so "expected args are a subset of the actual ones"
#: is its ``superset`` there and its ``subset`` here. Its unordered mode tests args both ways,
#: so it shares only the symmetric rules.
SHARED: list[tuple[Mode, ArgsMode, str, str]] = [
    ("exact", "exact", "strict", "exact"),
    ("exact", "ignore", "strict", "ignore"),
    ("exact", "subset", "strict", "superset"),
    ("any-order", "exact", "unordered", "exact"),
    ("any-order", "ignore", "unordered", "ignore"),
    ("superset", "exact", "superset", "exact"),
    ("superset", "ignore", "superset", "ignore"),
    ("superset", "subset", "superset", "superset"),
    ("subset", "exact", "subset", "exact"),
    ("subset", "ignore", "subset", "ignore"),
    ("subset", "subset", "subset", "subset"),
]


def _args(rng: random.Random) -> dict[str, Any]:
    keys = rng.sample(["q", "k", "n"], rng.randint(0, 2))
    return {key: rng.choice([1, 2]) for key in keys}


def _perturb(rng: random.Random, calls: list[Call]) -> list[Call]:
    """A related trajectory: shuffled, shortened, lengthened, renamed or with other args."""
    out = list(calls)
    for _ in range(rng.randint(0, 2)):
        edit = rng.choice(["shuffle", "drop", "add", "rename", "args", "trim_args"])
        if edit == "shuffle":
            rng.shuffle(out)
        elif edit == "drop" and out:
            out.pop(rng.randrange(len(out)))
        elif edit == "add":
            out.insert(rng.randint(0, len(out)), Call(rng.choice(TOOLS), _args(rng)))
        elif edit == "rename" and out:
            i = rng.randrange(len(out))
            out[i] = Call(rng.choice(TOOLS), out[i].arguments)
        elif edit == "args" and out:
            i = rng.randrange(len(out))
            out[i] = Call(out[i].name, _args(rng))
        elif edit == "trim_args" and out:
            i = rng.randrange(len(out))
            kept = dict(list(out[i].arguments.items())[:1])
            out[i] = Call(out[i].name, kept)
    return out


def pairs(count: int, seed: int = 35) -> list[tuple[list[Call], list[Call]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        expected = [Call(rng.choice(TOOLS), _args(rng)) for _ in range(rng.randint(0, 4))]
        out.append((expected, _perturb(rng, expected)))
    return out


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


PAIRS = pairs(400)


def test_the_generated_set_is_varied() -> None:
    """At least 50 pairs, and in each shared mode both verdicts occur (so agreement is not
    agreement on all-pass or all-fail)."""
    assert len(PAIRS) >= 50
    for mode, args, _, _ in SHARED:
        verdicts = {match_trajectory(e, a, mode, args).passed for e, a in PAIRS}
        assert verdicts == {True, False}, (mode, args)


#: Where agentevals pairs calls first-fit: with the one-way subset rule a call can take a partner
#: a later call needed, so its verdict depends on the order of the actual calls in modes that
#: ignore order. evalrun pairs by maximum matching; see test_first_fit_differs_only_by_order.
FIRST_FIT = {("superset", "subset"), ("subset", "subset")}


def _verdict(evaluator: Any, expected: list[Call], actual: list[Call]) -> bool:
    result = evaluator(outputs=_messages(actual), reference_outputs=_messages(expected))
    return bool(result["score"])


@pytest.mark.parametrize(("mode", "args", "their_mode", "their_args"), SHARED)
def test_same_verdict_as_agentevals(
    mode: Mode, args: ArgsMode, their_mode: str, their_args: str
) -> None:
    """Identical verdicts on all 400 pairs; in the two first-fit modes a difference is allowed
    only where agentevals itself passes the same calls in another order."""
    evaluator = match.create_trajectory_match_evaluator(
        trajectory_match_mode=their_mode, tool_args_match_mode=their_args
    )
    differ = []
    for expected, actual in PAIRS:
        ours = match_trajectory(expected, actual, mode, args).passed
        if ours == _verdict(evaluator, expected, actual):
            continue
        if (mode, args) in FIRST_FIT and ours and _passes_reordered(evaluator, expected, actual):
            continue
        differ.append((expected, actual, ours))
    assert not differ, f"{len(differ)} of {len(PAIRS)} differ, first: {differ[0]}"


def _passes_reordered(evaluator: Any, expected: list[Call], actual: list[Call]) -> bool:
    return any(
        _verdict(evaluator, list(order_e), list(order_a))
        for order_e in itertools.permutations(expected)
        for order_a in itertools.permutations(actual)
    )


def test_first_fit_differs_only_by_order() -> None:
    """The pair behind the allowance: the agent made both expected calls, so superset passes.
    agentevals gives the broader expected call the first actual call that fits and fails; with
    the actual calls swapped it passes."""
    expected = [Call("search", {}), Call("search", {"q": 2, "k": 2})]
    actual = [Call("search", {"q": 2, "k": 2}), Call("search", {"q": 1})]
    swapped = actual[::-1]
    evaluator = match.create_trajectory_match_evaluator(
        trajectory_match_mode="superset", tool_args_match_mode="superset"
    )
    assert match_trajectory(expected, actual, "superset", "subset").passed
    assert match_trajectory(expected, swapped, "superset", "subset").passed
    assert not _verdict(evaluator, expected, actual)
    assert _verdict(evaluator, expected, swapped)


def test_disagreements_are_few_and_counted() -> None:
    """The figures docs/agents.md quotes: verdicts compared and how many differ by first-fit."""
    compared = differ = 0
    for mode, args, their_mode, their_args in SHARED:
        evaluator = match.create_trajectory_match_evaluator(
            trajectory_match_mode=their_mode, tool_args_match_mode=their_args
        )
        for expected, actual in PAIRS:
            compared += 1
            ours = match_trajectory(expected, actual, mode, args).passed
            differ += ours != _verdict(evaluator, expected, actual)
    assert (compared, differ) == (4400, 3)
