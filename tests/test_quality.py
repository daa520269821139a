"""graders.quality: choice parsing, dimension selection, weighting, abstention, real subprocess."""

from __future__ import annotations

import json

import pytest

from grader_sdk import Abstain, UnsupportedRequest
from graders._judgekit import BudgetTooSmall
from graders.quality import (
    DIMENSIONS,
    evaluate,
    load_definitions,
    material_of,
    parse_choice,
    reason_of,
    select_dimensions,
)
from tests.judge_helpers import ScriptedClient, grader_input, run_with_proxy

CONTEXT_CASE = {
    "output": "Paris.",
    "expected_output": [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "tool": "search",
                    "input": {"query": "capital of France"},
                    "output": {"results": ["Paris is the capital of France.", "Lyon is big."]},
                }
            ],
        },
        {"role": "assistant", "content": "The capital of France is Paris."},
    ],
}


def by_dimension(choices: dict[str, str], default: str = "garbage"):
    """A judge that answers each dimension's prompt with a scripted reply."""

    def reply(request: dict) -> str:
        for name, text in choices.items():
            if f"Dimension: {name}\n" in request["question"]:
                return text
        return default

    return reply


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"reason": "clear", "choice": "4"}', "4"),
        ('```json\n{"reason": "x", "choice": 2}\n```', "2"),
        ('Here it is: {"rating": "3", "reason": "ok"} done', "3"),
        ('{"score": "5/5"}', "5"),
        ('{"choice": 7, "reason": "off the scale"}', None),
        ('{"similarity": 0.5, "reason": "half"}', None),
        ("Step 1: read the answer.\nStep 2: compare.\nScore: 4", "4"),
        ("Step 1: read the answer carefully", None),
        ("10/10", None),
        ("Rating: 10/10", None),
        ("Score: 4/10", None),
        ("Score: 4/5", "4"),
        ("Score: 4.5", None),
        ("I would give it 3 out of 5.", "3"),
        ("4", "4"),
        ("**3**", "3"),
        ("The answer is tidy.\n\nFinal score: 2.", "2"),
        ("A score of 1 would be unfair here; Score: 4", "4"),
        ("Score: 3\nline a\nline b\nline c\nIt covers step 1 and step 2.", "3"),
        ("Score: 2 at first\nx\ny\nz\nthen Score: 5", "5"),
        ("Score: 2\nx\ny\nz\nw\nRevised rating: 4 after step 1", "4"),
        ("", None),
        ("I cannot judge this.", None),
        ("0", None),
    ],
)
def test_parse_choice(reply: str, expected: str | None) -> None:
    reading = parse_choice(reply)
    assert (reading.value if reading.ok else None) == expected
    assert reading.ok or reading.problem


def test_parse_choice_returns_json_reason() -> None:
    reading = parse_choice('{"choice": "5", "reason": "same meaning"}')
    assert (reading.value, reason_of(reading)) == ("5", "same meaning")


def test_bundled_definitions_have_five_dimensions_on_the_standard_scale() -> None:
    definitions = load_definitions()
    assert tuple(definitions.dimensions) == DIMENSIONS
    assert definitions.scale == {"1": 0.0, "2": 0.25, "3": 0.5, "4": 0.75, "5": 1.0}
    for dim in definitions.dimensions.values():
        assert "{{output}}" in dim.template and dim.system_prompt.strip()
    assert definitions.dimensions["groundedness"].requires == ("context",)
    assert "{{context}}" in definitions.dimensions["groundedness"].template
    assert definitions.dimensions["similarity"].requires == ("expected",)
    assert "{{expected}}" in definitions.dimensions["similarity"].template


def test_default_dimensions_follow_the_inputs_the_case_has() -> None:
    definitions = load_definitions()
    bare = material_of(grader_input(output="Paris."))
    names, skipped = select_dimensions(None, definitions, bare)
    assert names == ["coherence", "fluency", "relevance"]
    assert set(skipped) == {"groundedness", "similarity"}
    full = material_of(grader_input(**CONTEXT_CASE))
    assert select_dimensions(None, definitions, full) == (list(DIMENSIONS), {})


def test_context_comes_from_config_before_tool_calls() -> None:
    inp = grader_input(**CONTEXT_CASE, config={"context": "Only this passage."})
    assert material_of(inp).context == "Only this passage."
    from_tools = material_of(grader_input(**CONTEXT_CASE)).context
    assert "[1] Paris is the capital" in from_tools and "[2] Lyon" in from_tools


def test_unknown_dimension_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="unknown quality dimension"):
        evaluate(grader_input(output="x", config={"dimensions": ["charm"]}), ScriptedClient([]))


def test_requested_dimension_without_its_input_is_skipped_not_scored() -> None:
    client = ScriptedClient(by_dimension({"fluency": '{"choice": "5"}'}))
    inp = grader_input(output="Paris.", config={"dimensions": ["fluency", "groundedness"]})
    result = evaluate(inp, client)
    assert result["score"] == 1.0
    assert result["details"]["skipped"] == {"groundedness": "no context"}
    assert len(client.requests) == 1


