"""The parts of an AgentV eval file that live in other files, read into it before anything else
maps it (docs/eval-files.md, "AgentV files"): ``file://`` entries of ``tests`` (a file or a
glob; a ``.csv`` one in promptfoo's columns, ``agentv_csv.py``), ``tests`` naming a folder of ``*/case.yaml`` or a tests file written in AgentV's current
format, ``default_test: file://...``, and ``scenarios`` (inline or ``file://`` globs), crossed
into tests as AgentV lowers them. What is read in becomes inline tests of the eval file, so the
current-format mapping, the suite's graders and its ``default_test`` apply to them as AgentV
applies its suite context to raw cases; their errors name the line of the key that read them.
"""

from __future__ import annotations

import csv
import glob
import json
from pathlib import Path
from typing import Any

from evalrun.errors import UserError
from evalrun.spec.agentv_csv import CsvProblem, csv_cases
from evalrun.spec.agentv_extras import AGENTV_SUITE_KEYS
from evalrun.yamlsource import LineMap, SourceError, iter_jsonl, load_yaml_with_lines

FILE = "file://"
#: The tests-file suffixes AgentV reads cases from that evalrun reads too.
_CASE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
#: AgentV's current-format keys of a test: a tests file that uses them is AgentV's.
_CURRENT_TEST_KEYS = ("vars", "assert")


