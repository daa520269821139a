"""AgentV's scoring of its ``tool-trajectory`` grader, for AgentV's files (``rules: agentv``).

AgentV scores the share of expected items it found rather than pass or fail, and its modes
differ from evalrun's in how they pair calls (docs/agents.md, "The tool-trajectory grader"):
``in_order`` gives up on an item at the first call of its name whose arguments differ, ``exact``
compares position by position, ``superset`` pairs greedily, ``subset`` lets one item allow any
number of calls, and an item's ``max_duration_ms`` is an assertion of its own in ``in_order`` and
``exact`` (skipped when the duration is unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalrun.transcripts.trajectory import ArgsRule, Call, ShareVerdict, args_match


def score_agentv(
    mode: str, expected: Sequence[Call], actual: Sequence[Call], rule: ArgsRule
) -> ShareVerdict:
    """``mode``: evalrun's spelling of AgentV's mode (``in-order``, ``exact``, ``superset``,
    ``subset``); ``any-order`` scores ``minimums`` elsewhere (``check_minimums``)."""

    def fits(e: Call, a: Call) -> bool:
        return e.name == a.name and args_match(e.arguments, a.arguments, e.args_mode or rule)

    if mode == "subset":
        return _subset(expected, actual, fits)
    if not expected:
        return ShareVerdict(1.0, "no tool calls expected", [])
    if mode == "superset":
        return _superset(expected, actual, fits)
    if mode == "exact":
        return _exact(expected, actual, fits)
    return _in_order(expected, actual, fits)


def _verdict(checks: list[dict[str, Any]], total: int) -> ShareVerdict:
    held = sum(bool(check["pass"]) for check in checks)
    return ShareVerdict(
        held / total if total else 1.0, "; ".join(c["text"] for c in checks), checks
    )


def _latency(e: Call, a: Call, checks: list[dict[str, Any]]) -> int:
    """An item's duration limit as an assertion; 0 when it counts for nothing (no limit, or a
    duration the agent did not report), else 1."""
    if e.duration_ms is None or a.duration_ms is None:
        return 0
    held = a.duration_ms <= e.duration_ms
    verb = "took" if not held else "completed in"
    checks.append(
        {"text": f"{e.name} {verb} {a.duration_ms:g} ms (max {e.duration_ms:g} ms)", "pass": held}
    )
    return 1


def _in_order(expected: Sequence[Call], actual: Sequence[Call], fits: Any) -> ShareVerdict:
    checks: list[dict[str, Any]] = []
    position = limits = 0
    for i, e in enumerate(expected):
        found = False
        while position < len(actual):
            a = actual[position]
            position += 1
            if a.name != e.name:
                continue
            if fits(e, a):
                checks.append({"text": f"found {e.name} at position {position - 1}", "pass": True})
                limits += _latency(e, a, checks)
                found = True
            else:
                text = f"expected {e.name} at position {i}: found at {position - 1}, args differ"
                checks.append({"text": text, "pass": False})
                found = True  # the item is spent, as in AgentV
            break
        if not found:
            checks.append({"text": f"{e.name} not found in the calls left", "pass": False})
    return _verdict(checks, len(expected) + limits)


def _exact(expected: Sequence[Call], actual: Sequence[Call], fits: Any) -> ShareVerdict:
    checks: list[dict[str, Any]] = []
    if len(actual) != len(expected):
        text = f"expected {len(expected)} tool calls, got {len(actual)}"
        checks.append({"text": text, "pass": False})
    limits = 0
    for i, e in enumerate(expected):
        if i >= len(actual):
            checks.append({"text": f"position {i}: expected {e.name}, got nothing", "pass": False})
        elif fits(e, actual[i]):
            checks.append({"text": f"position {i}: {e.name}", "pass": True})
            limits += _latency(e, actual[i], checks)
        else:
            got = actual[i].name
            text = (
                f"position {i}: {e.name} args differ"
                if got == e.name
                else (f"position {i}: expected {e.name}, got {got}")
            )
            checks.append({"text": text, "pass": False})
    return _verdict(checks, len(expected) + limits)


def _superset(expected: Sequence[Call], actual: Sequence[Call], fits: Any) -> ShareVerdict:
    checks: list[dict[str, Any]] = []
    used: set[int] = set()
    for e in expected:
        j = next((j for j, a in enumerate(actual) if j not in used and fits(e, a)), None)
        if j is None:
            checks.append({"text": f"{e.name} not found", "pass": False})
        else:
            used.add(j)
            checks.append({"text": f"found {e.name} at position {j}", "pass": True})
    return _verdict(checks, len(expected))


def _subset(expected: Sequence[Call], actual: Sequence[Call], fits: Any) -> ShareVerdict:
    if not actual:
        return ShareVerdict(1.0, "no tool calls (trivially a subset)", [])
    checks = [
        {
            "text": f"position {j}: {a.name} is {'' if ok else 'not '}in the allowed set",
            "pass": ok,
        }
        for j, a in enumerate(actual)
        for ok in [any(fits(e, a) for e in expected)]
    ]
    return _verdict(checks, len(actual))
