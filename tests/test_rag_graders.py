"""The contextual precision/recall graders as real processes against a loopback proxy, in
per-item mode (batched mode, the default, is tests/test_rag_batched.py)."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from graders._rag import average_precision
from tests.sdk_helpers import (
    ROOT,
    FakeProxy,
    eval_cases,
    grader_env,
    mock_judge,
    run_node,
    run_python_grader,
)
from tests.sdk_helpers import payload_for as any_mode_payload

PRECISION = "graders.contextual_precision"
RECALL = "graders.contextual_recall"
JS_PRECISION = ROOT / "graders" / "js" / "contextual-precision.mjs"
HAS_NODE = shutil.which("node") is not None

EXPECTED_PRECISION = {"perfect-ranking": 1.0, "mixed-ranking": 5 / 6, "relevant-node-last": 1 / 3}
EXPECTED_RECALL = {"perfect-recall": 1.0, "partial-recall": 1 / 3, "zero-recall": 0.0}


def payload_for(case: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The payload in per-item mode, unless its config names a mode."""
    payload = any_mode_payload(case, **extra)
    payload["config"] = {"mode": "per-item", **payload["config"]}
    return payload


def granted(payload: dict[str, Any], max_calls: int) -> dict[str, Any]:
    """The payload as the runner sends it: its ``grader.max_calls`` is the grant's budget."""
    return {**payload, "grader": {**payload["grader"], "max_calls": max_calls}}


def grade(
    module: str, payload: dict[str, Any], proxy: FakeProxy
) -> tuple[int, dict[str, Any], str]:
    proc = run_python_grader(module, granted(payload, proxy.max_calls), proxy.env())
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


def marked_judge(request: dict[str, Any]) -> str:
    """Relevant exactly when the passage starts with 'REL'; attribution when it says 'YES'."""
    task = request["task"]
    if task["kind"] == "relevance":
        relevant = task["passage"].startswith("REL")
        return json.dumps({"relevant": relevant, "reason": "marker", "confidence": 1})
    if task["kind"] == "statements":
        return json.dumps({"statements": [s.strip() for s in task["text"].split(";")]})
    return json.dumps({"attributable": "YES" in task["statement"], "node": 1})


def context_payload(nodes: list[str] | list[list[str]], **config: Any) -> dict[str, Any]:
    case = {"id": "ctx", "input": "Question?", "criteria": "Answer.", "output": "Answer."}
    return payload_for(case, config={"retrieval_context": nodes, **config})


# --- the six example cases through the scripted mock judge --------------------------------


@pytest.mark.parametrize("case", eval_cases("contextual-precision"), ids=lambda c: c["id"])
def test_precision_example_cases(case: dict[str, Any]) -> None:
    with FakeProxy(mock_judge(), max_calls=10) as proxy:
        code, result, stderr = grade(PRECISION, payload_for(case), proxy)
        assert code == 0, stderr
        assert proxy.call_count == 3
        assert proxy.http_requests.count(("POST", "/invokeBatch")) == 1
    assert result["score"] == pytest.approx(EXPECTED_PRECISION[case["id"]])
    nodes = result["details"]["nodes"]
    assert [n["rank"] for n in nodes] == [1, 2, 3]
    assert all(n["reason"] for n in nodes)
    relevant = [n for n in nodes if n["relevant"]]
    assert len(result["hits"]) == len(relevant) and len(result["misses"]) == 3 - len(relevant)
    assert all(
        h.startswith(f"#{n['rank']} ") for h, n in zip(result["hits"], relevant, strict=True)
    )


