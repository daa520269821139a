"""graders.prompt_quality: grades, pass line, medians, truncation, improvements, subprocess."""

from __future__ import annotations

import json

import pytest

from grader_sdk import Abstain
from graders._judgekit import truncate_middle
from graders.prompt_quality import DIMENSIONS, evaluate, grade_for, parse_run
from tests.judge_helpers import ScriptedClient, grader_input, run_with_proxy


def reply(values=(8, 8, 8, 8, 8), improvements=(), confidence=0.9) -> str:
    return json.dumps(
        {
            "scores": dict(zip(DIMENSIONS, values, strict=True)),
            "improvements": list(improvements),
            "confidence": confidence,
            "summary": "fine",
        }
    )


def grade(replies: list[str], **payload) -> dict:
    config = payload.pop("config", {})
    config.setdefault("runs", len(replies))
    payload.setdefault("input", "Summarise the text for a ten-year-old in three sentences.")
    return evaluate(grader_input(config=config, **payload), ScriptedClient(replies))


@pytest.mark.parametrize(
    ("overall", "letter"),
    [
        (10.0, "A"),
        (9.0, "A"),
        (8.99, "B"),
        (8.0, "B"),
        (7.99, "C"),
        (7.0, "C"),
        (6.99, "D"),
        (6.0, "D"),
        (5.99, "F"),
        (0.0, "F"),
    ],
)
def test_grade_boundaries(overall: float, letter: str) -> None:
    assert grade_for(overall) == letter


@pytest.mark.parametrize(
    ("values", "passed", "letter"),
    [
        ((7, 7, 7, 7, 7), True, "C"),
        ((7, 7, 7, 7, 6), False, "D"),
        ((9, 9, 9, 9, 9), True, "A"),
        ((6, 6, 6, 6, 6), False, "D"),
        ((10, 10, 10, 10, 5), True, "A"),
    ],
)
def test_overall_is_the_mean_and_pass_is_at_seven(values, passed, letter) -> None:
    result = grade([reply(values)])
    overall = sum(values) / 5
    assert result["details"]["overall_score"] == pytest.approx(overall)
    assert result["score"] == pytest.approx(overall / 10)
    assert result["pass"] is passed
    assert result["details"]["grade"] == letter


def test_median_per_dimension_with_odd_and_even_runs() -> None:
    even = grade([reply((6, 8, 8, 8, 8)), reply((9, 8, 8, 8, 8))])
    assert even["details"]["scores"]["clarity"] == 7.5
    odd = grade([reply((2, 8, 8, 8, 8)), reply((9, 8, 8, 8, 8)), reply((7, 8, 8, 8, 8))])
    assert odd["details"]["scores"]["clarity"] == 7


def test_improvements_deduplicated_in_order_at_most_five() -> None:
    first = reply(improvements=["Name the audience", "State the length", "Give an example"])
    second = reply(
        improvements=["state the  length", "Define the format", "Add a fallback", "Say why", "X"]
    )
    details = grade([first, second])["details"]
    assert details["improvements"] == [
        "Name the audience",
        "State the length",
        "Give an example",
        "Define the format",
        "Add a fallback",
    ]


def test_truncation_keeps_head_and_tail_with_a_marker() -> None:
    assert truncate_middle("a" * 18_000) == "a" * 18_000
    text = "H" * 16_000 + "M" * 1_001 + "T" * 1_000
    cut = truncate_middle(text)
    assert cut.startswith("H" * 16_000) and cut.endswith("T" * 1_000)
    assert "M" not in cut
    assert "1001 characters omitted" in cut


def test_long_prompt_is_truncated_in_the_judge_request() -> None:
    prompt = "B" * 16_000 + "MIDDLE" * 500 + "E" * 1_000
    client = ScriptedClient([reply()])
    result = evaluate(grader_input(input=prompt, config={}), client)
    sent = client.requests[0]["question"]
    assert "MIDDLE" not in sent and "characters omitted" in sent
    assert "B" * 16_000 in sent and "E" * 1_000 in sent
    assert result["details"]["truncated"] is True
    assert result["details"]["prompt_chars"] == len(prompt)


