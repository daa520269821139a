"""Load and validate an eval file; every error names file, line and key, and nothing runs."""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

from evalrun.compact import repeated
from evalrun.errors import UserError
from evalrun.spec.agentv import Notes, normalize_case, normalize_eval
from evalrun.spec.agentv_current import CurrentFormatError, is_current_format, map_current_format
from evalrun.spec.agentv_extras import (
    AGENTV_SUITE_KEYS,
    AgentVProblem,
    interpolate_env,
    normalize_suite,
    normalize_test,
)
from evalrun.spec.agentv_options import apply_threshold, resolve_graders, take_suite_options
from evalrun.spec.agentv_sources import SourceProblem, read_sources
from evalrun.spec.agentv_workspace import is_agentv_workspace, map_workspaces
from evalrun.spec.datasets import (
    HF,
    CsvRows,
    DatasetRows,
    JsonlRows,
    MissingExtra,
    name_columns,
    open_csv,
    open_dataset,
)
from evalrun.spec.models import EvalFile, TestCase, TestsFrom
from evalrun.yamlsource import (
    Ambiguous,
    LineMap,
    Parsed,
    SourceError,
    format_loc,
    line_for,
    load_yaml_with_lines,
    validate_keeping_text,
    validation_error_message,
)


class EvalFileError(UserError):
    """An eval file (or its tests file) is invalid. The message lists every problem; ``extra``
    names an optional extra that would fix it, for the command to add its install hint."""

    def __init__(self, message: str, extra: str | None = None) -> None:
        super().__init__(message)
        self.extra = extra


@dataclass
class LoadedEval:
    path: Path
    spec: EvalFile
    #: A list, or for a ``.jsonl``/``.csv`` file or a dataset a :class:`StreamedCases`.
    tests: Sequence[TestCase]
    #: Where each key of the eval file is (docs/eval-files.md: errors name file, line and key).
    lines: LineMap = field(default_factory=dict)
    #: The separate tests file (``tests: cases.jsonl``) and its line map, keyed by test index
    #: (None for a dataset: its errors name rows, docs/datasets.md).
    tests_file: Path | None = None
    tests_lines: LineMap | JsonlLines = field(default_factory=dict)
    #: ``file:line: key: message`` notes on keys that load but that AgentV has renamed.
    deprecations: list[str] = field(default_factory=list)
    #: ``file:line: key: message`` on plain values YAML 1.1 would read otherwise (``yes``, ``001``)
    warnings: list[str] = field(default_factory=list)
    #: The file is in AgentV's format (4.x or current): its graders get AgentV's payload and
    #: failure rule (docs/grader-protocol.md, "Payload generations").
    agentv: bool = False
    #: The tests' prompt variants in the order first met: a matrix column each (per target),
    #: empty when no test names one (docs/results.md, "A matrix run").
    prompts: list[str] = field(default_factory=list)

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
        return eval_name(self.path)


def eval_name(path: Path) -> str:
    """What a run calls an eval file, in its bundle's folder name: ``quality.eval.yaml`` is
    ``quality``."""
    name = path.name
    for suffix in (".yaml", ".yml", ".json"):
        name = name.removesuffix(suffix)
    return name.removesuffix(".eval")


