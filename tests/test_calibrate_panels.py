"""Judge calibration against human labels, and judge panels (docs/judges.md): agreement,
Cohen's kappa, Krippendorff's alpha and confusion figures checked against hand calculations;
a panel's majority verdicts, split flags and budget, through real runs of the built-in
contextual precision grader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evalrun.calibration.agreement import cohen_kappa, krippendorff_alpha_ordinal, measure
from evalrun.targets.panel import combine
from tests.conftest import read_bundle, run_cli
from tests.fault_helpers import cli_env


def test_cohen_kappa_matches_a_hand_calculation() -> None:
    human = [True, True, True, False, False, False, True, False]
    judge = [True, True, False, False, False, True, True, False]
    # observed 6/8 = 0.75; each rater says yes 4 times of 8, so chance = 0.5; (0.75-0.5)/0.5
    assert cohen_kappa(list(zip(human, judge, strict=True))) == pytest.approx(0.5)
    figures = measure(list(zip(human, judge, strict=True)), ordinal=False)
    assert figures.agreement == 0.75
    assert figures.confusion == {"yes": {"yes": 3, "no": 1}, "no": {"no": 3, "yes": 1}}


def test_krippendorff_alpha_ordinal_matches_a_hand_calculation() -> None:
    # coincidences: (1,1) 2, (2,2) 2, (3,3) 2, (2,3) 1, (3,2) 1; n1=2, n2=3, n3=3, n=8
    # ordinal distances: d(2,3) = (6 - 3)^2 = 9, d(1,2) = (5 - 2.5)^2, d(1,3) = (8 - 2.5)^2
    # observed = (9 + 9) / 8 = 2.25; expected = 2 (6*6.25 + 6*30.25 + 9*9) / 56 = 600 / 56
    pairs = [(1.0, 1.0), (2.0, 2.0), (3.0, 2.0), (3.0, 3.0)]
    assert krippendorff_alpha_ordinal(pairs) == pytest.approx(1 - 2.25 / (600 / 56))
    assert krippendorff_alpha_ordinal([(4.0, 4.0), (4.0, 4.0)]) is None  # no variation at all


def test_panel_combination_majority_median_and_splits() -> None:
    members = [
        {"relevant": True, "reason": "a", "choice": 4},
        {"relevant": True, "reason": "b", "choice": 5},
        {"relevant": False, "reason": "c", "choice": 2},
    ]
    combined = combine(members)
    assert combined.value == {"relevant": True, "reason": "a", "choice": 4}
    assert combined.splits == ["relevant", "choice"]
    assert combined.agreement == pytest.approx(1 / 3)  # the choice: only one member said 4
    assert combine([{"relevant": True}] * 3).splits == []


PASSAGES = {
    "one": [
        "Apples grow on trees [R].",
        "Bananas are yellow.",
        "Cherries are red.",
        "Pears ripen [R].",
    ],
    "two": [
        "The moon orbits the earth.",
        "Tides follow the moon [R].",
        "Mars is red.",
        "Jupiter is big.",
    ],
}
LABELS = {"one": [True, False, False, True], "two": [False, True, False, False]}


def _judges() -> list[dict]:
    """faithful: matches the labels; always-yes: says relevant to everything; inverted: the
    opposite of the labels."""
    yes = '{"relevant": true, "reason": "marked"}'
    no = '{"relevant": false, "reason": "unmarked"}'
    marked = r"<passage>[^<]*\[R\]"
    return [
        {"name": "faithful", "kind": "mock", "rules": [
            {"task": "relevance", "match": marked, "response": yes},
            {"task": "relevance", "response": no}]},
        {"name": "faithful-too", "kind": "mock", "rules": [
            {"task": "relevance", "match": marked, "response": yes},
            {"task": "relevance", "response": no}]},
        {"name": "always-yes", "kind": "mock", "rules": [{"task": "relevance", "response": yes}]},
        {"name": "inverted", "kind": "mock", "rules": [
            {"task": "relevance", "match": marked, "response": no},
            {"task": "relevance", "response": yes}]},
        {"name": "strict-panel", "kind": "panel", "members": ["faithful", "faithful-too", "inverted"],
         "min_agreement": 1.0},
    ]  # fmt: skip


def _eval(folder: Path, *, judge: object = "faithful", max_calls: int = 40) -> Path:
    (folder / "targets.yaml").write_text(yaml.safe_dump({"targets": _judges()}))
    tests = []
    for case_id, passages in PASSAGES.items():
        tests.append(
            {
                "id": case_id,
                "input": "Which passages matter?",
                "criteria": "The marked facts.",
                "output": "An answer.",
                "expected_output": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"tool": "search", "output": {"results": passages}}],
                    }
                ],
                "labels": {"relevant": LABELS[case_id]},
            }
        )
    # per-item: the scripted judges answer one passage at a time, a panel costs per member per call
    grader = {
        "type": "contextual-precision",
        "target": {"max_calls": max_calls},
        "config": {"mode": "per-item"},
    }
    path = folder / "labelled.eval.yaml"
    path.write_text(yaml.safe_dump({"judge": judge, "graders": [grader], "tests": tests}))
    return path


def test_calibrate_gives_the_hand_computed_figures(tmp_path: Path) -> None:
    path = _eval(tmp_path)
    out = tmp_path / "cal"
    result = run_cli(
        "calibrate", str(path), "--judge", "faithful", "--judge", "always-yes", "-o", str(out),
        "--min-kappa", "0.9", cwd=tmp_path, env=cli_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "calibration.json").read_text())
    rows = {r["judge"]: r for r in report["rows"]}
    # 8 items, 3 labelled relevant. faithful agrees on all of them.
    assert rows["faithful"]["n"] == 8 and rows["faithful"]["agreement"] == 1.0
    assert rows["faithful"]["coefficient"] == pytest.approx(1.0)
    # always-yes: observed 3/8; it says yes 8 of 8 and people 3 of 8, chance 3/8: kappa 0
    assert rows["always-yes"]["agreement"] == pytest.approx(3 / 8)
    assert rows["always-yes"]["coefficient"] == pytest.approx(0.0)
    assert rows["always-yes"]["confusion"] == {"yes": {"yes": 3}, "no": {"yes": 5}}
    assert report["recommended"] == "faithful"
    assert len(report["disagreements"]["always-yes"]) == 5
    assert "Recommended judge: faithful" in result.stdout
    assert (out / "calibration.html").read_text().startswith("<!doctype html>")
    gated = run_cli(
        "calibrate", str(path), "--judge", "always-yes", "-o", str(tmp_path / "gated"),
        "--min-kappa", "0.5", "--cache-dir", "elsewhere", cwd=tmp_path, env=cli_env(),
    )  # fmt: skip
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert (tmp_path / "elsewhere" / "cache.sqlite3").is_file()
    assert (tmp_path / ".evalrun" / "cache" / "cache.sqlite3").is_file()  # the first run's


def test_a_panel_with_one_wrong_member_gives_the_majority_and_flags_every_split(
    tmp_path: Path,
) -> None:
    path = _eval(tmp_path, judge=["faithful", "faithful-too", "inverted"])
    out = tmp_path / "out"
    result = run_cli(str(path), "-q", "--out", str(out), cwd=tmp_path, env=cli_env())
    results, _ = read_bundle(out)
    by_id = {r["id"]: r for r in results}
    for case_id, labels in LABELS.items():
        grader = by_id[case_id]["graders"][0]
        assert grader["details"]["verdicts"]["relevant"] == labels  # the majority, every item
        assert grader["proxy"]["calls"] == 3 * len(labels)  # one call per member per passage
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    assert len(calls) == 8
    for call in calls:
        panel = call["panel"]
        assert [m["target"] for m in panel["members"]] == ["faithful", "faithful-too", "inverted"]
        assert panel["splits"] == ["relevant"] and panel["agreement"] == round(2 / 3, 4)
    assert result.returncode in (0, 1), result.stderr


def test_a_split_below_min_agreement_makes_the_grader_abstain(tmp_path: Path) -> None:
    path = _eval(tmp_path, judge="strict-panel")
    out = tmp_path / "out"
    result = run_cli(str(path), "-q", "--out", str(out), cwd=tmp_path, env=cli_env())
    assert result.returncode == 3, result.stdout + result.stderr  # unscored beyond --max-errors
    results, _ = read_bundle(out)
    assert {r["status"] for r in results} == {"unscored"}


def test_a_panel_call_costs_one_call_per_member_against_max_calls(tmp_path: Path) -> None:
    path = _eval(tmp_path, judge=["faithful", "faithful-too", "inverted"], max_calls=5)
    out = tmp_path / "out"
    run_cli(str(path), "-q", "--out", str(out), "--max-errors", "9", cwd=tmp_path, env=cli_env())
    results, _ = read_bundle(out)
    for case in results:
        grader = case["graders"][0]
        assert grader["proxy"]["calls"] == 0 and grader["proxy"]["max_calls"] == 5
        # 4 passages x 3 members need 12 calls: the grader abstains up front and says so
        assert case["status"] == "unscored", grader
        assert "needs 4 at 3 calls each" in grader["reason"]
        assert "to at least 12 " in grader["reason"]
