"""Tool-trajectory matching: did the agent call the expected tools, in the way the mode asks?

Pure functions over (name, arguments) pairs, so a grader kind, a test or a script can use them
alike. The modes and argument rules are described in docs/agents.md ("Tool trajectories").
Matching that ignores order pairs calls by a maximum bipartite matching, so a verdict never
depends on which of two fitting calls was tried first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["exact", "in-order", "any-order", "subset", "superset"]
ArgsMode = Literal["exact", "subset", "superset", "ignore"]
MODES: tuple[Mode, ...] = ("exact", "in-order", "any-order", "subset", "superset")
ARGS_MODES: tuple[ArgsMode, ...] = ("exact", "subset", "superset", "ignore")
#: an argument rule, or the fields (dot paths) that alone are compared
ArgsRule = ArgsMode | tuple[str, ...]


@dataclass(frozen=True)
class Call:
    """A tool call as the matcher sees it: its name and its arguments. On an expected call,
    ``args_mode`` overrides the matcher's argument rule for that call alone."""

    name: str
    arguments: Any = None
    args_mode: ArgsRule | None = None
    #: expected call: the actual call took at most this long (unknown durations fit, as in
    #: AgentV); actual call: how long it took, None when the agent did not say
    duration_ms: float | None = None


@dataclass
class Verdict:
    """``missing``: expected calls with no partner; ``unexpected``: actual calls the mode does
    not allow (indexes into the lists given)."""

    passed: bool
    reason: str
    missing: list[int] = field(default_factory=list)
    unexpected: list[int] = field(default_factory=list)


def args_match(expected: Any, actual: Any, mode: ArgsRule) -> bool:
    """Fields (a tuple): each field the expected arguments hold has an equal value in the actual
    ones (AgentV's field list; a field absent from the expected arguments is not compared).
    ``subset``: every key of the expected arguments is in the actual ones with an equal value
    (no expected arguments, None, is the empty subset; other non-objects must be equal).
    ``superset``: the other way round, every actual key is an expected one with an equal value
    (no actual arguments, None, is the empty subset)."""
    if mode == "ignore" or (mode == "subset" and expected is None):
        return True
    if isinstance(mode, tuple):
        return all(
            _field(expected, path) == (_field(actual, path))
            for path in mode
            if _field(expected, path) is not _ABSENT
        )
    if mode == "superset" and actual is None:
        return True
    if mode == "superset":
        expected, actual = actual, expected
    if mode in ("subset", "superset") and isinstance(expected, dict) and isinstance(actual, dict):
        return all(key in actual and actual[key] == value for key, value in expected.items())
    return bool(expected == actual)


_ABSENT = object()


def within_limit(limit: float | None, took: float | None) -> bool:
    """A call is within an expected call's duration limit unless both are known and it took
    longer (an unreported duration is not held against the agent, as in AgentV)."""
    return limit is None or took is None or took <= limit


def _field(value: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def match_trajectory(
    expected: Sequence[Call],
    actual: Sequence[Call],
    mode: Mode = "exact",
    args: ArgsRule = "exact",
) -> Verdict:
    def fits(e: Call, a: Call) -> bool:
        return (
            e.name == a.name
            and args_match(e.arguments, a.arguments, e.args_mode or args)
            and within_limit(e.duration_ms, a.duration_ms)
        )

    if mode == "exact":
        return _exact(expected, actual, fits)
    if mode == "in-order":
        return _in_order(expected, actual, fits)
    pairs = _matching(expected, actual, fits)
    missing = [i for i in range(len(expected)) if i not in pairs]
    paired = set(pairs.values())
    extra = [j for j in range(len(actual)) if j not in paired]
    if mode == "any-order":
        passed = not missing and not extra
    elif mode == "superset":
        passed, extra = not missing, []
    else:  # subset: every actual call is one of the expected ones
        passed, missing = not extra, []
    return Verdict(passed, _reason(expected, actual, missing, extra, mode), missing, extra)


@dataclass
class ShareVerdict:
    """A scored verdict: the share of its assertions that held (AgentV's ``minimums`` and its
    ``tool-trajectory`` scoring), each assertion's text and verdict."""

    score: float
    reason: str
    checks: list[dict[str, Any]]


def check_minimums(minimums: dict[str, int], actual: Sequence[Any]) -> ShareVerdict:
    """``actual``: anything with a ``name`` (calls). Each tool is one assertion, held when it was
    called at least its minimum number of times (names compared exactly)."""
    counts: dict[str, int] = {}
    for call in actual:
        counts[call.name] = counts.get(call.name, 0) + 1
    texts = [
        f"{tool}: called {counts.get(tool, 0)} times (required >= {least})"
        for tool, least in minimums.items()
    ]
    held = [counts.get(tool, 0) >= least for tool, least in minimums.items()]
    checks: list[dict[str, Any]] = [
        {"text": t, "pass": h} for t, h in zip(texts, held, strict=True)
    ]
    return ShareVerdict(sum(held) / len(held), "; ".join(texts), checks)


def _exact(
    expected: Sequence[Call], actual: Sequence[Call], fits: Callable[[Call, Call], bool]
) -> Verdict:
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if not fits(e, a):
            return Verdict(False, f"call {i + 1}: expected {_show(e)}, got {_show(a)}", [i], [i])
    if len(expected) != len(actual):
        n = min(len(expected), len(actual))
        missing = list(range(n, len(expected)))
        extra = list(range(n, len(actual)))
        return Verdict(False, _reason(expected, actual, missing, extra, "exact"), missing, extra)
    return Verdict(True, f"all {len(expected)} calls as expected, in order")


def _in_order(
    expected: Sequence[Call], actual: Sequence[Call], fits: Callable[[Call, Call], bool]
) -> Verdict:
    """Expected is a subsequence of actual: each expected call takes the earliest actual call
    after the previous one's that fits, which finds a subsequence whenever there is one."""
    position = 0
    for i, e in enumerate(expected):
        while position < len(actual) and not fits(e, actual[position]):
            position += 1
        if position == len(actual):
            missing = list(range(i, len(expected)))
            return Verdict(False, _reason(expected, actual, missing, [], "in-order"), missing)
        position += 1
    return Verdict(True, f"all {len(expected)} expected calls, in order")


def _matching(
    expected: Sequence[Call], actual: Sequence[Call], fits: Callable[[Call, Call], bool]
) -> dict[int, int]:
    """A maximum matching of expected to actual calls (augmenting paths): expected index to
    actual index."""
    edges = [[j for j, a in enumerate(actual) if fits(e, a)] for e in expected]
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _reason(
    expected: Sequence[Call],
    actual: Sequence[Call],
    missing: list[int],
    extra: list[int],
    mode: str,
) -> str:
    if not missing and not extra:
        return f"{mode}: all {len(expected)} expected calls matched"
    parts = []
    if missing:
        parts.append("missing " + ", ".join(_show(expected[i]) for i in missing))
    if extra:
        parts.append("unexpected " + ", ".join(_show(actual[j]) for j in extra))
    return f"{mode}: " + "; ".join(parts)


def _show(call: Call) -> str:
    return call.name if call.arguments in (None, {}) else f"{call.name}({call.arguments})"