class SourceProblem(UserError):
    """A referenced file that cannot be read, at the key path that names it."""

    def __init__(self, path: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def read_sources(data: Any, lines: LineMap, folder: Path) -> Any:
    """``data`` with every AgentV file reference read in, in place (SourceProblem at the key)."""
    if not isinstance(data, dict):
        return data
    if isinstance(data.get("default_test"), str) and data["default_test"].startswith(FILE):
        data["default_test"] = _mapping_file(data["default_test"], folder, ("default_test",))
    tests = data.get("tests")
    if isinstance(tests, list) and any(_is_ref(t) for t in tests):
        data["tests"] = _spliced(tests, lines, folder)
    elif isinstance(tests, str):
        suite = any(key in data for key in (*AGENTV_SUITE_KEYS, "input_files"))
        inline = _inline_source(tests, folder, suite_context=suite)
        if inline is not None:
            data["tests"] = inline
            _point_all(lines, ("tests",), len(inline))
    if "scenarios" in data:
        scenarios = data.pop("scenarios")
        lowered = _lowered(scenarios, folder)
        listed = data.get("tests")
        before = listed if isinstance(listed, list) else []
        if listed is not None and not isinstance(listed, list):
            raise SourceProblem(("scenarios",), "scenarios cannot be added to a tests file")
        line = lines.get(("scenarios",))
        for i in range(len(before), len(before) + len(lowered)):
            if line is not None:
                lines[("tests", i)] = line
        data["tests"] = [*before, *lowered]
        if ("tests",) not in lines and line is not None:
            lines[("tests",)] = line
    return data


def _is_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(FILE)


def _spliced(tests: list[Any], lines: LineMap, folder: Path) -> list[Any]:
    """Each ``file://`` entry replaced by the tests it names; lines follow the tests they are
    of, and a read-in test is at the line of its reference."""
    out: list[Any] = []
    moved: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    for i, entry in enumerate(tests):
        if _is_ref(entry):
            read = _cases(entry.removeprefix(FILE), folder, ("tests", i))
            moved += [(("tests", i), ("tests", len(out) + j)) for j in range(len(read))]
            out += read
        else:
            moved.append((("tests", i), ("tests", len(out))))
            out.append(entry)
    source = {k: v for k, v in lines.items() if k[:1] == ("tests",) and len(k) > 1}
    for key in source:
        del lines[key]
    for old, new in moved:
        for key, line in source.items():
            if key[:2] == old:
                lines[new + key[2:]] = line
    return out


def _point_all(lines: LineMap, at: tuple[Any, ...], count: int) -> None:
    line = lines.get(at)
    if line is not None:
        for i in range(count):
            lines[at + (i,)] = line


def _inline_source(ref: str, folder: Path, *, suite_context: bool) -> list[Any] | None:
    """The tests of ``tests: REF`` when AgentV's reading of it differs from evalrun's tests file
    (a folder of cases, a tests file in AgentV's current format, or any tests file of a suite
    with AgentV's own keys, whose context applies to each test); None leaves it to evalrun."""
    name = ref.removeprefix(FILE)
    path = folder / name
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except OSError:  # a name too long for the file system: evalrun's tests file check says so
        return None
    if is_dir:
        return _folder_cases(path, ("tests",))
    if path.suffix == ".csv" and ref.startswith(FILE) and is_file:
        return _file_cases(path, ("tests",))  # AgentV's columns; evalrun's own has no file://
    if path.suffix not in _CASE_SUFFIXES or not is_file:
        return None
    cases = _cases(name, folder, ("tests",))
    if suite_context or any(
        isinstance(c, dict) and any(k in c for k in _CURRENT_TEST_KEYS) for c in cases
    ):
        return cases
    return None


def _cases(pattern: str, folder: Path, at: tuple[Any, ...]) -> list[Any]:
    """The tests of one reference: a file, or every file a glob matches (sorted, as AgentV)."""
    if any(ch in pattern for ch in "*?["):
        matches = sorted(glob.glob(str(folder / pattern), recursive=True))
        return [case for match in matches for case in _file_cases(Path(match), at)]
    path = folder / pattern
    try:
        is_dir = path.is_dir()
    except OSError as exc:
        raise SourceProblem(at, f"cannot read the tests file: {exc.strerror}") from None
    if is_dir:
        return _folder_cases(path, at)
    return _file_cases(path, at)


def _file_cases(path: Path, at: tuple[Any, ...]) -> list[Any]:
    if not path.is_file():
        raise SourceProblem(at, f"tests file not found: {path}")
    if path.suffix == ".csv":
        try:
            return csv_cases(path)
        except (CsvProblem, OSError, UnicodeDecodeError, csv.Error) as exc:
            raise SourceProblem(at, f"tests file {path.name}: {exc}") from None
    if path.suffix not in _CASE_SUFFIXES:
        raise SourceProblem(
            at,
            f"tests file {path.name}: evalrun reads AgentV's tests from "
            f"{', '.join((*_CASE_SUFFIXES, '.csv'))} files",
        )
    try:
        if path.suffix == ".jsonl":
            items: Any = [item for _, item in iter_jsonl(path)]
        else:
            items = load_yaml_with_lines(path).data
    except SourceError as exc:
        raise SourceProblem(at, str(exc)) from None
    if isinstance(items, dict) and isinstance(items.get("tests"), list):
        items = items["tests"]
    if not isinstance(items, list):
        raise SourceProblem(at, f"{path}: expected a list of tests")
    return items


def _folder_cases(folder: Path, at: tuple[Any, ...]) -> list[Any]:
    """AgentV's folder of cases: each subfolder's ``case.yaml`` (or ``case.yml``) is one test,
    its id the subfolder's name unless it sets one; subfolders without one are skipped."""
    cases: list[Any] = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        file = next((sub / n for n in ("case.yaml", "case.yml") if (sub / n).is_file()), None)
        if file is None:
            continue
        try:
            case = load_yaml_with_lines(file).data
        except SourceError as exc:
            raise SourceProblem(at, str(exc)) from None
        if not isinstance(case, dict):
            raise SourceProblem(at, f"{file}: a case file holds one test (a mapping)")
        cases.append({"id": sub.name, **case})
    if not cases:
        raise SourceProblem(at, f"tests folder {folder} has no */case.yaml")
    return cases


def _mapping_file(ref: str, folder: Path, at: tuple[Any, ...]) -> dict[str, Any]:
    path = folder / ref.removeprefix(FILE)
    try:
        value = (
            json.loads(path.read_text(encoding="utf-8"))
            if path.suffix == ".json"
            else load_yaml_with_lines(path).data
        )
    except (OSError, json.JSONDecodeError, SourceError) as exc:
        raise SourceProblem(at, f"cannot read {path}: {exc}") from None
    if not isinstance(value, dict):
        raise SourceProblem(at, f"{path}: expected a mapping")
    return value


def _lowered(scenarios: Any, folder: Path) -> list[dict[str, Any]]:
    """``scenarios``: each scenario's ``config`` rows crossed with its ``tests`` rows, vars and
    metadata merged (the test's win), assertions joined; ids as AgentV gives them."""
    if not isinstance(scenarios, list):
        raise SourceProblem(("scenarios",), "scenarios must be a list")
    flat: list[tuple[int, Any]] = []
    for i, item in enumerate(scenarios):
        if _is_ref(item):
            flat += [(i, s) for s in _scenario_files(item.removeprefix(FILE), folder, i)]
        else:
            flat.append((i, item))
    out: list[dict[str, Any]] = []
    for index, (at, scenario) in enumerate(flat):
        where = ("scenarios", at)
        if not isinstance(scenario, dict):
            raise SourceProblem(where, "a scenario is a mapping with 'config' and 'tests'")
        rows, tests = scenario.get("config"), scenario.get("tests")
        if not isinstance(rows, list) or not isinstance(tests, list):
            raise SourceProblem(where, "a scenario needs 'config' and 'tests' lists")
        for c, row in enumerate(rows):
            for t, test in enumerate(tests):
                if not isinstance(row, dict) or not isinstance(test, dict):
                    raise SourceProblem(where, "scenario config and tests rows are mappings")
                out.append(_crossed(row, test, (index, c, t), len(tests)))
    return out


def _scenario_files(pattern: str, folder: Path, at: int) -> list[Any]:
    matches = sorted(glob.glob(str(folder / pattern), recursive=True))
    if not matches:
        raise SourceProblem(("scenarios", at), f"no scenario file matches {pattern}")
    found: list[Any] = []
    for match in matches:
        try:
            value = load_yaml_with_lines(Path(match)).data
        except SourceError as exc:
            raise SourceProblem(("scenarios", at), str(exc)) from None
        if isinstance(value, dict) and isinstance(value.get("scenarios"), list):
            value = value["scenarios"]
        if not isinstance(value, list):
            raise SourceProblem(("scenarios", at), f"{match}: expected a list of scenarios")
        found += value
    return found


def _crossed(
    row: dict[str, Any], test: dict[str, Any], place: tuple[int, int, int], count: int
) -> dict[str, Any]:
    merged: dict[str, Any] = {**row, **test}
    for key in ("vars", "metadata"):
        both = {**_mapping(row.get(key)), **_mapping(test.get(key))}
        if both:
            merged[key] = both
    asserts = [*_listed(row.get("assert")), *_listed(test.get("assert"))]
    if asserts:
        merged["assert"] = asserts
    scenario, c, t = place
    if isinstance(test.get("id"), str) and test["id"].strip():
        merged["id"] = test["id"]
    elif isinstance(row.get("id"), str) and row["id"].strip():
        merged["id"] = f"{row['id']}__scenario_test_{t + 1}" if count > 1 else row["id"]
    else:
        merged["id"] = f"scenario-{scenario + 1}-{c + 1}-{t + 1}"
    return merged


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
