"""YAML means what the user typed (docs/eval-files.md, "YAML values"): YAML 1.2 core-schema
scalars, the written text kept where a field wants text, and a warning at the line where a
YAML 1.1 reader would have read a boolean or a number."""

from __future__ import annotations

import json
from pathlib import Path

from evalrun.launcher.deterministic import run_deterministic
from evalrun.rubric import load_rubric_file
from evalrun.spec.loader import load_eval
from evalrun.targets import load_targets
from evalrun.yamlsource import parse_yaml_with_lines
from tests.conftest import run_cli
from tests.fault_helpers import cli_env

YES = """\
target: mock
graders:
  - type: contains
    value: yes
tests:
  - id: 001
    input: q
    output: yes we can
  - id: 1e3
    input: q
    output: True story
"""


def test_yes_no_on_off_are_text_and_only_true_false_are_booleans() -> None:
    text = "a: [yes, no, on, off, Yes, y, 1_000, '1:30', 12:30, 0b1]\nb: [true, False, TRUE]\n"
    data = parse_yaml_with_lines(text, "x.yaml").data
    assert data["a"] == ["yes", "no", "on", "off", "Yes", "y", "1_000", "1:30", "12:30", "0b1"]
    assert data["b"] == [True, False, True]


def test_core_numbers_are_read_as_yaml_1_2_reads_them() -> None:
    data = parse_yaml_with_lines("a: [010, 0o17, 0x1F, 1e3, .5, -.inf, ~, null, '']\n", "x").data
    assert data["a"] == [10, 15, 31, 1000.0, 0.5, float("-inf"), None, None, ""]


def test_contains_yes_passes_on_yes_we_can_and_fails_on_true_story(tmp_path: Path) -> None:
    path = tmp_path / "yes.eval.yaml"
    path.write_text(YES, encoding="utf-8")
    loaded = load_eval(path)
    grader = loaded.spec.graders[0]
    assert grader.value == "yes"
    assert run_deterministic(grader, "yes we can").passed is True
    assert run_deterministic(grader, "True story").passed is False


def test_ids_001_and_1e3_keep_the_text_written(tmp_path: Path) -> None:
    path = tmp_path / "ids.eval.yaml"
    path.write_text(YES, encoding="utf-8")
    assert [case.id for case in load_eval(path).tests] == ["001", "1e3"]


def test_agentv_ids_001_and_1e3_keep_the_text_written(tmp_path: Path) -> None:
    """AgentV's current format maps its tests before they are validated; a one-prompt file keeps
    the id as typed, and says it was unquoted."""
    path = tmp_path / "agentv.eval.yaml"
    path.write_text(
        "providers: mock\n"
        'prompts: ["{{ q }}"]\n'
        "tests:\n"
        "  - {id: 001, vars: {q: hi}, assert: [{type: contains, value: x}]}\n"
        "  - {id: 1e3, vars: {q: hi}, assert: [{type: contains, value: x}]}\n",
        encoding="utf-8",
    )
    loaded = load_eval(path)
    assert [case.id for case in loaded.tests] == ["001", "1e3"]
    assert [w.split(": ")[1] for w in loaded.warnings] == ["tests[0].id", "tests[1].id"]


def test_text_fields_keep_numbers_and_booleans_as_written(tmp_path: Path) -> None:
    path = tmp_path / "t.eval.yaml"
    path.write_text(
        "target: 007\ngraders: [{type: equals, value: [1.50, TRUE], negate: yes}]\n"
        "tests:\n  - {id: a, input: 0x1F, output: yes, criteria: 1e3}\n",
        encoding="utf-8",
    )
    loaded = load_eval(path)
    case = loaded.tests[0]
    assert (case.input, case.output, case.criteria) == ("0x1F", "yes", "1e3")
    assert loaded.spec.target == "007"
    assert loaded.spec.graders[0].value == ["1.50", "TRUE"]
    assert loaded.spec.graders[0].negate is True  # a boolean field still reads yes as true


def test_a_tests_file_keeps_the_text_and_warns_at_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text("- id: 001\n  input: on\n", encoding="utf-8")
    path = tmp_path / "f.eval.yaml"
    path.write_text("graders: [{type: contains, value: x}]\ntests: cases.yaml\n", "utf-8")
    loaded = load_eval(path)
    assert (loaded.tests[0].id, loaded.tests[0].input) == ("001", "on")
    assert [w.split(": the unquoted")[0] for w in loaded.warnings] == [
        f"{tmp_path / 'cases.yaml'}:1: tests[0].id",
        f"{tmp_path / 'cases.yaml'}:2: tests[0].input",
    ]


