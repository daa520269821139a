"""AgentV 4.x spellings mapped onto evalrun's eval-file keys, before validation.

Renames keep the line map in step, so an error in an AgentV file still names its line.
"""

from __future__ import annotations

from typing import Any

from evalrun.yamlsource import LineMap

_FILE_KEYS = {
    "eval_cases": "tests",
    "evalcases": "tests",
    "assertions": "graders",
    "evaluators": "graders",
}
_CASE_KEYS = {
    "assertions": "graders",
    "evaluators": "graders",
    "expected_outcome": "criteria",
    "input_messages": "input",
    "expected_messages": "expected_output",
    "expectedOutput": "expected_output",
}
_GRADER_KEYS = {"script": "command", "max_calls": None}


def _rename(
    data: dict[str, Any], old: str, new: str, path: tuple[Any, ...], lines: LineMap
) -> None:
    if old not in data or new in data:
        return
    data[new] = data.pop(old)
    prefix = (*path, old)
    for key in [k for k in lines if k[: len(prefix)] == prefix]:
        lines[(*path, new, *key[len(prefix) :])] = lines[key]


def normalize_eval(data: Any, lines: LineMap) -> Any:
    if not isinstance(data, dict):
        return data
    execution = data.pop("execution", None)
    if isinstance(execution, dict) and "target" in execution and "target" not in data:
        data["target"] = execution["target"]
        if ("execution", "target") in lines:
            lines[("target",)] = lines[("execution", "target")]
    for old, new in _FILE_KEYS.items():
        _rename(data, old, new, (), lines)
    for i, grader in enumerate(data.get("graders") or []):
        _normalize_grader(grader, ("graders", i), lines)
    tests = data.get("tests")
    if isinstance(tests, list):
        for i, case in enumerate(tests):
            normalize_case(case, ("tests", i), lines)
    return data


def normalize_case(case: Any, path: tuple[Any, ...], lines: LineMap) -> Any:
    if not isinstance(case, dict):
        return case
    for old, new in _CASE_KEYS.items():
        _rename(case, old, new, path, lines)
    for i, grader in enumerate(case.get("graders") or []):
        _normalize_grader(grader, (*path, "graders", i), lines)
    return case


def _normalize_grader(grader: Any, path: tuple[Any, ...], lines: LineMap) -> None:
    if not isinstance(grader, dict):
        return
    _rename(grader, "script", "command", path, lines)
    if isinstance(grader.get("type"), str) and grader["type"].replace("_", "-") in (
        "code-grader",
        "code-judge",
    ):
        grader["type"] = "script"
    # AgentV allows `target: {max_calls: N}` and also a bare `max_calls` beside it.
    if "max_calls" in grader and "target" not in grader:
        grader["target"] = {"max_calls": grader.pop("max_calls")}
