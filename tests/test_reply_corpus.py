"""The hand-labelled judge-reply corpus (tests/data/judge_replies.yaml) through the real built-in
graders as subprocesses, behind the real proxy, with an ``openai``-kind judge target talking to a
loopback fake of the Chat Completions API (bench/reply_corpus.py). Also what the graders send:
a strict JSON Schema response format, and more room after a cut-off reply."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import reply_corpus  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus_run() -> tuple[list[reply_corpus.Outcome], dict[str, list[dict]]]:
    entries = reply_corpus.load_corpus(reply_corpus.CORPUS)
    seen: dict[str, list[dict]] = {}
    outcomes = asyncio.run(reply_corpus.run_corpus(entries, ROOT, workers=4, seen=seen))
    return outcomes, seen


def test_the_corpus_is_large_and_covers_every_grader(corpus_run) -> None:
    outcomes, _ = corpus_run
    per_grader = Counter(o.entry.grader for o in outcomes)
    assert len(outcomes) >= 150
    assert set(per_grader) == set(reply_corpus.GRADERS)
    assert min(per_grader.values()) >= 25
    assert sum(o.entry.expected == "unreadable" for o in outcomes) >= 40


def test_no_reply_is_read_wrong_and_every_unreadable_one_abstains_with_a_reason(
    corpus_run,
) -> None:
    outcomes, _ = corpus_run
    print("\n" + reply_corpus.table(outcomes))
    bad = [
        (o.entry.id, o.outcome, o.got, o.reason[:120])
        for o in outcomes
        if o.outcome in ("wrong", "error")
    ]
    assert bad == []
    unreadable = [o for o in outcomes if o.entry.expected == "unreadable"]
    assert all(o.outcome == "abstained right" and o.reason for o in unreadable)


def test_readable_replies_left_unscored_stay_at_or_under_three_percent(corpus_run) -> None:
    outcomes, _ = corpus_run
    readable = [o for o in outcomes if o.entry.expected != "unreadable"]
    left = [o.entry.id for o in readable if o.outcome == "abstained wrong"]
    assert len(left) <= 0.03 * len(readable), left


def test_every_grader_asks_for_a_strict_json_schema(corpus_run) -> None:
    _, seen = corpus_run
    names = {
        "cp-strict-true": {"relevance_verdict"},
        "cr-strict-true": {"statements", "attribution_verdict"},
        "q-strict": {"quality_choice"},
        "p-strict-grouped": {"react_pattern_audit"},
        "pq-strict": {"prompt_review"},
    }
    for entry_id, expected in names.items():
        formats = [body.get("response_format") for body in seen[entry_id]]
        assert all(f and f["type"] == "json_schema" for f in formats), entry_id
        assert all(f["json_schema"]["strict"] is True for f in formats)
        assert {f["json_schema"]["name"] for f in formats} == expected
        for f in formats:
            schema = f["json_schema"]["schema"]
            assert schema["additionalProperties"] is False
            assert sorted(schema["required"]) == sorted(schema["properties"])
    audit = seen["p-strict-grouped"][0]["response_format"]["json_schema"]["schema"]
    assert set(audit["properties"]["pattern"]["properties"]) == {"R1", "R2", "R3"}


def test_cut_off_replies_are_asked_again_with_more_room_and_never_read(corpus_run) -> None:
    outcomes, seen = corpus_run
    by_id = {o.entry.id: o for o in outcomes}
    for entry_id in ("cp-cut-then-room", "q-cut-then-room", "p-cut-then-room", "pq-cut-then-room"):
        bodies = seen[entry_id]
        assert len(bodies) == 2, entry_id
        rooms = [reply_corpus.token_limit(body) for body in bodies]
        assert rooms[0] and rooms[1] == 4 * rooms[0]
        assert by_id[entry_id].outcome == "read right"
    for entry_id in ("cp-cut-mid-string", "q-truncated-after-choice", "pq-truncated"):
        rooms = [reply_corpus.token_limit(body) for body in seen[entry_id]]
        assert rooms[1:] == [4 * rooms[0]], entry_id
        assert by_id[entry_id].outcome == "abstained right"
        assert "cut off" in by_id[entry_id].reason
