"""A matrix run (docs/results.md, "A matrix run"): several targets graded as one run, one
bundle with a result line per (case, target), per-target statistics, every report showing the
matrix, resume and merge per cell, compare pairing cells. Run in this process through the
Python API with two scripted ``mock`` targets that answer differently and a deterministic
grader, so it costs no grader process; the README's own matrix (the ``local`` and ``mock``
judges) runs end to end under ``slow`` and in the browser test of ``evalrun view``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import evalrun
from evalrun.reporters import load_bundle, write_reports
from evalrun.reporters.compare import compare_bundles
from evalrun.reporters.merge import merge_bundles
from evalrun.results.matrix import build_matrix
from evalrun.results.reader import read_case_results
from evalrun.session import EvalError
from tests.conftest import read_bundle, run_cli

TARGETS = """
targets:
  - {name: paris-bot, kind: mock, default: "It is Paris."}
  - {name: london-bot, kind: mock, default: "It is London."}
  - {name: wordy-bot, kind: mock, default: "Paris, I think; or London."}
"""

SUITE = """
description: capitals
graders:
  - {type: icontains, value: paris}
tests:
  - {id: france, input: "Capital of France?"}
  - {id: also-france, input: "And again?"}
  - {id: recorded, input: Recorded answer, output: Rome}
