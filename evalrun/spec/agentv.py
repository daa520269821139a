"""AgentV 4.x spellings mapped onto evalrun's eval-file keys, before validation.

Renames keep the line map in step, so an error in an AgentV file still names its line. Each
AgentV-only spelling also leaves a deprecation note naming what AgentV calls it now.
"""

from __future__ import annotations

from typing import Any

from evalrun.yamlsource import LineMap

#: (path, message) pairs: a key that loads but that AgentV has renamed.
Notes = list[tuple[tuple[Any, ...], str]]

_FILE_KEYS = {
    "eval_cases": ("tests", "tests"),
    "evalcases": ("tests", "tests"),
    "assertions": ("graders", "assert"),
    "evaluators": ("graders", "assert"),
}
#: old key -> (evalrun key, AgentV's current name or None when AgentV has no rename to point at)
_CASE_KEYS = {
    "assertions": ("graders", "assert"),
    "evaluators": ("graders", "assert"),
    "expected_outcome": ("criteria", "assert"),
    "input_messages": ("input", "vars.input with prompts: ['{{ input }}']"),
    "expected_messages": ("expected_output", "vars.expected_output"),
    "expectedOutput": ("expected_output", "vars.expected_output"),
}
_SCRIPT_TYPES = ("code-grader", "code-judge")
_RUBRIC_TYPES = ("llm-grader", "llm-judge")


def rename_key(
    data: dict[str, Any], old: str, new: str, path: tuple[Any, ...], lines: LineMap
) -> bool:
    """Move ``data[old]`` to ``data[new]`` with its lines; False when there was nothing to do."""
    if old not in data or new in data:
        return False
    data[new] = data.pop(old)
    prefix = (*path, old)
    for key in [k for k in lines if k[: len(prefix)] == prefix]:
        lines[(*path, new, *key[len(prefix) :])] = lines[key]
    return True


def _renamed(
    data: dict[str, Any],
    keys: dict[str, tuple[str, str]],
    path: tuple[Any, ...],
    lines: LineMap,
    notes: Notes,
) -> None:
    for old, (new, current) in keys.items():
        if rename_key(data, old, new, path, lines):
            notes.append(((*path, old), f"AgentV 4.x's name: AgentV now uses '{current}'"))


def normalize_eval(data: Any, lines: LineMap, notes: Notes | None = None) -> Any:
    notes = [] if notes is None else notes
    if not isinstance(data, dict):
        return data
    execution = data.pop("execution", None)
    if isinstance(execution, dict) and "target" in execution and "target" not in data:
        data["target"] = execution["target"]
        if ("execution", "target") in lines:
            lines[("target",)] = lines[("execution", "target")]
        notes.append((("execution", "target"), "AgentV 4.x's key: AgentV now uses 'providers'"))
    _renamed(data, _FILE_KEYS, (), lines, notes)
    graders = data.get("graders")
    for i, grader in enumerate(graders if isinstance(graders, list) else []):
        _normalize_grader(grader, ("graders", i), lines, notes)
    tests = data.get("tests")
    if isinstance(tests, list):
        for i, case in enumerate(tests):
            normalize_case(case, ("tests", i), lines, notes)
    return data


def normalize_case(
    case: Any, path: tuple[Any, ...], lines: LineMap, notes: Notes | None = None
) -> Any:
    notes = [] if notes is None else notes
    if not isinstance(case, dict):
        return case
    _renamed(case, _CASE_KEYS, path, lines, notes)
    graders = case.get("graders")
    for i, grader in enumerate(graders if isinstance(graders, list) else []):
        _normalize_grader(grader, (*path, "graders", i), lines, notes)
    return case


def _normalize_grader(grader: Any, path: tuple[Any, ...], lines: LineMap, notes: Notes) -> None:
    if not isinstance(grader, dict):
        return
    if rename_key(grader, "script", "command", path, lines):
        notes.append(((*path, "script"), "AgentV 4.x's key: AgentV now uses 'command'"))
    kind = grader.get("type")
    kind = kind.replace("_", "-") if isinstance(kind, str) else None
    if kind in _SCRIPT_TYPES:
        grader["type"] = "script"
        notes.append(((*path, "type"), f"'{kind}' is AgentV 4.x's type: AgentV now uses 'script'"))
    elif kind in _RUBRIC_TYPES:
        grader["type"] = "llm-rubric"
        config = grader.setdefault("config", {})
        for key in ("criteria", "prompt", "value"):
            if isinstance(grader.get(key), str) and isinstance(config, dict):
                config.setdefault("rubric", [grader.pop(key)])
        notes.append(
            ((*path, "type"), f"'{kind}' is AgentV 4.x's type: AgentV now uses 'llm-rubric'")
        )
    # AgentV allows `target: {max_calls: N}` and also a bare `max_calls` beside it.
    if "max_calls" in grader and "target" not in grader:
        grader["target"] = {"max_calls": grader.pop("max_calls")}