def test_subject_input_uses_the_whole_conversation_and_output_the_answer() -> None:
    messages = [
        {"role": "system", "content": "You are a tutor."},
        {"role": "user", "content": "Explain fractions."},
    ]
    client = ScriptedClient([reply()])
    evaluate(grader_input(input=messages, config={}), client)
    sent = client.requests[0]["question"]
    assert "[system]\nYou are a tutor." in sent and "[user]\nExplain fractions." in sent
    client = ScriptedClient([reply()])
    evaluate(grader_input(output="Write a haiku.", config={"subject": "output"}), client)
    assert "<prompt>\nWrite a haiku.\n</prompt>" in client.requests[0]["question"]
    with pytest.raises(Abstain, match="no output"):
        evaluate(grader_input(config={"subject": "output"}), ScriptedClient([]))


def test_unparseable_runs_do_not_count() -> None:
    details = grade([reply((9, 9, 9, 9, 9)), "9", "nice prompt!"])["details"]
    assert details["successful_runs"] == 1 and details["runs"] == 3
    assert details["pass_rate"] == pytest.approx(1 / 3)
    assert details["overall_score"] == 9


@pytest.mark.parametrize("bad", ["7", "garbage", "", '{"clarity": 8}', "[8, 8, 8, 8, 8]"])
def test_bare_number_or_garbage_abstains(bad: str) -> None:
    with pytest.raises(Abstain, match="no judge reply could be read"):
        grade([bad])


def test_parse_run_accepts_flat_scores_and_never_clamps() -> None:
    run = parse_run(
        'Sure! {"Clarity": "8/10", "effectiveness": "4/5", "structure": "30%", '
        '"specificity": 5, "completeness": 6.5}'
    )
    assert run.ok, run.problem
    assert run.value.scores == {
        "clarity": 8.0,
        "effectiveness": 8.0,
        "structure": 3.0,
        "specificity": 5.0,
        "completeness": 6.5,
    }
    off_scale = parse_run(
        '{"clarity": 12, "effectiveness": 7, "structure": -1, "specificity": 5, "completeness": 6}'
    )
    assert not off_scale.ok
    assert "clarity (12 is outside 0..10)" in off_scale.problem
    assert "structure (-1 is outside 0..10)" in off_scale.problem


def test_subprocess_through_the_real_proxy() -> None:
    rules = [
        {
            "match": "<prompt>\nSummarise",
            "response": "```json\n" + reply((9, 8, 7, 8, 8), ["Say who reads it"]) + "\n```",
        }
    ]
    run = run_with_proxy("graders.prompt_quality", {"input": "Summarise this."}, rules)
    assert run.exit_code == 0, run.stderr
    result = run.result
    assert result["pass"] is True
    assert result["score"] == pytest.approx(0.8)
    assert result["details"]["grade"] == "B"
    assert result["details"]["improvements"] == ["Say who reads it"]
    assert run.calls == 1


def test_subprocess_bare_number_judge_abstains() -> None:
    run = run_with_proxy("graders.prompt_quality", {"input": "Summarise this."}, [], default="8")
    assert run.exit_code == 3, run.stderr
    assert run.result["abstain"] is True


def test_example_eval_runs_offline_with_the_scripted_judge(tmp_path) -> None:
    from tests.conftest import read_bundle, run_cli

    out = tmp_path / "run"
    run = run_cli("evals/prompt-quality.eval.yaml", "--out", str(out), "-q", "--no-cache")
    assert run.returncode == 1, run.stderr  # two prompts fail on purpose
    cases, _ = read_bundle(out)
    by_id = {c["id"]: c for c in cases}
    assert by_id["structured-prompt"]["score"] == pytest.approx(0.84)
    assert by_id["vague-prompt"]["score"] == pytest.approx(0.2)
    generated = {g["name"]: g for g in by_id["generated-prompt"]["graders"]}
    assert generated["prompt_quality"]["details"]["grade"] == "C"
    assert generated["generated_prompt_quality"]["details"]["grade"] == "D"
    assert by_id["generated-prompt"]["status"] == "failed"