def test_mixed_ranking_details() -> None:
    case = next(c for c in eval_cases("contextual-precision") if c["id"] == "mixed-ranking")
    with FakeProxy(mock_judge()) as proxy:
        _, result, _ = grade(PRECISION, payload_for(case), proxy)
    nodes = result["details"]["nodes"]
    assert [(n["relevant"], n["precision_at_k"]) for n in nodes] == [
        (True, 1.0),
        (False, 0.5),
        (True, pytest.approx(2 / 3, abs=1e-6)),
    ]
    assert result["hits"][1].startswith("#3 Paris is often referred to as the City of Light.")
    assert result["misses"] == ["#2 The Eiffel Tower was built in 1887. (not relevant)"]
    assert "ranks 1, 3" in result["reason"]


@pytest.mark.parametrize("case", eval_cases("contextual-recall"), ids=lambda c: c["id"])
def test_recall_example_cases(case: dict[str, Any]) -> None:
    with FakeProxy(mock_judge(), max_calls=10) as proxy:
        code, result, stderr = grade(RECALL, payload_for(case), proxy)
        assert code == 0, stderr
        statements = result["details"]["statements"]
        assert proxy.call_count == 1 + len(statements)
    assert result["score"] == pytest.approx(EXPECTED_RECALL[case["id"]])
    assert len(result["hits"]) + len(result["misses"]) == len(statements)
    for row in statements:
        if row["attributable"]:
            assert row["node"] is not None and row["node_text"]


def test_recall_hits_name_the_supporting_node() -> None:
    case = next(c for c in eval_cases("contextual-recall") if c["id"] == "perfect-recall")
    with FakeProxy(mock_judge()) as proxy:
        _, result, _ = grade(RECALL, payload_for(case), proxy)
    assert result["hits"][0].startswith(
        "Python was created by Guido van Rossum. (supported by node 1:"
    )
    assert "(supported by node 2: Python was first released in 1991" in result["hits"][1]


# --- edge cases ---------------------------------------------------------------------------


def test_no_retrieval_anywhere_is_unscored_without_any_judge_call() -> None:
    case = {
        "id": "e",
        "input": "Q?",
        "criteria": "A.",
        "expected_output": [{"role": "assistant", "content": "A."}],
    }
    with FakeProxy(marked_judge) as proxy:
        p_code, precision, _ = grade(PRECISION, payload_for(case), proxy)
        r_code, recall, _ = grade(RECALL, payload_for(case), proxy)
        assert proxy.http_requests == []
    assert (p_code, precision["abstain"]) == (3, True)
    assert (r_code, recall["abstain"]) == (3, True)
    for result in (precision, recall):
        assert "no retrieval context" in result["reason"]
        assert "score" not in result


def test_an_empty_retrieval_scores_zero_without_any_judge_call() -> None:
    case = {"id": "e", "input": "Q?", "criteria": "A."}
    tool_call = {
        "role": "assistant",
        "tool_calls": [{"tool": "search", "input": {"query": "q"}, "output": {"results": []}}],
    }
    with FakeProxy(marked_judge) as proxy:
        empty = {"retrieval_context": []}
        p_code, precision, _ = grade(PRECISION, payload_for(case, config=empty), proxy)
        r_code, recall, _ = grade(RECALL, payload_for(case, config=empty), proxy)
        t_code, from_tools, _ = grade(
            PRECISION,
            payload_for({"id": "t", "input": "Q?", "expected_output": [tool_call]}),
            proxy,
        )
        assert proxy.http_requests == []
    assert (p_code, precision["score"]) == (0, 0.0)
    assert (r_code, recall["score"]) == (0, 0.0)
    assert (t_code, from_tools["score"]) == (0, 0.0)
    assert "empty" in precision["reason"] and "empty" in recall["reason"]


def test_no_relevant_node_scores_zero() -> None:
    with FakeProxy(marked_judge) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["a", "b"]), proxy)
    assert (code, result["score"], result["hits"]) == (0, 0.0, [])
    assert "none of the 2 nodes" in result["reason"].lower()


def test_single_node_and_ties() -> None:
    with FakeProxy(marked_judge) as proxy:
        _, single, _ = grade(PRECISION, context_payload(["REL only"]), proxy)
        _, ties, _ = grade(PRECISION, context_payload(["REL a", "REL b", "REL c"]), proxy)
    assert single["score"] == 1.0
    assert ties["score"] == 1.0 and len(ties["hits"]) == 3


