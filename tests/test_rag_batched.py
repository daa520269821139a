"""Batched judge mode of the RAG graders (graders/_rag_batched.py): the reply reader, the graders
as real processes against a loopback proxy, and agreement with per-item mode."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graders._rag import average_precision
from graders._rag_batched import ATTRIBUTION_KEY, RELEVANCE_KEY, read_numbered, read_recall
from tests.judge_helpers import run_with_proxy
from tests.sdk_helpers import (
    ROOT,
    FakeProxy,
    eval_cases,
    mock_judge,
    payload_for,
    run_node,
    run_python_grader,
)

PRECISION = "graders.contextual_precision"
RECALL = "graders.contextual_recall"


def batch_reply(flags: list[bool], key: str = RELEVANCE_KEY, **extra: Any) -> str:
    return json.dumps(
        {
            "verdicts": [
                {"number": i, key: flag, "reason": "marker", "confidence": 1, **extra}
                for i, flag in enumerate(flags, 1)
            ]
        }
    )


def marked_judge(request: dict[str, Any]) -> str:
    """Relevant exactly when a passage starts with 'REL', attributable when a statement says
    'YES': the same rule whether asked per item or batched."""
    task = request["task"]
    kind = task["kind"]
    if kind == "relevance":
        return json.dumps({"relevant": task["passage"].startswith("REL"), "reason": "marker"})
    if kind == "relevance-batch":
        return batch_reply([p.startswith("REL") for p in task["passages"]])
    if kind == "statements":
        return json.dumps({"statements": [s.strip() for s in task["text"].split(";")]})
    if kind == "attribution":
        return json.dumps({"attributable": "YES" in task["statement"], "node": 1})
    assert kind == "recall-batch"
    return recall_reply([s.strip() for s in task["text"].split(";")])


def recall_reply(statements: list[str], **extra: Any) -> str:
    """The joined recall reply: each statement numbered with its verdict ('YES' marks
    attributable)."""
    return json.dumps(
        {
            "verdicts": [
                {"number": i, "statement": s, ATTRIBUTION_KEY: "YES" in s, "node": 1, **extra}
                for i, s in enumerate(statements, 1)
            ]
        }
    )


def context_payload(nodes: list[str], mode: str, **config: Any) -> dict[str, Any]:
    case = {"id": "ctx", "input": "Question?", "criteria": "Answer.", "output": "Answer."}
    return payload_for(case, config={"retrieval_context": nodes, "mode": mode, **config})


def grade(
    module: str, payload: dict[str, Any], proxy: FakeProxy
) -> tuple[int, dict[str, Any], str]:
    payload = {**payload, "grader": {**payload["grader"], "max_calls": proxy.max_calls}}
    proc = run_python_grader(module, payload, proxy.env())
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


# --- the reader -----------------------------------------------------------------------------


def test_reader_takes_one_verdict_per_number_in_number_order() -> None:
    raw = json.dumps(
        {
            "verdicts": [
                {"number": 2, "relevant": False, "reason": "no", "confidence": 0.9},
                {"number": 1, "relevant": "yes", "reason": "yes", "confidence": 0.8},
            ]
        }
    )
    reading = read_numbered(raw, 2, RELEVANCE_KEY)
    assert reading.ok, reading.problem
    assert [(v.ok, v.reason, v.confidence) for v in reading.value] == [
        (True, "yes", 0.8),
        (False, "no", 0.9),
    ]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (batch_reply([True, False]), "no verdict for number(s) 3"),
        (
            json.dumps({"verdicts": [{"number": n, "relevant": True} for n in (1, 2, 2, 3)]}),
            "number 2 is given twice",
        ),
        (batch_reply([True, True, True, False]), "number 4 is not one of 1..3"),
        (
            json.dumps({"verdicts": [{"number": 0, "relevant": True}]}),
            "number 0 is not one of 1..3",
        ),
        (
            json.dumps({"verdicts": [{"number": n, "relevant": "partly"} for n in (1, 2, 3)]}),
            "number 1: its 'relevant' is 'partly', not true or false",
        ),
        (json.dumps({"verdicts": [{"relevant": True}] * 3}), "entry 1 has no integer 'number'"),
        (json.dumps([{"number": 1, "relevant": True}]), "no 'verdicts' list"),
        ("Passage 1 is relevant, the others are not.", "no 'verdicts' list"),
    ],
)
def test_reader_refuses_what_is_not_one_verdict_per_number(raw: str, problem: str) -> None:
    reading = read_numbered(raw, 3, RELEVANCE_KEY)
    assert not reading.ok and problem in reading.problem


def test_an_entry_that_cannot_tell_stays_undecided_not_false() -> None:
    raw = json.dumps(
        {
            "verdicts": [
                {"number": 1, "attributable": True, "node": 2, "reason": "ok"},
                {"number": 2, "attributable": None, "abstain": True, "reason": "unsure"},
            ]
        }
    )
    reading = read_numbered(raw, 2, ATTRIBUTION_KEY, context_size=2)
    assert reading.ok
    first, second = reading.value
    assert (first.ok, first.node) == (True, 2)
    assert (second.ok, second.reason) == (None, "unsure")


# --- the graders through the real proxy (scripted mock judge) -------------------------------

EXPECTED = {
    "perfect-ranking": 1.0,
    "mixed-ranking": 5 / 6,
    "relevant-node-last": 1 / 3,
    "perfect-recall": 1.0,
    "partial-recall": 1 / 3,
    "zero-recall": 0.0,
}


@pytest.mark.parametrize(
    ("module", "case"),
    [(PRECISION, c) for c in eval_cases("contextual-precision")]
    + [(RECALL, c) for c in eval_cases("contextual-recall")],
    ids=lambda v: v["id"] if isinstance(v, dict) else v.rsplit(".", 1)[-1],
)
def test_the_examples_score_as_documented_in_the_default_mode(
    module: str, case: dict[str, Any]
) -> None:
    """No ``config.mode``: batched, one call per case, with evals/targets.yaml's scripted mock."""
    with FakeProxy(mock_judge(), max_calls=10) as proxy:
        code, result, err = grade(module, payload_for(case), proxy)
        assert proxy.call_count == 1
    assert code == 0, err
    assert result["score"] == pytest.approx(EXPECTED[case["id"]])
    assert result["details"]["verdicts"] == case["labels"]  # the scripted verdicts are the labels


