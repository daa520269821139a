"""AgentV's result layout: ``--format agentv`` writes what scripts written for AgentV read, and
``compare``/``report`` read AgentV's runs (tests/data/agentv_runs, MIT) and refuse a folder that
is neither (docs/results.md, "AgentV's result layout")."""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import pytest
from report_helpers import case, grader, write_bundle

from evalrun.reporters import BundleNotFound, load_bundle, write_reports
from evalrun.reporters.compare import compare_bundles
from evalrun.results.reader import read_case_results
from tests.conftest import ROOT, read_bundle, run_cli

RUNS = ROOT / "tests" / "data" / "agentv_runs"
TREND = sorted((RUNS / "trend").iterdir())

EVAL_FILE = "evals/rivers.eval.yaml"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of two cases, one right, with AgentV's layout written beside it."""
    cases = [
        case("capital", [grader("contains", 1.0)], output="Paris is the capital."),
        case(
            "river/long",
            [grader("contains", 0.0), grader("icontains", 1.0)],
            output="The Danube.",
        ),
    ]
    out = write_bundle(
        tmp_path_factory.mktemp("suite") / "out",
        cases,
        meta={"eval": "rivers", "eval_file": EVAL_FILE},
    )
    assert write_reports(out, ("agentv",)) == [out / "index.jsonl"]
    return out


def rows(folder: Path) -> dict[str, dict]:
    lines = (folder / "index.jsonl").read_text().splitlines()
    return {row["test_id"]: row for row in map(json.loads, lines)}


def test_the_index_has_a_row_per_case_with_agentvs_fields(bundle: Path) -> None:
    results, summary = read_bundle(bundle)
    index = rows(bundle)
    assert set(index) == {"capital", "river/long"}
    for result in results:
        row = index[result["id"]]
        assert row["score"] == result["score"]
        assert row["suite"] == summary["eval"]
        assert row["timestamp"] == summary["started_at"]
        assert [s["name"] for s in row["scores"]] == [g["name"] for g in result["graders"]]
    assert index["capital"]["execution_status"] == "ok"
    assert index["river/long"]["execution_status"] == "quality_failure"
    assert index["river/long"]["score"] == 0.5


