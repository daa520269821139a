"""What CI shows first: the JUnit failure message (read with junitparser), GitHub annotations
on the eval file's lines, and the results table when stdout is not a terminal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_cli
from report_helpers import case, grader, mixed_cases, write_bundle

from evalrun.reporters import write_reports
from evalrun.reporters.bundle_view import REASON_LIMIT

junitparser = pytest.importorskip("junitparser")

EVAL = """\
description: Capitals, two of them wrong on purpose
graders:
  - type: contains
    value: Paris
tests:
  - id: france-answers-paris
    input: What is the capital of France?
    output: Paris.
  - id: france-answers-lyon-and-this-id-is-long-enough-to-be-cut-at-eighty-columns
    input: What is the capital of France?
    output: Lyon.
  - id: france-answers-nothing
    input: What is the capital of France?
    output: I do not know.
"""
#: The failing cases and the line each starts on in EVAL (its ``- id:`` line), counted by hand.
LINES = {
    "france-answers-lyon-and-this-id-is-long-enough-to-be-cut-at-eighty-columns": 9,
    "france-answers-nothing": 12,
}


def test_the_hand_counted_lines_are_right() -> None:
    lines = EVAL.splitlines()
    for case_id, line in LINES.items():
        assert lines[line - 1] == f"  - id: {case_id}"


def _junit_results(path: Path) -> dict[str, list]:
    xml = junitparser.JUnitXml.fromfile(str(path))
    return {tc.name: list(tc.result) for suite in xml for tc in suite}


def test_junit_failure_message_is_the_grader_and_its_reason(tmp_path: Path) -> None:
    long_reason = "the answer ranks the relevant passage last. " * 20
    cases = [
        *mixed_cases(),
        case("long", [grader("precision", 0.1, reason=long_reason)]),
        case("lines", [grader("judge", 0.0, reason="first line says why\nsecond line: detail")]),
    ]
    (path,) = write_reports(write_bundle(tmp_path / "run", cases), ("junit",))
    results = _junit_results(path)

    (failure,) = results["beta-2"]
    assert isinstance(failure, junitparser.Failure)
    assert failure.message == "contains: failed (score 0.000 < threshold 0.5): no Paris"
    assert "no Paris" in failure.text  # the body keeps the details
    (error,) = results["gamma"]
    assert isinstance(error, junitparser.Error)
    assert error.message == "precision: error, exit 1: ValueError: boom"

    (cut,) = results["long"]
    assert cut.message.startswith("precision: failed (score 0.100 < threshold 0.5): the answer")
    assert len(cut.message) == REASON_LIMIT and cut.message.endswith("…")
    assert long_reason.strip() in cut.text  # whole in the body

    (multi,) = results["lines"]
    assert multi.message == "judge: failed (score 0.000 < threshold 0.5): first line says why …"
    assert "second line: detail" in multi.text
    (skipped,) = results["delta"]
    assert isinstance(skipped, junitparser.Skipped)
    assert skipped.message == "unscored: precision: abstained: judge unavailable"
    assert results["alpha"] == []


def _github_env(workspace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return {**env, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace)}


def _annotations(stdout: str) -> dict[str, str]:
    """Case id -> its ``::error`` line."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("::error "):
            for case_id in LINES:
                if f"%3A {case_id} " in line:
                    out[case_id] = line
    return out


def test_annotations_point_at_the_case_line_of_the_eval_file(tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    (workspace / "evals").mkdir(parents=True)
    (workspace / "evals" / "capitals.eval.yaml").write_text(EVAL)
    run = run_cli(
        "evals/capitals.eval.yaml",
        "--out",
        str(tmp_path / "out"),
        cwd=workspace,
        env=_github_env(workspace),
    )
    assert run.returncode == 1, run.stderr
    found = _annotations(run.stdout)
    assert set(found) == set(LINES), run.stdout
    for case_id, line in LINES.items():
        assert found[case_id].startswith(
            f"::error file=evals/capitals.eval.yaml,line={line},title="
        ), found[case_id]


def test_annotations_point_into_a_jsonl_tests_file(tmp_path: Path) -> None:
    """With ``tests: cases.jsonl`` the line is the case's line in that file, and the path is
    relative to GITHUB_WORKSPACE even when the run starts elsewhere."""
    workspace = tmp_path / "repo"
    evals = workspace / "suite"
    evals.mkdir(parents=True)
    (evals / "cases.jsonl").write_text(
        '{"id": "ok", "input": "q", "output": "Paris"}\n'
        "\n"
        '{"id": "france-answers-nothing", "input": "q", "output": "no idea"}\n'
    )
    (evals / "j.eval.yaml").write_text(
        "graders:\n  - type: contains\n    value: Paris\ntests: cases.jsonl\n"
    )
    run = run_cli(
        str(evals / "j.eval.yaml"),
        "--out",
        str(tmp_path / "out"),
        cwd=tmp_path,
        env=_github_env(workspace),
    )
    assert run.returncode == 1, run.stderr
    (line,) = [x for x in run.stdout.splitlines() if x.startswith("::error ")]
    assert line.startswith("::error file=suite/cases.jsonl,line=3,title="), line


def test_the_table_keeps_whole_names_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "capitals.eval.yaml").write_text(EVAL)
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("GITHUB_ACTIONS", None)
    run = run_cli(str(tmp_path / "capitals.eval.yaml"), "--out", str(tmp_path / "out"), env=env)
    assert run.returncode == 1, run.stderr
    rows = [line for line in run.stdout.splitlines() if "france-answers" in line]
    assert len(rows) == 3, run.stdout
    long_id = next(i for i in LINES if "long" in i)
    row = next(r for r in rows if long_id in r)  # whole, on one line
    assert "failed" in row and "0.000" in row
    assert "…" not in run.stdout
