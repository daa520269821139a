"""The bundle's one reader and its skip rule (docs/results.md, "Reading a bundle"): every
consumer of results.jsonl and judge-calls.jsonl sees the same lines."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import run_cli
from report_helpers import case, grader, write_bundle

from evalrun.judgecall import JudgeCall
from evalrun.reporters import load_bundle
from evalrun.reporters.compare import compare_bundles
from evalrun.reporters.merge import merge_bundles
from evalrun.results import reader
from evalrun.results.scan import scan_results
from evalrun.results.summary import RunMeta

#: Lines that are not results, each with why.
DAMAGED = [
    b"\n",  # blank
    b"   \n",  # blank
    b"\xff\xfe not utf-8\n",
    b"[1, 2, 3]\n",  # JSON, not an object
    b"null\n",
    b'{"status": "passed"}\n',  # no id
    b'{"id": 7, "status": "passed"}\n',  # id not a string
    b'{"id": "x", "status": "skipped"}\n',  # unknown status
    b'{"id": "x", "status": "passed", "score": "high"}\n',
    b'{"id": "x", "status": "passed", "repeat": "one"}\n',
    b'{"id": "x", "status": "passed", "graders": [{"status": "passed"}]}\n',
    b'{"id": "x", "status": "passed", "graders": "g"}\n',
    b'{"id": "x", "status": "passed", "unknown_key": 1, "timings": {}} trailing\n',
]
#: What a crash mid-write leaves at the end of the file.
TORN = b'{"id": "torn", "status": "passed", "sco'


def _damaged_bundle(directory: Path) -> tuple[Path, list[str]]:
    good = [case(f"c{i}", [grader("g", 0.2 if i == 1 else 0.9)]) for i in range(4)]
    write_bundle(directory, good, judge_calls=[{"case_id": "c0", "status": "ok"}])
    lines = (directory / "results.jsonl").read_bytes().splitlines(keepends=True)
    mixed = b"".join(line + DAMAGED[i % len(DAMAGED)] for i, line in enumerate(lines))
    mixed += b"".join(DAMAGED[len(lines) :]) + TORN
    (directory / "results.jsonl").write_bytes(mixed)
    with open(directory / "judge-calls.jsonl", "ab") as handle:
        handle.write(b'["not", "a", "call"]\n{"case_id": "c2", "input_tokens": "many"}\n')
        handle.write(b'{"case_id": "c1", "sta')
    return directory, [c.id for c in good]


def test_every_damaged_line_is_skipped_and_every_result_kept(tmp_path: Path) -> None:
    run, ids = _damaged_bundle(tmp_path / "run")
    assert [c.id for c in reader.read_case_results(run)] == ids
    raw = (run / "results.jsonl").read_bytes()
    for offset, result in reader.result_lines(run):  # each offset is where its line starts
        assert json.loads(raw[offset:].split(b"\n", 1)[0])["id"] == result.id
    assert [c.case_id for c in reader.read_judge_calls(run)] == ["c0"]


def test_reports_merge_and_compare_read_the_same_results(tmp_path: Path) -> None:
    run, ids = _damaged_bundle(tmp_path / "run")
    view = load_bundle(run)
    assert sorted(c.id for c in view.cases) == ids
    assert view.stats.counts.total == len(ids) and view.stats.counts.failed == 1
    assert view.judge_stats["count"] == 1
    merged = merge_bundles([run], tmp_path / "merged")
    assert [c.id for c in reader.read_case_results(merged.out_dir)] == ids
    assert merged.summary["counts"]["total"] == len(ids)
    assert len(reader.read_judge_calls(merged.out_dir)) == 1
    comparison = compare_bundles(view, load_bundle(merged.out_dir))
    assert [c.id for c in comparison.cases] == ids and not comparison.only_new


def test_the_last_line_of_a_case_wins(tmp_path: Path) -> None:
    first = case("a", [grader("g", None, status="error")])
    again = case("a", [grader("g", 0.9)])
    run = write_bundle(tmp_path / "run", [first, case("b", [grader("g", 0.8)]), again])
    scan = scan_results(run, by_case=False)
    assert scan.stats.build().counts.to_dict() == {
        "passed": 2,
        "failed": 0,
        "error": 0,
        "unscored": 0,
        "total": 2,
    }
    assert [c.status for c in load_bundle(run).cases] == ["passed", "passed"]


@pytest.mark.parametrize("finished", ["passed", "failed"])
def test_resume_reads_the_same_lines(tmp_path: Path, finished: str) -> None:
    """A resumed run keeps the results the reader keeps and grades the others again."""
    (tmp_path / "suite.eval.yaml").write_text(
        textwrap.dedent(
            """
            graders:
              - type: contains
                value: Paris
            tests:
              - {id: a, input: q, output: Paris}
              - {id: b, input: q, output: Paris}
              - {id: c, input: q, output: Paris}
            """
        )
    )
    out = tmp_path / "out"
    out.mkdir()
    kept = case("a", [grader("contains", 1.0 if finished == "passed" else 0.0)])
    lines = json.dumps(kept.to_dict()).encode() + b"\n" + b"".join(DAMAGED) + TORN
    (out / "results.jsonl").write_bytes(lines)
    done = run_cli(str(tmp_path / "suite.eval.yaml"), "--resume", str(out), cwd=tmp_path)
    assert done.returncode == (0 if finished == "passed" else 1), done.stderr
    results = reader.read_case_results(out)
    assert [c.id for c in results] == ["a", "b", "c"]
    assert results[0].status == finished  # the kept line, not graded again
    # appended to, not rewritten: the damaged lines stay where they were, skipped, and the
    # torn last line was ended so the first new result starts a line of its own
    assert (out / "results.jsonl").read_bytes().startswith(lines + b"\n")


def test_a_judge_call_line_reads_back_as_written() -> None:
    call = JudgeCall(
        case_id="c1",
        grader="cp",
        target="judge",
        status="ok",
        latency_ms=12.5,
        input_tokens=3,
        output_tokens=4,
        question="q?",
        task={"kind": "statements"},
        response="yes",
        repeat=0,
    )
    line = call.to_dict()
    assert "error_code" not in line and "panel" not in line and "warnings" not in line
    assert line["repeat"] == 0 and line["cached"] is False
    assert JudgeCall.from_dict(json.loads(json.dumps(line))) == call
    old = {"case_id": "c1", "status": "error"}  # a log from before a key existed
    assert JudgeCall.from_dict(old).latency_ms is None and JudgeCall.from_dict(old).repeat is None


def test_a_lone_surrogate_escape_reads_as_json_reads_it(tmp_path: Path) -> None:
    run = write_bundle(tmp_path / "run", [case("a", [grader("g", 0.9)])])
    line = (run / "results.jsonl").read_bytes().replace(b'"an answer"', b'"an \\ud800 answer"')
    (run / "results.jsonl").write_bytes(line)
    assert [c.output for c in reader.read_case_results(run)] == ["an \ud800 answer"]


def test_summary_json_reads_back_as_typed_run_metadata(tmp_path: Path) -> None:
    run = write_bundle(
        tmp_path / "run",
        [case("a", [grader("g", 0.9)])],
        meta={"shard": "2/3", "targets": {"mock": {"calls": 1}}, "exit_code": "zero"},
    )
    meta = reader.read_meta(run)
    assert (meta.eval, meta.shard, meta.duration_s, meta.complete) == (
        "rag-demo",
        "2/3",
        60.0,
        True,
    )
    assert meta.exit_code is None  # a known key of the wrong type reads as unknown
    assert meta.extra == {"targets": {"mock": {"calls": 1}}}  # statistics are recomputed
    assert RunMeta.from_dict(meta.to_dict()) == meta
    assert reader.read_meta(tmp_path / "nowhere") == RunMeta()
