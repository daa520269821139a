"""``evalrun calibrate --mode``: the RAG graders' judge modes compared on the same labelled cases
(docs/judges.md, "Comparing judge modes"): the eval rewritten per mode, the side-by-side table,
the recommendation per case, and the command end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evalrun.calibration.compare import calibrate
from evalrun.calibration.modes import mode_graders, with_judge_mode
from evalrun.calibration.render import markdown
from evalrun.results.models import CaseResult, GraderOutcome, ProxyUsage
from evalrun.spec.loader import load_eval
from tests.conftest import run_cli
from tests.fault_helpers import cli_env


def _write(folder: Path, data: dict) -> Path:
    path = folder / "labelled.eval.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_mode_reaches_every_rag_grader_and_no_other(tmp_path: Path) -> None:
    recall = {"name": "case_recall", "type": "contextual-recall", "config": {"tools": ["search"]}}
    path = _write(
        tmp_path,
        {
            "graders": [
                {"name": "precision", "type": "contextual-precision"},
                {"name": "has_paris", "type": "contains", "value": "Paris"},
            ],
            "tests": [
                {"id": "a", "input": "q", "output": "Paris", "graders": [recall]},
                {
                    "id": "b",
                    "input": "q",
                    "turns": [
                        {"input": "q1", "graders": [{"type": "contextual-precision"}]},
                        {"input": "q2"},
                    ],
                },
            ],
        },
    )
    loaded = load_eval(path)
    assert mode_graders(loaded) == ["precision", "case_recall", "contextual-precision"]
    batched = with_judge_mode(loaded, "batched")
    assert [g.config.get("mode") for g in batched.spec.graders] == ["batched", None]
    first, second = batched.tests
    assert first.graders[0].config == {"tools": ["search"], "mode": "batched"}
    assert second.turns is not None and second.turns[0].graders[0].config == {"mode": "batched"}
    assert first.graders[0].config is not loaded.tests[0].graders[0].config  # a copy
    assert "mode" not in loaded.tests[0].graders[0].config
    with pytest.raises(ValueError, match="--mode must be one of per-item, batched"):
        with_judge_mode(loaded, "fast")


def _results(verdicts: dict[str, list[bool]], calls: int) -> list[CaseResult]:
    return [
        CaseResult(
            id=case_id,
            status="passed",
            graders=[
                GraderOutcome(
                    name="contextual_precision",
                    status="passed",
                    score=1.0,
                    details={"verdicts": {"relevant": flags}},
                    proxy=ProxyUsage(calls=calls, max_calls=20, latency_ms=10.0 * calls),
                )
            ],
        )
        for case_id, flags in verdicts.items()
    ]


LABELS = {"one": {"relevant": [True, False, True, False]}, "two": {"relevant": [False, True]}}
RIGHT = {"one": [True, False, True, False], "two": [False, True]}
ONE_WRONG = {"one": [True, True, True, False], "two": [False, True]}


def test_modes_side_by_side_and_the_cheaper_mode_wins_a_tie() -> None:
    runs = {"local/per-item": _results(RIGHT, 4), "local/batched": _results(RIGHT, 1)}
    modes = {"local/per-item": ("local", "per-item"), "local/batched": ("local", "batched")}
    cal = calibrate(LABELS, runs, modes=modes)
    assert cal.calls_per_case == {"local/per-item": 4.0, "local/batched": 1.0}
    assert cal.recommended == "local/batched"  # same kappa, fewer calls per case
    report = markdown(cal, "modes")
    assert "| judge | grader | kind | per-item | batched |" in report
    assert (
        "| local | contextual_precision | relevant | kappa 1.000 (1.000 of 6) | "
        "kappa 1.000 (1.000 of 6) |" in report
    )
    assert "| local | judge calls / case |  | 4.00 | 1.00 |" in report


def test_a_mode_that_agrees_less_is_not_recommended_for_its_calls() -> None:
    runs = {"local/per-item": _results(RIGHT, 4), "local/batched": _results(ONE_WRONG, 1)}
    modes = {"local/per-item": ("local", "per-item"), "local/batched": ("local", "batched")}
    cal = calibrate(LABELS, runs, modes=modes)
    # batched: 5 of 6 agree; people say yes 3 times, the judge 4: chance (3*4 + 3*2)/36 = 0.5
    batched = next(r for r in cal.rows if r.judge == "local/batched")
    assert batched.agreement.coefficient == pytest.approx((5 / 6 - 0.5) / 0.5)
    assert cal.recommended == "local/per-item"
    assert "kappa 0.667 (0.833 of 6)" in markdown(cal, "modes")


def test_without_modes_the_report_has_no_mode_table() -> None:
    cal = calibrate(LABELS, {"local": _results(RIGHT, 4)})
    assert cal.modes == {} and "Judge modes side by side" not in markdown(cal, "plain")


def test_mode_on_an_eval_without_rag_graders_is_a_usage_error(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "graders": [{"type": "contains", "value": "Paris"}],
            "tests": [{"id": "a", "input": "q", "output": "Paris", "labels": {"relevant": [True]}}],
        },
    )
    result = run_cli(
        "calibrate", str(path), "--judge", "mock", "--mode", "batched", cwd=tmp_path, env=cli_env()
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no grader of" in result.stderr and "has judge modes" in result.stderr


PASSAGES = ["Apples grow on trees [R].", "Bananas are yellow.", "Pears ripen [R]."]


@pytest.mark.slow
def test_calibrate_compares_modes_end_to_end(tmp_path: Path) -> None:
    """A scripted judge that marks [R] passages relevant per item and in a batch, through real
    runs: both modes agree with the labels, batched in one call per case."""
    yes, no = '{"relevant": true, "reason": "r"}', '{"relevant": false, "reason": "r"}'
    batch = json.dumps(
        {"verdicts": [{"number": n, "relevant": "[R]" in p} for n, p in enumerate(PASSAGES, 1)]}
    )
    judge = {
        "name": "scripted",
        "kind": "mock",
        "rules": [
            {"task": "relevance", "match": r"<passage>[^<]*\[R\]", "response": yes},
            {"task": "relevance", "response": no},
            {"task": "relevance-batch", "response": batch},
        ],
    }
    (tmp_path / "targets.yaml").write_text(yaml.safe_dump({"targets": [judge]}))
    retrieval = [
        {"role": "assistant", "tool_calls": [{"tool": "s", "output": {"results": PASSAGES}}]}
    ]
    case = {"input": "Which fruit?", "criteria": "Fruit.", "output": "Fruit."}
    labels = {"relevant": ["[R]" in p for p in PASSAGES]}
    tests = [{"id": i, **case, "expected_output": retrieval, "labels": labels} for i in "ab"]
    grader = {"type": "contextual-precision", "target": {"max_calls": 10}}
    path = _write(tmp_path, {"graders": [grader], "tests": tests})
    out = tmp_path / "cal"
    result = run_cli(
        "calibrate", str(path), "--judge", "scripted", "-m", "per-item", "-m", "batched",
        "-o", str(out), cwd=tmp_path, env=cli_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "calibration.json").read_text())
    assert report["calls_per_case"] == {"scripted/per-item": 3.0, "scripted/batched": 1.0}
    assert {r["judge"]: r["agreement"] for r in report["rows"]} == {
        "scripted/per-item": 1.0,
        "scripted/batched": 1.0,
    }
    assert report["recommended"] == "scripted/batched"
    assert "| scripted | judge calls / case |  | 3.00 | 1.00 |" in result.stdout
    assert (out / "runs" / "scripted_batched" / "results.jsonl").is_file()
