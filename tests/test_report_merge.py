"""``evalrun merge``: three shard bundles join into the unsharded bundle."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from report_helpers import case, grader, random_cases, write_bundle

from evalrun.reporters.merge import MergeError, merge_bundles
from evalrun.results.models import CaseResult

META = {"eval": "rag-demo", "complete": True, "interrupted": False, "repeat": 2}


def _shard_of(case_id: str, count: int) -> int:
    return int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % count + 1


def _calls(cases: list[CaseResult]) -> list[dict]:
    return [{"case_id": c.id, "grader": "a", "status": "ok", "latency_ms": 5.0} for c in cases]


def _shards(tmp_path: Path, cases: list[CaseResult], count: int = 3, **meta: object) -> list[Path]:
    rng = random.Random(11)
    dirs = []
    for index in range(1, count + 1):
        part = [c for c in cases if _shard_of(c.id, count) == index]
        rng.shuffle(part)  # shards finish in their own order
        dirs.append(
            write_bundle(
                tmp_path / f"shard-{index}",
                part,
                meta={
                    **META,
                    "shard": f"{index}/{count}",
                    "started_at": f"2025-01-02T03:0{index}:00+00:00",
                    "finished_at": f"2025-01-02T03:1{index}:00+00:00",
                    **meta,
                },
                judge_calls=_calls(part),
            )
        )
    return dirs


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


@pytest.fixture
def cases() -> list[CaseResult]:
    return random_cases([f"case-{i:02d}" for i in range(40)], repeats=2, seed=3)


def test_three_shards_equal_the_unsharded_run(tmp_path: Path, cases: list[CaseResult]) -> None:
    shuffled = list(cases)
    random.Random(5).shuffle(shuffled)
    whole = write_bundle(tmp_path / "whole", shuffled, meta=META, judge_calls=_calls(cases))
    shards = _shards(tmp_path, cases)
    assert all(_lines(s) for s in shards)  # every shard got some cases

    result = merge_bundles(shards, tmp_path / "merged", formats=("md", "html", "junit"))
    merged = tmp_path / "merged"

    expected = sorted(_lines(whole), key=lambda d: (d["id"], d["repeat"]))
    assert _lines(merged) == expected
    keys = [(d["id"], d["repeat"]) for d in _lines(merged)]
    assert keys == sorted(keys)

    unsharded = json.loads((whole / "summary.json").read_text())
    summary = json.loads((merged / "summary.json").read_text())
    assert summary == result.summary
    for key in (
        "counts",
        "cases",
        "mean_score",
        "median_score",
        "pass_rate",
        "graders",
        "repeat_stats",
        "usage",
        "repeat",
        "eval",
    ):
        assert summary[key] == unsharded[key], key
    assert summary["complete"] is True and summary["interrupted"] is False
    assert summary["started_at"] == "2025-01-02T03:01:00+00:00"
    assert summary["finished_at"] == "2025-01-02T03:13:00+00:00"
    assert summary["duration_s"] == 12 * 60
    assert "shard" not in summary and len(summary["merged_from"]) == 3
    calls = (merged / "judge-calls.jsonl").read_text().splitlines()
    assert len(calls) == len(cases)
    assert [p.name for p in result.reports] == ["report.md", "report.html", "junit.xml"]


def test_merged_exit_code_rejudges_the_gates(tmp_path: Path) -> None:
    passing = [case(f"p{i}", [grader("g", 0.9)]) for i in range(4)]
    errors = [case(f"e{i}", [grader("g", None, status="error")]) for i in range(2)]
    # Each shard is within --max-errors 1, the whole run is not: judged on the whole, like
    # an unsharded run.
    a = write_bundle(
        tmp_path / "a", passing[:2] + errors[:1], meta={"exit_code": 0, "max_errors": 1}
    )
    b = write_bundle(
        tmp_path / "b", passing[2:] + errors[1:], meta={"exit_code": 0, "max_errors": 1}
    )
    assert merge_bundles([a, b], tmp_path / "m1").summary["exit_code"] == 3
    # Without a recorded max_errors a shard's 3 sticks.
    a2 = write_bundle(tmp_path / "a2", passing[:2], meta={"exit_code": 0})
    b2 = write_bundle(tmp_path / "b2", errors, meta={"exit_code": 3})
    assert merge_bundles([a2, b2], tmp_path / "m4").summary["exit_code"] == 3

    c = write_bundle(tmp_path / "c", passing[:2], meta={"exit_code": 0, "threshold": 0.95})
    d = write_bundle(tmp_path / "d", passing[2:], meta={"exit_code": 0, "threshold": 0.95})
    assert merge_bundles([c, d], tmp_path / "m2").summary["exit_code"] == 1  # mean 0.9 < 0.95

    e = write_bundle(tmp_path / "e", passing[:2], meta={"exit_code": 130, "interrupted": True})
    assert merge_bundles([e, d], tmp_path / "m3").summary["exit_code"] == 130


def test_merge_refuses_overlapping_shards(tmp_path: Path, cases: list[CaseResult]) -> None:
    a = write_bundle(tmp_path / "a", cases[:10])
    b = write_bundle(tmp_path / "b", cases[5:15])
    with pytest.raises(MergeError, match="overlap"):
        merge_bundles([a, b], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_merge_notices_a_missing_shard(tmp_path: Path, cases: list[CaseResult]) -> None:
    shards = _shards(tmp_path, cases)
    result = merge_bundles([shards[0], shards[2]], tmp_path / "out")
    assert result.warnings == ["shard(s) 2/3 missing"]
    assert result.summary["complete"] is False


def test_merge_guards_its_output(tmp_path: Path, cases: list[CaseResult]) -> None:
    shards = _shards(tmp_path, cases)
    with pytest.raises(MergeError, match="must not be one of the inputs"):
        merge_bundles(shards, shards[0])
    merge_bundles(shards, tmp_path / "out")
    with pytest.raises(MergeError, match="--force"):
        merge_bundles(shards, tmp_path / "out")
    merge_bundles(shards, tmp_path / "out", force=True)
    with pytest.raises(MergeError, match="not a run bundle"):
        merge_bundles([tmp_path / "nowhere"], tmp_path / "out2")
    other = write_bundle(tmp_path / "other", cases[:1], meta={"eval": "another-eval"})
    with pytest.raises(MergeError, match="different evals"):
        merge_bundles([shards[0], other], tmp_path / "out3")