def test_precision_batched_over_the_real_proxy_is_one_call_per_list() -> None:
    mixed = next(c for c in eval_cases("contextual-precision") if c["id"] == "mixed-ranking")
    rule = {"task": "relevance-batch", "response": batch_reply([True, False, True])}
    run = run_with_proxy(PRECISION, payload_for(mixed, config={"mode": "batched"}), [rule])
    assert run.exit_code == 0, run.stderr
    assert run.result["score"] == pytest.approx(5 / 6)
    assert run.calls == 1
    [call] = run.records
    assert call.task["kind"] == "relevance-batch" and len(call.task["passages"]) == 3
    assert "[3] Paris is often referred to" in (call.question or "")


def test_recall_batched_over_the_real_proxy_is_one_call() -> None:
    partial = next(c for c in eval_cases("contextual-recall") if c["id"] == "partial-recall")
    statements = ["The wall is long. YES", "It took centuries.", "Dynasties built it."]
    rule = {"task": "recall-batch", "response": recall_reply(statements)}
    run = run_with_proxy(RECALL, payload_for(partial, config={"mode": "batched"}), [rule])
    assert run.exit_code == 0, run.stderr
    assert run.result["score"] == pytest.approx(1 / 3)
    assert run.calls == 1
    [call] = run.records
    assert call.task["kind"] == "recall-batch" and call.task["text"] == partial["criteria"]
    assert "[3] Parts of the wall are now in ruins" in (call.question or "")
    rows = run.result["details"]["statements"]
    assert [(r["statement"], r["attributable"], r["node"]) for r in rows] == [
        (statements[0], True, 1),
        (statements[1], False, None),
        (statements[2], False, None),
    ]


def test_recall_reader_merges_a_repeated_statement_with_the_same_verdict() -> None:
    raw = recall_reply(["A YES.", "a  YES", "B."])
    reading = read_recall(raw, context_size=2)
    assert reading.ok, reading.problem
    statements, verdicts = reading.value
    assert statements == ["A YES.", "B."] and [v.ok for v in verdicts] == [True, False]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (json.dumps({"verdicts": []}), "the reply lists no statements"),
        (
            json.dumps({"verdicts": [{"number": 1, "attributable": True}]}),
            "number 1 has no 'statement'",
        ),
        (
            json.dumps(
                {
                    "verdicts": [
                        {"number": 1, "statement": "A.", "attributable": True},
                        {"number": 3, "statement": "B.", "attributable": False},
                    ]
                }
            ),
            "number 3 is not one of 1..2",
        ),
        (
            json.dumps(
                {
                    "verdicts": [
                        {"number": 1, "statement": "A.", "attributable": True},
                        {"number": 2, "statement": "a", "attributable": False},
                    ]
                }
            ),
            "number 2 repeats statement 1 with another verdict",
        ),
        (
            json.dumps({"verdicts": [{"number": 1, "statement": "A.", "attributable": "maybe"}]}),
            "number 1: its 'attributable' is 'maybe'",
        ),
        ("The answer has two facts; the first is supported.", "no 'verdicts' list"),
    ],
)
def test_recall_reader_refuses_what_it_cannot_read_with_confidence(raw: str, problem: str) -> None:
    reading = read_recall(raw, context_size=2)
    assert not reading.ok and problem in reading.problem


