"""graders.pattern: medians, hard gates, score formula, parsing, config errors, subprocess."""

from __future__ import annotations

import json

import pytest

from grader_sdk import Abstain
from graders.pattern import (
    UnknownPattern,
    evaluate,
    load_judge,
    median_per_key,
    parse_run,
)
from tests.judge_helpers import ScriptedClient, grader_input, run_with_proxy

SPECIFIC = {"react": "R", "cove": "C", "reflexion": "F", "rag": "G"}
GOOD_UNIVERSAL = {"PIF": 5, "POI": 5, "PC": 5, "CA": 5, "SRC": 5, "IR": 5, "PR": 0.9}


def reply(pattern: str = "react", specific: tuple[int, int, int] = (5, 5, 5), **universal) -> str:
    letter = SPECIFIC[pattern]
    return json.dumps(
        {
            "universal": {**GOOD_UNIVERSAL, **universal},
            "pattern": {f"{letter}{i}": v for i, v in enumerate(specific, start=1)},
            "failures": [],
            "confidence": 0.8,
        }
    )


def grade(replies: list[str], **config) -> dict:
    config.setdefault("pattern", "react")
    config.setdefault("runs", len(replies))
    inp = grader_input(output="Thought: look it up\nAction: search", config=config)
    return evaluate(inp, ScriptedClient(replies))


def test_median_odd_and_even_counts() -> None:
    assert median_per_key([{"a": 1.0}, {"a": 5.0}, {"a": 3.0}]) == {"a": 3.0}
    assert median_per_key([{"a": 4.0}, {"a": 2.0}]) == {"a": 3.0}
    assert median_per_key([{"a": 1.0}, {"a": 2.0}, {"a": 4.0}, {"a": 5.0}]) == {"a": 3.0}


def test_score_is_combined_over_45_and_pr_is_not_summed() -> None:
    text = reply(specific=(3, 4, 5), PIF=4, POI=4, PC=4, CA=4, SRC=3, IR=2, PR=0.75)
    details = grade([text])["details"]
    assert details["overall_universal"] == 21
    assert details["overall_pattern"] == 12
    assert details["combined_score"] == 33
    assert details["score"] == pytest.approx(33 / 45)


def test_medians_over_three_runs_and_even_runs() -> None:
    three = grade([reply(PIF=1), reply(PIF=4), reply(PIF=5)])
    assert three["details"]["universal_scores"]["PIF"] == 4
    four = grade([reply(PIF=1), reply(PIF=2), reply(PIF=4), reply(PIF=5)])
    assert four["details"]["universal_scores"]["PIF"] == 3
    assert four["details"]["runs"] == 4


def test_all_gates_exactly_at_threshold_pass() -> None:
    result = grade([reply(POI=4, PC=4, CA=4, PR=0.75)])
    assert "pass" not in result  # the runner applies the threshold
    assert result["details"]["hard_gates_passed"] is True
    assert result["details"]["hard_gate_failures"] == []


@pytest.mark.parametrize(("gate", "value"), [("POI", 3), ("PC", 3), ("CA", 3), ("PR", 0.7)])
def test_each_hard_gate_fails_alone(gate: str, value: float) -> None:
    result = grade([reply(**{gate: value})])
    assert result["pass"] is False
    failures = result["details"]["hard_gate_failures"]
    assert len(failures) == 1 and failures[0].startswith(f"hard gate {gate} ")
    assert failures[0] in result["misses"]
    assert result["score"] > 0.9  # a gate fails the case even with a high score


def test_gate_uses_the_median_not_one_run() -> None:
    result = grade([reply(POI=3), reply(POI=5), reply(POI=5)])
    assert result["details"]["hard_gates_passed"] is True


def test_pass_rate_counts_unparseable_runs_and_confidence_is_median() -> None:
    runs = [reply(), "the response follows ReAct well", "4"]
    details = grade(runs)["details"]
    assert details["pass_rate"] == pytest.approx(1 / 3)
    assert details["successful_runs"] == 1
    assert len(details["unparsed"]) == 2
    assert details["confidence"] == 0.8


@pytest.mark.parametrize("bad", ["garbage", "", "4", "[1, 2]", '{"PIF": 5}'])
def test_all_runs_unparseable_abstains(bad: str) -> None:
    with pytest.raises(Abstain, match="no judge reply could be read"):
        grade([bad, bad, bad])


def test_parse_run_is_lenient_about_shape_but_needs_every_dimension() -> None:
    judge = load_judge()
    spec = judge.resolve("cove")
    flat = (
        "```json\n"
        + json.dumps({**GOOD_UNIVERSAL, "PR": "80", "C1": "4/5", "C2": 3, "C3": "8/10"})
        + "\n```"
    )
    run = parse_run(flat, judge, spec)
    assert run.ok, run.problem
    assert run.value.universal["PR"] == 0.8
    assert run.value.pattern == {"C1": 4.0, "C2": 3.0, "C3": 4.0}
    missing = parse_run(reply("cove", specific=(4, 4, 4)).replace('"C3"', '"X3"'), judge, spec)
    assert missing.problem == "missing C3"
    off_scale = parse_run(flat.replace('"8/10"', "9"), judge, spec)
    assert off_scale.problem == "unreadable C3 (9 is outside 0..5)"