def test_budget_too_small_abstains_before_calling_the_judge() -> None:
    """The payload's max_calls says so: no request reaches the proxy at all."""
    with FakeProxy(marked_judge, max_calls=2) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["REL a", "b", "c"]), proxy)
        assert proxy.http_requests == []
    assert code == 3 and result["abstain"] is True
    assert "needs 3, but max_calls is 2 with 2 left" in result["reason"]


def test_precision_asks_nothing_but_the_verdicts() -> None:
    """One batch per case and no budget lookup: a case's only round trip is the judging."""
    with FakeProxy(marked_judge, max_calls=5) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["REL a", "b", "REL c"]), proxy)
        assert proxy.http_requests == [("POST", "/invokeBatch")]
    assert (code, result["score"]) == (0, pytest.approx((1 + 2 / 3) / 2))


@pytest.mark.parametrize("per_tool_call", [False, True])
def test_a_batch_refused_over_budget_abstains_with_the_proxy_numbers(per_tool_call: bool) -> None:
    """A payload without max_calls (another runner's): the proxy's refusal, which comes before
    any call of the batch, gives the numbers of the hint."""
    nodes = [["REL a", "b"], ["REL c", "d"]] if per_tool_call else ["REL a", "b", "REL c", "d"]
    payload = context_payload(nodes, per_tool_call=per_tool_call)
    del payload["grader"]["max_calls"]
    with FakeProxy(marked_judge, max_calls=3) as proxy:
        proc = run_python_grader(PRECISION, payload, proxy.env())
        spent = proxy.call_count
    result = json.loads(proc.stdout)
    assert proc.returncode == 3 and result["abstain"] is True, proc.stderr
    if per_tool_call:  # the first list fits; the second is refused with 2 nodes left
        assert spent == 2
        assert (
            "judging the 2 retrieved nodes left needs 2, but max_calls is 3 with 1 left"
            in (result["reason"])
        )
        assert "to at least 4 " in result["reason"]
    else:
        assert spent == 0
        assert (
            "judging 4 retrieved nodes needs 4, but max_calls is 3 with 3 left"
            in (result["reason"])
        )
        assert "to at least 4 " in result["reason"]


def test_recall_budget_checked_after_extraction() -> None:
    payload = context_payload(["ctx"])
    payload["criteria"] = "A YES; B; C; D"
    with FakeProxy(marked_judge, max_calls=4) as proxy:
        code, result, _ = grade(RECALL, payload, proxy)
        assert proxy.call_count == 1
        assert proxy.http_requests == [("POST", "/invokeBatch")] * 2  # the judging was refused
    assert code == 3 and "judging 4 statements" in result["reason"]
    assert "needs 4, but max_calls is 4 with 3 left" in result["reason"]
    with FakeProxy(marked_judge, max_calls=1) as proxy:
        code, result, _ = grade(RECALL, payload, proxy)
        assert proxy.http_requests == []
    assert code == 3 and "needs 2" in result["reason"]


def test_recall_asks_nothing_but_its_two_batches() -> None:
    payload = context_payload(["ctx A YES"])
    payload["criteria"] = "A YES; B"
    with FakeProxy(marked_judge, max_calls=5) as proxy:
        code, result, _ = grade(RECALL, payload, proxy)
        assert proxy.http_requests == [("POST", "/invokeBatch")] * 2
    assert (code, result["score"]) == (0, pytest.approx(0.5))