def test_a_bad_joined_recall_reply_is_asked_again_once_then_abstains() -> None:
    partial = next(c for c in eval_cases("contextual-recall") if c["id"] == "partial-recall")
    rule = {"task": "recall-batch", "response": json.dumps({"statements": ["A.", "B."]})}
    run = run_with_proxy(RECALL, payload_for(partial, config={"mode": "batched"}), [rule])
    assert run.exit_code == 3, run.stdout
    assert "no 'verdicts' list" in run.result["reason"]
    assert "score" not in run.result or run.result["score"] is None
    assert run.calls == 2
    assert "previous reply to this request could not be read" in (run.records[1].question or "")


def test_joined_recall_budget_is_one_call() -> None:
    payload = context_payload(["ctx"], "batched")
    payload["criteria"] = "A YES; B"
    with FakeProxy(marked_judge, max_calls=1) as proxy:
        code, result, err = grade(RECALL, payload, proxy)
        assert proxy.call_count == 1
    assert code == 0 and result["score"] == pytest.approx(0.5), err
    with FakeProxy(marked_judge, max_calls=0) as proxy:
        code, result, _ = grade(RECALL, payload, proxy)
        assert proxy.call_count == 0
    assert code == 3 and "max_calls is 0" in result["reason"]


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (batch_reply([True, False]), "no verdict for number(s) 3"),
        (
            json.dumps({"verdicts": [{"number": n, "relevant": True} for n in (1, 1, 2, 3)]}),
            "number 1 is given twice",
        ),
        (batch_reply([True, False, True, True]), "number 4 is not one of 1..3"),
        ("All three look relevant to me.", "no 'verdicts' list"),
    ],
)
def test_a_bad_batched_reply_is_asked_again_once_then_abstains(reply: str, said: str) -> None:
    mixed = next(c for c in eval_cases("contextual-precision") if c["id"] == "mixed-ranking")
    rule = {"task": "relevance-batch", "response": reply}
    run = run_with_proxy(PRECISION, payload_for(mixed, config={"mode": "batched"}), [rule])
    assert run.exit_code == 3, run.stdout
    assert said in run.result["reason"] and "could not be read" in run.result["reason"]
    assert "score" not in run.result or run.result["score"] is None
    assert run.calls == 2  # the first call and one retry with the reminder
    assert "previous reply to this request could not be read" in (run.records[1].question or "")


def test_a_retry_that_reads_right_scores() -> None:
    def judge(request: dict[str, Any]) -> str:
        if "Note: your previous reply" in request["question"]:
            return marked_judge(request)
        return batch_reply([True])  # one verdict for two passages

    with FakeProxy(judge) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["x", "REL y"], "batched"), proxy)
        assert proxy.call_count == 2
    assert code == 0 and result["score"] == pytest.approx(0.5)


def test_a_cut_off_batched_reply_is_asked_again_with_more_room() -> None:
    def judge(request: dict[str, Any]) -> Any:
        if request["maxTokens"] > 2048:
            return marked_judge(request)
        return '{"verdicts": [{"number": 1, "relevant": true}', "length"

    with FakeProxy(judge) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["REL a", "b"], "batched"), proxy)
        assert [r["maxTokens"] for r in proxy.requests] == [2048, 8192]
    assert code == 0 and result["score"] == 1.0


def test_batched_budget_counts_calls_per_list_not_per_node() -> None:
    payload = context_payload([["REL a", "b", "c"], ["d", "REL e"]], "batched", per_tool_call=True)
    with FakeProxy(marked_judge, max_calls=2) as proxy:
        code, result, _ = grade(PRECISION, payload, proxy)
        assert proxy.call_count == 2
    assert code == 0, result
    with FakeProxy(marked_judge, max_calls=1) as proxy:
        code, result, _ = grade(PRECISION, payload, proxy)
        assert proxy.call_count == 0
    assert code == 3 and "max_calls is 1" in result["reason"]


def test_an_unknown_mode_is_an_error_not_a_score() -> None:
    with FakeProxy(marked_judge) as proxy:
        code, result, err = grade(PRECISION, context_payload(["a"], "fast"), proxy)
        assert proxy.call_count == 0
    assert code not in (0, 3) and "config.mode must be one of per-item, batched" in err + str(
        result
    )


# --- agreement with per-item mode, and what it costs -----------------------------------------


def prompt_words(requests: list[dict[str, Any]]) -> int:
    """Prompt size as the mock target counts it (words of system prompt and question)."""
    return sum(len(f"{r['systemPrompt']}\n\n{r['question']}".split()) for r in requests)


