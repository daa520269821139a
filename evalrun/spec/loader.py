"""Load and validate an eval file; every error names file, line and key, and nothing runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalrun.spec.agentv import normalize_case, normalize_eval
from evalrun.spec.models import EvalFile, TestCase
from evalrun.yamlsource import (
    SourceError,
    load_jsonl_with_lines,
    load_yaml_with_lines,
    validation_error_message,
)


class EvalFileError(Exception):
    """An eval file (or its tests file) is invalid. The message lists every problem."""


@dataclass
class LoadedEval:
    path: Path
    spec: EvalFile
    tests: list[TestCase]

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def name(self) -> str:
        name = self.path.name
        for suffix in (".yaml", ".yml", ".json"):
            name = name.removesuffix(suffix)
        return name.removesuffix(".eval")


def load_eval(path: Path) -> LoadedEval:
    path = Path(path)
    if not path.is_file():
        raise EvalFileError(f"{path}: no such eval file")
    try:
        data, lines = load_yaml_with_lines(path)
    except SourceError as exc:
        raise EvalFileError(str(exc)) from None
    if not isinstance(data, dict):
        raise EvalFileError(f"{path}:1: expected a mapping with a 'tests:' key")
    data = normalize_eval(data, lines)
    try:
        spec = EvalFile.model_validate(data)
    except ValidationError as exc:
        raise EvalFileError(validation_error_message(path, exc, lines)) from None
    tests = spec.tests if isinstance(spec.tests, list) else _load_tests_file(path, spec.tests)
    if not tests:
        raise EvalFileError(f"{path}: the eval file has no tests")
    if not spec.graders:
        ungraded = [case.id for case in tests if not case.graders]
        if ungraded:
            raise EvalFileError(
                f"{path}: tests without graders: {', '.join(ungraded[:5])} "
                "(add suite-level 'graders:' or per-test 'graders:')"
            )
    return LoadedEval(path=path, spec=spec, tests=tests)


def _load_tests_file(eval_path: Path, ref: str) -> list[TestCase]:
    path = (eval_path.parent / ref).resolve()
    if not path.is_file():
        raise EvalFileError(f"{eval_path}: tests file not found: {ref}")
    try:
        if path.suffix == ".jsonl":
            items, lines = load_jsonl_with_lines(path)
        else:
            items, lines = load_yaml_with_lines(path)
            if isinstance(items, dict) and "tests" in items:
                items = items["tests"]
                lines = {k[1:]: v for k, v in lines.items() if k[:1] == ("tests",)}
    except SourceError as exc:
        raise EvalFileError(str(exc)) from None
    if not isinstance(items, list):
        raise EvalFileError(f"{path}:1: expected a list of tests")
    cases: list[TestCase] = []
    problems: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        item = normalize_case(item, (i,), lines)
        try:
            case = TestCase.model_validate(item)
        except ValidationError as exc:
            sub = {k[1:]: v for k, v in lines.items() if k[:1] == (i,)}
            problems.append(_prefix_index(validation_error_message(path, exc, sub), i))
            continue
        if case.id in seen:
            problems.append(
                f"{path}:{lines.get((i,), '?')}: [{i}].id: duplicate test id '{case.id}'"
            )
        seen.add(case.id)
        cases.append(case)
    if problems:
        raise EvalFileError("\n".join(problems))
    return cases


def _prefix_index(message: str, index: int) -> str:
    out = []
    for line in message.splitlines():
        head, sep, rest = line.partition(": ")
        out.append(f"{head}{sep}[{index}].{rest}" if sep else line)
    return "\n".join(out)


def eval_json_schema() -> dict[str, Any]:
    schema = EvalFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalrun eval file"
    return schema