def test_recall_without_a_payload_budget_reads_the_proxy_refusals() -> None:
    """Another runner's payload (no max_calls): the refusals give the hint's numbers."""
    payload = context_payload(["ctx"])
    payload["criteria"] = "A YES; B; C; D"
    del payload["grader"]["max_calls"]
    with FakeProxy(marked_judge, max_calls=4) as proxy:
        proc = run_python_grader(RECALL, payload, proxy.env())
        spent = proxy.call_count
    result = json.loads(proc.stdout)
    assert proc.returncode == 3 and spent == 1, proc.stderr
    assert (
        "judging 4 statements (after 1 extraction call) needs 4, but max_calls is 4 with 3 left"
        in result["reason"]
    )
    assert "to at least 5 " in result["reason"]
    with FakeProxy(marked_judge, max_calls=0) as proxy:
        proc = run_python_grader(RECALL, payload, proxy.env())
        assert proxy.call_count == 0
    result = json.loads(proc.stdout)
    assert (
        proc.returncode == 3
        and "extracting statements and judging them needs 2" in (result["reason"])
    )


def test_recall_budget_hint_counts_the_extraction_call() -> None:
    payload = context_payload(["ctx"])
    payload["criteria"] = "; ".join(f"S{i} YES" for i in range(12))
    with FakeProxy(marked_judge, max_calls=12) as proxy:
        code, result, _ = grade(RECALL, payload, proxy)
    assert code == 3 and "judging 12 statements" in result["reason"]
    assert "to at least 13 " in result["reason"]
    with FakeProxy(marked_judge, max_calls=13) as proxy:
        code, result, _ = grade(RECALL, payload, proxy)
    assert (code, result["score"]) == (0, 1.0)


def test_cut_off_verdicts_are_asked_again_with_more_room() -> None:
    def judge(request: dict[str, Any]) -> Any:
        if request.get("maxTokens", 0) > 2048:
            return json.dumps({"relevant": True, "reason": "roomy"})
        return '{"relevant": false, "reason": "cut', "length"

    with FakeProxy(judge, max_calls=10) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["a", "b"]), proxy)
        assert [r["maxTokens"] for r in proxy.requests] == [2048, 2048, 8192, 8192]
    assert (code, result["score"]) == (0, 1.0)
    with FakeProxy(lambda r: ("{", "length"), max_calls=10) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["a"]), proxy)
    assert code == 3 and "cut off at the token limit" in result["reason"]


def test_unparseable_verdict_abstains_after_one_retry() -> None:
    with FakeProxy(lambda r: "let me think about it", max_calls=10) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["a", "b"]), proxy)
        assert proxy.call_count == 4
    assert code == 3
    assert "node(s) 1, 2" in result["reason"] and "could not be read" in result["reason"]


def test_malformed_reply_recovered_by_the_retry() -> None:
    def judge(request: dict[str, Any]) -> str:
        if "Note: your previous reply" in request["question"]:
            return '```json\n{"relevant": "yes"}\n```'
        if request["task"]["passage"] == "b":
            return "The passage seems fine to me"
        return marked_judge(request)

    with FakeProxy(judge) as proxy:
        code, result, _ = grade(PRECISION, context_payload(["a", "b"]), proxy)
        assert proxy.call_count == 3
    assert code == 0 and result["score"] == pytest.approx(0.5)


def test_wrong_verdict_count_abstains() -> None:
    with FakeProxy(marked_judge, short_batch=True) as proxy:
        p_code, precision, _ = grade(PRECISION, context_payload(["a", "b"]), proxy)
    assert p_code == 3 and "once per node" in precision["reason"]
    payload = context_payload(["ctx"])
    payload["criteria"] = "A YES; B"
    with FakeProxy(marked_judge) as proxy:
        proxy.short_batch = True
        r_code, recall, _ = grade(RECALL, payload, proxy)
    assert r_code == 3


def test_unreadable_statements_abstain() -> None:
    with FakeProxy(lambda r: "Sorry, I cannot help with that.") as proxy:
        code, result, _ = grade(RECALL, context_payload(["ctx"]), proxy)
        assert proxy.call_count == 2
    assert code == 3 and "statements could not be read" in result["reason"]