"""


def project(
    tmp_path: Path, suite: str = SUITE, name: str = "capitals", targets: str = TARGETS
) -> Path:
    (tmp_path / "targets.yaml").write_text(targets)
    path = tmp_path / f"{name}.eval.yaml"
    path.write_text(textwrap.dedent(suite))
    return path


def run(path: Path, out: Path, targets: Any, **options: Any) -> evalrun.RunOutcome:
    return evalrun.run(path, target=targets, out=out, quiet=True, **options)


def test_two_targets_are_one_bundle_with_a_cell_per_case_and_target(tmp_path: Path) -> None:
    path = project(tmp_path)
    out = tmp_path / "run"
    outcome = run(path, out, ["paris-bot", "london-bot"])
    assert outcome.exit_code == 1  # london-bot fails both asked cases; `recorded` fails in both
    lines, summary = read_bundle(out)
    cells = sorted((line["id"], line["target"], line["status"]) for line in lines)
    assert cells == [
        ("also-france", "london-bot", "failed"),
        ("also-france", "paris-bot", "passed"),
        ("france", "london-bot", "failed"),
        ("france", "paris-bot", "passed"),
        ("recorded", "london-bot", "failed"),
        ("recorded", "paris-bot", "failed"),
    ]
    assert summary["target"] is None and summary["matrix"] == ["paris-bot", "london-bot"]
    assert summary["counts"]["total"] == 6 and summary["missing"] == 0
    columns = {c["target"]: c for c in summary["columns"]}
    assert list(columns) == ["paris-bot", "london-bot"]  # the order of --target
    assert columns["paris-bot"]["counts"] == {
        "passed": 2,
        "failed": 1,
        "error": 0,
        "unscored": 0,
        "total": 3,
    }
    assert columns["london-bot"]["counts"]["failed"] == 3
    assert columns["paris-bot"]["mean_score"] == pytest.approx(2 / 3)
    assert columns["london-bot"]["mean_score"] == 0.0
    low, high = columns["paris-bot"]["pass_rate_ci"]
    assert low < 2 / 3 < high  # Wilson, per column
    assert columns["paris-bot"]["mean_score_ci"] is not None


def test_every_report_shows_the_matrix(tmp_path: Path) -> None:
    path = project(tmp_path)
    out = tmp_path / "run"
    run(path, out, ["paris-bot", "london-bot"])
    md = (out / "report.md").read_text()
    assert "| Case | paris-bot | london-bot |" in md
    # problem rows first: a row is as bad as its worst cell
    rows = [line for line in md.splitlines() if line.startswith("| ") and "failed" in line]
    assert rows[0].startswith("| france |") or rows[0].startswith("| also-france |")
    assert "| recorded | ❌ failed 0.000 | ❌ failed 0.000 |" in md
    assert "| paris-bot | 3 | 2 | 1 | 0 | 0 |" in md  # the per-target summary
    assert "**france @ london-bot**: failed" in md
    html = (out / "report.html").read_text().replace("<wbr>", "")
    assert 'id="matrix-table"' in html and 'id="column-table"' in html
    assert "france @ london-bot" in html
    # the run wrote them as `evalrun report` does, byte for byte
    written = {name: (out / name).read_bytes() for name in ("report.md", "report.html")}
    write_reports(out, ("md", "html"))
    assert {name: (out / name).read_bytes() for name in written} == written
    junit = (out / "junit.xml").read_text()
    assert 'name="france @ london-bot"' in junit and 'name="france @ paris-bot"' in junit
    write_reports(out, ("json",))
    report = json.loads((out / "report.json").read_text())
    assert report["matrix"]["columns"] == ["paris-bot", "london-bot"]
    rows = {row["id"]: row["cells"] for row in report["matrix"]["rows"]}
    assert rows["france"] == {
        "paris-bot": {"status": "passed", "score": 1.0},
        "london-bot": {"status": "failed", "score": 0.0},
    }
    assert {f["target"] for f in report["failures"]} == {"paris-bot", "london-bot"}


def test_one_target_writes_the_files_it_always_wrote(tmp_path: Path) -> None:
    """No new key in a run of one target: not in results.jsonl, summary.json nor report.json."""
    path = project(tmp_path)
    out = tmp_path / "run"
    run(path, out, "paris-bot")
    lines, summary = read_bundle(out)
    assert "matrix" not in summary and "columns" not in summary
    assert summary["target"] == "paris-bot"
    assert all(set(line) >= {"id", "target"} and "column" not in line for line in lines)
    assert "## Matrix" not in (out / "report.md").read_text()


def test_resume_grades_only_the_missing_cells(tmp_path: Path) -> None:
    path = project(tmp_path)
    out = tmp_path / "run"
    run(path, out, ["paris-bot", "london-bot"])
    results = out / "results.jsonl"
    lines = results.read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["target"] == "paris-bot"]
    results.write_text("\n".join(kept) + "\n")  # london-bot's column was lost
    outcome = run(path, out, ["paris-bot", "london-bot"], resume=out)
    assert outcome.exit_code == 1
    after, summary = read_bundle(out)
    assert after[:3] == [json.loads(line) for line in kept]  # kept as they were
    assert sorted(line["target"] for line in after[3:]) == ["london-bot"] * 3
    assert summary["counts"]["total"] == 6 and summary["missing"] == 0


def test_shards_of_a_matrix_run_merge_cell_by_cell(tmp_path: Path) -> None:
    path = project(tmp_path)
    shards = [tmp_path / "s1", tmp_path / "s2"]
    for n, shard in enumerate(shards, start=1):
        run(path, shard, ["paris-bot", "london-bot"], shard=f"{n}/2")
    merged = merge_bundles(shards, tmp_path / "merged")
    summary = merged.summary
    assert summary["counts"]["total"] == 6 and summary["matrix"] == ["paris-bot", "london-bot"]
    assert [c["target"] for c in summary["columns"]] == ["paris-bot", "london-bot"]
    cells = {(c.id, c.target) for c in read_case_results(tmp_path / "merged")}
    assert len(cells) == 6


def test_compare_pairs_two_matrix_runs_cell_by_cell(tmp_path: Path) -> None:
    path = project(tmp_path)
    before, after = tmp_path / "before", tmp_path / "after"
    run(path, before, ["paris-bot", "london-bot"])
    run(path, after, ["paris-bot", "wordy-bot"])
    comparison = compare_bundles(load_bundle(before), load_bundle(after))
    shared = {c.id for c in comparison.cases}
    assert shared == {"france @ paris-bot", "also-france @ paris-bot", "recorded @ paris-bot"}
    assert set(comparison.only_base) == {
        f"{i} @ london-bot" for i in ("france", "also-france", "recorded")
    }
    assert "france @ wordy-bot" in comparison.only_new


def test_the_matrix_keeps_problem_rows_first_and_caps_its_rows() -> None:
    from report_helpers import case, grader

    results = []
    for i in range(6):
        for target, score in (("a", 0.9), ("b", 0.1 if i in (2, 4) else 0.9)):
            cell = case(f"c{i}", [grader("g", score)])
            cell.target = target
            results.append(cell)
    matrix = build_matrix(results, ["b", "a"])
    assert matrix.columns == ["b", "a"]
    assert [row.case_id for row in matrix.rows] == ["c2", "c4", "c0", "c1", "c3", "c5"]
    capped = build_matrix(results, max_rows=3)
    assert len(capped.rows) == 3 and capped.more == 3


def test_bad_matrix_input_is_refused_before_anything_runs(tmp_path: Path) -> None:
    path = project(tmp_path)
    with pytest.raises(EvalError) as caught:
        run(path, tmp_path / "o", ["paris-bot", "no-such-bot"])
    assert "--target: unknown target 'no-such-bot'" in str(caught.value)
    assert not (tmp_path / "o").exists()
    both = project(
        tmp_path,
        SUITE.replace(
            "description: capitals",
            "description: c\ntarget: paris-bot\ntargets: [paris-bot, london-bot]",
        ),
        name="both",
    )
    with pytest.raises(EvalError) as caught:
        evalrun.run(both, out=tmp_path / "p", quiet=True)
    assert f"{both}:4: targets: Value error, give 'target' or 'targets', not both" in str(
        caught.value
    )


def test_the_eval_file_may_name_the_matrix(tmp_path: Path) -> None:
    path = project(
        tmp_path,
        SUITE.replace("description: capitals", "description: c\ntargets: [london-bot, paris-bot]"),
    )
    out = tmp_path / "run"
    evalrun.run(path, out=out, quiet=True)
    _, summary = read_bundle(out)
    assert summary["matrix"] == ["london-bot", "paris-bot"]
    unknown = project(
        tmp_path,
        SUITE.replace("description: capitals", "description: c\ntargets: [paris-bot, nope-bot]"),
        name="unknown",
    )
    with pytest.raises(EvalError) as caught:
        evalrun.run(unknown, out=tmp_path / "u", quiet=True)
    assert f"{unknown}:3: targets[1]: unknown target 'nope-bot'" in str(caught.value)
    # --target still overrides the file, and one --target is a plain run
    run(path, tmp_path / "one", "wordy-bot")
    _, one = read_bundle(tmp_path / "one")
    assert one["target"] == "wordy-bot" and "matrix" not in one


@pytest.mark.slow  # a real `evalrun` process (~4 s on a loaded 2-core machine)
def test_the_command_line_takes_target_twice(tmp_path: Path) -> None:
    path = project(tmp_path)
    out = tmp_path / "run"
    done = run_cli(str(path), "--target", "paris-bot", "--target", "london-bot", "--out", str(out))
    assert done.returncode == 1, done.stderr
    assert "paris-bot" in done.stdout and "london-bot" in done.stdout
    assert "all 2 targets: 6 cells: 2 passed, 4 failed" in done.stdout
    assert "france @ london-bot" in done.stderr  # the progress lines name the cell


def test_the_terminal_table_is_the_matrix_with_a_line_per_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalrun.commands.run import _print_table

    path = project(tmp_path)
    out = tmp_path / "run"
    run(path, out, ["paris-bot", "london-bot"])
    _, summary = read_bundle(out)
    rows = read_case_results(out)
    _print_table(rows, len(rows), summary, out)
    shown = capsys.readouterr().out
    lines = shown.splitlines()
    header = next(line for line in lines if "case" in line)
    assert header.index("paris-bot") < header.index("london-bot")
    france = next(line for line in lines if " france " in line)
    assert "passed 1.000" in france and "failed 0.000" in france
    assert "paris-bot: 3 cases: 2 passed, 1 failed" in shown
    assert "london-bot: 3 cases: 3 failed" in shown
    assert "all 2 targets: 6 cells: 2 passed, 4 failed" in shown


def test_resume_grades_an_errored_cell_again_and_its_last_line_wins(tmp_path: Path) -> None:
    path = project(tmp_path)
    out = tmp_path / "run"
    run(path, out, ["paris-bot", "london-bot"])
    results = out / "results.jsonl"
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    for line in lines:
        if (line["id"], line["target"]) == ("france", "paris-bot"):
            line.update(status="error", score=None, error="target 'paris-bot' failed: boom")
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run(path, out, ["paris-bot", "london-bot"], resume=out)
    after, summary = read_bundle(out)
    assert len(after) == 7  # appended, never rewritten
    assert (after[-1]["id"], after[-1]["target"], after[-1]["status"]) == (
        "france",
        "paris-bot",
        "passed",
    )
    assert summary["counts"] == {"passed": 2, "failed": 4, "error": 0, "unscored": 0, "total": 6}
    paris = next(c for c in summary["columns"] if c["target"] == "paris-bot")
    assert paris["counts"]["error"] == 0 and paris["counts"]["passed"] == 2


def test_history_gives_each_target_of_a_matrix_run_its_own_point(tmp_path: Path) -> None:
    from evalrun.results.index import IndexedRun, list_runs, record
    from evalrun.viewer.catalog import history

    path = project(tmp_path)
    index = tmp_path / "index.sqlite"
    for name, targets in (("one", "paris-bot"), ("two", ["paris-bot", "london-bot"])):
        out = tmp_path / name
        outcome = run(path, out, targets)
        _, summary = read_bundle(out)
        record(index, IndexedRun.from_summary(summary, out, outcome.exit_code, None))
    assert [r.target for r in list_runs(index)] == ["paris-bot, london-bot", "paris-bot"]
    series = {s["target"]: s["points"] for s in history(index, "capitals")["series"]}
    assert list(series) == ["paris-bot", "london-bot"]
    assert [p["id"] for p in series["paris-bot"]] == [1, 2]
    assert series["paris-bot"][1]["pass_rate"] == pytest.approx(2 / 3)
    assert series["london-bot"][0]["pass_rate"] == 0.0 and series["london-bot"][0]["total"] == 3


def test_the_response_cache_keeps_each_targets_answers_apart(tmp_path: Path) -> None:
    """A second run answers every cell from the cache, each with its own target's answer."""
    path = project(tmp_path)
    (tmp_path / "targets.yaml").write_text(
        TARGETS.replace("kind: mock,", "kind: mock, cache: true,")
    )
    cache = tmp_path / "cache"
    for name in ("first", "second"):
        run(path, tmp_path / name, ["paris-bot", "london-bot"], cache_dir=cache)
    first, _ = read_bundle(tmp_path / "first")
    second, _ = read_bundle(tmp_path / "second")
    asked = [line for line in second if line["id"] != "recorded"]
    assert len(asked) == 4 and all(line["usage"]["target"]["cached"] for line in asked)
    assert not any(line.get("usage", {}).get("target", {}).get("cached") for line in first)
    answers = {(line["id"], line["target"]): line["output"] for line in asked}
    assert answers[("france", "paris-bot")] == "It is Paris."
    assert answers[("france", "london-bot")] == "It is London."
