"""``evalrun score`` and ``evalrun rubrics`` as a user runs them (real processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalrun.commands.score import InputError, metrics_of, read_metrics_file
from tests.conftest import run_cli

ROWS = [
    {"id": "good", "correctness": 1.0, "completeness": 0.8, "relevance": 1.0, "clarity": 0.6},
    {"id": "partial", "correctness": 0.5, "clarity": 1.5},
]
GOOD = 0.4 * 1.0 + 0.25 * 0.8 + 0.2 * 1.0 + 0.15 * 0.6
PARTIAL = (0.4 * 0.5 + 0.15 * 1.0) / 0.55


def test_score_json_list_prints_scores_missing_and_mean(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(ROWS))
    run = run_cli("score", str(path), "--rubric", "default")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    good = next(line for line in lines if "good" in line)
    partial = next(line for line in lines if "partial" in line)
    assert f"weighted {GOOD:.4f}" in good and "missing" not in good
    assert f"weighted {PARTIAL:.4f}" in partial
    assert "missing: completeness, relevance" in partial
    assert f"mean weighted score: {(GOOD + PARTIAL) / 2:.4f}" in run.stdout


def test_score_jsonl_with_json_output_and_fail_under(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    run = run_cli("score", str(path), "--rubric", "default", "--json", "--fail-under", "0.5")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["count"] == 2
    assert report["results"][1]["missing_criteria"] == ["completeness", "relevance"]
    assert report["mean_weighted_score"] == pytest.approx((GOOD + PARTIAL) / 2)
    failing = run_cli("score", str(path), "--rubric", "default", "--fail-under", "0.9")
    assert failing.returncode == 1
    assert "below --fail-under 0.9" in failing.stdout


def test_score_results_wrapper_and_missing_as_zero(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"results": ROWS}))
    run = run_cli("score", str(path), "-r", "default", "--missing", "zero", "--json")
    assert run.returncode == 0, run.stderr
    partial = json.loads(run.stdout)["results"][1]
    assert partial["weighted_score"] == pytest.approx(0.4 * 0.5 + 0.15 * 1.0)


def test_score_reads_evalrun_case_results(tmp_path: Path) -> None:
    case = {
        "id": "c1",
        "status": "passed",
        "graders": [
            {"name": "contextual_precision", "score": 1.0},
            {"name": "contextual_recall", "score": 0.5},
            {"name": "quality", "score": None, "status": "unscored"},
        ],
    }
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(case) + "\n")
    run = run_cli("score", str(path), "--rubric", "rag", "--json")
    assert run.returncode == 0, run.stderr
    row = json.loads(run.stdout)["results"][0]
    assert row["weighted_score"] == pytest.approx(0.75)
    assert row["missing_criteria"] == ["quality"]


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("{not json", [], "invalid JSON"),
        ("[1, 2]", [], "result 1 is not an object"),
        ("[]", [], "no results"),
        ('[{"x": 1}]', [], "no result has any criterion"),
        (json.dumps(ROWS), ["--rubric", "no-such-rubric"], "unknown rubric 'no-such-rubric'"),
        (json.dumps(ROWS), ["--rubric", "quality"], "not a weighted rubric"),
        (json.dumps(ROWS), ["--missing", "maybe"], "--missing"),
    ],
)
def test_score_bad_input_exits_2(tmp_path: Path, content: str, args: list[str], message) -> None:
    path = tmp_path / "results.json"
    path.write_text(content)
    if "--rubric" not in args:
        args = ["--rubric", "default", *args]
    run = run_cli("score", str(path), *args)
    assert run.returncode == 2, run.stdout
    assert message in run.stderr


def test_score_missing_file_exits_2(tmp_path: Path) -> None:
    run = run_cli("score", str(tmp_path / "nope.json"), "--rubric", "default")
    assert run.returncode == 2
    assert "cannot read" in run.stderr


def test_rubrics_list_and_show_honour_the_rubrics_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "description: My own.\ncriteria:\n  - {name: a, weight: 1}\n  - {name: b, weight: 2}\n"
    )
    run = run_cli("rubrics", "list", "--rubrics", str(tmp_path))
    assert run.returncode == 0, run.stderr
    rows = {line.split()[0]: line for line in run.stdout.splitlines()}
    assert {"default", "agent", "code", "mine"} <= set(rows)
    assert "2 criteria  My own." in rows["mine"]
    listed = json.loads(run_cli("rubrics", "list", "--json").stdout)
    assert {r["name"] for r in listed} >= {"default", "agent", "code"}
    shown = run_cli("rubrics", "show", "mine", "--rubrics", str(tmp_path))
    assert "b  weight 2 (67%)" in shown.stdout


def test_read_results_and_metrics_helpers(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"id": 1, "metrics": {"a": 1}}')
    items = read_metrics_file(path)
    assert metrics_of(items[0]) == {"a": 1}
    path.write_text('{"a": 1}\n{"a": 2')
    with pytest.raises(InputError, match=":2: invalid JSON"):
        read_metrics_file(path)