def test_no_statements_abstains() -> None:
    with FakeProxy(lambda r: '{"statements": []}') as proxy:
        code, result, _ = grade(RECALL, context_payload(["ctx"]), proxy)
    assert code == 3 and "no factual statements" in result["reason"]


def test_recall_scores_attributable_share() -> None:
    payload = context_payload(["ctx one", "ctx two"])
    payload["criteria"] = "A YES; B no; C YES; D no"
    with FakeProxy(marked_judge) as proxy:
        code, result, _ = grade(RECALL, payload, proxy)
        assert proxy.requests[0]["task"] == {
            "kind": "statements",
            "text": "A YES; B no; C YES; D no",
        }
        assert proxy.requests[1]["task"]["context"] == ["ctx one", "ctx two"]
    assert code == 0 and result["score"] == 0.5
    assert result["misses"] == [
        "B no (not in the retrieval context)",
        "D no (not in the retrieval context)",
    ]


def test_missing_proxy_is_an_error_not_a_zero() -> None:
    proc = run_python_grader(PRECISION, context_payload(["a"]), grader_env())
    assert proc.returncode == 1 and "max_calls" in proc.stderr


def test_missing_expected_answer_abstains_for_recall() -> None:
    payload = context_payload(["ctx"])
    payload["criteria"] = None
    with FakeProxy(marked_judge) as proxy:
        code, result, _ = grade(RECALL, payload, proxy)
    assert code == 3 and "no expected answer" in result["reason"]


# --- per tool call ------------------------------------------------------------------------


def multi_call_payload(**config: Any) -> dict[str, Any]:
    case = {
        "id": "multi",
        "input": "Q?",
        "criteria": "A.",
        "expected_output": [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "tool": "search",
                        "input": {"query": "first"},
                        "output": {"results": ["x", "REL y", "z"]},
                    },
                    {"tool": "search", "input": {"query": "second"}, "output": ["REL p"]},
                ],
            },
            {"role": "assistant", "content": "A."},
        ],
    }
    return payload_for(case, config=config)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, (1 / 2 + 2 / 4) / 2),  # flattened: x, REL y, z, REL p -> 0.5
        ({"per_tool_call": True}, (3 * 0.5 + 1 * 1.0) / 4),  # weighted: 0.625
        ({"per_tool_call": True, "aggregate": "mean"}, (0.5 + 1.0) / 2),  # 0.75
    ],
)
def test_per_tool_call_scoring(config: dict[str, Any], expected: float) -> None:
    with FakeProxy(marked_judge) as proxy:
        code, result, stderr = grade(PRECISION, multi_call_payload(**config), proxy)
        batches = proxy.http_requests.count(("POST", "/invokeBatch"))
    assert code == 0, stderr
    assert result["score"] == pytest.approx(expected)
    assert batches == (2 if config else 1)
    if config:
        assert [g["query"] for g in result["details"]["groups"]] == ["first", "second"]
        assert result["hits"][0].startswith("[call 1: first] #2 REL y")


def test_bad_aggregate_is_an_error() -> None:
    with FakeProxy(marked_judge) as proxy:
        code, _, stderr = grade(
            PRECISION, multi_call_payload(per_tool_call=True, aggregate="max"), proxy
        )
    assert code == 1 and "aggregate" in stderr


# --- the JS grader agrees -----------------------------------------------------------------


def both_graders(
    payload: dict[str, Any], judge: Any, max_calls: int = 50
) -> tuple[dict[str, Any], dict[str, Any]]:
    with FakeProxy(judge, max_calls=max_calls) as proxy:
        payload = granted(payload, max_calls)
        py = run_python_grader(PRECISION, payload, proxy.env())
        js = run_node(JS_PRECISION, payload, proxy.env())
    assert py.returncode == 0, py.stderr
    assert js.returncode == 0, js.stderr
    return json.loads(py.stdout), json.loads(js.stdout)


