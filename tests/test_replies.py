"""grader_sdk.replies: the shared reply vectors (tests/data/reply_vectors.json, also run by the JS
SDK in tests/test_sdk_js.py) and the hand-labelled corpus read at the reader level."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from grader_sdk.replies import (
    Dimension,
    Reading,
    candidates,
    parse_json_reply,
    read_rating,
    read_scores,
    read_statements,
    read_verdict,
    reply_problem,
    scaled_number,
    strip_reasoning,
)

DATA = Path(__file__).resolve().parent / "data"
VECTORS = json.loads((DATA / "reply_vectors.json").read_text(encoding="utf-8"))["vectors"]
PATTERN_TITLES = {
    "PIF": "Pattern invocation fidelity",
    "POI": "Phase ordering integrity",
    "PC": "Phase completeness",
    "CA": "Constraint adherence",
    "SRC": "Self-reference correctness",
    "IR": "Interference resistance",
    "PR": "Pattern robustness",
    "R1": "Thought-to-action grounding",
    "R2": "Observation uptake",
    "R3": "Stopping discipline",
}
PROMPT_DIMENSIONS = ("clarity", "effectiveness", "structure", "specificity", "completeness")


def corpus_vectors() -> list[dict[str, Any]]:
    """Each corpus reply (tests/data/judge_replies.yaml) as a vector for the reader its grader
    uses, configured as the grader configures it (kept in step by test_corpus_dimensions)."""
    import yaml

    entries = yaml.safe_load((DATA / "judge_replies.yaml").read_text(encoding="utf-8"))["replies"]
    out = []
    for e in entries:
        v: dict[str, Any] = {
            "id": e["id"],
            "reply": e["reply"],
            "expect": e["expected"],
            "finish_reason": e.get("finish_reason"),
            "refusal": e.get("refusal"),
        }
        if e.get("roomy_reply") is not None:  # what the grader reads after asking with more room
            v.update(reply=e["roomy_reply"], finish_reason=None)
        grader = e["grader"]
        if grader == "contextual_precision":
            v.update(read="verdict", keys=["relevant", "is_relevant", "relevance"])
        elif grader == "contextual_recall" and e.get("call") == "statements":
            v.update(read="statements")
        elif grader == "contextual_recall":
            v.update(
                read="verdict", keys=["attributable", "is_attributable", "attributed", "supported"]
            )
        elif grader == "quality":
            v.update(read="rating", low=1, high=5, names=["coherence"])
        elif grader == "pattern":
            dims = [
                {"code": c, "aliases": [t], "low": 0, "high": 1 if c == "PR" else 5}
                for c, t in PATTERN_TITLES.items()
            ]
            v.update(read="scores", dimensions=dims)
        else:
            dims = [{"code": n, "aliases": [], "low": 0, "high": 10} for n in PROMPT_DIMENSIONS]
            v.update(read="scores", dimensions=dims)
        out.append(v)
    return out


def run_vector(v: dict[str, Any]) -> dict[str, Any]:
    """{"ok", "value"} of one vector, the same shape the JS runner prints."""
    kind = v["read"]
    if kind == "number":
        number, _ = scaled_number(v["value"], v["low"], v["high"])
        return {"ok": number is not None, "value": number}
    if kind == "problem":
        problem = reply_problem(v["reply"], v.get("finish_reason"), v.get("refusal"))
        return {"ok": True, "value": problem is not None}
    if kind == "json":
        return {"ok": True, "value": parse_json_reply(v["reply"])}
    problem = reply_problem(v["reply"], v.get("finish_reason"), v.get("refusal"))
    if problem:
        reading = Reading(problem=problem)
    elif kind == "verdict":
        reading = read_verdict(v["reply"], v["keys"])
    elif kind == "statements":
        reading = read_statements(v["reply"])
    elif kind == "rating":
        reading = read_rating(
            v["reply"], v["low"], v["high"], names=v["names"], integer=v.get("integer", True)
        )
    else:
        dims = [Dimension(d["code"], d["aliases"], d["low"], d["high"]) for d in v["dimensions"]]
        reading = read_scores(v["reply"], dims)
    return {"ok": reading.ok, "value": reading.value if reading.ok else None}


def same(got: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool) or want is None or got is None:
        return got is want or got == want and type(got) is type(want)
    if isinstance(want, (int, float)):
        return isinstance(got, (int, float)) and math.isclose(got, want, abs_tol=1e-9)
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(want)
            and all(same(got[k], want[k]) for k in want)
        )
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(same, got, want))
    return got == want


def meets(result: dict[str, Any], expect: Any) -> bool:
    if expect == "unreadable":
        return result["ok"] is False
    return result["ok"] is True and same(result["value"], expect)


@pytest.mark.parametrize(
    "vector", VECTORS, ids=lambda v: f"{v['read']}:{str(v.get('reply', v.get('value')))[:40]}"
)
def test_shared_vectors(vector: dict[str, Any]) -> None:
    result = run_vector(vector)
    assert meets(result, vector["expect"]), result


def test_corpus_at_the_reader_level() -> None:
    wrong = [
        (v["id"], v["expect"], r)
        for v in corpus_vectors()
        if not meets(r := run_vector(v), v["expect"])
    ]
    assert wrong == []


def test_corpus_dimensions_match_the_graders() -> None:
    """corpus_vectors() configures the readers as the graders do."""
    from graders import pattern, prompt_quality

    judge = pattern.load_judge()
    spec = judge.resolve("react")
    assert {d.code: d.title for d in [*judge.universal, *spec.dimensions]} == PATTERN_TITLES
    assert tuple(prompt_quality.load_judge().dimensions) == PROMPT_DIMENSIONS


def test_unreadable_readings_say_why_with_an_excerpt() -> None:
    reading = read_verdict("The passage mentions a bridge " + "and more " * 40, ["relevant"])
    assert not reading.ok
    explained = reading.explain()
    assert explained.startswith('no yes/no verdict found in the reply: "The passage mentions')
    assert len(explained) < 250 and explained.endswith('\u2026"')


def test_reasoning_blocks_are_stripped_whatever_their_case_or_closing() -> None:
    assert strip_reasoning("<Think>a</Think> b <thinking>c</thinking> d") == "b  d"
    assert strip_reasoning("answer <think>never closed") == "answer"
    assert strip_reasoning("streamed reasoning</think>final") == "final"


def test_candidates_are_in_order_and_nested_ones_are_not_rescanned() -> None:
    text = 'a {"x": {"y": 1}} b [1, 2] c {bad json} d {"z": 2}'
    assert candidates(text) == [{"x": {"y": 1}}, [1, 2], {"z": 2}]


def test_python_literals_are_read_without_being_run() -> None:
    assert parse_json_reply("{'a': (1, 2), 'b': None}") == {"a": (1, 2), "b": None}
    assert parse_json_reply("{'a': __import__('os').getcwd()}") is None


@pytest.mark.slow
def test_huge_or_deeply_nested_replies_do_not_blow_up() -> None:
    deep = "[" * 5000 + "]" * 5000
    assert isinstance(candidates(deep), list)
    assert not read_verdict("x" * 300_000, ["relevant"]).ok
