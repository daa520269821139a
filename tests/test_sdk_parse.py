"""Reading judge replies (grader_sdk.replies) and the RAG helpers' verdicts, no proxy needed."""

from __future__ import annotations

import pytest

from grader_sdk import parse_json_reply
from grader_sdk._judge import (
    attribution_requests,
    chunk_requests,
    read_attribution,
    read_relevance,
    relevance_requests,
)
from grader_sdk.replies import as_bool, dedupe_statements, read_statements


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"relevant": true}', {"relevant": True}),
        ('```json\n{"relevant": false, "reason": "x"}\n```', {"relevant": False, "reason": "x"}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        (
            'Sure! Here is my verdict: {"relevant": true, "reason": "ok"} Hope this helps.',
            {"relevant": True, "reason": "ok"},
        ),
        ('Passage [1] is cited. {"relevant": "no"}', {"relevant": "no"}),
        ('["one", "two"]', ["one", "two"]),
        ('The statements: ["one", "two"] (done)', ["one", "two"]),
        (
            "{'relevant': True, 'reason': 'python style'}",
            {"relevant": True, "reason": "python style"},
        ),
        (
            '{"relevant": true, "reason": "trailing comma",}',
            {"relevant": True, "reason": "trailing comma"},
        ),
        ("\u201crelevant\u201d is what I'd say", None),
        ("no json at all", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_json_reply(reply: str | None, expected: object) -> None:
    assert parse_json_reply(reply) == expected


def test_parse_prefers_the_object_over_a_bracketed_citation() -> None:
    assert parse_json_reply('See [2]. Answer: {"attributable": true, "node": 2}') == {
        "attributable": True,
        "node": 2,
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        (1, True),
        (0, False),
        (0.7, None),
        ("yes", True),
        ("Yes.", True),
        ("YES, clearly", True),
        ("no", False),
        ("Not relevant", False),
        ("irrelevant", False),
        ("relevant", True),
        ("true", True),
        ("False", False),
        ("partially", None),
        ("", None),
        (None, None),
    ],
)
def test_as_bool(value: object, expected: bool | None) -> None:
    assert as_bool(value) is expected


def test_read_relevance_variants() -> None:
    verdict = read_relevance('{"relevant": "yes", "reason": " fits ", "confidence": "0.8"}')
    assert verdict is not None
    assert (verdict.ok, verdict.reason, verdict.confidence) == (True, "fits", 0.8)
    assert (
        read_relevance('{"is_relevant": false, "explanation": "off topic"}').reason == "off topic"
    )
    assert read_relevance('{"Relevant": 0, "confidence": 85}').confidence == 0.85
    assert read_relevance('{"verdict": "no"}').ok is False
    assert read_relevance("No. The passage is about grass.").ok is False
    assert read_relevance("Yes").ok is True
    assert read_relevance('{"score": 0.4}').ok is None
    assert read_relevance("I cannot decide whether this passage helps").ok is None
    assert read_relevance("No idea, sorry").ok is None
    assert read_relevance("Not relevant.").ok is False
    assert read_relevance('[{"relevant": true}]').ok is True


def test_read_attribution_node_is_checked_against_the_context() -> None:
    ok = read_attribution('{"attributable": true, "node": "Node 2", "reason": "r"}', 3)
    assert (ok.ok, ok.node) == (True, 2)
    assert read_attribution('{"attributable": true, "node": 7}', 3).node is None
    assert read_attribution('{"attributable": true, "node": 2.0}', 3).node == 2
    assert read_attribution('{"attributable": false, "node": 1}', 3).node is None
    assert read_attribution('{"supported": "yes", "node": [3]}', 3).node == 3
    unreadable = read_attribution('{"node": 1}', 3)
    assert unreadable.ok is None and "no yes/no verdict in the reply's JSON" in unreadable.reason


def test_read_statements_shapes() -> None:
    def read(reply: str) -> list[str] | None:
        reading = read_statements(reply)
        return reading.value if reading.ok else None

    assert read('{"statements": ["A is B.", "C is D."]}') == ["A is B.", "C is D."]
    assert read('["A.", "a.", " B "]') == ["A.", "B"]
    assert read('{"claims": [{"statement": "X."}, {"text": "Y."}]}') == ["X.", "Y."]
    assert read("- A is B.\n- C is D.") == ["A is B.", "C is D."]
    assert read("1. A\n2) B") == ["A", "B"]
    assert read("Here are some facts but no list") is None
    assert read('{"statements": [1, 2]}') is None
    assert read('{"statements": []}') == []


def test_dedupe_ignores_case_space_and_final_period() -> None:
    assert dedupe_statements(["Paris is big.", "paris  is big", "Lyon"]) == [
        "Paris is big.",
        "Lyon",
    ]


def test_relevance_requests_carry_prompt_and_typed_task() -> None:
    requests = relevance_requests("Q?", ["p1", "p2"], "A.", target="judge")
    assert len(requests) == 2
    first = requests[0]
    assert first["task"] == {
        "kind": "relevance",
        "query": "Q?",
        "passage": "p1",
        "siblings": ["p1", "p2"],
    }
    # the shared part (instructions, question, expected answer) is one system message, the
    # same for every passage; only the passage varies, in the user message
    assert first["question"].startswith("<passage>\np1\n</passage>")
    assert "p2" not in first["question"] and "Q?" not in first["question"]
    assert first["systemPrompt"].endswith(
        "<question>\nQ?\n</question>\n\n<expected_answer>\nA.\n</expected_answer>"
    )
    assert {r["systemPrompt"] for r in requests} == {first["systemPrompt"]}
    assert first["temperature"] == 0.0 and first["target"] == "judge"


def test_attribution_requests_share_the_passages_in_the_system_message() -> None:
    requests = attribution_requests(["S1.", "S2."], ["c1", "c2"])
    assert {r["systemPrompt"] for r in requests} == {requests[0]["systemPrompt"]}
    assert requests[0]["systemPrompt"].endswith("<passages>\n[1] c1\n[2] c2\n</passages>")
    assert [r["question"].split("\n")[1] for r in requests] == ["S1.", "S2."]
    assert "c1" not in requests[0]["question"]


def test_chunking_keeps_order_and_splits_only_large_batches() -> None:
    small = [{"question": str(i)} for i in range(5)]
    assert chunk_requests(small) == [small]
    big = [{"question": "x" * 400} for _ in range(10)]
    chunks = chunk_requests(big, limit=1000)
    assert [len(c) for c in chunks] == [2, 2, 2, 2, 2]
    assert [r for c in chunks for r in c] == big
    assert chunk_requests([{"question": "y" * 5000}], limit=100) == [[{"question": "y" * 5000}]]
