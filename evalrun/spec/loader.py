"""Load and validate an eval file; every error names file, line and key, and nothing runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalrun.spec.agentv import normalize_case, normalize_eval
from evalrun.spec.models import EvalFile, TestCase
from evalrun.yamlsource import (
    LineMap,
    SourceError,
    format_loc,
    line_for,
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
    #: Where each key of the eval file is (docs/eval-files.md: errors name file, line and key).
    lines: LineMap = field(default_factory=dict)
    #: The separate tests file (``tests: cases.jsonl``) and its line map, keyed by test index.
    tests_file: Path | None = None
    tests_lines: LineMap = field(default_factory=dict)

    def where(self, loc: tuple[Any, ...]) -> str:
        """``file:line: key`` for a key path such as ``("tests", 2, "graders", 0, "command")``."""
        if loc[:1] == ("tests",) and self.tests_file is not None and len(loc) > 1:
            line = line_for(self.tests_lines, loc[1:])
            path = self.tests_file
        else:
            line = line_for(self.lines, loc)
            path = self.path
        return f"{path}:{line}: {format_loc(loc)}" if line else f"{path}: {format_loc(loc)}"

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
        raise EvalFileError(validation_error_message(path, exc, lines, EvalFile)) from None
    tests_file = None
    tests_lines: LineMap = {}
    if isinstance(spec.tests, list):
        tests = spec.tests
        _check_unique_ids(path, tests, lines, ("tests",))
    else:
        tests_file, tests, tests_lines = _load_tests_file(path, spec.tests)
    if not tests:
        raise EvalFileError(f"{path}: the eval file has no tests")
    if not spec.graders:
        ungraded = [case.id for case in tests if not case.graders]
        if ungraded:
            raise EvalFileError(
                f"{path}: tests without graders: {', '.join(ungraded[:5])} "
                "(add suite-level 'graders:' or per-test 'graders:')"
            )
    return LoadedEval(
        path=path,
        spec=spec,
        tests=tests,
        lines=lines,
        tests_file=tests_file,
        tests_lines=tests_lines,
    )


def _check_unique_ids(
    path: Path, cases: list[TestCase], lines: LineMap, prefix: tuple[Any, ...]
) -> None:
    """Duplicate ids are reported at the duplicate, with the line of the first one."""
    first: dict[str, int] = {}
    problems = []
    for i, case in enumerate(cases):
        if case.id not in first:
            first[case.id] = i
            continue
        loc = (*prefix, i, "id")
        earlier = line_for(lines, (*prefix, first[case.id], "id"))
        problems.append(
            f"{path}:{line_for(lines, loc) or '?'}: {format_loc(('tests', i, 'id'))}: "
            f"duplicate test id '{case.id}' (first used on line {earlier}); ids must be unique"
        )
    if problems:
        raise EvalFileError("\n".join(problems))


def _load_tests_file(eval_path: Path, ref: str) -> tuple[Path, list[TestCase], LineMap]:
    path = eval_path.parent / ref
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
    for i, item in enumerate(items):
        item = normalize_case(item, (i,), lines)
        try:
            case = TestCase.model_validate(item)
        except ValidationError as exc:
            sub = {k[1:]: v for k, v in lines.items() if k[:1] == (i,)}
            problems.append(_prefix_index(validation_error_message(path, exc, sub, TestCase), i))
            continue
        cases.append(case)
    if problems:
        raise EvalFileError("\n".join(problems))
    _check_unique_ids(path, cases, lines, ())
    return path, cases, lines


def _prefix_index(message: str, index: int) -> str:
    """A tests-file error names the key as the eval file would: ``tests[1].input``."""
    out = []
    for line in message.splitlines():
        head, sep, rest = line.partition(": ")
        if not sep:
            out.append(line)
        elif rest.startswith("(top level)"):
            out.append(f"{head}{sep}tests[{index}]{rest.removeprefix('(top level)')}")
        else:
            out.append(f"{head}{sep}tests[{index}].{rest}")
    return "\n".join(out)


def eval_json_schema() -> dict[str, Any]:
    schema = EvalFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalrun eval file"
    return schema
