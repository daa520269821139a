"""The options of the checks on an agent's run, read without a run: validation refuses a file
whose options these checks could not read, at the grader's line (docs/agents.md), rather than
every case erroring at run time. Each check reads them with the same functions."""

from __future__ import annotations

from typing import Any

from evalrun.transcripts.metrics import read_limits
from evalrun.transcripts.skills import judge_skills, read_expectation, read_trigger
from evalrun.transcripts.tool_assertions import ASSERTIONS
from evalrun.transcripts.trajectory_config import read_trajectory_config


def option_problem(type_: str, value: Any, config: dict[str, Any], negate: bool) -> str | None:
    """Why a check of ``type_`` cannot read these options, or None (also for other types)."""
    given = value if value is not None else config.get("value")
    try:
        if type_ == "tool-trajectory":
            read_trajectory_config(config)
        elif type_ == "execution-metrics":
            read_limits(config)
        elif type_ == "skill-used":
            judge_skills(read_expectation(given), [], forbidden=negate)
        elif type_ == "skill-trigger":
            read_trigger(config, negate)
        elif type_ in ASSERTIONS:
            ASSERTIONS[type_](given, [], inverse=negate)
        elif type_ == "trajectory:goal-success":
            read_goal(given, negate)
        if type_.startswith("trajectory:") and config.get("no_transcript", "error") not in (
            "error",
            "fail",
        ):
            raise ValueError(f"{type_}: no_transcript must be error or fail")
    except ValueError as exc:
        return str(exc)
    return None


def read_goal(value: Any, negate: bool) -> str:
    """``trajectory:goal-success``'s goal: a text, or ``{goal: text}`` (as AgentV takes it)."""
    if negate:
        raise ValueError(
            "not-trajectory:goal-success is not supported: evalrun's judge graders do not negate"
        )
    goal = value.get("goal") if isinstance(value, dict) else value
    if not isinstance(goal, str) or not goal.strip():
        raise ValueError("trajectory:goal-success: value must be the goal, or {goal: text}")
    return goal.strip()