def test_similarity_carries_the_typed_task_in_its_own_batch() -> None:
    client = ScriptedClient(lambda r: '{"choice": "3"}')
    result = evaluate(grader_input(**CONTEXT_CASE), client)
    batches = sorted(client.batches, key=len)
    assert [len(b) for b in batches] == [1, 4]
    assert all("task" not in r for r in batches[1])
    assert "Dimension: similarity\n" in batches[0][0]["question"]
    assert batches[0][0]["task"] == {
        "kind": "similarity",
        "output": "Paris.",
        "expected": "The capital of France is Paris.",
    }
    assert result["score"] == pytest.approx(0.5)


def test_mean_and_config_weights() -> None:
    replies = by_dimension(
        {"coherence": '{"choice": "5"}', "fluency": "Score: 1", "relevance": "Score: 3"}
    )
    inp = grader_input(output="Paris.")
    assert evaluate(inp, ScriptedClient(replies))["score"] == pytest.approx(0.5)
    weighted = grader_input(
        output="Paris.", config={"weights": {"coherence": 3, "fluency": 1, "relevance": 0}}
    )
    assert evaluate(weighted, ScriptedClient(replies))["score"] == pytest.approx(0.75)


def test_unparseable_dimension_is_left_out_not_scored_zero() -> None:
    replies = by_dimension({"coherence": "Score: 5", "fluency": "Score: 4"}, default="10/10")
    result = evaluate(grader_input(output="Paris."), ScriptedClient(replies))
    assert result["score"] == pytest.approx(0.875)
    assert result["details"]["unparsed"] == ["relevance"]
    assert "relevance" in result["reason"]


@pytest.mark.parametrize("reply", ["garbage", "", "Step 1", "42", "[1, 2, 3]", "{}"])
def test_no_parseable_reply_abstains(reply: str) -> None:
    with pytest.raises(Abstain, match="no judge reply could be read"):
        evaluate(grader_input(output="Paris."), ScriptedClient(lambda r: reply))


def test_bare_number_reply_is_read_as_the_choice() -> None:
    result = evaluate(grader_input(output="Paris."), ScriptedClient(lambda r: "2"))
    assert result["score"] == pytest.approx(0.25)


def test_no_output_abstains_without_calling_the_judge() -> None:
    client = ScriptedClient([])
    with pytest.raises(Abstain, match="no candidate output"):
        evaluate(grader_input(), client)
    assert client.batches == []


def test_budget_too_small_is_an_error_before_any_call() -> None:
    client = ScriptedClient(lambda r: "Score: 3")
    inp = grader_input(output="Paris.", grader={"name": "quality", "max_calls": 2})
    with pytest.raises(BudgetTooSmall, match="needs 3 judge calls but max_calls is 2"):
        evaluate(inp, client)
    assert client.batches == []


class TypedOnlyJudge(ScriptedClient):
    """Like the local embedding judge: refuses any batch holding a free-text request."""

    def invoke_batch(self, requests):
        if any(not r.get("task") for r in requests):
            self.batches.append(list(requests))
            raise UnsupportedRequest("free text", status=422, code="unsupported_request")
        return super().invoke_batch(requests)


def test_typed_only_judge_still_scores_similarity() -> None:
    client = TypedOnlyJudge(lambda r: json.dumps({"similarity": 1.0, "choice": "5"}))
    result = evaluate(grader_input(**CONTEXT_CASE), client)
    assert result["score"] == 1.0
    assert list(result["details"]["weights"]) == ["similarity"]
    assert result["details"]["unparsed"] == ["coherence", "fluency", "relevance", "groundedness"]


def test_subprocess_through_the_real_proxy() -> None:
    rules = [
        {"match": "Dimension: coherence\n", "response": '{"choice": "5", "reason": "tidy"}'},
        {"match": "Dimension: fluency\n", "response": "Reads well.\nScore: 4"},
        {"match": "Dimension: relevance\n", "response": "Step 1: check.\n10/10"},
        {"match": "Dimension: groundedness\n", "response": '```json\n{"choice": "3"}\n```'},
        {"task": "similarity", "response": '{"similarity": 0.9, "choice": "5", "reason": "ok"}'},
    ]
    run = run_with_proxy("graders.quality", {"input": "Capital of France?", **CONTEXT_CASE}, rules)
    assert run.exit_code == 0, run.stderr
    result = run.result
    assert result["score"] == pytest.approx((1.0 + 0.75 + 0.5 + 1.0) / 4)
    assert result["details"]["unparsed"] == ["relevance"]
    assert run.calls == 5


def test_subprocess_garbage_judge_abstains_with_exit_3() -> None:
    run = run_with_proxy("graders.quality", {"output": "Paris."}, [], default="lorem ipsum")
    assert run.exit_code == 3, run.stderr
    assert run.result["abstain"] is True
    assert "no judge reply could be read" in run.result["reason"]


def test_example_eval_runs_offline_with_the_scripted_judge(tmp_path) -> None:
    from tests.conftest import read_bundle, run_cli

    run = run_cli("evals/quality.eval.yaml", "--out", str(tmp_path / "run"), "-q", "--no-cache")
    assert run.returncode == 1, run.stderr  # off-topic-answer fails on purpose
    cases, _ = read_bundle(tmp_path / "run")
    scores = {c["id"]: c["score"] for c in cases}
    assert scores == pytest.approx(
        {"grounded-answer": 1.0, "off-topic-answer": 0.3, "messy-judge-replies": 0.875}
    )
    messy = next(c for c in cases if c["id"] == "messy-judge-replies")["graders"][0]
    assert messy["details"]["unparsed"] == ["fluency"]