def load_eval(path: Path) -> LoadedEval:
    path = Path(path)
    if not path.is_file():
        raise EvalFileError(f"{path}: no such eval file")
    try:
        parsed = load_yaml_with_lines(path)
    except SourceError as exc:
        raise EvalFileError(str(exc)) from None
    data, lines = parsed.data, parsed.lines
    if not isinstance(data, dict):
        raise EvalFileError(f"{path}:1: expected a mapping with a 'tests:' key")
    try:
        data = read_sources(data, lines, path.parent)
    except SourceProblem as exc:
        raise EvalFileError(_located(path, [(exc.path, exc.message)], lines)) from None
    data, unset = interpolate_env(data, os.environ)
    if unset:
        raise EvalFileError(_located(path, unset, lines))
    options = take_suite_options(data, lines)
    agentv = is_current_format(data)
    skipped: Notes = []  # left out as AgentV leaves it out: said as warnings
    if agentv:
        try:
            data = map_current_format(data, lines, path.parent, skipped)
        except CurrentFormatError as exc:
            raise EvalFileError(_located(path, exc.problems, exc.lines)) from None
    notes: Notes = []
    data = normalize_eval(data, lines, notes)
    agentv = agentv or bool(notes) or any(key in data for key in AGENTV_SUITE_KEYS)
    agentv = agentv or is_agentv_workspace(data.get("workspace"))
    warned: Notes = []  # the workspace's and the file parts', said after validation
    try:
        resolve_graders(data, lines, path.parent, options.notes)
        map_workspaces(data, path.parent, warned, lines)
        data = normalize_suite(data, lines, path.parent, agentv=agentv, notes=warned)
    except AgentVProblem as exc:
        raise EvalFileError(_located(path, [(exc.path, exc.message)], lines)) from None
    apply_threshold(data, options.threshold)
    try:
        spec, warnings = validate_keeping_text(EvalFile, data, parsed, path)
    except ValidationError as exc:
        raise EvalFileError(validation_error_message(path, exc, lines, EvalFile)) from None
    warnings = [
        *_located_list(path, options.notes, lines),
        *_located_list(path, skipped, lines),
        *warnings,
    ]
    warnings += _located_list(path, warned, lines)
    loaded = _checked(path, spec, lines, _located_list(path, notes, lines), warnings)
    loaded.agentv = agentv
    return loaded


def build_eval(spec: EvalFile, folder: Path, name: str) -> LoadedEval:
    """An eval built in Python (docs/python-api.md), checked as a loaded file is; its relative
    paths (a tests file, input files, graders' programs) resolve from ``folder``. ``spec`` is
    copied: the run sets the cases' places and resolves their input files."""
    return _checked(Path(folder) / name, spec.model_copy(deep=True), {}, [], [])


