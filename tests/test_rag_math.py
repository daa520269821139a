"""The RAG graders' arithmetic and retrieval-context handling (graders/_rag.py), no proxy."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader_sdk import Abstain, BudgetExceeded, GraderInput, ProxyInfo
from graders._rag import (
    aggregate,
    average_precision,
    budget_refused,
    check_budget,
    precision_at_k,
    recall,
    retrieval_groups,
)

R, N = True, False


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], 0.0),  # empty context
        ([N, N, N], 0.0),  # no relevant node
        ([R], 1.0),  # single relevant node
        ([N], 0.0),  # single irrelevant node
        ([R, N, N], 1.0),  # perfect-ranking
        ([R, N, R], (1 / 1 + 2 / 3) / 2),  # mixed-ranking: 0.8333...
        ([N, N, R], 1 / 3),  # relevant-node-last
        ([R, R, N], 1.0),  # all relevant first
        ([R, R, R], 1.0),  # ties: every node relevant
        ([N, R, N, R], (1 / 2 + 2 / 4) / 2),  # 0.5
        ([N, R, R, N, R], (1 / 2 + 2 / 3 + 3 / 5) / 3),
    ],
)
def test_average_precision_hand_computed(flags: list[bool], expected: float) -> None:
    assert average_precision(flags) == pytest.approx(expected)


def test_mixed_ranking_rounds_to_the_documented_figure() -> None:
    assert round(average_precision([R, N, R]), 3) == 0.833
    assert round(average_precision([N, N, R]), 3) == 0.333


def test_precision_at_k() -> None:
    assert precision_at_k([R, N, R, N]) == pytest.approx([1.0, 0.5, 2 / 3, 0.5])
    assert precision_at_k([]) == []


def _reference_ap(flags: list[bool]) -> float:
    """Average precision written another way: mean over relevant ranks of hits-so-far / rank."""
    ranks = [i + 1 for i, f in enumerate(flags) if f]
    if not ranks:
        return 0.0
    return math.fsum(sum(1 for r in ranks if r <= rank) / rank for rank in ranks) / len(ranks)


@given(st.lists(st.booleans(), max_size=40))
def test_average_precision_matches_an_independent_formula(flags: list[bool]) -> None:
    score = average_precision(flags)
    assert score == pytest.approx(_reference_ap(flags), abs=1e-12)
    assert 0.0 <= score <= 1.0


@given(st.lists(st.booleans(), min_size=1, max_size=30))
def test_score_is_one_exactly_when_relevant_nodes_lead(flags: list[bool]) -> None:
    relevant = sum(flags)
    leads = relevant > 0 and all(flags[:relevant])
    assert (average_precision(flags) == pytest.approx(1.0)) == leads


@given(st.lists(st.booleans(), min_size=2, max_size=30), st.data())
def test_promoting_a_relevant_node_never_lowers_the_score(
    flags: list[bool], data: st.DataObject
) -> None:
    swaps = [i for i in range(len(flags) - 1) if not flags[i] and flags[i + 1]]
    if not swaps:
        return
    i = data.draw(st.sampled_from(swaps))
    better = list(flags)
    better[i], better[i + 1] = True, False
    assert average_precision(better) > average_precision(flags)


@given(st.lists(st.booleans(), max_size=20), st.integers(0, 5))
def test_trailing_irrelevant_nodes_do_not_change_the_score(flags: list[bool], extra: int) -> None:
    assert average_precision(flags + [N] * extra) == pytest.approx(average_precision(flags))


def test_aggregate_weighted_and_mean() -> None:
    scored = [(1.0, 3), (0.5, 1)]
    assert aggregate(scored, "weighted") == pytest.approx((3 * 1.0 + 0.5) / 4)
    assert aggregate(scored, "mean") == pytest.approx(0.75)
    assert aggregate([(0.2, 0), (0.6, 2)], "mean") == pytest.approx(0.6)  # empty list skipped
    assert aggregate([], "weighted") == 0.0
    with pytest.raises(ValueError, match="aggregate"):
        aggregate(scored, "median")


def test_recall() -> None:
    assert recall([True, True]) == 1.0
    assert recall([True, False, False]) == pytest.approx(1 / 3)
    assert recall([False]) == 0.0
    with pytest.raises(ValueError):
        recall([])


def test_check_budget_abstains_with_a_clear_reason() -> None:
    fresh = ProxyInfo(target_name="judge", call_count=0, max_calls=3)
    check_budget(fresh, needed=3, work="judging 3 nodes")
    with pytest.raises(Abstain, match=r"needs 4, but max_calls is 3 with 3 left") as info:
        check_budget(fresh, needed=4, work="judging 4 nodes")
    assert info.value.details == {"needed": 4, "remaining": 3, "max_calls": 3}
    assert "to at least 4 " in str(info.value)


def test_check_budget_counts_a_panel_request_as_one_call_per_member() -> None:
    """A three-member judge panel: 5 calls left pay for one request, not five."""
    panel = ProxyInfo(target_name="jury", call_count=1, max_calls=6, calls_per_request=3)
    assert panel.remaining == 1
    with pytest.raises(Abstain, match=r"needs 4 at 3 calls each, but max_calls is 6 with 5 left"):
        check_budget(panel, needed=4, work="judging 4 nodes")
    with pytest.raises(Abstain, match=r"to at least 13 "):
        check_budget(panel, needed=4, work="judging 4 nodes")


def _two_calls(**config: object) -> GraderInput:
    return GraderInput.from_payload(
        {
            "input": [{"role": "user", "content": "q?"}],
            "expected_output": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "tool": "search",
                            "input": {"query": "a"},
                            "output": {"results": ["A1", "A2"]},
                        },
                        {"tool": "web", "input": "b", "output": ["B1"]},
                    ],
                },
                {
                    "role": "assistant",
                    "tool_calls": [{"tool": "search", "input": {"q": "c"}, "output": "C1"}],
                },
                {"role": "assistant", "content": "answer"},
            ],
            "config": config,
        }
    )


def test_retrieval_groups_flat_and_per_tool_call() -> None:
    flat = retrieval_groups(_two_calls())
    assert [(g.label, g.nodes) for g in flat] == [("retrieval_context", ["A1", "A2", "B1", "C1"])]
    per_call = retrieval_groups(_two_calls(), per_tool_call=True)
    assert [(g.label, g.query, g.tool, g.nodes) for g in per_call] == [
        ("call 1", "a", "search", ["A1", "A2"]),
        ("call 2", "b", "web", ["B1"]),
        ("call 3", "c", "search", ["C1"]),
    ]
    only_search = retrieval_groups(_two_calls(tools=["search"]))
    assert only_search[0].nodes == ["A1", "A2", "C1"]


def test_configured_retrieval_context_wins() -> None:
    inp = _two_calls(retrieval_context=["X", {"text": "Y"}])
    assert retrieval_groups(inp)[0].nodes == ["X", "Y"]
    nested = _two_calls(retrieval_context=[["X1", "X2"], ["Y1"]])
    assert retrieval_groups(nested)[0].nodes == ["X1", "X2", "Y1"]
    groups = retrieval_groups(nested, per_tool_call=True)
    assert [(g.label, g.nodes) for g in groups] == [("list 1", ["X1", "X2"]), ("list 2", ["Y1"])]


def test_the_builtin_graders_import_no_dataclasses_inspect_or_statistics() -> None:
    """A built-in grader process starts without ``dataclasses``/``inspect`` or ``statistics``
    (docs/performance.md): every stream-mode worker pays its imports, and a ``mode: process``
    grader pays them per case."""
    import subprocess
    import sys

    from evalrun.spec.kinds import KINDS

    modules = sorted(k.module for k in KINDS.values() if k.module)
    assert "graders.quality" in modules and "graders.contextual_precision" in modules
    probe = (
        f"import sys, {', '.join(modules)};"
        "print(sorted({'dataclasses', 'inspect', 'statistics'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_budget_refusal_reads_a_panels_cost_from_the_requested_units() -> None:
    """The proxy refuses 2 requests to a 3-member panel as 6 units, with 2 of 5 used."""
    refusal = BudgetExceeded(
        "over budget", status=429, body={"limit": 5, "used": 2, "requested": 6}
    )
    with pytest.raises(Abstain, match=r"needs 2 at 3 calls each, but max_calls is 5 with 3 left"):
        budget_refused(refusal, needed=2, batch=2, work="judging 2 nodes")
    with pytest.raises(Abstain, match=r"to at least 8 "):
        budget_refused(refusal, needed=2, batch=2, work="judging 2 nodes")
    bare = BudgetExceeded("budget exhausted", status=429, body={})
    with pytest.raises(Abstain, match=r"needs 2; the proxy refused: budget exhausted"):
        budget_refused(bare, needed=2, batch=2, work="judging 2 nodes")