@pytest.mark.skipif(not HAS_NODE, reason="node is not installed")
@pytest.mark.parametrize("case", eval_cases("contextual-precision"), ids=lambda c: c["id"])
def test_python_and_js_graders_agree_on_the_examples(case: dict[str, Any]) -> None:
    py, js = both_graders(payload_for(case), mock_judge())
    assert js["score"] == pytest.approx(py["score"], abs=1e-12)
    assert js["score"] == pytest.approx(EXPECTED_PRECISION[case["id"]])
    assert (js["reason"], js["hits"], js["misses"]) == (py["reason"], py["hits"], py["misses"])
    assert js["details"] == py["details"]


#: judge calls per case in the graders' default mode, batched: one per case
CALLS = {"contextual-precision": 1, "contextual-recall": 1, "contextual-precision-js": 1}


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.skipif(not HAS_NODE, reason="node is not installed")
@pytest.mark.parametrize(
    ("grant", "proxy_budget", "per_tool_call"),
    [(2, 50, False), (None, 3, False), (None, 3, True)],
    ids=["payload-budget", "refused", "refused-second-list"],
)
def test_python_and_js_abstain_alike_on_a_small_budget(
    grant: int | None, proxy_budget: int, per_tool_call: bool
) -> None:
    nodes = [["REL a", "b"], ["REL c", "d"]] if per_tool_call else ["REL a", "b", "REL c", "d"]
    payload = context_payload(nodes, per_tool_call=per_tool_call)
    payload["grader"] = {"name": "test", **({"max_calls": grant} if grant else {})}
    answers = []
    for run in (run_python_grader, run_node):
        with FakeProxy(marked_judge, max_calls=proxy_budget) as proxy:
            module = PRECISION if run is run_python_grader else JS_PRECISION
            proc = run(module, payload, proxy.env())
            answers.append((proc.returncode, json.loads(proc.stdout), proxy.call_count))
    (py_code, py, py_spent), (js_code, js, js_spent) = answers
    assert py_code == js_code == 3 and py["abstain"] is js["abstain"] is True
    assert (js["reason"], js.get("details"), js_spent) == (
        py["reason"],
        py.get("details"),
        py_spent,
    )
    assert "not enough judge calls" in py["reason"]


@pytest.mark.skipif(not HAS_NODE, reason="node is not installed")
@pytest.mark.parametrize(
    "config", [{"per_tool_call": True}, {"per_tool_call": True, "aggregate": "mean"}]
)
def test_python_and_js_agree_per_tool_call(config: dict[str, Any]) -> None:
    py, js = both_graders(multi_call_payload(**config), marked_judge)
    assert js["score"] == pytest.approx(py["score"], abs=1e-12)
    assert (js["reason"], js["hits"], js["misses"]) == (py["reason"], py["hits"], py["misses"])


@pytest.mark.skipif(not HAS_NODE, reason="node is not installed")
def test_python_and_js_agree_on_random_rankings() -> None:
    """Many random rankings in one run: one ranked list per nested retrieval_context entry."""
    rng = random.Random(20240611)
    lists = [
        [("REL " if rng.random() < 0.4 else "") + f"node {k}.{i}" for i in range(rng.randint(1, 9))]
        for k in range(15)
    ]
    payload = context_payload(lists, per_tool_call=True, aggregate="mean")
    py, js = both_graders(payload, marked_judge, max_calls=200)
    expected = [average_precision([n.startswith("REL") for n in nodes]) for nodes in lists]
    py_scores = [g["score"] for g in py["details"]["groups"]]
    js_scores = [g["score"] for g in js["details"]["groups"]]
    assert py_scores == pytest.approx(expected, abs=1e-12)
    assert js_scores == pytest.approx(expected, abs=1e-12)
    assert js["score"] == pytest.approx(py["score"], abs=1e-12)
    assert py["score"] == pytest.approx(sum(expected) / len(expected))


# --- against the real proxy (proxy.JudgeProxy) --------------------------------------------