def modes_agree(nodes: list[str]) -> None:
    flags = [n.startswith("REL") for n in nodes]
    scores, words = {}, {}
    for mode in ("per-item", "batched"):
        with FakeProxy(marked_judge) as proxy:
            code, result, err = grade(PRECISION, context_payload(nodes, mode), proxy)
            words[mode] = prompt_words(proxy.requests)
        assert code == 0, err
        assert result["details"]["verdicts"]["relevant"] == flags
        scores[mode] = result["score"]
    assert scores["per-item"] == pytest.approx(scores["batched"])
    assert scores["batched"] == pytest.approx(average_precision(flags))
    assert words["batched"] < words["per-item"] / 2


def test_both_modes_agree_and_batched_sends_fewer_prompt_words() -> None:
    modes_agree(["n first", "REL second", "n third", "REL fourth", "n fifth"])


@pytest.mark.slow
def test_both_modes_agree_on_random_rankings() -> None:
    rng = random.Random(36)
    for _ in range(4):
        modes_agree([f"{'REL' if rng.random() < 0.4 else 'n'} passage {i}" for i in range(6)])


def test_recall_modes_agree() -> None:
    payload_base = context_payload(["ctx one", "ctx two"], "per-item")
    payload_base["criteria"] = "A YES; B; C YES; D"
    results = {}
    for mode in ("per-item", "batched"):
        payload = {**payload_base, "config": {**payload_base["config"], "mode": mode}}
        with FakeProxy(marked_judge) as proxy:
            code, result, err = grade(RECALL, payload, proxy)
            calls = proxy.call_count
        assert code == 0, err
        results[mode] = (result["score"], result["details"]["verdicts"], calls)
    assert results["per-item"][:2] == results["batched"][:2]
    assert results["per-item"][0] == pytest.approx(0.5)
    assert (results["per-item"][2], results["batched"][2]) == (5, 1)


def test_batched_prompt_numbers_every_passage_once() -> None:
    seen: list[dict[str, Any]] = []

    def judge(request: dict[str, Any]) -> str:
        seen.append(request)
        return marked_judge(request)

    with FakeProxy(judge) as proxy:
        grade(PRECISION, context_payload(["REL a", "b", "c"], "batched"), proxy)
    [request] = seen
    assert request["maxTokens"] == 2048 and request["temperature"] == 0.0
    schema = request["responseFormat"]["json_schema"]
    assert schema["name"] == "relevance_verdicts" and schema["strict"] is True
    question = request["question"]
    assert re.findall(r"^\[(\d+)\] ", question, re.MULTILINE) == ["1", "2", "3"]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
@pytest.mark.parametrize(
    "judge",
    [
        marked_judge,
        lambda request: batch_reply([True]),  # one verdict for three passages
        lambda request: batch_reply([True, "partly", False]),  # type: ignore[list-item]
        lambda request: "The first passage is the relevant one.",
    ],
    ids=["scored", "missing-numbers", "unreadable-verdict", "no-list"],
)
def test_the_js_grader_judges_batched_as_the_python_one_does(judge: Any) -> None:
    """Default mode (batched) in both graders: the same requests, score, reason and calls."""
    script = ROOT / "graders" / "js" / "contextual-precision.mjs"
    payload = context_payload(["n first", "REL second", "n third"], "batched")
    del payload["config"]["mode"]
    outcomes = []
    for run in (
        lambda env: run_python_grader(PRECISION, payload, env),
        lambda env: run_node(script, payload, env),
    ):
        with FakeProxy(judge) as proxy:
            done = run(proxy.env())
            requests = [{k: v for k, v in r.items() if k != "target"} for r in proxy.requests]
        result = json.loads(done.stdout)
        outcomes.append((done.returncode, result.get("score"), result["reason"], requests))
    assert outcomes[0] == outcomes[1]
    code, score, reason, requests = outcomes[0]
    assert requests[0]["task"]["kind"] == "relevance-batch"
    if judge is marked_judge:
        assert (code, score, len(requests)) == (0, 0.5, 1)
    else:
        assert (code, score, len(requests)) == (3, None, 2) and "could not be read" in reason


@pytest.mark.slow
def test_local_judge_modes_agree_on_the_labelled_groups(tmp_path: Path) -> None:
    """The real local judge, both modes, through evalrun and the real proxy (the bench)."""
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rag_judge_modes.py"), "--limit", "4"]
        + ["--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    for metric, batched, per_item in (
        ("precision", "contextual_precision_batched", "contextual_precision_per_item"),
        ("recall", "contextual_recall_batched", "contextual_recall_per_item"),
    ):
        part = figures[metric]
        assert part["same_status_cases"] == part["cases"] == 4
        assert part["items_compared"] > 0 and part["item_agreement"] == 1.0
        modes = part["modes"]
        assert modes[batched]["calls_per_case"] < modes[per_item]["calls_per_case"]
        assert (
            modes[batched]["prompt_words_per_case"] < modes[per_item]["prompt_words_per_case"] / 2
        )