def _checked(
    path: Path, spec: EvalFile, lines: LineMap, deprecations: list[str], warnings: list[str]
) -> LoadedEval:
    """The checks a valid eval needs beyond its model: tests (from their file, if named),
    unique ids, a grader for every test."""
    tests_file = None
    tests: Sequence[TestCase]
    tests_lines: LineMap | JsonlLines = {}
    if isinstance(spec.tests, list):
        tests = spec.tests
        for i, case in enumerate(tests):
            case._line, case._index = lines.get(("tests", i)), i
            case.input_files = [str((path.parent / f).resolve()) for f in case.input_files]
        _check_unique_ids(path, tests, lines, ("tests",))
        prompts = list(dict.fromkeys(case.prompt for case in tests if case.prompt is not None))
    else:
        tests_file, tests, tests_lines = _load_source(path, spec.tests, lines, warnings)
        prompts = tests.prompts if isinstance(tests, StreamedCases) else []
    tests_at = f"{path}:{lines.get(('tests',), 1)}: tests"
    if not tests:
        raise EvalFileError(f"{tests_at}: the eval file has no tests")
    if not spec.graders:
        ungraded = list(
            islice((case.id for case in tests if not (case.graders or case.turn_graders)), 5)
        )
        if ungraded:
            raise EvalFileError(
                f"{tests_at}: tests without graders: {', '.join(ungraded)} "
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
        warnings=warnings,
        prompts=prompts,
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
    """Duplicate ids are reported at the duplicate, with the line of the first one; prompt
    variants of a test share its id, each variant once."""
    seen: dict[str, dict[str | None, int]] = {}
    problems = []
    for i, case in enumerate(cases):
        clash = _clash(seen, case, i)
        if clash is None:
            continue
        loc = (*prefix, i, "id")
        earlier = line_for(lines, (*prefix, clash[0], "id"))
        problems.append(
            f"{path}:{line_for(lines, loc) or '?'}: {format_loc(('tests', i, 'id'))}: "
            f"duplicate test id '{case.id}'{_variant(case)} (first used on line {earlier}); "
            f"{clash[1]}"
        )
    if problems:
        raise EvalFileError("\n".join(problems))


Rows = JsonlRows | CsvRows | DatasetRows


class StreamedCases(Sequence[TestCase]):
    """The tests of a ``.jsonl`` or ``.csv`` tests file or a dataset, read from it again each
    time they are iterated, so a run holds only the cases in flight however long it is
    (docs/performance.md). :func:`load_eval` has checked every row first; a source changed
    since then is refused rather than half-run."""

    def __init__(self, source: Rows, count: int, prompts: list[str] | None = None) -> None:
        self.source = source
        self.size = count
        #: the rows' prompt variants, in the order first met
        self.prompts = prompts or []
        self._stamp = source.stamp()

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[TestCase]:
        if self.source.stamp() != self._stamp:
            raise EvalFileError(
                f"{self.source.name}: the tests source changed after it was checked"
            )
        for index, (position, item) in enumerate(self.source.rows()):
            case, problem = _row_case(self.source, index, position, item)
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


def _row_case(source: Rows, index: int, position: int, item: Any) -> tuple[TestCase | None, str]:
    """One row of a streamed source as a case, or None and what is wrong with it."""
    folder = source.path.parent if isinstance(source, JsonlRows) else Path.cwd()
    try:
        item = normalize_test(normalize_case(item, (index,), {}), (index,), {}, folder)
    except AgentVProblem as exc:
        return None, f"{source.at(position)}: {format_loc(('tests', *exc.path))}: {exc.message}"
    try:  # JSON's numbers are typed: `"id": 7` is the text "7" (no warning to give)
        case, _ = validate_keeping_text(TestCase, item, Parsed(item, {}, {}, {}, []), "")
    except ValidationError as exc:
        # the place is put in front afterwards: a dataset's (``hf://x: row 3``) holds ": "
        unplaced = _prefix_index(validation_error_message("", exc, {}, TestCase), index)
        message = "\n".join(source.at(position) + line for line in unplaced.splitlines())
        return None, name_columns(message, source.columns, index)
    case._line = None if isinstance(source, DatasetRows) else position
    case._index = index
    return case, ""


def _check_streamed(source: Rows) -> tuple[StreamedCases, JsonlLines]:
    """Every row checked (all problems reported at once), keeping one hash per id and one
    position per test: a shared hash sends its ids through an exact check."""
    problems: list[str] = []
    hashes = array("q")
    numbers = array("I")
    prompts: dict[str, None] = {}
    try:
        for index, (position, item) in enumerate(source.rows()):
            numbers.append(position)
            case, problem = _row_case(source, index, position, item)
            if case is None:
                problems.append(problem)
                hashes.append(0)
                continue
            hashes.append(hash(case.id))  # variants share an id: checked exactly below
            if case.prompt is not None:
                prompts.setdefault(case.prompt)
    except SourceError as exc:
        raise EvalFileError(str(exc)) from None
    if problems:
        raise EvalFileError("\n".join(problems))
    shared = repeated(hashes)
    if shared:
        _check_unique_streamed_ids(source, shared)
    return StreamedCases(source, len(hashes), list(prompts)), JsonlLines(numbers)


#: the rule the id checks report; with a prompt on one side only, what variants need
UNIQUE_IDS = "ids must be unique"
MIXED_IDS = "tests that share an id are prompt variants, and each names its prompt"


def _clash(
    seen: dict[str, dict[str | None, int]], case: TestCase, where: int
) -> tuple[int, str] | None:
    """Where an earlier test took ``case``'s place and the rule broken, else None (``case`` is
    recorded): the same id and prompt, or the same id with a prompt on one side only, where a
    repeated id would otherwise read as a variant (docs/eval-files.md, "Prompt variants")."""
    variants = seen.setdefault(case.id, {})
    if case.prompt in variants:
        return variants[case.prompt], UNIQUE_IDS
    if variants and (case.prompt is None or None in variants):
        return next(iter(variants.values())), MIXED_IDS
    variants[case.prompt] = where
    return None


def _variant(case: TestCase) -> str:
    return f" for prompt '{case.prompt}'" if case.prompt is not None else ""


def _check_unique_streamed_ids(source: Rows, hashes: set[int]) -> None:
    """The exact check of the tests whose id hash is in ``hashes`` (the same report as
    :func:`_check_unique_ids`; a streamed test's keys are all at its position)."""
    seen: dict[str, dict[str | None, int]] = {}
    problems = []
    for index, (position, item) in enumerate(source.rows()):
        case, _ = _row_case(source, index, position, item)
        if case is None or hash(case.id) not in hashes:
            continue
        clash = _clash(seen, case, position)
        if clash is None:
            continue
        problem = (
            f"{source.at(position)}: {format_loc(('tests', index, 'id'))}: duplicate test id "
            f"'{case.id}'{_variant(case)} (first used on {source.place(clash[0])}); {clash[1]}"
        )
        problems.append(name_columns(problem, source.columns, index))
    if problems:
        raise EvalFileError("\n".join(problems))


def _load_source(
    eval_path: Path, tests: str | TestsFrom, lines: LineMap, warnings: list[str]
) -> tuple[Path | None, Sequence[TestCase], LineMap | JsonlLines]:
    """``tests: FILE``, ``tests: hf://...`` or ``tests: {from: ..., columns: ...}``
    (docs/datasets.md)."""
    ref, columns = (tests, None) if isinstance(tests, str) else (tests.from_, tests.mapping())

    def where(key: str) -> str:
        """``file:line: key`` in the eval file: of ``columns.KEY``, or of the source."""
        loc: tuple[Any, ...] = ("tests", "columns", key) if key else ("tests",)
        return f"{eval_path}:{line_for(lines, loc) or 1}: {format_loc(loc)}"

    try:
        if ref.startswith(HF):
            return (None, *_check_streamed(open_dataset(ref, eval_path.parent, columns, where)))
        return _load_tests_file(eval_path, ref, columns, where, warnings)
    except MissingExtra as exc:
        raise EvalFileError(str(exc), extra=exc.extra) from None
    except SourceError as exc:
        raise EvalFileError(str(exc)) from None


def _load_tests_file(
    eval_path: Path,
    ref: str,
    columns: dict[str, str] | None,
    at: Callable[[str], str],
    warnings: list[str],
) -> tuple[Path, Sequence[TestCase], LineMap | JsonlLines]:
    """``at("")``: ``file:line: tests``, the key that names the tests file."""
    where = at("")
    path = eval_path.parent / ref
    try:
        exists = path.is_file()
    except OSError as exc:  # a name too long for the file system, say
        raise EvalFileError(f"{where}: cannot read the tests file: {exc.strerror}") from None
    if not exists:
        raise EvalFileError(f"{where}: tests file not found: {ref}")
    if path.suffix == ".csv":
        return (path, *_check_streamed(open_csv(path, columns, at)))
    if columns is not None:
        raise EvalFileError(f"{where}: 'columns:' is for .csv files and hf:// datasets only")
    if path.suffix == ".jsonl":
        return (path, *_check_streamed(JsonlRows(path)))
    try:
        parsed = load_yaml_with_lines(path)
    except SourceError as exc:
        raise EvalFileError(str(exc)) from None
    items, lines = parsed.data, parsed.lines
    prefix: tuple[str, ...] = ()
    if isinstance(items, dict) and "tests" in items:
        items, prefix = items["tests"], ("tests",)
        lines = {k[1:]: v for k, v in lines.items() if k[:1] == prefix}
    if not isinstance(items, list):
        raise EvalFileError(f"{path}:1: expected a list of tests")
    cases: list[TestCase] = []
    problems: list[str] = []
    ambiguous: dict[Any, list[Ambiguous]] = {}  # by test, so each test reads only its own
    for entry in parsed.ambiguous:
        if entry[0][: len(prefix)] == prefix and len(entry[0]) > len(prefix):
            ambiguous.setdefault(entry[0][len(prefix)], []).append(entry)
    for i, item in enumerate(items):
        try:
            item = normalize_test(normalize_case(item, (i,), lines), (i,), lines, path.parent)
        except AgentVProblem as exc:
            line = line_for(lines, exc.path)
            problems.append(f"{path}:{line}: {format_loc(('tests', *exc.path))}: {exc.message}")
            continue
        try:
            own = parsed._replace(ambiguous=ambiguous.get(i, []))
            case, found = validate_keeping_text(
                TestCase, item, own, path, (*prefix, i), ("tests", i)
            )
        except ValidationError as exc:
            sub = {k[1:]: v for k, v in lines.items() if k[:1] == (i,)}
            problems.append(_prefix_index(validation_error_message(path, exc, sub, TestCase), i))
            continue
        warnings += found
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