@contextmanager
def judge_proxy(max_calls: int) -> Iterator[dict[str, str]]:
    """The real JudgeProxy with the scripted mock target, on its own event-loop thread."""
    from evalrun.targets.config import load_targets
    from evalrun.targets.providers.mock import MockTarget
    from proxy import JudgeProxy

    target = MockTarget(load_targets(ROOT / "evals" / "targets.yaml").get("mock"))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=20)

    server = JudgeProxy(lambda name: target, ["mock"])

    async def grant() -> Any:
        return server.grant("mock", max_calls)

    try:
        run(server.start())
        token = run(grant()).token
        yield grader_env(server.url, token)
    finally:
        run(server.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def test_graders_against_the_real_judge_proxy() -> None:
    mixed = next(c for c in eval_cases("contextual-precision") if c["id"] == "mixed-ranking")
    partial = next(c for c in eval_cases("contextual-recall") if c["id"] == "partial-recall")
    with judge_proxy(max_calls=10) as env:
        precision = run_python_grader(PRECISION, payload_for(mixed), env)
    with judge_proxy(max_calls=10) as env:
        recall = run_python_grader(RECALL, payload_for(partial), env)
    with judge_proxy(max_calls=2) as env:
        starved = run_python_grader(PRECISION, payload_for(mixed), env)
    assert precision.returncode == 0, precision.stderr
    assert json.loads(precision.stdout)["score"] == pytest.approx(5 / 6)
    assert recall.returncode == 0, recall.stderr
    assert json.loads(recall.stdout)["score"] == pytest.approx(1 / 3)
    assert starved.returncode == 3 and "max_calls is 2" in json.loads(starved.stdout)["reason"]


# --- end to end through the evalrun CLI ---------------------------------------------------


def run_eval(name: str, out: Path) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalrun",
            f"evals/{name}.eval.yaml",
            "--target",
            "mock",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a low-scoring example fails its gate
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line]


#: judge calls per case in the graders' default mode, batched: one per case
CALLS = {"contextual-precision": 1, "contextual-recall": 1, "contextual-precision-js": 1}


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("contextual-precision", EXPECTED_PRECISION),
        ("contextual-recall", EXPECTED_RECALL),
        pytest.param(
            "contextual-precision-js",
            EXPECTED_PRECISION,
            marks=pytest.mark.skipif(not HAS_NODE, reason="node is not installed"),
        ),
    ],
)
def test_evalrun_reproduces_the_expected_scores(
    name: str, expected: dict[str, float], tmp_path: Path
) -> None:
    results = run_eval(name, tmp_path / "run")
    scores = {r["id"]: r["score"] for r in results}
    assert scores.keys() == expected.keys()
    for case_id, score in expected.items():
        assert scores[case_id] == pytest.approx(score), case_id
    for result in results:
        grader = result["graders"][0]
        assert grader["status"] == ("passed" if expected[result["id"]] >= 0.5 else "failed")
        assert grader["proxy"]["calls"] == CALLS[name]


@pytest.mark.skipif(not HAS_NODE, reason="node is not installed")
def test_python_and_js_graders_agree_on_what_they_cannot_grade() -> None:
    no_retrieval = payload_for({"id": "n", "input": "Q?", "criteria": "A."})
    unreadable = context_payload(["a"])
    results = []
    for payload, judge in ((no_retrieval, marked_judge), (unreadable, lambda r: "Yes and no.")):
        with FakeProxy(judge, max_calls=10) as proxy:
            py = run_python_grader(PRECISION, payload, proxy.env())
            js = run_node(JS_PRECISION, payload, proxy.env())
        results.append((py, js))
    for py, js in results:
        assert (py.returncode, js.returncode) == (3, 3), (py.stderr, js.stderr)
        assert json.loads(py.stdout)["reason"] == json.loads(js.stdout)["reason"]
    assert "no retrieval context" in json.loads(results[0][0].stdout)["reason"]
    assert "no yes/no verdict" in json.loads(results[1][0].stdout)["reason"]
