"""``evalrun validate`` is a true dry run (docs/eval-files.md, docs/targets.md): targets.yaml is
checked strictly at file:line, a targets file among the files named is skipped, a folder is
searched for eval files, and problems come in line order."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fault_helpers import cli_env

EVAL = "target: sut\ngraders: [{type: contains, value: x}]\ntests: [{id: a, input: q}]\n"


def _suite(folder: Path, targets: str, eval_text: str = EVAL) -> Path:
    (folder / "targets.yaml").write_text(targets, encoding="utf-8")
    path = folder / "s.eval.yaml"
    path.write_text(eval_text, encoding="utf-8")
    return path


def test_unknown_target_keys_are_refused_with_did_you_mean(tmp_path: Path) -> None:
    path = _suite(
        tmp_path,
        "targets:\n  - name: sut\n    kind: openai\n    model: m\n"
        "    temprature: 0\n    max_concurency: 4\n",
    )
    result = run_cli("validate", str(path), cwd=tmp_path, env=cli_env())
    targets = tmp_path / "targets.yaml"
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[:2] == [
        f"{targets}:5: targets[0].temprature: unknown key 'temprature' for kind openai; "
        "did you mean 'temperature'?",
        f"{targets}:6: targets[0].max_concurency: unknown key 'max_concurency' for kind "
        "openai; did you mean 'max_concurrency'?",
    ]


def test_a_kind_s_own_keys_are_accepted_and_typed(tmp_path: Path) -> None:
    path = _suite(
        tmp_path,
        "targets:\n  - {name: sut, kind: cli, command: [echo], cwd: ., cache: true}\n"
        "  - {name: jury, kind: panel, members: [sut], min_agreement: high}\n",
    )
    result = run_cli("validate", str(path), cwd=tmp_path, env=cli_env())
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[0] == (
        f"{tmp_path / 'targets.yaml'}:3: targets[1].min_agreement: "
        "Input should be a valid number, unable to parse string as a number"
    )


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_missing_model_is_a_configuration_error_at_its_line(tmp_path: Path, command: str) -> None:
    path = _suite(tmp_path, "targets:\n  - name: sut\n    kind: openai\n")
    args = ["validate", str(path)] if command == "validate" else [str(path), "--no-cache"]
    result = run_cli(*args, cwd=tmp_path, env=cli_env())
    assert result.returncode == 2, result.stderr
    assert (
        f"{tmp_path / 'targets.yaml'}:2: targets[0]: target 'sut' (kind openai) needs 'model'"
        in (result.stderr)
    )
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_judge_panel_that_lists_itself_is_refused(tmp_path: Path, command: str) -> None:
    path = _suite(
        tmp_path,
        "targets:\n  - {name: sut, kind: mock}\n"
        "  - {name: jury, kind: panel, members: [sut, court]}\n"
        "  - {name: court, kind: panel, members: [jury]}\n",
        EVAL.replace("target: sut", "target: sut\njudge: jury"),
    )
    args = ["validate", str(path)] if command == "validate" else [str(path), "--no-cache"]
    result = run_cli(*args, cwd=tmp_path, env=cli_env())
    assert result.returncode == 2, result.stderr
    assert (
        f"{tmp_path / 'targets.yaml'}:3: targets[1].members: panel 'jury' includes itself "
        "(jury -> court -> jury)"
    ) in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_skips_a_targets_file_named_with_the_eval_files(tmp_path: Path) -> None:
    path = _suite(tmp_path, "targets:\n  - {name: sut, kind: mock}\n")
    targets = tmp_path / "targets.yaml"
    result = run_cli("validate", str(path), str(targets), cwd=tmp_path, env=cli_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{path}: ok (1 test, 1 grader)",
        f"{targets}: skipped (a targets file, not an eval file)",
    ]


def test_validate_a_folder_checks_the_eval_files_in_it(tmp_path: Path) -> None:
    _suite(tmp_path, "targets:\n  - {name: sut, kind: mock}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "two.eval.yml").write_text(EVAL, encoding="utf-8")
    (tmp_path / "three.eval.json").write_text(
        '{"target": "sut", "graders": [{"type": "contains", "value": "x"}], '
        '"tests": [{"id": "a", "input": "q"}]}',
        encoding="utf-8",
    )
    (tmp_path / "notes.yaml").write_text("not: an eval file\n", encoding="utf-8")
    result = run_cli("validate", str(tmp_path), cwd=tmp_path, env=cli_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{tmp_path / 's.eval.yaml'}: ok (1 test, 1 grader)",
        f"{tmp_path / 'sub' / 'two.eval.yml'}: ok (1 test, 1 grader)",
        f"{tmp_path / 'three.eval.json'}: ok (1 test, 1 grader)",
    ]


def test_validate_an_empty_folder_says_so(tmp_path: Path) -> None:
    result = run_cli("validate", str(tmp_path), cwd=tmp_path, env=cli_env())
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        f"{tmp_path}: no eval files in this folder (*.eval.yaml, *.eval.yml, *.eval.json)"
    )


def test_problems_come_in_line_order(tmp_path: Path) -> None:
    path = _suite(
        tmp_path,
        "targets:\n  - {name: sut, kind: mock}\n",
        "tests:\n  - {id: a, input: q, inptu: x}\ngraders:\n  - {type: contains, weight: -1}\n"
        "target: sut\ndescription: [not, text]\n",
    )
    result = run_cli("validate", str(path), cwd=tmp_path, env=cli_env())
    assert result.returncode == 2, result.stderr
    lines = [int(line.split(":")[1]) for line in result.stderr.splitlines()[:-1]]
    assert lines == [2, 4, 6], result.stderr
