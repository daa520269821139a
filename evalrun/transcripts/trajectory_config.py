"""The ``tool-trajectory`` grader's options, read once: when the file loads (so a mistake is an
error at the grader's line, before anything runs) and again by the check itself.

evalrun's spellings and AgentV's are both read (docs/agents.md, "The tool-trajectory grader").
The one trap is the argument rule's direction: evalrun's ``args`` names it from the expected
call's side (``subset``: the expected arguments are a subset of the actual ones), AgentV's
``args_match`` (and agentevals) from the actual call's side, so their ``superset`` is our
``subset`` and the other way round. Both land on evalrun's rule here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalrun.transcripts.trajectory import ARGS_MODES, MODES, ArgsMode, ArgsRule, Call, Mode

#: AgentV's ``args_match`` (named from the actual call's side) -> evalrun's ``args``
_AGENTV_ARGS: dict[str, ArgsMode] = {
    "exact": "exact",
    "superset": "subset",
    "subset": "superset",
    "ignore": "ignore",
}
_KEYS = ("mode", "args", "args_match", "argsMatch", "expected", "minimums", "rules")
_ITEM_KEYS = ("tool", "args", "args_mode", "args_match", "argsMatch", "max_duration_ms")


@dataclass(frozen=True)
class TrajectoryConfig:
    """``minimums`` (AgentV's ``any_order`` form): calls per tool name, at least."""

    mode: Mode
    args: ArgsRule
    expected: list[Call] = field(default_factory=list)
    minimums: dict[str, int] = field(default_factory=dict)
    #: ``evalrun``: pass or fail by the matcher; ``agentv``: AgentV's share of items found
    #: (set for AgentV's files, docs/agents.md)
    rules: str = "evalrun"


def read_trajectory_config(config: dict[str, Any]) -> TrajectoryConfig:
    """ValueError naming the key when ``config`` cannot be read."""
    unknown = [key for key in config if key not in _KEYS]
    if unknown:
        raise ValueError(
            f"tool-trajectory: unknown option {unknown[0]!r} (known: {', '.join(_KEYS)})"
        )
    # AgentV spells the modes with underscores (any_order); evalrun with hyphens
    mode = str(config.get("mode", "exact")).replace("_", "-")
    if mode not in MODES:
        raise ValueError(f"tool-trajectory: mode must be one of {', '.join(MODES)}, got {mode!r}")
    args = _args_rule(config, "tool-trajectory") or "exact"
    minimums = _minimums(config.get("minimums"))
    if minimums and mode != "any-order":
        raise ValueError("tool-trajectory: minimums go with mode any-order (AgentV's any_order)")
    rules = config.get("rules", "evalrun")
    if rules not in ("evalrun", "agentv"):
        raise ValueError(f"tool-trajectory: rules must be evalrun or agentv, got {rules!r}")
    expected = config.get("expected")
    if expected is None and (minimums or (rules == "agentv" and mode == "any-order")):
        expected = []  # AgentV's any_order reads minimums alone
    if not isinstance(expected, list):
        raise ValueError("tool-trajectory: config.expected must be a list of {tool, args?}")
    calls = [_expected_call(item, i, strict=rules == "evalrun") for i, item in enumerate(expected)]
    if minimums and calls:
        raise ValueError("tool-trajectory: give either minimums or expected, not both")
    return TrajectoryConfig(mode, args, calls, minimums, rules)  # type: ignore[arg-type]


def _args_rule(options: dict[str, Any], where: str) -> ArgsRule | None:
    """evalrun's ``args`` (or an item's ``args_mode``) or AgentV's ``args_match``, mapped; a list
    of field names (either spelling) compares those fields alone."""
    ours_key = "args" if where == "tool-trajectory" else "args_mode"
    ours = options.get(ours_key)
    theirs_key = next((k for k in ("args_match", "argsMatch") if k in options), None)
    if ours is not None and theirs_key is not None:
        raise ValueError(f"{where}: give {ours_key} or {theirs_key}, not both")
    if isinstance(ours, list) and _is_fields(ours):
        return tuple(ours)
    if ours is not None:
        if not isinstance(ours, str) or ours not in ARGS_MODES:
            raise ValueError(
                f"{where}: {ours_key} must be one of {', '.join(ARGS_MODES)}, got {ours!r}"
            )
        return ours  # type: ignore[no-any-return]
    if theirs_key is None:
        return None
    theirs = options[theirs_key]
    if isinstance(theirs, list) and _is_fields(theirs):
        return tuple(theirs)
    if not isinstance(theirs, str) or theirs not in _AGENTV_ARGS:
        raise ValueError(
            f"{where}: {theirs_key} must be one of {', '.join(_AGENTV_ARGS)} or a list of "
            f"field names, got {theirs!r}"
        )
    return _AGENTV_ARGS[theirs]


def _is_fields(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str) and v.strip() for v in value)
    )


def _minimums(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 0
        for k, n in value.items()
    ):
        raise ValueError("tool-trajectory: minimums must map tool names to counts >= 0")
    return dict(value)


def _expected_call(item: Any, index: int, *, strict: bool) -> Call:
    """``strict``: other keys are refused; AgentV's rules ignore them, as AgentV does."""
    where = f"tool-trajectory: expected[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
        raise ValueError(f"{where} must be {{tool, args?}} with the tool's name")
    unknown = [key for key in item if key not in _ITEM_KEYS]
    if unknown and strict:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(_ITEM_KEYS)})")
    rule = _args_rule(item, where)
    arguments = item.get("args")
    if arguments is None or arguments == "any":  # none given, or AgentV's "any": name alone
        arguments, rule = None, "ignore"
    limit = item.get("max_duration_ms")
    if limit is not None and (
        not isinstance(limit, (int, float)) or isinstance(limit, bool) or limit < 0
    ):
        raise ValueError(f"{where}: max_duration_ms must be a number >= 0, got {limit!r}")
    return Call(item["tool"], arguments, rule, limit)