def test_each_test_folder_is_named_as_agentv_names_it(bundle: Path) -> None:
    """The id made safe for a path, and 12 hex digits of the SHA-256 of the row's identity as
    AgentV serialises it (JSON.stringify of eval_path, suite, test_id, target, variant)."""
    summary = json.loads((bundle / "summary.json").read_text())
    row = rows(bundle)["river/long"]
    assert summary["eval_file"] == EVAL_FILE
    identity = (
        '{"eval_path":"evals/rivers.eval.yaml","suite":"rivers",'
        '"test_id":"river/long","target":"mock","variant":null}'
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    assert row["result_dir"] == f"river_long--{digest}"
    assert row["grading_path"] == f"river_long--{digest}/sample-1/grading.json"


def test_grading_result_and_answer_files(bundle: Path) -> None:
    row = rows(bundle)["river/long"]
    grading = json.loads((bundle / row["grading_path"]).read_text())
    assert (grading["pass"], grading["score"]) == (False, 0.5)
    assert [c["assertion"]["name"] for c in grading["component_results"]] == [
        "contains",
        "icontains",
    ]
    assert [c["pass"] for c in grading["component_results"]] == [False, True]
    sample = (bundle / row["grading_path"]).parent
    result = json.loads((sample / "result.json").read_text())
    assert result["status"] == "failed"
    assert result["execution_status"] == "quality_failure"
    assert result["grading_path"] == "./grading.json"
    assert (bundle / row["answer_path"]).read_text() == "The Danube."


def test_an_exported_run_reads_back_as_the_same_run(bundle: Path, tmp_path: Path) -> None:
    agentv = tmp_path / "agentv-run"
    agentv.mkdir()
    shutil.copy(bundle / "index.jsonl", agentv)
    for folder in bundle.iterdir():
        if folder.is_dir() and "--" in folder.name:
            shutil.copytree(folder, agentv / folder.name)
    before = {c.id: (c.status, c.score, c.output) for c in read_case_results(bundle)}
    after = {c.id: (c.status, c.score, c.output) for c in read_case_results(agentv)}
    assert after == before
    graders = {c.id: [(g.name, g.score) for g in c.graders] for c in read_case_results(agentv)}
    assert graders["river/long"] == [("contains", 0.0), ("icontains", 1.0)]
    comparison = compare_bundles(load_bundle(bundle), load_bundle(agentv)).to_dict()
    assert comparison["overall"]["paired"] == 2
    assert comparison["overall"]["ties"] == 2
    assert comparison["only_base"] == comparison["only_new"] == []


def test_compare_reads_agentvs_own_runs(tmp_path: Path) -> None:
    """AgentV's trend example: two runs, two targets each, so a case is ``test @ target``."""
    base, new = TREND
    comparison = compare_bundles(load_bundle(base), load_bundle(new)).to_dict()
    cases = {c["id"]: (c["base"], c["new"]) for c in comparison["cases"]}
    assert cases == {
        "summary-accuracy @ claude-sonnet": (0.94, 0.88),
        "tool-selection @ claude-sonnet": (0.90, 0.84),
        "summary-accuracy @ gpt-5": (0.88, 0.90),
    }


def test_report_reads_an_agentv_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(TREND[0], run)
    (written,) = write_reports(run, ("json",))
    report = json.loads(written.read_text())
    assert report["counts"]["total"] == 3
    assert report["counts"]["passed"] == 3  # no execution status: AgentV's 0.8 decides
    camel = tmp_path / "camel"
    shutil.copytree(RUNS / "camel-replay", camel)
    (case,) = read_case_results(camel)
    assert (case.id, case.status, case.score, case.target) == (
        "wtg-replay-fail",
        "failed",
        0.4,
        "codex",
    )
    assert case.usage.to_dict()["target"] == {
        "input": 10,
        "output": 5,
        "total": 15,
        "cached": False,
        "replayed": False,
        "cost_usd": 0.012,
    }
    assert case.timings.to_dict() == {"total_ms": 1234}


def neither(tmp_path: Path, layout: str) -> Path:
    folder = tmp_path / layout
    folder.mkdir()
    if layout == "agentv-summary-only":
        (folder / "summary.json").write_text('{"index_path": "index.jsonl", "counts": {}}')
    if layout == "other-files":
        (folder / "notes.txt").write_text("hello")
    return folder


@pytest.mark.parametrize("layout", ["empty", "agentv-summary-only", "other-files"])
def test_a_folder_that_is_neither_is_refused(layout: str, tmp_path: Path) -> None:
    with pytest.raises(BundleNotFound, match="nor an AgentV run"):
        load_bundle(neither(tmp_path, layout))


@pytest.mark.slow
def test_report_and_compare_refuse_it_with_a_usage_error(tmp_path: Path) -> None:
    folder = neither(tmp_path, "agentv-summary-only")
    report = run_cli("report", str(folder))
    assert report.returncode == 2
    assert "neither an evalrun run bundle" in report.stderr
    assert "nor an AgentV run (no index.jsonl)" in report.stderr
    assert not (folder / "report.md").exists()
    compare = run_cli("compare", str(folder), str(TREND[0]))
    assert compare.returncode == 2
    assert "neither an evalrun run bundle" in compare.stderr
    out = tmp_path / "c.json"
    agentv = run_cli("compare", str(TREND[0]), str(TREND[1]), "--json", str(out))
    assert agentv.returncode == 0, agentv.stdout + agentv.stderr
    assert json.loads(out.read_text())["overall"]["paired"] == 3


@pytest.mark.slow
def test_a_run_then_report_format_agentv_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "rivers.eval.yaml").write_text(textwrap.dedent(SUITE))
    out = tmp_path / "out"
    result = run_cli("run", str(tmp_path / "rivers.eval.yaml"), "--out", str(out), "-q")
    assert result.returncode == 1, result.stdout + result.stderr
    written = run_cli("report", str(out), "--format", "agentv")
    assert written.returncode == 0, written.stdout + written.stderr
    assert written.stdout.strip() == str(out / "index.jsonl")
    results, _ = read_bundle(out)
    index = rows(out)
    assert {r["id"]: r["score"] for r in results} == {k: v["score"] for k, v in index.items()}
    assert index["river/long"]["execution_status"] == "quality_failure"


SUITE = """
description: two answers, one right
tests:
  - id: capital
    input: Capital of France?
    output: Paris is the capital.
    graders:
      - {type: contains, value: Paris}
  - id: river/long
    input: Longest river?
    output: The Danube.
    graders:
      - {type: contains, value: Nile}
      - {type: icontains, value: danube}
"""


def test_a_crashed_evalrun_bundle_with_only_its_summary_still_reads(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text('{"eval": "x", "complete": false}')
    assert load_bundle(tmp_path).meta.eval == "x"


def test_rows_that_are_not_results_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "index.jsonl").write_text(
        '{"test_id": "a", "score": 0.9}\n'
        "not json\n"
        '{"test_id": "b"}\n'
        '{"score": 1}\n'
        '{"test_id": "c", "score": 0.5, "execution_status": "execution_error"}\n'
        '{"test_id": "d", "score": 0.2, "answer_path": "../../../etc/passwd"}\n'
    )
    cases = {c.id: (c.status, c.score, c.output) for c in read_case_results(tmp_path)}
    assert cases == {
        "a": ("passed", 0.9, None),
        "c": ("error", 0.5, None),
        "d": ("failed", 0.2, None),
    }