def test_targets_and_mock_answers_keep_the_text(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(
        "targets:\n  - {name: 001, kind: mock, default: yes}\n"
        "  - {name: j, kind: openai, model: 4.10}\n",
        encoding="utf-8",
    )
    targets = load_targets(path)
    assert targets.get("001").default == "yes"
    assert targets.get("j").model == "4.10"


def test_output_yes_is_an_answer_not_a_list_error(tmp_path: Path) -> None:
    path = tmp_path / "o.eval.yaml"
    path.write_text(
        "graders: [{type: contains, value: x}]\ntests: [{id: a, input: q, output: yes}]\n"
    )
    assert load_eval(path).tests[0].output == "yes"


def test_validate_and_run_warn_at_the_line_of_each_unquoted_value(tmp_path: Path) -> None:
    path = tmp_path / "yes.eval.yaml"
    path.write_text(YES, encoding="utf-8")
    expected = [
        f"warning: {path}:4: graders[0].value: the unquoted yes is kept as the text 'yes', "
        "though YAML 1.1 reads it as a boolean: quote it to be sure",
        f"warning: {path}:6: tests[0].id: the unquoted 001 is kept as the text '001', "
        "though YAML reads it as a number: quote it to be sure",
        f"warning: {path}:9: tests[1].id: the unquoted 1e3 is kept as the text '1e3', "
        "though YAML reads it as a number: quote it to be sure",
    ]
    checked = run_cli("validate", str(path), cwd=tmp_path, env=cli_env())
    assert checked.returncode == 0, checked.stderr
    assert [line for line in checked.stderr.splitlines() if "warning" in line] == expected

    out = tmp_path / "out"
    ran = run_cli(str(path), "--out", str(out), "-q", cwd=tmp_path, env=cli_env())
    assert ran.returncode == 1, ran.stderr  # "True story" fails the gate: yes is not True
    assert [line for line in ran.stderr.splitlines() if "warning" in line] == expected
    results = {
        r["id"]: r["status"]
        for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    assert results == {"001": "passed", "1e3": "failed"}


def test_a_quoted_value_gets_no_warning(tmp_path: Path) -> None:
    path = tmp_path / "q.eval.yaml"
    path.write_text(
        "graders: [{type: contains, value: 'yes', negate: no}]\n"
        "tests: [{id: '001', input: \"on\", output: x, metadata: {n: 5}}]\n"
    )
    assert load_eval(path).warnings == []


def test_validate_and_run_warn_at_the_line_of_an_unquoted_value_in_targets_yaml(
    tmp_path: Path,
) -> None:
    targets = tmp_path / "targets.yaml"
    targets.write_text("targets:\n  - name: sut\n    kind: mock\n    default: on\n", "utf-8")
    path = tmp_path / "s.eval.yaml"
    path.write_text(
        "target: sut\ngraders: [{type: contains, value: 'on'}]\ntests: [{id: a, input: q}]\n",
        encoding="utf-8",
    )
    expected = (
        f"warning: {targets}:4: targets[0].default: the unquoted on is kept as the text 'on', "
        "though YAML 1.1 reads it as a boolean: quote it to be sure"
    )
    checked = run_cli("validate", str(path), cwd=tmp_path, env=cli_env())
    assert checked.returncode == 0, checked.stderr
    assert [line for line in checked.stderr.splitlines() if "warning" in line] == [expected]
    ran = run_cli(str(path), "--out", str(tmp_path / "out"), "-q", cwd=tmp_path, env=cli_env())
    assert ran.returncode == 0, ran.stderr  # the mock answers "on", which contains 'on'
    assert [line for line in ran.stderr.splitlines() if "warning" in line] == [expected]


def test_a_rubric_keeps_the_text_of_its_version_and_criterion_names(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(
        "version: 1.10\ncriteria:\n  - {name: 001, weight: 1}\n  - {name: no, weight: 1}\n",
        encoding="utf-8",
    )
    rubric = load_rubric_file(path)
    assert rubric.version == "1.10"
    assert [c.name for c in rubric.criteria] == ["001", "no"]