@pytest.mark.parametrize(
    ("name", "key", "codes"),
    [
        ("ReAct", "react", ["R1", "R2", "R3"]),
        ("chain-of-verification", "cove", ["C1", "C2", "C3"]),
        ("Reflexion", "reflexion", ["F1", "F2", "F3"]),
        ("RAG", "rag", ["G1", "G2", "G3"]),
    ],
)
def test_patterns_resolve_with_their_phases_and_dimensions(name, key, codes) -> None:
    judge = load_judge()
    spec = judge.resolve(name)
    assert spec.key == key
    assert [d.code for d in spec.dimensions] == codes
    assert len(spec.phases) == 4
    client = ScriptedClient([reply(key)])
    inp = grader_input(output="...", config={"pattern": name, "runs": 1})
    result = evaluate(inp, client)
    assert result["score"] == 1.0
    prompt = client.requests[0]["question"]
    assert " -> ".join(spec.phases) in prompt
    assert all(code in prompt for code in codes)


def test_unknown_or_missing_pattern_is_a_clear_error() -> None:
    with pytest.raises(UnknownPattern, match="unknown pattern 'tree-of-thought'.*react"):
        grade([reply()], pattern="tree-of-thought")
    inp = grader_input(output="x", config={})
    with pytest.raises(UnknownPattern, match="config.pattern is required"):
        evaluate(inp, ScriptedClient([]))


def test_runs_default_three_with_sampling_temperature() -> None:
    client = ScriptedClient(lambda r: reply())
    evaluate(grader_input(output="x", config={"pattern": "react"}), client)
    assert len(client.requests) == 3
    assert {r["temperature"] for r in client.requests} == {0.7}
    with pytest.raises(ValueError, match="config.runs"):
        grade([reply()], runs=0)


def test_subject_input_grades_the_input_text() -> None:
    client = ScriptedClient(lambda r: reply())
    config = {"pattern": "react", "runs": 1}
    with pytest.raises(Abstain, match="no candidate output"):
        evaluate(grader_input(input="Thought: t\nAction: a", config=config), client)
    inp = grader_input(input="Thought: t\nAction: a", config={**config, "subject": "input"})
    evaluate(inp, client)
    prompt = client.requests[0]["question"]
    assert "<response>\nThought: t\nAction: a\n</response>" in prompt.replace("\r", "")


def test_failures_are_deduplicated_in_order() -> None:
    a = json.loads(reply())
    a["failures"] = ["skipped Observation", "no citation"]
    b = json.loads(reply())
    b["failures"] = ["No citation", "invented tool output"]
    details = grade([json.dumps(a), json.dumps(b)])["details"]
    assert details["failures"] == ["skipped Observation", "no citation", "invented tool output"]


def test_subprocess_gate_failure_through_the_real_proxy() -> None:
    rules = [{"match": "Pattern to audit: ReAct", "response": reply(POI=2, PR=0.5)}]
    payload = {"output": "Final Answer: Paris", "config": {"pattern": "react", "runs": 3}}
    run = run_with_proxy("graders.pattern", payload, rules)
    assert run.exit_code == 0, run.stderr
    result = run.result
    assert result["pass"] is False
    assert [f.split(" ")[2] for f in result["details"]["hard_gate_failures"]] == ["POI", "PR"]
    assert run.calls == 3


def test_subprocess_unknown_pattern_errors_with_exit_1() -> None:
    run = run_with_proxy("graders.pattern", {"output": "x", "config": {"pattern": "zzz"}}, [])
    assert run.exit_code == 1
    assert "unknown pattern 'zzz'" in run.stderr
    assert run.calls == 0


def test_example_eval_runs_offline_with_the_scripted_judge(tmp_path) -> None:
    from tests.conftest import read_bundle, run_cli

    run = run_cli("evals/pattern.eval.yaml", "--out", str(tmp_path / "run"), "-q", "--no-cache")
    assert run.returncode == 1, run.stderr  # react-collapsed fails its gates on purpose
    cases, _ = read_bundle(tmp_path / "run")
    by_id = {c["id"]: c for c in cases}
    assert by_id["react-trace"]["score"] == pytest.approx(43 / 45)
    assert by_id["cove-answer"]["score"] == pytest.approx(41 / 45)
    collapsed = by_id["react-collapsed"]
    assert collapsed["status"] == "failed" and collapsed["score"] == pytest.approx(17 / 45)
    assert collapsed["graders"][0]["passed"] is False
