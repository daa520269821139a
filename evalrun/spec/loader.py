"""Load and validate an eval file; every error names file, line and key, and nothing runs."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

from evalrun.compact import repeated
from evalrun.spec.agentv import Notes, normalize_case, normalize_eval
from evalrun.spec.agentv_current import CurrentFormatError, is_current_format, map_current_format
from evalrun.spec.models import EvalFile, TestCase
from evalrun.yamlsource import (
    LineMap,
    SourceError,
    format_loc,
    iter_jsonl,
    line_for,
    load_yaml_with_lines,
    validation_error_message,
)


class EvalFileError(Exception):
    """An eval file (or its tests file) is invalid. The message lists every problem."""


@dataclass
class LoadedEval:
    path: Path
    spec: EvalFile
    #: A list, or for a ``.jsonl`` tests file a :class:`JsonlCases` that streams from it.
    tests: Sequence[TestCase]
    #: Where each key of the eval file is (docs/eval-files.md: errors name file, line and key).
    lines: LineMap = field(default_factory=dict)
    #: The separate tests file (``tests: cases.jsonl``) and its line map, keyed by test index.
    tests_file: Path | None = None
    tests_lines: LineMap | JsonlLines = field(default_factory=dict)
    #: ``file:line: key: message`` notes on keys that load but that AgentV has renamed.
    deprecations: list[str] = field(default_factory=list)

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
    if is_current_format(data):
        try:
            data = map_current_format(data, lines, path.parent)
        except CurrentFormatError as exc:
            raise EvalFileError(_located(path, exc.problems, lines)) from None
    notes: Notes = []
    data = normalize_eval(data, lines, notes)
    try:
        spec = EvalFile.model_validate(data)
    except ValidationError as exc:
        raise EvalFileError(validation_error_message(path, exc, lines, EvalFile)) from None
    return _checked(path, spec, lines, _located_list(path, notes, lines))


def build_eval(spec: EvalFile, folder: Path, name: str) -> LoadedEval:
    """An eval built in Python (docs/python-api.md), checked as a loaded file is; its relative
    paths (a tests file, input files, graders' programs) resolve from ``folder``. ``spec`` is
    copied: the run sets the cases' places and resolves their input files."""
    return _checked(Path(folder) / name, spec.model_copy(deep=True), {}, [])


def _checked(path: Path, spec: EvalFile, lines: LineMap, deprecations: list[str]) -> LoadedEval:
    """The checks a valid eval needs beyond its model: tests (from their file, if named),
    unique ids, a grader for every test."""
    tests_file = None
    tests_lines: LineMap = {}
    if isinstance(spec.tests, list):
        tests = spec.tests
        for i, case in enumerate(tests):
            case._line, case._index = lines.get(("tests", i)), i
            case.input_files = [str((path.parent / f).resolve()) for f in case.input_files]
        _check_unique_ids(path, tests, lines, ("tests",))
    else:
        tests_file, tests, tests_lines = _load_tests_file(path, spec.tests)
    if not tests:
        raise EvalFileError(f"{path}: the eval file has no tests")
    if not spec.graders:
        ungraded = list(islice((case.id for case in tests if not case.graders), 5))
        if ungraded:
            raise EvalFileError(
                f"{path}: tests without graders: {', '.join(ungraded)} "
                "(add suite-level 'graders:' or per-test 'graders:')"
            )
    return LoadedEval(
        path=path,
        spec=spec,
        tests=tests,
        lines=lines,
        tests_file=tests_file,
        tests_lines=tests_lines,
        deprecations=deprecations,
    )


def _located_list(path: Path, problems: Notes, lines: LineMap) -> list[str]:
    """``file:line: key: message`` for each problem, in line order."""
    located = [(line_for(lines, key), key, message) for key, message in problems]
    located.sort(key=lambda item: item[0] or 0)
    return [
        f"{f'{path}:{line}' if line else path}: {format_loc(key)}: {message}"
        for line, key, message in located
    ]


def _located(path: Path, problems: Notes, lines: LineMap) -> str:
    return "\n".join(dict.fromkeys(_located_list(path, problems, lines)))


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


class JsonlCases(Sequence[TestCase]):
    """The tests of a ``.jsonl`` tests file, read from the file again each time they are
    iterated, so a run holds only the cases in flight however long the file is
    (docs/performance.md). :func:`load_eval` has checked every line first; a file changed
    since then is refused rather than half-run."""

    def __init__(self, path: Path, count: int) -> None:
        self.path = path
        self.count = count
        self._stamp = _stamp(path)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[TestCase]:
        if _stamp(self.path) != self._stamp:
            raise EvalFileError(f"{self.path}: the tests file changed after it was checked")
        for index, (lineno, item) in enumerate(iter_jsonl(self.path)):
            case, problem = _jsonl_case(self.path, index, lineno, item)
            if case is None:
                raise EvalFileError(problem)
            yield case

    @overload
    def __getitem__(self, index: int) -> TestCase: ...
    @overload
    def __getitem__(self, index: slice) -> list[TestCase]: ...
    def __getitem__(self, index: int | slice) -> TestCase | list[TestCase]:
        return list(self)[index]


class JsonlLines:
    """The line map of a JSONL tests file (every key of a test is on the test's line), as one
    number per test rather than a dict entry."""

    def __init__(self, lines: array[int]) -> None:
        self._lines = lines

    def get(self, key: tuple[Any, ...], default: int | None = None) -> int | None:
        if len(key) == 1 and isinstance(key[0], int) and 0 <= key[0] < len(self._lines):
            return self._lines[key[0]]
        return default


def _stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_size, info.st_mtime_ns


def _jsonl_case(path: Path, index: int, lineno: int, item: Any) -> tuple[TestCase | None, str]:
    """One line of a JSONL tests file as a case, or None and what is wrong with it."""
    lines = {(index,): lineno}
    item = normalize_case(item, (index,), lines)
    try:
        case = TestCase.model_validate(item)
    except ValidationError as exc:
        sub = {k[1:]: v for k, v in lines.items() if k[:1] == (index,)}
        return None, _prefix_index(validation_error_message(path, exc, sub, TestCase), index)
    case._line, case._index = lineno, index
    return case, ""


def _check_jsonl_tests(path: Path) -> tuple[JsonlCases, JsonlLines]:
    """Every line checked (all problems reported at once), keeping one hash per id and one
    line number per test: a shared hash sends its ids through an exact check."""
    problems: list[str] = []
    hashes = array("q")
    numbers = array("I")
    try:
        for index, (lineno, item) in enumerate(iter_jsonl(path)):
            numbers.append(lineno)
            case, problem = _jsonl_case(path, index, lineno, item)
            if case is None:
                problems.append(problem)
                hashes.append(0)
                continue
            hashes.append(hash(case.id))
    except SourceError as exc:
        raise EvalFileError(str(exc)) from None
    if problems:
        raise EvalFileError("\n".join(problems))
    shared = repeated(hashes)
    if shared:
        _check_unique_jsonl_ids(path, shared)
    return JsonlCases(path, len(hashes)), JsonlLines(numbers)


def _check_unique_jsonl_ids(path: Path, hashes: set[int]) -> None:
    """The exact check of the tests whose id hash is in ``hashes`` (the same report as
    :func:`_check_unique_ids`; in JSONL a test's keys are all on its line)."""
    first: dict[str, int] = {}
    problems = []
    for index, (lineno, item) in enumerate(iter_jsonl(path)):
        case, _ = _jsonl_case(path, index, lineno, item)
        if case is None or hash(case.id) not in hashes:
            continue
        if case.id not in first:
            first[case.id] = lineno
            continue
        problems.append(
            f"{path}:{lineno}: {format_loc(('tests', index, 'id'))}: duplicate test id "
            f"'{case.id}' (first used on line {first[case.id]}); ids must be unique"
        )
    if problems:
        raise EvalFileError("\n".join(problems))


def _load_tests_file(
    eval_path: Path, ref: str
) -> tuple[Path, Sequence[TestCase], LineMap | JsonlLines]:
    path = eval_path.parent / ref
    if not path.is_file():
        raise EvalFileError(f"{eval_path}: tests file not found: {ref}")
    if path.suffix == ".jsonl":
        return (path, *_check_jsonl_tests(path))
    try:
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
        case._line, case._index = lines.get((i,)), i
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
