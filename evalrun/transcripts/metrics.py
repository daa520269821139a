"""Execution metrics: limits on what an agent's run cost (tool calls, model turns, tokens, money,
time) and its balance of reading to acting, scored as AgentV's ``execution-metrics`` scores them
(docs/agents.md, "execution-metrics").

Each limit set is one assertion; the score is the share that hold. A limit on a figure the
transcript does not carry is an assertion that fails, never one that is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalrun.transcripts.model import Transcript

#: the options, in the order their assertions are listed; AgentV also reads them camelCased
LIMITS = (
    "max_tool_calls",
    "max_llm_calls",
    "max_tokens",
    "max_cost_usd",
    "max_duration_ms",
    "target_exploration_ratio",
)
OPTIONS = (*LIMITS, "exploration_tolerance")
DEFAULT_EXPLORATION_TOLERANCE = 0.2
#: tools that only look (AgentV's default list of read-only tools, matched by exact name)
EXPLORATION_TOOLS = frozenset(
    ("read", "grep", "glob", "search", "list", "Read", "Grep", "Glob", "WebSearch", "WebFetch")
)


@dataclass
class MetricsVerdict:
    """``assertions``: one ``{text, pass}`` (the grader protocol's check) per limit set; ``actual``: the figures measured."""

    score: float
    assertions: list[dict[str, Any]] = field(default_factory=list)
    actual: dict[str, float] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        return "; ".join(a["text"] for a in self.assertions)


def read_limits(config: Mapping[str, Any]) -> dict[str, float]:
    """The limits a grader's config sets, by their snake_case names; ValueError naming the key
    of a value that is not a non-negative finite number, or when no limit is set."""
    limits: dict[str, float] = {}
    for name in OPTIONS:
        camel = name.split("_")[0] + "".join(p.title() for p in name.split("_")[1:])
        key = name if name in config else camel if camel in config else None
        if key is None:
            continue
        value = config[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValueError(f"execution-metrics: {key} must be a number >= 0, got {value!r}")
        limits[name] = float(value)
    if not any(name in limits for name in LIMITS):
        raise ValueError(f"execution-metrics: set at least one of {', '.join(LIMITS)}")
    return limits


def exploration_ratio(transcript: Transcript) -> float | None:
    """The share of tool calls made by read-only tools; None without tool calls."""
    calls = transcript.tool_calls
    if not calls:
        return None
    return sum(call.name in EXPLORATION_TOOLS for call in calls) / len(calls)


def check_metrics(limits: Mapping[str, float], transcript: Transcript) -> MetricsVerdict:
    """Each limit in ``limits`` (from ``read_limits``) against the transcript's figures."""
    verdict = MetricsVerdict(score=0.0)

    def at_most(key: str, label: str, value: float | None, shown: str = "{}") -> None:
        if key not in limits:
            return
        if value is None:
            verdict.assertions.append({"text": f"{label}: not reported", "pass": False})
            return
        verdict.actual[key.removeprefix("max_")] = value
        limit = limits[key]
        ok = value <= limit
        text = f"{label} {shown.format(value)} {'<=' if ok else '>'} {shown.format(limit)}"
        verdict.assertions.append({"text": text, "pass": ok})

    summary = transcript.summary()
    usage = transcript.usage
    at_most("max_tool_calls", "tool calls", len(transcript.tool_calls), "{:g}")
    at_most("max_llm_calls", "model turns", summary["llm_call_count"], "{:g}")
    tokens = usage.input_tokens + usage.output_tokens if usage else None
    at_most("max_tokens", "tokens", tokens, "{:g}")
    at_most("max_cost_usd", "cost", transcript.cost_usd, "${:.4f}")
    at_most("max_duration_ms", "duration", transcript.duration_ms, "{:g} ms")
    if "target_exploration_ratio" in limits:
        target = limits["target_exploration_ratio"]
        tolerance = limits.get("exploration_tolerance", DEFAULT_EXPLORATION_TOLERANCE)
        ratio = exploration_ratio(transcript)
        if ratio is None:
            verdict.assertions.append(
                {"text": "exploration ratio: no tool calls to measure", "pass": False}
            )
        else:
            verdict.actual["exploration_ratio"] = ratio
            ok = abs(ratio - target) <= tolerance
            where = "within" if ok else "outside"
            text = f"exploration ratio {ratio:.2f} {where} {target:g} ± {tolerance:g}"
            verdict.assertions.append({"text": text, "pass": ok})
    passed = sum(a["pass"] for a in verdict.assertions)
    verdict.score = passed / len(verdict.assertions)
    return verdict
